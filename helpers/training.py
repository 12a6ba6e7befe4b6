"""Training the Transformer in NumPy: backward passes, loss, optimiser, schedule, a toy task.

Every definition below is written in notebook 07 first, in a cell that starts with
``# saved in helpers/training.py``; ``tests/test_sync.py`` proves the two copies are identical.

Backward API: each ``<thing>_backward`` takes the module whose ``forward`` ran last (its
``cache`` holds what backward needs) and the gradient of the loss with respect to that forward's
output; it returns the gradient with respect to the inputs and a dict of parameter gradients
keyed exactly like the module's ``parameters()``.
"""

import numpy as np

from helpers.transformer import (
    Transformer,
    check_positive_int,
    greedy_decode,
    merge_heads,
    set_training,
    split_heads,
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
    return p * (d_p - np.sum(d_p * p, axis=-1, keepdims=True))


def attention_backward(cache, d_out):
    """Gradients of softmax(Q K^T / sqrt(d_k)) V with respect to Q, K and V.

    cache = (Q, K, V, weights) from the forward pass (Q, K, V with the same leading axes);
    d_out (..., T_q, d_v). Returns (d_Q, d_K, d_V).
    """
    Q, K, V, weights = cache
    scale = np.sqrt(Q.shape[-1], dtype=Q.dtype)
    d_weights = d_out @ V.swapaxes(-1, -2)  # (..., T_q, T_k)
    d_V = weights.swapaxes(-1, -2) @ d_out  # (..., T_k, d_v)
    d_scores = softmax_backward(weights, d_weights) / scale  # (..., T_q, T_k)
    d_Q = d_scores @ K  # (..., T_q, d_k)
    d_K = d_scores.swapaxes(-1, -2) @ Q  # (..., T_k, d_k)
    return d_Q, d_K, d_V


def linear_backward(x, W, d_y):
    """y = x @ W + b with x (..., d_in): returns (d_x, d_W, d_b), summed over the leading axes."""
    d_W = x.reshape(-1, x.shape[-1]).T @ d_y.reshape(-1, d_y.shape[-1])  # (d_in, d_out)
    d_b = d_y.reshape(-1, d_y.shape[-1]).sum(axis=0)  # (d_out,)
    return d_y @ W.T, d_W, d_b


def mha_backward(layer, d_out):
    """Backward of MultiHeadAttention.forward: returns (d_query, d_key, d_value, grads).

    For self-attention (query, key and value are one array) the caller adds the three.
    """
    query, key, value, Q, K, V, heads = layer.cache
    grads = {}
    d_heads, grads["W_o"], grads["b_o"] = linear_backward(heads, layer.W_o, d_out)
    d_heads = split_heads(d_heads, layer.n_heads)  # (..., h, T_q, d_k)
    d_Q, d_K, d_V = attention_backward((Q, K, V, layer.weights), d_heads)
    d_query, grads["W_q"], grads["b_q"] = linear_backward(query, layer.W_q, merge_heads(d_Q))
    d_key, grads["W_k"], grads["b_k"] = linear_backward(key, layer.W_k, merge_heads(d_K))
    d_value, grads["W_v"], grads["b_v"] = linear_backward(value, layer.W_v, merge_heads(d_V))
    return d_query, d_key, d_value, {name: grads[name] for name in layer.parameters()}


def layer_norm_backward(norm, d_out):
    """Backward of LayerNorm.forward: returns (d_x, {"gamma": ..., "beta": ...}).

    With x_hat = (x - mean) / std: d_x = (g - mean(g) - x_hat * mean(g * x_hat)) / std, where
    g = d_out * gamma; the two means remove what the normalisation itself takes away.
    """
    x_hat, std = norm.cache
    rows = d_out.reshape(-1, norm.d_model)
    grads = {"gamma": (rows * x_hat.reshape(rows.shape)).sum(axis=0), "beta": rows.sum(axis=0)}
    g = d_out * norm.gamma  # (..., d_model)
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    return (g - mean_g - x_hat * mean_gx) / std, grads


def ffn_backward(ffn, d_out):
    """Backward of FeedForward.forward: returns (d_x, grads). ReLU passes gradient where > 0."""
    x, hidden = ffn.cache
    grads = {}
    d_hidden, grads["W_2"], grads["b_2"] = linear_backward(hidden, ffn.W_2, d_out)
    d_hidden = d_hidden * (hidden > 0)  # (..., T, d_ff)
    d_x, grads["W_1"], grads["b_1"] = linear_backward(x, ffn.W_1, d_hidden)
    return d_x, {name: grads[name] for name in ffn.parameters()}


def dropout_backward(layer, d_out):
    """Backward of Dropout.forward: the same kept entries, the same 1 / (1 - p) scale; the
    identity when that forward dropped nothing (evaluation mode, or p = 0)."""
    if layer.cache is None:
        return d_out
    return d_out * layer.cache / (1.0 - layer.p)


def prefixed(parts):
    """{"self_attn": {"W_q": g}, ...} -> {"self_attn.W_q": g, ...}: dotted names, in order."""
    return {f"{prefix}.{name}": g for prefix, grads in parts.items() for name, g in grads.items()}


def encoder_block_backward(block, d_out):
    """Backward of EncoderBlock.forward: returns (d_x, grads).

    A residual connection x + Sublayer(x) passes its gradient to x unchanged AND through the
    sub-layer; the two are added.
    """
    g = {}
    if block.norm_first:  # x1 = x + D1(MHA(LN1(x)));  out = x1 + D2(FFN(LN2(x1)))
        d_h, g["ffn"] = ffn_backward(block.ffn, dropout_backward(block.dropout2, d_out))
        d_n2, g["norm2"] = layer_norm_backward(block.norm2, d_h)
        d_x1 = d_out + d_n2
        d_a = dropout_backward(block.dropout1, d_x1)
        d_q, d_k, d_v, g["self_attn"] = mha_backward(block.self_attn, d_a)
        d_n1, g["norm1"] = layer_norm_backward(block.norm1, d_q + d_k + d_v)
        d_x = d_x1 + d_n1
    else:  # x1 = LN1(x + D1(MHA(x)));  out = LN2(x1 + D2(FFN(x1)))
        d_s2, g["norm2"] = layer_norm_backward(block.norm2, d_out)
        d_f, g["ffn"] = ffn_backward(block.ffn, dropout_backward(block.dropout2, d_s2))
        d_s1, g["norm1"] = layer_norm_backward(block.norm1, d_s2 + d_f)
        d_a = dropout_backward(block.dropout1, d_s1)
        d_q, d_k, d_v, g["self_attn"] = mha_backward(block.self_attn, d_a)
        d_x = d_s1 + d_q + d_k + d_v
    return d_x, prefixed({part: g[part] for part in ("self_attn", "ffn", "norm1", "norm2")})


def encoder_backward(encoder, d_out):
    """Backward of Encoder.forward (the blocks in reverse order): returns (d_x, grads)."""
    grads = {}
    if encoder.norm is not None:
        d_out, g = layer_norm_backward(encoder.norm, d_out)
        grads.update(prefixed({"norm": g}))
    for i in reversed(range(len(encoder.layers))):
        d_out, g = encoder_block_backward(encoder.layers[i], d_out)
        grads.update(prefixed({f"layers.{i}": g}))
    return d_out, {name: grads[name] for name in encoder.parameters()}


def decoder_block_backward(block, d_out):
    """Backward of DecoderBlock.forward: returns (d_x, d_memory, grads).

    The memory (the encoder's output) receives gradient through cross-attention's keys and values.
    """
    g = {}
    if block.norm_first:
        d_h, g["ffn"] = ffn_backward(block.ffn, dropout_backward(block.dropout3, d_out))
        d_n3, g["norm3"] = layer_norm_backward(block.norm3, d_h)
        d_x2 = d_out + d_n3
        d_a = dropout_backward(block.dropout2, d_x2)
        d_q, d_k, d_v, g["cross_attn"] = mha_backward(block.cross_attn, d_a)
        d_memory = d_k + d_v
        d_n2, g["norm2"] = layer_norm_backward(block.norm2, d_q)
        d_x1 = d_x2 + d_n2
        d_a = dropout_backward(block.dropout1, d_x1)
        d_q, d_k, d_v, g["self_attn"] = mha_backward(block.self_attn, d_a)
        d_n1, g["norm1"] = layer_norm_backward(block.norm1, d_q + d_k + d_v)
        d_x = d_x1 + d_n1
    else:
        d_s3, g["norm3"] = layer_norm_backward(block.norm3, d_out)
        d_f, g["ffn"] = ffn_backward(block.ffn, dropout_backward(block.dropout3, d_s3))
        d_s2, g["norm2"] = layer_norm_backward(block.norm2, d_s3 + d_f)
        d_a = dropout_backward(block.dropout2, d_s2)
        d_q, d_k, d_v, g["cross_attn"] = mha_backward(block.cross_attn, d_a)
        d_memory = d_k + d_v
        d_s1, g["norm1"] = layer_norm_backward(block.norm1, d_s2 + d_q)
        d_a = dropout_backward(block.dropout1, d_s1)
        d_q, d_k, d_v, g["self_attn"] = mha_backward(block.self_attn, d_a)
        d_x = d_s1 + d_q + d_k + d_v
    parts = ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3")
    return d_x, d_memory, prefixed({part: g[part] for part in parts})


def decoder_backward(decoder, d_out):
    """Backward of Decoder.forward: returns (d_x, d_memory, grads); every layer reads memory."""
    grads, d_memory = {}, 0.0
    if decoder.norm is not None:
        d_out, g = layer_norm_backward(decoder.norm, d_out)
        grads.update(prefixed({"norm": g}))
    for i in reversed(range(len(decoder.layers))):
        d_out, d_mem, g = decoder_block_backward(decoder.layers[i], d_out)
        d_memory = d_memory + d_mem
        grads.update(prefixed({f"layers.{i}": g}))
    return d_out, d_memory, {name: grads[name] for name in decoder.parameters()}


def log_softmax(logits):
    """log(softmax(logits)) along the last axis, as x - max - log(sum(exp(x - max))).

    Never log(0): the largest entry contributes exp(0) = 1 to the sum, so the log is of a number
    >= 1, and every result is finite for finite logits.
    """
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def cross_entropy(logits, targets, *, label_smoothing=0.0, ignore_id=None):
    """Mean cross-entropy over the non-ignored positions, with label smoothing.

    logits (..., n_vocab), targets (...) integer ids. The target distribution puts
    label_smoothing / n_vocab on every token, plus 1 - label_smoothing on the right one.
    Positions whose target is `ignore_id` (padding) count for nothing.
    Returns (loss, d_logits); d_logits = (softmax(logits) - target distribution) / n_counted.
    """
    logits, targets = np.asarray(logits), np.asarray(targets)
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (logits {logits.shape} "
                         f"without the vocabulary axis), got {targets.shape}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing}")
    n_vocab = logits.shape[-1]
    log_p = log_softmax(logits)  # (..., n_vocab)
    q = np.full(logits.shape, label_smoothing / n_vocab, dtype=log_p.dtype)
    np.put_along_axis(q, targets[..., None], 1.0 - label_smoothing + label_smoothing / n_vocab,
                      axis=-1)
    counted = np.ones(targets.shape, dtype=bool) if ignore_id is None else targets != ignore_id
    n = max(int(counted.sum()), 1)
    loss = -(q * log_p).sum(axis=-1)[counted].sum() / n
    d_logits = (np.exp(log_p) - q) * counted[..., None] / n
    return float(loss), d_logits


def embedding_backward(table, tokens, d_x, scale):
    """x = table[tokens] * scale (+ PE, which is fixed): the gradient of the table (V, d_model).

    Every occurrence of a token adds its row's gradient; np.add.at sums repeated ids correctly
    (table[tokens] += ... would keep only one of them).
    """
    d_table = np.zeros_like(table)
    np.add.at(d_table, tokens.reshape(-1), d_x.reshape(-1, table.shape[-1]) * scale)
    return d_table


def transformer_backward(model, d_logits):
    """Backward of Transformer.forward(src, tgt): the gradient of every parameter.

    d_logits (B, T, tgt_vocab) is the loss gradient of the logits. Returns a dict keyed exactly
    like model.parameters(). Shared or tied matrices sum the gradients of all their uses.
    """
    src, tgt, x = model.cache["src"], model.cache["tgt"], model.cache["x"]
    scale = np.sqrt(model.d_model, dtype=model.src_embed.dtype)
    grads = {}
    if model.tie_output:  # logits = x @ E^T
        rows = d_logits.reshape(-1, d_logits.shape[-1])
        d_out_table = rows.T @ x.reshape(-1, x.shape[-1])  # (tgt_vocab, d_model)
        d_x = d_logits @ model.tgt_embed
    else:
        d_x, grads["W_out"], grads["b_out"] = linear_backward(x, model.W_out, d_logits)
    d_y, d_memory, g_dec = decoder_backward(model.decoder, d_x)
    d_e, g_enc = encoder_backward(model.encoder, d_memory)
    d_e, d_y = dropout_backward(model.src_dropout, d_e), dropout_backward(model.tgt_dropout, d_y)
    d_src = embedding_backward(model.src_embed, src, d_e, scale)
    d_tgt = embedding_backward(model.tgt_embed, tgt, d_y, scale)
    if model.tie_output:
        d_tgt = d_tgt + d_out_table
    if model.share_embeddings:
        grads["src_embed"] = d_src + d_tgt
    else:
        grads["src_embed"], grads["tgt_embed"] = d_src, d_tgt
    grads.update(prefixed({"encoder": g_enc, "decoder": g_dec}))
    return {name: grads[name] for name in model.parameters()}


def lrate(step, d_model, warmup, factor=1.0):
    """The paper's schedule (§5.3): factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Linear warm-up for `warmup` steps, then decay as 1 / sqrt(step); the peak, at step = warmup,
    is factor / sqrt(d_model * warmup). step counts from 1 (scalar or array).
    """
    step = np.asarray(step, dtype=np.float64)
    if np.any(step < 1):
        raise ValueError(f"step counts from 1, got min {step.min()}")
    return factor * d_model**-0.5 * np.minimum(step**-0.5, step * warmup**-1.5)


def lrate_linear_decay(step, d_model, warmup, total, factor=1.0):
    """The paper's warm-up up to its peak at step `warmup`, then a straight line down to 0 at
    step `total` (instead of the paper's 1 / sqrt(step), which is still 41% of the peak after
    6 x warmup steps). step counts from 1 (scalar or array)."""
    if not 1 <= warmup < total:
        raise ValueError(f"need 1 <= warmup < total, got warmup={warmup}, total={total}")
    step = np.asarray(step, dtype=np.float64)
    peak = lrate(warmup, d_model, warmup, factor)
    decay = peak * np.clip((total - step) / (total - warmup), 0.0, None)
    return np.where(step <= warmup, lrate(step, d_model, warmup, factor), decay)


def clip_by_global_norm(grads, max_norm):
    """Scale every gradient by max_norm / norm if their global norm, the length of all of them
    as one vector, sqrt(sum of every squared entry), exceeds max_norm: the direction is kept, the
    length of a rare huge gradient is capped, so that one unusual batch weighs no more than a
    usual one in the optimiser's running averages. max_norm None: no clipping.
    Returns (grads, norm before clipping); a norm that is not finite (inf or NaN: the training
    diverged) raises a ValueError instead of spreading NaN through the weights."""
    if max_norm is not None and not (isinstance(max_norm, (int, float)) and 0 < max_norm < np.inf):
        raise ValueError(f"max_norm must be a positive number or None, got max_norm={max_norm!r}")
    norm = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads.values())))
    if not np.isfinite(norm):
        raise ValueError(f"the gradients' global norm is {norm}: the training diverged")
    if max_norm is None or norm <= max_norm:
        return grads, norm
    scale = max_norm / norm  # a Python float: float32 gradients stay float32
    return {name: g * scale for name, g in grads.items()}, norm


class Adam:
    """Adam (Kingma and Ba), with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (§5.3).

    params: a dict of arrays (model.parameters()), updated in place by step(grads, lr):
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps),
    with the bias corrections m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t).
    """

    def __init__(self, params, *, beta1=0.9, beta2=0.98, eps=1e-9):
        self.params, self.beta1, self.beta2, self.eps = params, beta1, beta2, eps
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0

    def step(self, grads, lr):
        self.t += 1
        c1, c2 = 1.0 - self.beta1**self.t, 1.0 - self.beta2**self.t
        for name, p in self.params.items():
            g, m, v = grads[name], self.m[name], self.v[name]
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


PAD = 0
BOS = 1
EOS = 2
DIGITS = 10
MAX_LEN = 10
VOCAB_SIZE = 3 + DIGITS


def sample_sequences(rng, n, *, max_len=MAX_LEN, exclude=None):
    """n random digit sequences of lengths 1..max_len, right-padded: (src (n, max_len), lengths).

    Digit d is token d + 3 (0, 1, 2 are PAD, BOS, EOS). A sequence whose bytes are in the set
    `exclude` (the held-out test sequences) is drawn again.
    """
    lengths = rng.integers(1, max_len + 1, size=n)
    src = rng.integers(3, 3 + DIGITS, size=(n, max_len))
    src[np.arange(max_len) >= lengths[:, None]] = PAD
    if exclude:
        again = np.array([row.tobytes() in exclude for row in src])
        if again.any():
            src[again], lengths[again] = sample_sequences(rng, int(again.sum()), max_len=max_len,
                                                          exclude=exclude)
    return src, lengths


def make_targets(src, lengths, task="reverse"):
    """Decoder input and target for a batch: (tgt_in, tgt_out), each (n, max_len + 1).

    task "reverse": tgt_out = the source reversed, then EOS, then PAD; "copy": the source itself.
    tgt_in = BOS followed by tgt_out shifted right (teacher forcing).
    """
    n, max_len = src.shape
    pos = np.arange(max_len)
    if task == "reverse":
        idx = np.clip(lengths[:, None] - 1 - pos, 0, None)  # (n, max_len): source index to read
        body = np.where(pos < lengths[:, None], np.take_along_axis(src, idx, axis=1), PAD)
    elif task == "copy":
        body = src
    else:
        raise ValueError(f"task must be 'reverse' or 'copy', got {task!r}")
    tgt_out = np.concatenate([body, np.full((n, 1), PAD)], axis=1)  # (n, max_len + 1)
    tgt_out[np.arange(n), lengths] = EOS
    tgt_in = np.concatenate([np.full((n, 1), BOS), tgt_out[:, :-1]], axis=1)
    tgt_in[tgt_in == EOS] = PAD  # EOS is only ever predicted, never read
    return tgt_in, tgt_out


def reverse_task(n_val=1000, n_test=1000, seed=2017):
    """Two held-out sets: "val" (n_val sequences, to watch training and choose the recipe) and
    "test" (n_test sequences, evaluated once at the end), each a dict of src, lengths, tgt_out;
    and "exclude", the bytes of every sequence of length >= 4 in either set, which training never
    draws. No test sequence of length >= 4 is in the validation set. Lengths 1-3 have only 10, 100
    and 1,000 possible sequences: those are in both sets and in training."""
    rng = np.random.default_rng(seed)
    sets = {}
    for name, n in (("val", n_val), ("test", n_test)):
        seen = {row.tobytes() for s in sets.values() for row, k in zip(s["src"], s["lengths"])
                if k >= 4}
        src, lengths = sample_sequences(rng, n, exclude=seen)
        sets[name] = {"src": src, "lengths": lengths, "tgt_out": make_targets(src, lengths)[1]}
    exclude = {row.tobytes() for s in sets.values() for row, k in zip(s["src"], s["lengths"])
               if k >= 4}
    return {**sets, "exclude": exclude}


def exact_match(model, src, tgt_out):
    """Greedy decoding (notebook 06) of every source; True where the output, EOS included,
    equals tgt_out exactly. Returns a boolean array (n,)."""
    tokens, _ = greedy_decode(model, src, BOS, EOS, tgt_out.shape[1])
    out = np.full(tgt_out.shape, PAD)
    out[:, :tokens.shape[1] - 1] = tokens[:, 1:]  # drop BOS; PAD after the last step
    return np.all(out == tgt_out, axis=1)


def train(model, rng, schedule, *, steps, batch_size=128, label_smoothing=0.1, clip=None,
          task="reverse", validation=None, eval_every=50, patience=None, exclude=None,
          callback=None):
    """Train `model` on fresh random batches with Adam and the learning rate schedule(step).

    Each step draws a batch from `rng`, runs forward in training mode (dropout, if the model has
    any, draws its masks from `rng` too), the label-smoothed loss, backward, clips the gradients'
    global norm to `clip` (None: no clipping) and takes one Adam step. validation =
    (src, tgt_out) is evaluated every `eval_every` steps (exact match, in evaluation mode); the
    run stops early once `patience` evaluations in a row are 100% (None: it never stops early).
    Keep the test set out of this: it is for the end. callback(history, model), if given, runs
    after every step with the model in evaluation mode, which is how the model is left at the end.
    Returns history: per step "loss", "grad_norm" (before clipping) and "lr"; "eval_step",
    "accuracy" (validation exact match).
    """
    if patience is not None:
        patience = check_positive_int(patience, "patience")
    optimizer = Adam(model.parameters())
    history = {"loss": [], "grad_norm": [], "lr": [], "eval_step": [], "accuracy": []}
    for step in range(1, steps + 1):
        src, lengths = sample_sequences(rng, batch_size, exclude=exclude)
        tgt_in, tgt_out = make_targets(src, lengths, task)
        set_training(model, rng)
        logits = model.forward(src, tgt_in)  # (B, T, vocabulary)
        set_training(model, None)
        loss, d_logits = cross_entropy(logits, tgt_out, label_smoothing=label_smoothing,
                                       ignore_id=PAD)
        grads, norm = clip_by_global_norm(transformer_backward(model, d_logits), clip)
        lr = float(schedule(step))
        optimizer.step(grads, lr)
        history["loss"].append(loss)
        history["grad_norm"].append(norm)
        history["lr"].append(lr)
        if validation is not None and step % eval_every == 0:
            history["eval_step"].append(step)
            history["accuracy"].append(float(exact_match(model, *validation).mean()))
        if callback is not None:
            callback(history, model)
        if patience and history["accuracy"][-patience:] == [1.0] * patience:
            break
    return history


REVERSE_CONFIG = {"src_vocab": VOCAB_SIZE, "tgt_vocab": VOCAB_SIZE, "d_model": 32, "n_heads": 2,
                  "d_ff": 128, "n_layers": 2, "max_len": MAX_LEN + 1, "dtype": "float32"}


def train_reverse(seed, *, norm_first=False, warmup=100, factor=0.5, ramp=True, steps=600,
                  budget=None, schedule="linear", clip=2.0, dropout=0.0, eval_every=50,
                  patience=None, callback=None):
    """This notebook's recipe: a 2 + 2 layer model (REVERSE_CONFIG), batches of 128, Adam, label
    smoothing 0.1, the paper's warm-up (`warmup` steps up to the peak factor / sqrt(32 * warmup)),
    then schedule "linear" (down to 0 at step `steps`, lrate_linear_decay) or "paper"
    (1 / sqrt(step), lrate); gradients clipped to a global norm of `clip` (None: never), dropout
    `dropout`. It runs all `steps` (or the first `budget` steps of that schedule) and keeps the
    last model; validation exact match is measured every `eval_every` steps (None: never), and
    with `patience` the run stops early after that many evaluations in a row at 100%.
    ramp=False holds the peak rate from step 1 (no warm-up), then the same decay. The test set is
    not touched. Returns (model, history, task). The same seed gives the same model, bit for
    bit, with the same NumPy and BLAS build (another CPU or BLAS build rounds differently, and
    training amplifies the difference)."""
    if schedule not in ("linear", "paper"):
        raise ValueError(f"schedule must be 'linear' or 'paper', got {schedule!r}")
    config = dict(REVERSE_CONFIG)
    dtype = np.dtype(config.pop("dtype"))
    model = Transformer(rng=np.random.default_rng(seed), norm_first=norm_first, dropout=dropout,
                        dtype=dtype, **config)
    task = reverse_task()
    d_model = config["d_model"]

    def rate(step):
        step = step if ramp else max(step, warmup)
        if schedule == "paper":
            return lrate(step, d_model, warmup, factor)
        return lrate_linear_decay(step, d_model, warmup, steps, factor)
    val = (task["val"]["src"], task["val"]["tgt_out"]) if eval_every else None
    history = train(model, np.random.default_rng(seed + 1), rate, steps=budget or steps,
                    clip=clip, validation=val, eval_every=eval_every or 1, patience=patience,
                    exclude=task["exclude"], callback=callback)
    return model, history, task


def anti_diagonal_mass(weights, length):
    """The share of attention on the anti-diagonal: target position i reading source L-1-i.

    weights (..., T_q, S) cross-attention of one sequence of length L = `length`; the mean of
    weights[..., i, L-1-i] over i = 0 .. L-1 (the query that predicts EOS is left out). Perfect
    reversal gives 1; uniform attention over the L real tokens gives 1/L.
    """
    i = np.arange(length)
    return weights[..., i, length - 1 - i].mean(axis=-1)


def first_below(losses, level, window=10):
    """The first step (counting from 1) at which the mean of the last `window` losses is below
    `level`; None if it never is. A mean, so that one lucky batch does not count."""
    if len(losses) < window:
        return None
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    hits = np.flatnonzero(smooth < level)
    return int(hits[0]) + window if hits.size else None
