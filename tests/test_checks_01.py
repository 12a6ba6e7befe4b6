"""Notebook 01's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/attention.py (its models of the same mistakes): loops,
other spellings, another order of operations. tests/test_checks.py asserts that the checker names
exactly the mistake each one makes.
"""

import math

import numpy as np

from helpers import checks


def _good_softmax(x, axis=-1):  # a correct softmax, written another way, for the 01.2 mistakes
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        if np.all(np.isneginf(row)):
            continue
        e = np.exp(row - row.max())
        out[idx] = e / e.sum()
    return np.moveaxis(out, -1, axis)


# ── 01.1 · softmax ────────────────────────────────────────────────────────────────────────────


def softmax_no_max_shift(x, axis=-1):
    return np.exp(x) / np.sum(np.exp(x), axis=axis, keepdims=True)


def softmax_ignores_axis(x, axis=-1):
    return _good_softmax(x)  # "axis" is in the signature but never used


def softmax_wrong_axis(x, axis=-1):
    return _good_softmax(x, 0)


def softmax_sum_over_everything(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def softmax_nan_on_blocked_row(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)  # -inf - (-inf) = nan for an all -inf row
    return np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)


def softmax_uniform_on_blocked_row(x, axis=-1):
    x = np.maximum(x, -1e9)  # "-inf is dangerous: use a big negative number instead"
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))  # "subtract the max so that exp cannot overflow"
    return e / np.sum(e, axis=axis, keepdims=True)


# ── 01.2 · scaled dot-product attention ───────────────────────────────────────────────────────


def _attention(Q, K, V, mask=None, *, scale=None, fill=-np.inf):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2))
    scores = scores / (np.sqrt(Q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = np.where(mask, fill, scores)
    weights = _good_softmax(scores)
    return np.matmul(weights, V), weights


def attention_no_scaling(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, scale=1.0)


def attention_scaled_by_d_k(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, scale=K.shape[-1])


def attention_scaled_by_sqrt_T_k(Q, K, V, mask=None):
    T_k = K.shape[-2]  # "the size of the keys"
    return _attention(Q, K, V, mask, scale=math.sqrt(T_k))


def attention_times_sqrt_d_k(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) * np.sqrt(Q.shape[-1])
    if mask is not None:
        scores[np.broadcast_to(mask, scores.shape)] = -np.inf
    weights = _good_softmax(scores)
    return weights @ V, weights


def attention_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = _good_softmax(scores, axis=-2)
    return weights @ V, weights


def attention_k_t(Q, K, V, mask=None):
    scores = np.matmul(Q, K.T) / math.sqrt(K.shape[-1])  # "K transposed", as on paper
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = _good_softmax(scores)
    return np.matmul(weights, V), weights


def attention_values_are_keys(Q, K, V, mask=None):
    _, weights = _attention(Q, K, V, mask)
    return weights @ K, weights


def attention_returns_weights_first(Q, K, V, mask=None):
    output, weights = _attention(Q, K, V, mask)
    return weights, output  # "the weights, then what they make"


def mask_after_softmax(Q, K, V, mask=None):
    _, weights = _attention(Q, K, V)
    if mask is not None:
        weights = weights * (1 - mask)
    return weights @ V, weights


def mask_inverted(Q, K, V, mask=None):
    keep = None if mask is None else np.logical_not(mask)  # "True = keep"
    return _attention(Q, K, V, keep)


def mask_multiplies_scores(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * (mask == 0)
    weights = _good_softmax(scores)
    return weights @ V, weights


def mask_fill_1e9_uniform_row(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, fill=-1e9)


def mask_added_1e9(Q, K, V, mask=None):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(K.shape[-1])
    if mask is not None:
        scores = scores - 1e9 * mask.astype(float)  # the tutorials' additive mask
    weights = _good_softmax(scores)
    return weights @ V, weights


def mask_nan_on_blocked_row(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, weights


# ── 01.3 · the variance of q·k ────────────────────────────────────────────────────────────────


def _dot_products(X_q, X_k, W_q, W_k):  # a loop over the samples, q_i · k_i with np.dot
    Q, K = np.matmul(X_q, W_q), np.matmul(X_k, W_k)
    return np.array([np.dot(q, k) for q, k in zip(Q, K)])


def _variance(values):  # the mean of the squared deviations, by hand
    return float(np.mean((values - np.mean(values)) ** 2))


def score_variance_all_pairs(X_q, X_k, W_q, W_k):
    scores = (X_q @ W_q) @ (X_k @ W_k).T  # every query against every key, as in attention
    d_k = W_q.shape[1]
    return float(np.var(scores)), float(np.var(scores / math.sqrt(d_k)))


def score_variance_ddof_1(X_q, X_k, W_q, W_k):
    dots = _dot_products(X_q, X_k, W_q, W_k)
    scaled = dots / math.sqrt(W_k.shape[1])
    return float(np.var(dots, ddof=1)), float(np.var(scaled, ddof=1))  # the sample variance


def score_variance_no_scaling(X_q, X_k, W_q, W_k):
    dots = _dot_products(X_q, X_k, W_q, W_k)
    return _variance(dots), _variance(dots)  # "the softmax takes care of the size"


def score_variance_scaled_by_d_k(X_q, X_k, W_q, W_k):
    dots = _dot_products(X_q, X_k, W_q, W_k)
    d_k = W_k.shape[1]
    return _variance(dots), _variance(dots / d_k)


def score_variance_scaled_by_sqrt_d_model(X_q, X_k, W_q, W_k):
    dots = _dot_products(X_q, X_k, W_q, W_k)
    d = X_q.shape[1]  # the width of the input, not of q and k
    return _variance(dots), _variance(dots / math.sqrt(d))


def score_variance_is_std(X_q, X_k, W_q, W_k):
    dots = _dot_products(X_q, X_k, W_q, W_k)
    scaled = dots / math.sqrt(W_q.shape[1])
    return float(np.std(dots)), float(np.std(scaled))


# ── 01.4 · log_softmax ────────────────────────────────────────────────────────────────────────


def _good_log_softmax(x, axis=-1):  # right, another way: one row at a time, np.logaddexp
    x = np.moveaxis(np.asarray(x), axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        out[idx] = row if np.isneginf(row).all() else row - np.logaddexp.reduce(row)
    return np.moveaxis(out, -1, axis)


def logsoftmax_log_of_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0, m))
    total = e.sum(axis=axis, keepdims=True)
    return np.log(e / np.where(total == 0, 1, total))  # a right softmax, then its log


def logsoftmax_no_max_shift(x, axis=-1):
    return x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))  # the formula as written


def logsoftmax_max_not_added_back(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(x - m).sum(axis=axis, keepdims=True))  # "the stable log-sum-exp"
    return x - lse


def logsoftmax_global_max(x, axis=-1):
    c = np.max(x)  # "subtract the max so that exp cannot overflow"
    return x - c - np.log(np.sum(np.exp(x - c), axis=axis, keepdims=True))


def logsoftmax_ignores_axis(x, axis=-1):
    return _good_log_softmax(x)  # "axis" is in the signature but never used


def logsoftmax_no_keepdims(x, axis=-1):
    m = np.max(x, axis=axis)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis))


def logsoftmax_log_missing(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.exp(z).sum(axis=axis, keepdims=True)  # the sum, not its log


def logsoftmax_nan_on_blocked_row(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    z = x - np.where(np.isfinite(m), m, 0.0)  # the max is guarded...
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))  # ...but not log(0) = -inf


def logsoftmax_zeros_on_blocked_row(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    out = z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
    return np.where(np.isnan(out), 0.0, out)  # "zeros, not NaN, as in 01.1"


def logsoftmax_fill_1e9(x, axis=-1):
    x = np.maximum(x, -1e9)  # "-inf is dangerous: use a big negative number instead"
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def logsoftmax_float64(x, axis=-1):
    return _good_log_softmax(np.asarray(x, dtype=float), axis)


WRONG = {
    "softmax-no-max-shift": softmax_no_max_shift,
    "softmax-ignores-axis": softmax_ignores_axis,
    "softmax-wrong-axis": softmax_wrong_axis,
    "softmax-sum-over-everything": softmax_sum_over_everything,
    "softmax-nan-on-blocked-row": softmax_nan_on_blocked_row,
    "softmax-uniform-on-blocked-row": softmax_uniform_on_blocked_row,
    "softmax-global-max": softmax_global_max,
    "attention-no-scaling": attention_no_scaling,
    "attention-scaled-by-d_k": attention_scaled_by_d_k,
    "attention-scaled-by-sqrt-num-keys": attention_scaled_by_sqrt_T_k,
    "attention-times-sqrt-d_k": attention_times_sqrt_d_k,
    "attention-softmax-over-queries": attention_softmax_over_queries,
    "attention-k-transposed": attention_k_t,
    "attention-values-are-keys": attention_values_are_keys,
    "attention-returns-weights-first": attention_returns_weights_first,
    "mask-after-softmax": mask_after_softmax,
    "mask-inverted": mask_inverted,
    "mask-multiplies-scores": mask_multiplies_scores,
    "mask-fill-1e9-uniform-row": mask_fill_1e9_uniform_row,
    "mask-added-1e9": mask_added_1e9,
    "mask-nan-on-blocked-row": mask_nan_on_blocked_row,
    "score-variance-all-pairs": score_variance_all_pairs,
    "score-variance-ddof-1": score_variance_ddof_1,
    "score-variance-no-scaling": score_variance_no_scaling,
    "score-variance-scaled-by-d_k": score_variance_scaled_by_d_k,
    "score-variance-scaled-by-sqrt-d_model": score_variance_scaled_by_sqrt_d_model,
    "score-variance-is-std": score_variance_is_std,
    "logsoftmax-log-of-softmax": logsoftmax_log_of_softmax,
    "logsoftmax-no-max-shift": logsoftmax_no_max_shift,
    "logsoftmax-max-not-added-back": logsoftmax_max_not_added_back,
    "logsoftmax-global-max": logsoftmax_global_max,
    "logsoftmax-ignores-axis": logsoftmax_ignores_axis,
    "logsoftmax-no-keepdims": logsoftmax_no_keepdims,
    "logsoftmax-log-missing": logsoftmax_log_missing,
    "logsoftmax-nan-on-blocked-row": logsoftmax_nan_on_blocked_row,
    "logsoftmax-zeros-on-blocked-row": logsoftmax_zeros_on_blocked_row,
    "logsoftmax-fill-1e9": logsoftmax_fill_1e9,
    "logsoftmax-float64": logsoftmax_float64,
}


# ── what is special here ──────────────────────────────────────────────────────────────────────


def test_the_hand_case_is_notebook_01s_and_its_label_says_true():
    sdpa = checks.exercise("01.2")
    case = sdpa.cases[0]
    assert case.label == ("notebook 01's hand case, row i for query i: query 0 gets weights "
                          "[0.4011 0.1978 0.4011], output[0] = [2.4067 2.2033]; query 2 gets "
                          "weights [0.1978 0.4011 0.4011], output[2] = [2.2033 2.4067]")
    Q, K, V = case.args
    output, weights = sdpa.reference(Q, K, V)
    for i, (w_i, out_i) in {0: ([0.4011, 0.1978, 0.4011], [2.4067, 2.2033]),
                            2: ([0.1978, 0.4011, 0.4011], [2.2033, 2.4067])}.items():
        scores = [sum(q * k for q, k in zip(Q[i], key)) / math.sqrt(2) for key in K]  # by math
        by_hand = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
        out = [sum(w * v[j] for w, v in zip(by_hand, V)) for j in range(2)]
        assert np.array_equal(np.round(by_hand, 4), w_i)
        assert np.array_equal(np.round(out, 4), out_i)
        assert np.allclose(weights[i], by_hand, rtol=0, atol=1e-15)
        assert np.allclose(output[i], out, rtol=0, atol=1e-14)
    assert not np.allclose(weights @ K, weights @ V)  # values-are-keys shows on this case
    message = checks.run(sdpa, attention_no_scaling).message  # row 0 is shown: the label has it
    assert "\n  expected output[0]: [2.407 2.203]\n" in message, message


def test_the_additive_mask_gives_a_blocked_query_the_unmasked_softmax():
    sdpa = checks.exercise("01.2")
    Q, K, V = sdpa.cases[2].args
    mask = sdpa.cases[2].kwargs["mask"]
    _, weights = mask_added_1e9(Q, K, V, mask)
    _, unmasked = sdpa.reference(Q, K, V)
    assert mask[2].all() and np.allclose(weights[2], unmasked[2], rtol=1e-6)
    assert np.array_equal(sdpa.reference(Q, K, V, mask)[1][2], np.zeros(4))


def test_the_variance_hand_case_and_the_random_cases_say_d_k_then_1():
    ex = checks.exercise("01.3")
    X_q, X_k, W_q, W_k = ex.cases[0].args
    dots = [sum(a * b for a, b in zip(x @ W_q, y @ W_k)) for x, y in zip(X_q, X_k)]
    assert dots == [1.0, 4.0] and "(2.25, 1.125)" in ex.cases[0].label
    assert np.allclose(ex.reference(*ex.cases[0].args), (2.25, 1.125), rtol=0, atol=1e-15)
    for case in ex.cases[1:]:
        X_q, X_k, W_q, W_k = case.args
        d_k = W_q.shape[1]
        assert np.allclose(W_q.T @ W_q, np.eye(d_k), atol=1e-12)  # unit-variance q and k
        raw, scaled = ex.reference(*case.args)
        assert abs(raw / d_k - 1) < 0.1 and abs(scaled - 1) < 0.1, case.label
        assert f"d_k = {d_k} " in case.label and f"({raw:.1f}, {scaled:.2f})" in case.label


def test_a_learner_who_writes_the_variance_with_einsum_passes():
    def score_variance(X_q, X_k, W_q, W_k):
        dots = np.einsum("nd,nd->n", X_q @ W_q, X_k @ W_k)
        return np.var(dots), np.var(dots / np.sqrt(W_q.shape[-1]))

    assert checks.check(score_variance)


def test_the_far_apart_softmax_case_is_its_label_and_catches_a_global_maximum():
    case = checks.exercise("01.1").cases[-1]
    (x,) = case.args
    by_hand = [1 / (1 + math.e), math.e / (1 + math.e)]  # softmax([a, a + 1]) for any a
    assert np.array_equal(np.round(by_hand, 4), [0.2689, 0.7311])
    assert "[0.2689, 0.7311]" in case.label
    assert np.allclose(checks.exercise("01.1").reference(x), [by_hand] * 2, rtol=0, atol=1e-15)
    with np.errstate(all="ignore"):
        assert np.isnan(softmax_global_max(x)[1]).all()  # exp(-2000) = 0 in the second row


def test_the_batched_attention_case_has_as_many_keys_as_no_key_has_width():
    Q, K, V = checks.exercise("01.2").cases[-1].args
    assert K.ndim == 3 and K.shape[-2] != K.shape[-1]  # √T_k and √d_k give different scores


def test_k_t_is_named_where_it_raises_and_other_errors_there_are_still_errors():
    """A mistake whose model raises where the learner's code raised (same exception, same
    message, the same results before) is named; any other exception stays an error."""
    result = checks.check(attention_k_t, "01.2")
    assert result.mistakes == ("attention-k-transposed",), result.message
    assert "  got      output: raised ValueError: matmul: " in result.message
    assert "case: a batch of 2" in result.message and "at: line " in result.message
    assert "equals it on the 3 cases before [attention-k-transposed]" in result.message
    assert result.message.endswith("See 01 §2 · All the scores at once (swapaxes, not .T).")

    def scaled_dot_product_attention(Q, K, V, mask=None):  # raises on the batch, not in a product
        if Q.ndim > 2:
            raise ValueError("no batches here")
        return attention_k_t(Q, K, V, mask)

    result = checks.check(scaled_dot_product_attention)
    assert result.status == "error" and "ValueError: no batches here" in result.message
    assert 'raise ValueError("no batches here")' in result.message  # the learner's line


def test_the_padding_mask_case_needs_the_mask_to_broadcast_over_the_queries():
    case = checks.exercise("01.2").cases[-1]
    assert case.kwargs["mask"].shape == (2, 1, 4) and "(2, 1, 4)" in case.label
    out, weights = checks.exercise("01.2").reference(*case.args, **case.kwargs)
    assert np.all(weights[1, :, 2:] == 0) and np.allclose(weights.sum(-1), 1)

    def scaled_dot_product_attention(Q, K, V, mask=None):  # mask indexed as if (T_q, T_k)
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
        if mask is not None:
            scores[..., mask] = -np.inf
        weights = _good_softmax(scores)
        return weights @ V, weights

    for earlier in checks.exercise("01.2").cases[:-1]:  # right while the mask is (T_q, T_k)
        args, kwargs = earlier.arguments()
        assert checks.core.same(checks.exercise("01.2").reference(*args, **kwargs),
                                scaled_dot_product_attention(*args, **kwargs))
    result = checks.check(scaled_dot_product_attention)
    assert result.status == "error" and "(2, 1, 4)" in result.message, result.message


def test_the_log_softmax_hand_cases_are_their_labels_and_float32_underflows_sooner():
    ex = checks.exercise("01.4")
    hand = [[math.log(1 / 4), math.log(3 / 4)], [math.log(1 / 2)] * 2]  # by math
    assert np.array_equal(np.round(hand, 4), [[-1.3863, -0.2877], [-0.6931, -0.6931]])
    assert "[[-1.3863, -0.2877], [-0.6931, -0.6931]]" in ex.cases[0].label
    assert np.allclose(ex.reference(*ex.cases[0].args), hand, rtol=0, atol=1e-15)
    assert np.array_equal(ex.reference(*ex.cases[1].args), [[0, -1000], [-1000, 0]])
    far = [math.log(1 / (1 + math.e)), math.log(math.e / (1 + math.e))]
    assert "[-1.3133, -0.3133]" in ex.cases[2].label and np.array_equal(np.round(far, 4),
                                                                        [-1.3133, -0.3133])
    assert np.allclose(ex.reference(*ex.cases[2].args), [far] * 2, rtol=0, atol=1e-12)
    (x32,) = ex.cases[5].args
    with np.errstate(divide="ignore"):
        assert np.isneginf(logsoftmax_log_of_softmax(x32)[0, 2])  # e^-120 = 0 in float32
        assert np.isfinite(logsoftmax_log_of_softmax(x32.astype(float))).all()  # not in float64
    out = ex.reference(*ex.cases[-1].args)
    assert np.isneginf(out[0]).all() and np.isneginf(out[1, 1]) and np.isfinite(out[1, ::2]).all()


def test_a_right_log_softmax_written_another_way_passes():
    assert checks.check(_good_log_softmax, "01.4")

    def log_softmax(x, axis=-1):  # log-sum-exp by hand, the guards with np.maximum and errstate
        m = np.max(x, axis=axis, keepdims=True)
        m = np.where(m == -np.inf, 0, m)
        with np.errstate(divide="ignore"):
            lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
        return np.where(np.isneginf(lse), -np.inf, x - lse)

    assert checks.check(log_softmax)


def test_a_log_softmax_with_an_eps_is_wrong_and_not_a_named_mistake():
    def log_softmax(x, axis=-1):  # "add a small eps so that log never sees 0"
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return np.log(e / e.sum(axis=axis, keepdims=True) + 1e-12)

    result = checks.check(log_softmax)
    assert result.status == "wrong" and result.mistakes == (), result.message
    assert "case: x = [[1000, 0], [-1000, 0]]" in result.message


def test_no_keepdims_is_named_where_it_gives_wrong_numbers_and_where_it_raises():
    result = checks.check(logsoftmax_no_keepdims, "01.4")
    assert result.mistakes == ("logsoftmax-no-keepdims",), result.message
    assert "raised ValueError: operands could not be broadcast" in result.message


def test_the_librarys_log_softmax_is_not_credited():
    from helpers.training import log_softmax

    def mine(x, axis=-1):
        return np.moveaxis(log_softmax(np.moveaxis(x, axis, -1)), -1, axis)

    assert checks.check(mine, "01.4").status == "not credited"
