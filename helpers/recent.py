"""What the models of 2023-2025 added to notebook 09's block, in NumPy: sliding-window attention
with a key/value cache bounded by the window, QK-norm, a mixture of experts with top-k routing and
a load-balancing loss, multi-head latent attention, and RoPE's base and scaling (notebook 09,
Going further). Each piece is one class or function with its backward pass; RecentDecoder is
notebook 09's DecoderOnly with any of them switched on (RecentConfig), everything off by default.

Every definition below is written in notebook 09 first, in a cell that starts with
``# saved in helpers/recent.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from helpers.modern import DecoderOnly, DecoderOnlyConfig, ModernBlock, rope, rotations
from helpers.module import Module, collect_grads
from helpers.training import attention_backward, linear_backward
from helpers.transformer import causal_mask, merge_heads, scaled_dot_product_attention, split_heads
from helpers.validation import as_real_array, check_float_dtype, check_positive_int, check_shape

# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────

# ==== sliding-window attention (helper A) ====

# ==== QK-norm (helper B) ====

# ==== mixture of experts (helper C) ====

# ==== multi-head latent attention (helper D) ====


class LatentCache(NamedTuple):
    """What LatentAttention.forward keeps for backward."""

    query: np.ndarray  # (..., T_q, d_model), the inputs
    key: np.ndarray  # (..., T_k, d_model), the positions the latent is computed from
    c_KV: np.ndarray  # (..., T_k, d_c), the latent: what the cache keeps
    Q: np.ndarray  # (..., h, T_q, d_h + d_R), [q_C; RoPE(q_R)] per head
    K: np.ndarray  # (..., h, T_k, d_h + d_R), [k_C; RoPE(k_R)], k_R the same for every head
    V: np.ndarray  # (..., h, T_k, d_h)
    weights: np.ndarray  # (..., h, T_q, T_k)
    heads: np.ndarray  # (..., T_q, h d_h), the heads merged, before W_o


class LatentAttention(Module):
    """Multi-head latent attention (DeepSeek-AI, 2024, "DeepSeek-V2", §2.1), without query
    compression, as DeepSeek-V2-Lite. Every position x is compressed to one small latent

        c_KV = x W_dkv (d_c numbers),  k_C = c_KV W_uk,  v_C = c_KV W_uv  (h heads of d_h each)

    and a decoupled RoPE key k_R = RoPE(x W_kr) of d_R numbers, one for all heads; each head's
    query is [q_C; RoPE(q_R)] with q_C = x W_q, q_R = x W_qr, its key [k_C; k_R], its scores
    divided by sqrt(d_h + d_R); the heads, merged, go through W_o. The key/value cache keeps only
    c_KV and k_R, d_c + d_R numbers per token (multi-head attention: 2 h d_h), in a KVCache as
    K = c_KV (..., 1, t, d_c) and V = k_R (..., 1, t, d_R). The paper's W^DKV, W^UK, W^UV, W^KR,
    W^Q, W^QR, W^O, written x @ W; no biases (DeepSeek-V2 has none); DeepSeek's released code
    also puts an RMSNorm on c_KV, left out here. Self-attention only: key and value must be one
    array (the latent gives both), at the query's positions (RoPE's positions start at the
    cache's length for both).
    """

    param_names = ("W_q", "W_qr", "W_dkv", "W_kr", "W_uk", "W_uv", "W_o")

    def __init__(self, d_model, n_heads, d_latent, d_rope, rng, *, max_len=256, dtype=np.float64):
        d_model, h = check_positive_int(d_model, "d_model"), check_positive_int(n_heads, "n_heads")
        d_c, d_R = check_positive_int(d_latent, "d_latent"), check_positive_int(d_rope, "d_rope")
        if d_model % h:
            raise ValueError(f"d_model={d_model} must be a multiple of n_heads={h}")
        if d_R % 2:
            raise ValueError(f"d_rope={d_R} must be even: RoPE turns pairs of features")
        dtype = check_float_dtype(dtype)
        self.d_model, self.n_heads, self.d_h = d_model, h, d_model // h
        self.d_c, self.d_R = d_c, d_R  # the latent's width, the RoPE key's
        self.turns = rotations(check_positive_int(max_len, "max_len"), d_R)  # (max_len, d_R/2)

        def draw(d_in, d_out):  # std 1/sqrt(d_in): x @ W keeps the scale of x
            return rng.normal(0.0, 1.0 / np.sqrt(d_in), (d_in, d_out)).astype(dtype)
        self.W_q, self.W_qr = draw(d_model, d_model), draw(d_model, h * d_R)  # queries: q_C, q_R
        self.W_dkv, self.W_kr = draw(d_model, d_c), draw(d_model, d_R)  # down: c_KV; the RoPE key
        self.W_uk, self.W_uv = draw(d_c, d_model), draw(d_c, d_model)  # up: k_C, v_C, h heads
        self.W_o = draw(d_model, d_model)
        self.weights = None  # the last attention weights, (..., h, T_q, T_k)

    def forward(self, query, key, value, mask=None, kv_cache=None):
        """query (..., T_q, d_model), key = value (..., T_k, d_model) -> (..., T_q, d_model).
        mask: True = blocked, broadcastable to (..., h, T_q, T_k); kv_cache: a KVCache that
        keeps c_KV and k_R of every call so far."""
        query, key = as_real_array(query, "query"), as_real_array(key, "key")
        for name, x in (("query", query), ("key", key)):
            if x.ndim < 2 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (..., T, d_model={self.d_model}), "
                                 f"got {x.shape}")
        if value is not key and not np.array_equal(value, key):
            raise ValueError(f"value must be key itself: one latent gives both (self-attention),"
                             f" got key {key.shape} and value {np.shape(value)} that differ")
        if kv_cache is not None and kv_cache.fixed:
            raise ValueError("LatentAttention is self-attention: a KVCache with fixed=True "
                             "(cross-attention's) does not fit")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.ndim == query.ndim and mask.ndim >= 3:
                mask = np.expand_dims(mask, -3)  # (B, T_q, T_k) -> (B, 1, T_q, T_k)
        start = 0 if kv_cache is None else kv_cache.length  # positions cached before this call
        q_C = split_heads(query @ self.W_q, self.n_heads)  # (..., h, T_q, d_h)
        q_R = rope(split_heads(query @ self.W_qr, self.n_heads), start, table=self.turns)
        c_KV = key @ self.W_dkv  # (..., T_k, d_c): the latent
        k_R = rope(key @ self.W_kr, start, table=self.turns)  # (..., T_k, d_R)
        if kv_cache is not None:  # one "head" each: (..., 1, t, d_c) and (..., 1, t, d_R)
            c_KV, k_R = (a[..., 0, :, :] for a in kv_cache.add(c_KV[..., None, :, :],
                                                               k_R[..., None, :, :], key))
        k_C = split_heads(c_KV @ self.W_uk, self.n_heads)  # (..., h, t, d_h)
        V = split_heads(c_KV @ self.W_uv, self.n_heads)  # (..., h, t, d_h)
        Q = np.concatenate([q_C, q_R], axis=-1)  # (..., h, T_q, d_h + d_R)
        k_R = np.broadcast_to(k_R[..., None, :, :], (*k_C.shape[:-1], self.d_R))  # every head
        K = np.concatenate([k_C, k_R], axis=-1)  # (..., h, t, d_h + d_R)
        heads, self.weights = scaled_dot_product_attention(Q, K, V, mask)  # 1/sqrt(d_h + d_R)
        heads = merge_heads(heads)  # (..., T_q, d_model)
        self.cache = LatentCache(query, key, c_KV, Q, K, V, self.weights, heads)
        return heads @ self.W_o  # (..., T_q, d_model)

    def backward(self, d_out):
        """((d_query, d_key, d_value), grads). The shared k_R collects the gradients of every
        head (a sum); the rotations are undone (rope, inverse=True); c_KV collects those of k_C
        and V. d_value is 0: key's gradient holds everything the latent passed back. A forward
        that read a filled KVCache (decoding) has no backward."""
        c = self.saved()
        if c.K.shape[-2] != c.key.shape[-2]:
            raise ValueError("LatentAttention.backward: the last forward read a latent cached by "
                             "earlier calls (decoding); run forward without a kv_cache first")
        d_out = check_shape(d_out, "d_out", c.heads.shape)  # (..., T_q, d_model)
        grads, d_h = {}, self.d_h
        d_heads, grads["W_o"], _ = linear_backward(c.heads, self.W_o, d_out)
        d_Q, d_K, d_V = attention_backward(c.Q, c.K, c.V, c.weights,
                                           split_heads(d_heads, self.n_heads))
        d_q_R = rope(d_Q[..., d_h:], inverse=True, table=self.turns)  # (..., h, T_q, d_R)
        d_k_R = rope(d_K[..., d_h:].sum(axis=-3), inverse=True, table=self.turns)  # (..., T_k, d_R)
        d_query, grads["W_q"], _ = linear_backward(c.query, self.W_q, merge_heads(d_Q[..., :d_h]))
        d_query_R, grads["W_qr"], _ = linear_backward(c.query, self.W_qr, merge_heads(d_q_R))
        d_c_K, grads["W_uk"], _ = linear_backward(c.c_KV, self.W_uk, merge_heads(d_K[..., :d_h]))
        d_c_V, grads["W_uv"], _ = linear_backward(c.c_KV, self.W_uv, merge_heads(d_V))
        d_key, grads["W_dkv"], _ = linear_backward(c.key, self.W_dkv, d_c_K + d_c_V)
        d_key_R, grads["W_kr"], _ = linear_backward(c.key, self.W_kr, d_k_R)
        return (d_query + d_query_R, d_key + d_key_R, np.zeros_like(d_key)), \
            collect_grads(self, grads)


# ==== RoPE's base and scaling (helper E) ====

# ==== all of them in one model ====


@dataclass(frozen=True)
class RecentConfig(DecoderOnlyConfig):
    """DecoderOnlyConfig with the pieces of 2023-2025 models, each off by default (then the model
    is DecoderOnly's, weight for weight). See RecentDecoder."""

    window: int | None = None  # sliding-window attention: the keys each query sees (Mistral)
    qk_norm: bool = False  # an RMSNorm on every query and key head before the scores
    n_experts: int = 0  # 0: one dense feed-forward network; else a mixture of n_experts
    top_k: int = 2  # experts per token (mixture of experts)
    balance: float = 0.01  # the load-balancing loss's coefficient (mixture of experts)
    d_latent: int | None = None  # multi-head latent attention: the cached latent's width
    d_rope: int | None = None  # ... and its RoPE key's (None: half the head width, DeepSeek-V2's)
    rope_base: float = 10000.0  # RoPE's base theta

    def __post_init__(self):
        super().__post_init__()
        if self.d_latent is not None:  # multi-head latent attention replaces GQA
            check_positive_int(self.d_latent, "d_latent")
            d_rope = self.d_model // self.n_heads // 2 if self.d_rope is None else self.d_rope
            if check_positive_int(d_rope, "d_rope") % 2 or self.position != "rope":
                raise ValueError(f"multi-head latent attention needs position='rope' and an even "
                                 f"d_rope, got position={self.position!r}, d_rope={d_rope}")
            object.__setattr__(self, "d_rope", d_rope)
        elif self.d_rope is not None:
            raise ValueError(f"d_rope={self.d_rope} is the width of multi-head latent attention's "
                             "RoPE key: it needs d_latent")

    def build(self, rng):
        """The model of this configuration, its weights drawn from `rng`."""
        return RecentDecoder.from_config(self, rng)


class RecentBlock(ModernBlock):
    """ModernBlock with any of the new pieces: each replaces one part, after ModernBlock has
    drawn its own (so with every piece off it is ModernBlock, weight for weight)."""

    def __init__(self, d_model, n_heads, d_ff, rng, *, window=None, qk_norm=False, n_experts=0,
                 top_k=2, balance=0.01, d_latent=None, d_rope=None, rope_base=10000.0,
                 **options):
        super().__init__(d_model, n_heads, d_ff, rng, **options)
        if d_latent is not None:  # its own RoPE on q_R and k_R; GQA's options do not apply
            self.self_attn = LatentAttention(
                d_model, n_heads, d_latent, d_model // n_heads // 2 if d_rope is None else d_rope,
                rng, max_len=options.get("max_len", 256), dtype=options.get("dtype", np.float64))


class RecentDecoder(DecoderOnly):
    """DecoderOnly (notebook 09) built of RecentBlocks, configured by a RecentConfig."""

    Config, Block = RecentConfig, RecentBlock

    def block_options(self):
        c = self.config
        return {**super().block_options(), "window": c.window, "qk_norm": c.qk_norm,
                "n_experts": c.n_experts, "top_k": c.top_k, "balance": c.balance,
                "d_latent": c.d_latent, "d_rope": c.d_rope, "rope_base": c.rope_base}

    def mask(self, T):
        return causal_mask(T)
