"""Training the Transformer in NumPy: backward passes, loss, optimiser, schedule, training loop.

Every definition below is written in notebook 07 first, in a cell that starts with
``# saved in helpers/training.py``; ``tests/test_sync.py`` proves the two copies are identical.

The module protocol (README, "Conventions"): forward keeps in ``module.cache`` a named tuple of
what backward needs; ``module.backward(d_out)`` returns (the gradients of forward's inputs,
{parameter name: gradient} keyed exactly like ``module.parameters()``). Importing this module
attaches a ``backward`` to every module of helpers/transformer.py (add_to_class); a backward with
no forward before it raises a ValueError.
"""

import numpy as np

from helpers.module import add_to_class, collect_grads
from helpers.transformer import (
    DecoderBlock,
    Dropout,
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    Stack,
    Transformer,
    merge_heads,
    set_training,
    split_heads,
)
from helpers.validation import (
    as_real_array,
    check_ids,
    check_int,
    check_number,
    check_rng,
    check_shape,
)

# ── 07 · Training ─────────────────────────────────────────────────────────────────────────────


def gradient_check(f, params, grads, *, eps=1e-6, max_entries=None, rng=None):
    """Compare analytic gradients with central differences (f(x + eps) - f(x - eps)) / 2 eps.

    f() -> scalar loss, computed from the arrays in `params` (a dict of float64 arrays that are
    perturbed in place and restored); grads: the analytic gradients, same keys and shapes.
    max_entries: check at most this many random entries per array (needs `rng`).
    Returns (overall, per_name): per_name[name] is the relative error ||g - n|| / (||g|| + ||n||)
    of that array's checked entries (0 if both are zero); overall combines the arrays as
    sqrt(sum of ||g - n||^2 / sum of (||g|| + ||n||)^2), one number dominated by the arrays
    with the largest gradients, so it can hide a small wrong array: check per_name too.
    """
    eps = check_number(eps, "eps", "(0, inf)")
    if max_entries is not None:
        max_entries, rng = check_int(max_entries, "max_entries", "[1, inf)"), check_rng(rng)
    if not isinstance(params, dict) or not isinstance(grads, dict) or set(grads) != set(params):
        raise ValueError("params and grads must be dicts with the same names")
    per_name, diffs, norms = {}, 0.0, 0.0
    for name, p in params.items():
        if p.dtype != np.float64:
            raise ValueError(f"{name}: gradient checks need float64, got {p.dtype}")
        flat = p.reshape(-1)  # a view: writing into it changes p
        idx = np.arange(flat.size)
        if max_entries is not None and flat.size > max_entries:
            idx = np.sort(rng.choice(flat.size, max_entries, replace=False))
        numeric = np.empty(len(idx))
        for k, i in enumerate(idx):
            old = flat[i]
            flat[i] = old + eps
            up = f()
            flat[i] = old - eps
            down = f()
            flat[i] = old
            numeric[k] = (up - down) / (2 * eps)
        analytic = np.asarray(grads[name]).reshape(-1)[idx]
        diff = np.linalg.norm(analytic - numeric)
        norm = np.linalg.norm(analytic) + np.linalg.norm(numeric)
        per_name[name] = diff / norm if norm > 0 else 0.0
        diffs, norms = diffs + diff**2, norms + norm**2
    return float(np.sqrt(diffs / norms)) if norms > 0 else 0.0, per_name


def softmax_backward(p, d_p):
    """Gradient through p = softmax(x) along the last axis: d_x = p * (d_p - sum(d_p * p)).

    A blocked key has p = 0 and so gets d_x = 0: masks need no special case.
    """
    d_p = check_shape(d_p, "d_p", np.shape(p))
    return p * (d_p - np.sum(d_p * p, axis=-1, keepdims=True))


def attention_backward(Q, K, V, weights, d_out):
    """Gradients of softmax(Q K^T / sqrt(d_k)) V with respect to Q, K and V.

    Q, K, V and the weights from the forward pass (with the same leading axes); d_out
    (..., T_q, d_v). Returns (d_Q, d_K, d_V).
    """
    d_out = check_shape(d_out, "d_out", (*weights.shape[:-1], V.shape[-1]))
    scale = np.sqrt(Q.shape[-1], dtype=Q.dtype)
    d_weights = d_out @ V.swapaxes(-1, -2)  # (..., T_q, T_k)
    d_V = weights.swapaxes(-1, -2) @ d_out  # (..., T_k, d_v)
    d_scores = softmax_backward(weights, d_weights) / scale  # (..., T_q, T_k)
    d_Q = d_scores @ K  # (..., T_q, d_k)
    d_K = d_scores.swapaxes(-1, -2) @ Q  # (..., T_k, d_k)
    return d_Q, d_K, d_V


def sum_rows(a):
    """The sum of a (..., d) over every axis but the last, (d,): a.reshape(-1, d).sum(axis=0),
    computed as a matrix product with a row of ones, which is faster in NumPy (its sum down a
    tall, narrow array is slow; BLAS, the optimised matrix library NumPy calls, is not)."""
    a = as_real_array(a, "a")
    if a.ndim < 1:
        raise ValueError(f"a must have shape (..., d), got {a.shape}")
    rows = a.reshape(-1, a.shape[-1])  # (N, d): one row per position
    return np.ones(len(rows), dtype=a.dtype) @ rows  # (d,)


def linear_backward(x, W, d_y):
    """y = x @ W + b with x (..., d_in): returns (d_x, d_W, d_b), summed over the leading axes."""
    d_y = check_shape(d_y, "d_y", (*x.shape[:-1], W.shape[-1]))
    x_rows = x.reshape(-1, x.shape[-1])  # (N, d_in): one row per position, so that every
    d_rows = d_y.reshape(-1, d_y.shape[-1])  # (N, d_out) product is 2-d (3-d @ W.T is slower)
    d_x = (d_rows @ W.T).reshape(*d_y.shape[:-1], W.shape[0])  # (..., d_in)
    return d_x, x_rows.T @ d_rows, sum_rows(d_rows)  # d_x, d_W (d_in, d_out), d_b (d_out,)


@add_to_class(MultiHeadAttention, "backward")
def mha_backward(self, d_out):
    """Backward of MultiHeadAttention.forward: ((d_query, d_key, d_value), grads). For
    self-attention (query, key and value are one array) the caller adds the three."""
    c = self.saved()  # the AttentionCache of the last forward
    d_out = check_shape(d_out, "d_out", c.heads.shape)  # (..., T_q, d_model), forward's output
    grads = {}
    d_heads, grads["W_o"], grads["b_o"] = linear_backward(c.heads, self.W_o, d_out)
    d_heads = split_heads(d_heads, self.n_heads)  # (..., h, T_q, d_k)
    d_Q, d_K, d_V = attention_backward(c.Q, c.K, c.V, c.weights, d_heads)
    d_query, grads["W_q"], grads["b_q"] = linear_backward(c.query, self.W_q, merge_heads(d_Q))
    d_key, grads["W_k"], grads["b_k"] = linear_backward(c.key, self.W_k, merge_heads(d_K))
    d_value, grads["W_v"], grads["b_v"] = linear_backward(c.value, self.W_v, merge_heads(d_V))
    return (d_query, d_key, d_value), collect_grads(self, grads)


@add_to_class(LayerNorm, "backward")
def layer_norm_backward(self, d_out):
    """Backward of LayerNorm.forward: returns (d_x, {"gamma": ..., "beta": ...}).

    With x_hat = (x - mean) / std: d_x = (g - mean(g) - x_hat * mean(g * x_hat)) / std, where
    g = d_out * gamma; the two means remove what the normalisation itself takes away.
    """
    x_hat, std = self.saved()
    d_out = check_shape(d_out, "d_out", x_hat.shape)
    grads = {"gamma": sum_rows(d_out * x_hat), "beta": sum_rows(d_out)}
    g = d_out * self.gamma  # (..., d_model)
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    return (g - mean_g - x_hat * mean_gx) / std, grads


@add_to_class(FeedForward, "backward")
def ffn_backward(self, d_out):
    """Backward of FeedForward.forward: returns (d_x, grads). ReLU passes gradient where > 0."""
    x, hidden = self.saved()
    d_out = check_shape(d_out, "d_out", x.shape)
    grads = {}
    d_hidden, grads["W_2"], grads["b_2"] = linear_backward(hidden, self.W_2, d_out)
    d_hidden = d_hidden * (hidden > 0)  # (..., T, d_ff)
    d_x, grads["W_1"], grads["b_1"] = linear_backward(x, self.W_1, d_hidden)
    return d_x, collect_grads(self, grads)


@add_to_class(Dropout, "backward")
def dropout_backward(self, d_out):
    """Backward of Dropout.forward: (d_x, {}), the same kept entries and the same 1 / (1 - p)
    scale; the identity when that forward dropped nothing (evaluation mode, or p = 0)."""
    keep = self.saved().keep
    if keep is None:
        return d_out, {}
    d_out = check_shape(d_out, "d_out", keep.shape)
    return d_out * keep / (1.0 - self.p), {}


def residual_backward(d_out, sublayer_backward, norm, dropout, norm_first):
    """Backward of residual() (notebook 05), the wiring of every block: returns (d_x, the
    norm's gradients).

    sublayer_backward(d) takes the gradient of the sub-layer's output and returns the gradients
    that reach the sub-layer's input h, as a tuple: self-attention reads h three times (as
    query, key and value) and the three add up. A residual connection x + F(x) passes its
    gradient to x twice, unchanged and through F; the two add up too.
    """
    if norm_first:  # out = x + D(F(h)), h = LN(x)
        d_h = sum(sublayer_backward(dropout.backward(d_out)[0]))  # all that reaches h
        d_n, g_norm = norm.backward(d_h)
        return d_out + d_n, g_norm
    d_s, g_norm = norm.backward(d_out)  # out = LN(s), s = x + D(F(x))
    return sum((d_s, *sublayer_backward(dropout.backward(d_s)[0]))), g_norm


@add_to_class(EncoderBlock, "backward")
def encoder_block_backward(self, d_out):
    """Backward of EncoderBlock.forward: (d_x, grads), the two sub-layers in reverse order.

    Each sub-layer is handed to residual_backward as a small function: it runs the sub-layer's
    backward, records that module's parameter gradients in `grads`, and returns the gradients
    that reach the sub-layer's input.
    """
    self.saved()  # a clear error if no forward ran
    grads, norm_first = {}, self.norm_first

    def back_ffn(d):
        d_h, grads["ffn"] = self.ffn.backward(d)
        return (d_h,)

    def back_self_attn(d):
        d_qkv, grads["self_attn"] = self.self_attn.backward(d)
        return d_qkv  # query, key and value were all h

    d_x, grads["norm2"] = residual_backward(d_out, back_ffn, self.norm2, self.dropout2, norm_first)
    d_x, grads["norm1"] = residual_backward(d_x, back_self_attn, self.norm1, self.dropout1,
                                            norm_first)
    return d_x, collect_grads(self, grads)


@add_to_class(DecoderBlock, "backward")
def decoder_block_backward(self, d_out):
    """Backward of DecoderBlock.forward: ((d_x, d_memory), grads). The memory (the encoder's
    output) receives its gradient through cross-attention's keys and values."""
    self.saved()  # a clear error if no forward ran
    grads, norm_first, d_memory = {}, self.norm_first, None

    def back_ffn(d):
        d_h, grads["ffn"] = self.ffn.backward(d)
        return (d_h,)

    def back_cross_attn(d):
        nonlocal d_memory  # the variable of backward itself, not a new local one
        (d_q, d_k, d_v), grads["cross_attn"] = self.cross_attn.backward(d)
        d_memory = d_k + d_v  # key and value were the memory
        return (d_q,)  # only the query was h

    def back_self_attn(d):
        d_qkv, grads["self_attn"] = self.self_attn.backward(d)
        return d_qkv

    d_x, grads["norm3"] = residual_backward(d_out, back_ffn, self.norm3, self.dropout3, norm_first)
    d_x, grads["norm2"] = residual_backward(d_x, back_cross_attn, self.norm2, self.dropout2,
                                            norm_first)
    d_x, grads["norm1"] = residual_backward(d_x, back_self_attn, self.norm1, self.dropout1,
                                            norm_first)
    return (d_x, d_memory), collect_grads(self, grads)


@add_to_class(Stack, "backward")
def stack_backward(self, d_out):
    """Backward of Stack.forward, the blocks in reverse order. Returns what its blocks' backward
    returns: (d_x, grads), or ((d_x, d_memory), grads) for decoder blocks, d_memory summed over
    the blocks (every one of them reads the memory)."""
    self.saved()  # a clear error if no forward ran
    grads, d_context = {}, None
    if self.norm is not None:
        d_out, grads["norm"] = self.norm.backward(d_out)
    for i in reversed(range(len(self.layers))):
        d_in, grads[f"layers.{i}"] = self.layers[i].backward(d_out)
        if not isinstance(d_in, tuple):  # x is the block's only input
            d_out = d_in
            continue
        d_out, *d_more = d_in  # decoder blocks: (d_x, d_memory)
        d_context = d_more if d_context is None else [a + b for a, b in zip(d_context, d_more)]
        # ... and the d_memory of every block adds up
    d_inputs = d_out if d_context is None else (d_out, *d_context)
    return d_inputs, collect_grads(self, grads)


def log_softmax(logits):
    """log(softmax(logits)) along the last axis, as x - max - log(sum(exp(x - max))).

    Never log(0): the largest entry contributes exp(0) = 1 to the sum, so the log is of a number
    >= 1, and every result is finite for finite logits.
    """
    logits = as_real_array(logits, "logits")
    if logits.ndim < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., n_vocab), n_vocab >= 1, got {logits.shape}")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def cross_entropy(logits, targets, *, label_smoothing=0.0, ignore_id=None):
    """Mean cross-entropy over the non-ignored positions, with label smoothing.

    logits (..., n_vocab), targets (...) integer ids. The target distribution puts
    label_smoothing / n_vocab on every token, plus 1 - label_smoothing on the right one.
    Positions whose target is `ignore_id` (padding) count for nothing; at least one must count.
    Returns (loss, d_logits); d_logits = (softmax(logits) - target distribution) / n_counted.
    """
    logits, targets = as_real_array(logits, "logits"), np.asarray(targets)
    if logits.ndim < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (logits {logits.shape} "
                         f"without the vocabulary axis), got {targets.shape}")
    label_smoothing = check_number(label_smoothing, "label_smoothing", "[0, 1)")
    n_vocab = logits.shape[-1]
    if ignore_id is not None:
        ignore_id = check_int(ignore_id, "ignore_id", "(-inf, inf)")
    counted = np.ones(targets.shape, dtype=bool) if ignore_id is None else targets != ignore_id
    if not counted.any():
        raise ValueError(f"targets has no position to count: shape {targets.shape}, "
                         f"ignore_id={ignore_id}")
    check_ids(targets[counted], "targets", n_vocab)  # every counted one an id: -1 is no class
    log_p = log_softmax(logits)  # (..., n_vocab)
    q = np.full(logits.shape, label_smoothing / n_vocab, dtype=log_p.dtype)
    np.put_along_axis(q, np.where(counted, targets, 0)[..., None],
                      1.0 - label_smoothing + label_smoothing / n_vocab, axis=-1)
    n = int(counted.sum())
    loss = -(q * log_p).sum(axis=-1)[counted].sum() / n
    d_logits = (np.exp(log_p) - q) * counted[..., None] / n
    return float(loss), d_logits


def embedding_backward(table, tokens, d_x, scale):
    """x = table[tokens] * scale (+ PE, which is fixed): the gradient of the table (V, d_model).

    Every occurrence of a token adds its row's gradient (table[tokens] += ... would keep only one
    of them): row v of the result is the sum of the rows of d_x where the token is v, which is
    one_hot.T @ d_x with one_hot[n, v] = (token n == v). np.add.at(d_table, ids, rows) sums the
    same, much more slowly, but needs no (N, V) matrix: it takes over for a large vocabulary.
    """
    tokens = check_ids(tokens, "tokens", len(table))
    d_x = check_shape(d_x, "d_x", (*tokens.shape, table.shape[-1]))
    ids, rows = tokens.reshape(-1), d_x.reshape(-1, table.shape[-1])  # (N,), (N, d_model)
    if len(ids) * len(table) > 2**24:  # the one-hot matrix would pass 64 MB in float32
        d_table = np.zeros_like(table)
        np.add.at(d_table, ids, rows)
        return d_table * scale
    one_hot = (ids[:, None] == np.arange(len(table))).astype(table.dtype)  # (N, V)
    return (one_hot.T @ rows) * scale  # (V, d_model)


@add_to_class(Transformer, "backward")
def transformer_backward(self, d_logits):
    """Backward of Transformer.forward(src, tgt): (None, grads), None because token ids have no
    gradient. d_logits (B, T, tgt_vocab) is the loss gradient of the logits; grads is keyed
    exactly like parameters(). Shared or tied matrices sum the gradients of all their uses.
    """
    src, tgt, x = self.saved()
    d_logits = check_shape(d_logits, "d_logits", (*tgt.shape, self.tgt_vocab))
    scale = np.sqrt(self.d_model, dtype=self.src_embed.dtype)
    grads = {}
    if self.tie_output:  # logits = x @ E^T
        rows = d_logits.reshape(-1, d_logits.shape[-1])
        d_out_table = rows.T @ x.reshape(-1, x.shape[-1])  # (tgt_vocab, d_model)
        d_x = d_logits @ self.tgt_embed
    else:
        d_x, grads["W_out"], grads["b_out"] = linear_backward(x, self.W_out, d_logits)
    (d_y, d_memory), grads["decoder"] = self.decoder.backward(d_x)
    d_e, grads["encoder"] = self.encoder.backward(d_memory)
    d_e, d_y = self.src_dropout.backward(d_e)[0], self.tgt_dropout.backward(d_y)[0]
    d_src = embedding_backward(self.src_embed, src, d_e, scale)
    d_tgt = embedding_backward(self.tgt_embed, tgt, d_y, scale)
    if self.tie_output:
        d_tgt = d_tgt + d_out_table
    if self.share_embeddings:
        grads["src_embed"] = d_src + d_tgt
    else:
        grads["src_embed"], grads["tgt_embed"] = d_src, d_tgt
    return None, collect_grads(self, grads)


def lrate(step, d_model, warmup, factor=1.0):
    """The paper's schedule (§5.3): factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Linear warm-up for `warmup` steps, then decay as 1 / sqrt(step); the peak, at step = warmup,
    is factor / sqrt(d_model * warmup). step counts from 1 (scalar or array).
    """
    d_model, warmup, factor = (check_number(v, name, "(0, inf)") for v, name in
                               ((d_model, "d_model"), (warmup, "warmup"), (factor, "factor")))
    step = as_real_array(step, "step").astype(np.float64)
    if not np.all(step >= 1):  # NaN too
        raise ValueError(f"step counts from 1, got {step if step.ndim == 0 else step.min()}")
    return factor * d_model**-0.5 * np.minimum(step**-0.5, step * warmup**-1.5)


def lrate_linear_decay(step, d_model, warmup, total, factor=1.0):
    """The paper's warm-up up to its peak at step `warmup`, then a straight line down to 0 at
    step `total` (instead of the paper's 1 / sqrt(step), which is still 41% of the peak after
    6 x warmup steps). step counts from 1 (scalar or array)."""
    warmup = check_number(warmup, "warmup", "[1, inf)")
    if not check_number(total, "total", "(1, inf)") > warmup:
        raise ValueError(f"total must be larger than warmup, got warmup={warmup}, total={total}")
    warm = lrate(step, d_model, warmup, factor)  # which checks step, d_model and factor
    step, peak = np.asarray(step, dtype=np.float64), lrate(warmup, d_model, warmup, factor)
    decay = peak * np.clip((total - step) / (total - warmup), 0.0, None)
    return np.where(step <= warmup, warm, decay)


class TrainingDiverged(ValueError):
    """The loss, the gradients or an update stopped being finite numbers: the training diverged.
    Raised before the parameters are touched; `history` holds the steps before (train's)."""

    def __init__(self, message, history=None):
        super().__init__(message)
        self.history = history


def clip_by_global_norm(grads, max_norm):
    """Scale every gradient by max_norm / norm if their global norm, the length of all of them
    as one vector, sqrt(sum of every squared entry), exceeds max_norm: the direction is kept, the
    length of a large gradient is capped, so that no batch weighs more than max_norm allows in
    the optimiser's running averages. max_norm None: no clipping.
    Returns (grads, norm before clipping); a norm that is not finite (inf or NaN: the training
    diverged) raises TrainingDiverged instead of spreading NaN through the weights."""
    if max_norm is not None:
        max_norm = check_number(max_norm, "max_norm", "(0, inf)")
    norm = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads.values())))
    if not np.isfinite(norm):
        raise TrainingDiverged(f"the gradients' global norm is {norm}: the training diverged")
    if max_norm is None or norm <= max_norm:
        return grads, norm
    scale = max_norm / norm  # a Python float: float32 gradients stay float32
    return {name: g * scale for name, g in grads.items()}, norm


class Adam:
    """Adam (Kingma and Ba), with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (§5.3).

    params: a dict of arrays (model.parameters()), updated in place by step(grads, lr):
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps),
    with the bias corrections m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t).
    Every entry is updated on its own, so all the parameters can be one long vector: m and v are
    two flat buffers (m[name] is a view of its part), and a step is a dozen NumPy calls on the
    whole vector instead of a dozen per array (88 arrays in notebook 07's model).
    """

    def __init__(self, params, *, beta1=0.9, beta2=0.98, eps=1e-9):
        if not isinstance(params, dict) or not all(
                isinstance(p, np.ndarray) and p.dtype.kind == "f" for p in params.values()):
            raise ValueError("params must be a dict of float arrays, as model.parameters() "
                             f"returns, got {type(params).__name__}")
        self.params, self.eps = params, check_number(eps, "eps", "(0, inf)")
        self.beta1, self.beta2 = (check_number(b, name, "[0, 1)")  # beta = 1: m_hat = 0 / 0
                                  for b, name in ((beta1, "beta1"), (beta2, "beta2")))
        self.slices, n = {}, 0  # name -> its slice of the flat vector
        for name, p in params.items():
            self.slices[name], n = slice(n, n + p.size), n + p.size
        dtype = np.result_type(*params.values()) if params else np.float64
        self.m_flat, self.v_flat = np.zeros(n, dtype), np.zeros(n, dtype)  # (n,) each
        self.m = {name: self.m_flat[part].reshape(params[name].shape)  # views, not copies
                  for name, part in self.slices.items()}
        self.v = {name: self.v_flat[part].reshape(params[name].shape)
                  for name, part in self.slices.items()}
        self.t = 0

    def step(self, grads, lr):
        self.apply(self.update(grads, lr))

    def update(self, grads, lr):
        """The step of every parameter, one flat vector (n,); the moments move, the parameters
        not yet. TrainingDiverged if it is not finite."""
        lr = check_number(lr, "lr", "[0, inf)")
        if not isinstance(grads, dict) or grads.keys() != self.params.keys() or any(
                np.shape(grads[name]) != p.shape for name, p in self.params.items()):
            raise ValueError("grads must have the names and shapes of params")
        self.t += 1
        c1, c2 = 1.0 - self.beta1**self.t, 1.0 - self.beta2**self.t
        g = np.concatenate([grads[name].reshape(-1) for name in self.params])  # (n,): all of them
        m, v = self.m_flat, self.v_flat
        m *= self.beta1
        m += (1.0 - self.beta1) * g
        v *= self.beta2
        v += (1.0 - self.beta2) * g * g
        update = lr * (m / c1) / (np.sqrt(v / c2) + self.eps)  # (n,)
        if not np.isfinite(update).all():
            raise TrainingDiverged("Adam's update is not finite: the training diverged")
        return update

    def apply(self, update):
        """p -= its part of `update`, for every parameter."""
        for name, p in self.params.items():
            p -= update[self.slices[name]].reshape(p.shape)


def loss_stalled(losses, every, *, evaluations=3, tolerance=0.02):
    """True when the loss has not moved from where it started: the mean of every stretch of
    `every` losses, `evaluations` of them or more after the first, lies within `tolerance` of
    the first stretch's mean (relative). A learning rate far too small does that, or one so
    large that the model's outputs saturated at a uniform guess (a loss of ln V)."""
    n = len(losses) // every
    if n <= evaluations:
        return False
    means = np.reshape(losses[:n * every], (n, every)).mean(axis=1)  # (n,): one per stretch
    return bool(np.all(np.abs(means[1:] - means[0]) <= tolerance * abs(means[0])))


def train(model, batches, loss, schedule, *, steps, rng=None, clip=None, evaluate=None,
          eval_every=50, stop=None, callback=None, optimizer=None):
    """Train `model` with Adam (or `optimizer`) and the learning rate schedule(step), on any task.

    batches(step) -> (inputs, targets): a tuple of forward's arguments and what the loss compares
    the output with; loss(output, targets) -> (loss, d_output). Each step runs forward in
    training mode (dropout, if the model has any, draws its masks from `rng`; rng None leaves
    it off), the loss, backward, clips the gradients' global norm to `clip` (None: no clipping)
    and takes one Adam step. evaluate(model) -> {name: number} runs every `eval_every` steps in
    evaluation mode (keep the test set out of it: that is for the end); stop(history) -> True
    ends the run early. callback(history, model), if given, runs after every step, with the
    model in evaluation mode, which is how the model is left at the end. optimizer: anything
    with step(grads, lr) that updates model.parameters() (default Adam; notebook 10's AdamW).
    Returns history: per step "loss", "grad_norm" (before clipping) and "lr"; "eval_step" and a
    list for each name that evaluate returns; "stalled", the evaluation step at which the loss
    was found not to have moved from its start (loss_stalled, stretches of eval_every steps).
    A loss, gradient or update that is not finite raises TrainingDiverged, which carries the
    history so far; the parameters are left as they were before that step.
    """
    steps, eval_every = check_int(steps, "steps", "[1, inf)"), check_int(eval_every,
                                                                         "eval_every", "[1, inf)")
    for name, f in {"batches": batches, "loss": loss, "schedule": schedule, "evaluate": evaluate,
                    "stop": stop, "callback": callback}.items():
        if not callable(f) and (f is not None or name in ("batches", "loss", "schedule")):
            raise ValueError(f"{name} must be a function, got {type(f).__name__}")
    clip = None if clip is None else check_number(clip, "clip", "(0, inf)")
    rng = None if rng is None else check_rng(rng)
    optimizer = Adam(model.parameters()) if optimizer is None else optimizer
    history = {"loss": [], "grad_norm": [], "lr": [], "eval_step": []}
    for step in range(1, steps + 1):
        inputs, targets = batches(step)
        set_training(model, rng)
        output = model.forward(*inputs)
        set_training(model, None)
        value, d_output = loss(output, targets)
        try:  # nothing has changed the parameters yet
            if not np.isfinite(value):
                raise TrainingDiverged(f"the loss is {value}: the training diverged")
            _, grads = model.backward(d_output)
            grads, norm = clip_by_global_norm(grads, clip)
            lr = float(schedule(step))
            optimizer.step(grads, lr)
        except TrainingDiverged as error:
            raise TrainingDiverged(f"step {step}: {error}; the parameters are those before this "
                                   "step, error.history the steps before", history) from None
        history["loss"].append(value)
        history["grad_norm"].append(norm)
        history["lr"].append(lr)
        if evaluate is not None and step % eval_every == 0:
            if "stalled" not in history and loss_stalled(history["loss"], eval_every):
                history["stalled"] = step
            history["eval_step"].append(step)
            for name, number in evaluate(model).items():
                history.setdefault(name, []).append(number)
        if callback is not None:
            callback(history, model)
        if stop is not None and stop(history):
            break
    return history


def first_below(losses, level, window=10):
    """The first step (counting from 1) at which the mean of the last `window` losses is below
    `level`; None if it never is. A mean, so that one lucky batch does not count."""
    window, level = check_int(window, "window", "[1, inf)"), check_number(level, "level",
                                                                          "(-inf, inf)")
    if len(losses) < window:
        return None
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    hits = np.flatnonzero(smooth < level)
    return int(hits[0]) + window if hits.size else None
