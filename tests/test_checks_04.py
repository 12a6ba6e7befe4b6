"""Notebook 04's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/masks.py (its models of the same mistakes): loops,
np.tri/np.tril instead of comparisons, other spellings. tests/test_checks.py asserts that the
checker names exactly the mistake each one makes.
"""


import numpy as np

from helpers.checks import check, exercise

# ── 04.1 · causal_mask ────────────────────────────────────────────────────────────────────────


def causal_diagonal_blocked(T):
    return np.triu(np.ones((T, T), dtype=bool))  # k=0: the diagonal too


def causal_inverted(T):
    return np.tril(np.ones((T, T))).astype(bool)  # "1 = may attend", as in the Annotated Transformer


def causal_blocks_the_past(T):
    mask = np.zeros((T, T), dtype=bool)
    for i in range(T):
        for j in range(i):  # keys before the query
            mask[i, j] = True
    return mask


def causal_not_boolean(T):
    return 1 - np.tri(T)  # 1.0 above the diagonal, 0.0 elsewhere: floats


def causal_additive(T):
    mask = np.zeros((T, T))
    mask[np.triu_indices(T, 1)] = -np.inf  # PyTorch's generate_square_subsequent_mask
    return mask


def causal_additive_large_negative(T):
    return np.triu(np.ones((T, T)), k=1) * -1e9  # scores + mask, as in many NumPy tutorials


def causal_keep_mask_numbers(T):
    return np.tril(np.ones((T, T), dtype=int))  # 1 = may attend, as the Annotated Transformer


# ── 04.2 · padding_mask ───────────────────────────────────────────────────────────────────────


def _is_pad(lengths, T):  # (B, T), True at padding, with a loop
    out = np.zeros((len(lengths), T), dtype=bool)
    for b, n in enumerate(lengths):
        out[b, n:] = True
    return out


def padding_on_queries(lengths, T):
    return _is_pad(lengths, T).reshape(len(lengths), 1, T, 1)


def padding_off_by_one(lengths, T):
    positions = np.arange(T)
    return (positions[None, :] > np.asarray(lengths)[:, None]).reshape(-1, 1, 1, T)


def padding_inverted(lengths, T):
    return np.expand_dims(~_is_pad(lengths, T), (1, 2))  # True = a real token


def padding_no_broadcast_axes(lengths, T):
    return np.arange(T) >= np.reshape(lengths, (-1, 1))


def padding_no_head_axis(lengths, T):
    return np.expand_dims(_is_pad(lengths, T), 1)  # (B, 1, T), as for one head


def padding_not_boolean(lengths, T):
    return np.where(np.arange(T) >= lengths[:, None], 1, 0)[:, None, None, :]  # ints 1 / 0


def padding_keep_mask_numbers(lengths, T):
    return (np.arange(T) < lengths[:, None]).astype(int)[:, None, None, :]  # an attention_mask


def padding_length_of_longest(lengths, T):
    longest = max(lengths)
    mask = np.array([[j >= n for j in range(longest)] for n in lengths])
    return mask[:, np.newaxis, np.newaxis, :]


# ── 04.3 · causal_padding_mask ────────────────────────────────────────────────────────────────


def _causal(T):
    return np.arange(T)[None, :] > np.arange(T)[:, None]


def _keys_padded(lengths, T):
    return _is_pad(lengths, T)[:, None, None, :]


def combine_with_and(lengths, T):
    return np.logical_and(_causal(T), _keys_padded(lengths, T))


def combine_padding_missing(lengths, T):
    return _causal(T)  # the lengths are never used


def combine_causal_missing(lengths, T):
    return _keys_padded(lengths, T)


def combine_padding_on_queries(lengths, T):
    rows = _is_pad(lengths, T)[:, None, :, None]  # (B, 1, T, 1)
    return np.logical_or(rows, _causal(T))


def combine_no_head_axis(lengths, T):
    return _causal(T)[None] | _is_pad(lengths, T)[:, None, :]  # (B, T, T)


# ── 04.4 · masked_softmax ─────────────────────────────────────────────────────────────────────


def _rowwise(scores, fn):  # fn(row of scores) -> row of weights, over every row, with a loop
    scores = np.asarray(scores, dtype=float)
    out = np.empty_like(scores)
    for idx in np.ndindex(scores.shape[:-1]):
        out[idx] = fn(scores[idx])
    return out


def _plain_softmax(row):
    e = np.exp(row - np.max(row))
    return e / np.sum(e)


def masked_softmax_nan_row(scores, mask):
    filled = scores.copy() + np.zeros(np.broadcast_shapes(scores.shape, mask.shape))
    filled[np.broadcast_to(mask, filled.shape)] = float("-inf")
    return _rowwise(filled, _plain_softmax)  # an all -inf row: nan


def masked_softmax_uniform_row(scores, mask):
    filled = np.where(mask, -1e9, scores)  # the Annotated Transformer's masked_fill
    return _rowwise(filled, _plain_softmax)


def masked_softmax_added_1e9(scores, mask):
    return _rowwise(scores + np.where(mask, -1e9, 0.0), _plain_softmax)


def masked_softmax_mask_inverted(scores, mask):
    keep = mask  # "True = keep"
    filled = np.where(keep, scores, -np.inf)
    return _rowwise(filled, lambda row: np.zeros_like(row) if np.isneginf(row).all()
                    else _plain_softmax(row))


def masked_softmax_after_softmax(scores, mask):
    weights = _rowwise(scores, _plain_softmax)
    return weights * np.logical_not(mask)  # zero the blocked weights afterwards


def masked_softmax_renormalised(scores, mask):
    weights = _rowwise(scores, _plain_softmax) * ~mask  # drop the blocked keys' weight...
    return weights / weights.sum(axis=-1, keepdims=True)  # ...and make the rest sum to 1


def masked_softmax_no_max_shift(scores, mask):
    e = np.exp(np.where(mask, -np.inf, scores))  # blocked keys: exp(-inf) = 0
    return e / np.sum(e, axis=-1, keepdims=True)


def masked_softmax_global_max(scores, mask):
    s = np.where(mask, -np.inf, scores)
    e = np.exp(s - np.max(s))  # "subtract the max so that exp cannot overflow"
    return e / np.sum(e, axis=-1, keepdims=True)


# ── 04.5 · prefix_lm_mask ─────────────────────────────────────────────────────────────────────


def _loop_mask(prefix_lens, lengths, T, blocked):  # (B, 1, T, T) from blocked(i, j, p, n)
    mask = np.zeros((len(lengths), 1, T, T), dtype=bool)
    for b, (p, n) in enumerate(zip(prefix_lens, lengths)):
        for i in range(T):
            for j in range(T):
                mask[b, 0, i, j] = blocked(i, j, p, n)
    return mask


def prefix_causal_everywhere(prefix_lens, lengths, T):
    return _causal(T) | _keys_padded(lengths, T)  # 04.3 again: prefix_lens is never used


def prefix_bidirectional_everywhere(prefix_lens, lengths, T):
    return np.repeat(_keys_padded(lengths, T), T, axis=2)  # "a prefix LM reads both ways"


def prefix_queries_see_the_future(prefix_lens, lengths, T):
    mask = np.array(np.broadcast_to(_causal(T), (len(lengths), 1, T, T)))
    for b, p in enumerate(prefix_lens):
        mask[b, 0, :p, :] = False  # the prefix's rows: its queries see everything
    return mask | _keys_padded(lengths, T)


def prefix_boundary_off_by_one(prefix_lens, lengths, T):
    return _loop_mask(prefix_lens, lengths, T, lambda i, j, p, n: j >= n or j > i and j > p)


def prefix_diagonal_shifted(prefix_lens, lengths, T):
    rows = [np.triu(np.ones((T, T), dtype=bool), k=p + 1) | (np.arange(T) >= n)
            for p, n in zip(prefix_lens, lengths)]  # "move the diagonal past the prefix"
    return np.stack(rows)[:, None]


def prefix_combined_with_or(prefix_lens, lengths, T):
    after_prefix = (np.arange(T) >= prefix_lens[:, None])[:, None, None, :]  # (B, 1, 1, T)
    return _causal(T) | after_prefix | _keys_padded(lengths, T)  # as 04.3 combines two masks


def prefix_one_prefix_for_the_batch(prefix_lens, lengths, T):
    p = prefix_lens[0]  # "the prompt length"
    return (_causal(T) & (np.arange(T) >= p)) | _keys_padded(lengths, T)


def prefix_lengths_and_prefixes_swapped(prefix_lens, lengths, T):
    return _loop_mask(lengths, prefix_lens, T, lambda i, j, p, n: j >= n or j > i and j >= p)


def prefix_padding_not_blocked(prefix_lens, lengths, T):
    opened = np.arange(T)[None, :] < np.asarray(prefix_lens)[:, None]  # (B, T): prefix keys
    return (_causal(T) & ~opened[:, None, None, :])  # the lengths are never used


def prefix_padding_on_queries(prefix_lens, lengths, T):
    return _loop_mask(prefix_lens, lengths, T, lambda i, j, p, n: i >= n or j > i and j >= p)


def prefix_no_head_axis(prefix_lens, lengths, T):
    return _loop_mask(prefix_lens, lengths, T,
                      lambda i, j, p, n: j >= n or j > i and j >= p)[:, 0]  # (B, T, T)


def prefix_inverted(prefix_lens, lengths, T):
    keep = np.tril(np.ones((len(lengths), 1, T, T), dtype=bool))  # True = may attend
    for b, (p, n) in enumerate(zip(prefix_lens, lengths)):
        keep[b, 0, :, :p] = True
        keep[b, 0, :, n:] = False
    return keep


def prefix_not_boolean(prefix_lens, lengths, T):
    mask = np.zeros((len(lengths), 1, T, T))  # floats
    for b, (p, n) in enumerate(zip(prefix_lens, lengths)):
        mask[b, 0] = np.triu(np.ones((T, T)), k=1)
        mask[b, 0, :, :p] = 0
        mask[b, 0, :, n:] = 1
    return mask


WRONG = {
    "causal-not-boolean": causal_not_boolean,
    "causal-diagonal-blocked": causal_diagonal_blocked,
    "causal-inverted": causal_inverted,
    "causal-blocks-the-past": causal_blocks_the_past,
    "causal-additive": causal_additive,
    "causal-additive-large-negative": causal_additive_large_negative,
    "causal-keep-mask-numbers": causal_keep_mask_numbers,
    "padding-on-queries": padding_on_queries,
    "padding-off-by-one": padding_off_by_one,
    "padding-inverted": padding_inverted,
    "padding-no-broadcast-axes": padding_no_broadcast_axes,
    "padding-no-head-axis": padding_no_head_axis,
    "padding-not-boolean": padding_not_boolean,
    "padding-keep-mask-numbers": padding_keep_mask_numbers,
    "padding-length-of-longest": padding_length_of_longest,
    "combine-with-and": combine_with_and,
    "combine-padding-missing": combine_padding_missing,
    "combine-causal-missing": combine_causal_missing,
    "combine-padding-on-queries": combine_padding_on_queries,
    "combine-no-head-axis": combine_no_head_axis,
    "masked-softmax-nan-row": masked_softmax_nan_row,
    "masked-softmax-uniform-row": masked_softmax_uniform_row,
    "masked-softmax-added-1e9": masked_softmax_added_1e9,
    "masked-softmax-mask-inverted": masked_softmax_mask_inverted,
    "masked-softmax-after-softmax": masked_softmax_after_softmax,
    "masked-softmax-renormalised": masked_softmax_renormalised,
    "masked-softmax-no-max-shift": masked_softmax_no_max_shift,
    "masked-softmax-global-max": masked_softmax_global_max,
    "prefix-causal-everywhere": prefix_causal_everywhere,
    "prefix-bidirectional-everywhere": prefix_bidirectional_everywhere,
    "prefix-queries-see-the-future": prefix_queries_see_the_future,
    "prefix-boundary-off-by-one": prefix_boundary_off_by_one,
    "prefix-diagonal-shifted": prefix_diagonal_shifted,
    "prefix-combined-with-or": prefix_combined_with_or,
    "prefix-one-prefix-for-the-batch": prefix_one_prefix_for_the_batch,
    "prefix-lengths-and-prefixes-swapped": prefix_lengths_and_prefixes_swapped,
    "prefix-padding-not-blocked": prefix_padding_not_blocked,
    "prefix-padding-on-queries": prefix_padding_on_queries,
    "prefix-no-head-axis": prefix_no_head_axis,
    "prefix-inverted": prefix_inverted,
    "prefix-not-boolean": prefix_not_boolean,
}


# ── what is special about these exercises ─────────────────────────────────────────────────────


def test_the_hand_cases_are_what_their_labels_say():
    from helpers.checks.masks import CAUSAL, COMBINED, PADDING

    F, T = False, True
    assert "by hand" in CAUSAL.cases[0].label
    assert np.array_equal(CAUSAL.reference(*CAUSAL.cases[0].args),
                          [[F, T, T], [F, F, T], [F, F, F]])
    assert np.array_equal(PADDING.reference(*PADDING.cases[0].args), [[[[F, F, T]]], [[[F, F, F]]]])
    combined = COMBINED.reference(*COMBINED.cases[0].args)
    assert combined.shape == (2, 1, 3, 3)
    assert np.array_equal(combined[0, 0], [[F, T, T], [F, F, T], [F, F, T]])


def test_a_keep_mask_is_named_with_what_this_series_means_by_true():
    result = check(padding_inverted, "04.2")
    assert result.mistakes == ("padding-inverted",)
    assert ("✗ 04.2 padding_mask: the mask is True at the real tokens (a keep-mask, j < length); "
            "in this series True = blocked\n  case: lengths = [2, 3], T = 3") in result.message
    assert result.message.endswith("See 04 §7 · Other encodings.")


def test_a_loop_over_the_lengths_passes():
    def padding_mask(lengths, T):
        return _is_pad(lengths, T)[:, None, None, :]

    assert check(padding_mask)


def test_a_float_mask_is_told_by_its_dtype():
    result = check(causal_not_boolean, "04.1")
    assert result.mistakes == ("causal-not-boolean",)
    assert "expected result: dtype bool\n  got      result: dtype float64 (the same values)" in (
        result.message)


def test_with_end_padding_the_padding_part_changes_only_the_padded_rows():
    """What 04.3's task says: the causal mask already blocks every padded key of a real query."""
    from helpers.checks.masks import COMBINED

    for case in COMBINED.cases:
        lengths, T = case.args
        combined, causal = COMBINED.reference(lengths, T), _causal(T)
        for b, n in enumerate(lengths):
            assert np.array_equal(combined[b, 0, :n], causal[:n])  # real queries: causal only
            assert not combined[b, 0, n:, :n].any() and combined[b, 0, n:, n:].all()  # keys 0..n-1
        assert any(n < T for n in lengths)  # the padded rows are there to see


def test_the_masked_softmax_hand_case_and_the_queries_that_see_nothing():
    ex = exercise("04.4")
    weights = ex.reference(*ex.cases[0].args)
    assert np.allclose(weights, [[0.25, 0.75, 0], [0, 0, 0]], rtol=0, atol=1e-15)
    for case in ex.cases:
        scores, mask = case.args
        weights = ex.reference(scores, mask)
        full = np.broadcast_to(mask, weights.shape).all(axis=-1)
        assert not np.isnan(weights).any() and np.all(weights[full] == 0)
        assert np.allclose(weights.sum(-1)[~full], 1, rtol=0, atol=1e-12)
        assert ("see nothing" in case.label or "[T, T, T]" in case.label) == full.any(), case.label


def test_a_learner_who_divides_only_where_the_total_is_positive_passes():
    def masked_softmax(scores, mask):
        s = np.where(mask, -np.inf, scores)
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isneginf(m), 0.0, m))
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    assert check(masked_softmax)


def test_a_masked_softmax_that_calls_the_librarys_softmax_is_not_credited():
    from helpers.transformer import softmax

    def masked_softmax(scores, mask):
        return softmax(np.where(mask, -np.inf, scores))  # the task asks for it written out

    result = check(masked_softmax)
    assert result.status == "not credited" and "softmax" in result.message, result.message


def test_the_far_apart_and_blocked_high_cases_are_their_labels():
    ex = exercise("04.4")
    far, high = ex.cases[-2], ex.cases[-1]
    assert np.allclose(ex.reference(*far.args), [[0.26894142, 0.73105858, 0]] * 2, atol=1e-8)
    assert "[0.2689, 0.7311, 0]" in far.label
    assert np.allclose(ex.reference(*high.args), [[0.5, 0.5, 0]], rtol=0, atol=1e-15)
    assert "[[0.5, 0.5, 0]]" in high.label
    with np.errstate(all="ignore"):
        assert np.isnan(masked_softmax_renormalised(*high.args)).all()  # 0/0 once 1000 is dropped


def test_the_prefix_lm_hand_case_and_the_edge_cases():
    ex = exercise("04.5")
    F, T = False, True
    hand = "by hand: [[[[F, F, T, T], [F, F, T, T], [F, F, F, T], [F, F, F, T]]]]"
    assert hand in ex.cases[0].label
    assert np.array_equal(ex.reference(*ex.cases[0].args),
                          [[[[F, F, T, T], [F, F, T, T], [F, F, F, T], [F, F, F, T]]]])
    for case in ex.cases:
        prefix_lens, lengths, T_ = case.args
        mask = ex.reference(prefix_lens, lengths, T_)
        assert mask.shape == (len(lengths), 1, T_, T_) and mask.dtype == bool
        assert np.array_equal(np.broadcast_to(mask, (len(lengths), 4, T_, T_))[:, 3], mask[:, 0])
        for b, (p, n) in enumerate(zip(prefix_lens, lengths)):
            m = mask[b, 0]
            assert not m[:, :p].any() and m[:, n:].all()  # prefix keys seen, padding never
            assert np.array_equal(m[:, p:n], _causal(T_)[:, p:n])  # the rest: causal
            assert not m[n:, :n].any()  # a padded query sees the real keys, as in 04.3
    no_prefix = ex.cases[2].args
    assert not no_prefix[0].any()
    assert np.array_equal(ex.reference(*no_prefix),
                          _causal(no_prefix[2]) | _keys_padded(*no_prefix[1:]))  # = 04.3
    all_prefix = ex.cases[3].args
    assert np.array_equal(all_prefix[0], all_prefix[1])
    assert np.array_equal(ex.reference(*all_prefix),
                          np.broadcast_to(_keys_padded(*all_prefix[1:]), (2, 1, 4, 4)))


def test_a_prefix_lm_mask_built_with_loops_passes():
    def prefix_lm_mask(prefix_lens, lengths, T):
        return _loop_mask(prefix_lens, lengths, T, lambda i, j, p, n: j >= n or j > i and j >= p)

    assert check(prefix_lm_mask)


def test_a_prefix_lm_mask_that_reuses_04_3_passes():
    def causal_padding_mask(lengths, T):  # the learner's 04.3
        return _causal(T) | _keys_padded(lengths, T)

    def prefix_lm_mask(prefix_lens, lengths, T):
        mask = causal_padding_mask(lengths, T).copy()
        for b, p in enumerate(prefix_lens):
            mask[b, :, :, :p] = False  # open the prefix's keys
        return mask

    assert check(prefix_lm_mask)


def test_a_prefix_mask_that_blocks_the_diagonal_is_wrong_and_not_named():
    def prefix_lm_mask(prefix_lens, lengths, T):
        return _loop_mask(prefix_lens, lengths, T, lambda i, j, p, n: j >= n or j >= i and j >= p)

    result = check(prefix_lm_mask)
    assert result.status == "wrong" and result.mistakes == (), result.message
