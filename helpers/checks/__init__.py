"""Exercise checkers: they run the learner's function and name the mistake when it is wrong.

In an exercise notebook (``notebooks/exercises/``)::

    from helpers.checks import check
    check(softmax)           # finds exercise "01.1 softmax" by the function's name
    check(my_fn, "01.1")     # or by key

A check never raises for a wrong function: it shows what was expected, what came back, and which
notebook section explains the mistake (see ``helpers.checks.core``). ``check`` returns a
``Result``; ``bool(result)`` is True when it passed.

For teachers, a learner's file can be graded from the shell (exit status 0 only if every exercise
graded passed)::

    python -m helpers.checks learner/01_scaled_dot_product_attention.ipynb
    python -m helpers.checks answers.py --notebook 01
    python -m helpers.checks class/*.ipynb --limit 10
    python -m helpers.checks 学生/04_masks.ipynb --lang zh   # the report in Chinese

``grade(path)`` does the same from Python and returns the results. What grading promises:

* an honest verdict for honest work: each file is run in a child process of its own
  (``helpers.checks.worker``, from the file's folder, as ``python file.py`` would), which only
  calls the learner's functions and sends their results back as data (``wire``: JSON, never
  pickle); the comparison and the verdict are made in the grading process, which never runs the
  learner's code, so nothing a file patches (NumPy, this package) reaches another file's grade;
* every exercise of each notebook the file belongs to is graded (by its cells' metadata and its
  name "NN_...", else by the functions it defines): deleting or editing cells' metadata hides
  none;
* a batch that always finishes: a function that calls exit(), crashes its process or runs past
  ``--limit`` seconds "did not finish" (the child is killed if need be, SIGKILL of its process
  group) and the rest is graded in a fresh child; a cell past ``--cell-limit``, or that ends the
  process, is noted and skipped; no file takes more than ``--file-limit`` seconds;
* a true exit status: 0 only if every exercise graded in every file passed;
* the library's own function, or a function that calls the library's implementation of the
  exercise, is not credited (by ``check`` too);
* a readable report: the learner's prints are shown, cut to their first and last 1,000 bytes,
  only for a file where something did not finish, raised, or was noted.

Run it from a folder that holds no learner's file: ``python -m`` imports from the current folder
first, and the grader refuses to go on when it has imported a module from a folder it grades.

What it does not promise: it is not a sandbox against a determined cheat. The child runs with
the teacher's permissions: it can read and write files, use the network, compute the reference
itself, or forge its messages to the grader. Grade files you do not trust in a container or VM.

The catalogue, one module per notebook (each exercise lists its mistakes):

* ``attention`` 01: softmax, scaled dot-product attention with a mask, the variance of the scores,
  log-softmax
* ``heads``     02: multi-head attention: split_heads, merge_heads, the layer, a previous-token
  head
* ``positions`` 03: the sinusoidal table, embeddings plus positions, the rotation M_k, the
  offset between two rows
* ``masks``     04: the causal and the padding mask, a softmax with fully blocked rows, a prefix-LM
  mask for a padded batch
* ``blocks``    05: LayerNorm, the Post-LN block, telling Post-LN from Pre-LN
* ``decoder``   06: the decoder block with cross-attention, greedy decoding, the parameter count,
  the teacher-forced decoder input and labels of a padded batch
* ``training``  07: softmax and LayerNorm backward, the warm-up schedule, Adam, a gradient check,
  RMSNorm backward, the label-smoothed cross-entropy of a padded batch, attention's backward
* ``cost``      08: attention without the n x n matrix, and what it costs, with a causal mask
* ``modern``    09: RMSNorm, SwiGLU, RoPE, grouped-query attention, a model's KV cache in bytes,
  a sliding-window mask
* ``lm``        10: the next-token loss, the sampling step, the bigram baseline, top-p sampling,
  the warm-up and cosine learning-rate schedule
* ``translation`` 11: one merge of byte-pair encoding, one step of beam search, BLEU, BLEU of
  one sentence (smoothed)

Grading a file: ``worker`` (the child process), ``child`` (running one), ``wire`` (what it sends),
``zygote`` (the fork server the children of a batch are forked from, on Linux).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import re
import signal
import sys
import time
from pathlib import Path

import helpers.decoding
import helpers.lm
import helpers.mask_formats
import helpers.modern
import helpers.module
import helpers.recent
import helpers.training
import helpers.transformer
import helpers.translation
import helpers.validation
from helpers.checks.attention import EXERCISES as EXERCISES_01
from helpers.checks.blocks import EXERCISES as EXERCISES_05
from helpers.checks.child import Child, Excerpt, clean, forks
from helpers.checks.core import (
    LIMIT_SECONDS,
    Answer,
    Case,
    Exercise,
    Mistake,
    Result,
    names_read,
    names_read_in_source,
    run,
    same,
    verdict,
)
from helpers.checks.cost import EXERCISES as EXERCISES_08
from helpers.checks.decoder import EXERCISES as EXERCISES_06
from helpers.checks.heads import EXERCISES as EXERCISES_02
from helpers.checks.lm import EXERCISES as EXERCISES_10
from helpers.checks.masks import EXERCISES as EXERCISES_04
from helpers.checks.modern import EXERCISES as EXERCISES_09
from helpers.checks.positions import EXERCISES as EXERCISES_03
from helpers.checks.training import EXERCISES as EXERCISES_07
from helpers.checks.translation import EXERCISES as EXERCISES_11
from helpers.checks.wire import decode
from helpers.language import LANGUAGES, tr, use_language

__all__ = ["CATALOGUE", "Case", "Exercise", "Mistake", "Result", "check", "exercise", "grade",
           "library", "mistakes", "run", "same"]

CATALOGUE: dict[str, Exercise] = {  # every exercise by key, in notebook order
    ex.key: ex for ex in (*EXERCISES_01, *EXERCISES_02, *EXERCISES_03, *EXERCISES_04,
                          *EXERCISES_05, *EXERCISES_06, *EXERCISES_07, *EXERCISES_08,
                          *EXERCISES_09, *EXERCISES_10, *EXERCISES_11)}

MODEL_MODULES = (helpers.transformer, helpers.training, helpers.modern, helpers.recent,
                 helpers.decoding, helpers.lm, helpers.translation, helpers.mask_formats,
                 helpers.module, helpers.validation)


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


def library(ex: Exercise) -> dict:
    """The library's implementation of `ex`, as {code object: name}, which `check` and grading
    do not credit: the reference; when the reference is the checker's own wrapper, the helpers
    functions it calls by name (not another exercise's: notebook 02's exercise may use notebook
    01's attention) and the methods it calls of the helpers classes it names, with the methods
    of the same class those call (not Module's parameter plumbing); and every function of a
    helpers model module named like `ex`."""
    found = {}

    def add(fn, name=None):
        code = getattr(fn, "__code__", None)
        if code is not None:
            found.setdefault(code, f"{name or fn.__qualname__} ({fn.__module__})")

    reference = inspect.unwrap(ex.reference)
    wrapper = getattr(reference, "__module__", "").startswith("helpers.checks.")
    add(reference, f"reference for {ex.key}" if wrapper else None)
    code, scope = getattr(reference, "__code__", None), getattr(reference, "__globals__", {})
    if code is not None and wrapper:
        others = {e.name for e in CATALOGUE.values()} - {ex.name}
        for name in code.co_names:
            target = scope.get(name)
            if inspect.isclass(target):
                methods = [inspect.getattr_static(target, m, None) for m in code.co_names]
                for fn in [f for f in methods if inspect.isfunction(f)]:  # and the methods of
                    methods += [inspect.getattr_static(target, m, None)  # the class those call
                                for m in fn.__code__.co_names]  # (Adam.step: update, apply)
                for fn in methods:
                    if inspect.isfunction(fn) and fn.__module__ != "helpers.module":
                        add(fn)
            elif inspect.isfunction(target) and name not in others \
                    and target.__module__.startswith("helpers."):
                add(target)
    for model in MODEL_MODULES:
        add(getattr(model, ex.name, None))
    return found


def check(fn, key: str | None = None) -> Result:
    """Check `fn` against exercise `key` (default: the exercise named like the function)."""
    if key is None:
        name = getattr(fn, "__name__", None)
        if name is None or name == "<lambda>":
            raise ValueError("check(fn, key): give the exercise's key, e.g. check(fn, '01.1'), "
                             "for a function without a name")
        key = name
    ex = exercise(key)
    return _with_earlier(run(ex, fn, library(ex)), ex, fn)


_NOT_FAILING = ("passed", "not implemented", "not credited", "missing")


def _with_earlier(result: Result, ex: Exercise, fn) -> Result:
    """A wrong result, with a note naming the learner's earlier functions of the same notebook
    that `fn` can call (it reads their names) and that do not pass yet: two mistakes at once
    match no catalogued one."""
    if result.status in _NOT_FAILING:
        return result
    where, read = getattr(fn, "__globals__", {}), names_read(fn)
    return _noted(result, [other for other in CATALOGUE.values()
                           if other.key[:2] == ex.key[:2] and other.key < ex.key
                           and (read is None or other.name in read)
                           and callable(where.get(other.name))
                           and run(other, where[other.name]).status not in _NOT_FAILING])


def _noted(result: Result, failing: list[Exercise]) -> Result:
    if result.status in _NOT_FAILING or not failing:
        return result
    names = [f"{other.name} ({other.key})" for other in failing]
    note = tr("\n  Note: this function calls your {names}, which does not pass yet: fix that "
              "first." if len(names) == 1 else "\n  Note: this function calls your {names}, "
              "which do not pass yet: fix that first.", names=tr(" and ").join(names))
    return dataclasses.replace(result, message=result.message + note)


# ── grading files ─────────────────────────────────────────────────────────────────────────────

CELL_SECONDS = 60  # a learner's cell that runs longer while grading is stopped
FILE_SECONDS = 300  # a file's exercises not graded after this long "did not finish"
GRACE_SECONDS = 0.5  # past a limit, how long the child's own (signal) limit has to report
WORKER_SECONDS = 60  # for the child's own code: its imports, between two exercises
NOTES = 20  # notes shown per file, at most


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


def _notebook_number(notebook) -> str | None:
    if notebook is None:
        return None
    number = f"{int(notebook):02d}" if str(notebook).isdigit() else str(notebook)
    if not any(key.startswith(number + ".") for key in CATALOGUE):
        raise ValueError(f"no exercises for notebook {notebook!r}; there are exercises for "
                         + ", ".join(sorted({key[:2] for key in CATALOGUE})))
    return number


def _wanted(path: Path, keys: list[str], notebook) -> list[str] | None:
    """The keys to grade: every exercise of each notebook the file belongs to, or None when only
    the functions it defines can tell (the child says which)."""
    number = _notebook_number(notebook)
    if number is not None:
        numbers = {number}
    else:  # "09.3" -> "09": a cell names its notebook; a deleted cell hides no exercise
        numbers = {key[:2] for key in keys}
        match = re.match(r"(\d\d)_", path.name)
        if match and any(key.startswith(match.group(1) + ".") for key in CATALOGUE):
            numbers.add(match.group(1))  # and so does its name: edited metadata hides none
        if not numbers:
            return None
    return [key for key in CATALOGUE if key[:2] in numbers]


def _ended(status: int) -> str:
    text = tr("the process ended with status {status}", status=status)
    with contextlib.suppress(ValueError):
        text += f" ({signal.Signals(-status).name})" if status < 0 else ""
    return text


_ENDINGS = ("", "not implemented", "error", "exit", "library", "not a function", "too big",
            "missing", "imported", "did not finish")


def _received(message: dict, ex: Exercise) -> Answer:
    """The Answer in a child's message, read as data; a malformed one "did not finish"."""
    try:
        ended, said, line = (message.get(f, "") for f in ("ended", "said", "line"))
        if ended not in _ENDINGS or not isinstance(said, str) or not isinstance(line, str):
            raise ValueError("not an answer")
        outputs = decode(message["outputs"]) if "outputs" in message else ()
        if not isinstance(outputs, tuple) or len(outputs) > len(ex.cases):
            raise ValueError("not the outputs of the cases")
        return Answer(outputs, ended, clean(said), clean(line))
    except Exception:  # whatever the child sent, the grader goes on
        return Answer(ended="did not finish", said="its answer could not be read")


@dataclasses.dataclass
class Graded:
    """One file's grading: `results`, `notes` (cells that raised, were stopped or skipped), and
    `output`, the learner's stdout and stderr cut to their first and last 1,000 bytes."""

    path: Path
    results: list[Result]
    notes: list[str]
    output: str

    def extras(self) -> list[str]:
        """The notes, and the learner's output if an exercise did not finish or raised or a cell
        had a problem: there it may say why; else it is the notebooks' own prints, which a
        teacher reading thirty files need not scroll past. It is indented, so that no line of it
        passes for a verdict."""
        lines = [tr("note: {note}", note=note) for note in self.notes]
        if self.output and (self.notes or any(r.status in ("did not finish", "error")
                                              for r in self.results)):
            lines.append(tr("output of {file} while it was graded (stdout and stderr):",
                            file=self.path.name))
            lines += ["  | " + line for line in self.output.splitlines()]
        return lines

    def report(self) -> str:
        """What the command line prints for the file."""
        lines = [r.message for r in self.results] or [
            f"✗ {self.path.name}: " + tr("defines no function of any exercise")]
        passed = sum(r.status == "passed" for r in self.results)
        lines += [*self.extras(),
                  f"-- {self.path.name}: " + tr("{n} of {total} exercises passed", n=passed,
                                                 total=len(self.results))]
        return "\n".join(lines)

    def __bool__(self):
        return bool(self.results) and all(r.status == "passed" for r in self.results)


class _Grading:
    """One file through as many children as it takes: a child that dies or is killed in a cell
    is replaced by one that skips that cell; in an exercise, by one that grades the rest."""

    def __init__(self, path, notebook, limit, cell_limit, file_limit, zygote=None):
        self.path, self.limits, self.zygote = Path(path), (limit, cell_limit), zygote
        self.cells, keys = _notebook_cells(self.path)
        self.wanted = _wanted(self.path, keys, notebook)
        self.answers: dict[str, Answer] = {}
        self.notes: list[str] = []
        self.skip: set[int] = set()
        self.output = Excerpt()
        self.end = time.monotonic() + file_limit
        self.file_limit = file_limit
        self.stopped = ""  # why the last child stopped: what the exercises it left did not finish
        self.unnoted = 0

    def note(self, text: str, last=False):
        """Keep a note, the first NOTES of them (a child can send a million)."""
        if text in self.notes:
            return
        if len(self.notes) < NOTES or last:
            self.notes.append(text)
        else:
            self.unnoted += 1

    def left(self) -> list[str]:
        return [key for key in self.wanted or () if key not in self.answers]

    def run(self) -> Graded:
        malformed, more = 0, True
        while more and (self.wanted is None or self.left()):
            keys = "auto" if self.wanted is None else ",".join(self.left())
            limit, cell_limit = self.limits
            child = Child([str(self.path.resolve()), "--keys", keys, "--skip",
                           ",".join(map(str, sorted(self.skip))), "--limit", str(limit),
                           "--cell-limit", str(cell_limit)], self.output, self.zygote)
            more = self.follow(child)
            malformed += child.malformed
        for key in self.left():  # not reached: the file's time ran out, or no child got there
            self.answers[key] = Answer(ended="did not finish", said=self.stopped)
        if self.wanted is None and self.stopped:  # not even which functions it has
            self.note(tr("nothing graded: {why}", why=self.stopped), True)
        if malformed:
            self.note(tr("{n} malformed message(s) from the grading child ignored", n=malformed),
                      True)
        if self.unnoted:
            self.note(tr("… and {n} more notes", n=f"{self.unnoted:,}"), True)
        results = []
        for key in self.wanted or ():
            ex, got = CATALOGUE[key], self.answers[key]
            if got.ended == "missing":
                result = Result(key, ex.name, "missing",
                                f"✗ {key} {ex.name}: " + tr("{file} defines no {name}.",
                                                            file=self.path.name, name=ex.name))
            elif got.ended == "imported":
                result = Result(key, ex.name, "missing",
                                f"✗ {key} {ex.name}: " + tr(
                                    "{file} imports {name} from {module} instead of writing it.",
                                    file=self.path.name, name=ex.name, module=got.said))
            else:
                result = verdict(ex, got)
            read = names_read_in_source(self.cells, ex.name)  # what it can call
            failing = [CATALOGUE[r.key] for r in results
                       if r.key[:2] == key[:2] and r.status not in _NOT_FAILING
                       and (read is None or r.name in read)]
            results.append(_noted(result, failing))
        output = self.output.text() if self.output.total else ""
        return Graded(self.path, results, self.notes, output)

    def follow(self, child) -> bool:
        """Read one child to its end; True if another child should go on from there."""
        limit, cell_limit = self.limits
        where, progress = None, False  # where: ("cell", k), ("exercise", key), "finished"
        until = time.monotonic() + WORKER_SECONDS  # its imports
        for message in child.messages(lambda: min(until, self.end)):  # noqa: B023 (the latest)
            kind, now, k, key = (message["t"], time.monotonic(), message.get("k"),
                                 message.get("key"))
            if kind == "cell" and type(k) is int and 1 <= k <= len(self.cells):
                where, until = ("cell", k), now + cell_limit + GRACE_SECONDS
            elif kind == "problem":
                self.note(clean(message.get("text"), 500))
            elif kind == "numbers" and self.wanted is None \
                    and isinstance(message.get("numbers"), list):
                self.wanted = [each for each in CATALOGUE if each[:2] in message["numbers"]]
                where, until, progress = None, now + WORKER_SECONDS, True
            elif kind == "exercise" and key in self.left():
                where, until = ("exercise", key), now + limit + GRACE_SECONDS
            elif kind == "answer" and where == ("exercise", key):
                self.answers[key] = _received(message, CATALOGUE[key])
                where, until, progress = None, now + WORKER_SECONDS, True
            elif kind == "finished":
                where, until = "finished", now + GRACE_SECONDS
            else:
                child.malformed += 1
        if child.killed and time.monotonic() >= self.end:
            self.stopped = tr("the file's limit of {seconds} s ran out",
                              seconds=f"{self.file_limit:g}")
            return False
        if where == "finished":
            self.stopped = tr("no answer came back")
            return False
        if child.killed:
            seconds = limit if where and where[0] == "exercise" else cell_limit
            reason = tr("ran past the limit of {seconds} s and was stopped",
                        seconds=f"{seconds:g}")
        else:
            reason = _ended(child.status)
        self.stopped = reason
        if where and where[0] == "cell" and where[1] not in self.skip:
            self.skip.add(where[1])
            name = (tr("{file}, cell {k}", file=self.path.name, k=where[1]) if len(self.cells) > 1
                    else self.path.name)
            self.note(tr("{where}: {why}; graded without it", where=name, why=reason))
            return True
        if where and where[0] == "exercise":
            self.answers[where[1]] = Answer(ended="did not finish", said=reason)
            return True
        if not progress:
            self.note(tr("the grading child stopped: {why}", why=reason))
        return progress


def _grade(path, notebook=None, *, limit=LIMIT_SECONDS, cell_limit=CELL_SECONDS,
           file_limit=FILE_SECONDS) -> Graded:
    with forks() as zygote:  # the batch's, inside main()'s forks() block
        return _Grading(path, notebook, limit, cell_limit, file_limit, zygote).run()


def grade(path, notebook: str | None = None, *, limit: float = LIMIT_SECONDS,
          cell_limit: float = CELL_SECONDS, file_limit: float = FILE_SECONDS) -> list[Result]:
    """Check the exercises of a learner's file (.ipynb or .py) and return one Result each; the
    notes and, if something did not finish or raised, the learner's output are printed.

    Which exercises: every exercise of `notebook` ("01" or 1) if given; else of each notebook the
    file's cells are marked with (an exercise notebook, renamed or not) and of the number the
    file name starts with ("05_..."); else of each notebook the file defines a function of.
    An exercise notebook's own check cells are not run (grading runs each check once). A
    function imported, not written in the file, is not credited ("missing"). `limit`: seconds
    per exercise (and per call), `cell_limit` per cell, `file_limit` for the whole file."""
    graded = _grade(path, notebook, limit=limit, cell_limit=cell_limit, file_limit=file_limit)
    for line in graded.extras():
        print(line)
    return graded.results


def _imported_from_here(files) -> list[str]:
    """The modules this process imported from the current folder, when that folder holds files
    to grade: `python -m` puts it first on sys.path, so a learner's json.py there would have run
    inside the grader. (Grade from another folder: the repository, say.)"""
    here = Path.cwd().resolve()
    if not any(Path(f).resolve().parent == here for f in files):
        return []
    found, ours = [], Path(__file__).resolve().parents[1]  # helpers itself: the grader's own
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or not Path(file).resolve().is_relative_to(here) \
                or Path(file).resolve().is_relative_to(ours):
            continue
        first = Path(file).resolve().relative_to(here).parts[0]  # json.py, or a package's folder
        if first in (name.split(".")[0], name.split(".")[0] + ".py"):
            found.append(f"{name} ({file})")
    return found


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m helpers.checks",
                                     description="Grade learners' exercise files.")
    parser.add_argument("files", nargs="+", type=Path, help=".ipynb or .py files")
    parser.add_argument("--notebook", help='the exercises of one notebook, e.g. "01"')
    parser.add_argument("--limit", type=_seconds, default=LIMIT_SECONDS, metavar="SECONDS",
                        help=f"per exercise (default {LIMIT_SECONDS})")
    parser.add_argument("--cell-limit", type=_seconds, default=CELL_SECONDS, metavar="SECONDS",
                        help=f"per cell of the learner's file (default {CELL_SECONDS})")
    parser.add_argument("--lang", choices=LANGUAGES, default="en",
                        help="the language of the report: en (English) or zh (Chinese)")
    parser.add_argument("--file-limit", type=_seconds, default=FILE_SECONDS, metavar="SECONDS",
                        help=f"per file, all its exercises (default {FILE_SECONDS})")
    args = parser.parse_args(argv)
    use_language(args.lang)
    try:
        _notebook_number(args.notebook)
    except ValueError as error:  # an unknown --notebook: nothing can be graded
        parser.error(str(error))
    shadowed = _imported_from_here(args.files)
    if shadowed:
        print("✗ " + tr("refused: the grader imported {modules} from the current folder, which "
                        "holds files to grade: a learner's code may have run inside the grader. "
                        "Run it from another folder (cd ..; python -m helpers.checks "
                        "<folder>/<file>).", modules=", ".join(shadowed[:3])))
        return 2
    failed = 0
    with forks():  # one zygote forks the children of every file
        for path in args.files:
            print(f"== {path}", flush=True)
            try:
                graded = _grade(path, args.notebook, limit=args.limit,
                                cell_limit=args.cell_limit, file_limit=args.file_limit)
            except Exception as error:  # an unreadable file fails, the others are still graded
                print(f"✗ {path}: " + tr("cannot be graded: {error}",
                                         error=f"{type(error).__name__}: {error}"))
                failed += 1
                continue
            print(graded.report(), flush=True)
            failed += not graded
    return 1 if failed else 0
