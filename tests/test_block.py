"""Notebook 05: LayerNorm, FeedForward, EncoderBlock (Post-LN and Pre-LN), Stack, block stages
(the block explorer: tests/test_widgets.py, section 05)."""

import numpy as np
import pytest

from helpers import widgets as tw
from helpers.analysis import block_stages
from helpers.module import set_parameters
from helpers.transformer import (
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    Stack,
)
from tests.reference import loop_mha, randomise

# ── independent reference implementations (plain loops / textbook formulas) ─────────────────


def ln_reference(x, gamma, beta, eps=1e-5):
    out = np.empty_like(x, dtype=float)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        mu = sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        out[idx] = [(v - mu) / np.sqrt(var + eps) * g + b for v, g, b in zip(row, gamma, beta)]
    return out


def mha_reference(layer, x, mask=None):
    return loop_mha(layer, x, x, x, mask)


def ffn_reference(ffn, x):
    return np.maximum(0.0, x @ ffn.W_1 + ffn.b_1) @ ffn.W_2 + ffn.b_2


def block_reference(block, x, mask=None):
    def ln(n, v):
        return ln_reference(v, n.gamma, n.beta)
    if block.norm_first:
        x = x + mha_reference(block.self_attn, ln(block.norm1, x), mask)
        return x + ffn_reference(block.ffn, ln(block.norm2, x))
    x = ln(block.norm1, x + mha_reference(block.self_attn, x, mask))
    return ln(block.norm2, x + ffn_reference(block.ffn, x))


# ── LayerNorm ────────────────────────────────────────────────────────────────────────────────


def test_layernorm_closed_form_by_hand():
    x = np.array([[1.0, 2.0, 3.0, 6.0], [5.0, 5.0, 5.0, 5.0]])
    out = LayerNorm(4).forward(x)
    expected = np.array([-2.0, -1.0, 0.0, 3.0]) / np.sqrt(3.5 + 1e-5)  # mean 3, var 14/4
    np.testing.assert_allclose(out[0], expected, rtol=1e-14)
    np.testing.assert_array_equal(out[1], np.zeros(4))  # constant row: zeros, not nan


def test_layernorm_matches_a_loop_reference_with_random_gamma_beta(rng):
    ln = randomise(LayerNorm(7), rng)
    x = rng.standard_normal((2, 3, 7)) * 3 + 1
    np.testing.assert_allclose(ln.forward(x), ln_reference(x, ln.gamma, ln.beta), atol=1e-12)


def test_layernorm_standardises_each_position_and_uses_eps_inside_the_root(rng):
    x = rng.standard_normal((4, 9, 64)) * rng.uniform(0.5, 20, (4, 9, 1)) + rng.normal(0, 5, (4, 9, 1))
    y = LayerNorm(64).forward(x)
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.std(-1), np.sqrt(x.var(-1) / (x.var(-1) + 1e-5)), atol=1e-12)
    row = rng.standard_normal(64)
    row = (row - row.mean()) / row.std() * 1e-3  # std exactly 1e-3
    assert LayerNorm(64).forward(row).std() == pytest.approx(1e-3 / np.sqrt(1e-6 + 1e-5), rel=1e-9)
    assert LayerNorm(64, eps=0.0).forward(row).std() == pytest.approx(1.0, rel=1e-9)


def test_layernorm_uses_population_variance_not_ddof1(rng):
    x = rng.standard_normal((5, 4))
    ddof1 = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + 1e-5)
    assert np.abs(LayerNorm(4).forward(x) - ddof1).max() > 0.05


def test_layernorm_gamma_beta_dtype_and_errors(rng):
    ln = LayerNorm(8)
    assert ln.gamma.tolist() == [1.0] * 8 and ln.beta.tolist() == [0.0] * 8
    ln.load_parameters({"gamma": np.full(8, 3.0), "beta": np.full(8, -1.0)})
    y = ln.forward(rng.standard_normal((5, 8)))
    np.testing.assert_allclose(y.mean(-1), -1.0, atol=1e-12)
    np.testing.assert_allclose(y.std(-1), 3.0, rtol=1e-4)
    out32 = LayerNorm(8, dtype=np.float32).forward(rng.standard_normal((3, 8)).astype(np.float32))
    assert out32.dtype == np.float32
    with pytest.raises(ValueError, match=r"d_model=8.*got \(3, 7\)"):
        ln.forward(np.zeros((3, 7)))
    with pytest.raises(ValueError, match="got \\(\\)"):
        ln.forward(np.float64(1.0))


# ── FeedForward ──────────────────────────────────────────────────────────────────────────────


def test_ffn_matches_reference_and_per_position_loop(rng):
    ffn = randomise(FeedForward(16, 64, rng), rng)
    x = rng.standard_normal((3, 5, 16))
    out = ffn.forward(x)
    assert out.shape == (3, 5, 16)
    np.testing.assert_allclose(out, ffn_reference(ffn, x), atol=1e-12)
    loop = np.array([[ffn.forward(x[b, t]) for t in range(5)] for b in range(3)])
    np.testing.assert_allclose(out, loop, atol=1e-12)


def test_ffn_never_mixes_positions(rng):
    ffn = randomise(FeedForward(16, 64, rng), rng)
    x = rng.standard_normal((2, 6, 16))
    x2 = x.copy()
    x2[:, 3] += 5.0
    change = np.abs(ffn.forward(x2) - ffn.forward(x)).max(axis=-1)  # (2, 6)
    assert np.all(change[:, [0, 1, 2, 4, 5]] == 0) and np.all(change[:, 3] > 0)


def test_ffn_relu_is_really_applied(rng):
    ffn = FeedForward(4, 8, rng)
    ffn.load_parameters({"W_1": -np.eye(4, 8), "b_1": np.zeros(8), "W_2": np.eye(8, 4),
                         "b_2": np.zeros(4)})
    x = np.array([1.0, -2.0, 3.0, -4.0])
    np.testing.assert_array_equal(ffn.forward(x), [0.0, 2.0, 0.0, 4.0])


def test_ffn_is_a_sum_of_values_weighted_by_key_matches(rng):
    """Geva et al. (2021): the columns of W_1 are keys, the rows of W_2 values (notebook 05)."""
    ffn = randomise(FeedForward(8, 32, rng), rng)
    x = rng.standard_normal((3, 5, 8))
    memory = sum(np.maximum(0, x @ ffn.W_1[:, i:i + 1] + ffn.b_1[i]) * ffn.W_2[i] for i in range(32))
    np.testing.assert_allclose(memory + ffn.b_2, ffn.forward(x), atol=1e-12)


def test_ffn_shapes_dtype_and_errors(rng):
    ffn = FeedForward(16, 64, rng, dtype=np.float32)
    assert {k: v.shape for k, v in ffn.parameters().items()} == {
        "W_1": (16, 64), "b_1": (64,), "W_2": (64, 16), "b_2": (16,)}
    assert ffn.forward(np.ones((2, 16), np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match=r"d_model=16.*got \(2, 3, 15\)"):
        ffn.forward(np.zeros((2, 3, 15)))


# ── EncoderBlock ─────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("shape", [(5, 16), (2, 5, 16), (2, 3, 4, 16)])
def test_block_matches_independent_reference(rng, norm_first, shape):
    block = randomise(EncoderBlock(16, 4, 32, rng, norm_first=norm_first), rng)
    x = rng.standard_normal(shape)
    out = block.forward(x)
    assert out.shape == shape
    np.testing.assert_allclose(out, block_reference(block, x), atol=1e-10)


def test_post_and_pre_ln_differ_with_the_same_weights(rng):
    post = randomise(EncoderBlock(16, 4, 32, rng), rng)
    pre = EncoderBlock(16, 4, 32, rng, norm_first=True)
    pre.load_parameters(post.parameters())
    x = rng.standard_normal((2, 5, 16))
    assert np.abs(post.forward(x) - pre.forward(x)).max() > 0.1


def test_post_ln_output_is_normalised_and_pre_ln_is_not(rng):
    x = rng.standard_normal((3, 7, 32)) * 4 + 2
    post = EncoderBlock(32, 4, 128, rng).forward(x)
    np.testing.assert_allclose(post.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(post.std(-1), 1, atol=1e-4)
    pre = EncoderBlock(32, 4, 128, rng, norm_first=True).forward(x)
    assert np.abs(pre.mean(-1)).max() > 0.5


def test_block_is_permutation_equivariant(rng):
    block = randomise(EncoderBlock(16, 2, 32, rng), rng)
    x = rng.standard_normal((2, 6, 16))
    perm = np.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_allclose(block.forward(x[:, perm]), block.forward(x)[:, perm], atol=1e-12)


def test_block_passes_the_mask_to_attention(rng):
    block = randomise(EncoderBlock(16, 4, 32, rng), rng)
    x = rng.standard_normal((2, 6, 16))
    causal = np.triu(np.ones((6, 6), dtype=bool), k=1)
    x2 = x.copy()
    x2[:, -1] += 3.0
    assert np.abs(block.forward(x2, causal) - block.forward(x, causal))[:, :-1].max() < 1e-12
    assert np.abs(block.forward(x2) - block.forward(x))[:, :-1].max() > 1e-3
    np.testing.assert_allclose(block.forward(x, causal), block_reference(block, x, causal), atol=1e-10)


def test_block_parameters_names_and_paper_count(rng):
    block = EncoderBlock(512, 8, 2048, rng)
    params = block.parameters()
    assert list(params)[:2] == ["self_attn.W_q", "self_attn.b_q"]
    assert {"ffn.W_1", "ffn.b_2", "norm1.gamma", "norm2.beta"} <= set(params)
    assert params["ffn.W_1"] is block.ffn.W_1  # the arrays themselves
    assert sum(p.size for p in params.values()) == 3_152_384
    d, d_ff = 512, 2048
    assert 3_152_384 == 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 2 * 2 * d
    # the paper's block: no biases in the attention projections (b_q, b_k, b_v, b_o)
    biases = sum(params[f"self_attn.b_{n}"].size for n in "qkvo")
    assert 3_152_384 - biases == 4 * d * d + 2 * d * d_ff + d_ff + d + 2 * 2 * d == 3_150_336


def test_load_parameters_round_trip_copies_and_is_atomic(rng):
    a = randomise(EncoderBlock(16, 4, 32, rng), rng)
    b = EncoderBlock(16, 4, 32, rng)
    b.load_parameters(a.parameters())
    x = rng.standard_normal((5, 16))
    np.testing.assert_array_equal(a.forward(x), b.forward(x))
    a.ffn.W_1[0, 0] += 1.0
    assert b.ffn.W_1[0, 0] != a.ffn.W_1[0, 0], "load_parameters must copy"

    before = {k: v.copy() for k, v in b.parameters().items()}
    bad = {**a.parameters(), "norm2.beta": np.zeros(15)}
    with pytest.raises(ValueError, match=r"norm2.beta: expected shape \(16,\), got \(15,\)"):
        b.load_parameters(bad)
    for k, v in b.parameters().items():
        np.testing.assert_array_equal(v, before[k])  # nothing was half-loaded
    with pytest.raises(ValueError, match=r"missing \['ffn.b_1'\], unexpected \['ffn.bias'\]"):
        params = a.parameters()
        params["ffn.bias"] = params.pop("ffn.b_1")
        b.load_parameters(params)


def test_block_dtype_and_bad_input(rng):
    block = EncoderBlock(16, 4, 32, rng, dtype=np.float32)
    assert all(p.dtype == np.float32 for p in block.parameters().values())
    assert block.forward(np.ones((3, 16), np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match=r"rank >= 2, got \(16,\)"):
        block.forward(np.ones(16))
    with pytest.raises(ValueError, match=r"d_model=16.*got \(2, 3, 12\)"):
        block.forward(np.ones((2, 3, 12)))
    with pytest.raises(ValueError, match="multiple of n_heads"):
        EncoderBlock(16, 3, 32, rng)


# ── Stack (the encoder: a stack of blocks) ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_is_its_blocks_in_sequence(rng, norm_first):
    enc = randomise(Stack(EncoderBlock, 3, 16, 4, 32, rng, norm_first=norm_first), rng)
    x = rng.standard_normal((2, 5, 16))
    h = x
    for layer in enc.layers:
        h = block_reference(layer, h)
    if norm_first:
        h = ln_reference(h, enc.norm.gamma, enc.norm.beta)
    np.testing.assert_allclose(enc.forward(x), h, atol=1e-10)
    assert len({id(layer.ffn.W_1) for layer in enc.layers}) == 3, "each block has its own weights"


def test_stack_parameters_and_errors(rng):
    post, pre = Stack(EncoderBlock, 2, 8, 2, 16, rng), Stack(EncoderBlock, 2, 8, 2, 16, rng, norm_first=True)
    block_size = sum(p.size for p in post.layers[0].parameters().values())
    assert sum(p.size for p in post.parameters().values()) == 2 * block_size
    assert sum(p.size for p in pre.parameters().values()) == 2 * block_size + 16
    assert "layers.1.norm2.gamma" in post.parameters() and "norm.beta" in pre.parameters()
    assert post.norm is None and "norm.gamma" not in post.parameters()
    other = randomise(Stack(EncoderBlock, 2, 8, 2, 16, rng), rng)
    post.load_parameters(other.parameters())  # dotted names with list indices
    x = rng.standard_normal((4, 8))
    np.testing.assert_array_equal(post.forward(x), other.forward(x))
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="n_layers must be a positive int"):
            Stack(EncoderBlock, bad, 8, 2, 16, rng)


def test_residual_stream_post_ln_fixed_pre_ln_grows(rng):
    d = 64
    post = Stack(EncoderBlock, 4, d, 4, 4 * d, rng)
    pre = Stack(EncoderBlock, 4, d, 4, 4 * d, rng, norm_first=True)
    for mine, theirs in zip(pre.layers, post.layers):
        mine.load_parameters(theirs.parameters())
    x = rng.standard_normal((1, 10, d))
    hp, hq, norms = x, x, []
    for a, b in zip(post.layers, pre.layers):
        hp, hq = a.forward(hp), b.forward(hq)
        np.testing.assert_allclose(np.linalg.norm(hp, axis=-1), np.sqrt(d), rtol=1e-4)
        norms.append(np.linalg.norm(hq, axis=-1).mean())
    assert np.all(np.diff(norms) > 0)
    np.testing.assert_allclose(np.linalg.norm(pre.forward(x), axis=-1), np.sqrt(d), rtol=1e-4)


def jacobian(fn, x, e=1e-5):  # notebook 05's: central differences, all columns in one batch
    steps = (np.eye(x.size) * e).reshape(x.size, *x.shape)
    return ((fn(x + steps) - fn(x - steps)) / (2 * e)).reshape(x.size, -1).T


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradient_through_blocks_by_differences_equals_backward(rng, norm_first):
    """Notebook 05 measures the gradient through a stack by finite differences; notebook 07's
    backward gives the same J^T g."""
    stack = randomise(Stack(EncoderBlock, 3, 8, 2, 16, rng, norm_first=norm_first), rng)
    x, g = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    J = jacobian(stack.forward, x)
    stack.forward(x)
    d_x, _ = stack.backward(g)
    np.testing.assert_allclose(d_x.ravel(), J.T @ g.ravel(), rtol=1e-6, atol=1e-8)


def test_residual_connection_passes_the_gradient_back_unchanged(rng):
    """The Jacobian of x + F(x) is I + J_F; without the skip, the gradient fades through depth."""
    blocks = [EncoderBlock(16, 2, 64, rng) for _ in range(12)]
    x = rng.standard_normal((4, 16))
    J = jacobian(lambda z: z + blocks[0].ffn.forward(z), x)
    np.testing.assert_allclose(J - np.eye(x.size), jacobian(blocks[0].ffn.forward, x), atol=1e-8)
    size = {}
    for skip in (0, 1):
        h, G = x, np.eye(x.size)
        for b in blocks:
            def step(z, b=b, skip=skip):
                z = skip * z + b.self_attn.forward(z, z, z)
                return skip * z + b.ffn.forward(z)
            G, h = jacobian(step, h) @ G, step(h)
        size[skip] = np.linalg.norm(G) / np.sqrt(x.size)
    assert size[0] < 0.05 < 10 < size[1]  # no skips: fades; skips, no norm: grows


def test_set_parameters_works_on_plain_modules(rng):
    mha = MultiHeadAttention(8, 2, rng)
    new = {k: np.full(v.shape, 0.5) for k, v in mha.parameters().items()}
    set_parameters(mha, new)
    assert np.all(mha.W_o == 0.5)


# ── the stages the block explorer shows (the explorer itself: tests/test_widgets.py) ─────────


def test_block_stages_follow_each_order(rng):
    post = randomise(EncoderBlock(16, 4, 32, rng), rng)
    pre = EncoderBlock(16, 4, 32, rng, norm_first=True)
    pre.load_parameters(post.parameters())
    x = rng.standard_normal((5, 16))
    s = block_stages(post, x)
    assert len(s) == len(tw.POST_LN_STAGES) == 7
    np.testing.assert_allclose(s[1], mha_reference(post.self_attn, x), atol=1e-12)
    np.testing.assert_allclose(s[3], ln_reference(x + s[1], post.norm1.gamma, post.norm1.beta),
                               atol=1e-12)
    np.testing.assert_array_equal(s[-1], post.forward(x))
    p = block_stages(pre, x)
    np.testing.assert_allclose(p[1], ln_reference(x, pre.norm1.gamma, pre.norm1.beta), atol=1e-12)
    np.testing.assert_array_equal(p[-1], pre.forward(x))
    assert [name for name, _ in tw.PRE_LN_STAGES] == [
        "input", "norm", "self-attention", "add", "norm", "FFN", "add"]
