"""The Transformer of "Attention Is All You Need", in NumPy, in the order the notebooks build it.

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/transformer.py``; ``tests/test_sync.py`` proves the two copies are identical.
Edit the notebook, then copy the cell here (or the other way round): the test says if you forgot.

Conventions (see the README): weights act on the right (``x @ W``); masks are boolean with
``True`` = blocked; float32 in gives float32 out.
"""

from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from helpers.module import Module
from helpers.validation import (
    as_real_array,
    check_attention_inputs,
    check_float_dtype,
    check_positive_int,
    check_token_id,
    check_token_ids,
)

# ── 01 · Scaled dot-product attention ─────────────────────────────────────────────────────────


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`.

    Subtracting the maximum first changes nothing mathematically (the factor exp(-max) cancels)
    but keeps every exponent <= 0, so nothing overflows. A row that is entirely -inf (every key
    blocked) has no valid softmax; we return zeros for it instead of NaN.
    """
    x = np.asarray(x)
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0)  # all -inf row: keep it -inf, not NaN
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    e /= np.where(total > 0, total, 1)  # in place: e is ours, no third array of x's size
    return e


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, for any leading batch axes.

    Q: (..., T_q, d_k), K: (..., T_k, d_k), V: (..., T_k, d_v),
    mask: boolean, broadcastable to (..., T_q, T_k), True = this key is blocked for this query.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)). A query whose keys are all
    blocked gets all-zero weights and a zero output (never NaN).
    """
    Q, K, V = as_real_array(Q, "Q"), as_real_array(K, "K"), as_real_array(V, "V")
    mask = None if mask is None else np.asarray(mask)
    check_attention_inputs(Q, K, V, mask)
    dtype = np.result_type(Q, K, V)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    d_k = Q.shape[-1]
    scale = np.sqrt(d_k, dtype=dtype)  # a float32 scale keeps float32 scores float32

    scores = (Q @ K.swapaxes(-1, -2)).astype(dtype, copy=False)  # (..., T_q, T_k)
    scores /= scale  # in place: the scores are the one big array; no copy of them
    if mask is not None:
        scores = np.where(mask, -np.inf, scores).astype(dtype, copy=False)  # before softmax
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k), rows sum to 1
    output = weights @ V.astype(dtype, copy=False)  # (..., T_q, d_v)
    return output, weights


# ── 02 · Multi-head attention ─────────────────────────────────────────────────────────────────


def split_heads(x, n_heads):
    """(..., T, d_model) -> (..., h, T, d_k): cut the features into h slices of width d_k."""
    n_heads = check_positive_int(n_heads, "n_heads")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, d_model) with rank >= 2, got {x.shape}")
    *lead, T, d_model = x.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} (last axis of {x.shape}) is not divisible by "
                         f"n_heads={n_heads}")
    x = x.reshape(*lead, T, n_heads, d_model // n_heads)  # (..., T, h, d_k)
    return x.swapaxes(-3, -2)  # (..., h, T, d_k)


def merge_heads(x):
    """(..., h, T, d_k) -> (..., T, h * d_k): the inverse of split_heads."""
    *lead, h, T, d_k = x.shape
    x = x.swapaxes(-3, -2)  # (..., T, h, d_k): put the heads back next to each other
    return x.reshape(*lead, T, h * d_k)  # (..., T, d_model)


class AttentionCache(NamedTuple):
    """What MultiHeadAttention.forward keeps for its backward pass (notebook 07)."""

    query: np.ndarray  # (..., T_q, d_model), the inputs
    key: np.ndarray  # (..., T_k, d_model)
    value: np.ndarray  # (..., T_k, d_model)
    Q: np.ndarray  # (..., h, T_q, d_k), the projections split into heads
    K: np.ndarray  # (..., h, T_k, d_k)
    V: np.ndarray  # (..., h, T_k, d_k)
    weights: np.ndarray  # (..., h, T_q, T_k)
    heads: np.ndarray  # (..., T_q, d_model), the heads merged, before W_o


class MultiHeadAttention(Module):
    """Multi-head attention (paper §3.2.2), all heads at once, no loop over heads.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o + b_o, with
    head_i = Attention(query W_q[:, i] + b_q[i], key W_k[:, i] + b_k[i], value W_v[:, i] + b_v[i])
    where [:, i] is the i-th block of d_k = d_model / h columns. Weights act on the right (x @ W).
    The paper's equations have no biases (4 d_model^2 parameters); this class adds b_q, b_k, b_v
    and b_o (4 d_model more, zero at the start), as most implementations do.
    """

    param_names = ("W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o")

    def __init__(self, d_model, n_heads, rng, *, dtype=np.float64):
        d_model = check_positive_int(d_model, "d_model")
        n_heads = check_positive_int(n_heads, "n_heads")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be a positive multiple of n_heads={n_heads}")
        dtype = check_float_dtype(dtype)
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        std = 1.0 / np.sqrt(d_model)  # keeps x @ W at the scale of x for unit-variance x
        for x in ("q", "k", "v", "o"):  # W_q, b_q, W_k, b_k, ...: the order of parameters()
            setattr(self, f"W_{x}", rng.normal(0.0, std, (d_model, d_model)).astype(dtype))
            setattr(self, f"b_{x}", np.zeros(d_model, dtype=dtype))
        self.weights = None  # the last attention weights, (..., h, T_q, T_k)

    def forward(self, query, key, value, mask=None, kv_cache=None):
        """query (..., T_q, d_model), key and value (..., T_k, d_model) -> (..., T_q, d_model).

        mask: boolean, True = blocked, broadcastable to (..., h, T_q, T_k); a mask with the
        inputs' rank, such as (B, T_q, T_k) for (B, T, d_model) inputs, gets a head axis.
        kv_cache: None here; notebook 06's cached decoding passes a KVCache, which adds the keys
        and values of earlier calls (or, for cross-attention, computes the memory's only once).
        """
        query, key = as_real_array(query, "query"), as_real_array(key, "key")
        value = as_real_array(value, "value")
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.ndim < 2 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (..., T, d_model={self.d_model}), "
                                 f"got {x.shape}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"key {key.shape} and value {value.shape} must have the same "
                             "(..., T_k) axes")
        if key.shape[-2] == 0:
            raise ValueError(f"key must have at least one position (T_k >= 1), got {key.shape}")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.ndim == query.ndim and mask.ndim >= 3:
                mask = np.expand_dims(mask, -3)  # (B, T_q, T_k) -> (B, 1, T_q, T_k)
        Q, K, V = self.project(query, key, value, kv_cache)  # (..., h, T, d_k) each
        heads, self.weights = scaled_dot_product_attention(Q, K, V, mask)  # (..., h, T_q, d_k)
        heads = merge_heads(heads)  # (..., T_q, d_model)
        self.cache = AttentionCache(query, key, value, Q, K, V, self.weights, heads)
        return heads @ self.W_o + self.b_o  # (..., T_q, d_model)

    def project(self, query, key, value, kv_cache=None):
        """The queries, keys and values, projected and split into heads: (..., h, T, d_k) each.

        With a kv_cache (notebook 06), K and V hold the keys and values of every call so far
        (self-attention), or the memory's, computed on the first call only (cross-attention).
        Notebook 09's grouped-query attention changes this step only.
        """
        h = self.n_heads
        Q = split_heads(query @ self.W_q + self.b_q, h)  # (..., h, T_q, d_k)
        if kv_cache is not None and kv_cache.holds(key):
            return Q, kv_cache.K, kv_cache.V  # the memory's keys and values, computed before
        K = split_heads(key @ self.W_k + self.b_k, h)  # (..., h, T_k, d_k)
        V = split_heads(value @ self.W_v + self.b_v, h)  # (..., h, T_k, d_k)
        if kv_cache is not None:
            K, V = kv_cache.add(K, V, key)  # (..., h, t, d_k): every position so far
        return Q, K, V


# ── 03 · Positional encoding ──────────────────────────────────────────────────────────────────


def pe_frequencies(d_model):
    """Angular frequencies w_i = 1 / 10000^(2i / d_model) of the sinusoidal encoding.

    One per sin/cos pair i = 0 .. d_model/2 - 1, shape (d_model/2,). Pair i turns w_i radians per
    position, so its wavelength 2*pi / w_i runs from 2*pi (i = 0) to 2*pi * 10000^(1 - 2/d_model).
    """
    if isinstance(d_model, bool) or not isinstance(d_model, (int, np.integer)):
        raise ValueError(f"d_model must be an int, got {type(d_model).__name__} {d_model!r}")
    if d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be even and >= 2 (sin and cos come in pairs), got d_model={d_model}"
        )
    two_i = np.arange(0, d_model, 2)  # 2i = 0, 2, ..., d_model - 2
    return 1.0 / 10000.0 ** (two_i / d_model)  # (d_model/2,)


def positional_encoding(T, d_model, dtype=np.float64):
    """The paper's sinusoidal positional encoding for positions 0 .. T-1, shape (T, d_model).

    PE[pos, 2i] = sin(pos * w_i) and PE[pos, 2i + 1] = cos(pos * w_i), with w_i from pe_frequencies:
    the sin and cos of one frequency sit side by side. Computed in float64, returned as `dtype`.
    """
    T, dtype = check_positive_int(T, "T", "the number of positions"), check_float_dtype(dtype)
    omega = pe_frequencies(d_model)  # (d_model/2,)
    angles = np.arange(T, dtype=np.float64)[:, None] * omega  # (T, d_model/2), pos * w_i
    PE = np.empty((T, d_model))
    PE[:, 0::2] = np.sin(angles)  # columns 0, 2, 4, ...
    PE[:, 1::2] = np.cos(angles)  # columns 1, 3, 5, ...
    return PE.astype(dtype, copy=False)


def relative_position_matrix(k, d_model):
    """M_k of shape (d_model, d_model) with PE[pos + k] = PE[pos] @ M_k for every position pos.

    Row vectors, weights on the right (x @ W). M_k is block-diagonal; block i rotates pair i by the
    angle k * w_i: [[cos(k w_i), -sin(k w_i)], [sin(k w_i), cos(k w_i)]]. It depends on the offset
    k and on d_model, never on pos. k may be negative: M_{-k} = M_k^T undoes M_k.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(
            f"k (the offset in positions) must be an int, got {type(k).__name__} {k!r}"
        )
    omega = pe_frequencies(d_model)  # (d_model/2,)
    cos, sin = np.cos(k * omega), np.sin(k * omega)  # (d_model/2,) each
    even = np.arange(0, d_model, 2)  # row/column of the sin in each pair
    M = np.zeros((d_model, d_model))
    # out = PE @ M: column 2i is the new sin = sin*cos(kw) + cos*sin(kw), column 2i+1 the new
    # cos = cos*cos(kw) - sin*sin(kw); row 2i holds the old sin's weights, row 2i+1 the old cos's
    M[even, even], M[even, even + 1] = cos, -sin  # row 2i: the old sin's weights
    M[even + 1, even], M[even + 1, even + 1] = sin, cos  # row 2i+1: the old cos's weights
    return M


# ── 04 · Masks ────────────────────────────────────────────────────────────────────────────────


def causal_mask(T):
    """(T, T) boolean mask, True above the diagonal: query i may not see the keys j > i.

    Row i is query i, column j is key j. Broadcasts against scores (..., T, T); combine it with a
    padding mask by `|` (blocked if either blocks).
    """
    T = check_positive_int(T, "T", "the sequence length")
    return np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T), True where j > i


def padding_mask(lengths, T):
    """(B, 1, 1, T) boolean mask, True at the padded KEY positions j >= lengths[b].

    Sequence b holds lengths[b] real tokens followed by padding up to length T. The two singleton
    axes broadcast over the heads and over the queries of scores (B, h, T_q, T_k).
    """
    T = check_positive_int(T, "T", "the padded length")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be integers of shape (B,), got shape {lengths.shape} "
                         f"and dtype {lengths.dtype}")
    if np.any((lengths < 0) | (lengths > T)):
        raise ValueError(f"lengths must lie in 0 .. T={T}, got {lengths.tolist()}")
    blocked = np.arange(T) >= lengths[:, None]  # (B, T): position j of sequence b is padding
    return blocked[:, None, None, :]  # (B, 1, 1, T)


def padding_mask_from_tokens(tokens, pad_id):
    """(B, 1, 1, T) boolean mask, True where the token ids (B, T) equal pad_id (anywhere)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer ids of shape (B, T), got shape {tokens.shape} "
                         f"and dtype {tokens.dtype}")
    return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, T)


# ── 05 · The Post-LN block ────────────────────────────────────────────────────────────────────


class NormCache(NamedTuple):
    """What LayerNorm.forward keeps for backward: the standardised input and the divisor."""

    x_hat: np.ndarray  # (..., d_model)
    std: np.ndarray  # (..., 1)


class LayerNorm(Module):
    """Layer normalisation over the last axis: each position is normalised on its own.

    LN(x) = (x - mean) / sqrt(var + eps) * gamma + beta, with the mean and the population variance
    (divide by d_model, not d_model - 1) of the d_model features of one position. gamma starts at
    ones and beta at zeros, so a fresh LayerNorm only standardises.
    """

    param_names = ("gamma", "beta")

    def __init__(self, d_model, eps=1e-5, *, dtype=np.float64):
        self.d_model, dtype = check_positive_int(d_model, "d_model"), check_float_dtype(dtype)
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0:
            raise ValueError(f"eps must be a number >= 0, got eps={eps!r}")
        self.eps = eps
        self.gamma = np.ones(d_model, dtype=dtype)  # (d_model,) scale, learned
        self.beta = np.zeros(d_model, dtype=dtype)  # (d_model,) shift, learned

    def forward(self, x):
        """x (..., d_model) -> (..., d_model), every position standardised separately."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        x_hat = x - x.mean(axis=-1, keepdims=True)  # (..., d_model): each position centred
        var = (x_hat * x_hat).mean(axis=-1, keepdims=True)  # (..., 1): population variance
        # (the same as x.var(axis=-1), which is slower: it centres x once more)
        std = np.sqrt(var + self.eps)  # (..., 1)
        x_hat /= std  # (..., d_model): mean 0, variance just below 1
        self.cache = NormCache(x_hat, std)  # kept for backward (notebook 07)
        return x_hat * self.gamma + self.beta


class FFNCache(NamedTuple):
    """What FeedForward.forward keeps for backward: its input and the hidden layer after ReLU."""

    x: np.ndarray  # (..., T, d_model)
    hidden: np.ndarray  # (..., T, d_ff)


class FeedForward(Module):
    """Position-wise feed-forward network (paper §3.3): FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2.

    The same two layers act on every position separately: nothing mixes positions. The paper
    uses d_ff = 2048 for d_model = 512 (512 -> 2048 -> 512).
    """

    param_names = ("W_1", "b_1", "W_2", "b_2")

    def __init__(self, d_model, d_ff, rng, *, dtype=np.float64):
        d_model, d_ff = check_positive_int(d_model, "d_model"), check_positive_int(d_ff, "d_ff")
        dtype = check_float_dtype(dtype)
        self.d_model, self.d_ff = d_model, d_ff
        self.W_1 = rng.normal(0.0, 1.0 / np.sqrt(d_model), (d_model, d_ff)).astype(dtype)
        self.b_1 = np.zeros(d_ff, dtype=dtype)
        self.W_2 = rng.normal(0.0, 1.0 / np.sqrt(d_ff), (d_ff, d_model)).astype(dtype)
        self.b_2 = np.zeros(d_model, dtype=dtype)

    def forward(self, x):
        """x (..., T, d_model) -> (..., T, d_model), through a hidden layer of width d_ff."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        hidden = np.maximum(x @ self.W_1 + self.b_1, 0)  # (..., T, d_ff), ReLU
        self.cache = FFNCache(x, hidden)  # kept for backward (notebook 07)
        return hidden @ self.W_2 + self.b_2  # (..., T, d_model)


def residual(x, sublayer, norm, dropout, norm_first, stages=None):
    """One sub-layer with its residual connection and LayerNorm: the wiring of every block.

    Post-LN (norm_first=False, the paper's):  out = LN(x + Dropout(Sublayer(x)))
    Pre-LN  (norm_first=True):                out = x + Dropout(Sublayer(LN(x)))
    sublayer: a function h -> (..., T, d_model), e.g. lambda h: attn.forward(h, h, h, mask).
    stages: a list to which the three intermediate arrays are appended, in the order they are
    computed (Post-LN: sub-layer, sum, norm; Pre-LN: norm, sub-layer, sum); the block explorer
    shows them. The backward pass of this wiring, residual_backward, is in notebook 07.
    """
    if norm_first:
        h = norm.forward(x)  # (..., T, d_model)
        a = dropout.forward(sublayer(h))
        steps = [h, a, x + a]
    else:
        a = dropout.forward(sublayer(x))
        r = x + a  # (..., T, d_model)
        steps = [a, r, norm.forward(r)]
    if stages is not None:
        stages += steps
    return steps[-1]  # the output


class EncoderBlock(Module):
    """One encoder layer (paper §3.1): self-attention, then a feed-forward network, each with a
    residual connection and a LayerNorm.

    Post-LN, the paper's order and the default:   x = LN(x + MHA(x));  x = LN(x + FFN(x)).
    Pre-LN (norm_first=True; the order GPT-2, 2019, and most later models use):
                                                  x = x + MHA(LN(x));  x = x + FFN(LN(x)).
    dropout: residual dropout on each sub-layer's output before it is added, default 0.0 (off;
    the paper's P_drop is 0.1); it acts only in training mode (set_training), so forward is
    deterministic otherwise.
    """

    own_cache = False  # its parts keep what backward needs

    def __init__(self, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.dropout1, self.dropout2 = (Dropout(dropout, name="dropout") for _ in range(2))

    def forward(self, x, mask=None, *, kv_cache=None, stages=None):
        """x (..., T, d_model) -> (..., T, d_model). mask: True = blocked, passed to attention.
        kv_cache: a KVCache for cached decoding with the causal mask (a decoder-only model,
        notebooks 09 and 10). stages: a list that receives the six intermediate arrays (see
        residual)."""
        x = as_real_array(x, "x")
        if x.ndim < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., T, d_model={self.d_model}) with rank >= 2, "
                             f"got {x.shape}")
        x = residual(x, lambda h: self.self_attn.forward(h, h, h, mask, kv_cache), self.norm1,
                     self.dropout1, self.norm_first, stages)  # (..., T, d_model)
        return residual(x, self.ffn.forward, self.norm2, self.dropout2, self.norm_first, stages)


class DropoutCache(NamedTuple):
    """What Dropout.forward keeps for backward: the kept entries, or None if none was dropped."""

    keep: np.ndarray | None


class Dropout(Module):
    """Inverted dropout (paper §5.4): a training device, the identity until training turns it on.

    In training mode (`rng` is a np.random.Generator, set by set_training) forward zeroes each
    entry with probability p and divides the survivors by 1 - p, so the expected value is
    unchanged; in evaluation mode (rng None, the default) it returns x itself. The cache holds
    the kept entries (None: this forward dropped nothing) for the backward pass (notebook 07).
    """

    def __init__(self, p=0.0, *, name="p"):
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 <= p < 1:
            raise ValueError(f"{name} (the dropout probability) must lie in [0, 1), "
                             f"got {name}={p!r}")
        self.p = float(p)
        self.rng = None  # None: evaluation (identity); a Generator: training

    def forward(self, x):
        if self.rng is None or self.p == 0.0:
            self.cache = DropoutCache(None)
            return x
        keep = self.rng.random(np.shape(x)) >= self.p  # True = kept
        self.cache = DropoutCache(keep)  # kept for backward (notebook 07)
        return x * keep / (1.0 - self.p)  # a Python float: float32 stays float32


def set_training(module, rng):
    """Training mode for every Dropout inside `module` (a block, a stack, a Transformer): rng, a
    np.random.Generator, draws their masks; rng=None is evaluation mode (dropout is the identity).
    """
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a np.random.Generator (training) or None (evaluation), "
                         f"got {type(rng).__name__}")
    for layer in module.modules():
        if isinstance(layer, Dropout):
            layer.rng = rng


class Stack(Module):
    """n_layers blocks of one kind, each with its own weights, applied in turn (the paper: N = 6).

    Stack(EncoderBlock, n_layers, d_model, n_heads, d_ff, rng, ...) is the encoder; the decoder
    (notebook 06) is a Stack of DecoderBlocks. With norm_first=True (Pre-LN) the residual stream
    is never normalised inside the blocks, so a final norm, `norm`, of the blocks' own kind (a
    LayerNorm here) follows the last one; Post-LN needs none (each block ends with one). Other
    arguments go to every block.
    """

    own_cache = False  # its parts keep what backward needs

    def __init__(self, block, n_layers, d_model, *args, norm_first=False, dtype=np.float64,
                 **kwargs):
        n_layers = check_positive_int(n_layers, "n_layers")
        self.layers = [block(d_model, *args, norm_first=norm_first, dtype=dtype, **kwargs)
                       for _ in range(n_layers)]
        norm = type(self.layers[0].norm1)  # the blocks' kind of norm
        self.norm = norm(d_model, dtype=dtype) if norm_first else None

    def forward(self, x, *context, kv_caches=None, **options):
        """x (..., T, d_model) -> (..., T, d_model), through every block in turn. context and
        options: what each block takes after x (mask; for decoder blocks memory, self_mask,
        memory_mask); kv_caches: one per block, for cached decoding (notebook 06)."""
        if kv_caches is not None and len(kv_caches) != len(self.layers):
            raise ValueError(f"kv_caches must hold one cache per block ({len(self.layers)}), "
                             f"got {len(kv_caches)}")
        for i, layer in enumerate(self.layers):
            if kv_caches is not None:
                options["kv_cache"] = kv_caches[i]
            x = layer.forward(x, *context, **options)
        return x if self.norm is None else self.norm.forward(x)

# ── 06 · The decoder and the whole Transformer ────────────────────────────────────────────────


class DecoderBlock(Module):
    """One decoder layer (paper §3.1): masked self-attention, cross-attention, feed-forward.

    Cross-attention takes its queries from the decoder and its keys and values from the
    encoder's output, `memory`. Each sub-layer has a residual connection and a LayerNorm:
    Post-LN by default (x = LN(x + Sublayer(x))), Pre-LN with norm_first=True. dropout: as in
    EncoderBlock, on each sub-layer's output before the residual add, in training mode only.
    """

    own_cache = False  # its parts keep what backward needs

    def __init__(self, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.norm3 = LayerNorm(d_model, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout, name="dropout")
                                                       for _ in range(3))

    def forward(self, x, memory, self_mask=None, memory_mask=None, *, kv_cache=None,
                stages=None):
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).

        self_mask blocks target keys (causal and padding), memory_mask blocks source keys
        (padding); both are boolean with True = blocked. kv_cache: for cached decoding, a dict
        {"self_attn": KVCache(), "cross_attn": KVCache(fixed=True)} that keeps the keys and
        values of earlier positions and of the memory. stages: as in EncoderBlock (nine arrays).
        """
        x, memory = as_real_array(x, "x"), as_real_array(memory, "memory")
        for name, a in (("x", x), ("memory", memory)):
            if a.ndim < 2 or a.shape[-1] != self.d_model or a.shape[-2] == 0:
                raise ValueError(f"{name} must have shape (..., T >= 1, d_model={self.d_model}), "
                                 f"got {a.shape}")
        kv = kv_cache or {}
        x = residual(x, lambda h: self.self_attn.forward(h, h, h, self_mask, kv.get("self_attn")),
                     self.norm1, self.dropout1, self.norm_first, stages)
        x = residual(x, lambda h: self.cross_attn.forward(h, memory, memory, memory_mask,
                                                          kv.get("cross_attn")),
                     self.norm2, self.dropout2, self.norm_first, stages)
        return residual(x, self.ffn.forward, self.norm3, self.dropout3, self.norm_first, stages)


@dataclass(frozen=True)
class TransformerConfig:
    """Every size and switch of a Transformer, in one place, checked once (default sizes: the
    paper's base model, d_model 512, 8 heads, d_ff 2048, N = 6; its dropout 0.1 and shared, tied
    matrices are switched off by default). See Transformer for what each means."""

    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_layers: int = 6
    max_len: int = 256
    pad_id: int | None = 0
    share_embeddings: bool = False
    tie_output: bool = False
    norm_first: bool = False
    dropout: float = 0.0
    dtype: str = "float64"

    def __post_init__(self):
        def keep(name, value):  # a frozen dataclass: set the checked value once, here
            object.__setattr__(self, name, value)
        for name in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "d_ff", "n_layers"):
            keep(name, check_positive_int(getattr(self, name), name))
        keep("max_len", check_positive_int(self.max_len, "max_len", "the longest sequence"))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads}")
        for name in ("share_embeddings", "tie_output", "norm_first"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        keep("dropout", Dropout(self.dropout, name="dropout").p)  # a probability in [0, 1)
        keep("dtype", check_float_dtype(self.dtype).name)
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab="
                             f"{self.src_vocab} and tgt_vocab={self.tgt_vocab}")
        n_ids = min(self.src_vocab, self.tgt_vocab)  # pad_id pads source and target alike
        try:
            None if self.pad_id is None else check_token_id(self.pad_id, "pad_id", n_ids)
        except ValueError:
            raise ValueError(f"pad_id must be None (no padding) or a token id in [0, {n_ids}), "
                             f"got pad_id={self.pad_id!r}") from None


class TransformerCache(NamedTuple):
    """What Transformer.forward keeps for backward: the token ids and the decoder's output."""

    src: np.ndarray  # (B, S)
    tgt: np.ndarray  # (B, T)
    x: np.ndarray  # (B, T, d_model)


class Transformer(Module):
    """The encoder-decoder of the paper: embeddings * sqrt(d_model) + PE, N encoder blocks,
    N decoder blocks, and a linear map to vocabulary logits.

    Transformer(src_vocab, tgt_vocab, rng, d_model=..., ...) takes the fields of
    TransformerConfig (kept as `config`); Transformer.from_config(config, rng) takes the object.
    share_embeddings=True uses one embedding matrix for source and target (the paper's shared
    BPE vocabulary); tie_output=True computes logits with the target embedding matrix itself,
    logits = x @ E^T (paper §3.4), instead of a separate W_out, b_out. Token id `pad_id` is
    padding: padded source keys and padded target keys are masked; so are future target keys.
    pad_id=None: no token is padding. dropout: the paper's P_drop, on the sum of embeddings and
    PE and inside every block, in training mode only (set_training).
    """

    def __init__(self, src_vocab, tgt_vocab, rng, **options):
        self.config = c = TransformerConfig(src_vocab, tgt_vocab, **options)
        self.src_vocab, self.tgt_vocab, self.d_model = c.src_vocab, c.tgt_vocab, c.d_model
        self.pad_id, self.share_embeddings, self.tie_output = (c.pad_id, c.share_embeddings,
                                                               c.tie_output)
        self.param_names = ("src_embed", *(() if c.share_embeddings else ("tgt_embed",)),
                            *(() if c.tie_output else ("W_out", "b_out")))
        self.pe = positional_encoding(c.max_len, c.d_model, dtype=c.dtype)  # (max_len, d_model)
        std = 1.0 / np.sqrt(c.d_model)  # times sqrt(d_model) below: unit-variance token vectors
        self.src_embed = rng.normal(0.0, std, (c.src_vocab, c.d_model)).astype(c.dtype)
        self.tgt_embed = (self.src_embed if c.share_embeddings
                          else rng.normal(0.0, std, (c.tgt_vocab, c.d_model)).astype(c.dtype))
        sizes = dict(norm_first=c.norm_first, dropout=c.dropout, dtype=c.dtype)
        self.encoder = Stack(EncoderBlock, c.n_layers, c.d_model, c.n_heads, c.d_ff, rng, **sizes)
        self.decoder = Stack(DecoderBlock, c.n_layers, c.d_model, c.n_heads, c.d_ff, rng, **sizes)
        if not c.tie_output:
            self.W_out = rng.normal(0.0, std, (c.d_model, c.tgt_vocab)).astype(c.dtype)
            self.b_out = np.zeros(c.tgt_vocab, dtype=c.dtype)
        self.src_dropout, self.tgt_dropout = (Dropout(c.dropout, name="dropout")  # on x + PE
                                              for _ in range(2))

    @classmethod
    def from_config(cls, config, rng):
        """Transformer(**fields of `config`), for a TransformerConfig."""
        return cls(rng=rng, **asdict(config))

    def embed(self, tokens, table, start=0):
        """Token vectors * sqrt(d_model) + PE: (B, T) ids -> (B, T, d_model); the first token
        sits at position `start`."""
        T = tokens.shape[-1]
        scale = np.sqrt(self.d_model, dtype=table.dtype)  # np.sqrt(d_model) alone is float64
        return table[tokens] * scale + self.pe[start:start + T]

    def encode(self, src):
        """src (B, S) ids -> memory (B, S, d_model) and the source padding mask (B, 1, 1, S)."""
        src = check_token_ids(src, "src", self.src_vocab, len(self.pe))
        src_mask = None if self.pad_id is None else padding_mask_from_tokens(src, self.pad_id)
        x = self.src_dropout.forward(self.embed(src, self.src_embed))  # (B, S, d_model)
        return self.encoder.forward(x, src_mask), src_mask

    def decode(self, tgt, memory, src_mask, kv_caches=None):
        """tgt (B, T) ids (the decoder input, starting with BOS) -> decoder output (B, T, d_model).

        With kv_caches (cached decoding, see KVCache) tgt is still the whole prefix, but only
        its positions not yet cached run through the blocks, and the output has those only.
        """
        tgt = check_token_ids(tgt, "tgt", self.tgt_vocab, len(self.pe))
        if tgt.shape[0] != memory.shape[0]:
            raise ValueError(f"batch sizes differ: tgt has B={tgt.shape[0]}, the source "
                             f"B={memory.shape[0]}")
        start = 0 if kv_caches is None else kv_caches[0]["self_attn"].start(tgt)  # cached
        self_mask = causal_mask(tgt.shape[1])[start:]  # (T - start, T): new queries, all keys
        if self.pad_id is not None:
            self_mask = self_mask | padding_mask_from_tokens(tgt, self.pad_id)  # (B, 1, ., T)
        x = self.tgt_dropout.forward(self.embed(tgt[:, start:], self.tgt_embed, start))
        return self.decoder.forward(x, memory, self_mask, src_mask, kv_caches=kv_caches)

    def logits(self, x):
        """Decoder output (..., d_model) -> vocabulary logits (..., tgt_vocab)."""
        if self.tie_output:
            return x @ self.tgt_embed.swapaxes(-1, -2)
        return x @ self.W_out + self.b_out

    def forward(self, src, tgt):
        """Teacher forcing: src (B, S), tgt (B, T) -> logits (B, T, tgt_vocab)."""
        src, tgt = np.asarray(src), np.asarray(tgt)
        if src.ndim == 2 and tgt.ndim == 2 and src.shape[0] != tgt.shape[0]:
            raise ValueError(f"batch sizes differ: src {src.shape}, tgt {tgt.shape}")
        memory, src_mask = self.encode(src)
        x = self.decode(tgt, memory, src_mask)  # (B, T, d_model)
        self.cache = TransformerCache(src, tgt, x)  # kept for backward (notebook 07)
        return self.logits(x)


def transformer_parameter_count(d_model, n_heads, d_ff, n_layers, src_vocab, tgt_vocab, *,
                                share_embeddings=False, tie_output=False, norm_first=False):
    """Parameters of Transformer(...) with these settings, by formula (n_heads does not matter)."""
    attention = 4 * d_model * d_model + 4 * d_model  # W_q, W_k, W_v, W_o and their biases
    ffn = 2 * d_model * d_ff + d_ff + d_model  # W_1, b_1, W_2, b_2
    norm = 2 * d_model  # gamma, beta
    encoder = n_layers * (attention + ffn + 2 * norm) + (norm if norm_first else 0)
    decoder = n_layers * (2 * attention + ffn + 3 * norm) + (norm if norm_first else 0)
    embeddings = src_vocab * d_model + (0 if share_embeddings else tgt_vocab * d_model)
    output = 0 if tie_output else d_model * tgt_vocab + tgt_vocab
    return embeddings + encoder + decoder + output


# ── 08 · What attention costs ─────────────────────────────────────────────────────────────────


def online_attention(Q, K, V, mask=None, block_size=256):
    """scaled_dot_product_attention's output without ever building the (T_q, T_k) weights.

    Walks over blocks of `block_size` keys (the idea behind FlashAttention), keeping for every
    query a running maximum m of its scores, a running sum l of exp(score - m) and a running
    weighted sum of values; when a block raises the maximum, the old sums are rescaled by
    exp(m_old - m_new). Memory is O(T_q * block_size) instead of O(T_q * T_k).
    Shapes and mask as in scaled_dot_product_attention; returns the output (..., T_q, d_v) only.
    A query whose keys are all blocked gets a zero output (never NaN).
    """
    Q, K, V = as_real_array(Q, "Q"), as_real_array(K, "K"), as_real_array(V, "V")
    mask = None if mask is None else np.asarray(mask)
    check_attention_inputs(Q, K, V, mask)
    block_size = check_positive_int(block_size, "block_size")
    dtype = np.result_type(Q, K, V)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    K, V = K.astype(dtype, copy=False), V.astype(dtype, copy=False)
    Q = Q.astype(dtype, copy=False) / np.sqrt(Q.shape[-1], dtype=dtype)  # scale Q, not scores
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if mask is not None:
        mask = np.broadcast_to(mask, (*mask.shape[:-1], T_k))  # a view: the key axis in full
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    m = np.full((*lead, T_q, 1), -np.inf, dtype=dtype)  # running max of each query's scores
    l = np.zeros((*lead, T_q, 1), dtype=dtype)  # running sum of exp(score - m)
    acc = np.zeros((*lead, T_q, V.shape[-1]), dtype=dtype)  # running sum of exp(score - m) v
    for start in range(0, T_k, block_size):  # the only loop: over blocks of keys
        keys = slice(start, start + block_size)
        s = Q @ K[..., keys, :].swapaxes(-1, -2)  # (..., T_q, b): this block's scores only
        if mask is not None:
            np.copyto(s, -np.inf, where=mask[..., keys])  # blocked keys: exp(-inf) = 0
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (..., T_q, 1)
        shift = np.where(np.isfinite(m_new), m_new, 0)  # all blocked so far: no inf - inf
        s -= shift
        np.exp(s, out=s)  # (..., T_q, b), in place: no second block-sized array
        rescale = np.exp(m - shift)  # (..., T_q, 1), <= 1; 0 while nothing was seen
        l *= rescale
        l += s.sum(axis=-1, keepdims=True)
        acc *= rescale
        acc += s @ V[..., keys, :]  # (..., T_q, d_v)
        m = m_new
        del s  # free this block's scores before the next block's product
    acc /= np.where(l > 0, l, 1)  # fully blocked rows: 0 / 1 = 0
    return acc  # (..., T_q, d_v)
