"""Notebook 04's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/masks.py (its models of the same mistakes): loops,
np.tri/np.tril instead of comparisons, other spellings. tests/test_checks.py asserts that the
checker names exactly the mistake each one makes.
"""


import numpy as np

from helpers.checks import check

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
    assert result.message.endswith("See 04 §7 · Other encodings, and converters.")


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
