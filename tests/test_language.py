"""The Chinese of the helpers' messages (helpers/language.py, helpers/zh.json) and its font."""

import re
import string
import warnings

import numpy as np
import pytest

from helpers import language
from helpers.language import tr, use_language
from tests.zh_texts import chinese, english_texts

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def zh():
    use_language("zh")
    yield
    use_language("en")


def fields(text):
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_text_a_helper_shows_has_its_chinese_with_the_same_fields():
    texts, zh = english_texts(), chinese()
    missing = [f"{text!r} ({where[0]})" for text, where in texts.items() if not zh.get(text)]
    assert not missing, f"{len(missing)} texts lack Chinese in helpers/zh.json, e.g. {missing[:5]}"
    wrong = [text for text in texts if fields(zh[text]) != fields(text)]
    assert not wrong, f"the Chinese must keep every {{field}} of the English: {wrong[:5]}"
    prose = re.compile(r"\b[A-Za-z]{3,}\s+[A-Za-z]{2,}\b")  # two words: not a formula or a name
    untranslated = [text for text in texts if prose.search(re.sub(
        r"\{[^}]*\}|`[^`]*`|\$[^$]*\$", "", text)) and not CJK.search(zh[text])]
    assert not untranslated, f"entries that are not Chinese: {untranslated[:5]}"
    stale = sorted(set(zh) - set(texts))
    assert not stale, f"zh.json holds texts no helper shows: {stale[:5]} (python tests/zh_texts.py --stale)"


def test_english_is_the_default_and_chinese_is_chosen_once(zh):
    assert language.language() == "zh"
    assert tr("shape {shape}", shape=(2, 3)) == chinese()["shape {shape}"].format(shape=(2, 3))
    use_language("en")
    assert tr("shape {shape}", shape=(2, 3)) == "shape (2, 3)"
    assert tr("a text no catalogue holds") == "a text no catalogue holds"
    with pytest.raises(ValueError, match="language must be one of"):
        use_language("fr")


def test_a_checker_answers_in_chinese_once_chosen(zh):
    from helpers.checks import check

    def softmax(x, axis=-1):
        e = np.exp(x)  # no max subtracted: overflows on the big-logit case
        return e / e.sum(axis=axis, keepdims=True)

    def causal_mask(T):
        return np.triu(np.ones((T, T), dtype=bool), k=0)  # the diagonal blocked too

    for result in (check(softmax, "01.1"), check(causal_mask)):
        says = re.split("[:：]", result.message.splitlines()[0], maxsplit=1)[1]  # after the key
        assert not result and CJK.search(says), result.message
        assert not re.search(r"\b(expected|got|case|See|cases)\b", result.message), result.message


def test_the_grader_reports_in_chinese_with_lang_zh(tmp_path, capsys):
    from helpers.checks import main

    learner = tmp_path / "answers.py"
    learner.write_text("def causal_mask(T):\n    raise NotImplementedError\n")
    try:
        assert main([str(learner), "--notebook", "04", "--lang", "zh"]) == 1
    finally:
        use_language("en")
    report = capsys.readouterr().out
    assert "causal_mask" in report and CJK.search(report.split("causal_mask", 1)[1]), report


def glyph_pixels(text, family=None):
    """The pixels of `text` drawn alone by matplotlib's Agg renderer, cropped to the ink."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1.2, 0.6), dpi=100)
    fig.text(0.1, 0.3, text, fontsize=24, family=family)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    ink = 255 - np.asarray(canvas.buffer_rgba())[..., 0]
    rows, cols = np.nonzero(ink > 64)
    return ink[rows.min():rows.max() + 1, cols.min():cols.max() + 1] if rows.size else ink[:0]


def test_a_chinese_label_is_drawn_as_text_not_boxes(zh):
    """Three different characters give three different shapes, each with more strokes than a
    box: a font without them draws the same empty box (tofu) for each, and warns."""
    assert language.cjk_font_path() is not None, "the set-up installs pylopdf-fonts-zh-cn"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        shapes = [glyph_pixels(c) for c in "注意力"]
    assert all(s.size for s in shapes)
    assert len({(s.shape, s.tobytes()) for s in shapes}) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = glyph_pixels("注", family="DejaVu Sans")  # a font without it: the box (tofu)
    assert all(s.shape != box.shape or not np.array_equal(s, box) for s in shapes)


def test_latin_text_is_drawn_as_before_once_chinese_is_chosen():
    before = glyph_pixels("softmax(QKᵀ/√d_k) 0.35")
    use_language("zh")
    try:
        after = glyph_pixels("softmax(QKᵀ/√d_k) 0.35")
    finally:
        use_language("en")
    assert np.array_equal(before, after)


def notebook_explorers():
    """Every explorer as its notebook builds it (the arguments of the notebooks' `tw.` calls)."""
    from helpers import analysis
    from helpers import widgets as tw
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS, load_modern_models, load_runs
    from tests.test_widgets import bank_examples

    models = analysis.reversal_models()
    pair = analysis.reversal_models(seed=0)
    yield tw.scaling_explorer()
    yield tw.query_explorer(bank_examples(), value_names=["money", "water", "place", "function"])
    yield tw.head_explorer("3 1 4 1 5 9 2 6", models=models)
    yield tw.pe_explorer()
    yield tw.mask_explorer(T=8, n_pad=3)
    yield tw.block_explorer(models, "3 1 4 1 5 9 2 6")
    yield tw.attention_viewer(models)
    yield tw.attention_comparison(
        pair[analysis.RANDOM], pair[analysis.TRAINED], ["3 1 4 1 5 9 2 6", "4 2"],
        note="Left: RANDOM initial weights (untrained). Right: TRAINED weights from "
             "data/reverse_model.npz.")
    yield tw.cost_explorer()
    yield tw.pieces_explorer(load_modern_models()[0], record=load_runs(MODERN_RUNS, MODERN_MANIFEST))
    yield tw.committed_writing_explorer()
    yield tw.committed_translation_explorer()
    yield tw.TrainingMonitor(240, every=80, title="reversal task: loss and validation exact match")
    yield tw.TrainingMonitor(240, every=80, title="the small model, live", metric="val",
                             metric_label="validation loss (20 batches)", metric_range=(0, 5))


def test_every_text_an_explorer_passes_to_tr_is_one_zh_json_translates(monkeypatch):
    """Titles, notes, descriptions and option labels reach tr() only when an explorer is built
    or moved: build every notebook's explorer, move every control through its options (a
    slider to its ends), note each text tr() is given, and find it in zh.json's list
    (tests/zh_runtime_texts.json holds those no literal tr() call shows)."""
    import sys

    import helpers.language
    import helpers.widgets  # noqa: F401 (every explorer module, before tr is replaced in each)

    seen = set()

    def noting(text, /, **fields):
        seen.add(text)
        return helpers.language.tr(text, **fields)

    for name, module in list(sys.modules.items()):
        if name.startswith("helpers.widgets") and getattr(module, "tr", None) is tr:
            monkeypatch.setattr(module, "tr", noting)
    explorers = list(notebook_explorers())
    for explorer in explorers[:-2]:  # every option of every menu (of a list of more than 8
        # examples, two), each toggle, each slider at one end
        for control in explorer.controls.values():
            options = [o[1] if isinstance(o, tuple) else o for o in getattr(control, "options", ())]
            values = (options if len(options) <= 8 else options[:2]  # (more: examples, data)
                      if hasattr(control, "options") else
                      [not control.value, control.value] if isinstance(control.value, bool) else
                      [control.max if control.value == control.min else control.min]
                      if hasattr(control, "max") else [])
            start = control.value
            for value in [*values, start]:
                control.value = value
            assert explorer.last_error is None, explorer.last_error
    assert len(explorers) == 14 and len(seen) > 100
    known = english_texts()
    words = {text for text in seen if re.search("[A-Za-z]", text)}  # not "20", an option's number
    assert not sorted(words - set(known)), "add them to tests/zh_runtime_texts.json and zh.json"
