"""Notebook 02: split/merge and MultiHeadAttention against a loop of single heads, and properties."""

import numpy as np
import pytest

from helpers.transformer import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from tests.reference import loop_mha, randomise


def test_split_merge_round_trip_and_slices(rng):
    x = rng.standard_normal((2, 5, 12))  # B, T, h*d_k all different
    s = split_heads(x, 4)
    assert s.shape == (2, 4, 5, 3)
    np.testing.assert_array_equal(s[1, 2], x[1, :, 6:9])
    np.testing.assert_array_equal(merge_heads(s), x)
    np.testing.assert_array_equal(merge_heads(split_heads(x[0], 3)), x[0])


def test_reshape_only_merge_is_wrong():
    x = np.arange(2 * 5 * 12).reshape(2, 5, 12)
    assert not np.array_equal(split_heads(x, 4).reshape(2, 5, 12), x)


@pytest.mark.parametrize("shape,h", [((5, 12), 4), ((2, 5, 12), 4), ((2, 3, 5, 12), 2), ((1, 7, 8), 8)])
def test_forward_matches_loop_over_heads(rng, shape, h):
    layer = randomise(MultiHeadAttention(shape[-1], h, rng), rng)
    x = rng.standard_normal(shape)
    out = layer.forward(x, x, x)
    assert out.shape == shape and layer.weights.shape == (*shape[:-2], h, shape[-2], shape[-2])
    np.testing.assert_allclose(out, loop_mha(layer, x, x, x), atol=1e-12)


def test_cross_attention_shapes_and_values(rng):
    layer = randomise(MultiHeadAttention(16, 4, rng), rng)
    q, kv = rng.standard_normal((3, 2, 16)), rng.standard_normal((3, 6, 16))
    out = layer.forward(q, kv, kv)
    assert out.shape == (3, 2, 16) and layer.weights.shape == (3, 4, 2, 6)
    np.testing.assert_allclose(out, loop_mha(layer, q, kv, kv), atol=1e-12)
    np.testing.assert_allclose(layer.weights.sum(-1), 1.0, atol=1e-12)


def test_head_isolation_gives_exactly_that_heads_contribution(rng):
    layer = randomise(MultiHeadAttention(12, 3, rng), rng)
    x = rng.standard_normal((2, 4, 12))
    for i in range(3):
        iso = MultiHeadAttention(12, 3, rng)
        iso.load_parameters(layer.parameters())
        keep = np.arange(12) // 4 == i
        iso.W_o[~keep] = 0
        c = slice(4 * i, 4 * (i + 1))
        head_i = scaled_dot_product_attention(
            x @ layer.W_q[:, c] + layer.b_q[c], x @ layer.W_k[:, c] + layer.b_k[c],
            x @ layer.W_v[:, c] + layer.b_v[c])[0]
        np.testing.assert_allclose(iso.forward(x, x, x), head_i @ layer.W_o[c] + layer.b_o,
                                   atol=1e-12)


def test_heads_sum_to_the_output(rng):
    layer = randomise(MultiHeadAttention(12, 3, rng), rng)
    x = rng.standard_normal((4, 12))
    total = -2 * layer.b_o  # three isolated outputs each include b_o once
    for i in range(3):
        iso = MultiHeadAttention(12, 3, rng)
        iso.load_parameters(layer.parameters())
        iso.W_o[np.arange(12) // 4 != i] = 0
        total = total + iso.forward(x, x, x)
    np.testing.assert_allclose(total, layer.forward(x, x, x), atol=1e-12)


def test_permutation_properties(rng):
    layer = randomise(MultiHeadAttention(8, 2, rng), rng)
    x, kv = rng.standard_normal((5, 8)), rng.standard_normal((6, 8))
    p = rng.permutation(6)
    np.testing.assert_allclose(layer.forward(x, kv[p], kv[p]), layer.forward(x, kv, kv), atol=1e-12)
    q = rng.permutation(5)  # self-attention is permutation-equivariant without positions
    np.testing.assert_allclose(layer.forward(x[q], x[q], x[q]), layer.forward(x, x, x)[q], atol=1e-12)


def test_mask_with_input_rank_gets_a_head_axis(rng):
    layer = MultiHeadAttention(8, 2, rng)
    x = rng.standard_normal((2, 4, 8))
    causal = np.triu(np.ones((4, 4), bool), 1)
    per_batch = np.broadcast_to(causal, (2, 4, 4))
    a = layer.forward(x, x, x, mask=per_batch)
    b = layer.forward(x, x, x, mask=causal)
    np.testing.assert_allclose(a, b, atol=1e-12)
    assert np.all(layer.weights[..., causal] == 0)
    np.testing.assert_allclose(a, loop_mha(layer, x, x, x, causal), atol=1e-12)


def test_parameters_and_loading(rng):
    layer = MultiHeadAttention(8, 2, rng)
    params = layer.parameters()
    assert list(params) == ["W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o"]
    assert params["W_q"] is layer.W_q, "parameters() returns the live arrays (for optimisers)"
    other = MultiHeadAttention(8, 2, np.random.default_rng(99))
    other.load_parameters(params)
    x = rng.standard_normal((3, 8))
    np.testing.assert_array_equal(other.forward(x, x, x), layer.forward(x, x, x))
    assert other.W_q is not layer.W_q, "load_parameters copies"
    with pytest.raises(ValueError, match=r"parameter names differ"):
        other.load_parameters({"W_q": params["W_q"]})
    with pytest.raises(ValueError, match=r"W_o: expected shape \(8, 8\), got \(8, 4\)"):
        other.load_parameters({**params, "W_o": np.zeros((8, 4))})


def test_initialisation_is_explicit_and_reproducible():
    a = MultiHeadAttention(16, 4, np.random.default_rng(3))
    b = MultiHeadAttention(16, 4, np.random.default_rng(3))
    for name, value in a.parameters().items():
        np.testing.assert_array_equal(value, b.parameters()[name])
    assert np.all(a.b_q == 0) and abs(a.W_q.std() - 1 / 4) < 0.05


def test_float32_layer_stays_float32(rng):
    layer = MultiHeadAttention(8, 2, rng, dtype=np.float32)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    out = layer.forward(x, x, x, mask=np.zeros((3, 3), bool))
    assert out.dtype == np.float32 and layer.weights.dtype == np.float32


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda m, x: MultiHeadAttention(10, 3, np.random.default_rng(0)), r"d_model=10.*n_heads=3"),
        (lambda m, x: MultiHeadAttention(8, 0, np.random.default_rng(0)), r"n_heads=0"),
        (lambda m, x: m.forward(x[..., :4], x, x), r"query must have shape \(\.\.\., T, d_model=8\), got \(2, 3, 4\)"),
        (lambda m, x: m.forward(x, x, x[:, :2]), r"key \(2, 3, 8\) and value \(2, 2, 8\)"),
        (lambda m, x: m.forward(x[0, 0], x, x), r"query must have shape"),
        (lambda m, x: m.forward(x, x, x, mask=np.zeros((3, 2), bool)), r"mask of shape"),
        (lambda m, x: split_heads(x, 3), r"d_model=8 .* not divisible by n_heads=3"),
    ],
)
def test_bad_input(rng, call, match):
    layer = MultiHeadAttention(8, 2, rng)
    with pytest.raises(ValueError, match=match):
        call(layer, rng.standard_normal((2, 3, 8)))
