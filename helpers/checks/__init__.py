"""Exercise checkers: they run the learner's function and name the mistake when it is wrong.

In an exercise notebook (``notebooks/exercises/``)::

    from helpers.checks import check
    check(softmax)           # finds exercise "01.1 softmax" by the function's name
    check(my_fn, "01.1")     # or by key

A check never raises for a wrong function: it shows what was expected, what came back, and which
notebook section explains the mistake (see ``helpers.checks.core``). ``check`` returns a
``Result``; ``bool(result)`` is True when it passed.

For teachers, a learner's file can be graded from the shell (exit status 0 only if every exercise
found passed)::

    python -m helpers.checks learner/01_scaled_dot_product_attention.ipynb
    python -m helpers.checks answers.py --notebook 01
    python -m helpers.checks class/*.ipynb

``grade(path)`` does the same from Python and returns the results. Grading *runs* the learner's
code, as opening their notebook would.

The catalogue, one module per notebook (each exercise lists its mistakes):

* ``attention`` 01: softmax, scaled dot-product attention with a mask
* ``heads``     02: multi-head attention: split_heads, merge_heads, the layer
* ``positions`` 03: the sinusoidal table, and embeddings plus positions
* ``masks``     04: the causal and the padding mask
* ``blocks``    05: LayerNorm and the Post-LN block
* ``decoder``   06: the decoder block with cross-attention, greedy decoding
* ``training``  07: softmax and LayerNorm backward, the warm-up schedule, Adam
* ``cost``      08: attention without the n x n matrix, and what it costs
* ``modern``    09: RMSNorm, SwiGLU, RoPE, grouped-query attention
* ``lm``        10: the next-token loss, the sampling step, the bigram baseline
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import linecache
import re
from pathlib import Path

from helpers.checks.attention import EXERCISES as EXERCISES_01
from helpers.checks.blocks import EXERCISES as EXERCISES_05
from helpers.checks.core import Case, Exercise, Mistake, Result, run, same, time_limit
from helpers.checks.cost import EXERCISES as EXERCISES_08
from helpers.checks.decoder import EXERCISES as EXERCISES_06
from helpers.checks.heads import EXERCISES as EXERCISES_02
from helpers.checks.lm import EXERCISES as EXERCISES_10
from helpers.checks.masks import EXERCISES as EXERCISES_04
from helpers.checks.modern import EXERCISES as EXERCISES_09
from helpers.checks.positions import EXERCISES as EXERCISES_03
from helpers.checks.training import EXERCISES as EXERCISES_07

__all__ = ["CATALOGUE", "Case", "Exercise", "Mistake", "Result", "check", "exercise", "grade",
           "mistakes", "run", "same"]

CATALOGUE: dict[str, Exercise] = {  # every exercise by key, in notebook order
    ex.key: ex for ex in (*EXERCISES_01, *EXERCISES_02, *EXERCISES_03, *EXERCISES_04,
                          *EXERCISES_05, *EXERCISES_06, *EXERCISES_07, *EXERCISES_08,
                          *EXERCISES_09, *EXERCISES_10)}


def exercise(key_or_name: str) -> Exercise:
    """The exercise with this key ("01.2") or function name ("scaled_dot_product_attention")."""
    if key_or_name in CATALOGUE:
        return CATALOGUE[key_or_name]
    for ex in CATALOGUE.values():
        if ex.name == key_or_name:
            return ex
    raise KeyError(f"no exercise {key_or_name!r}; the exercises are: "
                   + ", ".join(f"{k} {e.name}" for k, e in CATALOGUE.items()))


def mistakes() -> dict[str, tuple[Exercise, Mistake]]:
    """Every catalogued mistake by name, with its exercise."""
    return {m.name: (ex, m) for ex in CATALOGUE.values() for m in ex.mistakes}


def check(fn, key: str | None = None) -> Result:
    """Check `fn` against exercise `key` (default: the exercise named like the function)."""
    if key is None:
        name = getattr(fn, "__name__", None)
        if name is None or name == "<lambda>":
            raise ValueError("check(fn, key): give the exercise's key, e.g. check(fn, '01.1'), "
                             "for a function without a name")
        key = name
    ex = exercise(key)
    return _with_earlier(run(ex, fn), ex, fn)


def _with_earlier(result: Result, ex: Exercise, fn) -> Result:
    """A wrong result, with a note naming the learner's earlier functions of the same notebook
    that do not pass yet: `fn` may call them, and two mistakes at once match no catalogued one."""
    if result.status in ("passed", "not implemented"):
        return result
    where = getattr(fn, "__globals__", {})
    failing = [f"{other.name} ({other.key})" for other in CATALOGUE.values()
               if other.key[:2] == ex.key[:2] and other.key < ex.key
               and callable(where.get(other.name))
               and run(other, where[other.name]).status not in ("passed", "not implemented")]
    if not failing:
        return result
    note = (f"\n  Note: your {' and '.join(failing)} {'does' if len(failing) == 1 else 'do'} not "
            "pass yet; if this function uses it, fix that first.")
    return dataclasses.replace(result, message=result.message + note)


CELL_SECONDS = 60  # a learner's cell that runs longer while grading is stopped


def _notebook_cells(path: Path) -> tuple[list[str], list[str]]:
    """The code cells of a .ipynb (or the whole .py as one cell), and the exercise keys its cells'
    metadata name (an exercise notebook says which exercises it holds, whatever its file name)."""
    if path.suffix != ".ipynb":
        return [path.read_text(encoding="utf-8")], []
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"
            and c.get("metadata", {}).get("exercise", {}).get("part") != "check"]
    keys = [c.get("metadata", {}).get("exercise", {}).get("key") for c in code]
    return ["".join(c["source"]) for c in code], list(dict.fromkeys(k for k in keys if k))


def _namespace(cells: list[str], name: str) -> tuple[dict, list[str]]:
    """Run a learner's cells quietly, each with a time limit; return the globals and the problems
    (an error, exit(), a cell that never ends: the next cells still run)."""
    ns: dict = {"__name__": "__learner__"}
    problems = []
    for k, src in enumerate(cells, 1):
        src = "\n".join(line for line in src.splitlines()  # IPython magics mean nothing here
                        if not line.lstrip().startswith(("%", "!")))
        filename = f"{name}, cell {k}" if len(cells) > 1 else name
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        try:
            with contextlib.redirect_stdout(io.StringIO()), time_limit(CELL_SECONDS):
                exec(compile(src, filename, "exec"), ns)
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # SystemExit too: one learner's exit() ends no batch
            problems.append(f"{filename}: {type(error).__name__}: {error}")
    return ns, problems


def _notebook_number(notebook) -> str | None:
    if notebook is None:
        return None
    number = f"{int(notebook):02d}" if str(notebook).isdigit() else str(notebook)
    if not any(key.startswith(number + ".") for key in CATALOGUE):
        raise ValueError(f"no exercises for notebook {notebook!r}; there are exercises for "
                         + ", ".join(sorted({key[:2] for key in CATALOGUE})))
    return number


def grade(path, notebook: str | None = None) -> list[Result]:
    """Check the exercises of a learner's file (.ipynb or .py) and return one Result each.

    Which exercises: those of `notebook` ("01" or 1) if given; else those the file's cells are
    marked with (an exercise notebook, renamed or not); else those of the number the file name
    starts with ("05_..."); else every exercise of each notebook the file defines a function of.
    An exercise notebook's own check cells are not run (grading runs each check once).
    A function imported from helpers, not written in the file, is not credited ("missing")."""
    path = Path(path)
    cells, keys = _notebook_cells(path)
    ns, problems = _namespace(cells, path.name)
    number = _notebook_number(notebook)
    match = re.match(r"(\d\d)_", path.name)
    if number is not None:
        numbers = {number}
    elif keys:
        numbers = {key[:2] for key in keys}
    elif match and any(key.startswith(match.group(1) + ".") for key in CATALOGUE):
        numbers = {match.group(1)}
    else:
        numbers = {ex.key[:2] for ex in CATALOGUE.values() if callable(ns.get(ex.name))}
    results = []
    wanted = [ex for ex in CATALOGUE.values() if ex.key[:2] in numbers
              and (notebook is not None or not keys or ex.key in keys)]
    for ex in wanted:
        fn = ns.get(ex.name)
        module = getattr(fn, "__module__", "__learner__")
        if fn is None:
            results.append(Result(ex.key, ex.name, "missing",
                                  f"✗ {ex.key} {ex.name}: {path.name} defines no {ex.name}."))
        elif module != "__learner__":
            results.append(Result(ex.key, ex.name, "missing",
                                  f"✗ {ex.key} {ex.name}: {path.name} imports {ex.name} from "
                                  f"{module} instead of writing it."))
        else:
            with contextlib.redirect_stdout(io.StringIO()):  # the learner's own prints
                results.append(_with_earlier(run(ex, fn), ex, fn))
    for problem in problems:
        print(f"note: {problem}")
    return results


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m helpers.checks",
                                     description="Grade learners' exercise files.")
    parser.add_argument("files", nargs="+", type=Path, help=".ipynb or .py files")
    parser.add_argument("--notebook", help='the exercises of one notebook, e.g. "01"')
    args = parser.parse_args(argv)
    try:
        _notebook_number(args.notebook)
    except ValueError as error:  # an unknown --notebook: nothing can be graded
        parser.error(str(error))
    failed = 0
    for path in args.files:
        print(f"== {path}")
        try:
            results = grade(path, args.notebook)
        except Exception as error:  # an unreadable file fails, the others are still graded
            print(f"✗ {path}: cannot be graded: {type(error).__name__}: {error}")
            failed += 1
            continue
        if not results:
            print(f"✗ {path.name}: defines no function of any exercise")
        for result in results:
            print(result.message)
        passed = sum(bool(r) for r in results)
        print(f"-- {path.name}: {passed} of {len(results)} exercises passed")
        failed += passed < len(results) or not results
    return 1 if failed else 0

