"""Notebook 09's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/modern.py (its models of the same mistakes): loops over
positions and pairs, other spellings, the library pieces learners would reach for.
tests/test_checks.py asserts that the checker names exactly the mistake each one makes.
"""

import math

import numpy as np
import pytest

from helpers import checks

# ── 09.1 · rms_norm ───────────────────────────────────────────────────────────────────────────


def rms_subtracts_mean(x, gamma, eps=1e-5):
    c = x - np.mean(x, axis=-1, keepdims=True)
    return c / np.sqrt(np.mean(c**2, axis=-1, keepdims=True) + eps) * gamma


def rms_divides_by_std(x, gamma, eps=1e-5):
    return x / np.sqrt(np.std(x, axis=-1, keepdims=True) ** 2 + eps) * gamma


def rms_no_sqrt(x, gamma, eps=1e-5):
    return gamma * x / (np.mean(np.square(x), axis=-1, keepdims=True) + eps)


def rms_eps_outside_sqrt(x, gamma, eps=1e-5):
    return gamma * x / (np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True)) + eps)


def rms_no_eps(x, gamma, eps=1e-5):
    with np.errstate(invalid="ignore"):
        return gamma * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True))


def rms_ignores_eps(x, gamma, eps=1e-5):
    return gamma * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)


def rms_sum_not_mean(x, gamma, eps=1e-5):
    return gamma * x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def rms_over_axis_0(x, gamma, eps=1e-5):
    return gamma * x / np.sqrt(np.mean(x * x, axis=0, keepdims=True) + eps)


def rms_over_everything(x, gamma, eps=1e-5):
    return gamma * x / math.sqrt(float(np.mean(x**2)) + eps)


def rms_no_gamma(x, gamma, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


# ── 09.2 · swiglu ─────────────────────────────────────────────────────────────────────────────


def _silu(a):
    return a * (1 / (1 + np.exp(-a)))


def swiglu_relu_gate(x, W_1, V, W_2):
    return (np.where(x @ W_1 > 0, x @ W_1, 0.0) * (x @ V)) @ W_2


def swiglu_sigmoid_gate(x, W_1, V, W_2):
    return ((1 / (1 + np.exp(-(x @ W_1)))) * (x @ V)) @ W_2


def swiglu_swish_on_value(x, W_1, V, W_2):
    return ((x @ W_1) * _silu(x @ V)) @ W_2


def swiglu_no_value(x, W_1, V, W_2):
    return _silu(x @ W_1) @ W_2


def swiglu_adds_not_multiplies(x, W_1, V, W_2):
    return (_silu(x @ W_1) + x @ V) @ W_2


def swiglu_swish_of_product(x, W_1, V, W_2):
    return _silu((x @ W_1) * (x @ V)) @ W_2


def swiglu_no_down_projection(x, W_1, V, W_2):
    return _silu(x @ W_1) * (x @ V)


# ── 09.3 · rope ───────────────────────────────────────────────────────────────────────────────


def _turn_pairs(x, angle_of):
    """Each pair (x[..., t, 2i], x[..., t, 2i+1]) turned by angle_of(t, i, d): loops."""
    out = np.array(x, dtype=float)
    T, d = x.shape[-2], x.shape[-1]
    for t in range(T):
        for i in range(d // 2):
            a = angle_of(t, i, d)
            e, o = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = e * math.cos(a) - o * math.sin(a)
            out[..., t, 2 * i + 1] = e * math.sin(a) + o * math.cos(a)
    return out


def rope_wrong_direction(x, start=0):
    return _turn_pairs(x, lambda t, i, d: -(start + t) / 10000 ** (2 * i / d))


def rope_halves_layout(x, start=0):
    d = x.shape[-1]
    theta = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    angles = (start + np.arange(x.shape[-2]))[:, None] * theta
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles] * 2,
                                                                                  -1))
    rotated_half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rotated_half * sin


def rope_ignores_start(x, start=0):
    return _turn_pairs(x, lambda t, i, d: t / 10000 ** (2 * i / d))


def rope_positions_from_one(x, start=0):
    return _turn_pairs(x, lambda t, i, d: (start + t + 1) / 10000 ** (2 * i / d))


def rope_frequencies_i_over_d(x, start=0):
    return _turn_pairs(x, lambda t, i, d: (start + t) / 10000 ** (i / d))


def rope_one_frequency(x, start=0):
    return _turn_pairs(x, lambda t, i, d: float(start + t))


def rope_cos_sin_swapped(x, start=0):
    out = np.array(x, dtype=float)
    T, d = x.shape[-2], x.shape[-1]
    for t in range(T):
        for i in range(d // 2):
            a = (start + t) / 10000 ** (2 * i / d)
            e, o = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = e * math.sin(a) - o * math.cos(a)
            out[..., t, 2 * i + 1] = e * math.cos(a) + o * math.sin(a)
    return out


# ── 09.4 · grouped_query_attention ────────────────────────────────────────────────────────────


def _attend(x, W_q, W_k, W_v, W_o, h, g, *, kv_head=lambda i, h, g: i // (h // g), causal=True,
            divide_by=None, output=True, zero_after=False, naive_split=False):
    """One query head at a time, one sequence at a time, as a learner might loop."""
    B, T, d = x.shape
    d_k = d // h
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    if naive_split:  # (B, T, h d_k) reshaped straight to (B, h, T, d_k)
        Q, K, V = (a.reshape(B, -1, T, d_k) for a in (Q, K, V))
        Q, K, V = (a.transpose(0, 2, 1, 3).reshape(B, T, -1) for a in (Q, K, V))
    out = np.zeros((B, T, h * d_k))
    for b in range(B):
        for i in range(h):
            j = kv_head(i, h, g)
            q = Q[b][:, i * d_k:(i + 1) * d_k]
            k, v = K[b][:, j * d_k:(j + 1) * d_k], V[b][:, j * d_k:(j + 1) * d_k]
            s = q @ k.T / (math.sqrt(d_k) if divide_by is None else divide_by)
            if causal and not zero_after:
                s = s + np.triu(np.full((T, T), -np.inf), 1)
            w = np.exp(s - s.max(axis=1, keepdims=True))
            w = w / w.sum(axis=1, keepdims=True)
            if zero_after:
                w = np.tril(w)
            out[b][:, i * d_k:(i + 1) * d_k] = w @ v
    return out @ W_o if output else out


def gqa_tile_not_repeat(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, kv_head=lambda i, h, g: i % g)


def gqa_no_causal_mask(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, causal=False)


def gqa_mask_after_softmax(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, zero_after=True)


def gqa_scale_by_d_model(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads,
                   divide_by=math.sqrt(x.shape[-1]))


def gqa_no_scaling(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, divide_by=1.0)


def gqa_no_output_projection(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, output=False)


def gqa_split_without_transpose(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, naive_split=True)


def gqa_merge_without_transpose(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    group = n_heads // n_kv_heads
    Q = x @ W_q
    K, V = x @ W_k, x @ W_v
    heads = np.zeros((B, n_heads, T, d_k))  # the split is right, one head at a time
    for i in range(n_heads):
        q = Q[..., i * d_k:(i + 1) * d_k]
        k, v = (a[..., (i // group) * d_k:(i // group + 1) * d_k] for a in (K, V))
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k) + np.triu(np.full((T, T), -np.inf), 1)
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        heads[:, i] = (w / w.sum(axis=-1, keepdims=True)) @ v
    return heads.reshape(B, T, d_model) @ W_o  # "the shape W_o wants": right only for T = 1


def gqa_k_transposed(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    Q = (x @ W_q).reshape(B, T, n_heads, d_k).transpose(0, 2, 1, 3)
    K = (x @ W_k).reshape(B, T, n_kv_heads, d_k).transpose(0, 2, 1, 3)
    V = (x @ W_v).reshape(B, T, n_kv_heads, d_k).transpose(0, 2, 1, 3)
    K = np.repeat(K, n_heads // n_kv_heads, axis=1)
    V = np.repeat(V, n_heads // n_kv_heads, axis=1)
    s = Q @ K.T / math.sqrt(d_k)  # notebook 01's one-sequence habit, on a 4-D array
    s = np.where(np.tri(T, dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ V).transpose(0, 2, 1, 3).reshape(B, T, d_model) @ W_o


# ── 09.5 · the KV cache of a published model ─────────────────────────────────────────────────


def kv_cache_no_factor_2(config, tokens, bytes_per_number=2):
    d_head = config["hidden_size"] / config["num_attention_heads"]
    per_token = config["num_hidden_layers"] * config["num_key_value_heads"] * d_head  # "the cache"
    return per_token * tokens * bytes_per_number


def kv_cache_query_heads(config, tokens, bytes_per_number=2):
    per_layer = 2 * config["hidden_size"]  # "K and V are d_model wide, like the queries"
    return per_layer * config["num_hidden_layers"] * tokens * bytes_per_number


def kv_cache_head_width_d_model(config, tokens, bytes_per_number=2):
    kv = 2 * config["num_key_value_heads"] * config["hidden_size"]  # "each head is d_model wide"
    return config["num_hidden_layers"] * kv * tokens * bytes_per_number


def kv_cache_one_layer(config, tokens, bytes_per_number=2):
    d_head = config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_key_value_heads"] * d_head * tokens * bytes_per_number


def kv_cache_numbers_not_bytes(config, tokens, bytes_per_number=2):
    L, g = config["num_hidden_layers"], config["num_key_value_heads"]
    return 2 * L * g * (config["hidden_size"] // config["num_attention_heads"]) * tokens


# ── 09.6 · sliding_window_mask ───────────────────────────────────────────────────────────────


def window_one_too_many(T, window):
    causal = np.triu(np.ones((T, T), dtype=bool), k=1)
    too_old = np.tril(np.ones((T, T), dtype=bool), k=-window - 1)  # "window keys back"
    return causal | too_old


def window_one_too_few(T, window):
    mask = np.ones((T, T), dtype=bool)
    for q in range(T):
        mask[q, max(0, q - window + 2):q + 1] = False  # "window - 1 back, plus itself"
    return mask


def window_not_causal(T, window):
    q, k = np.indices((T, T))
    return np.abs(q - k) >= window  # a band both sides


def window_future_not_blocked(T, window):
    return np.tril(np.ones((T, T), dtype=bool), k=-window)  # only the old keys


def window_on_the_future(T, window):
    q, k = np.indices((T, T))
    return ~((k >= q) & (k < q + window))


def window_inverted(T, window):
    q, k = np.ogrid[:T, :T]
    return (k <= q) & (k > q - window)  # True where the key is seen


def window_not_boolean(T, window):
    mask = np.zeros((T, T))
    for q in range(T):
        for k in range(T):
            if k > q or q - k >= window:
                mask[q, k] = 1
    return mask


# ── 09.7 · llama_hidden ──────────────────────────────────────────────────────────────────────


def hidden_not_rounded(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = int(8 * d_model / 3)
    return int(hidden * ffn_dim_multiplier) if ffn_dim_multiplier else hidden


def hidden_rounded_down(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = int(2 * 4 * d_model / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return hidden - hidden % multiple_of  # "a multiple of multiple_of"


def hidden_rounded_to_nearest(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = int(2 * 4 * d_model / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return int(round(hidden / multiple_of)) * multiple_of


def hidden_multiplier_after_rounding(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = int(2 * 4 * d_model / 3)
    hidden = -(-hidden // multiple_of) * multiple_of
    return int(hidden * (ffn_dim_multiplier or 1))


def hidden_multiplier_ignored(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = 2 * (4 * d_model) // 3
    return math.ceil(hidden / multiple_of) * multiple_of


def hidden_without_the_4(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = int(2 * d_model / 3)  # "two thirds of the width"
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return math.ceil(hidden / multiple_of) * multiple_of


def hidden_not_truncated(d_model, multiple_of=256, ffn_dim_multiplier=None):
    hidden = 8 * d_model / 3 * (ffn_dim_multiplier or 1.0)  # kept as a float
    return multiple_of * math.ceil(hidden / multiple_of)


# ── 09.8 · top_k_routing ─────────────────────────────────────────────────────────────────────


def _gates(top):  # a right softmax over each token's k chosen logits
    e = np.exp(top - np.max(top, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def router_softmax_over_all_experts(logits, k):
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = probs / probs.sum(axis=-1, keepdims=True)  # over all E experts
    experts = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return experts, np.take_along_axis(probs, experts, axis=-1)  # not renormalised


def router_k_smallest(logits, k):
    experts = np.argsort(logits, axis=-1, kind="stable")[..., :k]
    return experts, _gates(np.take_along_axis(logits, experts, axis=-1))


def router_largest_last(logits, k):
    experts = np.argsort(logits, axis=-1, kind="stable")[..., -k:]  # the k largest, ascending
    return experts, _gates(np.take_along_axis(logits, experts, axis=-1))


def router_experts_in_index_order(logits, k):
    kth = -np.sort(-logits, axis=-1)[..., k - 1:k]  # the k-th largest logit
    experts = np.empty(logits.shape[:-1] + (k,), dtype=int)
    for index in np.ndindex(logits.shape[:-1]):  # the chosen experts, read left to right
        above = np.flatnonzero(logits[index] > kth[index][0])
        tied = np.flatnonzero(logits[index] == kth[index][0])
        experts[index] = np.sort(np.concatenate([above, tied])[:k])
    return experts, _gates(np.take_along_axis(logits, experts, axis=-1))


def router_ties_to_higher_index(logits, k):
    experts = np.argsort(logits, axis=-1)[..., ::-1][..., :k]  # descending, by reversal
    return experts, _gates(np.take_along_axis(logits, experts, axis=-1))


def router_gates_not_aligned(logits, k):
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    top = np.sort(logits, axis=-1)[..., -k:]  # the k largest values, but ascending
    return experts, _gates(top)


def router_argmax_repeated(logits, k):
    experts = [np.argmax(logits, axis=-1) for _ in range(k)]  # never masks the one picked
    experts = np.stack(experts, axis=-1)
    return experts, _gates(np.take_along_axis(logits, experts, axis=-1))


def router_softmax_over_axis_0(logits, k):
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    top = np.take_along_axis(logits, experts, axis=-1)
    e = np.exp(top - top.max(axis=0))
    return experts, e / e.sum(axis=0)


def router_softmax_over_everything(logits, k):
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    top = np.take_along_axis(logits, experts, axis=-1)
    e = np.exp(top - np.max(top))
    return experts, e / np.sum(e)


def router_softmax_overflows(logits, k):
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    e = np.exp(np.take_along_axis(logits, experts, axis=-1))
    return experts, e / e.sum(axis=-1, keepdims=True)


def router_softmax_global_max(logits, k):
    experts = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    top = np.take_along_axis(logits, experts, axis=-1)
    e = np.exp(top - np.max(top))
    return experts, e / e.sum(axis=-1, keepdims=True)


WRONG = {name.replace("_", "-"): fn for name, fn in list(globals().items())
         if name.startswith(("rms_", "swiglu_", "rope_", "gqa_", "kv_cache_", "window_",
                             "hidden_", "router_"))
         and callable(fn)}


def test_a_right_rope_written_with_loops_passes():
    def rope(x, start=0):
        return _turn_pairs(x, lambda t, i, d: (start + t) / 10000 ** (2 * i / d))

    assert checks.check(rope).status == "passed"


def test_a_right_gqa_written_with_loops_passes():
    def grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads):
        return _attend(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads)

    assert checks.check(grouped_query_attention).status == "passed"


def test_the_two_position_hand_case_is_what_its_label_says_and_shows_the_merge():
    ex = checks.CATALOGUE["09.4"]
    case = ex.cases[1]
    assert "by hand" in case.label and case.args[0].shape[1] == 2  # T > 1
    assert np.array_equal(ex.reference(*case.args), [[[2.0, 2.0], [3.0, 3.0]]])
    result = checks.check(gqa_merge_without_transpose, "09.4")
    assert result.mistakes == ("gqa-merge-without-transpose",), result.message
    assert ("  case: two positions, B = 1, d_model = 2, h = 2, g = 1" in result.message
            and "  expected result[0, 0]: [2 2]\n  got      result[0, 0]: [2 3]\n"
            in result.message), result.message  # the first case, T = 1, cannot show it


def test_k_dot_t_on_the_4d_keys_is_named_by_the_transpose_not_the_merge():
    result = checks.check(gqa_k_transposed, "09.4")
    assert result.mistakes == ("gqa-k-transposed",), result.message
    assert "K.T" in result.message and "swapaxes(-1, -2)" in result.message
    assert "cannot reshape array of size 8 into shape (1,1,4)" in result.message  # the error


def test_the_swiglu_hand_case_differs_from_every_mistake_in_every_number():
    ex = checks.CATALOGUE["09.2"]
    args = ex.cases[0].args
    right = ex.reference(*args)
    assert np.allclose(right, [[-8.57, -8.34]], atol=0.005) and "[[-8.57, -8.34]]" in \
        ex.cases[0].label
    for m in ex.mistakes:  # a learner who checks by hand is not misled by a catalogued mistake
        got = np.asarray(m.model(*args))
        assert got.shape != right.shape or np.abs(got - right).min() > 0.1, m.name


def test_the_kv_cache_cases_are_the_lessons_numbers():
    ex = checks.CATALOGUE["09.5"]
    values = {case.label.split(",")[0]: ex.reference(*case.args) for case in ex.cases}
    assert values["2 layers"] == 192 and "= 192" in ex.cases[0].label  # by hand
    assert values["Llama 2 70B"] == 1.25 * 2**30  # notebook 09 §6: 1.25 GiB at 4,096 tokens
    assert values["Mistral 7B"] == 0.5 * 2**30 and values["Llama 2 7B"] == 2 * 2**30
    assert values["GPT-3 175B"] == 18 * 2**30  # 2,048 tokens in 32-bit: 4,096 in 16-bit


def test_the_sliding_window_edge_cases_are_the_diagonal_and_the_causal_mask():
    from helpers.transformer import causal_mask

    ex = checks.CATALOGUE["09.6"]
    by_hand = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]], dtype=bool)
    assert np.array_equal(ex.reference(4, 2), by_hand) and "by hand" in ex.cases[0].label
    assert np.array_equal(ex.reference(5, 1), ~np.eye(5, dtype=bool))  # window 1: itself
    assert np.array_equal(ex.reference(4, 4), causal_mask(4))  # window = T
    assert np.array_equal(ex.reference(3, 10), causal_mask(3))  # window > T


def test_a_learner_who_combines_two_library_style_masks_passes():
    def sliding_window_mask(T, window):
        ones = np.ones((T, T), dtype=bool)
        return np.triu(ones, k=1) | np.tril(ones, k=-window)  # the future, and the too old

    assert checks.check(sliding_window_mask).status == "passed"


def test_a_window_of_the_last_keys_of_the_sequence_is_wrong_and_not_named():
    def sliding_window_mask(T, window):  # every query sees the last `window` keys
        mask = np.ones((T, T), dtype=bool)
        mask[:, max(0, T - window):] = False
        return mask

    result = checks.check(sliding_window_mask)
    assert result.status == "wrong" and not result.mistakes, result.message


def test_the_llama_width_cases_are_the_librarys_and_the_published_widths():
    from helpers.modern import llama_hidden

    ex = checks.CATALOGUE["09.7"]
    for case in ex.cases:
        assert ex.reference(*case.args) == llama_hidden(*case.args), case.label
    widths = [ex.reference(*case.args) for case in ex.cases]
    assert widths == [32, 66, 48, 11008, 13824, 28672, 14336]  # the labels' numbers
    for case, width in zip(ex.cases, widths):
        assert f"{width:,}" in case.label or f" {width}" in case.label, case.label


def test_a_learner_who_writes_llamas_own_lines_passes():
    def llama_hidden(d_model, multiple_of=256, ffn_dim_multiplier=None):
        hidden_dim = int(2 * (4 * d_model) / 3)
        if ffn_dim_multiplier is not None:
            hidden_dim = int(ffn_dim_multiplier * hidden_dim)
        return multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)

    assert checks.check(llama_hidden).status == "passed"


def test_the_router_cases_are_the_labels_numbers():
    ex = checks.CATALOGUE["09.8"]
    experts, gates = ex.reference(*ex.cases[0].args)  # by hand
    assert experts.tolist() == [[2, 1], [3, 0]] and "[[2, 1], [3, 0]]" in ex.cases[0].label
    assert np.allclose(gates, [[0.73, 0.27], [0.88, 0.12]], atol=0.005)
    experts, gates = ex.reference(*ex.cases[4].args)  # ties: the lower index first
    assert experts.tolist() == [[0, 1], [1, 2], [0, 1]] and np.all(gates == 0.5)
    experts, gates = ex.reference(*ex.cases[5].args)  # ±1000: finite, as by hand
    assert np.allclose(gates, [[0.88, 0.12], [0.73, 0.27]], atol=0.005)
    for case in ex.cases:
        logits, k = case.args
        experts, gates = ex.reference(logits, k)
        assert experts.shape == gates.shape == logits.shape[:-1] + (k,), case.label
        assert np.allclose(gates.sum(axis=-1), 1.0), case.label  # each token's k gates
        top = np.take_along_axis(logits, experts, axis=-1)
        assert np.all(np.diff(top, axis=-1) <= 0), case.label  # largest first
        assert np.all(top[..., -1:] >= np.sort(logits, axis=-1)[..., -k:-k + 1 or None])
    assert [case.args[1] for case in ex.cases].count(1) == 1  # k = 1 and k = E are cases
    assert any(case.args[1] == case.args[0].shape[-1] for case in ex.cases)
    assert any(case.args[0].ndim == 3 for case in ex.cases)  # (B, T, E)


def test_the_router_reference_is_the_softmax_of_all_experts_renormalised():
    """Hugging Face's Mixtral: softmax over all experts, top-k, divided by their sum; the same
    gates as the softmax over the k chosen logits (Mixtral's reference code), to rounding."""
    ex = checks.CATALOGUE["09.8"]
    logits = np.random.default_rng(8).normal(size=(4, 5, 8)) * 3
    for k in (1, 2, 3, 8):
        experts, gates = ex.reference(logits, k)
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        chosen = np.take_along_axis(p, experts, axis=-1)
        assert np.allclose(gates, chosen / chosen.sum(axis=-1, keepdims=True), atol=1e-12)
        assert np.array_equal(experts[..., 0], logits.argmax(axis=-1))  # np.argmax's first max


def test_a_learner_who_masks_and_repeats_argmax_passes():
    def top_k_routing(logits, k):
        scores = np.array(logits, dtype=float)
        experts = []
        for _ in range(k):  # pick the largest, then hide it
            best = np.argmax(scores, axis=-1)
            experts.append(best)
            np.put_along_axis(scores, best[..., None], -np.inf, axis=-1)
        experts = np.stack(experts, axis=-1)
        top = np.take_along_axis(logits, experts, axis=-1)
        e = np.exp(top - top[..., :1])  # the first is the largest
        return experts, e / e.sum(axis=-1, keepdims=True)

    assert checks.check(top_k_routing).status == "passed"


def test_the_router_reference_refuses_a_k_out_of_range():
    ex = checks.CATALOGUE["09.8"]
    with pytest.raises(ValueError, match="k must be between 1 and n_experts = 4, got 5"):
        ex.reference(np.zeros((2, 4)), 5)
    with pytest.raises(ValueError, match="got 0"):
        ex.reference(np.zeros((2, 4)), 0)
