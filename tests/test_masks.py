"""Notebook 04: causal and padding masks, fully blocked rows, the causal property, converters."""


import numpy as np
import pytest

from helpers.mask_formats import (
    lengths_from_padding_mask,
    mask_from_additive,
    mask_from_keep,
    mask_to_additive,
    mask_to_keep,
)
from helpers.transformer import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    padding_mask_from_tokens,
    scaled_dot_product_attention,
    softmax,
)
from tests.reference import loop_attention, randomise


def every_mask(T_q, T_k):
    """All 2 ** (T_q * T_k) boolean masks of shape (T_q, T_k), stacked: (n, T_q, T_k)."""
    n = T_q * T_k
    bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    return bits.astype(bool).reshape(-1, T_q, T_k)


# ── the masks ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("T", [1, 2, 3, 7])
def test_causal_mask_closed_form(T):
    m = causal_mask(T)
    assert m.shape == (T, T) and m.dtype == bool
    for i in range(T):
        for j in range(T):
            assert m[i, j] == (j > i)
    assert m.sum() == T * (T - 1) // 2


def test_padding_mask_from_lengths_and_tokens_agree():
    lengths = np.array([3, 0, 5, 1])
    m = padding_mask(lengths, 5)
    assert m.shape == (4, 1, 1, 5) and m.dtype == bool
    expected = np.array([[j >= n for j in range(5)] for n in lengths])
    np.testing.assert_array_equal(m[:, 0, 0], expected)
    tokens = np.where(expected, 0, 7)  # pad id 0, every real token 7
    np.testing.assert_array_equal(padding_mask_from_tokens(tokens, 0), m)
    np.testing.assert_array_equal(padding_mask_from_tokens(tokens, 7), ~m)


def test_combined_mask_shape_and_meaning():
    lengths = np.array([2, 4, 3])
    combined = causal_mask(4) | padding_mask(lengths, 4)
    assert combined.shape == (3, 1, 4, 4)
    for b, n in enumerate(lengths):
        for i in range(4):
            for j in range(4):
                assert combined[b, 0, i, j] == (j > i or j >= n)


def test_head_axis_is_inserted_for_a_mask_of_the_inputs_rank(rng):
    layer = randomise(MultiHeadAttention(8, 2, rng), rng)
    x = rng.standard_normal((3, 4, 8))
    mask = causal_mask(4) | padding_mask([2, 4, 3], 4)  # (3, 1, 4, 4)
    out4 = layer.forward(x, x, x, mask)
    out3 = layer.forward(x, x, x, mask[:, 0])  # (3, 4, 4): the layer adds the head axis
    np.testing.assert_array_equal(out3, out4)


# ── fully blocked rows: never NaN, for every mask ────────────────────────────────────────────


@pytest.mark.parametrize("T_q,T_k", [(3, 3), (2, 3), (3, 2), (1, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_mask_pattern_function(rng, T_q, T_k, dtype):
    masks = every_mask(T_q, T_k)  # (n, T_q, T_k)
    n = len(masks)
    Q = rng.standard_normal((T_q, 5))
    K, V = rng.standard_normal((T_k, 5)), rng.standard_normal((T_k, 3))
    Qb, Kb, Vb = (np.broadcast_to(a, (n, *a.shape)).astype(dtype) for a in (Q, K, V))
    out, w = scaled_dot_product_attention(Qb, Kb, Vb, mask=masks)
    assert out.dtype == w.dtype == dtype
    assert not np.isnan(out).any() and not np.isnan(w).any()
    full = masks.all(axis=-1)
    assert np.all(w[masks] == 0) and np.all(w[full] == 0) and np.all(out[full] == 0)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(w[~full].sum(-1), 1, atol=tol)
    for k in range(0, n, max(1, n // 64)):  # an independent computation on a spread of masks
        ref_out, ref_w = loop_attention(Q, K, V, masks[k])
        np.testing.assert_allclose(w[k], ref_w, atol=tol)
        np.testing.assert_allclose(out[k], ref_out, atol=10 * tol)


def test_every_mask_pattern_multi_head_layer(rng):
    masks = every_mask(3, 3)  # all 512
    layer = randomise(MultiHeadAttention(12, 3, rng), rng)
    x = np.broadcast_to(rng.standard_normal((3, 12)), (512, 3, 12))
    out = layer.forward(x, x, x, mask=masks[:, None])  # (512, 1, 3, 3)
    w = layer.weights  # (512, h, 3, 3)
    assert not np.isnan(out).any() and not np.isnan(w).any()
    full = masks.all(axis=-1)  # (512, 3)
    assert full.sum() == 512 * 3 // 8
    assert np.all(w.swapaxes(0, 1)[:, masks] == 0)
    assert np.all(w.swapaxes(0, 1)[:, full] == 0)
    np.testing.assert_array_equal(out[full], np.broadcast_to(layer.b_o, (full.sum(), 12)))
    np.testing.assert_allclose(w.swapaxes(0, 1)[:, ~full].sum(-1), 1, atol=1e-12)
    out3 = layer.forward(x, x, x, mask=masks)  # (512, 3, 3): head axis inserted by the layer
    np.testing.assert_array_equal(out3, out)


def test_textbook_softmax_would_give_nan_and_fill_gives_uniform():
    """The behaviour the notebook contrasts ours with, so that the contrast stays true."""
    row = np.full(4, -np.inf)
    with np.errstate(invalid="ignore"):
        textbook = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert np.isnan(textbook).all()
    filled = np.full(4, -1e9)
    np.testing.assert_allclose(np.exp(filled - filled.max()) / 4, 0.25)
    assert np.all(softmax(row) == 0)


def test_mask_after_softmax_is_not_mask_before(rng):
    scores = rng.standard_normal((5, 5))
    m = causal_mask(5)
    wrong = softmax(scores) * ~m
    right = softmax(np.where(m, -np.inf, scores))
    assert np.all(wrong.sum(-1)[:-1] < 1 - 1e-3)
    np.testing.assert_allclose(wrong / wrong.sum(-1, keepdims=True), right, atol=1e-12)


# ── the causal property, padded keys and queries ─────────────────────────────────────────────


@pytest.mark.parametrize("t", [1, 4, 7])
def test_changing_the_future_leaves_the_past_bit_identical(rng, t):
    layer = randomise(MultiHeadAttention(16, 4, rng), rng)
    x = rng.standard_normal((2, 8, 16))
    x_new = x.copy()
    x_new[:, t:] = rng.standard_normal((2, 8 - t, 16))
    before = layer.forward(x, x, x, causal_mask(8))
    after = layer.forward(x_new, x_new, x_new, causal_mask(8))
    assert np.array_equal(before[:, :t], after[:, :t])
    assert np.abs(before[:, t:] - after[:, t:]).max() > 1e-3
    unmasked = layer.forward(x, x, x), layer.forward(x_new, x_new, x_new)
    assert np.abs(unmasked[0][:, :t] - unmasked[1][:, :t]).max() > 1e-3  # the check can fail


def test_all_at_once_equals_one_at_a_time(rng):
    layer = randomise(MultiHeadAttention(16, 4, rng), rng)
    x = rng.standard_normal((2, 9, 16))
    steps = [layer.forward(x[:, t:t + 1], x[:, :t + 1], x[:, :t + 1]) for t in range(9)]
    np.testing.assert_allclose(layer.forward(x, x, x, causal_mask(9)),
                               np.concatenate(steps, axis=1), atol=1e-12)


def test_padded_keys_get_zero_weight_and_padded_queries_are_garbage(rng):
    layer = randomise(MultiHeadAttention(16, 4, rng), rng)
    lengths = np.array([5, 2, 3])
    pm = padding_mask(lengths, 5)
    x = rng.standard_normal((3, 5, 16))
    out = layer.forward(x, x, x, pm)
    assert np.all(layer.weights[np.broadcast_to(pm, layer.weights.shape)] == 0)
    real = ~pm[:, 0, 0]
    x_other = np.where(real[..., None], x, 10 * rng.standard_normal((3, 5, 16)))
    out_other = layer.forward(x_other, x_other, x_other, pm)
    assert np.array_equal(out[real], out_other[real])
    assert np.abs(out[~real] - out_other[~real]).max(axis=-1).min() > 1e-3


# ── converters ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 1, 4, 4), (2, 3, 1, 6)])
def test_keep_round_trips(rng, shape):
    m = rng.random(shape) < 0.4
    keep = mask_to_keep(m)
    np.testing.assert_array_equal(keep, ~m)
    for encoded in (keep, keep.astype(np.int64), keep.astype(np.float32), keep.astype(np.uint8)):
        back = mask_from_keep(encoded)
        assert back.dtype == bool and back.shape == shape
        np.testing.assert_array_equal(back, m)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("fill", [-np.inf, -1e4, -3e4])
def test_additive_round_trips_and_keeps_dtype(rng, dtype, fill):
    m = rng.random((2, 1, 5, 5)) < 0.5
    add = mask_to_additive(m, dtype, fill)
    assert add.dtype == dtype and add.shape == m.shape
    assert np.all(add[~m] == 0) and np.all(add[m] == dtype(fill))
    np.testing.assert_array_equal(mask_from_additive(add), m)


def test_additive_large_fills_in_wide_dtypes(rng):
    m = rng.random((3, 4)) < 0.5
    for dtype in (np.float32, np.float64):
        for fill in (-1e6, -1e9, np.finfo(dtype).min):
            add = mask_to_additive(m, dtype, fill)
            assert add.dtype == dtype
            np.testing.assert_array_equal(mask_from_additive(add), m)


def test_additive_minus_inf_gives_exactly_the_boolean_weights(rng):
    m = causal_mask(6) | padding_mask([6, 3], 6)
    for dtype in (np.float32, np.float64):
        scores = rng.standard_normal((2, 3, 6, 6)).astype(dtype)
        via_additive = softmax(scores + mask_to_additive(m, dtype))
        assert via_additive.dtype == dtype
        np.testing.assert_array_equal(via_additive, softmax(np.where(m, -np.inf, scores)))


def test_additive_threshold_is_minus_1e4():
    np.testing.assert_array_equal(mask_from_additive(np.array([0.0, -1e4, -np.inf])),
                                  [False, True, True])
    with pytest.raises(ValueError, match="additive of shape"):
        mask_from_additive(np.array([0.0, -9999.0]))


@pytest.mark.parametrize("lengths", [[3, 0, 5], [5, 5], [0], [1, 2, 3, 4, 5]])
def test_lengths_round_trip(lengths):
    lengths = np.array(lengths)
    pm = padding_mask(lengths, 5)
    np.testing.assert_array_equal(lengths_from_padding_mask(pm), lengths)
    np.testing.assert_array_equal(lengths_from_padding_mask(pm[:, 0, 0]), lengths)
    np.testing.assert_array_equal(padding_mask(lengths_from_padding_mask(pm), 5), pm)


# ── bad input ────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("call,match", [
    (lambda: causal_mask(0), r"T \(the sequence length\) must be a positive int, got T=0"),
    (lambda: causal_mask(3.0), "got T=3.0"),
    (lambda: causal_mask(True), "got T=True"),
    (lambda: padding_mask([1, 2], 0), "T .* must be a positive int"),
    (lambda: padding_mask([[1, 2]], 4), r"lengths must be integers of shape \(B,\), got shape \(1, 2\)"),
    (lambda: padding_mask(np.array([1.0]), 4), "dtype float64"),
    (lambda: padding_mask([True, False], 4), "dtype bool"),
    (lambda: padding_mask([5], 4), r"lengths must lie in 0 .. T=4, got \[5\]"),
    (lambda: padding_mask([-1], 4), r"got \[-1\]"),
    (lambda: padding_mask_from_tokens(np.zeros(4, int), 0), r"shape \(B, T\), got shape \(4,\)"),
    (lambda: padding_mask_from_tokens(np.zeros((2, 4)), 0), "dtype float64"),
    (lambda: mask_from_keep(np.array([0, 1, 2])), "keep must hold True/False or 1/0 only"),
    (lambda: mask_from_keep(np.array([0.5, 1.0])), r"shape \(2,\)"),
    (lambda: mask_from_keep(np.array(["1", "0"])), "dtype <U1"),
    (lambda: mask_to_keep(np.array([0, 1])), "mask must be boolean .* got dtype int64"),
    (lambda: mask_to_additive(np.array([0, 1]), np.float32), "mask must be boolean"),
    (lambda: mask_to_additive(np.array([True]), np.int32), "dtype must be a float type .* int32"),
    (lambda: mask_to_additive(np.array([True]), np.float32, 0.0), "fill must be negative"),
    (lambda: mask_to_additive(np.array([True]), np.float32, 5.0), "fill=5.0"),
    (lambda: mask_to_additive(np.array([True]), np.float16, -1e9), "fit in float16"),
    (lambda: mask_to_additive(np.array([True]), np.float32, np.nan), "fill must be negative"),
    (lambda: mask_from_additive(np.array([0, -1])), "additive must be a float array"),
    (lambda: mask_from_additive(np.array([0.0, 1.0])), r"values such as \[1.\]"),
    (lambda: mask_from_additive(np.array([0.0, np.nan])), "additive of shape"),
    (lambda: lengths_from_padding_mask(np.array([[0, 1]])), "mask must be boolean"),
    (lambda: lengths_from_padding_mask(np.zeros((2, 1, 3, 3), bool)),
     r"\(B, 1, 1, T\) or \(B, T\), got \(2, 1, 3, 3\)"),
    (lambda: lengths_from_padding_mask(np.array([[True, False, False]])),
     r"mask of shape \(1, 3\): rows \[0\] are not 'real tokens, then padding'"),
])
def test_bad_input_raises_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_keep_mask_passed_as_blocked_mask_silently_looks_ahead(rng):
    """The pitfall the notebook shows: no error, but only the future is visible."""
    Q, K, V = (rng.standard_normal((4, 3)) for _ in range(3))
    _, w = scaled_dot_product_attention(Q, K, V, mask=mask_to_keep(causal_mask(4)))
    assert np.all(np.tril(w) == 0) and np.all(w[-1] == 0)
    _, w_right = scaled_dot_product_attention(Q, K, V, mask=mask_from_keep(~causal_mask(4)))
    assert np.all(np.triu(w_right, 1) == 0)
