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


def test_scaling_explorer_matches_an_independent_computation():
    ex = tw.scaling_explorer(T=8, seed=0)
    for d_k in (4, 1024):
        ex.controls["d_k"].value = d_k
        for scaled in (False, True):
            ex.controls["scaled"].value = scaled
            rng = np.random.default_rng([0, d_k])
            Q, K = rng.standard_normal((8, d_k)), rng.standard_normal((8, d_k))
            expected = softmax(Q @ K.T / (np.sqrt(d_k) if scaled else 1.0))
            np.testing.assert_allclose(ex.result["weights"], expected, atol=1e-12)
            assert ex.result["max_weight"] == pytest.approx(expected.max(-1).mean())
    ex.controls["scaled"].value = False
    unscaled = ex.result["max_weight"]
    ex.controls["scaled"].value = True
    assert unscaled > 0.9 > 0.6 > ex.result["max_weight"]
    assert 'data-control="d_k">1024</span>' in ex.status.value
    assert 'data-control="scaled">on</span>' in ex.status.value


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


def test_fast_path_draws_exactly_what_a_full_redraw_draws():
    ex = tw.scaling_explorer()
    for name, value in (("d_k", 256), ("scaled", False), ("d_k", 1)):
        tw.assert_fast_path_matches_redraw(ex, name, value)  # blitting onto the kept background
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


# ── 02 · checks that drove notebook 02's explorers


# ── 03 · checks that drove notebook 03's explorers


# ── 04 · checks that drove notebook 04's explorers


# ── 05 · checks that drove notebook 05's explorers


# ── 06 · checks that drove notebook 06's explorers


# ── 07 · checks that drove notebook 07's explorers


# ── 08 · checks that drove notebook 08's explorers
