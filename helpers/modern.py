"""What changed since 2017, in NumPy: RMSNorm, SwiGLU, RoPE, grouped-query attention, the block
and the decoder-only model of today's language models, and FlashAttention's tiling (notebook 09).

Every definition below is written in notebook 09 first, in a cell that starts with
``# saved in helpers/modern.py``; ``tests/test_sync.py`` proves the two copies are identical.
Nothing here rewires a block or re-implements attention: ModernBlock is notebook 05's EncoderBlock
with other parts (its forward and backward, and `residual`, are inherited), and
GroupedQueryAttention is notebook 02's MultiHeadAttention with another projection step (its
forward, with the key/value cache of notebook 06, is inherited). Every new module has its
backward pass here; importing this module imports helpers.training, which attaches the others.
"""

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from helpers.decoding import KVCache
from helpers.module import Module, collect_grads
from helpers.training import attention_backward, embedding_backward, linear_backward, sum_rows
from helpers.transformer import (
    Dropout,
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    Stack,
    causal_mask,
    merge_heads,
    pe_frequencies,
    positional_encoding,
    split_heads,
)
from helpers.validation import (
    as_real_array,
    check_flag,
    check_float_dtype,
    check_int,
    check_number,
    check_positive_int,
    check_rng,
    check_shape,
    check_token_ids,
)

# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────


class RMSCache(NamedTuple):
    """What RMSNorm.forward keeps for backward: the normalised input and the divisor."""

    x_hat: np.ndarray  # (..., d_model), x / rms
    rms: np.ndarray  # (..., 1)


class RMSNorm(Module):
    """Root-mean-square normalisation (Zhang and Sennrich, 2019), the norm of llama and Mistral.

    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * gamma, over the last axis: LayerNorm without the
    mean, so nothing is subtracted and there is no beta. eps = 1e-5 by default: the value Llama 2
    passes to every RMSNorm (ModelArgs.norm_eps in meta-llama/llama, llama/model.py), and this
    series' LayerNorm's.
    """

    param_names = ("gamma",)

    def __init__(self, d_model, eps=1e-5, *, dtype=np.float64):
        self.d_model, dtype = check_positive_int(d_model, "d_model"), check_float_dtype(dtype)
        self.eps = check_number(eps, "eps", "[0, inf)")
        self.gamma = np.ones(d_model, dtype=dtype)  # (d_model,) scale, learned

    def forward(self, x):
        """x (..., d_model) -> (..., d_model), every position divided by its root mean square."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        x = x.astype(np.result_type(x.dtype, self.gamma.dtype), copy=False)  # 16**2 in uint8: 0
        wide = x.astype(np.promote_types(x.dtype, np.float32), copy=False)  # float16: 300**2 inf
        with np.errstate(over="ignore"):  # an overflow is refused just below, by name
            rms = np.sqrt((wide * wide).mean(axis=-1, keepdims=True) + self.eps)  # (..., 1)
        rms = rms.astype(x.dtype, copy=False)
        if np.isinf(rms).any() and np.isfinite(x).all():  # x * x overflowed: x / inf would be 0
            raise ValueError(f"x has values whose squares overflow {x.dtype} (largest |x| "
                             f"{np.abs(x).max():.3g}): scale it down first")
        x_hat = x / rms  # (..., d_model)
        self.cache = RMSCache(x_hat, rms)  # kept for backward
        return x_hat * self.gamma

    def backward(self, d_out):
        """(d_x, {"gamma": ...}). With g = d_out * gamma: d_x = (g - x_hat * mean(g * x_hat)) /
        rms, LayerNorm's rule (notebook 07) without its mean(g) term: nothing was subtracted."""
        x_hat, rms = self.saved()
        d_out = check_shape(d_out, "d_out", x_hat.shape)
        g = d_out * self.gamma  # (..., d_model)
        d_x = (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / rms
        return d_x, {"gamma": sum_rows(d_out * x_hat)}


def sigmoid(a):
    """1 / (1 + exp(-a)). For a large negative a, exp(-a) overflows to inf and the result is
    1 / inf = 0, which is right: the overflow warning is silenced, not the value."""
    a = as_real_array(a, "a")
    e = np.empty(a.shape, np.result_type(a.dtype, 1.0))  # float32 stays float32; ints: float64
    with np.errstate(over="ignore"):
        np.exp(np.negative(a, dtype=e.dtype), out=e)  # negated as floats: -uint8(3) is 253
    e += 1.0
    return np.reciprocal(e, out=e)  # in place: no third array of a's size


def swiglu_hidden(d_model):
    """The hidden width 8/3 d_model (rounded) that gives SwiGLU's three matrices the 8 d_model^2
    weights of the paper's two-matrix ReLU network of width 4 d_model."""
    return round(8 * check_positive_int(d_model, "d_model") / 3)


class SwiGLUCache(NamedTuple):
    """What SwiGLU.forward keeps for backward."""

    x: np.ndarray  # (..., T, d_model), the input
    a: np.ndarray  # (..., T, d_ff), x W_1: the gate, before Swish
    b: np.ndarray  # (..., T, d_ff), x V: the value it gates
    s: np.ndarray  # (..., T, d_ff), sigmoid(a)


class SwiGLU(Module):
    """The gated feed-forward network of PaLM and llama (Shazeer, 2020, "GLU variants"):

    SwiGLU(x) = (Swish(x W_1) * (x V)) W_2, with Swish(a) = a * sigmoid(a) (also called SiLU).
    Two matrices in, W_1 (the gate) and V, one out, W_2; no biases, as in that paper and llama.
    d_ff, the hidden width, is usually 8/3 d_model (swiglu_hidden): the parameters of the paper's
    ReLU network (notebook 05) with d_ff = 4 d_model.
    """

    param_names = ("W_1", "V", "W_2")

    def __init__(self, d_model, d_ff, rng, *, dtype=np.float64):
        d_model, d_ff = check_positive_int(d_model, "d_model"), check_positive_int(d_ff, "d_ff")
        dtype = check_float_dtype(dtype)
        self.d_model, self.d_ff = d_model, d_ff
        self.W_1 = rng.normal(0.0, 1.0 / np.sqrt(d_model), (d_model, d_ff)).astype(dtype)
        self.V = rng.normal(0.0, 1.0 / np.sqrt(d_model), (d_model, d_ff)).astype(dtype)
        self.W_2 = rng.normal(0.0, 1.0 / np.sqrt(d_ff), (d_ff, d_model)).astype(dtype)

    def forward(self, x):
        """x (..., T, d_model) -> (..., T, d_model), through a gated hidden layer of width d_ff."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        a, b = x @ self.W_1, x @ self.V  # (..., T, d_ff) each
        s = sigmoid(a)
        self.cache = SwiGLUCache(x, a, b, s)  # kept for backward
        return (a * s * b) @ self.W_2  # (..., T, d_model)

    def backward(self, d_out):
        """(d_x, grads). The product rule splits the hidden gradient between the two branches;
        the gate's passes Swish'(a) = s + a s (1 - s), which is 0 only at Swish's minimum (a
        near -1.28), where ReLU's derivative is 0 for every negative a."""
        x, a, b, s = self.saved()
        d_out = check_shape(d_out, "d_out", x.shape)
        swish = a * s  # (..., T, d_ff)
        grads = {}
        d_hidden, grads["W_2"], _ = linear_backward(swish * b, self.W_2, d_out)
        d_a = d_hidden * b * (s + swish * (1.0 - s))  # through Swish: s + a s (1 - s)
        d_x, grads["W_1"], _ = linear_backward(x, self.W_1, d_a)
        d_x_v, grads["V"], _ = linear_backward(x, self.V, d_hidden * swish)
        return d_x + d_x_v, collect_grads(self, grads)


def rotations(T, d, start=0):
    """e^(i p w_i) for the positions p = start .. start + T - 1 and the d/2 pairs of rope: (T, d/2)
    complex. A model computes its table once, up to its max_len, and every call of rope slices
    the rows of its positions from it, as llama precomputes freqs_cis."""
    T, start = check_int(T, "T", "[0, inf)"), check_int(start, "start", "(-inf, inf)")
    if check_int(d, "d", "[2, inf)") % 2:
        raise ValueError(f"d must be even (rope turns pairs of features), got d={d}")
    angles = np.arange(start, start + T)[:, None] * pe_frequencies(d)  # (T, d/2): p * w_i
    return np.exp(1j * angles)  # (T, d/2)


def rope(x, start=0, *, inverse=False, table=None):
    """Rotary position embedding (Su et al., 2021, RoFormer): rotate every pair (x[2i], x[2i+1])
    of the last axis of x (..., T, d) at position p = start + t by the angle p * w_i.

    w_i are notebook 03's frequencies, pe_frequencies(d). The pairs are adjacent, as in the
    RoFormer paper and Meta's llama (GPT-NeoX and Hugging Face pair i with i + d/2 instead: the
    same rotation of permuted features). A pair read as the complex number x[2i] + i x[2i+1] is
    rotated by multiplying it with e^(i p w_i), which is how this computes it (as llama does).
    inverse=True rotates by minus the angle: the transpose, which is the backward pass. A query
    at position m and a key at position n, both rotated so, score as if the key alone were turned
    by (n - m) w_i in each pair i: where they are matters only through n - m. table: a model's
    rotations(max_len, d), whose rows start .. start + T - 1 are used (None: computed for this
    call). Integers come back as float64;
    float16 is turned in float32 (a pair of float16 is no complex number).
    """
    x, start = as_real_array(x, "x"), check_int(start, "start", "(-inf, inf)")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"x must have shape (..., T, d) with d even (rope turns pairs), got "
                         f"{x.shape}")
    T, d = x.shape[-2], x.shape[-1]
    if table is None:
        turn = rotations(T, d, start)  # (T, d/2): e^(i p w_i)
    elif not isinstance(table, np.ndarray) or table.dtype.kind != "c" or table.ndim != 2 \
            or table.shape[1] != d // 2 or not 0 <= start <= len(table) - T:
        raise ValueError(f"positions {start}..{start + T - 1} of d={d} are not in the table of "
                         f"{np.shape(table)} = (max_len, d/2) rotations, rotations(max_len, d)")
    else:
        turn = table[start:start + T]
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    work = np.promote_types(dtype, np.float32)  # the type the pairs are turned in
    if x.dtype != work or x.strides[-1] != x.itemsize:  # pairs adjacent in memory, as complex
        x = np.ascontiguousarray(x, dtype=work)
    z = x.view(np.result_type(work, np.complex64))  # (..., T, d/2): x[2i] + i x[2i+1]
    turn = (turn.conj() if inverse else turn).astype(z.dtype, copy=False)
    return (z * turn).view(work).astype(dtype, copy=False)  # (..., T, d)


class GroupedQueryAttention(MultiHeadAttention):
    """Multi-head attention whose h query heads share g = n_kv_heads key/value heads (Ainslie et
    al., 2023): query head i reads key/value head i // (h / g). g = h is multi-head attention,
    g = 1 multi-query attention (Shazeer, 2019). W_k and W_v are (d_model, g d_k), so the
    key/value cache holds g heads, h / g times less than multi-head attention's.

    rope=True rotates every query and key by its position before the scores (rope), with the
    rotations of positions 0 .. max_len - 1 computed once (`turns`). forward is
    MultiHeadAttention's (notebook 02, with notebook 06's KVCache); only `project` differs. The
    weights are drawn as MultiHeadAttention's with the same generator, then W_k, b_k, W_v and
    b_v keep their first g heads: with g = h and rope=False the two layers are identical.
    bias=False is llama's layer, without biases: b_q, b_k, b_v and b_o stay the constant 0 they
    start at and are no parameters (nothing learns them). Self-attention only (a KVCache of
    fixed=True, cross-attention's, is refused). qk_norm=True (Going further, QK-norm: Qwen3's
    and Gemma 3's q_norm and k_norm) puts an RMSNorm of epsilon eps on every query head and key
    head before RoPE, one gain of size d_k for the queries and one for the keys.
    """

    def __init__(self, d_model, n_heads, n_kv_heads, rng, *, rope=True, max_len=256, bias=True,
                 qk_norm=False, eps=1e-5, dtype=np.float64):
        g, self.rotary = check_positive_int(n_kv_heads, "n_kv_heads"), check_flag(rope, "rope")
        self.bias = check_flag(bias, "bias")
        if not self.bias:  # the biases, all 0, are then constants
            self.param_names = ("W_q", "W_k", "W_v", "W_o")
        max_len = check_positive_int(max_len, "max_len")
        super().__init__(d_model, n_heads, rng, dtype=dtype)
        if self.n_heads % g:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={g}")
        if self.rotary and self.d_k % 2:
            raise ValueError(f"rope turns pairs of features: the head width d_model / n_heads = "
                             f"{self.d_k} must be even")
        self.n_kv_heads = g
        self.turns = rotations(max_len, self.d_k) if self.rotary else None  # (max_len, d_k/2)
        kv = slice(0, g * self.d_k)  # the first g heads' columns
        self.W_k, self.b_k = self.W_k[:, kv].copy(), self.b_k[kv].copy()  # (d_model, g d_k)
        self.W_v, self.b_v = self.W_v[:, kv].copy(), self.b_v[kv].copy()
        self.qk_norm = check_flag(qk_norm, "qk_norm")
        if self.qk_norm:  # learned gains only: the weights drawn above are the same either way
            self.q_norm, self.k_norm = (RMSNorm(self.d_k, eps, dtype=dtype) for _ in range(2))

    def project(self, query, key, value, kv_cache=None):
        """Q (..., h, T_q, d_k); K and V with the g shared heads each repeated for the h / g query
        heads of its group, (..., h, t, d_k). With rope the positions continue after the
        kv_cache's (llama's start_pos); the cache stores g heads, already rotated."""
        if kv_cache is not None and kv_cache.fixed:
            raise ValueError("GroupedQueryAttention is self-attention: a KVCache with fixed=True "
                             "(cross-attention's) does not fit")
        start = 0 if kv_cache is None else kv_cache.length  # positions cached before this call
        Q = split_heads(query @ self.W_q + self.b_q, self.n_heads)  # (..., h, T_q, d_k)
        K = split_heads(key @ self.W_k + self.b_k, self.n_kv_heads)  # (..., g, T_k, d_k)
        V = split_heads(value @ self.W_v + self.b_v, self.n_kv_heads)  # (..., g, T_k, d_k)
        if self.qk_norm:  # every head's d_k features, before the rotation
            Q, K = self.q_norm.forward(Q), self.k_norm.forward(K)
        if self.rotary:
            Q, K = rope(Q, start, table=self.turns), rope(K, start, table=self.turns)
        if kv_cache is not None:
            K, V = kv_cache.add(K, V, key)  # (..., g, t, d_k): every position so far
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # each key/value head serves the h / g query heads of its group
            K, V = np.repeat(K, group, axis=-3), np.repeat(V, group, axis=-3)
        return Q, K, V  # (..., h, t, d_k) each

    def backward(self, d_out):
        """((d_query, d_key, d_value), grads), as MultiHeadAttention.backward (notebook 07), with
        two more steps back through `project`: a shared key/value head collects the gradients
        of the h / g query heads that read it (a sum), and the rotation is undone (its
        transpose). A forward that read a filled KVCache (decoding) has no backward."""
        c = self.saved()
        if c.K.shape[-2] != c.key.shape[-2]:
            raise ValueError("GroupedQueryAttention.backward: the last forward read keys cached "
                             "by earlier calls (decoding); run forward without a kv_cache first")
        d_out = check_shape(d_out, "d_out", c.heads.shape)  # (..., T_q, d_model)
        grads = {}
        d_heads, grads["W_o"], grads["b_o"] = linear_backward(c.heads, self.W_o, d_out)
        d_heads = split_heads(d_heads, self.n_heads)  # (..., h, T_q, d_k)
        d_Q, d_K, d_V = attention_backward(c.Q, c.K, c.V, c.weights, d_heads)
        *lead, h, T_k, d_k = d_K.shape
        if self.n_kv_heads < h:  # a shared head collects the gradients of its whole group
            groups = (*lead, self.n_kv_heads, h // self.n_kv_heads, T_k, d_k)
            d_K, d_V = d_K.reshape(groups).sum(axis=-3), d_V.reshape(groups).sum(axis=-3)
        if self.rotary:  # (..., g, T_k, d_k) from here on, for keys and values
            d_Q, d_K = (rope(d, inverse=True, table=self.turns) for d in (d_Q, d_K))
        if self.qk_norm:
            d_Q, grads["q_norm"] = self.q_norm.backward(d_Q)  # (..., h, T_q, d_k)
            d_K, grads["k_norm"] = self.k_norm.backward(d_K)  # (..., g, T_k, d_k)
        d_query, grads["W_q"], grads["b_q"] = linear_backward(c.query, self.W_q, merge_heads(d_Q))
        d_key, grads["W_k"], grads["b_k"] = linear_backward(c.key, self.W_k, merge_heads(d_K))
        d_value, grads["W_v"], grads["b_v"] = linear_backward(c.value, self.W_v, merge_heads(d_V))
        if not self.bias:  # the constant 0s: no gradient kept
            grads = {name: g for name, g in grads.items() if not name.startswith("b_")}
        return (d_query, d_key, d_value), collect_grads(self, grads)


NORMS = {"layer": LayerNorm, "rms": RMSNorm}
FFNS = {"relu": FeedForward, "swiglu": SwiGLU}


def check_parts(norm, ffn):
    """A ValueError unless `norm` names one of NORMS and `ffn` one of FFNS."""
    if not isinstance(norm, str) or norm not in NORMS or not isinstance(ffn, str) \
            or ffn not in FFNS:
        raise ValueError(f"norm must be one of {list(NORMS)} and ffn one of {list(FFNS)}, "
                         f"got norm={norm!r}, ffn={ffn!r}")


class ModernBlock(EncoderBlock):
    """The block of today's decoder-only language models (llama, Mistral), under the causal mask:

        x = x + Attention(RMSNorm(x));  x = x + SwiGLU(RMSNorm(x))

    with grouped-query attention and RoPE. Every piece switches back to 2017's: norm="layer"
    (LayerNorm), ffn="relu" (FeedForward; d_ff is the hidden width either way), rope=False,
    n_kv_heads=None (= n_heads), norm_first=False (Post-LN). With all five, and the same
    generator, it is notebook 05's EncoderBlock, weight for weight: the decoder-only block of
    notebook 06. forward and backward are EncoderBlock's (two calls of `residual`): only the
    parts differ. max_len: the positions RoPE has rotations for; bias=False: attention without
    biases (llama's; SwiGLU has none); eps: the norms' epsilon; qk_norm: GroupedQueryAttention's.
    """

    def __init__(self, d_model, n_heads, d_ff, rng, *, n_kv_heads=None, norm="rms",
                 ffn="swiglu", rope=True, norm_first=True, max_len=256, bias=True, eps=1e-5,
                 qk_norm=False, dropout=0.0, dtype=np.float64):
        check_parts(norm, ffn)
        self.d_model, self.norm_first = d_model, check_flag(norm_first, "norm_first")
        self.self_attn = GroupedQueryAttention(
            d_model, n_heads, n_heads if n_kv_heads is None else n_kv_heads, rng, rope=rope,
            max_len=max_len, bias=bias, qk_norm=qk_norm, eps=eps, dtype=dtype)
        self.ffn = FFNS[ffn](d_model, d_ff, rng, dtype=dtype)
        self.norm1, self.norm2 = (NORMS[norm](d_model, eps, dtype=dtype) for _ in range(2))
        self.dropout1, self.dropout2 = (Dropout(dropout, name="dropout") for _ in range(2))


PAPER_2017 = {"norm": "layer", "ffn": "relu", "position": "sinusoidal", "norm_first": False}
TODAY = {"norm": "rms", "ffn": "swiglu", "position": "rope", "norm_first": True}
LLAMA = {**TODAY, "bias": False, "embed_scale": False, "tie_output": False}  # see llama_config
POSITIONS = ("sinusoidal", "rope", "none")


@dataclass(frozen=True)
class DecoderOnlyConfig:
    """Every size and switch of a DecoderOnly model, checked once. The defaults are today's
    recipe (TODAY: pre-norm RMSNorm, SwiGLU, RoPE); PAPER_2017 switches to the paper's parts
    (Post-LN LayerNorm, ReLU, sinusoidal positions). n_kv_heads None means n_heads (multi-head
    attention); position "none" adds no position at all. bias=False drops the attention's and
    the output's biases (with SwiGLU, which has none), embed_scale=False the sqrt(d_model) on
    the token vectors, norm_eps is every norm's epsilon: LLAMA sets the first two, llama_config
    all of them. See DecoderOnly."""

    vocab: int
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int | None = None
    d_ff: int = 171
    n_layers: int = 2
    max_len: int = 256
    norm: str = "rms"
    ffn: str = "swiglu"
    position: str = "rope"
    norm_first: bool = True
    tie_output: bool = False
    bias: bool = True
    embed_scale: bool = True
    norm_eps: float = 1e-5
    dropout: float = 0.0
    dtype: str = "float64"

    def __post_init__(self):
        def keep(name, value):  # a frozen dataclass: set the checked value once, here
            object.__setattr__(self, name, value)
        for name in ("vocab", "d_model", "n_heads", "d_ff", "n_layers", "max_len"):
            keep(name, check_positive_int(getattr(self, name), name))
        g = self.n_heads if self.n_kv_heads is None else check_positive_int(self.n_kv_heads,
                                                                            "n_kv_heads")
        if self.d_model % self.n_heads or self.n_heads % g:
            raise ValueError(f"need d_model={self.d_model} a multiple of n_heads={self.n_heads}, "
                             f"and n_heads a multiple of n_kv_heads={g}")
        if not isinstance(self.position, str) or self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if self.position == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"rope turns pairs of features in every head: the head width "
                             f"d_model / n_heads = {self.d_model // self.n_heads} must be even")
        if self.position == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions are (sin, cos) pairs added to the token "
                             f"vectors: d_model = {self.d_model} must be even")
        for name in ("norm_first", "tie_output", "bias", "embed_scale"):
            keep(name, check_flag(getattr(self, name), name))
        if not self.bias and self.ffn != "swiglu":
            raise ValueError(f"bias=False needs ffn='swiglu' (notebook 05's ReLU network keeps "
                             f"its biases), got ffn={self.ffn!r}")
        keep("norm_eps", check_number(self.norm_eps, "norm_eps", "[0, inf)"))
        keep("dropout", Dropout(self.dropout, name="dropout").p)
        keep("dtype", check_float_dtype(self.dtype).name)
        check_parts(self.norm, self.ffn)

    def build(self, rng):
        """The model of this configuration, its weights drawn from `rng`."""
        return DecoderOnly.from_config(self, rng)


class LMCache(NamedTuple):
    """What DecoderOnly.forward keeps for backward: the token ids and the last hidden states."""

    tokens: np.ndarray  # (B, T)
    x: np.ndarray  # (B, T, d_model), after the last block (and the final norm of pre-norm)


class DecoderOnly(Module):
    """A decoder-only language model (GPT, llama): token vectors * sqrt(d_model) (+ notebook 03's
    sinusoidal PE when position="sinusoidal"), n_layers ModernBlocks in notebook 05's Stack under
    the causal mask, and a linear map to the logits of the next token (tie_output=True: x @ E^T
    with the embedding matrix E itself). Position t sees tokens 0..t only. With LLAMA's
    switches (llama_config) it is llama's model: no biases, no sqrt(d_model), untied output.

    DecoderOnly(vocab, rng, d_model=..., ...) takes the fields of DecoderOnlyConfig (kept as
    `config`); the defaults build today's recipe, **PAPER_2017 the paper's parts. dropout: on
    the sum of embeddings (and PE) and inside every block, in training mode only.
    """

    Config, Block = DecoderOnlyConfig, ModernBlock  # what a variant of the model may replace

    def __init__(self, vocab, rng, **options):
        self.config = c = self.Config(vocab, **options)
        rng = check_rng(rng)
        self.vocab, self.d_model, self.tie_output = c.vocab, c.d_model, c.tie_output
        output = () if c.tie_output else ("W_out", "b_out") if c.bias else ("W_out",)
        self.param_names = ("token_embed", *output)
        self.pe = (positional_encoding(c.max_len, c.d_model, dtype=c.dtype)
                   if c.position == "sinusoidal" else None)  # (max_len, d_model) or None
        std = 1.0 / np.sqrt(c.d_model)  # times sqrt(d_model) below: unit-variance token vectors
        self.token_embed = rng.normal(0.0, std, (c.vocab, c.d_model)).astype(c.dtype)
        self.decoder = Stack(self.Block, c.n_layers, c.d_model, c.n_heads, c.d_ff, rng,
                             norm_first=c.norm_first, dtype=c.dtype, **self.block_options())
        if self.decoder.norm is not None:  # the final norm of pre-norm, built by Stack
            self.decoder.norm.eps = c.norm_eps
        if not c.tie_output:
            self.W_out = rng.normal(0.0, std, (c.d_model, c.vocab)).astype(c.dtype)
            self.b_out = np.zeros(c.vocab, dtype=c.dtype)  # bias=False: the constant 0
        self.dropout = Dropout(c.dropout, name="dropout")  # on the token vectors (+ PE)

    @classmethod
    def from_config(cls, config, rng):
        """DecoderOnly(**fields of `config`), for a DecoderOnlyConfig."""
        return cls(rng=rng, **asdict(config))

    def block_options(self):
        """The switches every block is built with, from the configuration."""
        c = self.config
        return {"n_kv_heads": c.n_kv_heads, "norm": c.norm, "ffn": c.ffn,
                "rope": c.position == "rope", "max_len": c.max_len, "bias": c.bias,
                "eps": c.norm_eps, "dropout": c.dropout}

    def mask(self, T):
        """The blocks' mask for T positions, True = blocked: the causal mask."""
        return causal_mask(T)

    def kv_caches(self):
        """A fresh KVCache per block, for cached decoding (generate)."""
        return [KVCache() for _ in self.decoder.layers]

    def decode(self, tokens, kv_caches=None):
        """tokens (B, T) ids -> the last block's output (B, T, d_model), final norm included.

        With kv_caches (one KVCache per block, for generate) tokens is still the whole prefix,
        but only its positions not yet cached run through the blocks, and the output has those
        only, as Transformer.decode does (notebook 06).
        """
        tokens = check_token_ids(tokens, "tokens", self.vocab, self.config.max_len)
        T, start = tokens.shape[1], 0
        if kv_caches is not None:
            if not isinstance(kv_caches, list) or len(kv_caches) != len(self.decoder.layers) \
                    or not all(isinstance(c, KVCache) and not c.fixed for c in kv_caches) \
                    or len({c.length for c in kv_caches}) != 1:
                raise ValueError(f"kv_caches must be a list of {len(self.decoder.layers)} "
                                 "self-attention KVCaches, one per block, of one length")
            start = kv_caches[0].start(tokens)  # positions already cached
        x = self.token_embed[tokens[:, start:]] * self.scale()  # (B, T - start, d_model)
        if self.pe is not None:
            x = x + self.pe[start:T]
        x = self.dropout.forward(x)
        return self.decoder.forward(x, self.mask(T)[start:], kv_caches=kv_caches)

    def scale(self):
        """What the token vectors are multiplied by: sqrt(d_model), or 1 (embed_scale=False)."""
        return np.sqrt(self.d_model if self.config.embed_scale else 1, dtype=self.token_embed.dtype)

    def logits(self, x):
        """Hidden states (..., d_model) -> next-token logits (..., vocab)."""
        x = check_shape(x, "x", (*np.shape(x)[:-1], self.d_model))
        if self.tie_output:
            return x @ self.token_embed.swapaxes(-1, -2)
        return x @ self.W_out + self.b_out

    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, vocab); position t predicts token t + 1."""
        tokens = np.asarray(tokens)
        x = self.decode(tokens)  # (B, T, d_model)
        self.cache = LMCache(tokens, x)  # kept for backward
        return self.logits(x)

    def backward(self, d_logits):
        """(None, grads) for the loss gradient of the logits (B, T, vocab): token ids have no
        gradient. A tied matrix sums the gradients of its two uses."""
        tokens, x = self.saved()
        if np.shape(d_logits) != (*tokens.shape, self.vocab):
            raise ValueError(f"d_logits must have the logits' shape {(*tokens.shape, self.vocab)}"
                             f", got {np.shape(d_logits)}")
        grads = {}
        if self.tie_output:  # logits = x @ E^T
            d_x = d_logits @ self.token_embed  # (B, T, d_model)
        else:
            d_x, grads["W_out"], grads["b_out"] = linear_backward(x, self.W_out, d_logits)
            if not self.config.bias:  # b_out is the constant 0: no gradient kept
                del grads["b_out"]
        d_e, grads["decoder"] = self.decoder.backward(d_x)
        d_e = self.dropout.backward(d_e)[0]
        grads["token_embed"] = embedding_backward(self.token_embed, tokens, d_e, self.scale())
        if self.tie_output:
            rows = d_logits.reshape(-1, self.vocab)  # (B T, vocab)
            grads["token_embed"] += rows.T @ x.reshape(-1, self.d_model)
        return None, collect_grads(self, grads)


def llama_hidden(d_model, multiple_of=256, ffn_dim_multiplier=None):
    """Llama 2's SwiGLU width (meta-llama/llama, llama/model.py, FeedForward): 2/3 of 4 d_model,
    times ffn_dim_multiplier if given, rounded up to a multiple of `multiple_of`."""
    hidden = int(2 * 4 * check_positive_int(d_model, "d_model") / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(check_number(ffn_dim_multiplier, "ffn_dim_multiplier", "(0, inf)") * hidden)
    multiple_of = check_positive_int(multiple_of, "multiple_of")
    return multiple_of * -(-hidden // multiple_of)  # rounded up


def llama_config(vocab, d_model, n_layers, n_heads, n_kv_heads=None, *, multiple_of=256,
                 ffn_dim_multiplier=None, norm_eps=1e-5, max_len=2048, dtype="float64"):
    """A DecoderOnlyConfig of llama's model, from the fields of a Llama 2 `params.json` (dim,
    n_layers, n_heads, n_kv_heads, multiple_of, ffn_dim_multiplier, norm_eps; max_seq_len as
    max_len): LLAMA's switches and llama_hidden's width."""
    d_ff = llama_hidden(d_model, multiple_of, ffn_dim_multiplier)
    return DecoderOnlyConfig(vocab, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                             d_ff=d_ff, n_layers=n_layers, max_len=max_len, norm_eps=norm_eps,
                             dtype=dtype, **LLAMA)


def flash_attention(Q, K, V, block_q, block_k, traffic=None, *, version=1):
    """softmax(Q K^T / sqrt(d)) V for one head, Q (N_q, d), K and V (N_k, d), tile by tile in the
    loop order of FlashAttention (version=1: Dao et al., 2022, Algorithm 1) or of FlashAttention-2
    (version=2: Dao, 2023, Algorithm 1). No N_q x N_k matrix is ever stored.

    version=1: O, the running maximum m and the running sum l of every query live in slow memory
    (a GPU's HBM); the outer loop copies a block of block_k keys and values into fast memory
    (SRAM), the inner loop block after block of block_q queries with their O, m, l, updates them
    as notebook 08's online_attention does, and writes O, m, l back.
    version=2, the loops swapped: the outer loop copies a block of queries and keeps its O, m, l in
    fast memory while the inner loop brings in every block of keys and values; O is divided by l
    once, at the end, and written once, with the logsumexp m + log l the backward pass keeps.
    traffic: a dict that receives the numbers read from and written to slow memory ("reads",
    "writes"), counted as the algorithm moves them.
    """
    Q, K, V = (as_real_array(a, name) for a, name in ((Q, "Q"), (K, "K"), (V, "V")))
    if Q.ndim != 2 or K.shape != V.shape or K.ndim != 2 or Q.shape[1] != K.shape[1] \
            or 0 in K.shape:
        raise ValueError(f"flash_attention takes one head: Q (N_q, d), K and V (N_k, d), d >= 1 "
                         f"and at least one key, got Q {Q.shape}, K {K.shape}, V {V.shape}")
    if traffic is not None and not isinstance(traffic, dict):
        raise ValueError(f"traffic must be a dict or None, got {type(traffic).__name__}")
    block_q, block_k = check_positive_int(block_q, "block_q"), check_positive_int(block_k,
                                                                                "block_k")
    if check_positive_int(version, "version") not in (1, 2):
        raise ValueError(f"version must be 1 (FlashAttention, Dao et al., 2022) or 2 "
                         f"(FlashAttention-2, Dao, 2023), got version={version!r}")
    (n_q, d), n_k = Q.shape, K.shape[0]
    dtype = np.result_type(Q, K, V, np.float32)  # float32 stays float32
    scale = dtype.type(1.0 / math.sqrt(d))

    def update(Q_i, K_j, V_j, O_i, l_i, m_i):  # one tile, in fast memory; O_i not yet divided
        S = Q_i @ K_j.T * scale  # (b_q, b_k): this tile's scores, in fast memory only
        m_new = np.maximum(m_i, S.max(axis=1, keepdims=True))
        P, shrink = np.exp(S - m_new), np.exp(m_i - m_new)  # (b_q, b_k), (b_q, 1)
        return shrink * O_i + P @ V_j, shrink * l_i + P.sum(axis=1, keepdims=True), m_new

    O = np.zeros((n_q, d), dtype)
    if version == 2:  # FlashAttention-2: queries outside, keys and values inside
        moved = {"reads": 0, "writes": 0}
        for i in range(0, n_q, block_q):  # outer loop: a block of queries, read once
            Q_i = Q[i:i + block_q]  # (b_q, d); its O, l, m start in fast memory
            O_i, l_i, m_i = np.zeros_like(Q_i, dtype), np.zeros((len(Q_i), 1), dtype), \
                np.full((len(Q_i), 1), -np.inf, dtype)
            moved["reads"] += Q_i.size
            for j in range(0, n_k, block_k):  # inner loop: every block of keys and values
                K_j, V_j = K[j:j + block_k], V[j:j + block_k]  # read once per block of queries
                moved["reads"] += K_j.size + V_j.size
                O_i, l_i, m_i = update(Q_i, K_j, V_j, O_i, l_i, m_i)
            O[i:i + block_q] = O_i / l_i  # divided once, written once, with m_i + log(l_i)
            moved["writes"] += O_i.size + len(l_i)
    else:  # FlashAttention: keys and values outside, queries inside
        moved = {"reads": 0, "writes": n_q * d + 2 * n_q}  # O = 0, l = 0, m = -inf, in slow memory
        l, m = np.zeros((n_q, 1), dtype), np.full((n_q, 1), -np.inf, dtype)
        for j in range(0, n_k, block_k):  # outer loop: a block of keys and values
            K_j, V_j = K[j:j + block_k], V[j:j + block_k]  # (b_k, d) each, read once
            moved["reads"] += K_j.size + V_j.size
            for i in range(0, n_q, block_q):  # inner loop: every block of queries
                rows = slice(i, i + block_q)
                Q_i, O_i, l_i, m_i = Q[rows], O[rows], l[rows], m[rows]  # read from slow memory
                moved["reads"] += Q_i.size + O_i.size + l_i.size + m_i.size
                O_new, l[rows], m[rows] = update(Q_i, K_j, V_j, l_i * O_i, l_i, m_i)
                O[rows] = O_new / l[rows]  # divided at every tile, written back with l, m
                moved["writes"] += O_i.size + l_i.size + m_i.size
    if traffic is not None:
        traffic.update(moved)
    return O


def attention_traffic(n, d, M, version=1):
    """Numbers moved between slow and fast memory by one head of attention, N = n queries and
    keys, head width d, a fast memory of M numbers: (standard, flash).

    standard (FlashAttention paper, Algorithm 0): read Q, K, write S = Q K^T; read S, write
    P = softmax(S); read P, V, write O = P V: 4 N d + 4 N^2.
    flash, version=1: FlashAttention's Algorithm 1 (Dao et al., 2022) with its block sizes
    B_c = ceil(M / 4d) keys and B_r = min(B_c, d) queries, as flash_attention counts it:
    N d + 2 N (O, l, m set up) + 2 N d (K, V once) + T_c (3 N d + 4 N), T_c = ceil(N / B_c) key
    blocks. Theorem 2 of the paper: Theta(N d + N^2) against Theta(N^2 d^2 / M).
    flash, version=2: FlashAttention-2's Algorithm 1 (Dao, 2023), whose block sizes are tuned by
    hand; here the same rule with the roles swapped, B_r = ceil(M / 4d) queries (Q_i and O_i take
    the room K_j and V_j took) and B_c = min(B_r, d) keys: N d (Q once) + T_r 2 N d (K, V once
    per block of queries) + N d + N (O and the logsumexp, written once), T_r = ceil(N / B_r).
    """
    n, d, M = (check_positive_int(v, name) for v, name in ((n, "n"), (d, "d"), (M, "M")))
    if check_positive_int(version, "version") not in (1, 2):
        raise ValueError(f"version must be 1 (FlashAttention, Dao et al., 2022) or 2 "
                         f"(FlashAttention-2, Dao, 2023), got version={version!r}")
    big_block = -(-M // (4 * d))  # ceil(M / 4d): B_c keys (version 1) or B_r queries (version 2)
    passes = -(-n // big_block)  # T_c (version 1) or T_r (version 2)
    standard = 4 * n * d + 4 * n * n
    if version == 2:
        return standard, n * d + passes * 2 * n * d + n * d + n
    return standard, n * d + 2 * n + 2 * n * d + passes * (3 * n * d + 4 * n)
