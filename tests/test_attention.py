"""Notebook 01: softmax and scaled dot-product attention against closed forms and properties."""

import math

import numpy as np
import pytest

from helpers.transformer import scaled_dot_product_attention, softmax
from helpers.validation import check_attention_inputs
from tests.reference import loop_attention

# ── softmax ──────────────────────────────────────────────────────────────────────────────────


def test_softmax_closed_form():
    x = np.array([0.0, np.log(2.0), np.log(5.0)])  # exp -> 1, 2, 5
    np.testing.assert_allclose(softmax(x), [1 / 8, 2 / 8, 5 / 8], rtol=1e-15)


def test_softmax_is_shift_invariant_and_does_not_overflow():
    x = np.array([[1000.0, 1001.0, 1002.0]])
    np.testing.assert_allclose(softmax(x), softmax(x - 1000.0), rtol=1e-15)
    assert np.all(np.isfinite(softmax(np.float32([[200.0, 0.0]]))))


def test_softmax_rows_sum_to_one_along_chosen_axis(rng):
    x = rng.standard_normal((3, 4, 5)) * 10
    for axis in (0, 1, -1):
        p = softmax(x, axis=axis)
        np.testing.assert_allclose(p.sum(axis=axis), 1.0, atol=1e-12)
        assert np.all(p >= 0)


def test_softmax_all_minus_inf_row_gives_zeros_not_nan():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    p = softmax(x)
    np.testing.assert_array_equal(p, [[0.0, 0.0], [1.0, 0.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_preserves_dtype(dtype):
    assert softmax(np.zeros((2, 3), dtype=dtype)).dtype == dtype


# ── scaled dot-product attention ─────────────────────────────────────────────────────────────


def test_hand_checkable_case():
    Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    K = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    V = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    out, w = scaled_dot_product_attention(Q, K, V)
    e = np.exp(np.array([1.0, 2.0, 2.0]) / math.sqrt(2))
    np.testing.assert_allclose(w[2], e / e.sum(), rtol=1e-14)
    np.testing.assert_allclose(out[2], [2.2033, 2.4067], atol=5e-5)


@pytest.mark.parametrize(
    "batch,T_q,T_k", [((), 4, 4), ((2,), 3, 5), ((2, 3), 5, 2), ((1, 2), 1, 7)]
)
def test_matches_loop_reference(rng, batch, T_q, T_k):
    Q = rng.standard_normal((*batch, T_q, 6))
    K = rng.standard_normal((*batch, T_k, 6))
    V = rng.standard_normal((*batch, T_k, 3))
    out, w = scaled_dot_product_attention(Q, K, V)
    ref_out, ref_w = loop_attention(Q, K, V)
    assert out.shape == (*batch, T_q, 3) and w.shape == (*batch, T_q, T_k)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)


def test_broadcasts_batch_axes(rng):
    Q = rng.standard_normal((2, 1, 4, 8))  # (B, 1, T_q, d_k) against (1, h, T_k, d_k)
    K = rng.standard_normal((1, 3, 5, 8))
    V = rng.standard_normal((1, 3, 5, 2))
    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (2, 3, 4, 2) and w.shape == (2, 3, 4, 5)
    single, _ = scaled_dot_product_attention(Q[1, 0], K[0, 2], V[0, 2])
    np.testing.assert_allclose(out[1, 2], single, atol=1e-12)


def test_key_value_permutation_invariance(rng):
    Q, K, V = (rng.standard_normal((2, n, 4)) for n in (3, 6, 6))
    perm = rng.permutation(6)
    out, w = scaled_dot_product_attention(Q, K, V)
    out_p, w_p = scaled_dot_product_attention(Q, K[:, perm], V[:, perm])
    np.testing.assert_allclose(out_p, out, atol=1e-12)
    np.testing.assert_allclose(w_p, w[..., perm], atol=1e-12)


def test_query_permutation_equivariance(rng):
    Q, K, V = (rng.standard_normal((n, 4)) for n in (5, 6, 6))
    perm = rng.permutation(5)
    out, _ = scaled_dot_product_attention(Q, K, V)
    out_p, _ = scaled_dot_product_attention(Q[perm], K, V)
    np.testing.assert_allclose(out_p, out[perm], atol=1e-12)


def test_output_in_convex_hull_of_values(rng):
    Q, K, V = (rng.standard_normal((n, 3)) for n in (4, 7, 7))
    out, _ = scaled_dot_product_attention(Q * 5, K, V)
    u = rng.standard_normal((500, 3))
    assert np.all(out @ u.T <= (V @ u.T).max(axis=0) + 1e-12)


def test_scaling_uses_sqrt_dk():
    # One query, two keys: scores 0 and d_k; weights must be softmax([0, d_k / sqrt(d_k)]).
    for d_k in (1, 4, 64):
        Q = np.ones((1, d_k))
        K = np.stack([np.zeros(d_k), np.ones(d_k)])
        _, w = scaled_dot_product_attention(Q, K, np.eye(2))
        expected = np.exp([0.0, math.sqrt(d_k)])
        np.testing.assert_allclose(w[0], expected / expected.sum(), rtol=1e-12)


def test_mask_blocks_before_softmax(rng):
    Q, K, V = (rng.standard_normal((n, 4)) for n in (3, 5, 5))
    mask = np.array([False, True, False, True, False])  # block keys 1 and 3 for every query
    out, w = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert np.all(w[:, mask] == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    keep = ~mask
    out_sub, w_sub = scaled_dot_product_attention(Q, K[keep], V[keep])
    np.testing.assert_allclose(out, out_sub, atol=1e-12)
    np.testing.assert_allclose(w[:, keep], w_sub, atol=1e-12)


def test_every_mask_pattern_small_T_is_finite_and_matches_reference(rng):
    T = 3
    Q, K, V = (rng.standard_normal((T, 2)) for _ in range(3))
    for bits in range(2 ** (T * T)):
        mask = np.array([(bits >> k) & 1 for k in range(T * T)], dtype=bool).reshape(T, T)
        out, w = scaled_dot_product_attention(Q, K, V, mask=mask)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
        ref_out, ref_w = loop_attention(Q, K, V, mask=mask)
        np.testing.assert_allclose(w, ref_w, atol=1e-12)
        np.testing.assert_allclose(out, ref_out, atol=1e-12)
        blocked_rows = mask.all(axis=-1)
        assert np.all(w[blocked_rows] == 0) and np.all(out[blocked_rows] == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(rng, dtype):
    Q, K, V = (rng.standard_normal((2, 4, 8)).astype(dtype) for _ in range(3))
    mask = np.triu(np.ones((4, 4), dtype=bool), k=1)
    out, w = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert out.dtype == dtype and w.dtype == dtype
    ref, _ = scaled_dot_product_attention(*(a.astype(np.float64) for a in (Q, K, V)), mask=mask)
    np.testing.assert_allclose(out, ref, atol=1e-5 if dtype == np.float32 else 1e-12)


def test_integer_inputs_are_computed_in_float64():
    out, w = scaled_dot_product_attention(np.eye(2, dtype=int), np.eye(2, dtype=int), np.eye(2))
    assert w.dtype == np.float64 and out.dtype == np.float64


@pytest.mark.parametrize(
    "shapes,mask_shape,dtype,match",
    [
        (((4, 8), (6, 5), (6, 3)), None, bool, r"Q and K must share d_k.*\(4, 8\).*\(6, 5\)"),
        (((4, 8), (6, 8), (5, 3)), None, bool, r"same number of keys.*\(6, 8\).*\(5, 3\)"),
        (((4, 8), (6, 8), (6, 3)), (4, 5), bool, r"mask of shape \(4, 5\).*\(4, 6\)"),
        (((4, 8), (6, 8), (6, 3)), (4, 6), np.float64, r"mask must be boolean.*float64"),
        (((8,), (6, 8), (6, 3)), None, bool, r"Q must have shape.*rank >= 2.*\(8,\)"),
        (((4, 8), (8,), (6, 3)), None, bool, r"K must have shape"),
        (((2, 4, 8), (3, 6, 8), (3, 6, 3)), None, bool, r"leading \(batch\) axes"),
    ],
)
def test_bad_input_raises_clear_value_error(shapes, mask_shape, dtype, match):
    Q, K, V = (np.zeros(s) for s in shapes)
    mask = None if mask_shape is None else np.zeros(mask_shape, dtype=dtype)
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(Q, K, V, mask=mask)
    with pytest.raises(ValueError, match=match):
        check_attention_inputs(Q, K, V, mask)
