"""helpers/training.py (schedule, Adam, loss, dropout, the training loop), helpers/reversal.py
(the reversal task), helpers/data.py and the notebook 07 widgets. Gradient checks are in
tests/test_gradients.py, the module protocol in tests/test_module.py."""

import json
import shutil

import numpy as np
import pytest

from helpers import reversal, training
from helpers import widgets as tw
from helpers.data import REVERSE_MANIFEST, REVERSE_MODEL, load_reverse_model, load_runs, sha256
from helpers.decoding import greedy_decode
from helpers.module import Module, add_to_class
from helpers.reversal import (
    BOS,
    EOS,
    MAX_LEN,
    PAD,
    REVERSE_CONFIG,
    anti_diagonal_mass,
    exact_match,
    make_targets,
    reverse_task,
    sample_sequences,
    train_reverse,
    trained_sequences,
)
from helpers.training import (
    Adam,
    clip_by_global_norm,
    cross_entropy,
    embedding_backward,
    first_below,
    log_softmax,
    lrate,
    lrate_linear_decay,
    train,
)
from helpers.transformer import Dropout, Transformer, TransformerConfig, set_training


def dropout_layers(model):
    return [m for m in model.modules() if isinstance(m, Dropout)]

# ── schedule ─────────────────────────────────────────────────────────────────────────────────


def test_lrate_closed_form_and_peak_at_warmup():
    d_model, warmup = 512, 4000
    steps = np.arange(1, 20001)
    lr = lrate(steps, d_model, warmup)
    assert np.argmax(lr) + 1 == warmup
    assert lr.max() == pytest.approx(1 / np.sqrt(d_model * warmup), rel=1e-12)
    assert lrate(100, d_model, warmup) == pytest.approx(100 * 512**-0.5 * 4000**-1.5, rel=1e-12)
    assert lrate(16000, d_model, warmup) == pytest.approx(512**-0.5 / 16000**0.5, rel=1e-12)
    assert np.all(np.diff(lr[:warmup]) > 0) and np.all(np.diff(lr[warmup:]) < 0)
    assert lrate(100, 32, 100, factor=0.5) == pytest.approx(0.5 / np.sqrt(3200), rel=1e-12)


def test_lrate_refuses_step_zero():
    with pytest.raises(ValueError, match="step counts from 1"):
        lrate(0, 512, 4000)


def test_linear_decay_follows_the_warm_up_then_a_straight_line_to_zero():
    steps = np.arange(1, 701)
    lr = lrate_linear_decay(steps, 32, 100, 600, factor=0.5)
    np.testing.assert_allclose(lr[:100], lrate(steps[:100], 32, 100, factor=0.5), rtol=1e-15)
    peak = 0.5 / np.sqrt(32 * 100)
    assert lr.max() == pytest.approx(peak, rel=1e-15) and np.argmax(lr) + 1 == 100
    assert lr[349] == pytest.approx(peak * 0.5, rel=1e-12)  # step 350: half-way down
    assert np.all(lr[599:] == 0) and np.all(np.diff(lr[99:600]) < 0)
    # the paper's rate at 6 x warm-up is still sqrt(1/6) = 41% of its peak
    assert lrate(600, 32, 100) / lrate(100, 32, 100) == pytest.approx(6 ** -0.5, rel=1e-12)
    with pytest.raises(ValueError, match="total must be larger than warmup"):
        lrate_linear_decay(5, 32, 100, 100)


def test_clipping_keeps_the_direction_and_caps_the_length():
    grads = {"a": np.array([3.0, 0.0], dtype=np.float32), "b": np.array([[4.0]], np.float32)}
    clipped, norm = clip_by_global_norm(grads, 2.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(clipped["a"], [1.2, 0.0], rtol=1e-6)
    np.testing.assert_allclose(clipped["b"], [[1.6]], rtol=1e-6)
    assert clipped["a"].dtype == np.float32  # the scale does not promote float32
    same, norm = clip_by_global_norm(grads, 10.0)
    assert same is grads and norm == pytest.approx(5.0)
    assert clip_by_global_norm(grads, None)[0] is grads


# ── Adam ─────────────────────────────────────────────────────────────────────────────────────


def test_adam_matches_a_hand_computation():
    p = np.array([1.0, -2.0])
    opt = Adam({"p": p})
    g1, g2 = np.array([0.5, -1.0]), np.array([0.1, 0.3])
    opt.step({"p": g1}, 0.01)
    # step 1: m_hat = g, v_hat = g^2, so the update is lr * sign(g) (up to eps)
    np.testing.assert_allclose(p, [1.0 - 0.01, -2.0 + 0.01], rtol=0, atol=1e-9)
    opt.step({"p": g2}, 0.02)
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.98 * 0.02 * g1**2 + 0.02 * g2**2
    m_hat, v_hat = m / (1 - 0.9**2), v / (1 - 0.98**2)
    after_1 = np.array([1.0, -2.0]) - 0.01 * g1 / (np.abs(g1) + 1e-9)
    expected = after_1 - 0.02 * m_hat / (np.sqrt(v_hat) + 1e-9)
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-15)
    assert opt.t == 2


def test_adam_updates_the_model_in_place():
    model = Transformer(5, 5, np.random.default_rng(0), d_model=8, n_heads=2, d_ff=8,
                        n_layers=1, max_len=8)
    before = model.encoder.layers[0].ffn.W_1.copy()
    opt = Adam(model.parameters())
    opt.step({name: np.ones_like(p) for name, p in model.parameters().items()}, 1e-3)
    np.testing.assert_allclose(model.encoder.layers[0].ffn.W_1, before - 1e-3, atol=1e-12)


# ── loss ─────────────────────────────────────────────────────────────────────────────────────


def test_cross_entropy_closed_forms():
    V = 5
    loss, _ = cross_entropy(np.zeros((3, V)), np.array([0, 1, 2]))
    assert loss == pytest.approx(np.log(V))  # uniform prediction
    logits = np.array([[2.0, 0.5, -1.0]])
    p = np.exp(logits) / np.exp(logits).sum()
    eps = 0.3
    q = np.array([1 - eps + eps / 3, eps / 3, eps / 3])
    loss, d = cross_entropy(logits, np.array([0]), label_smoothing=eps)
    assert loss == pytest.approx(-(q * np.log(p)).sum(), rel=1e-12)
    np.testing.assert_allclose(d, p - q, atol=1e-15)
    # the floor: predicting q itself gives the entropy of q, the smallest possible loss
    floor, _ = cross_entropy(np.log(q)[None], np.array([0]), label_smoothing=eps)
    assert floor == pytest.approx(-(q * np.log(q)).sum(), rel=1e-12)


def test_label_smoothing_stays_finite_with_extreme_logits():
    for dtype in (np.float64, np.float32):
        logits = np.array([[1e4, -1e4, 0.0], [-1e30, 1e30, 0.0]], dtype=dtype)
        with np.errstate(over="raise", divide="raise", invalid="raise"):  # underflow is fine
            loss, d = cross_entropy(logits, np.array([1, 0]), label_smoothing=0.1)
            log_p = log_softmax(logits)
        assert np.isfinite(loss) and np.all(np.isfinite(d)) and np.all(np.isfinite(log_p))
        assert loss > 1e3  # confidently wrong costs a lot, but a finite lot


def test_cross_entropy_ignores_padding():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 4, 6))
    targets = np.array([[3, 4, 5, 0], [4, 0, 0, 0]])
    loss, d = cross_entropy(logits, targets, ignore_id=0)
    assert np.all(d[targets == 0] == 0)
    other = logits.copy()
    other[targets == 0] = 100.0  # whatever the model says at padding changes nothing
    assert cross_entropy(other, targets, ignore_id=0)[0] == pytest.approx(loss, rel=1e-14)
    kept = logits[targets != 0]
    assert loss == pytest.approx(cross_entropy(kept, targets[targets != 0])[0], rel=1e-14)


def test_cross_entropy_bad_input():
    with pytest.raises(ValueError, match=r"targets must have shape \(2, 3\)"):
        cross_entropy(np.zeros((2, 3, 5)), np.zeros((2, 4), int))
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy(np.zeros((2, 5)), np.zeros(2, int), label_smoothing=1.0)


# ── dropout ──────────────────────────────────────────────────────────────────────────────────


def test_dropout_train_and_eval():
    x = np.ones((400, 500), dtype=np.float32)
    layer = Dropout(0.1)
    assert layer.forward(x) is x and layer.cache.keep is None  # evaluation mode by default
    set_training(layer, np.random.default_rng(0))
    y = layer.forward(x)
    keep = layer.cache.keep
    assert abs((~keep).mean() - 0.1) < 0.005 and y.dtype == np.float32
    assert np.all(y[keep] == pytest.approx(1 / 0.9)) and np.all(y[~keep] == 0)
    assert abs(y.mean() - 1.0) < 0.01  # inverted dropout keeps the expected value
    np.testing.assert_array_equal(layer.backward(np.ones_like(x))[0], y)
    set_training(layer, None)
    assert layer.forward(x) is x and layer.backward(x)[0] is x
    for p in (1.0, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match="p \\(the dropout probability\\)"):
            Dropout(p)
    with pytest.raises(ValueError, match=r"^dropout \(the dropout probability\).*got dropout=1\.5"):
        Transformer(13, 13, np.random.default_rng(0), d_model=8, n_heads=2, d_ff=16, n_layers=1,
                    dropout=1.5)
    with pytest.raises(ValueError, match="rng must be a np.random.Generator"):
        set_training(layer, 0)


def test_set_training_reaches_every_dropout_of_a_transformer():
    model = Transformer(13, 13, np.random.default_rng(0), d_model=8, n_heads=2, d_ff=16,
                        n_layers=2, max_len=12, dropout=0.1)
    layers = dropout_layers(model)
    assert len(layers) == 2 + 2 * 2 + 2 * 3  # embeddings, 2 per encoder block, 3 per decoder block
    assert len({id(d) for d in layers}) == len(layers)
    rng = np.random.default_rng(1)
    set_training(model, rng)
    assert all(d.rng is rng for d in layers)
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 5, 4]])
    a, b = model.forward(src, tgt), model.forward(src, tgt)
    assert not np.allclose(a, b)  # training: new masks every call
    set_training(model, None)
    np.testing.assert_array_equal(model.forward(src, tgt), model.forward(src, tgt))
    set_training(model, rng)
    with pytest.raises(ValueError, match="evaluation mode"):
        greedy_decode(model, src, BOS, EOS, 3)


# ── the task ─────────────────────────────────────────────────────────────────────────────────


def test_sequences_are_padded_after_their_length():
    src, lengths = sample_sequences(np.random.default_rng(0), 500)
    assert src.shape == (500, MAX_LEN) and lengths.min() == 1 and lengths.max() == MAX_LEN
    real = np.arange(MAX_LEN) < lengths[:, None]
    assert np.all(src[~real] == PAD) and np.all((src[real] >= 3) & (src[real] <= 12))


def test_targets_reverse_and_copy():
    src, lengths = sample_sequences(np.random.default_rng(1), 200)
    tgt_in, tgt_out = make_targets(src, lengths)
    for row, n, t_in, t_out in zip(src, lengths, tgt_in, tgt_out):
        assert list(t_out[:n]) == list(row[:n][::-1]) and t_out[n] == EOS
        assert np.all(t_out[n + 1:] == PAD)
        assert t_in[0] == BOS and list(t_in[1:n + 1]) == list(t_out[:n])
        assert np.all(t_in[n + 1:] == PAD)
    _, copy_out = make_targets(src, lengths, task="copy")
    assert all(list(c[:n]) == list(r[:n]) for c, r, n in zip(copy_out, src, lengths))
    with pytest.raises(ValueError, match="task must be"):
        make_targets(src, lengths, task="sort")


def test_held_out_sequences_never_appear_in_training():
    task = reverse_task()
    val, val2 = task["val"], task["val2"]
    val_long = {r.tobytes() for r in val["src"][val["lengths"] >= 4]}
    val2_long = {r.tobytes() for r in val2["src"][val2["lengths"] >= 4]}
    assert len(val["src"]) == len(val2["src"]) == 1000
    assert not val_long & val2_long  # validation and validation 2 are disjoint at lengths >= 4
    assert task["exclude"] == val_long | val2_long
    rng = np.random.default_rng(3)
    for _ in range(30):
        src, lengths = sample_sequences(rng, 128, exclude=task["exclude"])
        assert not any(r.tobytes() in task["exclude"] for r in src)
    # the exclusion is real: both sets do contain excluded sequences
    assert any(r.tobytes() in task["exclude"] for r in val["src"])
    assert any(r.tobytes() in task["exclude"] for r in val2["src"])


def test_anti_diagonal_mass():
    L = 6
    perfect = np.zeros((L + 1, L))
    perfect[np.arange(L), L - 1 - np.arange(L)] = 1
    assert anti_diagonal_mass(perfect, L) == 1.0
    assert anti_diagonal_mass(np.full((L + 1, L), 1 / L), L) == pytest.approx(1 / L)
    assert anti_diagonal_mass(np.eye(L + 1, L), L) == 0.0  # the copy task's diagonal


@pytest.mark.parametrize("patience, stop", [(1, 2), (2, 5), (3, 6), (None, 8)])
def test_training_stops_after_patience_perfect_validations(monkeypatch, patience, stop):
    scripted = iter([0.5, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0])
    monkeypatch.setattr(reversal, "exact_match", lambda model, src, tgt: np.array([next(scripted)]))
    _, history, _ = train_reverse(0, budget=8, eval_every=1, patience=patience)
    assert len(history["loss"]) == stop and history["accuracy"][-1] == 1.0
    assert len(history["grad_norm"]) == len(history["lr"]) == stop
    assert history["eval_step"] == list(range(1, stop + 1))


def test_patience_counts_evaluations_not_steps(monkeypatch):
    monkeypatch.setattr(reversal, "exact_match", lambda model, src, tgt: np.array([1.0]))
    _, history, _ = train_reverse(0, budget=9, eval_every=2, patience=2)
    assert len(history["loss"]) == 4 and history["eval_step"] == [2, 4]


class Linear(Module):
    """y = x @ W: a module of this test's own, following the protocol, for a task that has
    nothing to do with sequences."""

    param_names = ("W",)

    def __init__(self, rng):
        self.W = rng.standard_normal((3, 2))

    def forward(self, x):
        self.cache = x
        return x @ self.W


@add_to_class(Linear, "backward")
def linear_module_backward(self, d_out):
    x = self.saved()
    return d_out @ self.W.T, {"W": x.T @ d_out}


def test_train_is_task_neutral(rng):
    """train() fits a least-squares problem: any module, any batches, any loss."""
    W_true = np.array([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]])

    def batches(step):
        x = rng.standard_normal((32, 3))
        return (x,), x @ W_true

    def mse(y, target):
        return float(((y - target) ** 2).mean()), 2 * (y - target) / y.size

    seen = []
    model = Linear(np.random.default_rng(0))
    history = train(model, batches, mse, lambda step: 0.05, steps=300,
                    evaluate=lambda m: {"error": float(np.abs(m.W - W_true).max())},
                    eval_every=100, stop=lambda h: bool(h.get("error")) and h["error"][-1] < 1e-3,
                    callback=lambda h, m: seen.append(len(h["loss"])))
    assert history["loss"][-1] < 1e-4 * history["loss"][0]
    assert history["eval_step"] == [100, 200] and history["error"][-1] < 1e-3  # stopped early
    assert seen == list(range(1, 201)) and sorted(history) == ["error", "eval_step", "grad_norm",
                                                              "loss", "lr"]


def test_training_is_deterministic_and_lowers_the_loss():
    _, h1, _ = train_reverse(0, budget=6, eval_every=None)
    _, h2, _ = train_reverse(0, budget=6, eval_every=None)
    assert h1["loss"] == h2["loss"] and len(h1["loss"]) == 6
    assert h1["loss"][-1] < h1["loss"][0]
    assert h1["lr"] == [float(lrate_linear_decay(s, 32, 100, 600, 0.5)) for s in range(1, 7)]


def test_training_clips_and_records_the_gradient_norm():
    seen = []
    original = training.clip_by_global_norm

    def spy(grads, max_norm):
        clipped, norm = original(grads, max_norm)
        seen.append((norm, float(np.sqrt(sum(np.vdot(g, g) for g in clipped.values())))))
        return clipped, norm

    training.clip_by_global_norm, keep = spy, training.clip_by_global_norm
    try:
        _, h, _ = train_reverse(0, budget=5, eval_every=None, clip=0.5)
    finally:
        training.clip_by_global_norm = keep
    assert [n for n, _ in seen] == h["grad_norm"]
    assert all(after <= 0.5 * (1 + 1e-5) for _, after in seen) and max(h["grad_norm"]) > 0.5


def test_training_with_dropout_draws_masks_and_returns_an_evaluation_model():
    model, h, _ = train_reverse(0, budget=3, eval_every=None, dropout=0.1)
    assert all(d.rng is None for d in dropout_layers(model))  # left in evaluation mode
    _, h0, _ = train_reverse(0, budget=3, eval_every=None)
    assert h["loss"] != h0["loss"]  # dropout changed the training


def test_first_below_uses_the_mean_of_a_window():
    losses = [3.0] * 20 + [0.5] * 20
    assert first_below(losses, 1.0, window=10) == 29  # 9 of the last 10 at 0.5: mean 0.75
    assert first_below([2.0, 0.1, 2.0], 1.0, window=1) == 2
    assert first_below([2.0] * 30, 1.0) is None
    assert first_below([0.5] * 3, 1.0) is None  # fewer losses than the window: no mean yet


@pytest.mark.parametrize("max_norm", [0, -1.0, float("inf"), float("nan"), "2"])
def test_clipping_refuses_a_bound_that_is_not_positive(max_norm):
    with pytest.raises(ValueError, match=r"max_norm must be a number in \(0, inf\)"):
        clip_by_global_norm({"a": np.ones(2)}, max_norm)


def test_clipping_stops_a_diverged_training():
    with pytest.raises(ValueError, match="global norm is inf: the training diverged"):
        clip_by_global_norm({"a": np.array([1.0, np.inf])}, 2.0)
    with pytest.raises(ValueError, match="global norm is nan"):
        clip_by_global_norm({"a": np.array([np.nan])}, None)


@pytest.mark.parametrize("patience", [0, -1, 1.5])
def test_patience_is_a_positive_int_or_none(patience):
    with pytest.raises(ValueError, match="patience must be a positive int"):
        train_reverse(0, budget=2, patience=patience)


# ── the committed weights ────────────────────────────────────────────────────────────────────


def test_committed_model_reverses_every_held_out_sequence():
    model, info = load_reverse_model()
    task = reverse_task()
    for name in ("val", "val2"):
        assert exact_match(model, task[name]["src"], task[name]["tgt_out"]).mean() == 1.0
    assert info["training"]["val2_exact_match"] == 1.0
    assert TransformerConfig(**info["config"]) == REVERSE_CONFIG
    assert info["sha256"] == sha256(REVERSE_MODEL)


def test_stored_warmup_runs_start_as_train_reverse_computes():
    # notebook 07's warm-up study reads these runs; its live check replays Post-LN, this Pre-LN
    record = load_runs()
    names = {"Post-LN, warm-up", "Post-LN, no warm-up", "Pre-LN, warm-up", "Pre-LN, no warm-up"}
    assert [row["seed"] for row in record["warmup"]] == [0, 1, 2, 3, 4]
    assert all(set(row["runs"]) == names for row in record["warmup"])
    _, history, _ = train_reverse(1, norm_first=True, ramp=False, budget=10, eval_every=None)
    stored = record["warmup"][1]["runs"]["Pre-LN, no warm-up"]["loss"][:10]
    np.testing.assert_allclose(history["loss"], stored, rtol=1e-3)  # stored to 5 digits


def test_trained_sequences_are_the_committed_models_batches():
    # notebook 07 draws its test set outside these sequences; step 600's rate is 0, so the
    # committed weights are those step 600 saw: on the last batch they give its logged loss
    model, info = load_reverse_model()
    steps = info["training"]["steps"]
    src, lengths = trained_sequences(0, steps)
    assert src.shape == (steps * 128, MAX_LEN) and lengths.shape == (steps * 128,)
    assert not {row.tobytes() for row in src} & reverse_task()["exclude"]
    assert lrate_linear_decay(steps, 32, 100, steps, 0.5) == 0
    batch, lens = src[-128:], lengths[-128:]
    tgt_in, tgt_out = make_targets(batch, lens)
    loss, d_logits = cross_entropy(model.forward(batch, tgt_in), tgt_out, label_smoothing=0.1,
                                   ignore_id=PAD)
    _, norm = clip_by_global_norm(model.backward(d_logits)[1], 2.0)
    logged = load_runs()["recipes"]["ours"]["runs"][0]  # data/reverse_runs.json, seed 0
    assert abs(loss - logged["loss"][-1]) < 1e-5
    assert abs(norm / logged["grad_norm"][-1] - 1) < 3e-3


def test_loader_refuses_a_corrupted_file(tmp_path):
    bad = tmp_path / "reverse_model.npz"
    raw = bytearray(REVERSE_MODEL.read_bytes())
    raw[len(raw) // 2] ^= 1  # flip one bit
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="SHA-256"):
        load_reverse_model(bad)


def test_loader_refuses_arrays_that_do_not_match(tmp_path):
    model, info = load_reverse_model()
    params = dict(model.parameters())
    params.pop("b_out")
    npz, manifest = tmp_path / "m.npz", tmp_path / "m.json"
    np.savez(npz, **params)
    info["sha256"] = sha256(npz)
    manifest.write_text(json.dumps(info))
    with pytest.raises(ValueError, match="do not match the configuration"):
        load_reverse_model(npz, manifest)
    shutil.copy(REVERSE_MANIFEST, tmp_path / "ok.json")
    load_reverse_model(REVERSE_MODEL, tmp_path / "ok.json")  # the real pair loads


# ── widgets ──────────────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def comparison():
    trained, _ = load_reverse_model()
    random_model = Transformer.from_config(REVERSE_CONFIG, np.random.default_rng(0))
    return tw.attention_comparison(random_model, trained, ["3 1 4 1 5 9 2 6", "2 7 1 8"],
                                   note="test")


def test_comparison_shows_random_and_trained_side_by_side(comparison):
    ex = comparison
    ex.controls["example"].value = "3 1 4 1 5 9 2 6"
    r = ex.result
    assert r["random"].shape == (9, 8) and r["trained"].shape == (9, 8)
    assert r["trained_mass"] > 0.5 > r["random_mass"]
    assert r["output"] == "6 2 9 5 1 4 1 3 <eos>"
    assert "anti-diagonal mass: <b>random" in ex.status.value and ex.last_error is None


def test_comparison_controls_recompute(comparison):
    ex = comparison
    ex.controls["example"].value = "2 7 1 8"
    assert ex.controls["digits"].value == "2 7 1 8" and ex.result["trained"].shape == (5, 4)
    ex.controls["digits"].value = "90210"
    assert ex.result["cols"] == ["9", "0", "2", "1", "0"] and ex.result["output"].startswith("0 1 2 0 9")
    mean = ex.result["trained"]
    ex.controls["head"].value = 1
    head1 = ex.result["trained"]
    ex.controls["head"].value = 0
    np.testing.assert_allclose((ex.result["trained"] + head1) / 2, mean, atol=1e-6)
    ex.controls["layer"].value = 0
    assert not np.allclose(ex.result["trained"], ex.result["random"])
    png = ex.image.value
    ex.controls["layer"].value = 1
    assert ex.image.value != png


def test_comparison_shows_bad_text_as_an_error(comparison):
    ex = comparison
    ex.controls["digits"].value = "12a"
    assert isinstance(ex.last_error, ValueError) and "digits 0-9" in ex.error.value
    ex.controls["digits"].value = "123"
    assert ex.last_error is None


def test_training_monitor_updates_bar_label_and_curve():
    monitor = tw.TrainingMonitor(100, every=10)
    assert monitor.n_redraws == 1 and bytes(monitor.image.value).startswith(b"\x89PNG")
    empty = monitor.image.value
    history = {"loss": [], "eval_step": [], "accuracy": []}
    for step in range(1, 21):
        history["loss"].append(2.0 / step)
        if step == 20:
            history["eval_step"].append(20)
            history["accuracy"].append(0.5)
        monitor.update(history)
    assert monitor.bar.value == 20 and "exact match 0.500" in monitor.label.value
    assert monitor.n_redraws == 4  # empty, then steps 1, 10, 20
    assert monitor.image.value != empty


@pytest.mark.parametrize("vocab", [13, 40_000])  # one-hot product; np.add.at past 2**24 entries
def test_embedding_backward_sums_every_occurrence_of_a_token(vocab):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, size=(40, 11))
    tokens[:, :3] = 7  # token 7 repeated in every sequence
    d_x = rng.standard_normal((40, 11, 4))
    table = np.zeros((vocab, 4))
    expected = np.zeros((vocab, 4))
    for b in range(40):  # the sum, one occurrence at a time
        for t in range(11):
            expected[tokens[b, t]] += d_x[b, t] * 2.0
    assert (tokens.size * vocab > 2**24) == (vocab == 40_000)
    np.testing.assert_allclose(embedding_backward(table, tokens, d_x, 2.0), expected, atol=1e-12)
