"""Notebook 09's pieces (helpers/modern.py, helpers/decoding.generate and the decoder-only reversal
of helpers/reversal.py): each against an independent computation, its properties, its gradients
against central differences, and its errors.
"""

import math
import warnings

import numpy as np
import pytest

from helpers.decoding import KVCache, generate
from helpers.modern import (
    LLAMA,
    PAPER_2017,
    TODAY,
    DecoderOnly,
    DecoderOnlyConfig,
    GroupedQueryAttention,
    ModernBlock,
    RMSNorm,
    SwiGLU,
    attention_traffic,
    flash_attention,
    rope,
    rotations,
    sigmoid,
    swiglu_hidden,
)
from helpers.reversal import (
    BOS,
    EOS,
    PAD,
    PIECES,
    grid_name,
    linear_schedule,
    lm_exact_match,
    lm_sequences,
    parameter_count,
    pieces_of,
    reversal_lm_config,
)
from helpers.training import cross_entropy, gradient_check
from helpers.transformer import (
    EncoderBlock,
    FeedForward,
    MultiHeadAttention,
    causal_mask,
    pe_frequencies,
    relative_position_matrix,
    scaled_dot_product_attention,
    set_training,
)
from tests.reference import input_gradient_error, loop_gqa, randomise

D, H, B, T = 8, 4, 2, 5


def check_gradients(module, forward, rng, entries=12):
    """The relative error of module's parameter gradients for the loss sum(forward() * R)."""
    out = forward()
    weights = rng.standard_normal(out.shape)
    _, grads = module.backward(weights)
    error, per_name = gradient_check(lambda: float((forward() * weights).sum()),
                                     module.parameters(), grads, max_entries=entries, rng=rng)
    return error, per_name


# ── RMSNorm ──────────────────────────────────────────────────────────────────────────────────


def test_rms_norm_against_the_formula_one_position_at_a_time(rng):
    norm = RMSNorm(D)
    norm.gamma[:] = rng.standard_normal(D)
    x = rng.standard_normal((B, T, D)) * 3 + 1
    out = norm.forward(x)
    for b in range(B):
        for t in range(T):
            row = x[b, t]
            rms = math.sqrt(sum(v * v for v in row) / D + 1e-5)
            assert np.allclose(out[b, t], row / rms * norm.gamma, rtol=1e-12, atol=0)


def test_rms_norm_gives_unit_root_mean_square_and_differs_from_layer_norm_by_the_mean(rng):
    norm = RMSNorm(D, eps=0.0)
    x = rng.standard_normal((50, D)) + 4.0  # a large mean
    out = norm.forward(x)
    assert np.allclose(np.sqrt((out**2).mean(-1)), 1.0, atol=1e-12)
    centred = x - x.mean(-1, keepdims=True)
    from helpers.transformer import LayerNorm
    ln = LayerNorm(D, eps=0.0).forward(x)
    assert np.allclose(norm.forward(centred), ln, atol=1e-12)  # LayerNorm = RMSNorm of x - mean
    assert np.abs(out - ln).max() > 0.5  # with the mean left in, they differ


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rms_norm_keeps_the_dtype(dtype, rng):
    norm = RMSNorm(D, dtype=dtype)
    out = norm.forward(rng.standard_normal((B, T, D)).astype(dtype))
    d_x, grads = norm.backward(out)
    assert out.dtype == d_x.dtype == grads["gamma"].dtype == dtype


def test_rms_norm_gradients(rng):
    norm = randomise(RMSNorm(D), rng)
    x = rng.standard_normal((B, T, D))
    error, _ = check_gradients(norm, lambda: norm.forward(x), rng)
    assert error < 1e-7

    def backward(w):
        norm.forward(x)
        return norm.backward(w)[0]
    assert input_gradient_error(norm.forward, backward, x, rng) < 1e-7


def test_rms_norm_refuses_bad_input():
    with pytest.raises(ValueError, match="eps"):
        RMSNorm(4, eps=-1.0)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., d_model=4\)"):
        RMSNorm(4).forward(np.zeros((2, 5)))


# ── SwiGLU ───────────────────────────────────────────────────────────────────────────────────


def test_sigmoid_is_exact_at_the_extremes_and_warns_nothing():
    a = np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would reach a notebook's stderr
        s = sigmoid(a)
    assert np.allclose(s, [1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in a], rtol=0,
                       atol=1e-15)


def test_swiglu_against_the_formula(rng):
    ffn = SwiGLU(D, 10, rng)
    x = rng.standard_normal((B, T, D))
    a, b = x @ ffn.W_1, x @ ffn.V
    expected = (a / (1 + np.exp(-a)) * b) @ ffn.W_2  # Swish(a) = a sigmoid(a)
    assert np.allclose(ffn.forward(x), expected, rtol=1e-12, atol=1e-14)


def test_swiglu_at_eight_thirds_has_the_relu_networks_weights(rng):
    for d in (48, 96, 384):
        h = swiglu_hidden(d)
        swiglu, relu = SwiGLU(d, h, rng), FeedForward(d, 4 * d, rng)
        weights = sum(p.size for n, p in relu.parameters().items() if n.startswith("W"))
        assert sum(p.size for p in swiglu.parameters().values()) == weights == 8 * d * d
    assert swiglu_hidden(32) == 85  # 8 * 32 / 3 = 85.3


def test_swiglu_gradients(rng):
    ffn = SwiGLU(D, 10, rng)
    x = rng.standard_normal((B, T, D)) * 2
    error, _ = check_gradients(ffn, lambda: ffn.forward(x), rng)
    assert error < 1e-7

    def backward(w):
        ffn.forward(x)
        return ffn.backward(w)[0]
    assert input_gradient_error(ffn.forward, backward, x, rng) < 1e-7


# ── RoPE ─────────────────────────────────────────────────────────────────────────────────────


def test_rope_against_two_by_two_rotations(rng):
    x = rng.standard_normal((3, 7, 6))
    out = rope(x, start=4)
    for t in range(7):
        for i in range(3):
            angle = (4 + t) / 10000 ** (2 * i / 6)
            R = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
            assert np.allclose(out[:, t, 2 * i:2 * i + 2], x[:, t, 2 * i:2 * i + 2] @ R.T,
                               atol=1e-12)


def test_rope_scores_depend_only_on_the_distance_for_every_pair_of_64_positions(rng):
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    Q = rope(np.tile(q, (64, 1)))  # (64, 16): the same query at positions 0..63
    K = rope(np.tile(k, (64, 1)))
    scores = Q @ K.T  # scores[m, n]: query at m, key at n
    for offset in range(-63, 64):
        diagonal = np.diagonal(scores, offset)  # every pair with n - m = offset
        assert np.ptp(diagonal) < 1e-12
    assert np.ptp([scores[0, n] for n in range(64)]) > 1  # but the distance itself matters


def test_rope_keeps_norms_is_undone_by_its_inverse_and_keeps_the_dtype(rng):
    x = rng.standard_normal((2, 3, 9, 8))
    out = rope(x, 5)
    assert np.allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-12)
    assert np.allclose(rope(out, 5, inverse=True), x, atol=1e-12)
    x32 = x.astype(np.float32)
    assert rope(x32).dtype == np.float32 and rope(x32, inverse=True).dtype == np.float32


def test_rope_is_notebook_03s_rotation_by_minus_the_position(rng):
    x = rng.standard_normal((1, 8))
    for p in (0, 1, 7, 100):
        assert np.allclose(rope(x, p), x @ relative_position_matrix(-p, 8), atol=1e-12)


def test_rotations_are_exact_and_a_model_slices_its_own_table(rng):
    table = rotations(5, 8, 3)
    angles = np.arange(3, 8)[:, None] * pe_frequencies(8)
    np.testing.assert_array_equal(table, np.exp(1j * angles))
    layer = GroupedQueryAttention(8, 2, 1, rng, max_len=12)
    np.testing.assert_array_equal(layer.turns, rotations(12, 4))  # (max_len, d_k / 2), once
    x = rng.standard_normal((2, 5, 4))
    np.testing.assert_array_equal(rope(x, 3, table=layer.turns), rope(x, 3))
    np.testing.assert_array_equal(rope(x, 3, inverse=True, table=layer.turns),
                                  rope(x, 3, inverse=True))
    with pytest.raises(ValueError, match="not in the table"):
        rope(x, 8, table=layer.turns)  # positions 8..12: the table ends at 11


def test_no_process_wide_cache_of_rotations(rng):
    """The issue: a cache keyed by int(start) served start=0.5's table to start=0."""
    import helpers.modern as modern
    assert not [name for name, v in vars(modern).items() if isinstance(v, dict) and v
                and name not in ("NORMS", "FFNS", "PAPER_2017", "TODAY", "LLAMA", "__builtins__")]
    x = rng.standard_normal((4, 8))
    fresh = rope(x)
    with pytest.raises(ValueError, match="start"):
        rope(x, start=0.5)
    np.testing.assert_array_equal(rope(x, start=0), fresh)


def test_rope_start_continues_the_positions_and_accepts_views(rng):
    x = rng.standard_normal((2, 10, 8))
    assert np.allclose(rope(x)[:, 6:], rope(x[:, 6:], start=6), atol=1e-12)
    view = np.swapaxes(rng.standard_normal((2, 8, 10)), -1, -2)  # last axis not contiguous
    assert np.allclose(rope(view), rope(np.ascontiguousarray(view)), atol=0)


def test_the_halves_layout_is_the_same_rotation_of_permuted_features(rng):
    """GPT-NeoX / Hugging Face pair feature i with i + d/2 (rotate_half)."""
    d, T = 8, 6
    x = rng.standard_normal((T, d))
    angles = np.arange(T)[:, None] * (1 / 10000 ** (np.arange(0, d, 2) / d))
    cos, sin = np.cos(np.concatenate([angles, angles], 1)), np.sin(np.concatenate([angles] * 2, 1))

    def rotate_half(y):
        return np.concatenate([-y[:, d // 2:], y[:, :d // 2]], axis=1)

    perm = np.r_[0:d:2, 1:d:2]  # adjacent pairs (0,1), (2,3) ... -> halves (0, d/2), (1, d/2+1) ...
    halves = x[:, perm] * cos + rotate_half(x[:, perm]) * sin
    assert np.allclose(halves, rope(x)[:, perm], atol=1e-12)


# ── grouped-query attention ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("g", [4, 2, 1])
@pytest.mark.parametrize("with_rope", [True, False])
def test_gqa_against_loops(g, with_rope, rng):
    layer = randomise(GroupedQueryAttention(D, H, g, rng, rope=with_rope), rng)
    x = rng.standard_normal((B, T, D))
    out = layer.forward(x, x, x, causal_mask(T))
    assert np.allclose(out, loop_gqa(layer, x, causal_mask(T)), atol=1e-12)
    assert layer.W_k.shape == layer.W_v.shape == (D, g * D // H)


def test_gqa_with_g_equal_h_and_no_rope_is_multi_head_attention(rng):
    mha = randomise(MultiHeadAttention(D, H, np.random.default_rng(5)), np.random.default_rng(6))
    gqa = randomise(GroupedQueryAttention(D, H, H, np.random.default_rng(5), rope=False),
                    np.random.default_rng(6))
    x = rng.standard_normal((B, T, D))
    assert list(gqa.parameters()) == list(mha.parameters())
    assert np.array_equal(gqa.forward(x, x, x, causal_mask(T)), mha.forward(x, x, x, causal_mask(T)))


def test_gqa_inherits_the_attention_forward(rng):
    assert "forward" not in GroupedQueryAttention.__dict__
    assert GroupedQueryAttention.forward is MultiHeadAttention.forward


@pytest.mark.parametrize("g", [4, 2, 1])
@pytest.mark.parametrize("with_rope", [True, False])
def test_gqa_gradients(g, with_rope, rng):
    layer = randomise(GroupedQueryAttention(D, H, g, rng, rope=with_rope), rng)
    x = rng.standard_normal((B, T, D))
    error, per_name = check_gradients(layer, lambda: layer.forward(x, x, x, causal_mask(T)), rng)
    assert error < 1e-7 and max(v for k, v in per_name.items() if k != "b_k") < 1e-6, per_name
    # b_k adds q . b_k to every score of a query: softmax ignores it, so its gradient is 0,
    # unless RoPE turns b_k differently at every position (then it is a real parameter)
    _, grads = layer.backward(rng.standard_normal((B, T, D)))
    assert (np.abs(grads["b_k"]).max() > 1e-3) == with_rope

    def backward(w):
        layer.forward(x, x, x, causal_mask(T))
        return sum(layer.backward(w)[0])
    assert input_gradient_error(lambda y: layer.forward(y, y, y, causal_mask(T)), backward, x,
                                rng) < 1e-7


def test_gqa_caches_g_heads_and_refuses_what_it_cannot_do(rng):
    layer = GroupedQueryAttention(D, H, 1, rng)
    cache = KVCache()
    x = rng.standard_normal((B, 3, D))
    layer.forward(x, x, x, causal_mask(3), cache)
    assert cache.K.shape == cache.V.shape == (B, 1, 3, D // H)  # one head, not four
    y = rng.standard_normal((B, 1, D))
    layer.forward(y, y, y, None, cache)
    with pytest.raises(ValueError, match="keys cached by earlier calls"):
        layer.backward(np.zeros((B, 1, D)))
    with pytest.raises(ValueError, match="fixed=True"):
        layer.forward(y, y, y, None, KVCache(fixed=True))
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        GroupedQueryAttention(D, H, 3, rng)


# ── the block and the model ──────────────────────────────────────────────────────────────────


def test_modern_block_with_2017_pieces_is_the_encoder_block_weight_for_weight(rng):
    old = EncoderBlock(D, H, 16, np.random.default_rng(3))
    new = ModernBlock(D, H, 16, np.random.default_rng(3), norm="layer", ffn="relu", rope=False,
                      norm_first=False)
    x = rng.standard_normal((B, T, D))
    assert {k: v.shape for k, v in old.parameters().items()} == \
        {k: v.shape for k, v in new.parameters().items()}
    assert all(np.array_equal(old.parameters()[k], v) for k, v in new.parameters().items())
    out_old, out_new = old.forward(x, causal_mask(T)), new.forward(x, causal_mask(T))
    assert np.array_equal(out_old, out_new)
    weights = rng.standard_normal(out_old.shape)
    (d_old, g_old), (d_new, g_new) = old.backward(weights), new.backward(weights)
    assert np.array_equal(d_old, d_new) and all(np.array_equal(g_old[k], g_new[k]) for k in g_old)


def test_modern_block_inherits_the_wiring():
    for name in ("forward", "backward"):
        assert name not in ModernBlock.__dict__
    assert ModernBlock.forward is EncoderBlock.forward


def test_modern_block_gradients_and_causality(rng):
    block = randomise(ModernBlock(D, H, 12, rng, n_kv_heads=2), rng)
    x = rng.standard_normal((B, T, D))
    error, _ = check_gradients(block, lambda: block.forward(x, causal_mask(T)), rng)
    assert error < 1e-7
    changed = x.copy()
    changed[:, -1] += 1.0
    moved = np.abs(block.forward(changed, causal_mask(T)) - block.forward(x, causal_mask(T)))
    assert moved[:, :-1].max() < 1e-14 and moved[:, -1].max() > 0.01


def test_modern_block_refuses_unknown_pieces(rng):
    with pytest.raises(ValueError, match="norm must be one of"):
        ModernBlock(D, H, 12, rng, norm="batch")
    with pytest.raises(ValueError, match="ffn one of"):
        ModernBlock(D, H, 12, rng, ffn="gelu")


MODELS = {
    "today": TODAY,
    "today, GQA 2": {**TODAY, "n_kv_heads": 2},
    "today, MQA, tied": {**TODAY, "n_kv_heads": 1, "tie_output": True},
    "today, no position": {**TODAY, "position": "none"},
    "2017": PAPER_2017,
    "2017, tied, dropout": {**PAPER_2017, "tie_output": True, "dropout": 0.2},
    "llama, GQA 2": {**LLAMA, "n_kv_heads": 2, "norm_eps": 1e-6},
}


def small_model(options, seed=1, dtype="float64"):
    model = DecoderOnly(11, np.random.default_rng(seed), d_model=D, n_heads=H, d_ff=12,
                        n_layers=2, max_len=40, dtype=dtype, **options)
    return randomise(model, np.random.default_rng(seed + 1))


@pytest.mark.parametrize("name", list(MODELS))
def test_decoder_only_gradients(name, rng):
    model = small_model(MODELS[name])
    tokens, targets = rng.integers(0, 11, (B, 6)), rng.integers(0, 11, (B, 6))
    if model.config.dropout:
        def loss():  # the same dropout masks on every call
            set_training(model, np.random.default_rng(7))
            return cross_entropy(model.forward(tokens), targets)
    else:
        def loss():
            return cross_entropy(model.forward(tokens), targets)
    _, grads = model.backward(loss()[1])
    error, per_name = gradient_check(lambda: loss()[0], model.parameters(), grads,
                                     max_entries=6, rng=rng)
    rotary = model.config.position == "rope"  # without RoPE, b_k's gradient is 0 (see above)
    checked = {k: v for k, v in per_name.items() if rotary or not k.endswith("b_k")}
    assert error < 1e-6 and max(checked.values()) < 1e-5, per_name


@pytest.mark.parametrize("name", [n for n in MODELS if "dropout" not in n])
def test_generation_with_the_cache_equals_recomputation(name, rng):
    model = small_model(MODELS[name])
    prompt = rng.integers(0, 11, (3, 4))
    cached, logits_cached = generate(model, prompt, 12)
    assert all(m.cache is None for m in model.modules())  # no backward follows: cleared
    plain, logits_plain = generate(model, prompt, 12, use_cache=False)
    assert np.array_equal(cached, plain)
    assert np.abs(logits_cached - logits_plain).max() < 1e-12
    assert np.abs(logits_cached - model.forward(cached[:, :-1])[:, 3:]).max() < 1e-12


def test_generate_stops_picks_and_refuses_training_mode(rng):
    model = small_model(TODAY)
    prompt = rng.integers(0, 11, (2, 3))
    first, _ = generate(model, prompt, 1)
    stop = int(first[0, -1])  # the token sequence 0 writes first
    tokens, logits = generate(model, prompt, 20, stop_id=stop)
    assert np.all(tokens[0, 3:] == stop)
    always_five, _ = generate(model, prompt, 4, pick=lambda logits: np.full(len(logits), 5))
    assert np.all(always_five[:, 3:] == 5)
    set_training(model, np.random.default_rng(0))
    with pytest.raises(ValueError, match="evaluation mode"):
        generate(model, prompt, 2)


def test_decoder_only_keeps_float32(rng):
    model = small_model({**TODAY, "n_kv_heads": 2}, dtype="float32")
    tokens = rng.integers(0, 11, (B, 6))
    logits = model.forward(tokens)
    loss, d_logits = cross_entropy(logits, tokens)
    _, grads = model.backward(d_logits)
    assert logits.dtype == np.float32 and all(g.dtype == np.float32 for g in grads.values())


def test_decoder_only_config_refuses_bad_settings():
    for bad, match in [({"position": "learned"}, "position must be one of"),
                       ({"d_model": 12, "n_heads": 4}, "must be even"),
                       ({"n_kv_heads": 3}, "multiple of n_kv_heads"),
                       ({"norm": "batch"}, "norm must be one of"),
                       ({"tie_output": 1}, "True or False"),
                       ({"dropout": 1.0}, "dropout")]:
        with pytest.raises(ValueError, match=match):
            DecoderOnlyConfig(11, **bad)
    DecoderOnlyConfig(11, d_model=12, n_heads=4, position="none")  # odd head width, no rotation
    model = small_model(TODAY)
    with pytest.raises(ValueError, match="longer than the positional table"):
        model.forward(np.zeros((1, 41), dtype=int))


def test_sinusoidal_positions_need_an_even_d_model_not_an_even_head_width():
    """Added sinusoids pair the d_model features of the token vectors; only RoPE turns pairs
    inside a head. So 2017's recipe with 4 heads of width 3 is valid, and d_model 15 is not."""
    model = DecoderOnlyConfig(11, d_model=12, n_heads=4, **PAPER_2017).build(
        np.random.default_rng(0))
    assert np.isfinite(model.forward(np.zeros((1, 5), dtype=int))).all()
    with pytest.raises(ValueError, match="d_model = 15 must be even"):
        DecoderOnlyConfig(11, d_model=15, n_heads=3, **PAPER_2017)
    with pytest.raises(ValueError, match="head width d_model / n_heads = 3 must be even"):
        DecoderOnlyConfig(11, d_model=12, n_heads=4, position="rope")
    DecoderOnlyConfig(11, d_model=15, n_heads=3, position="none")  # nothing is paired


def test_stack_of_pre_norm_modern_blocks_ends_with_an_rms_norm(rng):
    model = small_model(TODAY)
    assert isinstance(model.decoder.norm, RMSNorm)
    assert small_model(PAPER_2017).decoder.norm is None


# ── FlashAttention's tiling ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("block_q, block_k", [(1, 1), (3, 5), (8, 16), (13, 17), (64, 64)])
def test_flash_attention_equals_attention(block_q, block_k, version, rng):
    Q, K, V = rng.standard_normal((13, 8)), rng.standard_normal((17, 8)), rng.standard_normal((17, 8))
    expected, _ = scaled_dot_product_attention(Q, K, V)
    assert np.abs(flash_attention(Q, K, V, block_q, block_k, version=version) - expected).max() \
        < 1e-12
    small = [a.astype(np.float32) for a in (Q, K, V)]
    out = flash_attention(*small, 4, 4, version=version)
    assert out.dtype == np.float32 and np.abs(out - expected).max() < 1e-5


def test_flash_attention_versions_agree_on_large_scores(rng):
    """Scores of several hundred: the running maximum is what keeps exp finite, in both orders."""
    Q, K, V = rng.standard_normal((20, 4)) * 30, rng.standard_normal((9, 4)) * 30, \
        rng.standard_normal((9, 4))
    expected, _ = scaled_dot_product_attention(Q, K, V)
    for version in (1, 2):
        assert np.abs(flash_attention(Q, K, V, 3, 2, version=version) - expected).max() < 1e-12


def test_flash_attention_moves_what_the_formula_says(rng):
    for n, d, M in [(64, 8, 256), (100, 16, 4096), (37, 4, 100), (200, 16, 2048), (50, 3, 7)]:
        Q, K, V = (rng.standard_normal((n, d)) for _ in range(3))
        big = math.ceil(M / (4 * d))
        moved = {1: {}, 2: {}}
        flash_attention(Q, K, V, min(big, d), big, moved[1])  # B_r = min(B_c, d), B_c = ceil(M/4d)
        flash_attention(Q, K, V, big, min(big, d), moved[2], version=2)  # the roles swapped
        for version in (1, 2):
            standard, flash = attention_traffic(n, d, M, version)
            assert moved[version]["reads"] + moved[version]["writes"] == flash
            assert standard == 4 * n * d + 4 * n * n
        assert attention_traffic(n, d, M) == attention_traffic(n, d, M, 1)
        # FlashAttention-2 reads Q once, K and V once per block of queries, writes O and L once
        assert moved[2] == {"reads": n * d + math.ceil(n / big) * 2 * n * d, "writes": n * d + n}
        assert sum(moved[2].values()) <= sum(moved[1].values())
    with pytest.raises(ValueError, match="one head"):
        flash_attention(np.zeros((2, 3, 4)), np.zeros((3, 4)), np.zeros((3, 4)), 2, 2)


@pytest.mark.parametrize("n_q, n_k, block", [(13, 17, 1), (13, 17, 4), (30, 30, 7), (5, 40, 16)])
def test_flash_attention_2_moves_less_at_the_same_tiles(n_q, n_k, block, rng):
    Q, K, V = rng.standard_normal((n_q, 6)), rng.standard_normal((n_k, 6)), \
        rng.standard_normal((n_k, 6))
    moved = {1: {}, 2: {}}
    for version in (1, 2):
        flash_attention(Q, K, V, block, block, moved[version], version=version)
    t_q, t_k = math.ceil(n_q / block), math.ceil(n_k / block)
    assert moved[1] == {"reads": 2 * n_k * 6 + t_k * (2 * n_q * 6 + 2 * n_q),
                        "writes": n_q * 6 + 2 * n_q + t_k * (n_q * 6 + 2 * n_q)}
    assert moved[2] == {"reads": n_q * 6 + t_q * 2 * n_k * 6, "writes": n_q * 6 + n_q}
    assert sum(moved[2].values()) <= sum(moved[1].values())


@pytest.mark.parametrize("version", [0, 3, 1.0, "2", True, None])
def test_flash_attention_refuses_a_version_that_is_not_1_or_2(version):
    Q = np.ones((3, 4))
    with pytest.raises(ValueError, match="version"):
        flash_attention(Q, Q, Q, 2, 2, version=version)
    with pytest.raises(ValueError, match="version"):
        attention_traffic(64, 16, 256, version)


# ── the decoder-only reversal ────────────────────────────────────────────────────────────────


def test_lm_sequences_by_hand():
    src = np.array([[3, 4, 5, 0], [6, 0, 0, 0]])
    tokens, targets = lm_sequences(src, np.array([3, 1]))
    assert tokens.tolist() == [[3, 4, 5, BOS, 5, 4, 3, EOS, PAD], [6, BOS, 6, EOS, 0, 0, 0, 0, 0]]
    assert targets.tolist() == [[PAD, PAD, PAD, 5, 4, 3, EOS, PAD, PAD],
                                [PAD, 6, EOS, PAD, PAD, PAD, PAD, PAD, PAD]]


def test_lm_exact_match_is_greedy_generation(rng):
    """One forward pass with the right prefixes decides what greedy generation would write: on
    a trained model that reverses some sequences right and some wrong (an untrained one gets
    every row wrong, and all-False equals all-False)."""
    from helpers.data import load_modern_models

    model = load_modern_models()[0]["2017 + RoPE + GQA"]  # never reached the target: 0.698
    src, lengths = rng.integers(3, 13, (60, 10)), rng.integers(1, 11, 60)
    forced = lm_exact_match(model, src, lengths)
    greedy = [np.array_equal(generate(model, np.r_[s[:n], BOS][None], n + 1)[0][0, n + 1:],
                             np.r_[s[:n][::-1], EOS]) for s, n in zip(src, lengths)]
    assert 0 < forced.sum() < len(forced)
    assert np.array_equal(forced, greedy)


def test_recipes_are_compared_at_matched_size():
    counts = {name: parameter_count(reversal_lm_config(**pieces_of(**choice)))
              for name, choice in [("2017", {}), ("today", {p: "today" for p in PIECES}),
                                   ("rope only", {"position": "today"})]}
    assert counts["2017"] == 26_253
    assert all(abs(c / counts["2017"] - 1) < 0.01 for c in counts.values()), counts


def test_pieces_names_and_schedule():
    assert pieces_of() == {"norm": "layer", "norm_first": False, "ffn": "relu",
                           "position": "sinusoidal", "n_kv_heads": None}
    assert grid_name() == "2017" and grid_name(**{p: "today" for p in PIECES}) == "today"
    assert grid_name(position="today", ffn="today") == "2017 + SwiGLU + RoPE"
    with pytest.raises(ValueError, match="choose '2017' or 'today'"):
        pieces_of(norm="2019")
    rate = linear_schedule(1e-2, 100, 1500)
    assert rate(1) == 1e-4 and rate(100) == 1e-2 and rate(1500) == 0.0
    assert abs(rate(800) - 5e-3) < 1e-15
    assert linear_schedule(1e-2, 0, 1500)(1) == pytest.approx(1e-2 * 1499 / 1500)


# ── the committed models and record (benchmarks/train_modern.py --save) ──────────────────────


def test_the_sixteen_committed_models_are_the_grid_and_score_what_was_recorded():
    from itertools import product

    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_modern_models, load_runs
    from helpers.reversal import reverse_task

    models, info = load_modern_models()
    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    choices = [dict(zip(PIECES, c)) for c in product(("2017", "today"), repeat=len(PIECES))]
    assert set(models) == {grid_name(**c) for c in choices} == set(record["grid"])
    val = reverse_task()["val"]
    for choice in choices:
        name = grid_name(**choice)
        config = reversal_lm_config(**pieces_of(**choice))
        assert models[name].config == config, name
        accuracy = lm_exact_match(models[name], val["src"], val["lengths"]).mean()
        assert accuracy == record["grid"][name]["final"], name


def test_the_norm_study_sets_placement_and_type_apart():
    """record["norms"] (train_modern.py's table 5): for 2017's and today's other pieces, the four
    combinations of placement and type; the two the grid has point to its models, the two new
    runs have the placement's rate, matched size and the norm fields they name."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_runs

    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    best, grid = record["best_rate"], record["grid"]
    others = {"others 2017": {}, "others today": {p: "today" for p in PIECES if p != "norm"}}
    assert set(record["norms"]) == set(others)
    for name, choice in others.items():
        study = record["norms"][name]
        assert set(study) == {"post/layernorm", "pre/layernorm", "post/rmsnorm", "pre/rmsnorm"}
        assert study["post/layernorm"] == {"grid": grid_name(**choice)}
        assert study["pre/rmsnorm"] == {"grid": grid_name(**choice, norm="today")}
        assert {study[c]["grid"] for c in ("post/layernorm", "pre/rmsnorm")} <= set(grid)
        for corner, fields in (("pre/layernorm", {"norm": "layer", "norm_first": True}),
                               ("post/rmsnorm", {"norm": "rms", "norm_first": False})):
            run = study[corner]
            config = reversal_lm_config(**{**pieces_of(**choice), **fields})
            assert run["rate"] == best["today" if fields["norm_first"] else "2017"]
            assert (run["d_ff"], run["parameters"]) == (config.d_ff, parameter_count(config))
            assert abs(run["parameters"] / 26_253 - 1) < 0.01
            assert len(run["accuracy"]) == 30 and run["final"] == run["accuracy"][-1]
            assert run["first"] is None or run["accuracy"][run["first"] // 50 - 1] >= 0.99


def test_the_learning_rate_table_brackets_each_best_rate():
    """record["sweep"] (train_modern.py's table 1, with the two outer rates --edges added): three
    seeds per recipe and rate, the rates in order, and each recipe's best rate (the one tables 2
    to 5 use) has the fewest median steps, more at the rates on both sides of it."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_runs

    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    rates = record["rates"]
    assert rates == sorted(rates) and len(rates) == 6 and set(record["sweep"]) == {"2017", "today"}
    for name, best in record["best_rate"].items():
        sweep = record["sweep"][name]
        assert list(sweep) == [str(r) for r in rates] and all(len(v) == 3 for v in sweep.values())
        medians = [np.median([np.inf if s is None else s for s in sweep[str(r)]]) for r in rates]
        i = rates.index(best)
        assert 0 < i < len(rates) - 1
        assert medians[i] == min(medians) < min(medians[i - 1], medians[i + 1]), name


def test_the_modern_loader_refuses_a_changed_file(tmp_path):
    import shutil

    from helpers.data import MODERN_MANIFEST, MODERN_MODELS, load_models

    bad = tmp_path / "m.npz"
    raw = bytearray(MODERN_MODELS.read_bytes())
    raw[len(raw) // 3] ^= 1
    bad.write_bytes(bytes(raw))
    shutil.copy(MODERN_MANIFEST, tmp_path / "m.json")
    with pytest.raises(ValueError, match="SHA-256"):
        load_models(bad, tmp_path / "m.json", "regenerate")


def test_the_five_runs_notebook_09_section_7_shows():
    """Notebook 09, section 7: at each recipe's best rate with 100 warm-up steps, five runs
    (seeds 0-4), all reaching 0.99, evaluated every 50 of 1,500 steps; the best rate picked on
    seeds 0-2 (the sweep's runs); the mean exact match and steps the notebook prints and states."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_runs

    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    best, five = record["best_rate"], {n: record["warmup"][f"{n}/100"] for n in ("2017", "today")}
    assert record["target"] == 0.99 and len(record["rates"]) == 6
    first = {n: [r["first"] for r in runs] for n, runs in five.items()}
    mean_exact = {n: [np.mean(r["accuracy"]) for r in runs] for n, runs in five.items()}
    for n, runs in five.items():
        assert [r["seed"] for r in runs] == [0, 1, 2, 3, 4]
        assert record["sweep"][n][str(best[n])] == first[n][:3]
        assert all(s is not None and s % 50 == 0 for s in first[n])  # every run reached 0.99
        assert all(50 * len(r["accuracy"]) == 1500 for r in runs)  # 30 evaluations
    assert {n: np.median(s) for n, s in first.items()} == {"2017": 850, "today": 600}
    ranges = [round(f(mean_exact[n]), 2) for n in ("2017", "today") for f in (min, max)]
    assert ranges == [0.79, 0.82, 0.86, 0.92]  # so every run of today's above every 2017 run
    assert min(first["2017"]) <= max(first["today"])  # the steps to 0.99 overlap
