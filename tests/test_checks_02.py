"""Notebook 02's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/heads.py (its models of the same mistakes): loops over
heads and column blocks, transpose() with explicit axis lists, other spellings. tests/test_checks.py
asserts that the checker names exactly the mistake each one makes; the tests at the end check the
hand cases and one message word for word.
"""

import numpy as np

from helpers import checks

# ── 02.1 · split_heads ────────────────────────────────────────────────────────────────────────


def split_reshape_without_transpose(x, n_heads):
    d_k = x.shape[-1] // n_heads
    return np.reshape(x, x.shape[:-2] + (n_heads, x.shape[-2], d_k))  # "the shape attention wants"


def split_swaps_last_two_axes(x, n_heads):
    T, d_model = x.shape[-2:]
    x = x.reshape(x.shape[:-1] + (n_heads, d_model // n_heads))
    return np.swapaxes(x, -1, -2)  # the swap attention uses for K, reused here


def split_fixed_axes(x, n_heads):
    *lead, T, d_model = x.shape
    x = x.reshape(*lead, T, n_heads, d_model // n_heads)
    return x.transpose(0, 2, 1, *range(3, x.ndim))  # written for (B, T, h, d_k) only


def split_strided_features(x, n_heads):
    *lead, T, d_model = x.shape
    heads = [x[..., i::n_heads] for i in range(n_heads)]  # "every h-th feature" per head
    return np.stack(heads, axis=-3)


# ── 02.2 · merge_heads ────────────────────────────────────────────────────────────────────────


def merge_reshape_without_transpose(x):
    h, T, d_k = x.shape[-3:]
    return np.reshape(x, (*x.shape[:-3], T, h * d_k))  # same number of elements: NumPy agrees


def merge_fixed_axes(x):
    h, T, d_k = x.shape[-3:]
    back = np.swapaxes(x, 1, 2)  # written for (B, h, T, d_k) only
    return back.reshape(*x.shape[:-3], T, h * d_k)


def merge_heads_interleaved(x):
    h, T, d_k = x.shape[-3:]
    out = np.zeros((*x.shape[:-3], T, h * d_k), dtype=x.dtype)
    for i in range(h):
        out[..., i::h] = x[..., i, :, :]  # head i into every h-th column
    return out


def merge_concat_along_tokens(x):
    heads = [x[..., i, :, :] for i in range(x.shape[-3])]
    return np.concatenate(heads, axis=-2)  # Concat(head_1, ..., head_h), on the wrong axis


# ── 02.3 · multi-head attention ───────────────────────────────────────────────────────────────


def _softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _heads_loop(query, key, value, W_q, W_k, W_v, h, *, scale=None):
    """Each head on its own column block of the weights: heads (..., h, T_q, d_k), weights."""
    d_k = W_q.shape[1] // h
    outs, ws = [], []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        Q, K, V = query @ W_q[:, cols], key @ W_k[:, cols], value @ W_v[:, cols]
        w = _softmax_rows(Q @ np.swapaxes(K, -1, -2) / (np.sqrt(d_k) if scale is None else scale))
        outs.append(w @ V)
        ws.append(w)
    return outs, np.stack(ws, axis=-3)


def mha_no_output_projection(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    outs, weights = _heads_loop(query, key, value, W_q, W_k, W_v, n_heads)
    return np.concatenate(outs, axis=-1), weights  # forgot "@ W_o"


def mha_scaled_by_sqrt_d_model(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    d_model = query.shape[-1]
    outs, weights = _heads_loop(query, key, value, W_q, W_k, W_v, n_heads, scale=np.sqrt(d_model))
    return np.concatenate(outs, axis=-1) @ W_o, weights


def mha_no_split(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    Q, K, V = query @ W_q, key @ W_k, value @ W_v  # n_heads never used
    weights = _softmax_rows(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]))
    return (weights @ V) @ W_o, weights


def mha_kv_from_query(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    outs, weights = _heads_loop(query, query, query, W_q, W_k, W_v, n_heads)  # "self" everywhere
    return np.concatenate(outs, axis=-1) @ W_o, weights


def mha_v_from_key(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    outs, weights = _heads_loop(query, key, key, W_q, W_k, W_v, n_heads)  # value never used
    return np.concatenate(outs, axis=-1) @ W_o, weights


def mha_weights_transposed(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    W_q, W_k, W_v, W_o = (np.transpose(W) for W in (W_q, W_k, W_v, W_o))  # nn.Linear habit
    outs, weights = _heads_loop(query, key, value, W_q, W_k, W_v, n_heads)
    return np.concatenate(outs, axis=-1) @ W_o, weights


def mha_weights_averaged_over_heads(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    outs, weights = _heads_loop(query, key, value, W_q, W_k, W_v, n_heads)
    # torch.nn.MultiheadAttention(..., average_attn_weights=True), its default, returns this
    return np.concatenate(outs, axis=-1) @ W_o, np.mean(weights, axis=-3)


def _attend_heads(Q, K, V):
    weights = _softmax_rows(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]))
    return weights @ V, weights


def _reshape_split(x, h):
    *lead, T, d = x.shape
    return x.reshape(*lead, h, T, d // h)


def _good_split(x, h):
    *lead, T, d = x.shape
    return np.moveaxis(x.reshape(*lead, T, h, d // h), -2, -3)


def _reshape_merge(x):
    *lead, h, T, d_k = x.shape
    return x.reshape(*lead, T, h * d_k)


def _good_merge(x):
    *lead, h, T, d_k = x.shape
    return np.moveaxis(x, -3, -2).reshape(*lead, T, h * d_k)


def _mha_with(split, merge):
    def layer(query, key, value, W_q, W_k, W_v, W_o, n_heads):
        Q, K, V = (split(x @ W, n_heads) for x, W in zip((query, key, value), (W_q, W_k, W_v)))
        out, weights = _attend_heads(Q, K, V)
        return merge(out) @ W_o, weights
    return layer


# ── 02.4 · a head that attends to the previous token ─────────────────────────────────────────


def head_next_token(d_model):
    W_q = np.zeros((d_model, d_model))
    for t in range(d_model - 1):
        W_q[t, t + 1] = 50.0  # "query t points at position t + 1": the shift the wrong way
    return W_q, np.eye(d_model)


def head_looks_at_itself(d_model):
    shift = np.zeros((d_model, d_model))
    for t in range(1, d_model):
        shift[t, t - 1] = 50.0
    return shift, shift  # the same shift on both sides cancels: q_t · k_s peaks at s = t


def head_too_soft(d_model):
    W_q = np.diag(np.ones(d_model - 1), k=-1)  # the right shift, with score 1 / √d_k
    return W_q, np.identity(d_model)


def head_too_soft_at_32(d_model):
    W_q = np.zeros((d_model, d_model))
    for t in range(1, d_model):
        W_q[t, t - 1] = 20.0  # tried on d_model = 8 and 16: sharp there; 0.53 at T = 32
    return W_q, np.identity(d_model)


WRONG = {
    "head-next-token": head_next_token,
    "head-looks-at-itself": head_looks_at_itself,
    "head-too-soft": head_too_soft_at_32,
    "split-reshape-without-transpose": split_reshape_without_transpose,
    "split-swaps-last-two-axes": split_swaps_last_two_axes,
    "split-fixed-axes": split_fixed_axes,
    "split-strided-features": split_strided_features,
    "merge-reshape-without-transpose": merge_reshape_without_transpose,
    "merge-fixed-axes": merge_fixed_axes,
    "merge-heads-interleaved": merge_heads_interleaved,
    "merge-concat-along-tokens": merge_concat_along_tokens,
    "mha-no-output-projection": mha_no_output_projection,
    "mha-scaled-by-sqrt-d_model": mha_scaled_by_sqrt_d_model,
    "mha-no-split": mha_no_split,
    "mha-kv-from-query": mha_kv_from_query,
    "mha-v-from-key": mha_v_from_key,
    "mha-weights-transposed": mha_weights_transposed,
    "mha-weights-averaged-over-heads": mha_weights_averaged_over_heads,
    "mha-split-without-transpose": _mha_with(_reshape_split, _good_merge),
    "mha-merge-without-transpose": _mha_with(_good_split, _reshape_merge),
    "mha-split-and-merge-without-transpose": _mha_with(_reshape_split, _reshape_merge),
}


# ── what is special here ──────────────────────────────────────────────────────────────────────


def test_the_hand_cases_are_what_their_labels_say():
    split, merge, mha = (checks.exercise(k) for k in ("02.1", "02.2", "02.3"))
    heads = split.reference(*split.cases[0].args)  # x = [[0..5], [6..11]], 3 heads
    assert np.array_equal(heads[1], [[2, 3], [8, 9]])  # head 1 = columns 2, 3 of both tokens
    assert np.array_equal(merge.reference(*merge.cases[0].args)[0], [0, 1, 6, 7])
    coded = merge.cases[1].args[0]  # the heads of notebook 02's example: merged, x comes back
    assert np.array_equal(merge.reference(coded)[1, 3], 1000 + 300 + np.arange(12))
    out, weights = mha.reference(*mha.cases[0].args)
    assert np.allclose(weights, 1 / 3) and weights.shape == (2, 3, 3)
    assert np.allclose(out, [[1, 1, 1, 2]] * 3)


def test_a_split_and_a_merge_both_without_transpose_pass_the_round_trip_but_not_the_checks():
    x = checks.exercise("02.1").cases[1].args[0]
    assert np.array_equal(merge_reshape_without_transpose(split_reshape_without_transpose(x, 4)), x)
    assert checks.check(split_reshape_without_transpose, "02.1").status == "mistake"
    assert checks.check(merge_reshape_without_transpose, "02.2").status == "mistake"


def test_the_message_for_a_reshape_only_split_quoted():
    message = checks.check(split_reshape_without_transpose, "02.1").message
    assert message.startswith(
        "✗ 02.1 split_heads: x is reshaped straight to (..., h, T, d_k) without the swap, so a "
        "'head' holds whole tokens instead of d_k features of every token\n"
        "  case: x = [[0 .. 5], [6 .. 11]] (T = 2, d_model = 6), n_heads = 3 (by hand: head i "
        "holds columns 2i and 2i + 1 of both tokens)\n"
        "  expected result[0, 1]: [6 7]\n"
        "  got      result[0, 1]: [2 3]\n"), message


def test_weights_averaged_over_heads_are_named_with_pytorchs_flag():
    result = checks.check(mha_weights_averaged_over_heads, "02.3")
    assert result.mistakes == ("mha-weights-averaged-over-heads",), result.message
    assert "average_attn_weights=True" in result.message
    assert "  expected weights: shape (2, 3, 3)\n  got      weights: shape (3, 3)\n" in (
        result.message)  # the output is right: the hand case shows the weights' shape


def test_the_previous_token_hand_case_and_what_a_head_returning_wrong_shapes_is_told():
    ex = checks.exercise("02.4")
    case = ex.cases[0]
    assert "d_model = 3, T = 3" in case.label and "-> [0, 1]" in case.label
    looked = case.probe(ex.reference, *case.args)
    assert list(looked.values()) == [[0, 1]]
    # the task's worked example, W_q = W_k = I on 3 positions: query 2 puts
    # e^(1/√3) / (e^(1/√3) + 2) = 0.47 on itself
    w = np.exp(1 / np.sqrt(3)) / (np.exp(1 / np.sqrt(3)) + 2)
    assert round(float(w), 2) == 0.47
    identity = case.probe(lambda d: (np.eye(d), np.eye(d)), 3)
    assert list(identity.values()) == [[1, 2]]

    def previous_token_head(d_model):  # the keys shifted the other way: also right
        return np.eye(d_model) * 40, np.eye(d_model, k=1)

    assert checks.check(previous_token_head)

    def previous_token_head(d_model):  # noqa: F811 (a single vector, not a pair)
        return np.eye(d_model, k=-1)

    result = checks.check(previous_token_head)
    assert result.status == "wrong" and "not a pair (W_q, W_k) of arrays" in result.message


def test_a_head_too_soft_at_one_size_only_is_named_too_soft():
    ex = checks.exercise("02.4")
    sizes = ex.cases[-1].args[0]  # the last case judges the weight at the sizes of the others
    assert [(c.args[0], len(next(iter(c.probe(ex.reference, *c.args).values()))) + 1)
            for c in ex.cases[:-1]] == list(sizes)
    w = np.exp(20 / np.sqrt(32))  # head_too_soft_at_32 at T = 32: e^(20/√32) / (... + 31)
    assert round(float(w / (w + 31)), 2) == 0.53
    for d_model, T in sizes[:-1]:  # sharp at every other size
        assert np.exp(20 / np.sqrt(d_model)) >= 9 * (T - 1)

    def previous_token_head(d_model):  # the other way round: soft at T = 3, sharp at T = 32
        return d_model * np.eye(d_model, k=-1), np.eye(d_model)  # score √d_model

    for head in (head_too_soft_at_32, head_too_soft, previous_token_head):
        result = checks.check(head, "02.4")
        assert result.mistakes == ("head-too-soft",), result.message
        assert "  got      result (the entries that differ): {'the smallest weight on key t - 1'" \
               ": 'under 0.9'}\n" in result.message, result.message
