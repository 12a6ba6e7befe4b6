"""Each wrong number, unclear error and lost training that issue 29 found in the public API of
modern.py, lm.py, decoding.py and training.py, as a test: the input is now refused with a
ValueError naming the argument, or gives the right number. (tests/test_malformed_calls.py throws
several hundred more malformed calls at the same functions.)"""

import math

import numpy as np
import pytest

from helpers import widgets as tw
from helpers.decoding import KVCache, generate, greedy_decode, kv_caches
from helpers.lm import (
    AdamW,
    Characters,
    Recipe,
    next_token_probabilities,
    sampler,
    split,
    unigram_loss,
    windows,
)
from helpers.modern import (
    DecoderOnly,
    GroupedQueryAttention,
    ModernBlock,
    RMSNorm,
    flash_attention,
    rope,
    sigmoid,
)
from helpers.training import (
    Adam,
    TrainingDiverged,
    clip_by_global_norm,
    cross_entropy,
    loss_stalled,
    lrate,
    train,
)
from helpers.transformer import Transformer, scaled_dot_product_attention


def rng():
    return np.random.default_rng(0)


def tiny(**options):
    return DecoderOnly(11, rng(), **{"d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 2,
                                      "max_len": 12, **options})


# ── rope and RMSNorm ─────────────────────────────────────────────────────────────────────────


def test_rope_refuses_a_fractional_start_and_a_later_call_is_not_served_its_table():
    x = rng().standard_normal((3, 8))
    right = rope(x, start=0)
    with pytest.raises(ValueError, match="start"):
        rope(x, start=0.5)  # on main: accepted, and its table was cached under int(0.5) == 0
    np.testing.assert_array_equal(rope(x, start=0), right)
    angle = 1 / 10000 ** (2 * 1 / 8)  # position 1, pair 1
    turned = x[1, 2:4] @ np.array([[math.cos(angle), math.sin(angle)],
                                   [-math.sin(angle), math.cos(angle)]])
    np.testing.assert_allclose(right[1, 2:4], turned, atol=1e-12)


def test_rope_turns_integers_as_numbers_not_as_bits():
    x = np.arange(16).reshape(2, 8)  # on main: the int64 bits read as complex numbers
    out = rope(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, rope(x.astype(float)), atol=0)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1))


def test_a_float16_model_gives_finite_logits_close_to_float64():
    tokens = np.array([[1, 2, 3, 4, 5]])
    wide, narrow = tiny(d_model=16), tiny(d_model=16, dtype="float16")  # the same weights
    low = narrow.forward(tokens)  # on main: NaN (float16 pairs viewed as complex64)
    assert low.dtype == np.float16 and np.isfinite(low).all()
    assert np.abs(low - wide.forward(tokens)).max() < 0.02


@pytest.mark.parametrize("value, dtype", [(16, np.uint8), (50_000, np.int32), (12, np.int8)])
def test_rms_norm_of_integers_is_computed_in_float(value, dtype):
    x = np.full((2, 4), value, dtype=dtype)  # on main: uint8 gave 5059.6, int32 NaN
    np.testing.assert_allclose(RMSNorm(4).forward(x), 1.0, rtol=1e-6)


def test_rms_norm_of_float16_squares_in_float32():
    x = np.full((2, 4), 300.0, dtype=np.float16)  # 300**2 is beyond float16's 65504
    out = RMSNorm(4, dtype=np.float16).forward(x)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, 1.0, rtol=1e-3)


def test_rms_norm_refuses_values_whose_squares_overflow():
    with pytest.raises(ValueError, match=r"x has values whose squares overflow"):
        RMSNorm(4).forward(np.full((1, 4), 1e200))  # on main: zeros
    np.testing.assert_allclose(RMSNorm(4).forward(np.full((1, 4), 1e150)), 1.0)


@pytest.mark.parametrize("options, name", [({"n_kv_heads": 0}, "n_kv_heads"),
                                           ({"rope": "no"}, "rope"), ({"dtype": None}, "dtype"),
                                           ({"norm_first": "yes"}, "norm_first")])
def test_modern_block_refuses_what_it_silently_reinterpreted(options, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):  # on main: MHA, True, float64
        ModernBlock(8, 2, 16, rng(), **options)


def test_an_odd_head_width_with_rope_is_named_before_any_work():
    with pytest.raises(ValueError, match="head width d_model / n_heads = 3 must be even"):
        GroupedQueryAttention(6, 2, 1, rng())  # on main: "When changing to a larger dtype..."


def test_sigmoid_of_one_number():
    assert float(sigmoid(0.5)) == pytest.approx(1 / (1 + math.exp(-0.5)))  # on main: TypeError
    assert float(sigmoid(np.uint8(3))) == pytest.approx(1 / (1 + math.exp(-3)))  # not -3 = 253


# ── caches and generation ────────────────────────────────────────────────────────────────────


def test_caches_refuse_a_prompt_they_were_not_built_for():
    model = tiny()
    caches = [KVCache() for _ in model.decoder.layers]
    model.decode(np.array([[1, 2, 3]]), caches)
    with pytest.raises(ValueError, match="do not continue"):  # on main: logits 1.69 off
        model.decode(np.array([[4, 5, 6, 7]]), caches)
    fresh = [KVCache() for _ in model.decoder.layers]
    model.decode(np.array([[1, 2, 3]]), fresh)
    right = model.decode(np.array([[1, 2, 3, 7]]), fresh)  # the same prompt, continued
    np.testing.assert_allclose(right, model.decode(np.array([[1, 2, 3, 7]]))[:, 3:], atol=1e-12)


def test_caches_keep_their_own_copy_of_the_tokens():
    model, buffer = tiny(), np.array([[1, 2, 3, 4, 5]])
    caches = [KVCache() for _ in model.decoder.layers]
    model.decode(buffer[:, :3], caches)
    buffer[0, 0] = 9  # the prompt changed in place: the cached keys are another prompt's
    with pytest.raises(ValueError, match="do not continue"):
        model.decode(buffer[:, :4], caches)


def test_the_2017_decoder_caches_refuse_another_target_prefix_too():
    model = Transformer(9, 9, rng(), d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=12)
    memory, src_mask = model.encode(np.array([[3, 4, 5]]))
    caches = kv_caches(model.decoder)
    model.decode(np.array([[1, 4]]), memory, src_mask, caches)
    with pytest.raises(ValueError, match="do not continue"):
        model.decode(np.array([[1, 5, 6]]), memory, src_mask, caches)


@pytest.mark.parametrize("caches", [[KVCache()], [KVCache(), None], "caches",
                                    [KVCache(fixed=True), KVCache(fixed=True)]])
def test_decode_with_a_wrong_cache_list_names_it(caches):
    with pytest.raises(ValueError, match="kv_caches must be a list of 2"):
        tiny().decode(np.array([[1, 2]]), caches)  # on main: IndexError, AttributeError


def test_generate_refuses_picks_outside_the_vocabulary_and_a_negative_stop_id():
    with pytest.raises(ValueError, match=r"pick must return one token id in \[0, 11\)"):
        generate(tiny(), np.array([[1]]), 1, pick=lambda logits: np.array([15]))  # main: id 15
    with pytest.raises(ValueError, match="stop_id"):
        generate(tiny(), np.array([[1]]), 2, stop_id=-1)


def test_generate_checks_max_len_before_the_first_step():
    model, calls = tiny(), []
    decode = model.decode
    model.decode = lambda *a: calls.append(1) or decode(*a)
    with pytest.raises(ValueError, match="more than max_len=12"):
        generate(model, np.ones((1, 10), int), 4)  # on main: fails half-way, at position 13
    assert calls == []
    tokens, _ = generate(model, np.ones((1, 10), int), 3)  # 12 positions: fits
    assert tokens.shape == (1, 13)


def test_write_keeps_the_end_of_a_prompt_longer_than_the_context():
    from helpers.lm import write
    model = tiny()
    out = write(model, np.ones((1, 20), int), 3)  # 20 tokens, max_len 12: the last 6 are read
    assert out.shape == (1, 23)
    np.testing.assert_array_equal(out[:, :20], 1)


def test_greedy_decode_refuses_a_model_that_is_not_a_transformer():
    with pytest.raises(ValueError, match="model must be a Transformer"):
        greedy_decode(tiny(), np.array([[3, 4]]), 1, 2, 4)


# ── sampling and the lm helpers ──────────────────────────────────────────────────────────────


def test_sampling_refuses_what_it_got_silently_wrong():
    pick = sampler(rng())
    with pytest.raises(ValueError, match=r"pick takes logits of shape \(B, vocab\)"):
        pick(np.zeros(6))  # on main: six picks for one row
    logits = np.array([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="temperature"):
        next_token_probabilities(logits, 1e-309)  # on main: NaN
    with pytest.raises(ValueError, match="logits must be real numbers"):
        pick(np.full((1, 6), np.nan))  # on main: always token 0
    with pytest.raises(ValueError, match="logits must hold real numbers"):
        next_token_probabilities(logits + 1j)  # on main: the imaginary part dropped
    with pytest.raises(ValueError, match="a finite one in every row"):
        pick(np.full((1, 3), -np.inf))  # on main: the last token, always
    uniform = next_token_probabilities(np.zeros((1, 4)), 1e-309)  # 0 / 1e-309 = 0: fine
    np.testing.assert_allclose(uniform, 0.25)


def test_lm_helpers_refuse_what_they_got_silently_wrong():
    ids = np.arange(500) % 7
    with pytest.raises(ValueError, match=r"train_ids has ids in \[0, 1\], outside the vocabulary"):
        unigram_loss(np.array([0, 1]), np.array([0, 1]), 1)  # on main: vocab ignored
    with pytest.raises(ValueError, match="val_ids"):
        unigram_loss(np.array([0, 1]), np.array([-1]), 2)  # on main: -1 read as the last id
    with pytest.raises(ValueError, match="val_ids must hold at least one id"):
        unigram_loss(np.array([0, 1]), np.array([], int), 2)  # on main: NaN
    with pytest.raises(ValueError, match="train_fraction"):
        split(ids, 1.5)  # on main: (500, 0)
    with pytest.raises(ValueError, match="context"):
        windows(ids, rng(), 4, 0)  # on main: windows of shape (4, 0)
    with pytest.raises(ValueError, match="more than context=500 ids"):
        windows(ids[:100], rng(), 4, 500)  # on main: "high <= 0"
    with pytest.raises(ValueError, match="ids"):
        Characters("hello w").decode([-1])  # on main: 'w'
    with pytest.raises(ValueError, match="eval_every"):
        Recipe(eval_every=0)  # on main: accepted, then ZeroDivisionError in training


def test_flash_attention_with_no_key_is_refused_as_plain_attention_is():
    Q, K = np.ones((2, 4)), np.ones((0, 4))
    with pytest.raises(ValueError):
        scaled_dot_product_attention(Q, K, K)
    with pytest.raises(ValueError, match="at least one key"):
        flash_attention(Q, K, K, 2, 2)  # on main: zeros


# ── the loss, the optimisers and the schedule ────────────────────────────────────────────────


def test_cross_entropy_refuses_negative_or_too_large_targets_and_an_empty_batch():
    logits = np.zeros((2, 5))
    with pytest.raises(ValueError, match=r"targets has ids in \[-1, 0\]"):
        cross_entropy(logits, np.array([-1, 0]))  # on main: -1 read as class 4
    with pytest.raises(ValueError, match="targets"):
        cross_entropy(logits, np.array([5, 0]))  # on main: IndexError
    with pytest.raises(ValueError, match="targets has no position to count"):
        cross_entropy(np.zeros((0, 5)), np.zeros(0, int))  # on main: -0.0
    loss, _ = cross_entropy(logits, np.array([-100, 3]), ignore_id=-100)  # PyTorch's ignore id
    assert loss == pytest.approx(math.log(5))


def test_optimisers_and_schedule_refuse_values_that_wreck_the_weights():
    with pytest.raises(ValueError, match="beta1"):
        Adam({"w": np.ones(3)}, beta1=1.0)  # on main: NaN weights after one step
    for lr in (float("nan"), -1e-3):
        with pytest.raises(ValueError, match=r"\blr\b"):
            AdamW({"w": np.ones((2, 2))}).step({"w": np.ones((2, 2))}, lr)
    for decay in (float("nan"), -0.1):
        with pytest.raises(ValueError, match="weight_decay"):
            AdamW({"w": np.ones((2, 2))}, weight_decay=decay)
    with pytest.raises(ValueError, match="d_model"):
        lrate(10, -4, 4000)  # on main: a complex number


def test_a_numpy_float_is_accepted_wherever_a_python_float_is():
    clipped, norm = clip_by_global_norm({"w": np.full(4, 3.0)}, np.float32(1.0))  # main: refused
    assert norm == pytest.approx(6.0) and np.linalg.norm(clipped["w"]) == pytest.approx(1.0)
    Adam({"w": np.ones(2)}, beta1=np.float32(0.9)).step({"w": np.ones(2)}, np.float16(0.1))
    assert cross_entropy(np.zeros((1, 4)), np.array([1]), label_smoothing=np.float64(0.1))[0] > 0


# ── training ─────────────────────────────────────────────────────────────────────────────────


def training(model, rate, **options):
    data = np.random.default_rng(3).integers(0, 11, (8, 7))

    def batches(step):
        return (data[:, :-1],), data[:, 1:]
    return train(model, batches, cross_entropy, lambda step: rate(step), **options)


def test_train_refuses_no_steps():
    with pytest.raises(ValueError, match="steps"):
        training(tiny(), lambda step: 1e-3, steps=-1)  # on main: an empty history


def test_a_diverged_training_keeps_its_history_and_the_weights_before_the_failing_step():
    model, saved, data = tiny(), {}, np.random.default_rng(3).integers(0, 11, (8, 7))

    def exploding(logits, targets):  # step 4's gradients overflow
        saved.update({k: v.copy() for k, v in model.parameters().items()})
        value, d_logits = cross_entropy(logits, targets)
        return value, d_logits * (1e300 if exploding.calls == 3 else 1.0)
    exploding.calls = 0

    def counted(history, model):
        exploding.calls += 1
    with pytest.raises(TrainingDiverged, match="step 4: the gradients' global norm is inf") \
            as caught:  # on main: a ValueError without the history
        train(model, lambda step: ((data[:, :-1],), data[:, 1:]), exploding, lambda s: 1e-3,
              steps=10, callback=counted)
    history = caught.value.history
    assert len(history["loss"]) == 3 and all(np.isfinite(history["loss"]))
    for name, p in model.parameters().items():  # as they were before step 4
        np.testing.assert_array_equal(p, saved[name])


def test_an_update_that_is_not_finite_changes_no_parameter():
    params = {"w": np.ones(2)}
    adam = Adam(params)
    adam.m_flat[:] = 1e300  # a first moment near the top of float64
    with pytest.raises(TrainingDiverged, match="Adam's update is not finite"), \
            np.errstate(over="ignore"):
        adam.step({"w": np.ones(2)}, 1e10)
    np.testing.assert_array_equal(params["w"], 1.0)


def test_a_non_finite_loss_or_gradient_stops_training_with_the_history():
    model = tiny()

    def nan_loss(logits, targets):
        value, d = cross_entropy(logits, targets)
        return (float("nan") if len(seen) >= 2 else value), d
    seen = []
    with pytest.raises(TrainingDiverged, match="step 3: the loss is nan") as caught:
        data = np.ones((2, 5), int)
        train(model, lambda step: ((data[:, :-1],), data[:, 1:]), nan_loss, lambda s: 1e-3,
              steps=5, callback=lambda history, model: seen.append(1))
    assert len(caught.value.history["loss"]) == 2
    assert isinstance(caught.value, ValueError)  # code that caught ValueError still does


def test_a_loss_that_does_not_move_is_reported_in_the_history_and_by_the_monitor():
    monitor = tw.TrainingMonitor(125, every=50)
    history = training(tiny(), lambda step: 1e-12, steps=125, eval_every=25,
                       evaluate=lambda model: {"accuracy": 0.0},
                       callback=monitor.update)  # a learning rate far too small
    assert history["stalled"] == 100  # the fourth evaluation: three after the first; the
    assert "has not moved from its start" in monitor.label.value  # fifth keeps it
    moving = training(tiny(), lambda step: 3e-2, steps=100, eval_every=25,
                      evaluate=lambda model: {"accuracy": 0.0})  # judged at step 100
    assert "stalled" not in moving and moving["loss"][-1] < 0.8 * moving["loss"][0]
    quiet = training(tiny(), lambda step: 1e-12, steps=20, eval_every=1)  # no evaluations:
    assert "stalled" not in quiet  # nothing is judged (a slow warm-up is no stall; judged, it
    # would be a stall from step 4 on)


def test_a_huge_rate_without_clipping_sits_at_a_uniform_guess_and_is_reported():
    """The issue's case: notebook 07's model at 40 times its peak rate, no clipping."""
    from helpers.reversal import VOCAB_SIZE, train_reverse
    _, history, _ = train_reverse(0, factor=20, clip=None, budget=200, steps=300,
                                  eval_every=50)
    assert history["accuracy"] == [0.0] * 4 and history["stalled"] == 200
    assert abs(np.mean(history["loss"][-50:]) - math.log(VOCAB_SIZE)) < 0.2  # about ln V


def test_loss_stalled_against_hand_made_curves():
    flat = [2.0 + 0.01 * (-1) ** i for i in range(200)]
    assert loss_stalled(flat, 50) and not loss_stalled(flat[:150], 50)  # 3 stretches after 1
    falling = [2.0 * 0.995**i for i in range(200)]
    assert not loss_stalled(falling, 50)
    assert not loss_stalled([2.0] * 50 + [1.0] * 150, 50)
