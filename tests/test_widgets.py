"""helpers/widgets/, driven in-kernel: set a control's .value, assert what the explorer shows."""

import json
import re
from pathlib import Path
from unittest import mock

import ipywidgets as W
import numpy as np
import pytest

from helpers import analysis
from helpers import widgets as tw
from helpers.transformer import scaled_dot_product_attention, softmax
from helpers.widgets.explorer import animate


def make_counter_explorer(fail_at=None):
    controls = {"n": W.IntSlider(value=1, min=0, max=10), "on": W.ToggleButton(value=False)}

    def compute(n, on):
        if n == fail_at:
            raise RuntimeError(f"boom at n={n}")
        return {"matrix": np.full((2, 2), n * (2 if on else 1), dtype=float)}

    def draw(fig, result, values):
        fig.subplots().imshow(result["matrix"], vmin=0, vmax=20)

    return tw.Explorer(controls, compute, draw, lambda r, v: [("sum", f"{r['matrix'].sum():g}")])


def test_control_change_recomputes_and_redraws():
    ex = make_counter_explorer()
    png, updates = ex.image.value, ex.n_updates
    ex.controls["n"].value = 7
    assert ex.n_updates == updates + 1
    assert ex.result["matrix"][0, 0] == 7
    assert ex.image.value != png and bytes(ex.image.value).startswith(b"\x89PNG")
    assert 'data-control="n">7</span>' in ex.status.value and "sum: <b>28</b>" in ex.status.value
    ex.controls["on"].value = True
    assert ex.result["matrix"][0, 0] == 14 and 'data-control="on">on</span>' in ex.status.value


def test_dom_classes_follow_the_convention():
    ex = make_counter_explorer()
    assert "tx-explorer" in ex._dom_classes and "tx-figure" in ex.image._dom_classes
    assert {"tx-control", "tx-control-n", "tx-kind-slider"} <= set(ex.controls["n"]._dom_classes)
    assert "tx-kind-toggle" in ex.controls["on"]._dom_classes


def test_exception_in_callback_is_shown_not_swallowed():
    ex = make_counter_explorer(fail_at=3)
    good_png = ex.image.value
    ex.controls["n"].value = 3
    assert isinstance(ex.last_error, RuntimeError)
    assert ex.error.layout.display is None and "boom at n=3" in ex.error.value
    assert "Traceback" in ex.error.value
    assert ex.image.value == good_png, "the last good figure stays"
    ex.controls["n"].value = 4
    assert ex.last_error is None and ex.error.layout.display == "none" and ex.error.value == ""


def test_builders_never_display_themselves():
    with mock.patch("IPython.display.display") as display:
        tw.scaling_explorer()
        tw.query_explorer({"a b": (["a", "b"], np.eye(2), np.eye(2), np.eye(2))})
    display.assert_not_called()


@pytest.fixture(scope="module")
def shared_scaling():
    return tw.scaling_explorer(T=8, seed=0)


@pytest.fixture
def scaling(shared_scaling):
    """One scaling explorer for the tests of notebook 01, put back to its defaults (one layout:
    a fast-path update, no new figure)."""
    shared_scaling.set_values(d_k=64, scoring="scaled", draw=0)
    assert shared_scaling.last_error is None and shared_scaling.values() == {
        "d_k": 64, "scoring": "scaled", "draw": 0}
    return shared_scaling


def test_scaling_explorer_matches_an_independent_computation(scaling):
    ex = scaling
    for d_k in (4, 1024):
        ex.controls["d_k"].value = d_k
        for scoring in ("raw", "scaled", "additive"):
            ex.controls["scoring"].value = scoring
            rng = np.random.default_rng([0, d_k, 0])
            Q, K = rng.standard_normal((8, d_k)), rng.standard_normal((8, d_k))
            W_a, U_a = (rng.standard_normal((d_k, 64)) / np.sqrt(d_k) for _ in range(2))
            v_a = rng.standard_normal(64) / np.sqrt(64)
            if scoring == "additive":
                scores = np.array([[v_a @ np.tanh(q @ W_a + k @ U_a) for k in K] for q in Q])
            else:
                scores = Q @ K.T / (np.sqrt(d_k) if scoring == "scaled" else 1.0)
            expected = softmax(scores)
            np.testing.assert_allclose(ex.result["weights"], expected, atol=1e-12)
            assert ex.result["max_weight"] == pytest.approx(expected.max(-1).mean())
            J = [np.linalg.norm(np.diag(p) - np.outer(p, p)) for p in expected]
            np.testing.assert_allclose(ex.result["jacobian_norm"], J, atol=1e-12)
            np.testing.assert_allclose(ex.result["row_std"], scores.std(-1), atol=1e-12)
    ex.controls["scoring"].value = "raw"
    unscaled = ex.result["max_weight"]
    ex.controls["scoring"].value = "scaled"
    assert unscaled > 0.9 > 0.6 > ex.result["max_weight"]
    assert 'data-control="d_k">1024</span>' in ex.status.value
    assert 'data-control="scoring">dot product ÷ √d_k</span>' in ex.status.value


def test_query_explorer_follows_sentence_and_query():
    rng = np.random.default_rng(0)
    ex_a = (["a", "b", "c"], *(rng.standard_normal((3, 2)) for _ in range(3)))
    ex_b = (["w", "x", "y", "z"], *(rng.standard_normal((4, 2)) for _ in range(3)))
    ex = tw.query_explorer({"A": ex_a, "B": ex_b})
    assert ex.controls["query"].value == 2
    updates = ex.n_updates
    ex.controls["sentence"].value = "B"
    assert ex.n_updates == updates + 1, "one recompute per change, even with linked controls"
    assert ex.controls["query"].label == "2: y" and ex.controls["query"].value == 2
    ex.controls["query"].value = 3
    _, w = scaled_dot_product_attention(*ex_b[1:])
    np.testing.assert_allclose(ex.result["row"], w[3], atol=1e-12)
    assert 'data-control="query">3: z</span>' in ex.status.value
    ex.controls["sentence"].value = "A"
    assert ex.controls["query"].value == 2, "query position clipped to the shorter sentence"
    assert ex.last_error is None
    updates = ex.n_updates
    ex.set_values(sentence="B", query=3)  # link runs per change, one update at the end
    assert ex.n_updates == updates + 1 and ex.controls["query"].label == "3: z"
    np.testing.assert_allclose(ex.result["row"], w[3], atol=1e-12)
    assert 'data-control="query">3: z</span>' in ex.status.value
    ex.set_values(sentence="B", query=3)
    assert ex.n_updates == updates + 1, "nothing changed: no update"


def test_display_value_and_kinds():
    s = W.SelectionSlider(options=[1, 2, 4], value=4)
    d = W.Dropdown(options=[("one", 1), ("two", 2)], value=2)
    assert (tw.display_value(s), tw.display_value(d)) == ("4", "two")
    assert tw.display_value(W.FloatSlider(value=0.5, readout_format=".2f")) == "0.50"
    assert [tw.control_kind(c) for c in (s, d, W.Checkbox(), W.Text())] == [
        "slider", "dropdown", "toggle", "text"]
    with pytest.raises(TypeError):
        tw.control_kind(W.Button())
    with pytest.raises(ValueError):
        tw.query_explorer({})


def test_entropy_closed_form():
    np.testing.assert_allclose(analysis.entropy(np.full(4, 0.25)), np.log(4))
    assert analysis.entropy(np.array([1.0, 0.0])) == 0.0


def test_the_package_exports_every_name_the_notebooks_use():
    used = set()
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        used |= {m for c in cells for m in re.findall(r"\btw\.(\w+)", "".join(c["source"]))}
    assert used and used <= set(tw.__all__), sorted(used - set(tw.__all__))
    assert all(hasattr(tw, name) for name in tw.__all__)
    for name in analysis.__all__:  # what is not a widget lives in helpers.analysis only
        assert not hasattr(tw, name), f"{name} is re-exported by helpers.widgets"


def takes_fast_path(ex, control, value):
    """Set a control; the update succeeds and takes the fast path (no figure drawn anew). For a
    step that refresh draws with the same code as a step of the same test already compared
    pixel for pixel with a full redraw (tw.assert_fast_path_matches_redraw), which costs a
    whole new figure."""
    updates, full_draws = ex.n_updates, ex.n_full_draws
    ex.controls[control].value = value
    assert ex.n_updates == updates + 1 and ex.last_error is None, (control, value, ex.last_error)
    assert ex.n_full_draws == full_draws, f"{control} = {value!r}: drawn from scratch"


def test_fast_path_draws_exactly_what_a_full_redraw_draws(scaling):
    ex = scaling
    for name, value in (("d_k", 256), ("scoring", "raw"), ("scoring", "additive"), ("d_k", 1)):
        tw.assert_fast_path_matches_redraw(ex, name, value)  # blitting onto the kept background
    takes_fast_path(ex, "draw", 3)  # new numbers only: what every step above redraws too
    assert ex.cached_layouts == [None], "one layout, one figure"


def make_blitting_explorer(broken=False):
    """A heatmap and a title on the fast path; `broken` forgets to update the title."""
    controls = {"n": W.IntSlider(value=1, min=0, max=10)}

    def draw(fig, result, values):
        ax = fig.subplots()
        image = ax.imshow(result, vmin=0, vmax=10)
        ax.set_title(f"n = {values['n']}")
        changing = animate([image, ax.title])

        def refresh(result, values):
            image.set_data(result)
            if not broken:
                ax.set_title(f"n = {values['n']}")
            return changing if values["n"] < 8 else None  # from 8 on: a full redraw

        return refresh

    return tw.Explorer(controls, lambda n: np.full((2, 2), float(n)), draw, figsize=(2, 2))


def test_fast_path_check_catches_a_broken_refresh_and_a_change_without_fast_path():
    good, broken = make_blitting_explorer(), make_blitting_explorer(broken=True)
    fast = tw.assert_fast_path_matches_redraw(good, "n", 3)
    assert fast.ndim == 3 and good.n_full_draws == 1
    with pytest.raises(AssertionError, match=r"differs from a full redraw in \d+ of"):
        tw.assert_fast_path_matches_redraw(broken, "n", 3)  # the title still says n = 1
    with pytest.raises(AssertionError, match="drawn from scratch"):
        tw.assert_fast_path_matches_redraw(good, "n", 9)
    with pytest.raises(AssertionError, match="no update"):
        tw.assert_fast_path_matches_redraw(good, "n", 9)
    assert good.cached_layouts == [None] and good.n_full_draws == 2


# ── the trained reversal model next to an untrained twin (the explorers of 02, 04, 05, 06)

def test_reversal_models_are_the_committed_weights_and_a_labelled_random_twin():
    models = analysis.reversal_models(seed=3)
    assert list(models) == [analysis.TRAINED, analysis.RANDOM]
    trained, random = models[analysis.TRAINED], models[analysis.RANDOM]
    with np.load(analysis.load_reverse_model.__defaults__[0]) as committed:
        for name, p in trained.parameters().items():
            np.testing.assert_array_equal(p, committed[name])
    assert trained.config == random.config
    assert not np.array_equal(trained.parameters()["src_embed"], random.parameters()["src_embed"])


def test_reversal_example_is_teacher_forced_reversal():
    src, tgt, src_labels, tgt_labels = analysis.reversal_example("3 1 4 1 5")
    first = analysis.FIRST_DIGIT
    np.testing.assert_array_equal(src, [[first + d for d in (3, 1, 4, 1, 5)]])
    np.testing.assert_array_equal(tgt, [[analysis.BOS] + [first + d for d in (5, 1, 4, 1)]])
    assert src_labels == ["3", "1", "4", "1", "5"] and tgt_labels == ["<bos>", "5", "1", "4", "1"]
    with pytest.raises(ValueError, match="digits"):
        analysis.reversal_example("12a")


def test_attention_maps_are_the_forward_passes_weights_and_clear_the_caches():
    model = analysis.reversal_models()[analysis.TRAINED]
    src, tgt, _, _ = analysis.reversal_example("2 7 1 8 2 8")
    maps = analysis.attention_maps(model, src, tgt)
    h = model.config.n_heads
    assert [m.shape for m in maps["encoder self"]] == [(h, 6, 6)] * model.config.n_layers
    assert [m.shape for m in maps["cross"]] == [(h, 6, 6)] * model.config.n_layers
    for kind in maps:
        for m in maps[kind]:
            np.testing.assert_allclose(m.sum(-1), 1, rtol=1e-5)
    assert np.all(np.triu(maps["decoder self"][0], 1) == 0)  # causal
    assert all(m.cache is None for m in model.modules())
    model.forward(src, tgt)
    np.testing.assert_array_equal(model.decoder.layers[1].cross_attn.weights[0], maps["cross"][1])
    # trained cross-attention reads the source backwards: query t looks mostly at source S-1-t
    last = maps["cross"][-1].mean(0)
    assert np.all(last.argmax(-1) == np.arange(6)[::-1])


# ── 01 · checks that drove notebook 01's explorers

def bank_examples():
    """Notebook 01's two hand-built sentences, as (tokens, Q, K, V) per sentence."""
    embedding = {"we": [0, 0, 0, 1.0], "walked": [0, 0, 0, 0.5], "paid": [0.5, 0, 0, 0.5],
                 "along": [0, 0, 0, 1.0], "at": [0, 0, 0, 1.0], "the": [0, 0, 0, 1.0],
                 "river": [0, 2.0, 1.0, 0], "cash": [2.0, 0, 0, 0], "bank": [0.5, 0.5, 1.0, 0]}
    W_q = np.array([[0, 0], [0, 0], [2, 0], [0, 1]], dtype=float)
    W_k = np.array([[1, 0], [1, 0], [0, 0], [0, 1]], dtype=float)
    examples = {}
    for text in ("we walked along the river bank", "we paid cash at the bank"):
        tokens = text.split()
        X = np.array([embedding[t] for t in tokens])
        examples[text] = (tokens, X @ W_q, X @ W_k, X)
    return examples


def changed_pixels(ex, control, value):
    before = tw.explorer.png_pixels(ex.image.value)
    ex.controls[control].value = value
    assert ex.last_error is None, ex.last_error
    after = tw.explorer.png_pixels(ex.image.value)
    return 1.0 if before.shape != after.shape else float(np.any(before != after, axis=-1).mean())


def test_01_scaling_explorer_unscaled_saturates_at_large_d_k(scaling):
    # was notebook 01's cell that drove the explorer: d_k = 1024, toggle the scaling
    ex = scaling
    ex.controls["d_k"].value = 1024
    ex.controls["scoring"].value = "raw"
    raw = ex.result
    ex.controls["scoring"].value = "scaled"
    assert raw["max_weight"] > 0.8 > ex.result["max_weight"] and ex.last_error is None
    assert raw["jacobian_norm"].mean() < ex.result["jacobian_norm"].mean() / 3
    assert raw["row_std"].mean() > 10 * ex.result["row_std"].mean()


def test_01_scaling_explorer_additive_scores_stay_bounded_at_every_d_k(scaling):
    ex = scaling
    ex.controls["scoring"].value = "additive"
    for d_k in (1, 64, 1024):
        for draw in (0, 5):
            ex.controls["d_k"].value = d_k
            ex.controls["draw"].value = draw
            r = ex.result
            assert np.abs(r["scores"]).max() <= r["bound"]  # tanh: |score| <= ||v_a||_1
            assert r["scores"].std() < 2 and r["max_weight"] < 0.6
    assert "bound ‖v_a‖₁" in ex.status.value


def test_01_scaling_explorer_draws_afresh_and_every_control_changes_the_figure(scaling):
    ex = scaling
    first = ex.result["weights"]
    assert changed_pixels(ex, "draw", 1) > 0.01
    assert not np.allclose(first, ex.result["weights"]), "another draw, other Q and K"
    assert changed_pixels(ex, "d_k", 128) > 0.01
    assert changed_pixels(ex, "scoring", "additive") > 0.01
    ex.controls["draw"].value = 0
    ex.controls["d_k"].value = 64
    ex.controls["scoring"].value = "scaled"
    np.testing.assert_array_equal(ex.result["weights"], first)  # a draw is reproducible


def test_01_query_explorer_bank_follows_its_context():
    # was notebook 01's cell that drove the explorer: 'bank' next to 'cash', then 'river'
    examples = bank_examples()
    river_text, cash_text = examples
    ex = tw.query_explorer(examples, value_names=["money", "water", "place", "function"])
    ex.controls["sentence"].value = cash_text
    ex.controls["query"].value = 5  # 'bank'
    assert examples[cash_text][0][int(np.argmax(ex.result["row"]))] == "cash"
    assert ex.result["output"][0] > ex.result["output"][1]  # more money than water
    ex.controls["sentence"].value = river_text
    assert examples[river_text][0][int(np.argmax(ex.result["row"]))] == "river"
    assert ex.result["output"][1] > ex.result["output"][0]  # more water than money
    assert "output: <b>money " in ex.status.value and ex.last_error is None


@pytest.fixture(scope="module")
def shared_bank():
    return tw.query_explorer(bank_examples())


@pytest.fixture
def bank(shared_bank):
    """One query explorer on notebook 01's two sentences, put back to its defaults (the river
    sentence, its last token, s = 1) in one update."""
    river_text = list(bank_examples())[0]
    shared_bank.set_values(sentence=river_text, query=5, strength=1.0)
    assert shared_bank.last_error is None
    return shared_bank


def test_01_query_explorer_strength_scales_the_scores_and_the_output_is_the_weighted_sum(bank):
    examples = bank_examples()
    cash_text = list(examples)[1]
    tokens, Q, K, V = examples[cash_text]
    ex = bank
    ex.controls["sentence"].value = cash_text
    tops = []
    for s in (0.0, 1.0, 4.0):
        ex.controls["strength"].value = s
        out, w = scaled_dot_product_attention(s * Q, K, V)
        np.testing.assert_allclose(ex.result["row"], w[-1], atol=1e-12)
        np.testing.assert_allclose(ex.result["output"], out[-1], atol=1e-12)
        np.testing.assert_allclose(ex.result["contributions"].sum(0), out[-1], atol=1e-12)
        tops.append(ex.result["row"].max())
    np.testing.assert_allclose(ex.result["contributions"][2], w[-1, 2] * V[2], atol=1e-12)
    assert tops[0] == pytest.approx(1 / len(tokens)) and tops[0] < tops[1] < tops[2]
    assert tops[2] > 0.95  # 'cash' takes over


def test_01_query_explorer_fast_path_and_every_control_changes_the_figure(bank):
    examples = bank_examples()
    ex = bank
    tw.assert_fast_path_matches_redraw(ex, "strength", 2.5)
    tw.assert_fast_path_matches_redraw(ex, "query", 0)
    tw.assert_fast_path_matches_redraw(ex, "strength", 0.0)
    rng = np.random.default_rng(1)  # negative values: segments stack left of 0 as well
    signed = {"A": (["a", "b", "c"], *(rng.standard_normal((3, 2)) for _ in range(3)))}
    ex_signed = tw.query_explorer(signed)
    tw.assert_fast_path_matches_redraw(ex_signed, "strength", 3.0)
    tw.assert_fast_path_matches_redraw(ex_signed, "query", 0)
    ex.controls["strength"].value = 1.0
    assert changed_pixels(ex, "strength", 1.5) > 0.01  # one step of the slider
    assert changed_pixels(ex, "query", 1) > 0.01
    assert changed_pixels(ex, "sentence", list(examples)[1]) > 0.01


# ── 02 · checks that drove notebook 02's explorers


@pytest.fixture(scope="module")
def reversal():
    return analysis.reversal_models()


def test_head_explorer_shows_the_trained_heads_first_labelled(reversal):
    ex = tw.head_explorer("3 1 4 1 5", models=reversal)
    assert ex.controls["weights"].value == analysis.TRAINED and ex.controls["kind"].value == "cross"
    assert ex.controls["layer"].value == 1 and ex.controls["head"].value == -1
    # independent recomputation: the model's own forward pass, teacher-forced
    src, tgt, src_labels, tgt_labels = analysis.reversal_example("3 1 4 1 5")
    reversal[analysis.TRAINED].forward(src, tgt)
    expected = reversal[analysis.TRAINED].decoder.layers[1].cross_attn.weights[0]
    np.testing.assert_array_equal(ex.result["weights"], expected)
    assert ex.result["rows"] == tgt_labels and ex.result["cols"] == src_labels
    assert "TRAINED" in ex.result["label"] and ex.result["anti_diagonal"].min() > 0.7
    assert "anti-diagonal share: <b>" in ex.status.value
    ex.controls["weights"].value = analysis.RANDOM
    assert "RANDOM" in ex.result["label"] and ex.result["anti_diagonal"].max() < 0.4
    assert ex.last_error is None


@pytest.fixture(scope="module")
def shared_head(reversal):
    return tw.head_explorer("3 1 4 1 5", models=reversal)


@pytest.fixture
def head5(shared_head):
    """One head explorer on "3 1 4 1 5" for the tests below that do not check the builder's
    defaults, put back to them in one update (its figure is kept: the fast path)."""
    shared_head.set_values(weights=analysis.TRAINED, digits="3 1 4 1 5", kind="cross", layer=1,
                           head=-1)
    assert shared_head.last_error is None
    return shared_head


def test_head_explorer_follows_kind_layer_head_and_typed_digits(reversal, head5):
    ex = head5
    ex.set_values(kind="encoder self", layer=0, digits="2 7 1 8")  # one update, one new figure
    maps = analysis.attention_maps(reversal[analysis.TRAINED],
                                   *analysis.reversal_example("2 7 1 8")[:2])
    np.testing.assert_array_equal(ex.result["weights"], maps["encoder self"][0])
    assert ex.result["rows"] == ex.result["cols"] == ["2", "7", "1", "8"]
    ex.controls["kind"].value = "decoder self"
    assert np.all(np.triu(ex.result["weights"], 1) == 0)  # causal
    ex.controls["head"].value = 1
    assert ex.result["head"] == 1 and 'data-control="head">head 1</span>' in ex.status.value
    ex.controls["digits"].value = "1 2 x"  # not digits: the error is shown, the figure stays
    assert "type 1 to" in str(ex.last_error) and ex.error.layout.display is None
    ex.controls["digits"].value = "9 9"
    assert ex.last_error is None and ex.result["weights"].shape == (2, 2, 2)


def test_head_explorer_heads_differ_in_the_trained_encoder(head5):
    """What the notebook's prose says the explorer shows: heads do different jobs."""
    ex = head5
    ex.controls["kind"].value = "encoder self"
    ex.controls["layer"].value = 0
    diagonal = ex.result["diagonal"]
    assert diagonal[1] > diagonal[0] + 0.1, diagonal


def test_head_explorer_measures_the_causal_anti_diagonal_over_allowed_cells_only(head5):
    """Decoder self-attention is causal: the anti-diagonal cells above the diagonal are blocked
    (weight 0), so the share is the mean over the cells the mask allows, and the status says so."""
    ex = head5
    ex.set_values(digits="3 1 4 1 5 9", kind="decoder self")  # L = 6: cells (3, 2), (4, 1), (5, 0)
    w, L = ex.result["weights"], 6
    i = np.arange(L)
    blocked = i < L - 1 - i
    assert np.all(w[:, i[blocked], L - 1 - i[blocked]] == 0)  # the mask blocks these 3
    np.testing.assert_allclose(ex.result["anti_diagonal"],
                               w[:, i[~blocked], L - 1 - i[~blocked]].mean(-1))
    assert ex.result["anti_cells"] == (3, 6)
    assert "the 3 of 6 cells the causal mask allows" in ex.status.value
    tw.assert_fast_path_matches_redraw(ex, "weights", analysis.RANDOM)  # titles say it too
    assert "the 3 of 6 cells the causal mask allows" in ex.status.value
    ex.controls["kind"].value = "cross"  # nothing is blocked: every cell, the plain label
    cross = ex.result["weights"]
    np.testing.assert_allclose(ex.result["anti_diagonal"], cross[:, i, L - 1 - i].mean(-1))
    assert ex.result["anti_cells"] == (6, 6) and "causal mask" not in ex.status.value
    assert ex.last_error is None


def test_head_explorer_fast_path_is_exact(head5):
    ex = head5
    tw.assert_fast_path_matches_redraw(ex, "weights", analysis.RANDOM)  # all heads
    takes_fast_path(ex, "weights", analysis.TRAINED)  # back: the same refresh as the step above
    tw.assert_fast_path_matches_redraw(ex, "layer", 0)
    takes_fast_path(ex, "layer", 1)
    ex.controls["head"].value = 0  # one head: another layout
    tw.assert_fast_path_matches_redraw(ex, "head", 1)
    tw.assert_fast_path_matches_redraw(ex, "weights", analysis.RANDOM)


# ── 03 · checks that drove notebook 03's explorers

@pytest.fixture(scope="module")
def shared_pe():
    return tw.pe_explorer()


@pytest.fixture
def pe(shared_pe):
    """One positional-encoding explorer, put back to the builder's defaults in one update (one
    figure serves every state: the fast path)."""
    shared_pe.set_values(positions=50, d_model=64, dim=6, pos=10, offset=5, slip=False)
    assert shared_pe.last_error is None and shared_pe.values() == {
        "positions": 50, "d_model": 64, "dim": 6, "pos": 10, "offset": 5, "slip": False}
    return shared_pe


def test_pe_explorer_driven_as_a_learner_would(pe):
    from helpers.transformer import positional_encoding

    ex = pe
    ex.controls["dim"].value = 0
    ex.controls["offset"].value = 20
    r = ex.result
    np.testing.assert_allclose(r["moved"], positional_encoding(50, 64)[30], atol=1e-10)
    assert r["angle"] == pytest.approx(20.0)  # pair 0 turns k * w_0 = k radians
    ex.controls["positions"].value = 20  # row 10 + 20 no longer exists: the offset is clipped
    assert {name: ex.controls[name].value for name in ("pos", "offset")} == {"pos": 10, "offset": 9}
    assert ex.result["PE"].shape == (20, 64) and ex.last_error is None


def test_pe_explorer_column_index_slip_makes_m_k_miss(pe):
    from helpers.transformer import positional_encoding

    ex = pe
    png = ex.image.value
    ex.controls["slip"].value = True
    r = ex.result
    np.testing.assert_array_equal(r["PE"], tw.column_index_slip(50, 64))
    np.testing.assert_allclose(r["PE"][:, 0::2], positional_encoding(50, 64)[:, 0::2], atol=1e-12)
    assert r["error"] > 0.5 and ex.image.value != png and ex.last_error is None
    assert 'data-control="slip">on</span>' in ex.status.value
    ex.controls["dim"].value = 7  # an odd (cosine) column turns at its own speed under the slip
    assert ex.result["wavelength"] == pytest.approx(2 * np.pi * 10000 ** (7 / 64))
    tw.assert_fast_path_matches_redraw(ex, "offset", 12)
    tw.assert_fast_path_matches_redraw(ex, "slip", False)
    assert ex.result["error"] < 1e-10


# ── 04 · checks that drove notebook 04's explorers

def _mask_figure_text(ex):
    fig = ex._drawn[ex.layout_key(ex.values())][0]
    return " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


@pytest.fixture(scope="module")
def shared_mask():
    return tw.mask_explorer(T=8, n_pad=3)


@pytest.fixture
def mask8(shared_mask):
    """One mask explorer (T = 8, n_pad = 3) for the tests below that do not check the builder's
    defaults, put back to them: T first (it sets the padding's maximum), one update."""
    shared_mask.set_values(T=8, n_pad=3, weights=analysis.TRAINED, layer=1, head=0, causal=True,
                           padding=True)
    assert shared_mask.last_error is None and shared_mask.controls["n_pad"].max == 8
    return shared_mask


def test_mask_explorer_with_both_masks_is_the_models_own_forward(mask8):
    ex = mask8
    r = ex.result
    assert r["src_labels"] == ["3", "1", "4", "1", "5"] + ["<pad>"] * 3
    assert r["tgt_labels"] == ["<bos>", "5", "1", "4", "1"] + ["<pad>"] * 3
    models = analysis.reversal_models()
    for label in models:  # the model's forward masks padding and the future itself
        ex.controls["weights"].value = label
        maps = analysis.attention_maps(models[label], ex.result["src"], ex.result["tgt"])
        for kind in tw.MASK_KINDS:
            np.testing.assert_allclose(ex.result["maps"][kind], np.stack(maps[kind]), atol=1e-6)
    assert ex.last_error is None


def test_mask_explorer_trained_model_reverses_and_the_padding_mask_keeps_pad_out():
    ex = tw.mask_explorer(T=8, n_pad=3)
    assert ex.controls["weights"].value == analysis.TRAINED and "TRAINED" in _mask_figure_text(ex)
    r = ex.result
    assert r["predicted"] == r["expected"] == "5 1 4 1 3"
    assert "argmax at each position, correct digits fed in (teacher forcing)" in ex.status.value
    assert r["leak"] == {"encoder self": 0.0, "cross": 0.0} and r["blocked_weight"] == 0
    cross = r["shown"]["cross"][:5, :5]  # layer 1: query t reads source 4 - t
    assert np.all(cross.argmax(-1) == np.arange(5)[::-1])
    ex.controls["padding"].value = False  # the leak the notebook drove by hand before
    r = ex.result
    assert r["leak"]["cross"] > 0.5 and r["leak"]["encoder self"] > 0.1
    assert r["predicted"] != r["expected"], "reading <pad> keys spoils the trained answer"
    assert "mask: none" in _mask_figure_text(ex)
    ex.controls["padding"].value = True
    assert ex.result["leak"]["cross"] == 0


def test_mask_explorer_causal_toggle_and_random_weights_are_labelled():
    ex = tw.mask_explorer(T=6, n_pad=0)
    dec = ex.result["shown"]["decoder self"]
    assert np.all(dec[np.triu_indices(6, 1)] == 0)
    ex.controls["causal"].value = False
    assert ex.result["shown"]["decoder self"][np.triu_indices(6, 1)].sum() > 0.1
    ex.controls["weights"].value = analysis.RANDOM
    text = _mask_figure_text(ex)
    assert "RANDOM" in text and "TRAINED" not in text
    ex.controls["layer"].value = 0
    ex.controls["head"].value = 1
    r = ex.result
    np.testing.assert_array_equal(r["shown"]["cross"], r["maps"]["cross"][0, 1])
    assert 'data-control="head">head 1</span>' in ex.status.value and ex.last_error is None
    assert "layer 0, head 1" in _mask_figure_text(ex), "0-based, as model.decoder.layers[layer]"


def test_mask_explorer_names_special_tokens_in_the_answer(mask8):
    ex = mask8
    ex.controls["causal"].value = False  # the decoder reads ahead: its first word is <eos>
    words = ex.result["predicted"].split()
    assert words[0] == "<eos>" and len(words) == 5, ex.result["predicted"]
    assert all(w in ("<eos>", "<bos>", "<pad>") or (len(w) == 1 and w.isdigit()) for w in words)
    assert "(teacher forcing): <b>&lt;eos&gt; " in ex.status.value  # not "-1" (FIRST_DIGIT - 1)
    assert [analysis.token_word(t) for t in (0, 1, 2, 3, 12)] == [
        "<pad>", "<bos>", "<eos>", "0", "9"]


def test_mask_explorer_all_padding_gives_zero_weights_not_nan(mask8):
    ex = mask8
    ex.controls["T"].value = 10
    ex.controls["n_pad"].value = 10  # nothing but padding in the source
    r = ex.result
    assert r["src_labels"] == ["<pad>"] * 10 and r["fully_blocked"]["encoder self"].all()
    assert r["fully_blocked"]["cross"].all()
    for kind in ("encoder self", "cross"):
        assert np.all(r["maps"][kind] == 0) and not np.isnan(r["maps"][kind]).any()
    assert "fully blocked queries: <b>20" in ex.status.value and ex.last_error is None


def test_mask_explorer_length_clips_the_padding(mask8):
    ex = mask8
    updates = ex.n_updates
    ex.controls["T"].value = 4
    assert ex.n_updates == updates + 1 and ex.controls["n_pad"].value == 3
    ex.controls["n_pad"].value = 4
    ex.controls["T"].value = 3  # n_pad clipped to the new T, one update
    assert ex.controls["n_pad"].value == 3 and ex.result["src_labels"] == ["<pad>"] * 3
    assert ex.last_error is None


def test_mask_explorer_fast_path_draws_what_a_full_redraw_draws():
    ex = tw.mask_explorer(T=7, n_pad=2)
    for name, value in (("head", 1), ("causal", False), ("n_pad", 5), ("padding", False),
                        ("layer", 0), ("weights", analysis.RANDOM)):
        tw.assert_fast_path_matches_redraw(ex, name, value)  # same T: fast path, one figure
    assert ex.cached_layouts == [7], "one cached figure per length T"


def test_mask_explorer_rejects_bad_arguments(mask8):
    with pytest.raises(ValueError, match="2 <= T <= 10"):
        tw.mask_explorer(T=11)
    with pytest.raises(ValueError, match="0 <= n_pad <= T"):
        tw.mask_explorer(T=4, n_pad=5)
    with pytest.raises(ValueError, match="out of range"):
        mask8.compute(weights=analysis.TRAINED, layer=2, head=0, T=5, n_pad=0,
                      causal=True, padding=True)


# ── 05 · checks that drove notebook 05's explorers

def block_models():
    """The explorer's default models, built once per test (the explorer copies nothing)."""
    return analysis.reversal_models()


def encoder_input(model, text):
    """Token vectors * sqrt(d_model) + PE, written out here (the explorer calls model.embed)."""
    src, _, _, _ = analysis.reversal_example(text)
    d = model.config.d_model
    return model.src_embed[src[0]] * np.float32(np.sqrt(d)) + model.pe[:src.shape[1]]


def test_block_explorer_shows_the_trained_encoder_stage_by_stage():
    from helpers.transformer import EncoderBlock
    from tests.test_block import block_reference, ln_reference  # loops and textbook formulas

    models = block_models()
    ex = tw.block_explorer(models, "3 1 4 1 5 9 2 6")
    trained, random = models[analysis.TRAINED], models[analysis.RANDOM]
    assert ex.last_error is None and ex.controls["weights"].value == analysis.TRAINED
    assert (ex.controls["layer"].min, ex.controls["layer"].value, ex.controls["layer"].max) == (
        0, 0, 1)  # blocks numbered as encoder.layers[k]
    assert ex.result["stage"] == 2 and 'data-control="layer">0<' in ex.status.value
    assert analysis.TRAINED in ex.result["weights"] and ex.result["labels"] == list("31415926")
    x = encoder_input(trained, "3 1 4 1 5 9 2 6")
    np.testing.assert_allclose(ex.result["stages"][0], x, rtol=1e-6)
    np.testing.assert_allclose(ex.result["stages"][-1], block_reference(trained.encoder.layers[0], x),
                               atol=1e-4)
    cos = ex.result["cos"]  # stage 2, r = x + a: the trained sum keeps the input
    np.testing.assert_allclose(cos, (ex.result["stages"][2] * x).sum(-1) / np.linalg.norm(
        ex.result["stages"][2], axis=-1) / np.linalg.norm(x, axis=-1), rtol=1e-5)
    assert cos.min() > 0.9 and 'data-control="weights">trained' in ex.status.value

    ex.controls["layer"].value = 1  # block 1's output is the encoder's output (the memory)
    ex.controls["stage"].value = 6
    src, _, _, _ = analysis.reversal_example("3 1 4 1 5 9 2 6")
    np.testing.assert_allclose(ex.result["activations"], trained.encode(src)[0][0], atol=1e-6)
    assert ex.controls["stage"].label == "6 · norm" and ex.result["formula"] == "out = LN₂(s)"

    png = ex.image.value
    ex.controls["weights"].value = analysis.RANDOM  # the untrained twin, labelled in the title
    assert ex.image.value != png and ex.result["weights"] == analysis.RANDOM
    assert all(m.cache is None for m in random.encoder.modules())  # caches cleared
    np.testing.assert_allclose(ex.result["activations"], random.encode(src)[0][0], atol=1e-6)

    updates = ex.n_updates
    ex.controls["norm_first"].value = True  # the same trained weights in the Pre-LN order
    assert ex.n_updates == updates + 1, "one recompute per change, even with linked controls"
    assert ex.controls["stage"].value == 6 and ex.controls["stage"].label == "6 · add"
    ex.controls["weights"].value = analysis.TRAINED
    h = x
    for block in trained.encoder.layers:
        pre = EncoderBlock(32, 2, 128, np.random.default_rng(0), norm_first=True)
        pre.load_parameters(block.parameters())
        h = block_reference(pre, h)
    np.testing.assert_allclose(ex.result["activations"], h, atol=1e-4)
    ex.controls["stage"].value = 1  # Pre-LN stage 1 is the first norm: trained gamma, beta
    norm1 = trained.encoder.layers[1].norm1  # block 1, the block still chosen
    np.testing.assert_allclose(ex.result["activations"],
                               ln_reference(ex.result["stages"][0], norm1.gamma, norm1.beta), atol=1e-5)
    ex.controls["norm_first"].value = False
    assert ex.controls["stage"].label == "1 · self-attention" and ex.last_error is None


def test_block_explorer_digits_box_and_bad_digits():
    ex = tw.block_explorer(block_models(), "3 1 4")
    ex.controls["digits"].value = "2 7 1 8 2"
    assert ex.result["activations"].shape == (5, 32) and ex.result["labels"] == list("27182")
    ex.controls["digits"].value = "12a"  # shown in the explorer's error box, the figure kept
    assert isinstance(ex.last_error, ValueError) and "digits" in ex.error.value
    ex.controls["digits"].value = "9"
    assert ex.last_error is None and ex.result["activations"].shape == (1, 32)


def test_block_explorer_fast_path_draws_what_a_redraw_draws_and_every_control_counts():
    from helpers.widgets.explorer import png_pixels

    ex = tw.block_explorer(block_models())
    for name, value in (("stage", 4), ("layer", 1), ("weights", analysis.RANDOM), ("stage", 0)):
        tw.assert_fast_path_matches_redraw(ex, name, value)
    takes_fast_path(ex, "weights", analysis.TRAINED)  # the weights step again, back
    assert len(ex.cached_layouts) == 1
    for name, value in (("norm_first", True), ("digits", "1 2 3"), ("layer", 0), ("stage", 3)):
        before = png_pixels(ex.image.value)
        ex.controls[name].value = value
        after = png_pixels(ex.image.value)
        assert before.shape != after.shape or (before != after).any(-1).mean() > 0.01, name


def test_block_explorer_refuses_a_pre_ln_model():
    from dataclasses import replace

    from helpers.transformer import Transformer

    config = block_models()[analysis.TRAINED].config
    pre = Transformer.from_config(replace(config, norm_first=True), np.random.default_rng(0))
    with pytest.raises(ValueError, match="Post-LN encoder"):
        tw.block_explorer({"pre": pre})


# ── 06 · checks that drove notebook 06's explorers


@pytest.fixture(scope="module")
def reversal_viewer():
    return tw.attention_viewer(analysis.reversal_models())


def test_attention_viewer_shows_the_trained_model_first_and_names_the_weights(reversal_viewer):
    viewer = reversal_viewer
    viewer.controls["weights"].value = analysis.TRAINED
    viewer.controls["digits"].value = "3 1 4 1 5"
    viewer.controls["kind"].value = "cross"
    viewer.controls["layer"].value = 1
    viewer.controls["head"].value = 0
    assert tw.attention_viewer(analysis.reversal_models()).values()["weights"] == analysis.TRAINED
    shown = [t.get_text() for t in viewer._drawn[viewer.layout_key(viewer.values())][0].findobj(
        lambda a: hasattr(a, "get_text"))]
    assert any(analysis.TRAINED in t for t in shown)
    # trained cross-attention reads the source backwards: query t -> source position S-1-t
    assert viewer.result["weights"].argmax(axis=-1).tolist() == [4, 3, 2, 1, 0]
    assert viewer.result["reversed_share"] > 0.8
    assert "5 1 4 1 3 &lt;eos&gt;" in viewer.status.value  # its greedy answer: reversed
    viewer.controls["weights"].value = analysis.RANDOM
    assert viewer.result["reversed_share"] < 0.5
    shown = [t.get_text() for t in viewer._drawn[viewer.layout_key(viewer.values())][0].findobj(
        lambda a: hasattr(a, "get_text"))]
    assert any(analysis.RANDOM in t for t in shown)
    viewer.controls["weights"].value = analysis.TRAINED


def test_attention_viewer_reads_the_models_own_weights(reversal_viewer):
    viewer, models = reversal_viewer, analysis.reversal_models()
    for weights in (analysis.TRAINED, analysis.RANDOM):
        src, tgt, _, _ = analysis.reversal_example("2 7 1 8 2 8")
        maps = analysis.attention_maps(models[weights], src, tgt)
        for kind in tw.ATTENTION_KINDS:
            for layer in (0, 1):  # one update per map (the states between are not looked at)
                viewer.set_values(digits="2 7 1 8 2 8", weights=weights, kind=kind, layer=layer,
                                  head=1)
                np.testing.assert_array_equal(viewer.result["weights"], maps[kind][layer][1])
    viewer.controls["kind"].value = "decoder self"  # the causal mask: blocked cells, zero weight
    assert np.all(viewer.result["weights"][viewer.result["blocked"]] == 0)
    assert viewer.result["blocked"].sum() == 6 * 5 // 2 and viewer.last_error is None
    viewer.controls["digits"].value = "3 1 4 1 5"
    viewer.controls["weights"].value = analysis.TRAINED
    viewer.controls["kind"].value = "cross"


def test_attention_viewer_fast_path_is_exact_and_every_control_changes_it(reversal_viewer):
    viewer = reversal_viewer
    viewer.controls["digits"].value = "3 1 4 1 5"
    viewer.controls["kind"].value = "decoder self"
    viewer.controls["layer"].value = 1
    viewer.controls["head"].value = 0
    viewer.controls["weights"].value = analysis.TRAINED
    before = bytes(viewer.image.value)
    for control, value in (("weights", analysis.RANDOM), ("layer", 0), ("head", 1),
                           ("head", -1), ("weights", analysis.TRAINED), ("layer", 1)):
        if (control, value) in (("weights", analysis.TRAINED), ("layer", 1)):
            takes_fast_path(viewer, control, value)  # back along the first two steps
        else:
            tw.assert_fast_path_matches_redraw(viewer, control, value)
        assert bytes(viewer.image.value) != before
        before = bytes(viewer.image.value)
    for control, value in (("kind", "encoder self"), ("digits", "9 8 7")):  # new layouts
        viewer.controls[control].value = value
        assert viewer.last_error is None and bytes(viewer.image.value) != before
        before = bytes(viewer.image.value)
    assert viewer.result["weights"].shape == (3, 3)
    viewer.controls["digits"].value = "9 x"  # shown, not raised; the last figure stays
    assert "type 1 to 10 digits" in viewer.error.value and bytes(viewer.image.value) == before
    viewer.controls["digits"].value = "3 1 4 1 5"
    assert viewer.last_error is None


# ── 07 · checks that drove notebook 07's explorers


@pytest.fixture(scope="module")
def nb07_comparison():
    models = analysis.reversal_models(seed=0)
    return tw.attention_comparison(
        models[analysis.RANDOM], models[analysis.TRAINED],
        ["3 1 4 1 5 9 2 6", "2 7 1 8 2 8", "9 8 7 6 5 4 3 2 1 0", "4 2", "5 5 5 1 5 5"], note="test")


def test_nb07_typed_digits_are_reversed_by_the_trained_model(nb07_comparison):
    ex = nb07_comparison
    ex.controls["digits"].value = "0123456789"
    r = ex.result
    assert r["output"] == "9 8 7 6 5 4 3 2 1 0 <eos>" and r["trained_mass"] > r["random_mass"]
    assert ex.controls["layer"].value == 1 and ex.last_error is None
    ex.controls["example"].value = "4 2"
    assert ex.controls["digits"].value == "4 2" and ex.result["trained"].shape == (3, 2)
    assert ex.last_error is None


def test_nb07_panels_are_labelled_random_and_trained(nb07_comparison):
    ex = nb07_comparison
    ex.controls["example"].value = "2 7 1 8 2 8"
    from helpers.widgets.training import _comparison_title
    assert _comparison_title("random", ex.result).startswith("RANDOM initial weights")
    assert _comparison_title("trained", ex.result).startswith("TRAINED weights")


def test_nb07_fast_path_matches_a_full_redraw(nb07_comparison):
    from helpers.widgets.explorer import assert_fast_path_matches_redraw
    assert_fast_path_matches_redraw(nb07_comparison, "head", 0)



# ── 08 · checks that drove notebook 08's explorers


def test_nb08_cost_explorer_at_512_keys_blocks_of_32():
    ex = tw.cost_explorer()
    ex.set_values(n=512, d_k=64, block=32)  # one update: one timing, not one per control
    r = ex.result
    assert r["bytes"] == {"plain": 512 * 512 * 4, "online": 512 * 32 * 4}
    assert r["flops"] == 4 * 512 * 512 * 64
    assert r["max_diff"] < 5e-6
    assert all(t > 0 for t in r["ms"].values()) and ex.last_error is None


# ── 09 · the pieces explorer ─────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def pieces():
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_modern_models, load_runs

    models, _ = load_modern_models()
    return tw.pieces_explorer(models, record=load_runs(MODERN_RUNS, MODERN_MANIFEST))


def test_nb09_every_piece_switches_the_model_and_its_attention(pieces):
    ex = pieces
    assert ex.result["name"] == "2017" and ex.result["trained"] and ex.last_error is None
    seen = {"2017": ex.result["weights"].copy()}
    for piece, name in [("position", "2017 + RoPE"), ("norm", "2017 + pre-norm RMSNorm + RoPE"),
                        ("ffn", "2017 + pre-norm RMSNorm + SwiGLU + RoPE"), ("attention", "today")]:
        ex.controls[piece].value = "today"
        assert ex.last_error is None and ex.result["name"] == name
        assert not any(np.allclose(ex.result["weights"], w) for w in seen.values()), piece
        seen[name] = ex.result["weights"].copy()
    assert ex.result["answer"] == "9 5 1 4 1 3 <eos>" and ex.result["right"]
    assert np.allclose(ex.result["accuracy"][:10], 1.0)
    assert np.allclose(ex.result["weights"].sum(-1), 1.0)
    assert np.all(ex.result["weights"][np.triu_indices(13, 1)] == 0)  # causal
    for piece in ("position", "norm", "ffn", "attention"):
        ex.controls[piece].value = "2017"


def test_nb09_random_weights_are_labelled_random_and_get_nothing_right(pieces):
    ex = pieces
    ex.controls["weights"].value = tw.MODERN_RANDOM
    try:
        assert not ex.result["trained"] and ex.result["accuracy"].max() < 0.2
        title = ex._drawn[ex.layout_key(ex.values())][0]._suptitle.get_text()
        assert "RANDOM" in title and "2017" in title
    finally:
        ex.controls["weights"].value = tw.MODERN_TRAINED


def test_nb09_fast_path_matches_a_redraw_and_layer_and_head_count(pieces):
    ex = pieces
    before = ex.result["weights"].copy()
    tw.assert_fast_path_matches_redraw(ex, "layer", 0)
    assert not np.allclose(ex.result["weights"], before)
    tw.assert_fast_path_matches_redraw(ex, "head", 2)
    tw.assert_fast_path_matches_redraw(ex, "ffn", "today")
    for control, value in (("ffn", "2017"), ("head", -1), ("layer", 1)):
        ex.controls[control].value = value


def test_nb09_digits_up_to_16_and_a_clear_error_beyond(pieces):
    ex = pieces
    ex.controls["digits"].value = "1 2 3 4 5 6 7 8 9 0 1 2"
    assert ex.last_error is None and len(ex.result["labels"]) == 25
    ex.controls["digits"].value = "1" * 17
    assert isinstance(ex.last_error, ValueError) and "1 to 16 digits" in str(ex.last_error)
    ex.controls["digits"].value = "3 1 4 1 5 9"
    assert ex.last_error is None
    with pytest.raises(ValueError, match="16 models"):
        tw.pieces_explorer({"2017": None})


# ── 10 · the writing explorer ────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def writing():
    from helpers.data import load_lm, load_shakespeare
    from helpers.lm import Characters

    model, _ = load_lm()  # the explorer's own trained weights, loaded again to check them
    return tw.committed_writing_explorer(), model, Characters(load_shakespeare())


def test_nb10_bars_are_the_models_own_next_character_distribution(writing):
    from helpers.lm import next_token_probabilities

    ex, model, chars = writing
    assert ex.last_error is None and ex.result["weights"] == tw.LM_TRAINED
    assert ex.controls["prompt"].value == "ROMEO:\\n"  # typed as a learner types a newline
    ids = chars.encode("ROMEO:\n")[None]
    p = next_token_probabilities(model.forward(ids)[:, -1], 0.8)[0]  # without the KV cache
    top = np.sort(p)[::-1][:12]
    np.testing.assert_allclose(ex.result["p"], top, atol=1e-5)  # float32: rounding only
    assert ex.result["labels"][0] == chars.chars[int(np.argmax(p))].replace("\n", "⏎")
    texts = ex.result["texts"]
    assert len(texts) == 4 and all(len(t) == 32 for t in texts)
    assert ex.result["distinct"] == 4 and ex.result["known"] > 0.6
    assert "different samples: <b>4 of 4</b>" in ex.status.value
    assert 'data-control="top_k">all</span>' in ex.status.value


def test_nb10_top_k_1_is_greedy_and_the_seed_only_moves_samples(writing):
    from helpers.lm import write

    ex, model, chars = writing
    ex.controls["top_k"].value = 1
    try:
        assert ex.result["p"][0] == 1.0 and np.all(ex.result["p"][1:] == 0)
        ids = chars.encode("ROMEO:\n")[None]
        greedy = chars.decode(write(model, ids, 32)[0, ids.shape[1]:])
        assert ex.result["texts"] == [greedy] * 4 and ex.result["distinct"] == 1
        ex.controls["seed"].value = 3
        assert ex.result["texts"] == [greedy] * 4  # greedy ignores the seed
    finally:
        ex.controls["top_k"].value = 0  # all
    sample_3 = ex.result["texts"]
    ex.controls["seed"].value = 0
    assert ex.result["texts"] != sample_3  # sampled: the seed matters
    at_08 = dict(ex.result)
    ex.controls["temperature"].value = 0.1
    assert ex.result["p"][0] > at_08["p"][0]  # a lower temperature sharpens the distribution
    ex.controls["temperature"].value = 2.0
    assert ex.result["p"][0] < at_08["p"][0]  # a higher one flattens it
    assert ex.result["known"] < at_08["known"] / 2  # and misspells (about 0.13 against 0.82)
    ex.controls["temperature"].value = 0.8


def test_nb10_random_weights_write_no_words_and_are_labelled(writing):
    ex, _, _ = writing
    ex.controls["weights"].value = tw.LM_RANDOM
    try:
        assert ex.result["known"] < 0.2
        title = ex._drawn[ex.layout_key(ex.values())][0]._suptitle.get_text()
        assert "random" in title
    finally:
        ex.controls["weights"].value = tw.LM_TRAINED


def test_nb10_prompts_escapes_unknown_characters_and_the_fast_path(writing):
    ex, _, chars = writing
    ex.controls["prompt"].value = "KING RICHARD III:\\n"  # a typed \n is a newline
    assert ex.last_error is None and ex.result["prompt"] == "KING RICHARD III:\\n"
    shown = bytes(ex.image.value)
    ex.controls["prompt"].value = "ROMEO#"  # "#" never occurs in the play
    assert isinstance(ex.last_error, ValueError) and "not in the vocabulary" in str(ex.last_error)
    assert bytes(ex.image.value) == shown  # the last good figure stays
    ex.controls["prompt"].value = "ROMEO:\\n"
    assert ex.last_error is None
    tw.assert_fast_path_matches_redraw(ex, "temperature", 1.2)
    ex.controls["temperature"].value = 0.8
    with pytest.raises(ValueError, match="at least one model"):
        tw.writing_explorer({}, chars, set())
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tw.writing_explorer({tw.LM_TRAINED: None}, chars, set(), prompt="#")


# ── 11 · the translation explorer ────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def translation():
    """The explorer on the committed model and vocabulary (its own copy) and the first six test
    pairs. Nothing below depends on the weights being trained, but a random model never writes
    </s>: its every candidate runs to the last position, and each figure costs twice as much."""
    from helpers.data import load_multi30k, load_translation

    model, vocab, _ = load_translation()
    german, english = load_multi30k("test_2016_flickr")
    pairs = list(zip(german[:6], english[:6], strict=True))
    return tw.translation_explorer(model, vocab, pairs), model, vocab, pairs


def _reset_translation(ex):
    """Back to the first sentence with the defaults: one update (no search or figure for the
    states in between), and it is kept from before, so it costs neither."""
    ex.set_values(text="", sentence=0, beam=4, alpha=0.6, layer=2, head=-1)
    assert ex.last_error is None, ex.last_error


def _unescaped(status):
    import html

    return html.unescape(status)


def test_nb11_shows_the_pieces_the_best_translation_and_its_cross_attention(translation):
    from helpers.translation import cross_attention, length_penalty, translate, words
    from helpers.widgets.translation import piece_label

    ex, model, vocab, pairs = translation
    _reset_translation(ex)
    r = ex.result
    german, english = pairs[0]
    assert r["german"] == german and r["reference"] == english and not r["typed"]
    ids = vocab.encode(german)
    assert r["src_labels"] == [piece_label(vocab.tokens[i]) for i in ids]
    assert r["src_labels"][-1] == "</s>"
    for word, pieces in zip(words(german), r["word_pieces"], strict=True):
        assert "".join(p.removesuffix("·") for p in pieces) == word  # no character is lost
        assert all(p.endswith("·") for p in pieces[:-1]) and not pieces[-1].endswith("·")
    split = [p for p in r["word_pieces"] if len(p) > 1]
    assert split, "sentence 1 has a word the vocabulary splits into pieces"
    assert "".join(split[0]) in _unescaped(ex.status.value)  # shown as anst·arr·t
    # the best candidate is what translate() writes with the same beam and alpha
    assert r["translation"] == translate(model, vocab, [german], beam=4, alpha=0.6)[0]
    assert r["translation"] == vocab.decode(r["tokens"])
    scores = [c[2] for c in r["candidates"]]
    assert 1 <= len(scores) <= 4 and scores == sorted(scores, reverse=True)
    for _, log_p, score, n in r["candidates"]:
        assert score == pytest.approx(log_p / length_penalty(n, 0.6))
    # the heatmap: the best candidate's cross-attention, the last layer (2), the mean of heads
    T, S = r["weights"].shape
    assert (T, S) == (len(r["tokens"]), len(ids)) == (len(r["tgt_labels"]), len(ids))
    np.testing.assert_allclose(r["weights"].sum(axis=-1), 1.0, atol=1e-6)
    tgt_in = np.array([[vocab.bos_id, *r["tokens"][:-1]]])  # BOS, the candidate without EOS
    maps = cross_attention(model, np.array([ids]), tgt_in)  # (layers, 1, h, T, S)
    np.testing.assert_allclose(r["weights"], maps[2, 0].mean(axis=0), atol=1e-12)
    shown = _unescaped(ex.status.value)
    assert f"translation: <b>{r['translation']}</b>" in shown
    assert f"reference: <b>{english}</b>" in shown
    assert 'data-control="head">mean of heads</span>' in shown


def test_nb11_beam_1_is_greedy_and_beam_and_alpha_change_the_candidates(translation):
    from helpers.translation import length_penalty, translate

    ex, model, vocab, pairs = translation
    _reset_translation(ex)
    german = pairs[0][0]
    at_4 = [c[:2] for c in ex.result["candidates"]]
    assert changed_pixels(ex, "beam", 1) > 0.05
    assert len(ex.result["candidates"]) == 1
    assert ex.result["translation"] == translate(model, vocab, [german])[0]  # greedy
    assert "of 1 finished candidate(s)" in ex.status.value
    assert changed_pixels(ex, "beam", 8) > 0.05
    scores = [c[2] for c in ex.result["candidates"]]
    assert len(scores) == 8 and scores == sorted(scores, reverse=True)
    ex.controls["beam"].value = 4
    assert [c[:2] for c in ex.result["candidates"]] == at_4  # kept: the same search
    for alpha in (0.0, 1.5):  # alpha rescores: log P / lp(|Y|) with lp = ((5 + |Y|) / 6)^alpha
        assert changed_pixels(ex, "alpha", alpha) > 0.01
        for _, log_p, score, n in ex.result["candidates"]:
            assert score == pytest.approx(log_p / length_penalty(n, alpha))
        scores = [c[2] for c in ex.result["candidates"]]
        assert scores == sorted(scores, reverse=True)
        assert ex.result["translation"] == translate(model, vocab, [german], beam=4,
                                                     alpha=alpha)[0]
    assert all(c[2] > c[1] for c in ex.result["candidates"])  # lp > 1 at alpha 1.5
    ex.controls["alpha"].value = 0.0
    assert all(c[1] == pytest.approx(c[2]) for c in ex.result["candidates"])  # no penalty
    _reset_translation(ex)


def test_nb11_every_control_moves_the_figure_as_the_browser_suite_moves_it(translation):
    """One step of each control, as tests/e2e moves it, changes at least 1% of the pixels."""
    ex, _, _, _ = translation
    _reset_translation(ex)
    for control, value in (("sentence", 1), ("beam", 5), ("alpha", 0.9), ("layer", 0),
                           ("head", 0)):
        assert changed_pixels(ex, control, value) >= 0.01, control
    _reset_translation(ex)


def test_nb11_layer_and_head_take_the_fast_path_without_searching_again(translation):
    ex, _, _, _ = translation
    _reset_translation(ex)
    seen = [ex.result["weights"].copy()]
    with mock.patch("helpers.widgets.translation.beam_search",
                    side_effect=AssertionError("searched again")), \
            mock.patch("helpers.widgets.translation.cross_attention",
                       side_effect=AssertionError("ran the model again")):
        for step, (control, value) in enumerate((("layer", 0), ("head", 2), ("layer", 1),
                                                 ("head", 0), ("layer", 0))):  # each map new
            if step < 2:  # both title forms: mean of heads, one head
                tw.assert_fast_path_matches_redraw(ex, control, value)
            else:  # the same refresh (the map, the title) as the two steps above
                takes_fast_path(ex, control, value)
            w = ex.result["weights"]
            np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-6)
            assert not any(np.array_equal(w, s) for s in seen), (control, value)
            seen.append(w.copy())
        ex.controls["beam"].value = 3  # a new search: refused by the patch, shown, not raised
        assert isinstance(ex.last_error, AssertionError) and "searched again" in ex.error.value
    ex.controls["beam"].value = 4  # kept from before: no search
    assert ex.last_error is None
    _reset_translation(ex)


def test_nb11_a_typed_sentence_overrides_the_pick_and_a_pick_clears_it(translation):
    ex, _, vocab, pairs = translation
    _reset_translation(ex)
    shown = bytes(ex.image.value)
    ex.controls["text"].value = "  Ein Hund rennt über die Xylophonwiese.  "
    r = ex.result
    assert ex.last_error is None and r["typed"] and r["reference"] is None
    assert r["german"] == "Ein Hund rennt über die Xylophonwiese."
    assert bytes(ex.image.value) != shown
    pieces = dict(zip(["Ein", "Hund", "rennt", "über", "die", "Xylophonwiese", "."],
                      r["word_pieces"], strict=True))
    assert len(pieces["Xylophonwiese"]) > 1  # a word the vocabulary lacks: pieces it has
    assert "reference: <b>none (typed)</b>" in ex.status.value
    ex.controls["sentence"].value = 2  # a pick from the list replaces the typed sentence
    assert ex.controls["text"].value == "" and ex.result["german"] == pairs[2][0]
    assert ex.result["reference"] == pairs[2][1] and ex.last_error is None
    ex.controls["text"].value = pairs[2][0]  # typed, the same words: no reference to show
    assert ex.result["german"] == pairs[2][0] and ex.result["reference"] is None
    assert "reference: <b>none (typed)</b>" in ex.status.value
    ex.controls["text"].value = "€ ☃"  # characters no training word had: <unk>
    assert ex.result["src_labels"] == ["<unk>", "<unk>", "</s>"] and ex.last_error is None
    _reset_translation(ex)


def test_nb11_blank_or_too_long_text_gets_a_message_not_a_traceback(translation):
    ex, model, vocab, pairs = translation
    _reset_translation(ex)
    ex.controls["text"].value = "   "
    assert ex.last_error is None and ex.result["german"] == pairs[0][0]
    assert "only spaces" in ex.status.value and ex.result["note"]
    shown = bytes(ex.image.value)
    long_text = "Ein Mann mit einem orangefarbenen Hut. " * 20
    n = len(vocab.encode(long_text))
    assert n > len(model.pe) == 128
    ex.controls["text"].value = long_text
    assert ex.last_error is None and ex.error.layout.display == "none"
    assert "positions for 128" in ex.result["message"] and "positions for 128" in ex.status.value
    assert f"{n} pieces long" in ex.status.value and bytes(ex.image.value) != shown
    ex.controls["head"].value = 1  # every control still works
    ex.controls["beam"].value = 2
    assert ex.last_error is None and ex.result["message"]
    ex.controls["text"].value = "Ein Mann mit einem orangefarbenen Hut. " * 3  # fits
    assert ex.last_error is None and ex.result["message"] is None
    assert ex.result["weights"].shape[1] == len(vocab.encode(ex.controls["text"].value))
    _reset_translation(ex)


def test_nb11_builder_refuses_what_it_cannot_show(translation):
    from helpers.transformer import set_training

    ex, model, vocab, pairs = translation
    with mock.patch("IPython.display.display") as display:
        tw.translation_explorer(model, vocab, pairs[:1])
    display.assert_not_called()
    for kwargs, message in (({"beam": 9}, "beam must be"), ({"beam": 0}, "beam must be"),
                            ({"alpha": 0.7}, "alpha must be one of"),
                            ({"sentences": []}, "non-empty list"),
                            ({"sentences": ["Ein Hund"]}, "pairs"),
                            ({"model": "a model"}, "Transformer")):
        arguments = {"model": model, "vocab": vocab, "sentences": pairs, **kwargs}
        with pytest.raises(ValueError, match=message):
            tw.translation_explorer(**arguments)
    set_training(model, np.random.default_rng(0))
    try:
        with pytest.raises(ValueError, match="set_training"):
            tw.translation_explorer(model, vocab, pairs)
    finally:
        set_training(model, None)


def test_nb11_the_committed_model_as_the_notebook_builds_it():
    ex = tw.committed_translation_explorer(2)
    r = ex.result
    assert ex.last_error is None and len(ex.controls["sentence"].options) == 2
    assert r["reference"] and r["candidates"] and len(r["candidates"]) <= 4
    np.testing.assert_allclose(r["weights"].sum(axis=-1), 1.0, atol=1e-5)  # float32
    assert 'data-control="layer">layer 2</span>' in ex.status.value  # the last of 3
    tw.assert_fast_path_matches_redraw(ex, "head", 0)
