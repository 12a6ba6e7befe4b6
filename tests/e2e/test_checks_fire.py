"""Each check of the browser suite fires: the fixture notebooks in tests/e2e/fixtures/ are
broken on purpose (none of them is part of the series), and every breakage must be reported
with the notebook's name and, for an explorer, the control's name.

A correct explorer with every kind of control must pass, which proves the harness moves and
reads sliders, dropdowns, toggle buttons, checkboxes, toggle-button groups and radio buttons.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .lab import FIXTURES, repo_path
from .pool import Check

pytestmark = pytest.mark.e2e

BROKEN = FIXTURES / "broken_explorers.ipynb"
NOISY = FIXTURES / "noisy_cells.ipynb"
KERNEL_DIES = FIXTURES / "kernel_dies.ipynb"
DIALOG = FIXTURES / "native_dialog.ipynb"
GOOD = FIXTURES / "every_control_kind.ipynb"
HELD = FIXTURES / "held_view.ipynb"

# A fixture notebook has a few quick cells: if "Run All" stalls, fail in minutes, not 15.
FIXTURE_RUN_TIMEOUT = 120

# (fixture, check, text in "where", text in the detail)
EXPECTED = [
    (BROKEN, "explorer-error", 'control "raises_on_change"', "compute fails"),
    (BROKEN, "figure", 'control "raises_on_change"', "did not change"),
    (BROKEN, "figure", 'control "ignored_toggle"', "did not change"),
    (BROKEN, "value", 'control "stale_choice"', "status line shows stale_choice = 'a'"),
    (BROKEN, "figure", 'control "link_breaks"', "did not change"),
    (BROKEN, "value", 'control "link_breaks"', "status line shows link_breaks = 'x'"),
    (BROKEN, "figure", 'control "barely_visible"', "of its pixels did"),
    (BROKEN, "kernel-output", 'control "link_breaks"', "RuntimeError: fixture: link callback"),
    (BROKEN, "kernel-output", 'control "noisy_on_change"', "fixture: a warning on stderr"),
    (BROKEN, "kernel-output", 'control "comm_noise"', "No such comm: "),  # not the probe's
    (BROKEN, "render", "stray_slider = W.IntSlider", "outside any explorer"),
    (BROKEN, "render", 'control "no_frontend"', "Failed to load view class"),
    (BROKEN, "widget-error", "NoViewSlider", "Failed to load view class"),
    (BROKEN, "widget-error", "NoModelExplorer", "Failed to load model class"),
    (BROKEN, "console-error", "run all", "tx-fixture-no-such-module"),
    (NOISY, "stderr", "cell 3", "fixture: a warning on stderr"),
    (NOISY, "console-error", "run all", "fixture: console error"),
    (NOISY, "page-error", "run all", "fixture: uncaught page error"),
    (NOISY, "server-log", "run all", "[E "),
    (NOISY, "cell-error", "cell 7", "RuntimeError: fixture: this cell raises"),
    (NOISY, "not-executed", "cell 8", "after the error in cell 7"),
    (DIALOG, "dialog", "run all", "fixture: an alert"),
    (KERNEL_DIES, "dialog", "run all", "appears to have died"),
]


def fixture_check(fixture) -> Check:
    """One run of a fixture notebook serves all its cases."""
    return Check(fixture, expect_problems=True, run_timeout=FIXTURE_RUN_TIMEOUT)


def good_check() -> Check:
    return Check(GOOD, run_timeout=FIXTURE_RUN_TIMEOUT)


def hold_controls(page):
    """Chrome's Fetch domain pauses the request for the widget controls; nobody resumes it.
    Returns which requests are held (the page is closed without waiting for them)."""
    chunk = _controls_chunk()
    cdp = page.context.new_cdp_session(page)
    cdp.send("Fetch.enable", {"patterns": [{"urlPattern": f"*/{chunk}*"}]})
    return lambda request: f"/{chunk}" in request.url


def held_check() -> Check:
    return Check(HELD, prepare_page=hold_controls, settle_timeout=5, expect_problems=True,
                 run_timeout=FIXTURE_RUN_TIMEOUT)


def planned_checks(item) -> list[Check]:
    """What each test will ask for (conftest.py queues them all at the start of the session)."""
    if item.originalname == "test_check_fires":
        return [fixture_check(item.callspec.params["case"][0])]
    return {"test_correct_explorer_passes": [good_check()],
            "test_widget_loading_fires": [held_check()]}.get(item.originalname, [])


def _id(case):
    fixture, check, where, _ = case
    return f"{fixture.stem}-{check}-{where.replace('control ', '').strip(chr(34))}"


@pytest.mark.parametrize("case", EXPECTED, ids=[_id(c) for c in EXPECTED])
def test_check_fires(lab, case):
    fixture, check, where, detail = case
    report = lab.check(fixture_check(fixture))
    hits = [p for p in report.problems if p.check == check and where in p.where]
    assert hits, f"[{check}] did not fire at {where!r}\n{report.summary()}"
    assert any(detail in p.detail for p in hits), f"no [{check}] says {detail!r}\n{report.summary()}"
    for problem in hits:  # the message names the notebook (and the control, when there is one)
        assert str(problem).startswith(f"{repo_path(fixture)}: ")
        assert where in str(problem)


def test_correct_explorer_passes(lab):
    report = lab.check(good_check())
    assert not report.problems, report.summary()
    kinds = {c["kind"] for e in report.explorers for c in e["controls"]}
    assert kinds == {"slider", "dropdown", "toggle"}
    assert len(report.moves) == 8, report.moves


def _controls_chunk() -> str:
    """The file of the widget front end that holds the controls (sliders, boxes, images)."""
    static = (Path(sys.prefix) / "share/jupyter/labextensions/@jupyter-widgets"
              / "jupyterlab-manager/static")
    for path in sorted(static.glob("*.js")):
        if "IntSliderView" in path.read_text(encoding="utf-8", errors="replace"):
            return path.name
    pytest.fail(f"no ipywidgets controls chunk in {static}")


def test_widget_loading_fires(lab):
    """A widget view whose front-end code never arrives stays "Loading widget..."."""
    report = lab.check(held_check())
    loading = [p for p in report.problems if p.check == "widget-loading"]
    assert loading, report.summary()
    assert all(str(p).startswith(f"{repo_path(HELD)}: cell 2 ") for p in loading), report.summary()
