"""Sliding-window attention (helpers/recent.py, notebook 09, Going further): the band mask against
exercise 09.6's reference, RecentDecoder(window=...) against DecoderOnly, its receptive field,
its gradients against central differences, and cached decoding with a WindowCache bounded by the
window against the uncached forward pass.
"""

import numpy as np
import pytest

from helpers.checks.modern import SLIDING_WINDOW
from helpers.decoding import KVCache, generate
from helpers.modern import DecoderOnly
from helpers.module import clear_caches
from helpers.recent import RecentConfig, RecentDecoder, WindowCache, sliding_window_mask
from helpers.training import cross_entropy, gradient_check
from helpers.transformer import causal_mask
from tests.reference import randomise

SIZES = {"vocab": 11, "d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_ff": 12, "n_layers": 2,
         "max_len": 40}


def small_model(window, seed=1, **options):
    model = RecentConfig(**{**SIZES, **options}, window=window).build(np.random.default_rng(seed))
    return randomise(model, np.random.default_rng(seed + 1))


# ── the mask ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("T, window", [(4, 2), (5, 1), (6, 3), (4, 4), (3, 10), (8, 5), (9, 4)])
def test_mask_is_exercise_09_6s(T, window):
    assert np.array_equal(sliding_window_mask(T, window), SLIDING_WINDOW.reference(T, window))


def test_mask_by_hand_and_its_closed_form():
    expected = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]], dtype=bool)
    assert np.array_equal(sliding_window_mask(4, 2), expected)
    T, window = 12, 5
    mask = sliding_window_mask(T, window)
    assert mask.dtype == bool and mask.shape == (T, T)
    assert np.array_equal((~mask).sum(axis=1), np.minimum(np.arange(T) + 1, window))
    for q in range(T):  # the keys seen are the window up to the query itself, contiguous
        assert np.flatnonzero(~mask[q]).tolist() == list(range(max(0, q - window + 1), q + 1))
    assert np.array_equal(sliding_window_mask(T, T), causal_mask(T))
    assert np.array_equal(sliding_window_mask(T, 100), causal_mask(T))


@pytest.mark.parametrize("T, window", [(0, 2), (4, 0), (4, -1), (4, 2.0), (4, True), (4, None)])
def test_mask_refuses_bad_sizes(T, window):
    with pytest.raises(ValueError, match="T|window"):
        sliding_window_mask(T, window)


@pytest.mark.parametrize("window", [0, -3, 2.5, True, "4"])
def test_config_refuses_a_bad_window(window):
    with pytest.raises(ValueError, match=f"window={window!r}"):
        RecentConfig(**SIZES, window=window)
    assert RecentConfig(**SIZES, window=np.int64(3)).window == 3


# ── the model ─────────────────────────────────────────────────────────────────────────────────


def test_off_is_decoder_only_and_a_window_as_long_as_the_text_changes_nothing(rng):
    tokens = rng.integers(0, 11, (2, 9))
    plain = DecoderOnly(rng=np.random.default_rng(3), **SIZES)
    recent = RecentConfig(**SIZES).build(np.random.default_rng(3))
    wide = RecentConfig(**SIZES, window=9).build(np.random.default_rng(3))
    narrow = RecentConfig(**SIZES, window=3).build(np.random.default_rng(3))
    assert isinstance(recent, RecentDecoder)
    reference = plain.forward(tokens)
    assert np.array_equal(recent.forward(tokens), reference)
    assert np.array_equal(wide.forward(tokens), reference)
    assert np.abs(narrow.forward(tokens) - reference)[:, 3:].max() > 1e-3  # the band bites
    assert np.abs(narrow.forward(tokens) - reference)[:, :3].max() < 1e-12  # not before W


def test_the_receptive_field_is_layers_times_window_minus_one(rng):
    window, layers, T = 3, 2, 14
    model = small_model(window)
    tokens = rng.integers(0, 11, (1, T))
    base = model.forward(tokens)
    reach = layers * (window - 1)  # 4: position t reads tokens t - 4 .. t
    for s in range(T):
        changed = tokens.copy()
        changed[0, s] = (changed[0, s] + 1) % 11
        moved = np.abs(model.forward(changed) - base).max(axis=-1)[0] > 1e-12  # (T,)
        assert moved.tolist() == [s <= t <= s + reach for t in range(T)], s


def test_masked_keys_get_zero_weight(rng):
    model = small_model(4)
    model.forward(rng.integers(0, 11, (2, 10)))
    mask = sliding_window_mask(10, 4)
    for block in model.decoder.layers:
        weights = block.self_attn.cache.weights  # (B, h, T, T)
        assert np.all(weights[..., mask] == 0)
        assert np.all(weights[..., ~mask] > 0)
        assert np.allclose(weights.sum(axis=-1), 1)


@pytest.mark.parametrize("window", [2])
def test_gradients_against_central_differences(window, rng):
    model = small_model(window)
    tokens, targets = rng.integers(0, 11, (2, 7)), rng.integers(0, 11, (2, 7))

    def loss():
        return cross_entropy(model.forward(tokens), targets)

    _, grads = model.backward(loss()[1])
    error, per_name = gradient_check(lambda: loss()[0], model.parameters(), grads,
                                     max_entries=6, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5, per_name



def owner(a):
    """The array that owns a's memory (a itself if it owns it)."""
    while a.base is not None:
        a = a.base
    return a


@pytest.mark.parametrize("window", [None, 1, 3, 50])
def test_the_model_s_mask_is_the_band_built_from_2t_minus_1_booleans(window):
    model = small_model(window)
    for T in (1, 2, 7, 40):
        expected = causal_mask(T) if window is None else sliding_window_mask(T, window)
        for forgotten in {0, T // 2, T - 1}:
            model.forgotten = forgotten
            mask = model.mask(T)
            assert np.array_equal(mask, expected[:, forgotten:])
            assert owner(mask).size == 2 * T - 1  # a view: never T x T booleans
            assert not mask.flags.writeable
    model.forgotten = 0

# ── the cache ─────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("window, prompt", [(3, 5), (3, 2), (1, 1), (6, 4)])
def test_cached_decoding_equals_the_forward_pass_and_stays_within_the_window(window, prompt, rng):
    model = small_model(window)
    tokens = rng.integers(0, 11, (3, 15))
    expected = model.forward(tokens)
    clear_caches(model)
    caches = model.kv_caches()
    assert all(isinstance(c, WindowCache) and c.window == window for c in caches)
    steps = [model.logits(model.decode(tokens[:, :prompt], caches))]
    for t in range(prompt + 1, 16):
        steps.append(model.logits(model.decode(tokens[:, :t], caches)))
        for c in caches:
            assert c.K.shape == c.V.shape == (3, 2, min(t, window), 2)  # (B, g, held, d_k)
            assert c.length == t and c.forgotten == t - min(t, window)
    assert np.abs(np.concatenate(steps, axis=1) - expected).max() < 1e-12


def test_generate_with_a_window_equals_recomputation(rng):
    model = small_model(3)
    prompt = rng.integers(0, 11, (2, 4))
    cached, logits_cached = generate(model, prompt, 10)
    plain, logits_plain = generate(model, prompt, 10, use_cache=False)
    assert np.array_equal(cached, plain)
    assert np.abs(logits_cached - logits_plain).max() < 1e-12
    assert np.abs(logits_cached - model.forward(cached[:, :-1])[:, 3:]).max() < 1e-12


def test_without_a_window_the_caches_are_kv_caches():
    caches = small_model(None).kv_caches()
    assert len(caches) == 2 and all(type(c) is KVCache for c in caches)


def test_window_cache_refuses_bad_settings_and_caches_of_another_window(rng):
    with pytest.raises(ValueError, match="window"):
        WindowCache(window=0)
    with pytest.raises(ValueError, match="fixed"):
        WindowCache(fixed=True, window=4)
    tokens = rng.integers(0, 11, (1, 6))
    for model, caches in ((small_model(3), [WindowCache(window=2) for _ in range(2)]),
                          (small_model(3), [WindowCache(window=3), KVCache()]),
                          (small_model(None), [WindowCache(window=3) for _ in range(2)])):
        with pytest.raises(ValueError, match="one WindowCache of window"):
            model.decode(tokens, caches)
        assert model.forgotten == 0
