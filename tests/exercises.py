"""The exercise notebooks' parts, and their solved form (used by tests/test_checks.py).

An exercise notebook (notebooks/exercises/NN_*.ipynb) marks the cells of each exercise in their
metadata: ``{"exercise": {"key": "01.1", "part": "stub" | "check" | "hint" | "solution"}}``. The
solution is the one fenced ```python block of the "solution" cell (a folded <details>), so the
learner and the tests read the same code. ``solved(nb)`` puts each solution in place of its stub
and turns each check into an assert, for a run that must pass every check.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISE_NOTEBOOKS = sorted((ROOT / "notebooks" / "exercises").glob("[0-9][0-9]_*.ipynb"))
FENCE = re.compile(r"```python\n(.*?)\n```", re.S)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def parts(nb) -> dict[str, dict[str, dict]]:
    """{key: {part: cell}} for every exercise of a notebook, in order."""
    found: dict[str, dict[str, dict]] = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("exercise")
        if meta:
            found.setdefault(meta["key"], {})[meta["part"]] = cell
    return found


def solution_code(cell) -> str:
    blocks = FENCE.findall(source(cell))
    if len(blocks) != 1:
        raise ValueError(f"a solution cell holds exactly one ```python block, found {len(blocks)}")
    return blocks[0]


def solved(nb) -> dict:
    """A copy of `nb` with every stub replaced by its solution and every check asserted."""
    nb = copy.deepcopy(nb)
    for key, cells in parts(nb).items():
        cells["stub"]["source"] = solution_code(cells["solution"])
        call = source(cells["check"]).strip()
        ast.parse(call, mode="eval")  # a check cell is one expression: check(fn)
        cells["check"]["source"] = (f"_result = {call}\n_result._ipython_display_()\n"
                                    f"assert _result, 'exercise {key} did not pass'")
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return nb
