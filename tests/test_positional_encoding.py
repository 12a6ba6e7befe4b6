"""Notebook 03: sinusoidal positional encoding, the shift matrix M_k, and the PE explorer."""

import math
import re
from unittest import mock

import numpy as np
import pytest

from helpers import widgets as tw
from helpers.transformer import pe_frequencies, positional_encoding, relative_position_matrix


def reference_pe(T, d_model):
    """An independent, loop-based implementation with the math module (the paper's formula)."""
    out = np.zeros((T, d_model))
    for pos in range(T):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            out[pos, 2 * i], out[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return out


def shift_pairs(T, k):
    """Index ranges (src, dst) of every position pos with pos and pos + k inside 0 .. T-1."""
    return slice(max(0, -k), T - max(0, k)), slice(max(0, k), T + min(0, k))


# ── closed forms ─────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("d_model", [2, 4, 64, 512])
def test_position_zero_is_zero_one_zero_one(d_model):
    np.testing.assert_array_equal(positional_encoding(1, d_model)[0], [0.0, 1.0] * (d_model // 2))


def test_hand_computed_entries():
    PE = positional_encoding(3, 4)  # w = (1, 1/100)
    np.testing.assert_allclose(PE[2], [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)],
                               rtol=0, atol=1e-15)
    assert PE[1, 0] == pytest.approx(0.8414709848078965, abs=1e-15)
    big = positional_encoding(8, 512)
    assert big[7, 100] == pytest.approx(math.sin(7 / 10000 ** (100 / 512)), abs=1e-14)
    assert big[7, 101] == pytest.approx(math.cos(7 / 10000 ** (100 / 512)), abs=1e-14)


@pytest.mark.parametrize("T, d_model", [(1, 2), (7, 6), (50, 64), (33, 128)])
def test_matches_the_loop_reference(T, d_model):
    np.testing.assert_allclose(positional_encoding(T, d_model), reference_pe(T, d_model),
                               rtol=0, atol=1e-12)


def test_frequencies_and_wavelengths():
    for d_model in (2, 8, 64, 512, 1024):
        omega = pe_frequencies(d_model)
        assert omega.shape == (d_model // 2,) and omega[0] == 1.0
        wavelength = 2 * np.pi / omega
        assert wavelength.min() == 2 * np.pi
        assert wavelength.max() == pytest.approx(2 * np.pi * 10000 ** (1 - 2 / d_model), rel=1e-12)
        assert wavelength.max() < 2 * np.pi * 10000  # the paper's 10000 * 2 pi is only a limit
        if d_model > 2:
            np.testing.assert_allclose(wavelength[1:] / wavelength[:-1], 10000 ** (2 / d_model),
                                       rtol=1e-12)  # a geometric progression
    assert 2 * np.pi / pe_frequencies(64)[-1] == pytest.approx(47117.2, abs=0.1)


# ── shape, dtype, bounds ─────────────────────────────────────────────────────────────────────


def test_shape_and_default_dtype():
    PE = positional_encoding(10, 16)
    assert PE.shape == (10, 16) and PE.dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, "float32", np.dtype(np.float16)])
def test_dtype_argument_is_a_correctly_rounded_cast(dtype):
    PE = positional_encoding(100, 32, dtype=dtype)
    assert PE.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(PE, positional_encoding(100, 32).astype(dtype))


def test_numpy_integers_are_accepted():
    np.testing.assert_array_equal(positional_encoding(np.int64(5), np.int32(8)),
                                  positional_encoding(5, 8))


def test_values_are_bounded_and_every_row_has_norm_sqrt_half_d_model():
    PE = positional_encoding(2000, 64)
    assert np.abs(PE).max() <= 1.0
    np.testing.assert_allclose((PE**2).sum(axis=1), 32.0, rtol=0, atol=1e-11)


def test_rows_are_distinct():
    PE = positional_encoding(1000, 64)
    d2 = (PE**2).sum(1)[:, None] + (PE**2).sum(1)[None, :] - 2 * PE @ PE.T
    np.fill_diagonal(d2, np.inf)
    assert d2.min() > 0.1  # no two of the first 1000 positions share (or nearly share) a code


# ── the relative-position identity ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("d_model", [2, 8, 64])
def test_shift_matrix_moves_every_position_for_every_offset(d_model):
    T = 300
    PE = positional_encoding(T, d_model)
    for k in range(-(T - 1), T):
        src, dst = shift_pairs(T, k)
        np.testing.assert_allclose(PE[src] @ relative_position_matrix(k, d_model), PE[dst],
                                   rtol=0, atol=1e-10, err_msg=f"k={k}")


def test_shift_matrix_for_far_positions_and_large_offsets():
    far = positional_encoding(100_001, 16)[[0, 12_345, 100_000]]
    M = relative_position_matrix(87_655, 16)
    np.testing.assert_allclose(far[1] @ M, far[2], atol=1e-9)
    np.testing.assert_allclose(far[2] @ relative_position_matrix(-100_000, 16), far[0], atol=1e-9)


def test_shift_matrix_structure_and_group_properties():
    d = 32
    M = {k: relative_position_matrix(k, d) for k in (-3, 0, 3, 5, 8)}
    np.testing.assert_array_equal(M[0], np.eye(d))
    np.testing.assert_allclose(M[3] @ M[5], M[8], atol=1e-13)
    np.testing.assert_allclose(M[-3], M[3].T, atol=1e-15)
    np.testing.assert_allclose(M[3].T @ M[3], np.eye(d), atol=1e-13)
    mask = np.kron(np.eye(d // 2), np.ones((2, 2))).astype(bool)  # block-diagonal 2 x 2
    assert np.all(M[5][~mask] == 0)
    w = pe_frequencies(d)[1]
    np.testing.assert_allclose(M[5][2:4, 2:4], [[math.cos(5 * w), -math.sin(5 * w)],
                                                [math.sin(5 * w), math.cos(5 * w)]], atol=1e-15)
    assert M[5].shape == (d, d) and M[5].dtype == np.float64


def test_dot_product_depends_only_on_the_distance():
    T, d = 200, 64
    PE = positional_encoding(T, d)
    G = PE @ PE.T
    profile = np.cos(np.arange(T)[:, None] * pe_frequencies(d)).sum(axis=1)  # sum_i cos(k w_i)
    p, q = np.indices((T, T))
    np.testing.assert_allclose(G, profile[np.abs(p - q)], rtol=0, atol=1e-10)
    np.testing.assert_allclose(G, G.T, atol=0)
    assert profile[0] == d / 2 and np.all(profile[1:] < d / 2)


# ── bad input ────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("T, d_model, match", [
    (5, 63, r"d_model must be even .* got d_model=63"),
    (5, 1, r"d_model must be even .* got d_model=1"),
    (5, 0, r"d_model must be even .* got d_model=0"),
    (5, -4, r"d_model must be even .* got d_model=-4"),
    (5, 64.0, r"d_model must be an int, got float 64\.0"),
    (5, True, r"d_model must be an int, got bool True"),
    (0, 64, r"T \(the number of positions\) must be a positive int, got T=0"),
    (-3, 64, r"T .* must be a positive int, got T=-3"),
    (2.5, 64, r"T .* must be a positive int, got T=2\.5"),
    ("10", 64, r"T .* must be a positive int, got T='10'"),
])
def test_bad_sizes_raise_a_clear_value_error(T, d_model, match):
    with pytest.raises(ValueError, match=match):
        positional_encoding(T, d_model)


def test_bad_dtype_and_bad_offset_raise():
    with pytest.raises(ValueError, match=r"dtype must be a float type .* got int64"):
        positional_encoding(4, 8, dtype=np.int64)
    with pytest.raises(ValueError, match=r"k \(the offset in positions\) must be an int, got float 1\.5"):
        relative_position_matrix(1.5, 8)
    with pytest.raises(ValueError, match=r"d_model must be even .* got d_model=7"):
        relative_position_matrix(1, 7)
    with pytest.raises(ValueError, match=r"d_model must be even"):
        pe_frequencies(9)


# ── the explorer, driven in-kernel ───────────────────────────────────────────────────────────


def independent_row(pos, d_model):
    """PE[pos] straight from the paper's formula, without helpers.transformer."""
    i = np.arange(d_model // 2)
    angle = pos / 10000.0 ** (2 * i / d_model)
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).ravel()


def test_explorer_starts_on_the_seed_table_of_50_by_64():
    ex = tw.pe_explorer()
    assert ex.last_error is None and ex.result["PE"].shape == (50, 64)
    assert set(ex.controls) == {"positions", "d_model", "dim", "pos", "offset", "slip"}
    for name, control in ex.controls.items():
        assert re.fullmatch(r"[A-Za-z0-9_]+", name) and {"tx-control", f"tx-control-{name}"} <= set(control._dom_classes)
    assert "tx-kind-slider" in ex.controls["d_model"]._dom_classes


def test_explorer_offset_moves_pos_onto_pos_plus_k():
    ex = tw.pe_explorer()
    png = ex.image.value
    for k in (7, -10, 0, 39):
        ex.controls["offset"].value = k
        r = ex.result
        assert ex.last_error is None and r["offset"] == k
        np.testing.assert_allclose(r["moved"], independent_row(10 + k, 64), atol=1e-10)
        np.testing.assert_allclose(r["target"], independent_row(10 + k, 64), atol=1e-12)
        assert r["error"] < 1e-10
        assert r["angle"] == pytest.approx(k * 10000 ** (-6 / 64))  # dim 6 is pair 3
    assert ex.image.value != png
    assert 'data-control="offset">39</span>' in ex.status.value
    assert "max |PE[pos] @ M_k − PE[pos + k]|" in ex.status.value


def test_explorer_dimension_selects_the_pair_and_wavelength():
    ex = tw.pe_explorer()
    ex.controls["dim"].value = 41
    r = ex.result
    assert r["pair"] == 20
    assert r["wavelength"] == pytest.approx(2 * np.pi * 10000 ** (40 / 64))
    assert 'data-control="dim">41</span>' in ex.status.value and "i = 20" in ex.status.value


def test_explorer_d_model_change_clips_the_dimension():
    ex = tw.pe_explorer()
    ex.controls["dim"].value = 60
    updates = ex.n_updates
    ex.controls["d_model"].value = 16
    assert ex.n_updates == updates + 1, "one recompute per change, even with linked controls"
    assert ex.controls["dim"].max == 15 and ex.controls["dim"].value == 15
    assert ex.result["PE"].shape == (50, 16) and ex.last_error is None
    np.testing.assert_allclose(ex.result["target"], independent_row(15, 16), atol=1e-12)
    assert 'data-control="d_model">16</span>' in ex.status.value


def test_explorer_keeps_pos_plus_k_inside_the_table():
    ex = tw.pe_explorer()
    ex.controls["offset"].value = 30  # pos 10 + 30 = 40 < 50
    ex.controls["positions"].value = 20
    values = ex.values()
    assert values["positions"] == 20 and ex.controls["pos"].max == 19
    assert 0 <= values["pos"] + values["offset"] <= 19 and values["offset"] == 9
    assert ex.controls["offset"].min == -19 and ex.controls["offset"].max == 19
    ex.controls["offset"].value = -15  # pos 10 - 15 < 0: clipped to -10
    assert ex.controls["offset"].value == -10 and ex.result["target"][1] == 1.0  # PE[0] = 0,1,...
    ex.controls["pos"].value = 0  # pos + k would be -10: offset follows
    assert ex.controls["offset"].value == 0
    assert ex.last_error is None
    ex.controls["positions"].value = 200
    assert ex.controls["pos"].max == 199 and ex.result["PE"].shape == (200, 64)


def test_explorer_keeps_one_figure_and_its_fast_path_matches_a_full_redraw():
    ex = tw.pe_explorer()
    for T, d in ((20, 8), (100, 512), (50, 64)):  # every change, even of the size: fast path
        tw.assert_fast_path_matches_redraw(ex, "positions", T)
        tw.assert_fast_path_matches_redraw(ex, "d_model", d)
    assert len(ex.cached_layouts) == 1, "one cached figure, however many table sizes were shown"
    tw.assert_fast_path_matches_redraw(ex, "dim", 33)
    tw.assert_fast_path_matches_redraw(ex, "offset", -4)


def test_explorer_compute_rejects_a_target_outside_the_table():
    ex = tw.pe_explorer()
    with pytest.raises(ValueError, match=r"pos \+ offset=60 must index a table of shape \(50, 64\)"):
        ex.compute(positions=50, d_model=64, dim=0, pos=10, offset=50)


def test_explorer_builder_validates_and_never_displays():
    with pytest.raises(ValueError, match="d_model one of"):
        tw.pe_explorer(d_model=63)
    with pytest.raises(ValueError, match="pos=45, offset=10"):
        tw.pe_explorer(pos=45, offset=10)
    with mock.patch("IPython.display.display") as display:
        tw.pe_explorer(T=20, d_model=8, dim=7, pos=19, offset=-19)
    display.assert_not_called()
