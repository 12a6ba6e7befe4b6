"""Exercises of notebook 09: RMSNorm, SwiGLU, RoPE, grouped-query attention, the KV cache of a
published model, a sliding-window mask, llama's SwiGLU width, and Mixtral's top-k router."""

import math

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.modern import GroupedQueryAttention, RMSNorm, SwiGLU, rope
from helpers.transformer import causal_mask, merge_heads, pe_frequencies, split_heads

_rng = np.random.default_rng(109)  # the cases are the same on every run and every machine

# ── 09.1 · rms_norm ───────────────────────────────────────────────────────────────────────────


def _rms_norm(x, gamma, eps=1e-5):
    """The library's RMSNorm with the given gamma."""
    norm = RMSNorm(x.shape[-1], eps)
    norm.load_parameters({"gamma": np.asarray(gamma, dtype=float)})
    return norm.forward(x)


def _divided(x, gamma, eps=1e-5, *, axis=-1, centre=False, root=True, inside=True,
             reduce=np.mean):
    """x (centred or not) divided by the root of reduce(x^2) along `axis`, with the switches of
    the mistakes below."""
    if centre:
        x = x - x.mean(axis=axis, keepdims=True)
    square = reduce(x * x, axis=axis, keepdims=True)
    if not root:
        return x / (square + eps) * gamma
    return x / (np.sqrt(square + eps) if inside else np.sqrt(square) + eps) * gamma


_SECTION_1 = "09 §1 · RMSNorm: LayerNorm without the mean"

RMS_NORM = Exercise(
    key="09.1", name="rms_norm", reference=_rms_norm, see=_SECTION_1,
    cases=(
        Case("x = [[3, 4], [0, 0]], γ = 1 (by hand: √((9 + 16) / 2) = 3.54, so row 0 is "
             "[0.85, 1.13]; the zero row stays 0)",
             (np.array([[3.0, 4.0], [0.0, 0.0]]), np.ones(2))),
        Case("x of shape (3, 8) whose rows have means far from 0, random γ",
             (_rng.normal(size=(3, 8)) + np.array([[2.0], [-3.0], [0.5]]), _rng.normal(size=8))),
        Case("a batch x of shape (2, 3, 6), random γ",
             (_rng.normal(size=(2, 3, 6)) * 2, _rng.normal(size=6))),
        Case("eps = 0.1, rows of rms 1, 0.1 and 0",
             (np.vstack([_rng.choice([-1.0, 1.0], 5), _rng.choice([-0.1, 0.1], 5), np.zeros(5)]),
              _rng.normal(size=5)), {"eps": 0.1}),
    ),
    mistakes=(
        Mistake("rms-subtracts-mean",
                "the mean is subtracted first: that is LayerNorm (without β); RMSNorm divides x "
                "itself by its root mean square",
                _SECTION_1, lambda x, gamma, eps=1e-5: _divided(x, gamma, eps, centre=True)),
        Mistake("rms-divides-by-std",
                "x is divided by its standard deviation (np.std centres x first); RMSNorm "
                "divides by √(mean(x²) + ε), with no mean taken out",
                _SECTION_1, lambda x, gamma, eps=1e-5:
                    x / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma),
        Mistake("rms-no-sqrt",
                "x is divided by mean(x²) + ε, not by its square root",
                _SECTION_1, lambda x, gamma, eps=1e-5: _divided(x, gamma, eps, root=False)),
        Mistake("rms-eps-outside-sqrt",
                "ε is added outside the square root, x / (√mean(x²) + ε); it belongs inside",
                "05 §1 · Three near-misses",
                lambda x, gamma, eps=1e-5: _divided(x, gamma, eps, inside=False)),
        Mistake("rms-no-eps",
                "there is no ε: a row of zeros divides 0 by 0 and gives NaN",
                _SECTION_1, lambda x, gamma, eps=1e-5: _divided(x, gamma, 0.0)),
        Mistake("rms-ignores-eps",
                "ε is fixed at 1e-5: the `eps` argument is ignored",
                _SECTION_1, lambda x, gamma, eps=1e-5: _rms_norm(x, gamma)),
        Mistake("rms-sum-not-mean",
                "the squares are summed, not averaged: x / √(Σx² + ε) is x over its length, "
                "√d times smaller than x over its root mean square",
                _SECTION_1, lambda x, gamma, eps=1e-5: _divided(x, gamma, eps, reduce=np.sum)),
        Mistake("rms-over-axis-0",
                "the mean of the squares is taken over axis 0 (the batch), not over the "
                "features of each position (the last axis)",
                "05 §1 · Three near-misses",
                lambda x, gamma, eps=1e-5: _divided(x, gamma, eps, axis=0)),
        Mistake("rms-over-everything",
                "the mean of the squares is taken over the whole array (no axis): each position "
                "needs its own, over its features (axis=-1, keepdims=True)",
                "05 §1 · Three near-misses",
                lambda x, gamma, eps=1e-5: x / np.sqrt((x * x).mean() + eps) * gamma),
        Mistake("rms-no-gamma",
                "γ is not applied: the result is only divided by the root mean square",
                _SECTION_1, lambda x, gamma, eps=1e-5: _divided(x, 1.0, eps)),
    ),
)

# ── 09.2 · swiglu ─────────────────────────────────────────────────────────────────────────────


def _swiglu(x, W_1, V, W_2):
    """The library's SwiGLU with the given weights."""
    ffn = SwiGLU(W_1.shape[0], W_1.shape[1], np.random.default_rng(0))
    ffn.load_parameters({"W_1": W_1, "V": V, "W_2": W_2})
    return ffn.forward(x)


def _swish(a):
    return a / (1.0 + np.exp(-a))


def _gated(x, W_1, V, W_2, *, gate=_swish, on_value=False, combine=np.multiply, down=True):
    a, b = x @ W_1, x @ V
    hidden = combine(a, gate(b)) if on_value else combine(gate(a), b)
    return hidden @ W_2 if down else hidden


def _weights(d, d_ff, shift=0.0):
    return (_rng.normal(size=(d, d_ff)) + shift, _rng.normal(size=(d, d_ff)),
            _rng.normal(size=(d_ff, d)) / np.sqrt(d_ff))


_SECTION_2 = "09 §2 · SwiGLU: a gated feed-forward network"

SWIGLU = Exercise(
    key="09.2", name="swiglu", reference=_swiglu, see=_SECTION_2,
    cases=(
        Case("x = [[2, 3]], W_1 = I, V = [[1, 0], [1, -1]], W_2 = [[0, 1], [1, 2]] (by hand: "
             "the gate Swish(x W_1) = [2 σ(2), 3 σ(3)] = [1.76, 2.86], x V = [5, -3], their "
             "product [8.81, -8.57], and W_2 maps that to [[-8.57, -8.34]])",
             (np.array([[2.0, 3.0]]), np.eye(2), np.array([[1.0, 0.0], [1.0, -1.0]]),
              np.array([[0.0, 1.0], [1.0, 2.0]]))),
        Case("x of shape (3, 4), d_ff = 6", (_rng.normal(size=(3, 4)), *_weights(4, 6))),
        Case("a batch x of shape (2, 3, 4), d_ff = 5, gates from -6 to 6",
             (_rng.normal(size=(2, 3, 4)) * 2, *_weights(4, 5, shift=0.5))),
    ),
    mistakes=(
        Mistake("swiglu-relu-gate",
                "the gate is ReLU(x W_1): that is ReGLU; SwiGLU's gate is Swish(a) = a σ(a), "
                "smooth and slightly negative below 0",
                _SECTION_2, lambda x, W_1, V, W_2: _gated(x, W_1, V, W_2,
                                                          gate=lambda a: np.maximum(a, 0))),
        Mistake("swiglu-sigmoid-gate",
                "the gate is σ(x W_1), the original GLU; Swish multiplies it by a once more: "
                "Swish(a) = a σ(a)",
                _SECTION_2, lambda x, W_1, V, W_2: _gated(x, W_1, V, W_2,
                                                          gate=lambda a: 1 / (1 + np.exp(-a)))),
        Mistake("swiglu-swish-on-value",
                "Swish is applied to x V and x W_1 passes unchanged: the roles of W_1 (the "
                "gate, through Swish) and V (the value it gates) are swapped",
                _SECTION_2, lambda x, W_1, V, W_2: _gated(x, W_1, V, W_2, on_value=True)),
        Mistake("swiglu-no-value",
                "x V is left out: Swish(x W_1) W_2 is a plain feed-forward network with Swish; "
                "the gate must multiply x V",
                _SECTION_2, lambda x, W_1, V, W_2: _swish(x @ W_1) @ W_2),
        Mistake("swiglu-adds-not-multiplies",
                "the two branches are added, Swish(x W_1) + x V; the gate multiplies them, "
                "element by element",
                _SECTION_2, lambda x, W_1, V, W_2: _gated(x, W_1, V, W_2, combine=np.add)),
        Mistake("swiglu-swish-of-product",
                "Swish is applied to the product, Swish(x W_1 · x V); it gates x V from x W_1 "
                "alone: Swish(x W_1) · x V",
                _SECTION_2, lambda x, W_1, V, W_2: _swish((x @ W_1) * (x @ V)) @ W_2),
        Mistake("swiglu-no-down-projection",
                "W_2 is not applied: the hidden layer (width d_ff) is returned instead of the "
                "output of width d_model",
                _SECTION_2, lambda x, W_1, V, W_2: _gated(x, W_1, V, W_2, down=False)),
    ),
)

# ── 09.3 · rope ───────────────────────────────────────────────────────────────────────────────


def _rotate(x, start=0, *, sign=1.0, halves=False, offset=0, frequencies=None, swap=False):
    """Rotate pairs of the last axis by sign * position * w_i, with the switches of the
    mistakes below."""
    T, d = x.shape[-2], x.shape[-1]
    w = pe_frequencies(d) if frequencies is None else frequencies(d)
    angles = sign * (np.arange(T) + start + offset)[:, None] * w  # (T, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    if swap:
        cos, sin = sin, cos
    first, second = ((x[..., :d // 2], x[..., d // 2:]) if halves
                     else (x[..., 0::2], x[..., 1::2]))
    new_first, new_second = first * cos - second * sin, first * sin + second * cos
    out = np.empty_like(x)
    if halves:
        out[..., :d // 2], out[..., d // 2:] = new_first, new_second
    else:
        out[..., 0::2], out[..., 1::2] = new_first, new_second
    return out


_SECTION_3 = "09 §3 · RoPE: positions as rotations of the queries and keys"

ROPE = Exercise(
    key="09.3", name="rope", reference=lambda x, start=0: rope(x, start), see=_SECTION_3,
    cases=(
        Case("x = [[1, 0, 1, 0]] at position 1 (start = 1; by hand: pair 0 turns by 1 radian, "
             "to [cos 1, sin 1] = [0.54, 0.84], pair 1 by 1/100, to [1.00, 0.01])",
             (np.array([[1.0, 0.0, 1.0, 0.0]]),), {"start": 1}),
        Case("x of shape (5, 8), start = 0", (_rng.normal(size=(5, 8)),)),
        Case("a batch x of shape (2, 3, 6, 4) (batch, heads, positions, d_k), start = 7",
             (_rng.normal(size=(2, 3, 6, 4)),), {"start": 7}),
        Case("one pair per position, x of shape (4, 2), start = 2",
             (_rng.normal(size=(4, 2)),), {"start": 2}),
    ),
    mistakes=(
        Mistake("rope-wrong-direction",
                "each pair turns by minus its angle: (x₀, x₁) goes to (x₀ cos θ + x₁ sin θ, "
                "-x₀ sin θ + x₁ cos θ); RoPE turns it forwards, x₀ cos θ - x₁ sin θ first",
                _SECTION_3, lambda x, start=0: _rotate(x, start, sign=-1.0)),
        Mistake("rope-halves-layout",
                "feature i is paired with feature i + d/2 (GPT-NeoX's layout, rotate_half); "
                "this exercise pairs neighbours, (x[2i], x[2i+1]), as RoFormer and llama do",
                _SECTION_3, lambda x, start=0: _rotate(x, start, halves=True)),
        Mistake("rope-ignores-start",
                "`start` is ignored: the positions always begin at 0, so a cached step would "
                "rotate its new token as if it were the first",
                "09 §6 · A decoder-only model, generating with a KV cache",
                lambda x, start=0: _rotate(x, 0)),
        Mistake("rope-positions-from-one",
                "the positions count from 1 (start + 1, start + 2, ...); they are start, "
                "start + 1, ...",
                _SECTION_3, lambda x, start=0: _rotate(x, start, offset=1)),
        Mistake("rope-frequencies-i-over-d",
                "the frequencies are 1 / 10000^(i / d); they are notebook 03's, "
                "1 / 10000^(2i / d), one per pair i = 0 .. d/2 - 1",
                "03 §2 · The sinusoidal encoding",
                lambda x, start=0: _rotate(x, start, frequencies=lambda d:
                                           1.0 / 10000.0 ** (np.arange(d // 2) / d))),
        Mistake("rope-one-frequency",
                "every pair turns at the first frequency, 1 radian per position; pair i turns "
                "at w_i = 1 / 10000^(2i / d), slower and slower",
                "03 §3 · The wavelengths",
                lambda x, start=0: _rotate(x, start, frequencies=lambda d: np.ones(d // 2))),
        Mistake("rope-cos-sin-swapped",
                "cos and sin are swapped: (x₀ sin θ - x₁ cos θ, x₀ cos θ + x₁ sin θ) does not "
                "even leave position 0 unchanged",
                _SECTION_3, lambda x, start=0: _rotate(x, start, swap=True)),
    ),
)

# ── 09.4 · grouped_query_attention ────────────────────────────────────────────────────────────


def _gqa_reference(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    """The library's GroupedQueryAttention with these weights, no biases, no RoPE, causal."""
    d = x.shape[-1]
    layer = GroupedQueryAttention(d, n_heads, n_kv_heads, np.random.default_rng(0), rope=False)
    params = layer.parameters()
    params.update({"W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o})
    layer.load_parameters({k: (v if k.startswith("W") else np.zeros_like(v))
                           for k, v in params.items()})
    return layer.forward(x, x, x, causal_mask(x.shape[-2]))


def _gqa(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, *, share="repeat", mask=True,
         scale=None, project=True, split="transpose", after=False, merge="transpose",
         k_dot_t=False):
    """Grouped-query attention with the switches of the mistakes below."""
    B, T, d = x.shape
    d_k = d // n_heads

    def heads(a, n):
        if split == "transpose":
            return split_heads(a, n)
        return a.reshape(B, n, T, d_k)  # no transpose: the wrong numbers in each head

    Q, K, V = heads(x @ W_q, n_heads), heads(x @ W_k, n_kv_heads), heads(x @ W_v, n_kv_heads)
    group = n_heads // n_kv_heads
    if share == "repeat":
        K, V = np.repeat(K, group, axis=1), np.repeat(V, group, axis=1)
    else:  # tile: query head i reads key/value head i % g
        K, V = np.tile(K, (1, group, 1, 1)), np.tile(V, (1, group, 1, 1))
    scores = Q @ (K.T if k_dot_t else K.swapaxes(-1, -2)) / (np.sqrt(d_k) if scale is None
                                                             else scale)
    blocked = causal_mask(T)
    if mask and not after:
        scores = np.where(blocked, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    if after:
        weights = weights * ~blocked
    heads_out = weights @ V  # (B, h, T, d_k)
    if k_dot_t:  # the merge written as the solution writes it: where K.T's error shows
        return heads_out.transpose(0, 2, 1, 3).reshape(B, T, d) @ W_o
    out = merge_heads(heads_out) if merge == "transpose" else heads_out.reshape(B, T, d)
    return out @ W_o if project else out


def _gqa_case(B, T, d, h, g):
    d_k = d // h
    return (_rng.normal(size=(B, T, d)), *(_rng.normal(size=(d, w)) / np.sqrt(d)
                                           for w in (d, g * d_k, g * d_k, d)), h, g)


_SECTION_4 = "09 §4 · Grouped-query attention: fewer keys and values to keep"

GQA = Exercise(
    key="09.4", name="grouped_query_attention", reference=_gqa_reference, see=_SECTION_4,
    cases=(
        Case("one position, B = 1, T = 1, d_model = 4, h = 2 query heads, g = 1 (by hand: "
             "a lone query can only read itself, so the output is x W_v, repeated for both "
             "heads, times W_o)", _gqa_case(1, 1, 4, 2, 1)),
        Case("two positions, B = 1, d_model = 2, h = 2, g = 1, W_q = W_k = 0, W_v = [[1], [0]] "
             "(the first feature), W_o = I, x = [[2, 5], [4, 1]] (by hand: the scores are 0, so "
             "position 0 reads itself, v = 2, and position 1 averages v = 2 and 4, v = 3, in "
             "each of the two heads; the output is [[2, 2], [3, 3]])",
             (np.array([[[2.0, 5.0], [4.0, 1.0]]]), np.zeros((2, 2)), np.zeros((2, 1)),
              np.array([[1.0], [0.0]]), np.eye(2), 2, 1)),
        Case("B = 1, T = 4, d_model = 8, h = 4, g = 2", _gqa_case(1, 4, 8, 4, 2)),
        Case("B = 2, T = 5, d_model = 8, h = 4, g = 1 (multi-query)", _gqa_case(2, 5, 8, 4, 1)),
        Case("B = 2, T = 3, d_model = 12, h = 6, g = 3", _gqa_case(2, 3, 12, 6, 3)),
    ),
    mistakes=(
        Mistake("gqa-tile-not-repeat",
                "query head i reads key/value head i % g (np.tile); the heads of a group sit "
                "next to each other, so head i reads head i // (h / g) (np.repeat)",
                _SECTION_4, lambda *a: _gqa(*a, share="tile")),
        Mistake("gqa-no-causal-mask",
                "there is no causal mask: every position reads the later ones too",
                "04 §1 · The causal mask: no looking ahead", lambda *a: _gqa(*a, mask=False)),
        Mistake("gqa-mask-after-softmax",
                "the causal mask zeroes the weights after the softmax: the rows no longer sum "
                "to 1; mask the scores (-inf) before it",
                "04 §3 · Mask before the softmax, not after", lambda *a: _gqa(*a, after=True)),
        Mistake("gqa-scale-by-d-model",
                "the scores are divided by √d_model; each head's are divided by √d_k, the "
                "width of one head",
                "01 §4 · Why divide by √d_k",
                lambda x, *a: _gqa(x, *a, scale=np.sqrt(x.shape[-1]))),
        Mistake("gqa-no-scaling",
                "the scores are not divided by √d_k",
                "01 §4 · Why divide by √d_k", lambda *a: _gqa(*a, scale=1.0)),
        Mistake("gqa-no-output-projection",
                "W_o is not applied: the merged heads are returned",
                "02 §3 · The layer in eight lines", lambda *a: _gqa(*a, project=False)),
        Mistake("gqa-split-without-transpose",
                "the heads are split by one reshape to (B, h, T, d_k), without the transpose: "
                "each head gets pieces of several positions",
                "02 §2 · Split and merge, one step at a time",
                lambda *a: _gqa(*a, split="reshape")),
        Mistake("gqa-merge-without-transpose",
                "the heads are merged by one reshape of (B, h, T, d_k) to (B, T, d_model), "
                "without swapping the head and position axes back first: each row holds pieces "
                "of several positions (right only when T = 1)",
                "02 §2 · Split and merge, one step at a time",
                lambda *a: _gqa(*a, merge="reshape")),
        Mistake("gqa-k-transposed",
                "K.T (or np.transpose(K)) reverses every axis of the 4-D keys: (B, h, T, d_k) "
                "becomes (d_k, T, h, B), so the scores come out with the wrong shape and the "
                "error only shows at a later line (here the merge); K.swapaxes(-1, -2) swaps "
                "only the last two axes",
                "01 §2 · All the scores at once (swapaxes, not .T)",
                lambda *a: _gqa(*a, k_dot_t=True)),
    ),
)

# ── 09.5 · the KV cache of a published model (a transfer: §6's count on a config.json) ────────

_SECTION_6 = "09 §6 · A decoder-only model, generating with a KV cache"


def _kv_cache_bytes(config, tokens, bytes_per_number=2):
    """2 (K and V) x layers x key/value heads x head width x tokens x bytes per number."""
    d_head = config["hidden_size"] // config["num_attention_heads"]
    return (2 * config["num_hidden_layers"] * config["num_key_value_heads"] * d_head * tokens
            * bytes_per_number)


def _kv_model(*, factor=2, kv_heads=True, d_head_is_d_model=False, layers=True, in_bytes=True):
    def model(config, tokens, bytes_per_number=2):
        d_model, h = config["hidden_size"], config["num_attention_heads"]
        heads = config["num_key_value_heads"] if kv_heads else h
        d_head = d_model if d_head_is_d_model else d_model // h
        return (factor * (config["num_hidden_layers"] if layers else 1) * heads * d_head * tokens
                * (bytes_per_number if in_bytes else 1))
    return model


def _config(layers, d_model, heads, kv_heads):  # in the names of Hugging Face's config.json
    return {"num_hidden_layers": layers, "hidden_size": d_model, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads}


PUBLISHED = {  # notebook 09's table (Going further); d_model = heads x d_head
    "Llama 2 70B": _config(80, 8192, 64, 8), "Mistral 7B": _config(32, 4096, 32, 8),
    "Llama 2 7B": _config(32, 4096, 32, 32), "Falcon-7B": _config(32, 4544, 71, 1),
    "GPT-3 175B": _config(96, 12288, 96, 96)}

KV_CACHE_BYTES = Exercise(
    key="09.5", name="kv_cache_bytes", reference=_kv_cache_bytes, see=_SECTION_6,
    cases=(
        Case("2 layers, hidden_size = 8, 4 query heads, 2 key/value heads, 3 tokens, 4 bytes per "
             "number (by hand: 2 · 2 · 2 · 2 · 3 · 4 = 192)", (_config(2, 8, 4, 2), 3, 4)),
        Case("Llama 2 70B, 4,096 tokens, 16-bit (GQA: 1.25 GiB)",
             (PUBLISHED["Llama 2 70B"], 4096)),
        Case("Mistral 7B, 4,096 tokens, 16-bit (GQA)", (PUBLISHED["Mistral 7B"], 4096)),
        Case("Llama 2 7B, 4,096 tokens, 16-bit (multi-head attention)",
             (PUBLISHED["Llama 2 7B"], 4096)),
        Case("Falcon-7B, 2,048 tokens, 16-bit (multi-query: one key/value head)",
             (PUBLISHED["Falcon-7B"], 2048)),
        Case("GPT-3 175B, 2,048 tokens, 32-bit (multi-head attention)",
             (PUBLISHED["GPT-3 175B"], 2048, 4)),
    ),
    mistakes=(
        Mistake("kv-cache-no-factor-2",
                "the factor 2 is missing: the cache keeps a key and a value for every token, "
                "head and layer", _SECTION_6, _kv_model(factor=1)),
        Mistake("kv-cache-query-heads",
                "each layer's keys are counted d_model = n_heads · d_head wide, as if every query "
                "head had its own: only the key/value heads are cached, num_key_value_heads · "
                "d_head, with d_head = hidden_size / num_attention_heads (the two agree only for "
                "multi-head attention)", _SECTION_6, _kv_model(kv_heads=False)),
        Mistake("kv-cache-head-width-d-model",
                "each key/value head is counted d_model wide: a head is d_head = d_model / "
                "n_heads wide (hidden_size / num_attention_heads)", _SECTION_6,
                _kv_model(d_head_is_d_model=True)),
        Mistake("kv-cache-one-layer",
                "the layers are forgotten: every layer keeps its own keys and values",
                _SECTION_6, _kv_model(layers=False)),
        Mistake("kv-cache-numbers-not-bytes",
                "this counts numbers, not bytes: multiply by bytes_per_number (2 for 16-bit)",
                _SECTION_6, _kv_model(in_bytes=False)),
    ),
)

# ── 09.6 · the sliding-window mask (a transfer: notebook 04's causal mask, bounded) ───────────

_CAUSAL = "04 §1 · The causal mask: no looking ahead"


def _sliding_window_mask(T, window, *, oldest=0, causal=True, future=False, keep=False):
    """(T, T) boolean, True = blocked: query q sees the keys k with q - window < k <= q (itself and
    the window - 1 before it); with the slips of the mistakes below (the oldest visible key moved
    by `oldest`, the future not blocked, the window on the future side, True = visible)."""
    q, k = np.arange(T)[:, None], np.arange(T)[None, :]
    if future:  # rows read as keys: q <= k < q + window
        sees = (k >= q) & (k - q < window)
    else:
        sees = (q - k < window + oldest) & ((k <= q) if causal else (k - q < window))
    return sees if keep else ~sees


def _window_model(**slip):
    return lambda T, window: _sliding_window_mask(T, window, **slip)


SLIDING_WINDOW = Exercise(
    key="09.6", name="sliding_window_mask", reference=_sliding_window_mask, see=_CAUSAL,
    cases=(
        Case("T = 4, window = 2 (by hand: each query sees itself and the key before it: "
             "[[F, T, T, T], [F, F, T, T], [T, F, F, T], [T, T, F, F]])", (4, 2)),
        Case("T = 5, window = 1 (only the diagonal is visible)", (5, 1)),
        Case("T = 6, window = 3", (6, 3)),
        Case("T = 4, window = 4 (= T: the plain causal mask)", (4, 4)),
        Case("T = 3, window = 10 (> T: the plain causal mask)", (3, 10)),
        Case("T = 8, window = 5", (8, 5)),
    ),
    mistakes=(
        Mistake("window-one-too-many",
                "each query sees window + 1 keys (q - k <= window): the window counts the "
                "query itself, so the oldest key it sees is q - window + 1",
                _CAUSAL, _window_model(oldest=1)),
        Mistake("window-one-too-few",
                "each query sees window - 1 keys: with window = 1 it must still see itself, "
                "the diagonal; the oldest key it sees is q - window + 1",
                _CAUSAL, _window_model(oldest=-1)),
        Mistake("window-not-causal",
                "the band reaches both ways (|q - k| < window), as in Longformer's encoder: a "
                "decoder must also block the later keys k > q, as the causal mask does",
                _CAUSAL, _window_model(causal=False)),
        Mistake("window-future-not-blocked",
                "only the keys too old are blocked (k <= q - window): the later keys k > q are "
                "visible; the sliding window is the causal mask with the old keys blocked too",
                _CAUSAL, lambda T, window: np.subtract.outer(np.arange(T), np.arange(T))
                >= window),
        Mistake("window-on-the-future",
                "the window lies on the wrong side of the diagonal (q <= k < q + window): row q "
                "is query q, column k is key k, and a query sees the keys before it",
                _CAUSAL, _window_model(future=True)),
        Mistake("window-inverted",
                "the mask is True where a key is visible (a keep-mask); in this series True = "
                "blocked", "04 §7 · Other encodings", _window_model(keep=True)),
        Mistake("window-not-boolean",
                "the mask holds numbers 0 and 1, not booleans: np.where(mask, ...) and ~mask "
                "need a boolean array (dtype=bool)",
                _CAUSAL, lambda T, window: _sliding_window_mask(T, window).astype(float)),
    ),
)

# ── 09.7 · llama's SwiGLU width (a transfer: §2's 8/3 rule, as Meta's code rounds it) ─────────

_LLAMA = ("09 §2 · SwiGLU: a gated feed-forward network (llama's rule: Going further · A llama, "
          "number for number)")


def _llama_hidden(d_model, multiple_of=256, ffn_dim_multiplier=None, *, four=4, truncate=True,
                  rounding="up", multiplier="before"):
    """2/3 of 4 d_model, truncated to an integer, times ffn_dim_multiplier (truncated again),
    rounded up to a multiple of `multiple_of`; with the slips of the mistakes below."""
    hidden = 2 * four * d_model / 3
    hidden = int(hidden) if truncate else hidden
    if ffn_dim_multiplier is not None and multiplier == "before":
        hidden = ffn_dim_multiplier * hidden
        hidden = int(hidden) if truncate else hidden
    if rounding == "up":
        hidden = multiple_of * math.ceil(hidden / multiple_of)
    elif rounding == "down":
        hidden = multiple_of * math.floor(hidden / multiple_of)
    elif rounding == "nearest":
        hidden = multiple_of * round(hidden / multiple_of)
    if ffn_dim_multiplier is not None and multiplier == "after":
        hidden = int(ffn_dim_multiplier * hidden)
    return int(hidden)


def _hidden_model(**slip):
    return lambda d_model, multiple_of=256, ffn_dim_multiplier=None: _llama_hidden(
        d_model, multiple_of, ffn_dim_multiplier, **slip)


LLAMA_HIDDEN = Exercise(
    key="09.7", name="llama_hidden", reference=_llama_hidden, see=_LLAMA,
    cases=(
        Case("d_model = 10, multiple_of = 8 (by hand: 2/3 of 40 is 26.7, int 26, rounded up "
             "to 32)", (10, 8)),
        Case("d_model = 25, multiple_of = 2 (by hand: 2/3 of 100 is 66.7, int 66, already a "
             "multiple of 2)", (25, 2)),
        Case("d_model = 12, multiple_of = 8, ffn_dim_multiplier = 1.5 (by hand: 32, times 1.5 "
             "is 48, a multiple of 8)", (12, 8, 1.5)),
        Case("Llama 2 7B (dim 4096, multiple_of 256): 11,008", (4096, 256)),
        Case("Llama 2 13B (dim 5120, multiple_of 256): 13,824", (5120, 256)),
        Case("Llama 2 70B (dim 8192, multiple_of 4096, ffn_dim_multiplier 1.3): 28,672",
             (8192, 4096, 1.3)),
        Case("Llama 3 8B (dim 4096, multiple_of 1024, ffn_dim_multiplier 1.3): 14,336",
             (4096, 1024, 1.3)),
    ),
    mistakes=(
        Mistake("hidden-not-rounded",
                "the width is 2/3 of 4 d_model, but never rounded to a multiple of multiple_of: "
                "llama rounds it up, so that the width suits the hardware", _LLAMA,
                _hidden_model(rounding=None)),
        Mistake("hidden-rounded-down",
                "the width is rounded down to a multiple of multiple_of: llama rounds up "
                "(multiple_of * ((hidden + multiple_of - 1) // multiple_of))", _LLAMA,
                _hidden_model(rounding="down")),
        Mistake("hidden-rounded-to-nearest",
                "the width is rounded to the nearest multiple of multiple_of: llama rounds up",
                _LLAMA, _hidden_model(rounding="nearest")),
        Mistake("hidden-multiplier-after-rounding",
                "ffn_dim_multiplier is applied after the rounding: llama multiplies the "
                "truncated 2/3 of 4 d_model first, then rounds the product up", _LLAMA,
                _hidden_model(multiplier="after")),
        Mistake("hidden-multiplier-ignored",
                "ffn_dim_multiplier is ignored: when given (Llama 2 70B's 1.3), it scales the "
                "width before the rounding", _LLAMA, _hidden_model(multiplier=None)),
        Mistake("hidden-without-the-4",
                "the width starts from 2/3 of d_model: llama starts from 4 d_model, the paper's "
                "ReLU width, and takes 2/3 of that (SwiGLU has three matrices, not two)", _LLAMA,
                _hidden_model(four=1)),
        Mistake("hidden-not-truncated",
                "the fractions are kept until the rounding: llama truncates 2/3 of 4 d_model to an "
                "integer first (int(...)), which can land on a multiple one lower", _LLAMA,
                _hidden_model(truncate=False)),
    ),
)

# ── 09.8 · Mixtral's router (a transfer: notebook 01's softmax over the k chosen experts) ──────

_ROUTER = ("09 §2 · SwiGLU: a gated feed-forward network (Going further · A mixture of experts: "
           "top-k routing and a load-balancing loss)")
_SOFTMAX = "01 §3 · Softmax, without overflow"


def _softmax(a, axis=-1):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _top_k_routing(logits, k):
    """The k largest logits of each token, largest first (ties to the lower expert index), and
    the softmax over those k logits only (Mixtral)."""
    logits = np.asarray(logits)
    if not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"k must be between 1 and n_experts = {logits.shape[-1]}, got {k}")
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]  # (..., k)
    return experts, _softmax(np.take_along_axis(logits, experts, axis=-1))


def _routed(experts=None, gates=_softmax):
    """A router that picks experts(logits, k) (default: the reference's) and gives them
    gates(their logits), the slips of the mistakes below."""
    def model(logits, k):
        chosen = (_top_k_routing(logits, k)[0] if experts is None else experts(logits, k))
        return chosen, gates(np.take_along_axis(logits, chosen, axis=-1))
    return model


def _ascending(logits):
    return np.argsort(logits, axis=-1, kind="stable")


def _unshifted(a):
    return np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)


def _over_everything(a):
    return np.exp(a - a.max()) / np.exp(a - a.max()).sum()


def _all_experts_softmax(logits, k):
    experts = _top_k_routing(logits, k)[0]
    return experts, np.take_along_axis(_softmax(logits), experts, axis=-1)


def _gates_reversed(logits, k):
    experts, gates = _top_k_routing(logits, k)
    return experts, gates[..., ::-1]


TOP_K_ROUTING = Exercise(
    key="09.8", name="top_k_routing", reference=_top_k_routing, see=_ROUTER,
    outputs=("experts", "gates"),
    cases=(
        Case("2 tokens, 4 experts, k = 2: logits [[0, 2, 3, 1], [1, 0, -1, 3]] (by hand: experts "
             "[[2, 1], [3, 0]], gates the softmax of [3, 2] and of [3, 1]: [[0.73, 0.27], "
             "[0.88, 0.12]])", (np.array([[0.0, 2.0, 3.0, 1.0], [1.0, 0.0, -1.0, 3.0]]), 2)),
        Case("a batch of logits (B, T, E) = (2, 3, 8), k = 2",
             (_rng.normal(size=(2, 3, 8)) * 2, 2)),
        Case("k = 1 (Switch Transformer's top-1), 5 tokens, 4 experts: every gate is 1",
             (_rng.normal(size=(5, 4)) * 2, 1)),
        Case("k = E = 4: every expert, sorted by logit, 3 tokens", (_rng.normal(size=(3, 4)), 4)),
        Case("ties, k = 2: logits [[1, 1, 0, 1], [0, 2, 2, -1], [3, 3, 3, 3]] (ties go to the "
             "lower expert index: experts [[0, 1], [1, 2], [0, 1]], every gate 0.5)",
             (np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 2.0, 2.0, -1.0], [3.0, 3.0, 3.0, 3.0]]), 2)),
        Case("logits of ±1000, k = 2: [[1000, 998, 0, -5], [-1000, -1001, -1003, -1002]] (no "
             "overflow: gates [[0.88, 0.12], [0.73, 0.27]])",
             (np.array([[1000.0, 998.0, 0.0, -5.0], [-1000.0, -1001.0, -1003.0, -1002.0]]), 2)),
    ),
    mistakes=(
        Mistake("router-softmax-over-all-experts",
                "the softmax runs over all the experts and the k chosen probabilities are kept "
                "as they are: they sum to less than 1 (Switch Transformer's and DeepSeek-V2's "
                "routing); Mixtral takes the softmax over the k chosen logits only (or "
                "renormalises the k probabilities to sum to 1)", _ROUTER, _all_experts_softmax),
        Mistake("router-k-smallest",
                "the experts with the k smallest logits are chosen (np.argsort sorts in "
                "ascending order); the router picks the k largest: argsort -logits",
                _ROUTER, _routed(lambda logits, k: _ascending(logits)[..., :k])),
        Mistake("router-largest-last",
                "the k largest logits are chosen, but from the smallest of them to the largest "
                "(np.argsort(logits)[..., -k:]); experts[..., 0] must be each token's largest",
                _ROUTER, _routed(lambda logits, k: _ascending(logits)[..., -k:])),
        Mistake("router-experts-in-index-order",
                "the k experts are listed by their index (sorted, or from a mask); they are "
                "listed by logit, largest first, with their gates in the same order",
                _ROUTER, _routed(lambda logits, k: np.sort(_top_k_routing(logits, k)[0],
                                                           axis=-1))),
        Mistake("router-ties-to-higher-index",
                "tied logits go to the higher expert index (np.argsort(logits)[..., ::-1] "
                "reverses the order of ties too); ties go to the lower index, as "
                "np.argsort(-logits, kind='stable') keeps them",
                _ROUTER, _routed(lambda logits, k: _ascending(logits)[..., ::-1][..., :k])),
        Mistake("router-gates-not-aligned",
                "the gates come in the reverse order of the experts (np.sort(logits)[..., -k:] "
                "is ascending): gates[..., j] must belong to experts[..., j]",
                _ROUTER, _gates_reversed),
        Mistake("router-argmax-repeated",
                "the same expert is picked k times: np.argmax again and again returns the same "
                "index unless the chosen logit is set to -inf before the next pick",
                _ROUTER, _routed(lambda logits, k: np.repeat(
                    logits.argmax(axis=-1)[..., None], k, axis=-1))),
        Mistake("router-softmax-over-axis-0",
                "the softmax of the chosen logits runs over axis 0 (the tokens, or the batch); "
                "each token's k gates are normalised over its own k experts, the last axis",
                "01 §2 · All the scores at once (row i holds query i's scores)",
                _routed(gates=lambda a: _softmax(a, axis=0))),
        Mistake("router-softmax-over-everything",
                "the softmax's sum runs over the whole array (no axis): the gates of all the "
                "tokens together sum to 1, not each token's k gates", _SOFTMAX,
                _routed(gates=_over_everything)),
        Mistake("router-softmax-overflows",
                "the softmax does not subtract each token's largest logit: exp(1000) overflows "
                "to inf (and exp(-1000) is 0), and inf / inf or 0 / 0 is NaN", _SOFTMAX,
                _routed(gates=_unshifted)),
        Mistake("router-softmax-global-max",
                "one maximum of the whole array (np.max) is subtracted, not each token's: a "
                "token whose logits are all far below it underflows to exp(...) = 0 and gets "
                "0 / 0", _SOFTMAX,
                _routed(gates=lambda a: np.exp(a - a.max()) / np.exp(a - a.max()).sum(
                    axis=-1, keepdims=True))),
    ),
)

EXERCISES = (RMS_NORM, SWIGLU, ROPE, GQA, KV_CACHE_BYTES, SLIDING_WINDOW, LLAMA_HIDDEN,
             TOP_K_ROUTING)
