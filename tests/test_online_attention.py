"""online_attention (notebook 08) against scaled_dot_product_attention (notebook 01), and the
cost explorer driven in-kernel."""

import math
import tracemalloc

import numpy as np
import pytest

from helpers import widgets as tw
from helpers.transformer import (
    causal_mask,
    online_attention,
    padding_mask,
    scaled_dot_product_attention,
)

TOL = {np.float32: 1e-6, np.float64: 1e-12}
B, H, T, D = 2, 3, 37, 8  # T = 37 is prime: no block size below it divides it


def qkv(rng, dtype, T_q=T, T_k=T, d_v=5):
    Q = rng.standard_normal((B, H, T_q, D)).astype(dtype)
    K = rng.standard_normal((B, H, T_k, D)).astype(dtype)
    V = rng.standard_normal((B, H, T_k, d_v)).astype(dtype)
    return Q, K, V


def make_mask(kind, rng, T_q=T, T_k=T):
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(T)  # (T, T)
    if kind == "padding":
        return padding_mask(np.array([T_k, 20]), T_k)  # (B, 1, 1, T_k)
    if kind == "combined":
        return causal_mask(T) | padding_mask(np.array([30, 11]), T)  # (B, 1, T, T)
    if kind == "random":
        return rng.random((B, H, T_q, T_k)) < 0.6  # (B, h, T_q, T_k)
    if kind == "fully blocked rows":
        mask = rng.random((B, 1, T_q, T_k)) < 0.3
        mask[:, :, [0, 5, T_q - 1], :] = True  # these queries see nothing
        return mask
    raise ValueError(kind)


MASK_KINDS = ["none", "causal", "padding", "combined", "random", "fully blocked rows"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("block_size", [1, 4, 7, 16, 37, 64])
def test_equals_plain_attention_for_every_mask_kind(dtype, kind, block_size):
    rng = np.random.default_rng([block_size, MASK_KINDS.index(kind)])
    Q, K, V = qkv(rng, dtype)
    mask = make_mask(kind, rng)
    expected, _ = scaled_dot_product_attention(Q, K, V, mask)
    with np.errstate(all="raise"):  # no overflow, no 0/0, no inf - inf anywhere
        out = online_attention(Q, K, V, mask, block_size=block_size)
    assert out.dtype == dtype and out.shape == expected.shape
    assert np.all(np.isfinite(out))
    # each output is a weighted average of rows of V: compare on the scale of V
    np.testing.assert_allclose(out, expected, rtol=0, atol=TOL[dtype] * np.abs(V).max())


def test_fully_blocked_rows_give_zero_output():
    rng = np.random.default_rng(1)
    Q, K, V = qkv(rng, np.float64)
    mask = make_mask("fully blocked rows", rng)
    out = online_attention(Q, K, V, mask, block_size=8)
    assert np.array_equal(out[:, :, [0, 5, T - 1]], np.zeros_like(out[:, :, [0, 5, T - 1]]))
    everything = online_attention(Q, K, V, np.ones((T, T), dtype=bool), block_size=8)
    assert np.array_equal(everything, np.zeros_like(everything))


def test_cross_attention_shapes_and_broadcast_batch_axes():
    rng = np.random.default_rng(2)
    Q = rng.standard_normal((5, D))  # (T_q, d_k), no batch axes: broadcast against K, V
    K = rng.standard_normal((B, H, 13, D))  # (B, h, T_k, d_k)
    V = rng.standard_normal((B, H, 13, 4))
    mask = padding_mask(np.array([13, 6]), 13)  # (B, 1, 1, T_k)
    out = online_attention(Q, K, V, mask, block_size=3)
    assert out.shape == (B, H, 5, 4)
    np.testing.assert_allclose(out, scaled_dot_product_attention(Q, K, V, mask)[0], atol=1e-12)


def test_mask_that_broadcasts_along_the_key_axis():
    """A (B, 1, T_q, 1) mask blocks whole queries; it must be sliced per block correctly."""
    rng = np.random.default_rng(3)
    Q, K, V = qkv(rng, np.float64)
    mask = np.zeros((B, 1, T, 1), dtype=bool)
    mask[1, 0, 4] = True
    out = online_attention(Q, K, V, mask, block_size=10)
    np.testing.assert_allclose(out, scaled_dot_product_attention(Q, K, V, mask)[0], atol=1e-12)
    assert np.all(out[1, :, 4] == 0) and np.any(out[0, :, 4] != 0)


def test_large_negative_scores_after_a_fully_blocked_block():
    """The running maximum must stay -inf while nothing was seen; a placeholder 0 would make
    exp(score - 0) underflow for scores near -1000 and return zeros."""
    rng = np.random.default_rng(4)
    Q, K, V = rng.standard_normal((4, D)), rng.standard_normal((10, D)), rng.standard_normal((10, 3))
    Q[:, 0], K[:, 0] = -40.0, 100.0  # every score is about -40 * 100 / sqrt(8) = -1414
    mask = np.zeros((4, 10), dtype=bool)
    mask[:, :3] = True  # the first block (3 keys) is entirely blocked
    out = online_attention(Q, K, V, mask, block_size=3)
    expected, _ = scaled_dot_product_attention(Q, K, V, mask)
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_against_an_independent_scalar_computation():
    """Softmax-weighted sums written out with the math module, one query at a time."""
    rng = np.random.default_rng(5)
    Q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((6, 4)), rng.standard_normal((6, 2))
    mask = causal_mask(6)[:3]  # (3, 6): query i sees keys 0..i
    out = online_attention(Q, K, V, mask, block_size=4)
    for i in range(3):
        scores = [sum(Q[i, c] * K[j, c] for c in range(4)) / 2.0 for j in range(i + 1)]
        weights = [math.exp(s - max(scores)) for s in scores]
        expect = [sum(w * V[j, c] for j, w in enumerate(weights)) / sum(weights) for c in range(2)]
        np.testing.assert_allclose(out[i], expect, atol=1e-12)


def test_block_size_does_not_change_the_result():
    rng = np.random.default_rng(6)
    Q, K, V = qkv(rng, np.float64)
    outs = [online_attention(Q, K, V, causal_mask(T), block_size=b) for b in (1, 2, 5, 36, 37, 99)]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], atol=1e-13)


def test_dtypes():
    rng = np.random.default_rng(7)
    Q, K, V = qkv(rng, np.float32)
    assert online_attention(Q, K, V).dtype == np.float32
    assert online_attention(Q, K, V.astype(np.float64)).dtype == np.float64
    ints = np.arange(12).reshape(3, 4)
    out = online_attention(ints, ints, ints, block_size=2)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, scaled_dot_product_attention(ints, ints, ints)[0], atol=1e-12)


def test_memory_grows_with_the_block_not_with_the_square():
    """tracemalloc sees NumPy's arrays: the peak stays far below one (T_q, T_k) score matrix."""
    rng = np.random.default_rng(8)
    n, d = 2048, 16
    Q, K, V = (rng.standard_normal((n, d)) for _ in range(3))
    mask = causal_mask(n)  # n x n booleans, made before measuring
    tracemalloc.start()
    try:
        online_attention(Q, K, V, mask, block_size=64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    scores_bytes = n * n * 8
    block_bytes = n * 64 * 8
    assert peak < scores_bytes / 8, (peak, scores_bytes)
    assert peak >= block_bytes  # it does hold one block of scores
    tracemalloc.start()
    try:
        scaled_dot_product_attention(Q, K, V)
        plain_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert plain_peak >= 2 * scores_bytes  # scores and weights (and temporaries) at once


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_size": 0}, "block_size must be a positive int, got block_size=0"),
        ({"block_size": 2.5}, "block_size must be a positive int"),
        ({"block_size": True}, "block_size must be a positive int"),
        ({"mask": np.zeros((T, T))}, "mask must be boolean"),
        ({"mask": np.zeros((3, T), dtype=bool)}, r"mask of shape \(3, 37\) cannot broadcast"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, match):
    rng = np.random.default_rng(9)
    Q, K, V = qkv(rng, np.float64)
    with pytest.raises(ValueError, match=match):
        online_attention(Q, K, V, **kwargs)


def test_bad_shapes_raise_clear_errors():
    Q, K, V = np.zeros((4, 8)), np.zeros((6, 8)), np.zeros((6, 3))
    with pytest.raises(ValueError, match="Q and K must share d_k"):
        online_attention(Q, np.zeros((6, 7)), V)
    with pytest.raises(ValueError, match="K and V must have the same number of keys"):
        online_attention(Q, K, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="rank >= 2"):
        online_attention(np.zeros(8), K, V)


# ── the cost explorer, driven in-kernel ──────────────────────────────────────────────────────


def test_cost_explorer_computes_memory_operations_and_times():
    ex = tw.cost_explorer()
    assert ex.last_error is None
    ex.controls["n"].value = 128
    ex.controls["d_k"].value = 32
    ex.controls["block"].value = 16
    r = ex.result
    assert ex.last_error is None
    assert r["bytes"] == {"plain": 128 * 128 * 4, "online": 128 * 16 * 4}
    assert r["flops"] == 4 * 128 * 128 * 32
    assert set(r["ms"]) == {"plain", "online"} and all(t > 0 for t in r["ms"].values())
    assert r["max_diff"] < 1e-6
    assert "0.0655 MB plain, 0.00819 MB online (8x less)" in ex.status.value
    assert 'data-control="n">128</span>' in ex.status.value


def test_cost_explorer_block_larger_than_n_holds_the_whole_matrix():
    ex = tw.cost_explorer()
    png = ex.image.value
    ex.controls["n"].value = 32
    ex.controls["block"].value = 256
    assert ex.result["bytes"]["online"] == ex.result["bytes"]["plain"] == 32 * 32 * 4
    assert "(1x less)" in ex.status.value and ex.image.value != png
