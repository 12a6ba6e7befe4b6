"""Notebook 10's character RNN (helpers/rnn.py): its backward against central differences, its
forward against an independent loop, causality, the state carried between calls, its errors,
training with helpers.lm.train_lm, and the committed weights and their recorded figures."""

import json

import numpy as np
import pytest

from helpers.data import RNN_MANIFEST, RNN_MODEL, load_rnn, load_shakespeare
from helpers.lm import Characters, Recipe, split, split_loss, train_lm
from helpers.rnn import CharRNN, CharRNNConfig, rnn_write
from helpers.training import cross_entropy, gradient_check

SMALL = {"d_embed": 5, "d_hidden": 6, "max_len": 16, "dtype": "float64"}


def small(rng, vocab=7):
    return CharRNN(vocab, rng, **SMALL)


def test_every_gradient_matches_central_differences(rng):
    model = small(rng)
    tokens, targets = rng.integers(0, 7, (3, 9)), rng.integers(0, 7, (3, 9))
    for p in model.parameters().values():  # nonzero biases: every term of backward counts
        p += 0.3 * rng.standard_normal(p.shape)
    loss, d_logits = cross_entropy(model.forward(tokens), targets)
    d_tokens, grads = model.backward(d_logits)
    assert d_tokens is None and list(grads) == list(model.parameters())

    def f():
        return cross_entropy(model.forward(tokens), targets)[0]
    overall, per_name = gradient_check(f, model.parameters(), grads)
    assert set(per_name) == set(CharRNN.param_names)
    assert max(per_name.values()) < 1e-6, per_name


def test_the_forward_is_a_gru_written_another_way(rng):
    """One sequence at a time, the three gates as one matrix product of [x, h] (Cho et al.'s
    notation with the input and the state side by side), the sigmoid written out."""
    model = small(rng)
    for p in model.parameters().values():
        p += 0.3 * rng.standard_normal(p.shape)
    tokens = rng.integers(0, 7, (2, 11))
    logits = model.forward(tokens)
    P = model.parameters()
    W = np.concatenate([np.concatenate([P[f"W_{g}"], P[f"U_{g}"]]) for g in "zr"], axis=1)
    for b in range(2):
        h = np.zeros(6)
        for t in range(11):
            x = P["embed"][tokens[b, t]]
            z, r = np.split(1 / (1 + np.exp(-(np.concatenate([x, h]) @ W
                                              + np.concatenate([P["b_z"], P["b_r"]])))), 2)
            c = np.tanh(np.concatenate([x, r * h]) @ np.concatenate([P["W_h"], P["U_h"]])
                        + P["b_h"])
            h = (1 - z) * c + z * h
            np.testing.assert_allclose(logits[b, t], h @ P["W_out"] + P["b_out"], atol=1e-12)


def test_position_t_reads_tokens_up_to_t_only(rng):
    model = small(rng)
    tokens = rng.integers(0, 7, (2, 12))
    before = model.forward(tokens)
    for t in range(11):
        changed = tokens.copy()
        changed[:, t + 1:] = (changed[:, t + 1:] + 1) % 7
        after = model.forward(changed)
        np.testing.assert_array_equal(after[:, :t + 1], before[:, :t + 1])
        assert not np.allclose(after[:, t + 1:], before[:, t + 1:])


def test_the_state_carries_over_between_calls_and_writing_is_greedy(rng):
    model = small(rng)
    tokens = rng.integers(0, 7, (2, 10))
    whole = model.forward(tokens)
    first = model.forward(tokens[:, :4])
    rest = model.forward(tokens[:, 4:], h0=model.cache.h[:, -1])
    np.testing.assert_allclose(np.concatenate([first, rest], axis=1), whole, atol=1e-12)
    out = rnn_write(model, tokens[:, :3], 20)
    assert out.shape == (2, 23) and model.cache is None
    np.testing.assert_array_equal(out[:, :3], tokens[:, :3])
    logits = model.forward(out[:, :-1])  # each new token is the most likely after its prefix
    np.testing.assert_array_equal(logits[:, 2:].argmax(axis=-1), out[:, 3:])


def test_dtype_is_kept(rng):
    model = CharRNN(7, rng, d_embed=4, d_hidden=5)  # float32 by default, as the Transformer
    logits = model.forward(rng.integers(0, 7, (2, 3)))
    _, grads = model.backward(np.ones_like(logits))
    assert logits.dtype == np.float32 and {g.dtype for g in grads.values()} == {np.dtype("f4")}


@pytest.mark.parametrize("tokens, match", [
    (np.zeros((2, 3)), "tokens must be integer ids with 2 axes"),
    (np.zeros(3, int), "tokens must be integer ids with 2 axes"),
    (np.full((1, 3), 7), r"outside the vocabulary \[0, 7\)"),
    (np.full((1, 3), -1), "outside the vocabulary"),
    (np.zeros((1, 0), int), "at least one id"),
])
def test_bad_tokens_are_refused(rng, tokens, match):
    with pytest.raises(ValueError, match=match):
        small(rng).forward(tokens)


def test_bad_state_gradient_and_sizes_are_refused(rng):
    model = small(rng)
    with pytest.raises(ValueError, match="needs the cache of a forward"):
        model.backward(np.zeros((1, 2, 7)))
    with pytest.raises(ValueError, match=r"h0 must have shape \(2, 6\), got \(2, 5\)"):
        model.forward(np.zeros((2, 3), int), h0=np.zeros((2, 5)))
    model.forward(np.zeros((2, 3), int))
    with pytest.raises(ValueError, match=r"d_logits must have shape \(2, 3, 7\), got \(2, 3\)"):
        model.backward(np.zeros((2, 3)))
    for bad, match in (({"d_hidden": 0}, "d_hidden"), ({"dtype": "int32"}, "dtype"),
                       ({"max_len": 2.5}, "max_len")):
        with pytest.raises(ValueError, match=match):
            CharRNNConfig(7, **bad)
    with pytest.raises(ValueError, match="pick must be a function"):
        rnn_write(model, np.zeros((1, 2), int), 3, pick="greedy")


def test_train_lm_trains_it(rng):
    text = "to be or not to be, that is the question. " * 40
    chars = Characters(text)
    train_ids, val_ids = split(chars.encode(text))
    model = CharRNN(len(chars), rng, d_embed=8, d_hidden=16, max_len=16, dtype="float64")
    start = split_loss(model, val_ids, context=16)
    recipe = Recipe(steps=60, batch=8, context=16, peak=1e-2, warmup=5, eval_every=30)
    history = train_lm(model, train_ids, val_ids, recipe)
    assert len(history["loss"]) == 60 and history["eval_step"] == [30, 60]
    assert split_loss(model, val_ids, context=16) < start - 1.0


@pytest.fixture(scope="module")
def committed():
    return load_rnn()


def test_the_committed_rnn_scores_its_recorded_loss(committed):
    """The stored weights (float16, widened to float32) score the loss recorded for them on
    the slice notebook 10 recomputes; the record's recipe is the Transformer's."""
    model, info = committed
    training = info["training"]
    text = load_shakespeare()
    chars = Characters(text)
    assert training["chars"] == "".join(chars.chars)
    lm = json.loads(RNN_MANIFEST.with_name("lm_model.json").read_text(encoding="utf-8"))
    assert training["recipe"] == lm["training"]["recipe"] and training["seed"] == 0
    params = model.parameters()
    assert sum(p.size for p in params.values()) == training["parameters"] == 812_993
    assert {p.dtype for p in params.values()} == {np.dtype(np.float32)}
    assert RNN_MODEL.stat().st_size < 2_000_000
    _, val_ids = split(chars.encode(text))
    head = split_loss(model, val_ids[:16_385], context=64)
    assert head == pytest.approx(training["val_loss_first_16384_characters"], abs=1e-4)
    assert training["iterations"] == 5000 and sorted(map(int, training["val_estimates"])) == \
        list(range(500, 5001, 500))


def test_the_rnn_loader_refuses_a_changed_file(tmp_path):
    bad = tmp_path / RNN_MODEL.name
    raw = bytearray(RNN_MODEL.read_bytes())
    raw[-100] ^= 1
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="SHA-256"):
        load_rnn(bad, RNN_MANIFEST)
