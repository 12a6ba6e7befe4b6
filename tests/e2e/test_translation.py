"""Notebook 11's translation explorer in JupyterLab, driven as a learner drives it.

test_notebooks.py already runs notebook 11 like every notebook (Run All, every slider and
dropdown moved once, the self-check); this test asks for the same check (it runs once and both
tests read its report) and adds what only this explorer needs: its controls are the ones the
notebook promises, and what was typed into its text box (texts.py) showed what it must:

1. a German sentence with a word the vocabulary lacks: a new figure, the word shown in pieces
   ("·" marks a piece the word goes on after), no reference;
2. only spaces: the sentence picked from the list again, with a note saying so;
3. a sentence longer than the model's positions: a message, not a traceback;
4. an empty box: the sentence picked from the list, with its reference.

``E2E_TRANSLATION_NOTEBOOK=<path>`` points the test at another copy of the notebook (one being
written, outside notebooks/); its file name must stay ``11_translation.ipynb``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .lab import NOTEBOOKS
from .test_notebooks import clean
from .texts import BLANK, CLEARED, TOO_LONG, TRANSLATION_TEXTS, TRANSLATION_TITLE, TYPED_SENTENCE

pytestmark = pytest.mark.e2e

NOTEBOOK = Path(os.environ.get("E2E_TRANSLATION_NOTEBOOK", NOTEBOOKS / "11_translation.ipynb"))
CONTROLS = {"sentence": "dropdown", "text": "text", "beam": "slider", "alpha": "slider",
            "layer": "dropdown", "head": "dropdown"}


def planned_checks(item) -> list:
    """What the test will ask for (conftest.py queues it at the start of the session)."""
    return [clean(NOTEBOOK)] if NOTEBOOK.exists() else []


def test_translation_explorer_in_jupyterlab(lab):
    if not NOTEBOOK.exists():
        pytest.fail(f"{NOTEBOOK} does not exist: notebook 11 must display "
                    "tw.translation_explorer(model, vocab, pairs)")
    assert NOTEBOOK.name == "11_translation.ipynb", "texts.py finds what to type by this name"
    report = lab.check(clean(NOTEBOOK))
    print(f"{report.notebook}: {report.seconds:.1f} s")
    for entry in report.typed:
        print(f"  typed {entry['text'][:40]!r}: the figure changed {entry['figure_changed']} "
              f"({entry['pixels']:.1%} of its pixels)")
    assert not report.problems, report.summary()
    found = [e for e in report.explorers if e["title"] == TRANSLATION_TITLE]
    assert len(found) == 1, f"one {TRANSLATION_TITLE!r} expected, found {report.explorers}"
    explorer = found[0]
    assert {c["name"]: c["kind"] for c in explorer["controls"]} == CONTROLS
    where = f'explorer {report.explorers.index(explorer) + 1} "{TRANSLATION_TITLE}"'
    for name, kind in CONTROLS.items():  # every control but the text box moved, and answered
        if kind != "text":
            assert any(m.startswith(where) and f'control "{name}"' in m for m in report.moves), \
                (name, report.moves)

    typed = {entry["text"]: entry for entry in report.typed}
    assert [entry["text"] for entry in report.typed] == list(TRANSLATION_TEXTS)
    for entry in report.typed:
        assert not entry["error"], entry
        assert entry["shown"] == entry["text"].strip(), entry  # the box shows what was typed

    sentence = typed[TYPED_SENTENCE]
    assert sentence["figure_changed"] and sentence["pixels"] >= 0.01, sentence
    shown = re.search(r"pieces: (.*?) · translation:", sentence["status"])
    assert shown, sentence["status"]
    assert "X·" in shown[1] and "Xylophonwiese" not in shown[1], shown[1]  # split in pieces
    assert "reference: none (typed)" in sentence["status"]
    assert "translation:" in sentence["status"]

    blank = typed[BLANK]
    assert "only spaces" in blank["status"], blank["status"]
    assert "reference: none" not in blank["status"] and "translation:" in blank["status"]

    too_long = typed[TOO_LONG]
    assert too_long["figure_changed"] and too_long["pixels"] >= 0.01, too_long
    assert re.search(r"\d+ pieces long .* positions for \d+", too_long["status"]), \
        too_long["status"]
    assert "Traceback" not in too_long["status"]

    cleared = typed[CLEARED]
    assert cleared["figure_changed"] and cleared["pixels"] >= 0.01, cleared
    assert "reference:" in cleared["status"] and "reference: none" not in cleared["status"]
    assert "positions for" not in cleared["status"] and "only spaces" not in cleared["status"]
