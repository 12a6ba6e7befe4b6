"""Notebook 10's language model pieces (helpers/lm.py) and its data: each against an independent
computation, its properties and its errors; the committed text and model, checked."""

import gzip
import math
from collections import Counter

import numpy as np
import pytest

from helpers.data import SHAKESPEARE, SHAKESPEARE_SHA256, load_shakespeare
from helpers.decoding import generate
from helpers.lm import (
    NANOGPT_CPU,
    AdamW,
    Characters,
    bigram_loss,
    cosine_schedule,
    estimate_loss,
    head_pattern_shares,
    known_word_share,
    next_token_probabilities,
    sampler,
    speaker_line_share,
    split,
    split_loss,
    unigram_loss,
    windows,
    write,
)
from helpers.modern import TODAY, DecoderOnly

TEXT = load_shakespeare()


def test_the_text_is_the_original_and_a_changed_byte_is_refused(tmp_path):
    assert len(TEXT) == 1_115_394 and len(set(TEXT)) == 65
    assert TEXT.startswith("First Citizen:\nBefore we proceed any further")
    raw = bytearray(gzip.decompress(SHAKESPEARE.read_bytes()))
    raw[1000] ^= 1
    bad = tmp_path / "t.txt.gz"
    bad.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(ValueError, match="SHA-256"):
        load_shakespeare(bad)
    assert SHAKESPEARE_SHA256.startswith("86c4e6aa")


def test_characters_round_trip_and_refuse_unknown_ones():
    chars = Characters(TEXT)
    assert len(chars) == 65 and chars.chars[0] == "\n" and chars.chars[1] == " "
    sample = TEXT[:500]
    assert chars.decode(chars.encode(sample)) == sample
    assert chars.encode(sample).dtype == np.int64
    with pytest.raises(ValueError, match="not in the vocabulary"):
        chars.encode("café")


def test_the_split_is_nanogpts():
    ids = np.arange(1_115_394)
    train, val = split(ids)
    assert len(train) == int(0.9 * 1_115_394) == 1_003_854 and len(val) == 111_540
    assert train[-1] + 1 == val[0]


def test_windows_are_the_text_and_the_text_one_later(rng):
    data = np.arange(100) * 3
    x, y = windows(data, rng, 7, 10)
    assert x.shape == y.shape == (7, 10)
    assert np.array_equal(y, x + 3) and (x.min() >= 0) and (y.max() <= 297)
    assert np.all(np.diff(x, axis=1) == 3)  # consecutive characters


def test_reference_losses_against_counting():
    text = "abracadabra, abracadabra!"
    chars = Characters(text)
    ids = chars.encode(text)
    train, val = ids[:15], ids[15:]
    V = len(chars)
    unigram = Counter(train.tolist())
    expected = -np.mean([math.log((unigram[c] + 1) / (len(train) + V)) for c in val])
    assert unigram_loss(train, val, V) == pytest.approx(expected, rel=1e-12)
    pairs, firsts = Counter(zip(train[:-1].tolist(), train[1:].tolist())), Counter(train[:-1].tolist())
    expected = -np.mean([math.log((pairs[(a, b)] + 1) / (firsts[a] + V))
                         for a, b in zip(val[:-1], val[1:])])
    assert bigram_loss(train, val, V) == pytest.approx(expected, rel=1e-12)


def test_adamw_decays_matrices_only():
    params = {"W": np.full((2, 3), 2.0), "b": np.full(3, 2.0)}
    opt = AdamW(params, weight_decay=0.1)
    opt.step({"W": np.zeros((2, 3)), "b": np.zeros(3)}, lr=0.5)  # no gradient: decay alone
    assert np.allclose(params["W"], 2.0 * (1 - 0.5 * 0.1)) and np.allclose(params["b"], 2.0)


def test_cosine_schedule_is_nanogpts():
    rate = cosine_schedule(1e-3, 100, 2000, 1e-4)
    assert rate(0) == pytest.approx(1e-3 / 101) and rate(99) == pytest.approx(1e-3 * 100 / 101)
    assert rate(100) == pytest.approx(1e-3) and rate(2000) == pytest.approx(1e-4)
    assert rate(1050) == pytest.approx(1e-4 + 0.5 * 0.9e-3) and rate(5000) == 1e-4
    assert all(rate(i) >= rate(i + 1) for i in range(100, 2001))


def test_a_model_that_knows_nothing_scores_log_vocab(rng):
    model = DecoderOnly(65, rng, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=64,
                        tie_output=False)
    model.W_out[:] = 0.0  # every logit 0: the uniform distribution
    data = Characters(TEXT).encode(TEXT[:5000])
    assert estimate_loss(model, data, rng, batches=2) == pytest.approx(math.log(65), rel=1e-12)
    assert split_loss(model, data, context=64) == pytest.approx(math.log(65), rel=1e-12)
    assert all(m.cache is None for m in model.modules())


def test_train_lm_follows_the_recipe_and_times_training_alone():
    import time

    from helpers.lm import Recipe, train_lm

    ids = Characters(TEXT).encode(TEXT[:20000])
    train_ids, val_ids = split(ids)
    recipe = Recipe(steps=4, batch=2, context=8, peak=1e-2, warmup=2, floor=1e-3, eval_every=2)
    calls = []

    def slow(history, model):  # a callback's time (a plot, say) is not training time
        calls.append(len(history["loss"]))
        time.sleep(0.05)

    runs = []
    for _ in range(2):
        model = DecoderOnly(65, np.random.default_rng(3), d_model=8, n_heads=2, d_ff=16,
                            n_layers=1, max_len=8, tie_output=True)
        runs.append(train_lm(model, train_ids, val_ids, recipe, seed=5, callback=slow))
    history = runs[0]
    rate = cosine_schedule(1e-2, 2, 4, 1e-3)
    assert history["lr"] == pytest.approx([rate(it) for it in range(4)])
    assert history["eval_step"] == [2, 4] and len(history["val"]) == len(history["train"]) == 2
    assert calls == [1, 2, 3, 4] * 2 and history["seconds"] < 0.15  # four sleeps were 0.2 s
    assert runs[0]["loss"] == runs[1]["loss"] and runs[0]["val"] == runs[1]["val"]  # seeded


def test_next_token_probabilities(rng):
    logits = rng.standard_normal((3, 10)) * 2
    p = next_token_probabilities(logits)
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert np.allclose(p, softmax, rtol=0, atol=1e-15) and np.allclose(p.sum(-1), 1)
    top = next_token_probabilities(logits, top_k=3)
    assert np.all((top > 0).sum(-1) == 3)
    kept = np.argsort(logits, axis=-1)[:, -3:]
    assert np.allclose(np.take_along_axis(top, kept, -1).sum(-1), 1)
    cold = next_token_probabilities(logits, temperature=1e-3)
    assert np.array_equal(cold.argmax(-1), logits.argmax(-1)) and cold.max(-1).min() > 0.99
    hot = next_token_probabilities(logits, temperature=100.0)
    assert np.abs(hot - 0.1).max() < 0.01
    with pytest.raises(ValueError, match="temperature"):
        next_token_probabilities(logits, temperature=0)
    with pytest.raises(ValueError, match="top_k"):
        next_token_probabilities(logits, top_k=0)


def test_the_sampler_draws_from_the_probabilities():
    logits = np.log(np.array([[0.5, 0.3, 0.2, 0.0]]) + 1e-300)
    pick = sampler(np.random.default_rng(0))
    rows = np.tile(logits, (100, 1))  # 20,000 draws: 200 calls of 100 rows each
    draws = np.concatenate([pick(rows) for _ in range(200)])
    share = np.bincount(draws, minlength=4) / len(draws)
    assert np.abs(share - [0.5, 0.3, 0.2, 0.0]).max() < 0.015 and share[3] == 0
    assert not np.array_equal(draws[:100], draws[100:200])  # every call draws anew
    greedy = sampler(np.random.default_rng(1), top_k=1)
    assert all(greedy(logits)[0] == 0 for _ in range(50))
    again = [sampler(np.random.default_rng(5))(np.tile(logits, (4, 1))) for _ in range(2)]
    assert np.array_equal(*again)  # the same generator, the same draws


def test_write_is_generate_within_the_context_and_continues_past_it(rng):
    model = DecoderOnly(20, rng, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=16, **TODAY)
    prompt = rng.integers(0, 20, (2, 4))
    assert np.array_equal(write(model, prompt, 10), generate(model, prompt, 10)[0])
    long = write(model, prompt, 40)
    assert long.shape == (2, 44) and np.array_equal(long[:, :4], prompt)


def test_what_was_learned_measures():
    words = {"the", "king", "lord"}
    assert known_word_share("The king, my lord! Thy kingg", words) == pytest.approx(2 / 5)
    assert known_word_share("a I O", words) == 0.0  # no word of three letters
    text = "KING RICHARD III:\nMy lord.\n\nFirst Citizen:\nspeak, speak.\nnot a: name\n"
    assert speaker_line_share(text) == pytest.approx(2 / 5)
    verse = "\nMENENIUS:\nWe hate alike:\nLet us alone.\n"  # a colon ends a line of verse
    assert speaker_line_share(verse) == pytest.approx(1 / 3)


def test_head_pattern_shares_on_hand_made_heads():
    text = "ab cde\nfgh"                 # words start at 0 (unseen: no gap before it), 3 and 7
    T = len(text)
    # word-start queries two or more characters past their word's start: 5 -> 3, 6 -> 3, 9 -> 7;
    # line-start queries: 9 -> 7. A previous-character head reads none of these
    previous = np.eye(T, k=-1)
    previous[0, 0] = 1.0
    assert head_pattern_shares(previous, text) == {"previous": 1.0, "word start": 0.0,
                                                   "line start": 0.0}
    word = np.zeros((T, T))
    for t in range(T):
        word[t, max(text.rfind(" ", 0, t), text.rfind("\n", 0, t)) + 1] = 1.0
    assert head_pattern_shares(word, text) == {"previous": pytest.approx(3 / 9),  # t = 1, 4, 8
                                               "word start": 1.0, "line start": 1.0}
    window_start = np.zeros((T, T))
    window_start[:, 0] = 1.0           # position 0 is where the window was cut, not a known start
    assert head_pattern_shares(window_start, text) == {"previous": pytest.approx(1 / 9),
                                                       "word start": 0.0, "line start": 0.0}
    shares = head_pattern_shares(np.eye(3), "abc")  # no gap at all: nothing to measure
    assert math.isnan(shares["word start"]) and math.isnan(shares["line start"])


def test_head_pattern_shares_of_every_head_at_once_equal_one_head_at_a_time(rng):
    text = "To be, or not\nto be: that is\nthe question"
    weights = rng.random((2, 3, len(text), len(text)))               # (layers, heads, T, T)
    together = head_pattern_shares(weights, text)
    for layer in range(2):
        for head in range(3):
            alone = head_pattern_shares(weights[layer, head], text)
            for kind, value in alone.items():
                assert together[kind][layer, head] == pytest.approx(value, rel=1e-12)
    nothing = head_pattern_shares(np.ones((2, 3, 3, 3)), "abc")
    assert nothing["word start"].shape == (2, 3) and np.isnan(nothing["line start"]).all()
    with pytest.raises(ValueError, match="weights must end in"):
        head_pattern_shares(weights, text[:-1])


def test_the_nanogpt_recipe_is_the_documented_one():
    r = NANOGPT_CPU
    assert (r.steps, r.batch, r.context, r.peak, r.floor, r.warmup, r.beta2, r.weight_decay,
            r.clip, r.eval_every) == (2000, 12, 64, 1e-3, 1e-4, 100, 0.99, 0.1, 1.0, 250)


# ── the committed model (data/lm_model.npz) ──────────────────────────────────────────────────


@pytest.fixture(scope="module")
def committed():
    from helpers.data import load_lm

    return load_lm()


def test_the_committed_model_is_lm_config_in_float32(committed):
    from helpers.lm import LM_CONFIG

    model, info = committed
    assert model.config == LM_CONFIG and info["training"]["chars"] == "".join(Characters(TEXT).chars)
    params = model.parameters()
    assert sum(p.size for p in params.values()) == 802_048
    assert {p.dtype for p in params.values()} == {np.dtype(np.float32)}


def test_the_committed_model_scores_its_recorded_final_estimate(committed):
    """Replays the training run's evaluation generator (seed + 1, nine evaluations of 20 val
    and 20 train batches drawn before the last) and recomputes the last validation estimate:
    the committed weights are the ones that training ended with; and the loss on the slice of the
    validation split that notebook 10 recomputes."""
    from helpers.lm import Recipe

    model, info = committed
    training = info["training"]
    recipe = Recipe(**training["recipe"])
    chars = Characters(TEXT)
    train_ids, val_ids = split(chars.encode(TEXT))
    rng = np.random.default_rng(training["seed"] + 1)
    for _ in range(recipe.steps // recipe.eval_every - 1):
        for data in (val_ids, train_ids):
            for _ in range(20):
                windows(data, rng, recipe.batch, recipe.context)
    last = estimate_loss(model, val_ids, rng, batch=recipe.batch, context=recipe.context)
    assert last == pytest.approx(training["val_estimates"][str(recipe.steps)], abs=1e-4)
    bigram = bigram_loss(train_ids, val_ids, len(chars))
    assert training["val_loss_full_split"] < last + 0.05 and bigram > last + 0.9
    # the slice notebook 10 recomputes instead of the whole split
    head = split_loss(model, val_ids[:16_385], context=recipe.context)
    assert head == pytest.approx(training["val_loss_first_16384_characters"], abs=1e-4)


def test_the_committed_model_generates_the_same_with_and_without_the_cache(committed):
    model, _ = committed
    prompt = Characters(TEXT).encode("ROMEO:\n")[None]
    cached, logits_cached = generate(model, prompt, 30)
    plain, logits_plain = generate(model, prompt, 30, use_cache=False)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(logits_cached, logits_plain, atol=1e-4)  # float32 rounding


def test_the_lm_loaders_refuse_changed_files(tmp_path):
    import json
    import shutil

    from helpers.data import LM_MANIFEST, LM_MODEL, LM_RUNS, load_models, load_runs

    raw = bytearray(LM_MODEL.read_bytes())
    raw[len(raw) // 2] ^= 1
    (tmp_path / "m.npz").write_bytes(bytes(raw))
    shutil.copy(LM_MANIFEST, tmp_path / "m.json")
    with pytest.raises(ValueError, match="SHA-256"):
        load_models(tmp_path / "m.npz", tmp_path / "m.json", "regenerate")
    runs = json.loads(LM_RUNS.read_text())
    runs["nanogpt_reference"]["val"] = 1.0  # a flattering edit
    (tmp_path / "r.json").write_text(json.dumps(runs))
    with pytest.raises(ValueError, match="SHA-256"):
        load_runs(tmp_path / "r.json", LM_MANIFEST)


def test_the_recorded_comparison_is_consistent():
    from helpers.data import LM_MANIFEST, LM_RUNS, load_runs

    record = load_runs(LM_RUNS, LM_MANIFEST)
    runs = record["runs"]
    numpy_today = runs["NumPy, today's blocks"]
    torch_today = runs["PyTorch, today's blocks (the NumPy run's initial weights)"]
    np.testing.assert_allclose(torch_today["val"], numpy_today["val"], atol=1e-5)
    assert all(r["iterations"] == NANOGPT_CPU.steps for r in runs.values())
    assert numpy_today["val"][-1] < record["nanogpt_reference"]["val"] == 1.886
