"""Notebook hygiene: committed after restart-and-run-all, deterministic, and in the series' anatomy.

nbval (run by the same `pytest`) re-executes every notebook and compares outputs; this file checks
what nbval does not: execution order, stored state, paths, image formats, markers, anatomy.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import pytest

from tests.regenerate import WIDGET_NOTE, WIDGET_NOTES, WIDGET_VIEW, normalise

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("[0-9][0-9]_*.ipynb"))
EVERY = NOTEBOOKS + EXERCISES  # the generic hygiene holds for the exercise notebooks too

MACHINE_PATH = re.compile(
    r"(/home/|/root/|/Users/|/tmp/|[A-Za-z]:\\\\|site-packages|ipykernel_\d+)" + "|" + re.escape(str(ROOT))
)
NEGATIVE_ZERO = re.compile(r"(?<![\w.])-0\.(0*)(?![0-9])")
ALLOWED_MIME = {"text/plain", "image/png", "text/markdown", "text/html"}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def text(src) -> str:
    return "".join(src) if isinstance(src, list) else src


def output_texts(cell):
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            yield out["name"], text(out["text"])
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                yield mime, text(value)


@pytest.fixture(params=EVERY, ids=[str(p.relative_to(ROOT / "notebooks")) for p in EVERY])
def nb_path(request):
    return request.param


@pytest.fixture(params=NOTEBOOKS, ids=IDS)
def series_path(request):
    return request.param


def test_saved_after_restart_and_run_all(nb_path):
    counts = [c["execution_count"] for c in code_cells(load(nb_path))]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}: restart and run all"


def test_no_errors_and_no_stderr(nb_path):
    for k, cell in enumerate(code_cells(load(nb_path)), 1):
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"code cell {k} has an error output"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), (
                f"code cell {k} wrote to stderr: {text(out['text'])[:200]}"
            )


def test_no_widget_state_and_normalised_metadata(nb_path):
    nb = load(nb_path)
    assert "widgets" not in nb["metadata"], "stored widget state: regenerate with tests/regenerate.py"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in code_cells(nb):
        for out in cell.get("outputs", []):
            assert WIDGET_VIEW not in out.get("data", {}), "widget view stored; regenerate"
    import nbformat

    node = nbformat.from_dict(nb)
    assert normalise(copy.deepcopy(node)) == node, (
        "metadata or outputs are not normalised: run `make notebooks` (tests/regenerate.py)"
    )


def test_no_machine_specific_paths_or_negative_zero(nb_path):
    for k, cell in enumerate(code_cells(load(nb_path)), 1):
        for mime, value in output_texts(cell):
            m = MACHINE_PATH.search(value)
            assert not m, f"code cell {k} ({mime}) prints a machine-specific path: {m.group(0)!r}"
            z = NEGATIVE_ZERO.search(value)
            assert not z, f"code cell {k} prints a negative zero {z.group(0)!r}; add + 0.0"


def test_png_figures_only(nb_path):
    for k, cell in enumerate(code_cells(load(nb_path)), 1):
        for out in cell.get("outputs", []):
            extra = set(out.get("data", {})) - ALLOWED_MIME
            assert not extra, f"code cell {k} has outputs of type {extra}; figures must be PNG"


def test_nbval_markers_are_justified(nb_path):
    """A volatile output is marked by nbval's cell tag, never by a comment in the code a learner
    reads; a tagged cell shows a widget or says why in its metadata "volatile"."""
    for k, cell in enumerate(code_cells(load(nb_path)), 1):
        src = text(cell["source"])
        assert "NBVAL" not in src.upper() and not re.search(r"^\s*# volatile:", src, re.MULTILINE), (
            f"code cell {k}: nbval's markers go in the cell's tags and metadata, not in its code")
        tags = set(cell.get("metadata", {}).get("tags", []))
        assert not tags & {"nbval-skip", "skip-execution"}, f"code cell {k}: no skipped content cells"
        if "nbval-ignore-output" in tags:
            only_widget = cell["outputs"] and all(
                text(out.get("data", {}).get("text/plain", "")) in {WIDGET_NOTE, *WIDGET_NOTES.values()}
                for out in cell["outputs"]
            )
            reason = str(cell["metadata"].get("volatile", "")).strip()
            assert only_widget or reason, (
                f"code cell {k}: the tag nbval-ignore-output is only for widget displays or cells "
                "whose metadata 'volatile' says why their output changes")


def test_no_trailing_semicolons_and_explicit_rng(nb_path):
    for k, cell in enumerate(code_cells(load(nb_path)), 1):
        src = text(cell["source"]).rstrip()
        assert not src.endswith(";"), f"code cell {k} ends with ';' (nbval shows that output anyway)"
        assert "np.random.seed" not in src, f"code cell {k}: use rng = np.random.default_rng(seed)"
        stripped = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("%"))
        for node in ast.walk(ast.parse(stripped)):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "random" and node.attr not in {"default_rng", "Generator"}
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "np"):
                pytest.fail(f"code cell {k}: global np.random.{node.attr}; pass a Generator")


def test_anatomy(series_path):
    nb = load(series_path)
    cells = nb["cells"]
    title = text(cells[0]["source"])
    number = series_path.name[:2]
    assert cells[0]["cell_type"] == "markdown" and title.startswith(f"# {number} · "), title[:80]
    for field in ("Builds on", "Time", "Paper"):
        assert f"**{field}" in title, f"title cell lacks **{field}**"
    markdown = "\n".join(text(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "**You will**" in markdown
    for heading in ("## Check your understanding", "## Summary", "**Next:**"):
        assert heading in markdown, f"missing {heading!r}"
    assert "<details>" in markdown
    assert not re.search(r"!\[[^\]]*\]\(https?://", markdown), "no hot-linked images"
    setup = text(code_cells(nb)[0]["source"])
    assert setup.startswith("%matplotlib inline"), "setup cell starts with %matplotlib inline"
    assert "np.random.default_rng(" in setup and "set_printoptions" in setup


def test_next_links_point_to_existing_notebooks(nb_path):
    markdown = "\n".join(text(c["source"]) for c in load(nb_path)["cells"]
                         if c["cell_type"] == "markdown")
    for target in re.findall(r"\]\(([^)#]+\.ipynb)", markdown):
        assert (nb_path.parent / target).exists(), f"link to missing notebook {target}"


def test_numbering_is_consecutive():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


# The learner's path (DESIGN.md §5): each idea first as a short cell; the hardened version
# (validation, dtype care, converters, the library classes in full) goes in a section whose heading
# says "Under the hood", with its long cells folded (JupyterLab shows them as "..." until clicked).
LONGEST_CELL = 25
UNDER_THE_HOOD = re.compile(r"^(#{1,6}) .*Under the hood", re.IGNORECASE | re.MULTILINE)
HEADING = re.compile(r"^(#{1,6}) ", re.MULTILINE)
DRIVES_A_CONTROL = re.compile(r"\.controls\[[^\]]+\]\.value\s*=")


def inside(nb, opening: re.Pattern) -> list[bool]:
    """For every cell: does it lie in a section whose heading matches `opening`? Such a section
    (its heading's cell included) ends at the next heading of the same or a higher level."""
    flags, level = [], None
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = text(cell["source"])
            levels = [len(m.group(1)) for m in HEADING.finditer(src)]
            opened = opening.search(src)
            if level is not None and levels and min(levels) <= level:
                level = None
            if opened:
                level = len(opened.group(1))
        flags.append(level is not None)
    return flags


def learners_path(nb) -> list[tuple[int, dict, bool]]:
    """(cell index, cell, under the hood?) for every cell."""
    return [(i, cell, hood) for i, (cell, hood) in enumerate(zip(nb["cells"], inside(nb, UNDER_THE_HOOD)))]


def test_learners_path_has_short_cells_and_no_widget_tests(nb_path):
    for i, cell, hood in learners_path(load(nb_path)):
        if cell["cell_type"] != "code":
            continue
        src = text(cell["source"])
        n = len(src.splitlines())
        folded = cell.get("metadata", {}).get("jupyter", {}).get("source_hidden") is True
        assert n <= LONGEST_CELL or (hood and folded), (
            f"cell {i} has {n} lines: show the idea in at most {LONGEST_CELL}, and put the full "
            "version in an 'Under the hood' section, folded (metadata jupyter.source_hidden)")
        assert not DRIVES_A_CONTROL.search(src), (
            f"cell {i} sets an explorer's control: widget checks belong in tests/test_widgets.py")


# The path's prose speaks to a learner (issue 31): the words of the test machinery may appear only
# under "Under the hood" or in the closing "Going further" part, which holds the studies.
MACHINERY = re.compile(r"\b(recorded|volatile|nbval|the seed)\b", re.IGNORECASE)
GOING_FURTHER = re.compile(r"^(#{1,6}) Going further\b", re.IGNORECASE | re.MULTILINE)
LONGEST_PATH_MINUTES = 60


def test_path_prose_has_no_test_machinery_words(nb_path):
    nb = load(nb_path)
    aside = [a or b for a, b in zip(inside(nb, UNDER_THE_HOOD), inside(nb, GOING_FURTHER))]
    for i, (cell, off_path) in enumerate(zip(nb["cells"], aside)):
        if cell["cell_type"] == "markdown" and not off_path:
            found = MACHINERY.search(text(cell["source"]))
            assert not found, (
                f"cell {i} says {found.group(0)!r} on the learner's path: say it in a learner's words, "
                "or move the passage under 'Under the hood' or 'Going further'")


def test_core_path_takes_an_hour_at_most_then_going_further(series_path):
    """Title's Time is the core path's (at most an hour); the studies follow the summary, under one
    level-2 heading "Going further" that closes the notebook."""
    cells = load(series_path)["cells"]
    title = text(cells[0]["source"])
    minutes = int(re.search(r"\*\*Time:?\*\*:? about (\d+) min", title).group(1))
    assert minutes <= LONGEST_PATH_MINUTES, f"the core path takes {minutes} min"
    heads = [(i, m.group(0)) for i, c in enumerate(cells) if c["cell_type"] == "markdown"
             for m in re.finditer(r"^## .*$", text(c["source"]), re.MULTILINE)]
    names = [h for _, h in heads]
    assert "## Going further" in names, "no '## Going further' part after the summary"
    assert names[-1] == "## Going further", f"'## Going further' must be the last level-2 heading: {names[-3:]}"
    summary = max(i for i, h in heads if h == "## Summary")
    further = max(i for i, h in heads if h == "## Going further")
    assert summary < further, "the studies come after the summary"


# The checks above must be able to fail: feed them a deliberately dirty notebook.
def test_hygiene_checks_fire_on_a_dirty_notebook(tmp_path):
    dirty = {
        "cells": [
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": "x = 1;\n" * 30,
             "outputs": [{"output_type": "stream", "name": "stderr", "text": "/home/me/x.py: -0.0"}]},
        ],
        "metadata": {"kernelspec": {"name": "python3"}, "widgets": {}}, "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "01_dirty.ipynb"
    path.write_text(json.dumps(dirty), encoding="utf-8")
    for check in (test_saved_after_restart_and_run_all, test_no_errors_and_no_stderr,
                  test_no_widget_state_and_normalised_metadata,
                  test_no_machine_specific_paths_or_negative_zero,
                  test_no_trailing_semicolons_and_explicit_rng, test_anatomy,
                  test_learners_path_has_short_cells_and_no_widget_tests):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check(path)


def test_long_cells_pass_only_folded_under_the_hood(tmp_path):
    long = "x = 1\n" * (LONGEST_CELL + 1)

    def notebook(*cells):
        path = tmp_path / "01_path.ipynb"
        path.write_text(json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4,
                                    "nbformat_minor": 5}), encoding="utf-8")
        return path

    def md(src):
        return {"cell_type": "markdown", "metadata": {}, "source": src}

    def code(src, folded=False):
        meta = {"jupyter": {"source_hidden": True}} if folded else {}
        return {"cell_type": "code", "metadata": meta, "source": src, "outputs": []}

    hood = md("### Under the hood: the library version")
    test_learners_path_has_short_cells_and_no_widget_tests(
        notebook(md("## 1 · Idea"), code("x = 1"), hood, md("#### detail"), code(long, True)))
    for bad in ([md("## 1"), code(long, True)],                            # folded, not under the hood
                [hood, code(long)],                                        # under the hood, not folded
                [hood, md("## 2 · Next idea"), code(long, True)],          # the hood section ended
                [md("## 1"), code("explorer.controls['d_k'].value = 4")]):  # drives a widget
        with pytest.raises(AssertionError):
            test_learners_path_has_short_cells_and_no_widget_tests(notebook(*bad))


def test_markers_pass_only_as_tags_with_a_reason(tmp_path):
    def notebook(source, metadata):
        path = tmp_path / "01_markers.ipynb"
        cell = {"cell_type": "code", "execution_count": 1, "metadata": metadata, "source": source,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "3.2 s\n"}]}
        path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                    "nbformat_minor": 5}), encoding="utf-8")
        return path

    tag = {"tags": ["nbval-ignore-output"]}
    test_nbval_markers_are_justified(notebook("t = timed()", {**tag, "volatile": "a timing"}))
    for source, metadata in (("# NBVAL_IGNORE_OUTPUT\n# volatile: a timing\nt = timed()", {}),
                             ("# volatile: a timing\nt = timed()", tag),
                             ("t = timed()", tag),                          # no reason given
                             ("t = timed()", {"tags": ["nbval-skip"]})):
        with pytest.raises(AssertionError):
            test_nbval_markers_are_justified(notebook(source, metadata))


def test_machinery_words_pass_only_under_the_hood_or_going_further(tmp_path):
    def notebook(*sources):
        path = tmp_path / "01_words.ipynb"
        cells = [{"cell_type": "markdown", "metadata": {}, "source": s} for s in sources]
        path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                    "nbformat_minor": 5}), encoding="utf-8")
        return path

    test_path_prose_has_no_test_machinery_words(notebook(
        "## 1 · Idea", "### Under the hood: nbval", "five recorded runs", "## Summary",
        "## Going further", "### A study", "the seed changes the curve"))
    for bad in (["## 1 · Idea", "the recorded runs"],
                ["### Under the hood", "## 2 · Next", "marked volatile"],   # the hood section ended
                ["## Going further later", "## Summary", "THE SEED"]):
        with pytest.raises(AssertionError):
            test_path_prose_has_no_test_machinery_words(notebook(*bad))


def test_readme_minutes_match_each_notebooks_time():
    """The README's table and each title give the same "Time" (they drifted apart once)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| (\d\d) \| \[.*\| (\d+) \|$", readme, re.MULTILINE))
    titles = {}
    for path in NOTEBOOKS:
        title = text(load(path)["cells"][0]["source"])
        m = re.search(r"\*\*Time:?\*\*:? about (\d+) min", title)
        assert m, f"{path.name}: the title gives no 'Time: about N minutes'"
        titles[path.name[:2]] = m.group(1)
    assert table == titles, f"README minutes {table} differ from the notebooks' titles {titles}"
