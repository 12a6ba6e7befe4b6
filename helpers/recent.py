"""What the models of 2023-2025 added to notebook 09's block, in NumPy: sliding-window attention
with a key/value cache bounded by the window, QK-norm, a mixture of experts with top-k routing and
a load-balancing loss, multi-head latent attention, and RoPE's base and scaling (notebook 09,
Going further). Each piece is one class or function with its backward pass; RecentDecoder is
notebook 09's DecoderOnly with any of them switched on (RecentConfig), everything off by default.

Every definition below is written in notebook 09 first, in a cell that starts with
``# saved in helpers/recent.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

from dataclasses import dataclass

import numpy as np

from helpers.modern import (
    DecoderOnly,
    DecoderOnlyConfig,
    GroupedQueryAttention,
    ModernBlock,
    RMSNorm,
    rope,
)
from helpers.module import collect_grads
from helpers.training import attention_backward, linear_backward
from helpers.transformer import causal_mask, merge_heads, split_heads
from helpers.validation import check_flag, check_shape

# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────

# ==== sliding-window attention (helper A) ====

# ==== QK-norm (helper B) ====


class QKNormAttention(GroupedQueryAttention):
    """Grouped-query attention with QK-norm: an RMSNorm over d_k on every query head and every
    key head, after the projection and before RoPE, one gain gamma of size d_k for all query
    heads (q_norm) and one for all key heads (k_norm), as Qwen3's and Gemma 3's q_norm and
    k_norm. Rotations keep lengths, so every score q.k / sqrt(d_k) stays below
    max|gamma_q| max|gamma_k| sqrt(d_k), however large W_q and W_k grow. eps: the norms'
    epsilon; with a KVCache the cache holds the normalised, rotated keys. Two methods are
    GroupedQueryAttention's with the norms added: `project` (forward) and `backward`.
    """

    def __init__(self, d_model, n_heads, n_kv_heads, rng, *, eps=1e-5, **options):
        super().__init__(d_model, n_heads, n_kv_heads, rng, **options)
        self.q_norm, self.k_norm = (RMSNorm(self.d_k, eps, dtype=self.W_q.dtype) for _ in range(2))

    @classmethod
    def from_attention(cls, attention, eps=1e-5):
        """A GroupedQueryAttention's own arrays (shared, not copied) with the two norms added
        (gamma = 1): one seed then draws the same weights with and without QK-norm."""
        if not isinstance(attention, GroupedQueryAttention):
            raise ValueError(f"attention must be a GroupedQueryAttention, got "
                             f"{type(attention).__name__}")
        layer = cls.__new__(cls)
        vars(layer).update(vars(attention))
        dtype = layer.W_q.dtype
        layer.q_norm, layer.k_norm = (RMSNorm(layer.d_k, eps, dtype=dtype) for _ in range(2))
        return layer

    def project(self, query, key, value, kv_cache=None):
        """GroupedQueryAttention.project with q_norm and k_norm between the heads' split and
        RoPE: Q (..., h, T_q, d_k); K and V (..., h, t, d_k), each of the g heads repeated."""
        if kv_cache is not None and kv_cache.fixed:
            raise ValueError("QKNormAttention is self-attention: a KVCache with fixed=True "
                             "(cross-attention's) does not fit")
        start = 0 if kv_cache is None else kv_cache.length  # positions cached before this call
        Q = split_heads(query @ self.W_q + self.b_q, self.n_heads)  # (..., h, T_q, d_k)
        K = split_heads(key @ self.W_k + self.b_k, self.n_kv_heads)  # (..., g, T_k, d_k)
        V = split_heads(value @ self.W_v + self.b_v, self.n_kv_heads)  # (..., g, T_k, d_k)
        Q, K = self.q_norm.forward(Q), self.k_norm.forward(K)  # each head's d_k features
        if self.rotary:
            Q, K = rope(Q, start, table=self.turns), rope(K, start, table=self.turns)
        if kv_cache is not None:
            K, V = kv_cache.add(K, V, key)  # (..., g, t, d_k): normalised and rotated
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # each key/value head serves the h / g query heads of its group
            K, V = np.repeat(K, group, axis=-3), np.repeat(V, group, axis=-3)
        return Q, K, V  # (..., h, t, d_k) each

    def backward(self, d_out):
        """((d_query, d_key, d_value), grads): GroupedQueryAttention.backward with the norms'
        backward (RMSNorm.backward) between undoing the rotation and the projections."""
        c = self.saved()
        if c.K.shape[-2] != c.key.shape[-2]:
            raise ValueError("QKNormAttention.backward: the last forward read keys cached by "
                             "earlier calls (decoding); run forward without a kv_cache first")
        d_out = check_shape(d_out, "d_out", c.heads.shape)  # (..., T_q, d_model)
        grads = {}
        d_heads, grads["W_o"], grads["b_o"] = linear_backward(c.heads, self.W_o, d_out)
        d_Q, d_K, d_V = attention_backward(c.Q, c.K, c.V, c.weights,
                                           split_heads(d_heads, self.n_heads))
        *lead, h, T_k, d_k = d_K.shape  # a shared head sums the gradients of its group
        groups = (*lead, self.n_kv_heads, h // self.n_kv_heads, T_k, d_k)
        d_K, d_V = d_K.reshape(groups).sum(axis=-3), d_V.reshape(groups).sum(axis=-3)
        if self.rotary:
            d_Q, d_K = (rope(d, inverse=True, table=self.turns) for d in (d_Q, d_K))
        d_Q, grads["q_norm"] = self.q_norm.backward(d_Q)  # (..., h, T_q, d_k)
        d_K, grads["k_norm"] = self.k_norm.backward(d_K)  # (..., g, T_k, d_k)
        d_query, grads["W_q"], grads["b_q"] = linear_backward(c.query, self.W_q, merge_heads(d_Q))
        d_key, grads["W_k"], grads["b_k"] = linear_backward(c.key, self.W_k, merge_heads(d_K))
        d_value, grads["W_v"], grads["b_v"] = linear_backward(c.value, self.W_v, merge_heads(d_V))
        if not self.bias:  # the constant 0s: no gradient kept
            grads = {name: g for name, g in grads.items() if not name.startswith("b_")}
        return (d_query, d_key, d_value), collect_grads(self, grads)


# ==== mixture of experts (helper C) ====

# ==== multi-head latent attention (helper D) ====

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
    rope_base: float = 10000.0  # RoPE's base theta

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "qk_norm", check_flag(self.qk_norm, "qk_norm"))

    def build(self, rng):
        """The model of this configuration, its weights drawn from `rng`."""
        return RecentDecoder.from_config(self, rng)


class RecentBlock(ModernBlock):
    """ModernBlock with any of the new pieces: each replaces one part, after ModernBlock has
    drawn its own (so with every piece off it is ModernBlock, weight for weight)."""

    def __init__(self, d_model, n_heads, d_ff, rng, *, window=None, qk_norm=False, n_experts=0,
                 top_k=2, balance=0.01, d_latent=None, rope_base=10000.0, **options):
        super().__init__(d_model, n_heads, d_ff, rng, **options)
        if check_flag(qk_norm, "qk_norm"):  # ModernBlock's attention, its weights kept, normed
            self.self_attn = QKNormAttention.from_attention(self.self_attn,
                                                            options.get("eps", 1e-5))


class RecentDecoder(DecoderOnly):
    """DecoderOnly (notebook 09) built of RecentBlocks, configured by a RecentConfig."""

    Config, Block = RecentConfig, RecentBlock

    def block_options(self):
        c = self.config
        return {**super().block_options(), "window": c.window, "qk_norm": c.qk_norm,
                "n_experts": c.n_experts, "top_k": c.top_k, "balance": c.balance,
                "d_latent": c.d_latent, "rope_base": c.rope_base}

    def mask(self, T):
        return causal_mask(T)
