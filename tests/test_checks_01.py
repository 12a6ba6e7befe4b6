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


def attention_values_are_keys(Q, K, V, mask=None):
    _, weights = _attention(Q, K, V, mask)
    return weights @ K, weights


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


WRONG = {
    "softmax-no-max-shift": softmax_no_max_shift,
    "softmax-ignores-axis": softmax_ignores_axis,
    "softmax-wrong-axis": softmax_wrong_axis,
    "softmax-sum-over-everything": softmax_sum_over_everything,
    "softmax-nan-on-blocked-row": softmax_nan_on_blocked_row,
    "softmax-uniform-on-blocked-row": softmax_uniform_on_blocked_row,
    "attention-no-scaling": attention_no_scaling,
    "attention-scaled-by-d_k": attention_scaled_by_d_k,
    "attention-times-sqrt-d_k": attention_times_sqrt_d_k,
    "attention-softmax-over-queries": attention_softmax_over_queries,
    "attention-values-are-keys": attention_values_are_keys,
    "mask-after-softmax": mask_after_softmax,
    "mask-inverted": mask_inverted,
    "mask-multiplies-scores": mask_multiplies_scores,
    "mask-fill-1e9-uniform-row": mask_fill_1e9_uniform_row,
    "mask-added-1e9": mask_added_1e9,
    "mask-nan-on-blocked-row": mask_nan_on_blocked_row,
}


# ── what is special here ──────────────────────────────────────────────────────────────────────


def test_the_hand_case_is_notebook_01s_and_its_label_says_true():
    sdpa = checks.exercise("01.2")
    case = sdpa.cases[0]
    assert case.label == ("notebook 01's hand case: query 2 gets weights [0.1978 0.4011 0.4011], "
                          "output [2.2033 2.4067]")
    Q, K, V = case.args
    scores = [sum(q * k for q, k in zip(Q[2], key)) / math.sqrt(2) for key in K]  # by math only
    by_hand = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
    out = [sum(w * v[j] for w, v in zip(by_hand, V)) for j in range(2)]
    assert np.array_equal(np.round(by_hand, 4), [0.1978, 0.4011, 0.4011])
    assert np.array_equal(np.round(out, 4), [2.2033, 2.4067])
    output, weights = sdpa.reference(Q, K, V)
    assert np.allclose(weights[2], by_hand, rtol=0, atol=1e-15)
    assert np.allclose(output[2], out, rtol=0, atol=1e-14)
    assert not np.allclose(weights @ K, weights @ V)  # values-are-keys shows on this case


def test_the_additive_mask_gives_a_blocked_query_the_unmasked_softmax():
    sdpa = checks.exercise("01.2")
    Q, K, V = sdpa.cases[2].args
    mask = sdpa.cases[2].kwargs["mask"]
    _, weights = mask_added_1e9(Q, K, V, mask)
    _, unmasked = sdpa.reference(Q, K, V)
    assert mask[2].all() and np.allclose(weights[2], unmasked[2], rtol=1e-6)
    assert np.array_equal(sdpa.reference(Q, K, V, mask)[1][2], np.zeros(4))
