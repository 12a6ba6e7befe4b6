"""Rebuild the Chinese edition, notebooks/zh/, from the English notebooks: the code is shared.

    python tests/zh_edition.py            # every notebook; then run the exercises (below)
    python tests/regenerate.py notebooks/zh/exercises/*.ipynb

A Chinese notebook is its English twin, cell for cell (same ids, same code, same outputs), with
three differences, all of them checked by tests/test_zh.py:

* its markdown is the Chinese of notebooks/zh/<name> as it stands, cell by cell by id (a new or
  changed English cell has to be translated there: the build says which ones are missing), and
  its links point at the Chinese headings;
* one more code cell, tagged "zh", just before the setup cell: ``use_language("zh")``, so that
  checker messages, explorer labels and status lines are Chinese (helpers/language.py); the
  execution counts after it are one more than the English ones, as "restart and run all" gives;
* in an exercise notebook, the checks' outputs, which are Chinese: those cells are tagged "zh"
  too, and pytest runs the Chinese exercise notebooks (nbval), which takes seconds. The lesson
  notebooks are not run a second time: their code and outputs are the English ones, byte for
  byte (a widget's placeholder, written by tests/regenerate.py, is put in Chinese).
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # python tests/zh_edition.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.regenerate import WIDGET_NOTE, WIDGET_NOTES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ZH = NOTEBOOKS / "zh"
TAG = "zh"
LANGUAGE_CELL = {
    "cell_type": "code", "execution_count": None, "id": "zh-language",
    "metadata": {"tags": [TAG]}, "outputs": [],
    "source": ['from helpers.language import use_language\n', '\n',
               'use_language("zh")  # 检查器的消息、探索器的标签和状态行都用中文'],
}
PLACEHOLDERS = {  # tests/regenerate.py's notes for a widget, in Chinese
    WIDGET_NOTE: "[交互式探索器：在 JupyterLab 中运行本 notebook 即可使用]",
    WIDGET_NOTES["TrainingMonitor"]: "[实时训练监视器：在 JupyterLab 中运行]",
}
HEADING = re.compile(r"^(#{1,6}) +(.+?)\s*$", re.MULTILINE)


def english_notebooks() -> list[Path]:
    return (sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
            + sorted((NOTEBOOKS / "exercises").glob("[0-9][0-9]_*.ipynb")))


def twin(path: Path) -> Path:
    """notebooks/X.ipynb -> notebooks/zh/X.ipynb, notebooks/exercises/X -> notebooks/zh/exercises/X."""
    return ZH / path.relative_to(NOTEBOOKS)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def dump(nb: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def text(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def lines(s: str) -> list[str]:
    return s.splitlines(keepends=True)


def anchor(heading: str) -> str:
    """The id JupyterLab gives a heading: its text, markup dropped, spaces as hyphens."""
    plain = re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading))
    return plain.strip().replace(" ", "-")


def headings(nb: dict) -> list[tuple[str, int, str]]:
    """(cell id, position in the cell, anchor) of every markdown heading."""
    return [(c["id"], k, anchor(m.group(2))) for c in nb["cells"] if c["cell_type"] == "markdown"
            for k, m in enumerate(HEADING.finditer(text(c)))]


def is_check(cell: dict) -> bool:
    return cell.get("metadata", {}).get("exercise", {}).get("part") == "check"


def build(english: dict, chinese: dict, name: str, lessons: dict[str, dict[str, str]]) -> dict:
    """The Chinese twin of `english`, its markdown from `chinese` (an earlier build, or a
    translation with the same cell ids); `lessons`: {lesson notebook's file name: {English
    anchor: Chinese anchor}}, for links to another notebook."""
    translated = {c["id"]: text(c) for c in chinese["cells"] if c["cell_type"] == "markdown"}
    old_outputs = {c["id"]: c.get("outputs", []) for c in chinese["cells"]
                   if c["cell_type"] == "code"}
    missing = [c["id"] for c in english["cells"]
               if c["cell_type"] == "markdown" and c["id"] not in translated]
    if missing:
        raise SystemExit(f"{name}: no Chinese for the markdown cells {missing}")
    nb, own = copy.deepcopy(english), anchors(english, chinese)
    exercises = "/exercises/" in f"/{name}"
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and not any(c["id"] == LANGUAGE_CELL["id"] for c in cells):
            cells.append(copy.deepcopy(LANGUAGE_CELL))
        if cell["cell_type"] == "markdown":
            cell["source"] = lines(relink(translated[cell["id"]], own, lessons))
        elif exercises and is_check(cell):  # Chinese when run: keep the last run's output
            cell["metadata"].setdefault("tags", [])
            if TAG not in cell["metadata"]["tags"]:
                cell["metadata"]["tags"].append(TAG)
            cell["outputs"] = old_outputs.get(cell["id"], cell["outputs"])
        else:
            for out in cell.get("outputs", []):
                plain = out.get("data", {}).get("text/plain")
                if isinstance(plain, list):
                    plain = "".join(plain)
                if plain in PLACEHOLDERS:
                    out["data"]["text/plain"] = PLACEHOLDERS[plain]
        cells.append(cell)
    nb["cells"] = cells
    return renumbered(nb)


def renumbered(nb: dict) -> dict:
    """Execution counts as "restart and run all" gives them with the language cell run first:
    1, 2, 3, ... (the English counts, one more), in the cells and in their results."""
    count = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or not text(cell).strip():
            continue
        count += 1
        cell["execution_count"] = count
        for out in cell.get("outputs", []):
            if "execution_count" in out:
                out["execution_count"] = count
    return nb


def relink(markdown: str, own: dict[str, str], lessons: dict[str, dict[str, str]]) -> str:
    """Point (#anchor) links (`own` headings) and (NN_x.ipynb#anchor) links (a lesson's) at the
    Chinese headings; a link already pointing at one stays."""
    def swap(match):
        target, fragment = match.group(1), match.group(2)
        table = lessons.get(Path(target).name, {}) if target else own
        return f"]({target}#{table.get(fragment, fragment)})"

    return re.sub(r"\]\(([^)#\s]*\.ipynb|)#((?:[^()\s]|\([^()\s]*\))+)\)", swap, markdown)


def anchors(english: dict, chinese: dict) -> dict[str, str]:
    """{English anchor: Chinese anchor}, heading by heading (same cell, same position)."""
    zh = {(cid, k): a for cid, k, a in headings(chinese)}
    return {a: zh[(cid, k)] for cid, k, a in headings(english) if (cid, k) in zh}


def main(argv: list[str]) -> int:
    paths = [Path(p).resolve() for p in argv] or english_notebooks()
    every = english_notebooks()
    pairs = {p: (load(p), load(twin(p))) for p in every if twin(p).exists()}
    lessons = {p.name: anchors(en, zh) for p, (en, zh) in pairs.items()
               if p.parent == NOTEBOOKS}
    for path in paths:
        en, zh = pairs[path]
        name = str(path.relative_to(NOTEBOOKS))
        dump(build(en, zh, name, lessons), twin(path))
        print(f"built {twin(path).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
