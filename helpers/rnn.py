"""The character RNN of notebook 10, Going further: a GRU (Cho et al., 2014) that reads the text
one character at a time, trained by helpers.lm.train_lm exactly as the Transformer is, to compare
the two on the same task.

Every definition below is written in notebook 10 first, in a cell that starts with
``# saved in helpers/rnn.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

from collections import namedtuple
from dataclasses import asdict, dataclass

import numpy as np

from helpers.modern import sigmoid  # notebook 09's
from helpers.module import Module, clear_caches, collect_grads
from helpers.training import embedding_backward, linear_backward
from helpers.validation import (
    check_float_dtype,
    check_ids,
    check_positive_int,
    check_rng,
    check_shape,
)

# ── 10 · Going further: a character RNN ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class CharRNNConfig:
    """The sizes of a CharRNN. max_len is the longest window helpers.lm's loops may feed it
    (train_lm and its estimates check their context against it); the GRU itself reads any T."""

    vocab: int
    d_embed: int = 128
    d_hidden: int = 448
    max_len: int = 64
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("vocab", "d_embed", "d_hidden", "max_len"):
            check_positive_int(getattr(self, name), name)
        object.__setattr__(self, "dtype", check_float_dtype(self.dtype).name)


GRUCache = namedtuple("GRUCache", "tokens x h z r c")  # what backward reads


class CharRNN(Module):
    """A char-RNN-style model (Karpathy, 2015) with a GRU: token vectors (embed), one GRU layer
    unrolled over time, and a linear map from each state to the logits of the next character.
    Cho et al.'s GRU (the reset gate r applied before U_h; PyTorch's nn.GRU applies it after):

        z = sigmoid(x W_z + h U_z + b_z)          update gate: how much of h to keep
        r = sigmoid(x W_r + h U_r + b_r)          reset gate: how much of h the candidate reads
        c = tanh(x W_h + (r * h) U_h + b_h)       the candidate state
        h = z * h + (1 - z) * c                   the new state

    The state starts at zero (or at h0) and position t has read tokens 0..t only.
    """

    param_names = ("embed", "W_z", "U_z", "b_z", "W_r", "U_r", "b_r", "W_h", "U_h", "b_h",
                   "W_out", "b_out")

    def __init__(self, vocab, rng, **options):
        self.config = c = CharRNNConfig(vocab, **options)
        rng = check_rng(rng)
        E, H = c.d_embed, c.d_hidden

        def normal(shape, fan_in):  # unit-variance inputs give unit-variance outputs
            return rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape).astype(c.dtype)

        self.embed = normal((c.vocab, E), 1)  # (vocab, d_embed)
        for gate in "zrh":
            setattr(self, f"W_{gate}", normal((E, H), E))  # (d_embed, d_hidden): from the input
            setattr(self, f"U_{gate}", normal((H, H), H))  # (d_hidden, d_hidden): from the state
            setattr(self, f"b_{gate}", np.zeros(H, dtype=c.dtype))
        self.W_out = normal((H, c.vocab), H)  # (d_hidden, vocab)
        self.b_out = np.zeros(c.vocab, dtype=c.dtype)

    @classmethod
    def from_config(cls, config, rng):
        """CharRNN(**fields of `config`), for a CharRNNConfig."""
        return cls(rng=rng, **asdict(config))

    def step(self, a_z, a_r, a_h, h):
        """One time step: the input's part of each gate at t (B, d_hidden) and the state h
        (B, d_hidden) -> (the new state, z, r, c)."""
        z = sigmoid(a_z + h @ self.U_z)
        r = sigmoid(a_r + h @ self.U_r)
        c = np.tanh(a_h + (r * h) @ self.U_h)
        return z * h + (1 - z) * c, z, r, c

    def forward(self, tokens, h0=None):
        """tokens (B, T) ids -> logits (B, T, vocab); position t predicts token t + 1. h0 (B,
        d_hidden): the state to start from (None: zeros); the last state is cache.h[:, -1]."""
        tokens = check_ids(tokens, "tokens", self.config.vocab, ndim=2)
        B, H = tokens.shape[0], self.config.d_hidden
        h = np.zeros((B, H), self.embed.dtype) if h0 is None else check_shape(h0, "h0", (B, H))
        x = self.embed[tokens]  # (B, T, d_embed)
        a_z = x @ self.W_z + self.b_z  # (B, T, d_hidden): the input's part of each gate, for
        a_r = x @ self.W_r + self.b_r  # every step at once (it does not depend on the state)
        a_h = x @ self.W_h + self.b_h
        hs, zs, rs, cs = [h], [], [], []
        for t in range(tokens.shape[1]):  # the recurrence: step t needs the state of step t - 1
            h, z, r, c = self.step(a_z[:, t], a_r[:, t], a_h[:, t], h)
            hs.append(h), zs.append(z), rs.append(r), cs.append(c)
        h, z, r, c = (np.stack(v, axis=1) for v in (hs, zs, rs, cs))  # h (B, T + 1, d_hidden)
        self.cache = GRUCache(tokens, x, h, z, r, c)  # h[:, t] is the state step t read
        return h[:, 1:] @ self.W_out + self.b_out  # (B, T, vocab)

    def backward(self, d_logits):
        """Backpropagation through time: (None, grads) for the loss gradient of the logits
        (B, T, vocab); token ids have no gradient. Each weight's gradient sums its T uses."""
        tokens, x, h, z, r, c = self.saved()
        d_logits = check_shape(d_logits, "d_logits", (*tokens.shape, self.config.vocab))
        grads = {}
        d_out, grads["W_out"], grads["b_out"] = linear_backward(h[:, 1:], self.W_out, d_logits)
        d_az, d_ar, d_ah = np.empty_like(z), np.empty_like(z), np.empty_like(z)  # (B, T, d_hidden)
        d_h = np.zeros_like(h[:, 0])  # (B, d_hidden): the gradient of the state from later steps
        for t in reversed(range(tokens.shape[1])):  # back through time, last step first
            d_h = d_h + d_out[:, t]  # the state after step t feeds the output and step t + 1
            d_ah[:, t] = d_h * (1 - z[:, t]) * (1 - c[:, t] ** 2)  # through c = tanh(a_h)
            d_az[:, t] = d_h * (h[:, t] - c[:, t]) * z[:, t] * (1 - z[:, t])
            d_rh = d_ah[:, t] @ self.U_h.T  # (B, d_hidden): the gradient of r * h
            d_ar[:, t] = d_rh * h[:, t] * r[:, t] * (1 - r[:, t])
            d_h = d_h * z[:, t] + d_rh * r[:, t] + d_az[:, t] @ self.U_z.T + d_ar[:, t] @ self.U_r.T

        def rows(a):  # (B, T, n) -> (B * T, n): one row per step, for the weights' gradients
            return a.reshape(-1, a.shape[-1])
        d_x = 0
        for gate, d_a, state in (("z", d_az, h[:, :-1]), ("r", d_ar, h[:, :-1]),
                                 ("h", d_ah, r * h[:, :-1])):
            d_x_gate, grads[f"W_{gate}"], grads[f"b_{gate}"] = linear_backward(
                x, getattr(self, f"W_{gate}"), d_a)
            grads[f"U_{gate}"] = rows(state).T @ rows(d_a)  # (d_hidden, d_hidden)
            d_x = d_x + d_x_gate  # (B, T, d_embed)
        grads["embed"] = embedding_backward(self.embed, tokens, d_x, 1.0)
        return None, collect_grads(self, grads)


def rnn_write(model, prompt_ids, n, *, pick=None):
    """Continue prompt_ids (B, T0) by n tokens, one at a time: the prompt is read once, then
    each new token is a forward of one step from the last state (pick(logits (B, vocab)) -> ids
    (B,); None: the most likely). The state carries the whole text read so far."""
    tokens = check_ids(prompt_ids, "prompt_ids", model.config.vocab, ndim=2)
    n = check_positive_int(n, "n")
    if pick is not None and not callable(pick):
        raise ValueError(f"pick must be a function of the logits or None, got "
                         f"{type(pick).__name__}")
    logits = model.forward(tokens)  # (B, T0, vocab)
    for _ in range(n):
        new = logits[:, -1].argmax(axis=-1) if pick is None else pick(logits[:, -1])  # (B,)
        tokens = np.concatenate([tokens, new[:, None]], axis=1)
        logits = model.forward(new[:, None], h0=model.cache.h[:, -1])  # (B, 1, vocab)
    clear_caches(model)  # no backward follows
    return tokens
