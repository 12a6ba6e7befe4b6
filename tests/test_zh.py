"""The Chinese edition (notebooks/zh/) runs the English code and shows the English outputs.

Every notebook, exercises included, has a Chinese twin with the same cells (ids, kinds, order),
byte-identical code and outputs, and Chinese markdown. The differences are the ones
tests/zh_edition.py makes, each in a cell tagged "zh": the cell that chooses the language
(``use_language("zh")``, no output), and in the exercise notebooks the checks, whose messages are
Chinese and which nbval runs (it does not run the Chinese lesson notebooks: conftest.py).
"""

import json
import re

import pytest

from tests.test_checks import all_sees
from tests.test_checks import headings as sections
from tests.zh_edition import (
    LANGUAGE_CELL,
    PLACEHOLDERS,
    TAG,
    ZH,
    english_notebooks,
    headings,
    text,
    twin,
)

CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH = english_notebooks()


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def counted(outputs):
    """Outputs without their execution counts (one more in the Chinese edition, whose language
    cell runs first: not content, and nbval does not compare them either)."""
    return [{k: v for k, v in out.items() if k != "execution_count"} for out in outputs]


def tagged(cell):
    return TAG in cell.get("metadata", {}).get("tags", [])


def test_every_notebook_has_its_chinese_twin_and_nothing_else_is_there():
    assert sorted(p.relative_to(ZH) for p in ZH.rglob("*.ipynb")) == sorted(
        twin(p).relative_to(ZH) for p in ENGLISH)


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_the_chinese_twin_runs_the_same_code_and_shows_the_same_outputs(path):
    en, zh = load(path), load(twin(path))
    exercises = path.parent.name == "exercises"
    extra = [c for c in zh["cells"] if c["id"] == LANGUAGE_CELL["id"]]
    assert len(extra) == 1 and text(extra[0]) == "".join(LANGUAGE_CELL["source"])
    assert extra[0]["outputs"] == [] and tagged(extra[0])
    counts = [c["execution_count"] for c in zh["cells"] if c["cell_type"] == "code" and text(c).strip()]
    assert counts == list(range(1, len(counts) + 1)), "as restart and run all numbers the cells"
    cells = [c for c in zh["cells"] if c["id"] != LANGUAGE_CELL["id"]]
    first_code = next(i for i, c in enumerate(zh["cells"]) if c["cell_type"] == "code")
    assert zh["cells"][first_code] is extra[0], "use_language comes before the setup cell"
    assert [(c["id"], c["cell_type"]) for c in cells] == [
        (c["id"], c["cell_type"]) for c in en["cells"]]
    assert zh["metadata"] == en["metadata"]
    for e, z in zip(en["cells"], cells):
        if e["cell_type"] == "markdown":
            words = re.sub(r"\$[^$]*\$|`[^`]*`|\([^)]*\)", "", text(e))
            if len(re.findall(r"[A-Za-z]{3,}", words)) >= 4:
                assert CJK.search(text(z)), f"cell {e['id']} is not translated"
            assert e.get("attachments") == z.get("attachments")
            continue
        assert text(z) == text(e), f"cell {e['id']}: the code differs"
        assert {k: v for k, v in z.items() if k not in ("outputs", "metadata", "execution_count")} == {
            k: v for k, v in e.items() if k not in ("outputs", "metadata", "execution_count")}
        tags = [t for t in z["metadata"].get("tags", []) if t != TAG]
        assert {**z["metadata"], "tags": tags} == {**e["metadata"], "tags": tags} or (
            not tags and {k: v for k, v in z["metadata"].items() if k != "tags"} == e["metadata"])
        if tagged(z):
            assert exercises and z["metadata"]["exercise"]["part"] == "check", (
                f"cell {e['id']}: only an exercise notebook's checks may show other outputs")
            continue
        expected = json.loads(json.dumps(e.get("outputs", [])))
        for out in expected:
            plain = out.get("data", {}).get("text/plain")
            plain = "".join(plain) if isinstance(plain, list) else plain
            if plain in PLACEHOLDERS:
                out["data"]["text/plain"] = PLACEHOLDERS[plain]
        assert counted(z.get("outputs", [])) == counted(expected), f"cell {e['id']}: the outputs differ"


@pytest.mark.parametrize("path", [p for p in ENGLISH if p.parent.name == "exercises"],
                         ids=lambda p: p.name)
def test_a_chinese_exercise_notebooks_checks_answer_in_chinese(path):
    checks = [c for c in load(twin(path))["cells"] if tagged(c) and c["id"] != "zh-language"]
    assert checks
    for cell in checks:
        said = "".join("".join(o.get("text", "")) for o in cell["outputs"])
        assert CJK.search(said), f"cell {cell['id']}: {said!r}"


def test_every_link_to_a_heading_in_the_chinese_edition_finds_it():
    ids = {path.name: {a for _, _, a in headings(load(twin(path)))}
           for path in ENGLISH if path.parent.name != "exercises"}
    for path in ENGLISH:
        nb = load(twin(path))
        own = {a for _, _, a in headings(nb)}
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target, fragment in re.findall(r"\]\(([^)#\s]*\.ipynb|)#((?:[^()\s]|\([^()\s]*\))+)\)", text(cell)):
                found = ids.get(target.rsplit("/", 1)[-1], set()) if target else own
                assert fragment in found, f"{twin(path).name} {cell['id']}: no heading #{fragment}"


@pytest.mark.parametrize("who, see", list(all_sees()))
def test_a_chinese_checker_names_a_section_of_the_chinese_notebook(who, see):
    """A `see`, "01 §4 · <heading>", is in Chinese "01 §4 · <that heading's Chinese>"."""
    from helpers.language import chinese

    match = re.fullmatch(r"(\d\d) §(\d+) · (.+?)(（.*）)?", chinese()[see])
    assert match, f"{who}: {chinese()[see]!r} is not 'NN §k · heading'"
    number, section, title = match.group(1), match.group(2), match.group(3)
    found = [(s, t) for s, t in sections(number, "notebooks/zh") if t == title]
    assert found, f"{who}: notebooks/zh/{number} has no heading {title!r}"
    assert any(s == section for s, _ in found), f"{who}: {title!r} is not in §{section}: {found}"
