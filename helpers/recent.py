"""What the models of 2023-2025 added to notebook 09's block, in NumPy (notebook 09, Going
further): sliding-window attention with a key/value cache bounded by the window, a mixture of
experts with top-k routing and a load-balancing loss, multi-head latent attention, and RoPE's base
and scaling, each with its backward pass (QK-norm is a switch of helpers.modern's
GroupedQueryAttention). RecentDecoder is notebook 09's DecoderOnly with any of them switched on
(RecentConfig), everything off by default.

Every definition below is written in notebook 09 first, in a cell that starts with
``# saved in helpers/recent.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from helpers.decoding import KVCache
from helpers.modern import (
    DecoderOnly,
    DecoderOnlyConfig,
    ModernBlock,
    SwiGLU,
    rope,
    rotations,
)
from helpers.module import Module, collect_grads
from helpers.training import attention_backward, linear_backward
from helpers.transformer import (
    merge_heads,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from helpers.validation import (
    as_real_array,
    check_flag,
    check_float_dtype,
    check_int,
    check_number,
    check_positive_int,
    check_shape,
)

# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────

# Going further · sliding-window attention (Mistral 7B, 2023)


def sliding_window_mask(T, window):
    """(T, T) boolean, True = blocked: query q sees the keys q - window < k <= q, itself and the
    window - 1 before it (Mistral's sliding window); window >= T is the causal mask."""
    T = check_positive_int(T, "T", "the sequence length")
    window = check_positive_int(window, "window")
    q, k = np.arange(T)[:, None], np.arange(T)[None, :]  # (T, 1) queries, (1, T) keys
    return (k > q) | (k <= q - window)  # (T, T): the future, and the keys too old


@dataclass(eq=False, kw_only=True)
class WindowCache(KVCache):
    """A KVCache for sliding-window attention: it keeps the keys and values of the last `window`
    positions only, so its arrays never grow past (B, g, window, d_k), however long the text.
    `length` still counts every position seen (RoPE's start position); `forgotten` is how many
    of them it no longer holds. Mistral's rolling buffer writes position i into slot i mod W
    (no copy); here the oldest positions are cut off, the same keys kept in their order. K and V
    are bounded by the window; `tokens` (KVCache.start's, one int per position) keeps the whole
    prefix, to check that the next call's prompt continues it."""

    window: int
    seen: int = field(default=0, init=False)

    def __post_init__(self):
        self.window = check_positive_int(self.window, "window")
        if self.fixed:
            raise ValueError("a WindowCache is self-attention's: fixed must be False")

    @property
    def length(self):
        """The number of positions seen so far, held or forgotten."""
        return self.seen

    @property
    def forgotten(self):
        """The number of positions seen whose keys and values are no longer held."""
        return self.seen - (0 if self.K is None else self.K.shape[-2])

    def add(self, K, V, source):
        """KVCache.add: this call's keys and values after the held ones, all of them returned;
        then only the last `window` positions are kept."""
        new = K.shape[-2]
        K, V = super().add(K, V, source)  # (B, g, held + new, d_k)
        self.K = K[..., -self.window:, :].copy()  # (B, g, <= window, d_k)
        self.V = V[..., -self.window:, :].copy()
        self.seen += new
        return K, V

# Going further · mixture of experts


def top_k_routing(logits, k):
    """Mixtral's router (Jiang et al., 2024): logits (..., n_experts) -> (experts, gates), each
    (..., k). experts: the indices of the k largest logits of every token, largest first, a tie
    to the lower index (int64); gates: the softmax over those k logits only, so they sum to 1
    per token (Switch, top-1, keeps the softmax over all the experts instead: its gate is < 1)."""
    logits = as_real_array(logits, "logits")
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., n_experts), got {logits.shape}")
    k = check_int(k, "k", f"[1, {logits.shape[-1]}]")
    if logits.dtype.kind != "f":  # -uint8(3) is 253: integers are ranked as floats
        logits = logits.astype(np.float64)
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]  # (..., k), largest first
    chosen = np.take_along_axis(logits, experts, axis=-1)  # (..., k), in decreasing order
    e = np.exp(chosen - chosen[..., :1])  # minus the largest: every exponent <= 0
    return experts.astype(np.int64), e / e.sum(axis=-1, keepdims=True)


class MoECache(NamedTuple):
    """What MixtureOfExperts.forward keeps for backward (the experts keep their own caches)."""

    x: np.ndarray  # (N, d_model), every token of the input, one per row
    probs: np.ndarray  # (N, n_experts), the router's softmax over all the experts
    experts: np.ndarray  # (N, k), the experts each token went to
    gates: np.ndarray  # (N, k), their weights
    load: np.ndarray  # (n_experts,), f: each expert's share of the counted tokens' assignments
    counted: np.ndarray  # (N,), True where the token counts in the balance loss
    routes: list  # per expert: (rows, slots), the tokens it took and in which of their k places
    outputs: list  # per expert: its output for those tokens, (n_e, d_model)
    shape: tuple  # the input's shape


class MixtureOfExperts(Module):
    """A sparse mixture of experts in place of the feed-forward network (the layer of Shazeer et
    al., 2017, put in a Transformer's FFN by GShard, Lepikhin et al., 2020, and Switch, Fedus et
    al., 2021; Mixtral, Jiang et al., 2024): n_experts SwiGLU networks of width d_ff, each with
    its own weights, and a router W_r (d_model, n_experts). Every token goes through the top_k
    experts whose router logits x W_r are largest (top_k_routing), and their outputs are added,
    weighted by the gates. The parameters grow with n_experts; the work per token with top_k.

    gate="mixtral": the softmax over the k chosen logits (top_k_routing's gates, summing to 1).
    gate="switch": the chosen experts' probabilities in the softmax over all the experts, not
    renormalised (Switch Transformer's, DeepSeek-V2's). At top_k=1 Mixtral's gate is always 1,
    so the task's loss gives W_r no gradient at all: top-1 wants "switch".

    The Switch Transformer's load-balancing loss of the last forward is kept in `aux_loss`:
    balance * n_experts * sum_i f_i P_i, f_i the share of the token -> expert assignments that
    went to expert i (over all top_k choices; kept in `load`), P_i the mean router probability
    (softmax over all the experts) of expert i: balance when both are uniform, balance *
    n_experts when top-1 sends every token to one expert with probability 1. Both count the
    tokens that `keep` marks: a boolean array of the next input's shape[:-1] (True = counted),
    set by the caller before forward and used by that forward only (RecentDecoder sets it to
    leave PAD out); None counts every token. backward adds the loss's gradient to W_r's: train()
    then minimises the task's loss plus aux_loss without a change to the loop (the loss train()
    records is the task's only). The experts are drawn before the router: with n_experts=1 and
    top_k=1 the layer is SwiGLU(d_model, d_ff, rng), weight for weight, plus a router that
    changes nothing (with Mixtral's gate, its one gate is 1).
    """

    param_names = ("W_r",)
    gate_kinds = ("mixtral", "switch")

    def __init__(self, d_model, d_ff, n_experts, rng, *, top_k=2, balance=0.01, gate="mixtral",
                 dtype=np.float64):
        self.d_model = check_positive_int(d_model, "d_model")
        self.n_experts = check_positive_int(n_experts, "n_experts")
        self.top_k = check_int(top_k, "top_k", f"[1, {self.n_experts}]")
        self.balance = check_number(balance, "balance", "[0, inf)")
        if not isinstance(gate, str) or gate not in self.gate_kinds:
            raise ValueError(f"gate must be one of {self.gate_kinds}, got {gate!r}")
        self.gate = gate
        dtype = check_float_dtype(dtype)
        experts = [SwiGLU(d_model, d_ff, rng, dtype=dtype) for _ in range(self.n_experts)]
        self.W_r = rng.normal(0.0, 1.0 / np.sqrt(d_model), (d_model, n_experts)).astype(dtype)
        self.experts = experts  # after W_r: parameters() lists "W_r", "experts.0.W_1", ...
        self.aux_loss, self.load, self.keep = None, None, None  # keep: for the next forward

    def forward(self, x):
        """x (..., T, d_model) -> (..., T, d_model): every token through its top_k experts."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        keep, self.keep = self.keep, None  # one forward's
        if keep is not None and np.shape(keep) != x.shape[:-1]:
            raise ValueError(f"keep must have shape {x.shape[:-1]} (x's but d_model), got "
                             f"{np.shape(keep)}")
        counted = np.ones(x.shape[:-1], bool) if keep is None else np.asarray(keep, bool)
        shape, x, counted = x.shape, x.reshape(-1, self.d_model), counted.ravel()  # (N, ...)
        logits = x @ self.W_r  # (N, n_experts)
        probs = softmax(logits)  # (N, n_experts): P_i is its mean over the counted tokens
        experts, gates = top_k_routing(logits, self.top_k)  # (N, k) each
        if self.gate == "switch":  # the chosen experts' probabilities among all n
            gates = np.take_along_axis(probs, experts, axis=-1)
        out = np.zeros(x.shape, np.result_type(x, self.W_r))  # (N, d_model)
        routes, outputs = [], []
        for e, expert in enumerate(self.experts):  # a loop over the experts, never over tokens
            rows, slots = np.nonzero(experts == e)  # the tokens that chose e, and in which place
            y = expert.forward(x[rows])  # (n_e, d_model); a token chose e once: rows unique
            out[rows] += gates[rows, slots, None] * y
            routes.append((rows, slots))
            outputs.append(y)
        chosen, n = experts[counted], max(int(counted.sum()), 1)  # (n, k): the counted tokens'
        load = np.bincount(chosen.ravel(), minlength=self.n_experts) / max(chosen.size, 1)  # f
        P = probs[counted].sum(axis=0) / n
        self.aux_loss = float(self.balance * self.n_experts * (load * P).sum())
        self.load = load
        self.cache = MoECache(x, probs, experts, gates, load, counted, routes, outputs, shape)
        return out.reshape(shape)

    def backward(self, d_out):
        """(d_x, grads) of the loss L + aux_loss, for d_out = dL/d(output). A gate g_j multiplies
        its expert's output y_j, so dL/dg_j = d_out . y_j. Mixtral's gates are a softmax over the
        k chosen logits (the others get no gradient from L); Switch's are p_j of the softmax
        over all, dp_j/dl_m = p_j (delta_jm - p_m). f is a count, without a gradient: aux
        reaches the logits through P only, d aux / d p_ni = balance n_experts f_i / N (N the
        counted tokens; 0 for the others)."""
        x, probs, experts, gates, load, counted, routes, outputs, shape = self.saved()
        d_out = check_shape(d_out, "d_out", shape).reshape(-1, self.d_model)  # (N, d_model)
        d_x, d_gates, grads = np.zeros_like(d_out), np.zeros_like(gates), {}
        for e, expert in enumerate(self.experts):
            rows, slots = routes[e]
            d_gates[rows, slots] = (d_out[rows] * outputs[e]).sum(axis=-1)
            d_in, grads[f"experts.{e}"] = expert.backward(gates[rows, slots, None] * d_out[rows])
            d_x[rows] += d_in
        d_logits = np.zeros_like(probs)  # (N, n_experts)
        g_d = (gates * d_gates).sum(axis=-1, keepdims=True)  # (N, 1)
        if self.gate == "switch":  # sum_j dL/dp_j p_j (e_j - p)
            np.put_along_axis(d_logits, experts, gates * d_gates, axis=-1)
            d_logits -= probs * g_d
        else:  # the softmax's rule over the k chosen logits
            np.put_along_axis(d_logits, experts, gates * (d_gates - g_d), axis=-1)
        n = max(int(counted.sum()), 1)
        d_p = (self.balance * self.n_experts / n * load).astype(probs.dtype)  # (n_experts,)
        d_p = counted[:, None] * d_p  # (N, n_experts): the tokens not counted get none
        d_logits += probs * (d_p - (probs * d_p).sum(axis=-1, keepdims=True))  # softmax's rule
        d_x_r, grads["W_r"], _ = linear_backward(x, self.W_r, d_logits)
        return (d_x + d_x_r).reshape(shape), collect_grads(self, grads)


# Going further · multi-head latent attention


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
    also puts an RMSNorm on c_KV, left out here. Self-attention only: query, key and value must
    be one array (the latent gives key and value; RoPE's positions start at the cache's length
    for queries and keys alike).
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
        """query = key = value (..., T, d_model) -> (..., T, d_model), one array (a block passes
        the same one three times). mask: True = blocked, broadcastable to (..., h, T, t);
        kv_cache: a KVCache that keeps c_KV and k_R of every call so far (t positions)."""
        query, key = as_real_array(query, "query"), as_real_array(key, "key")
        for name, x in (("query", query), ("key", key)):
            if x.ndim < 2 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (..., T, d_model={self.d_model}), "
                                 f"got {x.shape}")
        for name, x in (("query", query), ("value", value)):  # RoPE needs one set of positions
            if x is not key and not np.array_equal(x, key):
                raise ValueError(f"{name} must be key itself: LatentAttention is self-attention "
                                 f"(one latent gives key and value, RoPE turns query and key by "
                                 f"the same positions), got key {key.shape} and {name} "
                                 f"{np.shape(x)} that differ")
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


# Going further · RoPE's base and scaling

ROPE_SCALINGS = ("linear", "ntk", "yarn", "llama3")


def rope_frequencies(d, base=10000.0):
    """RoPE's d/2 angular frequencies w_i = base^(-2i/d): pair i turns once every 2 pi / w_i
    positions, its wavelength. base 10000 (RoFormer) gives notebook 03's pe_frequencies(d)."""
    two_i = np.arange(0, d, 2)  # 2i = 0, 2, ..., d - 2
    return 1.0 / base ** (two_i / d)  # (d/2,)


def check_rope_scaling(scaling):
    """scaling as a tuple (method, s, L): stretch RoPE s times past the L positions a model was
    trained on, by one of ROPE_SCALINGS; None (no scaling) stays None. A list (read back from
    JSON) becomes a tuple; anything else is a ValueError."""
    if scaling is None:
        return None
    if not isinstance(scaling, (tuple, list)) or len(scaling) != 3 \
            or scaling[0] not in ROPE_SCALINGS:
        raise ValueError(f"scaling must be None or (method, s, L) with method one of "
                         f"{ROPE_SCALINGS}, got scaling={scaling!r}")
    return (scaling[0], check_number(scaling[1], "scaling's s", "[1, inf)"),
            check_positive_int(scaling[2], "scaling's L"))


def ramp(r, low, high):
    """0 where r <= low, 1 where r >= high, a straight line between (YaRN's gamma)."""
    return np.clip((r - low) / (high - low), 0.0, 1.0)


def scaled_frequencies(d, base=10000.0, scaling=None):
    """(w, m): RoPE's frequencies w (d/2,) under a scaling (method, s, L), and the magnitude m
    that every rotation is multiplied by. r_i = L w_i / (2 pi) is how many turns pair i makes
    over the L trained positions (L / its wavelength).

    linear: w / s, position interpolation (Chen et al., 2023): position p is read as p / s.
    ntk: the base times s^(d / (d - 2)) ("NTK-aware", bloc97, 2023): the first pair is kept,
        the last one divided by s, the ones between by less and less.
    yarn: NTK-by-parts (Peng et al., 2023): w / s where r < 1, w kept where r > 32, a straight
        line (ramp) between; and m = 0.1 ln(s) + 1, YaRN's sqrt(1/t): rotating queries and keys
        by m multiplies every score by m^2 = 1/t, its attention temperature.
    llama3: Llama 3.1's rule: the same ramp between r = 1 and r = 4 (low_freq_factor 1,
        high_freq_factor 4), m = 1.
    """
    w = rope_frequencies(d, base)  # (d/2,)
    scaling = check_rope_scaling(scaling)
    if scaling is None:
        return w, 1.0
    method, s, L = scaling
    if method == "linear":
        return w / s, 1.0
    if method == "ntk":
        if d < 4:
            raise ValueError(f"ntk scaling needs d >= 4 (its first and last pairs differ), got "
                             f"d={d}")
        return rope_frequencies(d, base * s ** (d / (d - 2))), 1.0
    r = L * w / (2 * np.pi)  # (d/2,): turns over the trained length
    gamma = ramp(r, 1.0, 32.0 if method == "yarn" else 4.0)  # 0: interpolate, 1: keep
    m = 0.1 * np.log(s) + 1.0 if method == "yarn" else 1.0
    return (1.0 - gamma) * w / s + gamma * w, m


def rope_table(T, d, *, base=10000.0, scaling=None):
    """The (T, d/2) complex rotations m e^(i p w_i) of positions p = 0 .. T-1 that rope's
    `table=` takes (llama's freqs_cis), with the base and scaling of scaled_frequencies. With
    base 10000 and no scaling it is rotations(T, d), bit for bit."""
    T = check_int(T, "T", "[0, inf)")
    if check_int(d, "d", "[2, inf)") % 2:
        raise ValueError(f"d must be even (rope turns pairs of features), got d={d}")
    w, m = scaled_frequencies(d, check_number(base, "base", "(1, inf)"), scaling)
    angles = np.arange(T)[:, None] * w  # (T, d/2): p * w_i
    return m * np.exp(1j * angles)  # (T, d/2)


def rescale_rope(model, *, base=10000.0, scaling=None):
    """Give every block of a trained model (DecoderOnly or RecentDecoder, RoPE) the rotations
    of this base and scaling, for all its max_len positions, weights untouched; returns the
    model. Its config is left as it was: this is for evaluation. A table (max_len, d/2) turns d
    features: d_k of grouped-query attention, d_R of multi-head latent attention."""
    blocks = [block.self_attn for block in model.decoder.layers]
    if any(getattr(attn, "turns", None) is None for attn in blocks):
        raise ValueError("rescale_rope: the model has a block without RoPE (position='rope')")
    for attn in blocks:
        attn.turns = rope_table(len(attn.turns), 2 * attn.turns.shape[-1], base=base,
                                scaling=scaling)
    return model

# Going further · all of them in one model


@dataclass(frozen=True)
class RecentConfig(DecoderOnlyConfig):
    """DecoderOnlyConfig with the pieces of 2023-2025 models, each off by default (then the model
    is DecoderOnly's, weight for weight). See RecentDecoder. Multi-head latent attention
    (d_latent) replaces grouped-query attention: it has no biases (bias then concerns the output
    layer only) and no QK-norm, and n_kv_heads only shapes the grouped-query attention that
    ModernBlock draws first and RecentBlock then replaces (the seed's stream)."""

    window: int | None = None  # sliding-window attention: the keys each query sees (Mistral)
    qk_norm: bool = False  # an RMSNorm on every query and key head before the scores
    n_experts: int = 0  # 0: one dense feed-forward network; else a mixture of n_experts
    top_k: int = 2  # experts per token (mixture of experts)
    balance: float = 0.01  # the load-balancing loss's coefficient (mixture of experts)
    gate: str = "mixtral"  # "mixtral": softmax over the k chosen; "switch": over all (top-1)
    balance_ignore: int | None = None  # a token id (PAD) the balance loss leaves out
    d_latent: int | None = None  # multi-head latent attention: the cached latent's width
    d_rope: int | None = None  # ... and its RoPE key's (None: half the head width, DeepSeek-V2's)
    rope_base: float = 10000.0  # RoPE's base theta
    rope_scaling: tuple | None = None  # RoPE stretched: (method, s, L), see scaled_frequencies

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "qk_norm", check_flag(self.qk_norm, "qk_norm"))
        if self.window is not None:
            object.__setattr__(self, "window", check_positive_int(self.window, "window"))
        object.__setattr__(self, "rope_base", check_number(self.rope_base, "rope_base",
                                                           "(1, inf)"))
        object.__setattr__(self, "rope_scaling", check_rope_scaling(self.rope_scaling))
        if self.position != "rope" and (self.rope_base != 10000.0 or self.rope_scaling):
            raise ValueError(f"rope_base and rope_scaling need position='rope', got "
                             f"position={self.position!r}")
        n_experts = check_int(self.n_experts, "n_experts", "[0, inf)")
        object.__setattr__(self, "n_experts", n_experts)
        top_k_range = f"[1, {n_experts}]" if n_experts else "[1, inf)"  # checked even when off
        object.__setattr__(self, "top_k", check_int(self.top_k, "top_k", top_k_range))
        object.__setattr__(self, "balance", check_number(self.balance, "balance", "[0, inf)"))
        gates = MixtureOfExperts.gate_kinds
        if not isinstance(self.gate, str) or self.gate not in gates:
            raise ValueError(f"gate must be one of {gates}, got {self.gate!r}")
        if self.balance_ignore is not None:
            object.__setattr__(self, "balance_ignore", check_int(
                self.balance_ignore, "balance_ignore", f"[0, {self.vocab - 1}]"))
        if n_experts:
            if self.ffn != "swiglu":
                raise ValueError(f"n_experts={n_experts} needs ffn='swiglu' (the experts are "
                                 f"SwiGLU networks), got ffn={self.ffn!r}")
        if self.d_latent is not None:  # multi-head latent attention replaces GQA
            object.__setattr__(self, "d_latent", check_positive_int(self.d_latent, "d_latent"))
            if self.qk_norm:
                raise ValueError("qk_norm normalises grouped-query attention's heads: it does not "
                                 "apply to multi-head latent attention (d_latent)")
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
    drawn its own (so with every piece off it is ModernBlock, weight for weight). With d_latent,
    LatentAttention (no biases) replaces GQA: qk_norm is refused. rope_base and rope_scaling set
    RoPE's table (GQA's, or MLA's on q_R and k_R): refused when the attention has none."""

    def __init__(self, d_model, n_heads, d_ff, rng, *, window=None, qk_norm=False, n_experts=0,
                 top_k=2, balance=0.01, gate="mixtral", d_latent=None, d_rope=None,
                 rope_base=10000.0, rope_scaling=None, **options):
        if d_latent is not None and qk_norm:
            raise ValueError("qk_norm normalises grouped-query attention's heads: it does not "
                             "apply to multi-head latent attention (d_latent)")
        super().__init__(d_model, n_heads, d_ff, rng, qk_norm=qk_norm, **options)
        if n_experts:  # a mixture of experts of width d_ff in place of the one SwiGLU
            self.ffn = MixtureOfExperts(d_model, d_ff, n_experts, rng, top_k=top_k,
                                        balance=balance, gate=gate,
                                        dtype=options.get("dtype", np.float64))
        if d_latent is not None:  # in place of GQA, with its own RoPE on q_R and k_R
            self.self_attn = LatentAttention(
                d_model, n_heads, d_latent, d_model // n_heads // 2 if d_rope is None else d_rope,
                rng, max_len=options.get("max_len", 256), dtype=options.get("dtype", np.float64))
        attn = self.self_attn
        if getattr(attn, "turns", None) is None and (rope_base != 10000.0 or rope_scaling):
            raise ValueError("rope_base and rope_scaling set RoPE's table: this block's "
                             "attention has none")
        if getattr(attn, "turns", None) is not None:  # RoPE's table (max_len, d/2), this base
            attn.turns = rope_table(len(attn.turns), 2 * attn.turns.shape[-1], base=rope_base,
                                    scaling=rope_scaling)  # and scaling: d = d_k, or MLA's d_R


class RecentDecoder(DecoderOnly):
    """DecoderOnly (notebook 09) built of RecentBlocks, configured by a RecentConfig."""

    Config, Block = RecentConfig, RecentBlock

    def block_options(self):
        c = self.config
        return {**super().block_options(), "window": c.window, "qk_norm": c.qk_norm,
                "n_experts": c.n_experts, "top_k": c.top_k, "balance": c.balance,
                "gate": c.gate, "d_latent": c.d_latent, "d_rope": c.d_rope,
                "rope_base": c.rope_base, "rope_scaling": c.rope_scaling}

    forgotten = 0  # set by decode: the oldest keys a WindowCache no longer holds

    def kv_caches(self):
        """One cache per block for cached decoding: WindowCaches with sliding-window attention
        (memory bounded by the window), else KVCaches."""
        if self.config.window is None:
            return super().kv_caches()
        return [WindowCache(window=self.config.window) for _ in self.decoder.layers]

    def decode(self, tokens, kv_caches=None):
        """DecoderOnly.decode. After a WindowCache has forgotten its oldest keys, the blocks read
        only the keys it holds and the new ones: the mask keeps only their columns."""
        caches = kv_caches if isinstance(kv_caches, list) else []
        windows = [c.window for c in caches if isinstance(c, WindowCache)]
        if windows and (len(windows) != len(caches) or set(windows) != {self.config.window}):
            raise ValueError(f"kv_caches must be one WindowCache of window={self.config.window} "
                             f"per block (kv_caches()), got windows {windows}")
        self.forgotten = caches[0].forgotten if windows else 0
        try:
            return super().decode(tokens, kv_caches)
        finally:
            self.forgotten = 0

    def forward(self, tokens):
        """DecoderOnly.forward; with config.balance_ignore set, the mixtures' load-balancing
        losses count only the positions whose token is not that id (PAD: HF's Mixtral leaves
        padded tokens out too)."""
        moes = [b.ffn for b in self.decoder.layers if isinstance(b.ffn, MixtureOfExperts)]
        if moes and self.config.balance_ignore is not None:
            for moe in moes:
                moe.keep = np.asarray(tokens) != self.config.balance_ignore  # (B, T)
        try:
            return super().forward(tokens)
        finally:
            for moe in moes:
                moe.keep = None

    def aux_loss(self):
        """The mixtures' load-balancing losses in the last forward (0 without experts): backward
        returns the gradients of the task's loss plus this."""
        return sum(b.ffn.aux_loss for b in self.decoder.layers
                   if isinstance(b.ffn, MixtureOfExperts))

    def mask(self, T):
        """The blocks' mask for T positions, True = blocked: the causal mask, or the band of
        sliding_window_mask; without the columns of the keys forgotten (decode). Both depend on
        k - q only, so the (T, T) mask is a read-only view of one row of 2T - 1 offsets: a decoding
        step, which keeps its new rows only, builds O(T) booleans, not T^2."""
        window = T if self.config.window is None else self.config.window
        offset = np.arange(1 - T, T)  # k - q, from -(T - 1) to T - 1
        row = (offset > 0) | (offset <= -window)  # the future, and the keys too old
        views = np.lib.stride_tricks.sliding_window_view(row, T)  # [i, k] = row[i + k]
        return views[::-1, self.forgotten:]  # row q = view T - 1 - q: [q, k] = row[T - 1 + k - q]
