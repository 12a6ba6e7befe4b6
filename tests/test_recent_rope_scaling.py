"""RoPE's base and scaling (helpers/recent.py, notebook 09's Going further): the table against
rotations and against independent transcriptions of each rule (Llama 3.1's loop, YaRN's
formulas), YaRN's magnitude as its attention temperature, the backward with a scaled table
against central differences, the model with every piece off, and the errors.
"""

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

from helpers.data import _config_fields
from helpers.decoding import generate
from helpers.modern import TODAY, DecoderOnly, GroupedQueryAttention, rope, rotations
from helpers.recent import (
    RecentBlock,
    RecentConfig,
    RecentDecoder,
    rescale_rope,
    rope_frequencies,
    rope_table,
    scaled_frequencies,
)
from helpers.training import cross_entropy, gradient_check
from helpers.transformer import causal_mask, pe_frequencies
from tests.reference import randomise
from tests.test_modern import check_gradients, input_gradient_error

D, H, B, T = 8, 2, 2, 5  # d_k = 4: two pairs
SIZES = {"d_model": D, "n_heads": H, "n_kv_heads": 1, "d_ff": 12, "n_layers": 2, "max_len": 40}


def small(scaling=None, base=10000.0, seed=1, kind=RecentDecoder, **more):
    options = {"rope_scaling": scaling, "rope_base": base} if kind is RecentDecoder else {}
    model = kind(11, np.random.default_rng(seed), **SIZES, **options, **more)
    return randomise(model, np.random.default_rng(seed + 1))


# ── the table ────────────────────────────────────────────────────────────────────────────────


def test_base_10000_without_scaling_is_rotations_bit_for_bit():
    assert np.array_equal(rope_frequencies(16), pe_frequencies(16))
    assert np.array_equal(rope_table(40, 8), rotations(40, 8))
    assert np.array_equal(rope_table(40, 8, scaling=("linear", 1, 21)), rotations(40, 8))


def test_the_base_sets_the_wavelengths():
    for base in (10000.0, 500000.0, 1e6):
        w = rope_frequencies(8, base)
        assert np.allclose(w, [base ** (-k / 4) for k in range(4)], rtol=1e-14, atol=0)
        assert math.isclose(2 * math.pi / w[-1], 2 * math.pi * base ** 0.75, rel_tol=1e-13)


def test_position_interpolation_reads_position_p_as_p_over_s():
    scaled, plain = rope_table(40, 8, scaling=("linear", 2, 20)), rotations(20, 8)
    assert np.allclose(scaled[::2], plain, atol=1e-13)  # position 2k turns as k did
    half = np.exp(1j * 0.5 * pe_frequencies(8))  # position 1 at s = 2: the angle of 1/2
    assert np.allclose(scaled[1], half, atol=1e-15)


def test_ntk_keeps_the_first_frequency_divides_the_last_by_s_and_stays_geometric():
    s = 4.0
    w, m = scaled_frequencies(8, 10000.0, ("ntk", s, 21))
    w0 = pe_frequencies(8)
    assert m == 1.0 and w[0] == w0[0] and math.isclose(w[-1], w0[-1] / s, rel_tol=1e-13)
    ratios = w[1:] / w[:-1]
    assert np.allclose(ratios, ratios[0], rtol=1e-13) and ratios[0] < w0[1] / w0[0]


def llama31_loop(freqs, factor, low_freq_factor, high_freq_factor, old_context_len):
    """Meta's apply_scaling (llama-models, Llama 3.1), transcribed loop for loop."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor)
            new_freqs.append((1 - smooth) * freq / factor + smooth * freq)
    return np.array(new_freqs)


@pytest.mark.parametrize("L", [21, 8192])
def test_llama3_is_llama_31s_apply_scaling(L):
    for d, base in ((8, 10000.0), (128, 500000.0)):
        w, m = scaled_frequencies(d, base, ("llama3", 8, L))
        expected = llama31_loop(rope_frequencies(d, base), 8, 1, 4, L)
        assert m == 1.0 and np.allclose(w, expected, rtol=1e-14, atol=0)
        middle = (w != rope_frequencies(d, base)) & (w != rope_frequencies(d, base) / 8)
        assert middle.any()  # the ramp is used, not only its two ends


def test_yarn_is_ntk_by_parts_with_its_temperature():
    s, L, d = 1.6, 21, 64
    w, m = scaled_frequencies(d, 10000.0, ("yarn", s, L))
    for w_i, w0 in zip(w, rope_frequencies(d)):  # Peng et al. (2023), alpha = 1, beta = 32
        r = L / (2 * math.pi / w0)
        gamma = 0.0 if r < 1 else 1.0 if r > 32 else (r - 1) / 31
        assert math.isclose(w_i, (1 - gamma) * w0 / s + gamma * w0, rel_tol=1e-14)
    assert math.isclose(m, 0.1 * math.log(s) + 1, rel_tol=1e-15) and m > 1
    table = rope_table(30, d, scaling=("yarn", s, L))
    assert np.allclose(np.abs(table), m, rtol=1e-14)


def test_yarns_magnitude_in_the_table_is_exactly_the_temperature(rng):
    # queries and keys each rotated by m e^(i p w): every score times m^2 = 1/t. The same
    # layer with unit rotations of the same frequencies and W_q, b_q times m^2 gives the same
    # scores, so the same output
    yarn = ("yarn", 2.5, 20)
    layer = randomise(GroupedQueryAttention(D, H, 1, rng, max_len=40), rng)
    x = rng.standard_normal((B, T, D))
    layer.turns = rope_table(40, D // H, scaling=yarn)
    hot = layer.forward(x, x, x, causal_mask(T))
    w, m = scaled_frequencies(D // H, 10000.0, yarn)
    layer.turns = np.exp(1j * np.arange(40)[:, None] * w)
    plain = layer.forward(x, x, x, causal_mask(T))
    layer.W_q, layer.b_q = layer.W_q * m ** 2, layer.b_q * m ** 2
    assert np.allclose(layer.forward(x, x, x, causal_mask(T)), hot, atol=1e-13)
    assert np.abs(plain - hot).max() > 1e-3  # the temperature does change the output


def test_rope_with_a_scaled_table_is_still_relative_and_undone_by_its_inverse(rng):
    table = rope_table(40, 8, scaling=("yarn", 3, 10))
    m = abs(table[0, 0])
    q, k = rng.standard_normal(8), rng.standard_normal(8)
    at = [float(rope(q[None], p, table=table)[0] @ rope(k[None], p - 3, table=table)[0])
          for p in range(3, 40)]
    assert np.allclose(at, at[0], atol=1e-12)  # distance 3 everywhere
    x = rng.standard_normal((2, 5, 8))
    back = rope(rope(x, 4, table=table), 4, table=table, inverse=True)
    assert np.allclose(back, m ** 2 * x, atol=1e-13)  # the transpose: m^2, not 1, if m != 1


# ── the backward with a scaled table ─────────────────────────────────────────────────────────


@pytest.mark.parametrize("method", ["linear", "ntk", "yarn", "llama3"])
def test_gqa_gradients_with_a_scaled_table(method, rng):
    layer = randomise(GroupedQueryAttention(D, H, 1, rng, max_len=40), rng)
    layer.turns = rope_table(40, D // H, scaling=(method, 2.5, 12))
    x = rng.standard_normal((B, T, D))
    error, per_name = check_gradients(layer, lambda: layer.forward(x, x, x, causal_mask(T)), rng)
    assert error < 1e-7 and max(per_name.values()) < 1e-6, per_name

    def backward(w):
        layer.forward(x, x, x, causal_mask(T))
        return sum(layer.backward(w)[0])
    assert input_gradient_error(lambda y: layer.forward(y, y, y, causal_mask(T)), backward, x,
                                rng) < 1e-7


def test_recent_decoder_gradients_with_a_scaled_table(rng):
    model = small(("yarn", 2.0, 12), base=500000.0)
    tokens, targets = rng.integers(0, 11, (B, T)), rng.integers(0, 11, (B, T))
    _, grads = model.backward(cross_entropy(model.forward(tokens), targets)[1])
    error, per_name = gradient_check(lambda: cross_entropy(model.forward(tokens), targets)[0],
                                     model.parameters(), grads, max_entries=6, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5, per_name


# ── the model ────────────────────────────────────────────────────────────────────────────────


def test_off_it_is_decoder_only_and_rescale_rope_equals_building_it_scaled(rng):
    tokens = rng.integers(0, 11, (B, 9))
    plain, recent = small(kind=DecoderOnly), small()
    assert all(np.array_equal(plain.parameters()[k], v) for k, v in recent.parameters().items())
    assert np.array_equal(plain.forward(tokens), recent.forward(tokens))
    scaled = small(("yarn", 2.0, 12), base=500000.0)
    rescale_rope(plain, base=500000.0, scaling=("yarn", 2.0, 12))
    assert np.array_equal(plain.forward(tokens), scaled.forward(tokens))
    assert np.abs(scaled.forward(tokens) - recent.forward(tokens)).max() > 1e-3
    rescale_rope(plain)  # back to base 10000, unscaled
    assert np.array_equal(plain.forward(tokens), recent.forward(tokens))


def test_scaled_model_is_causal_and_generates_the_same_with_and_without_the_cache(rng):
    model = small(("ntk", 3.0, 10))
    tokens = rng.integers(0, 11, (B, 9))
    later = tokens.copy()
    later[:, -1] = (later[:, -1] + 1) % 11
    assert np.array_equal(model.forward(later)[:, :-1], model.forward(tokens)[:, :-1])
    cached, _ = generate(model, tokens[:, :3], 12)
    assert np.array_equal(cached, generate(model, tokens[:, :3], 12, use_cache=False)[0])


def test_the_scaling_survives_json_and_is_hashable():
    config = RecentConfig(11, rope_scaling=["yarn", 2, 21], rope_base=500000)
    assert config.rope_scaling == ("yarn", 2.0, 21) and hash(config)
    again = RecentConfig(**json.loads(json.dumps(asdict(config))))
    assert again == config and _config_fields(again)["rope_scaling"] == ("yarn", 2.0, 21)
    assert "rope_scaling" not in _config_fields(RecentConfig(11))


def test_errors():
    with pytest.raises(ValueError, match="method one of"):
        rope_table(8, 8, scaling=("dynamic", 2.0, 21))
    with pytest.raises(ValueError, match="method one of"):
        rope_table(8, 8, scaling=("linear", 2.0))
    with pytest.raises(ValueError, match=r"scaling's s must be .*\[1, inf\)"):
        rope_table(8, 8, scaling=("linear", 0.5, 21))
    with pytest.raises(ValueError, match="scaling's L must be a positive int"):
        rope_table(8, 8, scaling=("yarn", 2.0, 21.5))
    with pytest.raises(ValueError, match="base must be"):
        rope_table(8, 8, base=1.0)
    with pytest.raises(ValueError, match="ntk scaling needs d >= 4"):
        rope_table(8, 2, scaling=("ntk", 2.0, 21))
    with pytest.raises(ValueError, match="d must be even"):
        rope_table(8, 7)
    with pytest.raises(ValueError, match="rope_base must be"):
        RecentConfig(11, rope_base=0.5)
    with pytest.raises(ValueError, match="need position='rope'"):
        RecentConfig(11, position="sinusoidal", rope_scaling=("linear", 2.0, 21))
    for options in ({"rope_base": 500000.0}, {"rope_scaling": ("linear", 2.0, 21)}):
        with pytest.raises(ValueError, match="this block's attention has none"):  # not ignored
            RecentBlock(D, H, 12, np.random.default_rng(0), rope=False, **options)
    with pytest.raises(ValueError, match="a block without RoPE"):
        rescale_rope(DecoderOnly(11, np.random.default_rng(0), **SIZES, **{**TODAY,
                                                                          "position": "none"}))
