"""Generation: the key/value cache and greedy decoding (notebook 06).

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/decoding.py``; ``tests/test_sync.py`` proves the two copies are identical.
Decoding runs the model's own forward code (Transformer.decode, MultiHeadAttention.forward with
a KVCache); nothing here re-implements a block.
"""

from dataclasses import dataclass

import numpy as np

from helpers.module import clear_caches
from helpers.transformer import Dropout, Transformer
from helpers.validation import (
    check_flag,
    check_positive_int,
    check_token_id,
    check_token_ids,
)

# ── 06 · The decoder and the whole Transformer ───────────────────────────────────────────────────


@dataclass(eq=False)
class KVCache:
    """The keys and values one attention layer has computed so far, kept between decoding steps.

    Self-attention (fixed=False): every call appends the new positions' keys and values, and the
    new queries attend to all of them; `tokens` are the ids they were computed from (see start).
    Cross-attention (fixed=True): the keys and values of the memory are computed on the first
    call and reused, since the memory never changes; `source` is that memory, and another one
    raises a ValueError. K, V: (B, h, t, d_k), None until the first call.
    """

    fixed: bool = False
    K: np.ndarray | None = None
    V: np.ndarray | None = None
    source: np.ndarray | None = None
    tokens: np.ndarray | None = None

    def start(self, tokens):
        """The first position of `tokens` (B, T), the whole prefix so far, that is not cached:
        the model runs only the positions from there. A prefix that does not continue the tokens
        cached (another prompt of the same shape would read the old one's keys), or that brings
        no new position, raises a ValueError; then the cache holds all of `tokens`."""
        t = self.length
        if t and (self.tokens is None or tokens.shape[0] != self.tokens.shape[0]
                  or tokens.shape[1] < t or not np.array_equal(tokens[:, :t], self.tokens[:, :t])):
            raise ValueError(f"tokens {tokens.shape} do not continue the {t} positions this "
                             "KVCache holds: start fresh caches for another prompt")
        if tokens.shape[1] <= t:
            raise ValueError(f"tokens has T={tokens.shape[1]} positions, all of them cached "
                             "already: pass the prefix with its new positions")
        self.tokens = np.array(tokens)  # a copy: the caller may change its array in place
        return t

    def holds(self, memory):
        """True when MultiHeadAttention can skip computing keys and values: fixed and filled,
        from this very `memory`."""
        if not self.fixed or self.K is None:
            return False
        if memory is not self.source:
            raise ValueError("this cross-attention KVCache holds the keys and values of another "
                             "memory: start fresh caches (kv_caches) for a new source")
        return True

    @property
    def length(self):
        """The number of positions cached so far."""
        return 0 if self.K is None else self.K.shape[-2]

    def add(self, K, V, source):
        """Append (or, when fixed, store) this call's keys and values, computed from `source`;
        return all of them."""
        if self.K is not None:
            if K.shape[:-2] != self.K.shape[:-2] or K.shape[-1] != self.K.shape[-1]:
                raise ValueError(f"new keys of shape {K.shape} do not continue the cached "
                                 f"{self.K.shape}: the (B, h, ., d_k) axes must agree")
            K = np.concatenate([self.K, K], axis=-2)  # (B, h, t, d_k)
            V = np.concatenate([self.V, V], axis=-2)
        self.K, self.V, self.source = K, V, source
        return K, V


def kv_caches(decoder):
    """A fresh KVCache for each attention of each block of a decoder Stack."""
    return [{"self_attn": KVCache(), "cross_attn": KVCache(fixed=True)} for _ in decoder.layers]


def greedy_decode(model, src, bos_id, eos_id, max_steps, *, use_cache=True):
    """Generate with the most likely token (never `pad_id`) at every step, one at a time.

    Returns (tokens (B, 1 + steps) starting with BOS, logits (B, steps, tgt_vocab)); the logits
    are those of model.forward(src, tokens[:, :-1]), masks included. Without the cache each step
    re-runs the decoder on the whole prefix; with it each step runs only the new position
    through the blocks (the same code, Transformer.decode, given KV caches). A sequence that has
    produced EOS is continued with `pad_id` (with EOS if pad_id is None); generation stops once
    every sequence has produced EOS or after max_steps. Decoding is evaluation: the model's
    dropout must be off (set_training(model, None)); no backward follows, so every cache the
    forward passes kept is cleared at the end (also when a step raises).
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a Transformer (notebook 06), got {type(model).__name__}")
    pad, use_cache = model.pad_id, check_flag(use_cache, "use_cache")
    bos_id = check_token_id(bos_id, "bos_id", model.tgt_vocab)
    eos_id = check_token_id(eos_id, "eos_id", model.tgt_vocab)
    if pad is not None and pad in (bos_id, eos_id):
        raise ValueError(f"bos_id={bos_id} and eos_id={eos_id} must differ from the padding id "
                         f"pad_id={pad}: a padded first position is masked, and padding is never "
                         "generated")
    max_steps = check_positive_int(max_steps, "max_steps")
    if max_steps > len(model.pe):
        raise ValueError(f"max_steps={max_steps} needs more decoder positions than the positional "
                         f"table has (max_len={len(model.pe)})")
    if any(isinstance(m, Dropout) and m.rng is not None for m in model.modules()):
        raise ValueError("greedy_decode runs in evaluation mode: call set_training(model, None)")
    try:  # no backward follows a decoding: its caches are cleared, even if a step fails
        memory, src_mask = model.encode(src)
        tokens = np.full((memory.shape[0], 1), bos_id)  # (B, 1)
        caches = kv_caches(model.decoder) if use_cache else None
        all_logits, done = [], np.zeros(len(tokens), dtype=bool)
        for _ in range(max_steps):
            x = model.decode(tokens, memory, src_mask, caches)  # (B, T or 1, d_model)
            step_logits = model.logits(x)[:, -1]  # (B, tgt_vocab): the newest position's
            choice = step_logits.copy()
            if pad is not None:
                choice[:, pad] = -np.inf  # padding is never a prediction
            next_token = np.where(done, eos_id if pad is None else pad, choice.argmax(axis=-1))
            tokens = np.concatenate([tokens, next_token[:, None]], axis=1)
            all_logits.append(step_logits)
            done |= next_token == eos_id
            if done.all():
                break
    finally:
        clear_caches(model)
    return tokens, np.stack(all_logits, axis=1)


# ── 09 · The Transformer today ───────────────────────────────────────────────────────────────────


def generate(model, prompt, steps, *, pick=None, stop_id=None, use_cache=True):
    """Continue every prompt (B, T0) of a decoder-only model (notebook 09's DecoderOnly) by up to
    `steps` tokens, one at a time.

    pick(logits (B, vocab)) -> ids (B,) chooses each next token; None takes the most likely
    (greedy; notebook 10 samples). With the cache (one KVCache per block) each step runs only
    the new position through the blocks; without it, the whole sequence again. A sequence that
    has produced stop_id is continued with stop_id; generation ends once every sequence has
    (or after `steps`). Returns (tokens (B, T0 + n), logits (B, n, vocab)), the logits those of
    model.forward(tokens[:, :-1]) at the n new positions. Dropout must be off; every cache the
    forward passes kept is cleared at the end (also when a step raises).
    """
    if not all(hasattr(model, name) for name in ("decode", "logits", "decoder", "config")) \
            or not hasattr(model.config, "vocab"):  # a Transformer's config has src_vocab
        raise ValueError("model must be a decoder-only model (notebook 09's DecoderOnly), got "
                         f"{type(model).__name__}")
    vocab, max_len = model.config.vocab, model.config.max_len
    prompt = check_token_ids(prompt, "prompt", vocab, max_len)
    steps = check_positive_int(steps, "steps")
    if prompt.shape[1] + steps - 1 > max_len:  # the last new token is not fed back
        raise ValueError(f"steps={steps} after a prompt of T0={prompt.shape[1]} tokens needs "
                         f"{prompt.shape[1] + steps - 1} positions, more than max_len={max_len}")
    if pick is not None and not callable(pick):
        raise ValueError(f"pick must be a function of the logits or None, got "
                         f"{type(pick).__name__}")
    if stop_id is not None:
        stop_id = check_token_id(stop_id, "stop_id", vocab)
    use_cache = check_flag(use_cache, "use_cache")
    if any(isinstance(m, Dropout) and m.rng is not None for m in model.modules()):
        raise ValueError("generate runs in evaluation mode: call set_training(model, None)")
    try:  # no backward follows a generation: its caches are cleared, even if a step fails
        caches = model.kv_caches() if use_cache else None  # one per block
        tokens, all_logits = prompt, []
        done = np.zeros(len(prompt), dtype=bool)
        for _ in range(steps):
            step_logits = model.logits(model.decode(tokens, caches)[:, -1])  # (B, vocab)
            choice = step_logits.argmax(axis=-1) if pick is None else np.asarray(pick(step_logits))
            if choice.shape != (len(tokens),) or not np.issubdtype(choice.dtype, np.integer) \
                    or choice.min() < 0 or choice.max() >= vocab:
                raise ValueError(f"pick must return one token id in [0, {vocab}) per sequence, "
                                 f"shape ({len(tokens)},), got {choice.dtype} {choice!r:.60}")
            if stop_id is not None:
                choice = np.where(done, stop_id, choice)  # (B,): a finished sequence stays so
                done |= choice == stop_id
            tokens = np.concatenate([tokens, choice[:, None]], axis=1)
            all_logits.append(step_logits)
            if done.all():
                break
    finally:
        clear_caches(model)
    return tokens, np.stack(all_logits, axis=1)
