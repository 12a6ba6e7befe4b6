"""Notebook 03's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/positions.py (its models of the same mistakes): double
loops over positions and columns with `math`, np.outer, other spellings. tests/test_checks.py
asserts that the checker names exactly the mistake each one makes; the tests at the end check the
hand cases by `math` and one message word for word.
"""

import math

import numpy as np

from helpers import checks

# ── 03.1 · positional_encoding ────────────────────────────────────────────────────────────────


def _table(T, d_model, value):
    """PE[pos, j] = value(pos, j), one entry at a time: the plainest way to write a table."""
    return np.array([[value(pos, j) for j in range(d_model)] for pos in range(T)], dtype=float)


def pe_sin_cos_in_halves(T, d_model):
    half = d_model // 2
    freqs = 1.0 / 10000 ** (2 * np.arange(half) / d_model)
    angles = np.outer(np.arange(T), freqs)
    return np.hstack([np.sin(angles), np.cos(angles)])  # [sin ... sin | cos ... cos]


def pe_exponent_i_over_d(T, d_model):
    def value(pos, j):
        i = j // 2
        angle = pos / 10000 ** (i / d_model)  # forgot the 2 of 2i
        return math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return _table(T, d_model, value)


def pe_exponent_4i_over_d(T, d_model):
    i = np.arange(0, d_model, 2)  # named i, but it already holds 2i
    angles = np.outer(np.arange(T), 1.0 / 10000 ** (2 * i / d_model))
    PE = np.zeros((T, d_model))
    PE[:, 0::2], PE[:, 1::2] = np.sin(angles), np.cos(angles)
    return PE


def pe_exponent_column_index(T, d_model):
    def value(pos, j):
        angle = pos / 10000 ** (j / d_model)  # j itself, not 2 * (j // 2)
        return math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return _table(T, d_model, value)


def pe_sin_cos_swapped(T, d_model):
    def value(pos, j):
        angle = pos / 10000 ** (2 * (j // 2) / d_model)
        return math.cos(angle) if j % 2 == 0 else math.sin(angle)
    return _table(T, d_model, value)


def pe_positions_from_1(T, d_model):
    positions = np.arange(1, T + 1)[:, None]  # "the first word is word 1"
    angles = positions * np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    PE = np.zeros((T, d_model))
    PE[:, ::2], PE[:, 1::2] = np.sin(angles), np.cos(angles)
    return PE


def pe_frequency_inverted(T, d_model):
    def value(pos, j):
        angle = pos * 10000 ** (2 * (j // 2) / d_model)  # times, not divided by
        return math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return _table(T, d_model, value)


# ── 03.2 · embed ──────────────────────────────────────────────────────────────────────────────


def _lookup(tokens, table):
    return np.take(table, tokens, axis=0)  # (..., T, d_model)


def _positions(tokens, PE):
    return PE[np.arange(tokens.shape[-1])]  # (T, d_model), broadcast over any batch


def emb_pe_concatenated(tokens, table, PE):
    x = _lookup(tokens, table) * math.sqrt(table.shape[1])
    pe = np.broadcast_to(_positions(tokens, PE), x.shape)
    return np.concatenate((x, pe), axis=x.ndim - 1)  # [token | PE]


def emb_not_scaled(tokens, table, PE):
    return _lookup(tokens, table) + _positions(tokens, PE)


def emb_scaled_by_d_model(tokens, table, PE):
    d_model = table.shape[1]
    return d_model * _lookup(tokens, table) + _positions(tokens, PE)


def emb_divided_by_sqrt_d_model(tokens, table, PE):
    return _lookup(tokens, table) / math.sqrt(table.shape[1]) + _positions(tokens, PE)


def emb_scaled_by_sqrt_vocab(tokens, table, PE):
    d_model = len(table)  # the number of rows: the vocabulary, not the width
    return _lookup(tokens, table) * d_model**0.5 + _positions(tokens, PE)


def emb_pe_scaled_too(tokens, table, PE):
    return (_lookup(tokens, table) + _positions(tokens, PE)) * math.sqrt(table.shape[1])


def emb_pe_indexed_by_token(tokens, table, PE):
    return _lookup(tokens, table) * math.sqrt(table.shape[1]) + np.take(PE, tokens, axis=0)


# ── 03.3 · relative_position_matrix ───────────────────────────────────────────────────────────


def _blocks(k, d_model, block, freq=lambda i, d_model: 10000 ** (-2 * i / d_model)):
    """M_k with block(angle) (2 x 2) at rows and columns 2i, 2i + 1, with a loop over the pairs."""
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = block(k * freq(i, d_model))
    return M


def rotation_transposed(k, d_model):  # the textbook rotation, for column vectors
    return _blocks(k, d_model, lambda a: [[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])


def rotation_frequency_without_the_2(k, d_model):
    return _blocks(k, d_model, lambda a: [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]],
                   freq=lambda i, d_model: 1 / 10000 ** (i / d_model))


def rotation_sin_cos_swapped(k, d_model):
    return _blocks(k, d_model, lambda a: [[math.sin(a), -math.cos(a)], [math.cos(a), math.sin(a)]])


def rotation_angle_not_times_k(k, d_model):
    return _blocks(1, d_model, lambda a: [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def rotation_frequency_inverted(k, d_model):
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        a = k * 10000 ** (2 * i / d_model)  # "the frequency grows with i"
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[math.cos(a), -math.sin(a)],
                                               [math.sin(a), math.cos(a)]]
    return M


def rotation_pairs_in_halves(k, d_model):
    M, h = np.zeros((d_model, d_model)), d_model // 2
    for i in range(h):
        a = k / 10000 ** (2 * i / d_model)
        M[i, i], M[i, i + h], M[i + h, i], M[i + h, i + h] = (
            math.cos(a), -math.sin(a), math.sin(a), math.cos(a))
    return M


# ── 03.4 · offset_between ─────────────────────────────────────────────────────────────────────


def _last_pair(a, b):
    """(sin, cos) of a's and of b's slowest pair, and that pair's frequency."""
    d = a.shape[-1]
    w = 1 / 10000 ** ((d - 2) / d)
    return a[..., -2], a[..., -1], b[..., -2], b[..., -1], w


def offset_sign_flipped(a, b):
    sa, ca, sb, cb, w = _last_pair(a, b)
    return np.round(np.arctan2(sa * cb - ca * sb, ca * cb + sa * sb) / w).astype(int)  # a - b


def offset_from_dot_product(a, b):
    sa, ca, sb, cb, w = _last_pair(a, b)
    cos_kw = np.clip(sa * sb + ca * cb, -1, 1)  # cos(k w) = the pair's dot product
    return np.round(np.arccos(cos_kw) / w).astype(int)


def offset_fastest_pair(a, b):
    turn = math.atan2 if np.ndim(a) == 1 else np.arctan2
    cross = a[..., 1] * b[..., 0] - a[..., 0] * b[..., 1]  # pair 0: w = 1
    dot = a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]
    return np.round(turn(cross, dot)).astype(int)


def offset_exponent_i_over_d(a, b):
    d = a.shape[-1]
    i = d // 2 - 1
    w = 10000 ** (-i / d)  # forgot the 2 of 2i
    sa, ca, sb, cb, _ = _last_pair(a, b)
    return np.round(np.arctan2(ca * sb - sa * cb, ca * cb + sa * sb) / w).astype(int)


def offset_arctan_loses_quadrant(a, b):
    sa, ca, sb, cb, w = _last_pair(a, b)
    return np.round(np.arctan((ca * sb - sa * cb) / (ca * cb + sa * sb)) / w).astype(int)


def offset_angles_not_wrapped(a, b):
    sa, ca, sb, cb, w = _last_pair(a, b)
    p_w, q_w = np.arctan2(sa, ca), np.arctan2(sb, cb)  # "the position of each row, times w"
    return np.round((q_w - p_w) / w).astype(int)


WRONG = {
    "pe-sin-cos-in-halves": pe_sin_cos_in_halves,
    "pe-exponent-i-over-d": pe_exponent_i_over_d,
    "pe-exponent-4i-over-d": pe_exponent_4i_over_d,
    "pe-exponent-column-index": pe_exponent_column_index,
    "pe-sin-cos-swapped": pe_sin_cos_swapped,
    "pe-positions-from-1": pe_positions_from_1,
    "pe-frequency-inverted": pe_frequency_inverted,
    "emb-pe-concatenated": emb_pe_concatenated,
    "emb-not-scaled": emb_not_scaled,
    "emb-scaled-by-d_model": emb_scaled_by_d_model,
    "emb-divided-by-sqrt-d_model": emb_divided_by_sqrt_d_model,
    "emb-scaled-by-sqrt-vocab": emb_scaled_by_sqrt_vocab,
    "emb-pe-scaled-too": emb_pe_scaled_too,
    "emb-pe-indexed-by-token": emb_pe_indexed_by_token,
    "rotation-transposed": rotation_transposed,
    "rotation-frequency-without-the-2": rotation_frequency_without_the_2,
    "rotation-sin-cos-swapped": rotation_sin_cos_swapped,
    "rotation-angle-not-times-k": rotation_angle_not_times_k,
    "rotation-frequency-inverted": rotation_frequency_inverted,
    "rotation-pairs-in-halves": rotation_pairs_in_halves,
    "offset-sign-flipped": offset_sign_flipped,
    "offset-from-dot-product": offset_from_dot_product,
    "offset-fastest-pair": offset_fastest_pair,
    "offset-exponent-i-over-d": offset_exponent_i_over_d,
    "offset-arctan-loses-quadrant": offset_arctan_loses_quadrant,
    "offset-angles-not-wrapped": offset_angles_not_wrapped,
}


# ── what is special here ──────────────────────────────────────────────────────────────────────


def test_the_hand_cases_are_what_their_labels_say():
    pe, embed = checks.exercise("03.1"), checks.exercise("03.2")
    table = pe.reference(*pe.cases[0].args)  # T = 3, d_model = 4
    assert np.array_equal(table[0], [0, 1, 0, 1])
    by_hand = [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]
    assert np.allclose(table[2], by_hand, rtol=0, atol=1e-15)
    assert np.allclose(np.round(by_hand, 4), [0.9093, -0.4161, 0.0200, 0.9998], rtol=0, atol=1e-12)
    x = embed.reference(*embed.cases[0].args)
    assert np.array_equal(x[0], [1, 1, 0, 1])


def test_a_learner_who_reads_the_formula_as_a_double_loop_passes():
    def positional_encoding(T, d_model):
        return _table(T, d_model, lambda pos, j: (math.sin if j % 2 == 0 else math.cos)(
            pos / 10000 ** (2 * (j // 2) / d_model)))

    assert checks.check(positional_encoding)


def test_the_message_for_halves_quoted():
    message = checks.check(pe_sin_cos_in_halves, "03.1").message
    assert message.startswith(
        "✗ 03.1 positional_encoding: all the sines come first, then all the cosines "
        "([sin | cos]); the paper interleaves them: column 2i is a sine, column 2i + 1 the "
        "cosine of the same angle\n"
        "  case: T = 3, d_model = 4 (by hand: PE[0] = [0 1 0 1], PE[2] = [sin 2, cos 2, sin 0.02, "
        "cos 0.02] = [0.9093 -0.4161 0.0200 0.9998])\n"
        "  expected result[0]: [0 1 0 1]\n"
        "  got      result[0]: [0 0 1 1]\n"
        "  Your result equals this mistake's on all 4 cases [pe-sin-cos-in-halves]. "
        "See 03 §3 · The wavelengths (its layout pitfall, detailed in Going further)."), message


def test_the_rotation_hand_case_is_its_label_and_shifts_the_table():
    ex = checks.exercise("03.3")
    M = ex.reference(*ex.cases[0].args)  # k = 1, d_model = 4
    c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)
    by_hand = [[c1, -s1, 0, 0], [s1, c1, 0, 0], [0, 0, c2, -s2], [0, 0, s2, c2]]
    assert np.allclose(M, by_hand, rtol=0, atol=1e-15)
    assert np.array_equal(ex.reference(*ex.cases[3].args), np.eye(4))  # k = 0
    PE = checks.exercise("03.1").reference(20, 16)
    for k, d_model in (case.args for case in ex.cases):
        if d_model == 16:
            shifted = PE[max(0, -k):20 - max(0, k)] @ ex.reference(k, d_model)
            assert np.allclose(shifted, PE[max(0, k):20 + min(0, k)], rtol=0, atol=1e-12)
            wrong = PE[max(0, -k):20 - max(0, k)] @ rotation_transposed(k, d_model)
            assert np.allclose(wrong, PE[max(0, -k):20 - max(0, k)] @ ex.reference(-k, d_model))


def test_a_learner_who_fills_the_pairs_with_slices_passes():
    def relative_position_matrix(k, d_model):
        w = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)
        M = np.zeros((d_model, d_model))
        M[0::2, 0::2] = np.diag(np.cos(k * w))
        M[0::2, 1::2] = np.diag(-np.sin(k * w))
        M[1::2, 0::2] = np.diag(np.sin(k * w))
        M[1::2, 1::2] = np.diag(np.cos(k * w))
        return M

    assert checks.check(relative_position_matrix)


def test_the_offset_hand_case_is_its_label_and_every_case_stays_below_half_a_turn():
    ex = checks.exercise("03.4")
    a, b = ex.cases[0].args
    assert np.array_equal(a, [0, 1, 0, 1])
    assert np.allclose(b, [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-15)
    assert ex.reference(a, b) == 1
    for case in ex.cases:  # the slowest pair turns by less than pi: the offset is recoverable
        a, b = case.args
        d = a.shape[-1]
        k = np.asarray(ex.reference(a, b))
        assert np.all(np.abs(k) / 10000 ** ((d - 2) / d) < math.pi), case.label
    assert [int(np.ravel(ex.reference(*case.args))[0]) for case in ex.cases] == [
        1, -3, 12, 200, 30, 5, -250]  # the offsets the labels give


def test_a_learner_who_turns_one_row_into_the_other_with_complex_numbers_passes():
    def offset_between(a, b):
        d = a.shape[-1]
        za = a[..., -1] + 1j * a[..., -2]  # cos + i sin of the slowest pair
        zb = b[..., -1] + 1j * b[..., -2]
        return np.rint(np.angle(zb * np.conj(za)) * 10000 ** ((d - 2) / d)).astype(int)

    assert checks.check(offset_between).status == "passed"


def test_the_row_dot_product_cannot_give_the_offset_and_is_not_a_named_mistake():
    def offset_between(a, b):  # the whole rows' dot product, read as the cosine of k
        d = a.shape[-1]
        return np.rint(np.arccos(np.clip((a * b).sum(-1) / (d / 2), -1, 1))).astype(int)

    result = checks.check(offset_between)
    assert result.status == "wrong" and not result.mistakes, result.message
