"""How an exercise is checked: run the learner's function, compare, and name the mistake.

An `Exercise` holds the reference implementation, a few small cases (hand-checkable ones first)
and a catalogue of `Mistake`s. Each mistake is a *model*: a wrong implementation with the same
signature, written the way a learner would get it wrong. `run` is two halves: `answer` calls the
learner's function on every case (the only part that runs the learner's code; the grader runs it
in a child process), and `verdict` compares those results with the reference and, if they differ,
with every mistake's model on the same cases. The diagnosis is honest about what it knows:

* "passed": every case agrees with the reference (to `rtol`/`atol`);
* "not implemented": the stub (or something it calls) still raises NotImplementedError;
* "mistake": the output equals exactly one catalogued mistake's on every case: that one is named,
  with what was expected, what came back, and the notebook section that explains it;
* "ambiguous": it equals several mistakes' on every case; they are all named, and the message
  says that these cases cannot tell them apart;
* "wrong": it differs from the reference and from every catalogued mistake, or it returned
  something of the wrong kind (None, another shape): the message says which cases pass and which
  fail (naming, where one does, what tells them apart: "The cases where x has 2 axes pass; those
  where it has 3 axes fail"), and shows, on the first failing case, every returned value that
  differs next to the expected one (an attention's weights too);
* "error": it raised (the exception and the learner's line are quoted);
* "not credited": it is, or calls, the library's implementation of the exercise (`answer`'s
  `library`; `check` and grading ask for it);
* "did not finish": it ran past `LIMIT_SECONDS` (an endless loop) or called exit(), or, when
  grading a file, its process crashed or was killed;
* "missing" (only when grading a file): the file does not define the function.

A learner's output at rounding level from the reference (another order of the same sums) passes.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import inspect
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from helpers.checks.sentences import _which_pass, header, said, see, short, which_cases  # noqa: F401
from helpers.language import tr

__all__ = ["Answer", "Case", "Exercise", "Mistake", "Result", "answer", "names_read",
           "names_read_in_source", "run", "same", "time_limit", "verdict"]

RTOL, ATOL = 1e-6, 1e-9  # float64 references: far above rounding, far below any real mistake
RTOL_32, ATOL_32 = 1e-4, 1e-6  # a float32 (or float16) reference: its own precision


def _low_precision(a) -> bool:
    """Whether the expected array is float32 or float16: the result must keep that dtype."""
    return a.dtype.kind == "f" and a.dtype.itemsize < 8


@dataclass(frozen=True)
class Case:
    """One call: `label` says what it tests (shown in messages); `args` are passed positionally,
    `kwargs` by name (every call gets deep copies of them). `make` (optional) builds the
    arguments afresh for every call instead, for arguments a deep copy would not reset (06.2's
    toy model counts its calls). `probe` (optional) makes the call itself, probe(fn, *args,
    **kwargs), and returns what is compared instead of fn's result (08.3 measures the memory a
    call takes)."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    make: Callable[[], tuple[tuple, dict]] | None = None
    probe: Callable | None = None

    def arguments(self):
        if self.make is not None:
            return self.make()
        return self.args, dict(self.kwargs)


@dataclass(frozen=True)
class Mistake:
    """A catalogued misconception: `name` (a stable id, kebab-case), `says` (one sentence: what
    the code does wrong, in the learner's terms), `see` (the notebook and section that explains
    it, e.g. "01 §4 · Why divide by √d_k"), and `model`, a wrong implementation."""

    name: str
    says: str
    see: str
    model: Callable


@dataclass(frozen=True)
class Exercise:
    """One exercise: `key` ("01.2"), `name` (the function the learner writes), `reference`, the
    `cases`, the `mistakes`, `outputs` (names of the returned values when a tuple is returned,
    e.g. ("output", "weights")), and `see` (the section a wrong answer should read)."""

    key: str
    name: str
    reference: Callable
    cases: tuple[Case, ...]
    mistakes: tuple[Mistake, ...]
    see: str
    outputs: tuple[str, ...] = ()
    rtol: float = RTOL
    atol: float = ATOL


@dataclass(frozen=True)
class Result:
    """What `run` found. `bool(result)` is True only for "passed"; `str(result)` is the message;
    in a notebook the message is displayed as text."""

    key: str
    name: str
    status: str  # passed | not implemented | mistake | ambiguous | wrong | error | not credited
    #              | did not finish | missing
    message: str
    mistakes: tuple[str, ...] = ()

    def __bool__(self):
        return self.status == "passed"

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"<Result {self.key} {self.name}: {self.status}{list(self.mistakes) or ''}>"

    def _ipython_display_(self):  # a check cell shows the message once, as plain text
        print(self.message)


def _call(fn, case):
    args, kwargs = copy.deepcopy(case.arguments())  # a function that changes its input in place
    # (x -= x.max()) must not change the case for the next call
    with np.errstate(all="ignore"):  # a wrong softmax overflows: that is for us to report
        if case.probe is not None:
            return case.probe(fn, *args, **kwargs)
        return fn(*args, **kwargs)


_MODELS: dict = {}  # (id(fn), id(case)) -> (fn, case, value, error): fn and case kept, ids kept


def _model(fn, case):
    """(value, None) for the reference's or a mistake model's call on a case, or (None, the
    exception it raised): once per process and case (they are pure), its arrays read-only so that
    no comparison changes them; a probe (08.3's memory, 08.4's work) runs every time."""
    key = (id(fn), id(case))
    if case.probe is not None or key not in _MODELS:
        try:
            _MODELS[key] = (fn, case, _read_only(_call(fn, case)), None)
        except Exception as error:
            _MODELS[key] = (fn, case, None, error.with_traceback(None))
    return _MODELS[key][2:]


def _read_only(value):
    """value, its arrays (in tuples and lists too; no result holds one in a dict) read-only."""
    if isinstance(value, np.ndarray):
        value = value.view()  # the array itself, perhaps one the function keeps, stays as it was
        value.flags.writeable = False
    elif type(value) in (tuple, list):
        value = type(value)(map(_read_only, value))
    return value


def _parts(value, names):
    """A returned value as a list of (name, array-or-other) pairs."""
    if isinstance(value, (tuple, list)) and len(names) > 1:
        return list(zip(names, value)) if len(value) == len(names) else [("result", value)]
    return [(names[0] if names else "result", value)]


def same(a, b, rtol=RTOL, atol=ATOL, dtype=True):
    """True when b (what came back) is the same result as a (what was expected): equal shapes and
    values within the tolerances (relative to a), NaN where a has NaN; tuples, lists and dicts
    compared element by element. With dtype=False a float32 expected value may come back in
    another float dtype (compared at float32's precision): values only."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(same(a[k], b[k], rtol, atol, dtype) for k in a))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y, rtol, atol, dtype) for x, y in zip(a, b))
    if isinstance(a, tuple) or isinstance(b, tuple):  # several results against one
        return False
    # a list of numbers against an array of the same numbers (np.append builds arrays): the same
    if a is None or b is None:
        return a is b
    try:
        a, b = np.asarray(a), np.asarray(b)
    except Exception:  # not array-like at all
        return False
    if a.shape != b.shape or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
        try:  # strings, objects: equal or not, whatever their == does
            return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(a == b))
        except Exception:
            return False
    if a.dtype.kind == "b" or b.dtype.kind == "b":
        return a.dtype == b.dtype and bool(np.array_equal(a, b))
    if _low_precision(a) or not dtype and _low_precision(b):  # float32 expected: kept, and
        if dtype and b.dtype != a.dtype:  # compared at its own precision
            return False
        rtol, atol = max(rtol, RTOL_32), max(atol, ATOL_32)
    with np.errstate(all="ignore"):  # rtol relative to a, the expected value
        return bool(np.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True))


def _plain(x, depth=0):
    """Whether x is plain data: text, numbers, and tuples, lists and dicts of them (11.1's
    words, a pair of symbols), which a message can show as Python writes them."""
    if depth > 4:
        return False
    if x is None or isinstance(x, (str, bool, int, float, np.integer, np.floating)):
        return True
    if isinstance(x, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in x.items())
    return isinstance(x, (tuple, list)) and all(_plain(v, depth + 1) for v in x)


def _literal(x):
    """Plain data as Python writes it, NumPy scalars as plain numbers."""
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_literal(v) for v in x) + ("," if isinstance(x, tuple) and len(x) == 1
                                                     else "")
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if isinstance(x, (np.integer, np.floating)):
        x = x.item()
    if isinstance(x, str):
        return repr(said(x))  # a probe's text in the chosen language, any other text as it is
    return f"{x:.4g}" if isinstance(x, float) else repr(x)


def _show(x):
    """A short text form of a value for a message: small arrays in full, big ones by a row;
    numbers to 4 significant digits (a rate of 2.8e-05 is not shown as 0); short plain data
    (strings, tuples and dicts of them) as Python writes it."""
    if x is None:
        return "None"
    if (isinstance(x, (str, tuple, dict)) or isinstance(x, list) and any(
            isinstance(v, (str, tuple, dict)) for v in x)) and _plain(x):  # not numbers alone
        text = _literal(x)
        if len(text) <= 200:
            return text
    if not isinstance(x, (np.ndarray, np.generic, list, float, int, bool)):
        return _describe(x)
    try:
        x = np.asarray(x)
    except Exception:  # a ragged list
        return _describe(x)
    if x.dtype.kind not in "biuf":
        return _describe(x)
    fmt = {"float_kind": lambda v: f"{v:.4g}"}
    if x.ndim == 0:
        return f"{x.item():.4g}" if x.dtype.kind == "f" else str(x.item())
    with np.printoptions(threshold=40, edgeitems=3, linewidth=88, formatter=fmt):
        text = np.array2string(x, separator=" ")
    return text if "\n" not in text or x.size <= 24 else text.splitlines()[0] + " ..."


def _describe(x):
    """What kind of value x is, for a message about a wrong kind of result."""
    if x is None:
        return "None"
    if isinstance(x, (tuple, list)):
        return tr("a {kind} of {n} values", kind=type(x).__name__, n=len(x))
    if isinstance(x, np.ndarray):
        return tr("one array of shape {shape}", shape=x.shape)
    return tr("a {kind}", kind=type(x).__name__)


def _first_difference(expected, got, names, rtol, atol):
    """(part name, where, expected text, got text) for the first part of the output that differs."""
    return _differences(expected, got, names, rtol, atol)[0]


def _differences(expected, got, names, rtol, atol):
    """(part name, where, expected text, got text) for every part of the output that differs
    (at least one entry: the whole result when no part differs on its own)."""
    if len(names) > 1 and isinstance(expected, tuple) and not (
            isinstance(got, (tuple, list)) and len(got) == len(names)):
        return [("result", "", tr("a tuple of {n} ({names})", n=len(names), names=", ".join(names)),
                 _describe(got))]
    found = [d for (name, e), (_, g) in zip(_parts(expected, names), _parts(got, names))
             if (d := _part_difference(name, e, g, rtol, atol)) is not None]
    return found or [(names[0] if names else "result", "", _show(expected), _show(got))]


def _part_difference(name, e, g, rtol, atol):
    """(name, where, expected text, got text) for one part, or None when it is the same."""
    if same(e, g, rtol, atol):
        return None
    if isinstance(e, dict) and isinstance(g, dict):  # the entries that differ, a few
        def only(a, b):
            return dict(list({k: v for k, v in a.items()
                              if k not in b or not same(v, b[k], rtol, atol)}.items())[:3])
        e_only, g_only = only(e, g), only(g, e)
        return (name, tr(" (the entries that differ)"), _show(e_only) if e_only else "{}",
                _show(g_only) if g_only else "{}")
    if isinstance(e, list) and all(isinstance(v, tuple) for v in e) and _plain(e) \
            and _plain(g):  # records, such as 11.2's finished [(origin, log P, score)]
        return name, "", _show(e), _show(g)
    try:
        e_arr, g_arr = np.asarray(e), np.asarray(g)
    except Exception:  # g is ragged or not array-like
        return name, "", _show(e), _show(g)
    if g is None or g_arr.dtype.kind not in "biuf" or e_arr.dtype.kind not in "biuf":
        return name, "", _show(e), _show(g)
    if e_arr.shape != g_arr.shape:
        if e_arr.ndim <= 1 and g_arr.ndim <= 1 and max(e_arr.size, g_arr.size) <= 24:
            return (name, "", tr("{value} (shape {shape})", value=_show(e_arr), shape=e_arr.shape),
                    tr("{value} (shape {shape})", value=_show(g_arr), shape=g_arr.shape))
        return (name, "", tr("shape {shape}", shape=e_arr.shape),
                tr("shape {shape}", shape=g_arr.shape))
    if e_arr.dtype != g_arr.dtype and "b" in (e_arr.dtype.kind, g_arr.dtype.kind):
        if np.array_equal(e_arr.astype(float), g_arr.astype(float)):
            return name, "", f"dtype {e_arr.dtype}", tr("dtype {dtype} (the same values)",
                                                        dtype=g_arr.dtype)
    if e_arr.dtype != g_arr.dtype and _low_precision(e_arr):
        if np.allclose(e_arr, g_arr, rtol=RTOL_32, atol=ATOL_32, equal_nan=True):
            return name, "", f"dtype {e_arr.dtype}", tr("dtype {dtype} (the same values)",
                                                        dtype=g_arr.dtype)
    if e_arr.ndim >= 2:
        with np.errstate(all="ignore"):
            bad = ~np.isclose(e_arr.astype(float), g_arr.astype(float), rtol=rtol, atol=atol,
                              equal_nan=True)
        idx = tuple(int(i) for i in np.argwhere(bad)[0][:-1])  # the first row that differs
        where = f"[{', '.join(map(str, idx))}]"
        dtype = f" (dtype {g_arr.dtype})" if e_arr.dtype != g_arr.dtype else ""  # no words
        return name, where, _show(e_arr[idx]), _show(g_arr[idx]) + dtype
    return name, "", _show(e), _show(g)


def _largest_difference(expected, got, names):
    """The largest |expected - got| over the parts that are arrays of one shape, or None."""
    largest = None
    for (_, e), (_, g) in zip(_parts(expected, names), _parts(got, names)):
        try:
            e, g = np.asarray(e, dtype=float), np.asarray(g, dtype=float)
        except Exception:
            continue
        if e.shape == g.shape and e.size:
            with np.errstate(all="ignore"):
                d = np.nanmax(np.abs(e - g)) if np.isfinite(e - g).any() else None
            if d is not None:
                largest = d if largest is None else max(largest, d)
    return largest


def _all_nan(value):
    try:
        a = np.asarray(value, dtype=float)
    except Exception:
        return False
    return a.size > 0 and bool(np.isnan(a).all())


LIMIT_SECONDS = 30  # a learner's call that runs longer is stopped (an endless loop)


class TimeLimit(TimeoutError):
    """Raised by time_limit: the block ran past its limit (not a TimeoutError of the learner's)."""


@contextlib.contextmanager
def time_limit(seconds=None):
    """Raise TimeLimit, a TimeoutError, in the block after `seconds` (default LIMIT_SECONDS),
    where the platform allows it (a Unix main thread: notebooks and the command line); elsewhere,
    no limit."""
    seconds = LIMIT_SECONDS if seconds is None else seconds
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(signum, frame):
        raise TimeLimit(tr("ran past the limit of {seconds} s and was stopped",
                           seconds=f"{seconds:g}"))

    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)  # a limit around this one (grading)
    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, min(seconds, outer_left) if outer_left else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:  # give the outer limit back what is left of it (at least a moment)
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))


def _result(fn, case):  # _model's value, or the exception it keeps, raised again
    value, error = _model(fn, case)
    if error is not None:
        raise error.with_traceback(None)
    return value


def _matches(mistake, ex, got, dtype=True):
    """Whether the learner's results equal the mistake's model on every case (with dtype=False,
    in values only: a float32 result that came back float64)."""
    for case, value in zip(ex.cases, got):
        try:
            if not same(_result(mistake.model, case), value, ex.rtol, ex.atol, dtype):
                return False
        except Exception:  # a model that cannot run a case does not match it
            return False
    return True


def _raises_like(mistake, ex, got):
    """Whether a mistake's model gives the learner's results on the cases before the one where
    the learner's code raised, and raises there too, with the same exception and message (K.T,
    which reverses every axis, runs on one sequence and fails its matrix product on a batch)."""
    if not _matches(mistake, ex, got.outputs):  # zip: only the cases that returned
        return False
    _, error = _model(mistake.model, ex.cases[len(got.outputs)])
    return error is not None and f"{type(error).__name__}: {error}" == got.said



def _learner_line(error, ex, case):
    """Where the learner's code raised: their own innermost line, not NumPy's or the checker's."""
    skip = (os.path.dirname(np.__file__), os.path.dirname(os.path.dirname(__file__)),
            os.path.dirname(contextlib.__file__))
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(skip)]
    if frames:
        f = frames[-1]
        return tr("line {n} of {file}: {line}", n=f.lineno, file=os.path.basename(f.filename),
                  line=f.line or "").rstrip()
    args, kwargs = case.arguments()
    try:
        params = list(inspect.signature(ex.reference).parameters)
    except (TypeError, ValueError):
        params = []
    called = [*(params[k] if k < len(params) else "…" for k in range(len(args))),
              *(f"{k}=…" for k in kwargs)]
    return tr("the call itself: the checker calls {call}; do your function's parameters match?",
              call=f"{ex.name}({', '.join(called)})")


@dataclass(frozen=True)
class Answer:
    """What the learner's function did on the cases (`answer`, the learner's half of `run`):
    `outputs`, its results on the cases before it stopped, in order, and how it `ended`:
    "" (every case returned), "not implemented", "error" (`said` "Type: message", `line` where),
    "exit" (it called exit()), "library" (`said` names the library's function it called),
    "not a function" (`said` shows what it is); or, when grading a file, "did not finish",
    "too big" (`said`: why), "missing" and "imported" (`said`: from which module)."""

    outputs: tuple = ()
    ended: str = ""
    said: str = ""
    line: str = ""


@contextlib.contextmanager
def _watching(library, called):
    """Note in `called` the name of each `library` code object entered, in the block, from code
    that is not the library's (the learner's), or from `_call` itself (fn *is* the library's
    function, or a C wrapper of it such as functools.partial). Library code calling it (a
    library model passed in as an argument) is not noted."""
    if not library:
        yield
        return
    helpers = os.path.dirname(os.path.dirname(__file__)) + os.sep
    names = {id(code): name for code, name in library.items()}  # these very code objects: equal
    # ones (the same bytes at the same line of another file) are another function

    def profile(frame, event, arg):
        if event == "call" and id(frame.f_code) in names:
            caller = frame.f_back
            if caller is None or caller.f_code is _call.__code__ or not (
                    caller.f_code.co_filename.startswith(helpers)):
                called.append(names[id(frame.f_code)])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


def _one(ex, fn, case, library):
    """(value, None) for one call of fn, or (None, an Answer saying why it returned nothing)."""
    called, value, stopped = [], None, None
    try:
        with time_limit(), _watching(library, called):
            value = _call(fn, case)
    except NotImplementedError as stub:
        stopped = Answer(ended="not implemented", said=str(stub))
    except SystemExit:  # exit() in the learner's function ends the check of it, nothing more
        stopped = Answer(ended="exit")
    except TimeLimit as limit:  # as when grading kills a child that ignored it
        stopped = Answer(ended="did not finish", said=str(limit))
    except Exception as error:  # the learner's code raised: quote where and what
        stopped = Answer(ended="error", said=f"{type(error).__name__}: {error}",
                         line=_learner_line(error, ex, case))
    if called:  # whatever happened after, the library did the work
        return None, Answer(ended="library", said=called[0])
    return value, stopped


def answer(ex: Exercise, fn, library: dict | None = None) -> Answer:
    """Call the learner's `fn` on every case, in order, until one does not return; never raises
    for a wrong `fn`. `library` ({code object: name}, e.g. `helpers.checks.library(ex)`): a call
    of that code from the learner's (not from the library's own) ends the answer "library"."""
    if not callable(fn):
        return Answer(ended="not a function", said=_show(fn))
    outputs = []
    for case in ex.cases:
        value, stopped = _one(ex, fn, case, library)
        if stopped is not None:
            return dataclasses.replace(stopped, outputs=tuple(outputs))
        outputs.append(value)
    return Answer(tuple(outputs))


def verdict(ex: Exercise, got: Answer) -> Result:
    """The Result of the learner's answer: compared with the reference and the mistakes' models,
    which run here, never in the learner's process."""
    head = header(ex, "✗")
    case = ex.cases[min(len(got.outputs), len(ex.cases) - 1)]  # where it stopped
    label = tr(case.label)
    if got.ended == "not a function":
        return Result(ex.key, ex.name, "wrong",
                      head + tr(": expected a function, got {said}.", said=got.said))
    if got.ended == "not implemented":
        said = f" ({got.said})" if got.said else ""
        return Result(ex.key, ex.name, "not implemented", header(ex, "…") + tr(
            ": not implemented yet{said}. Write it in the cell above, run that cell, then run "
            "this one again.", said=said))
    if got.ended == "error":
        matches = [m for m in ex.mistakes if _raises_like(m, ex, got)]
        if len(matches) == 1:
            m = matches[0]
            part, value = _parts(_result(ex.reference, case), ex.outputs)[0]
            return Result(ex.key, ex.name, "mistake", head + tr(
                ": {says}\n  case: {label}\n  expected {part}: {value}\n  got      {part}: "
                "raised {said}\n  at: {line}\n  Your code raises where this mistake raises, and "
                "equals it on the {n} cases before [{name}]. {see}", says=tr(m.says), label=label,
                part=part, value=_show(value), said=got.said, line=got.line, n=len(got.outputs),
                name=m.name, see=see(m.see)), (m.name,))
        return Result(ex.key, ex.name, "error", head + tr(
            ": raised {said}\n  case: {label}\n  at: {line}\n  {see}", said=got.said,
            label=label, line=got.line, see=see(ex.see)))
    if got.ended == "library":
        return Result(ex.key, ex.name, "not credited", head + tr(
            ": calls the library's {said} instead of writing it; the checker compares with the "
            "library, so that is not credited.", said=got.said))
    if got.ended == "exit":
        return Result(ex.key, ex.name, "did not finish", head + tr(
            ": did not finish: called exit().\n  case: {label}", label=label))
    if got.ended == "did not finish":
        return Result(ex.key, ex.name, "did not finish",
                      head + tr(": did not finish: {said}.", said=got.said))
    if got.ended == "too big":
        return Result(ex.key, ex.name, "wrong", head + tr(
            ": its results are too big to compare ({said}).", said=got.said))
    if got.ended or len(got.outputs) != len(ex.cases):
        return Result(ex.key, ex.name, "did not finish",
                      head + tr(": did not finish: its answer could not be read."))
    names = ex.outputs
    got = list(got.outputs)
    expected = [_result(ex.reference, case) for case in ex.cases]
    wrong = [i for i, (e, g) in enumerate(zip(expected, got)) if not same(e, g, ex.rtol, ex.atol)]
    if not wrong:
        return Result(ex.key, ex.name, "passed",
                      header(ex, "✓") + tr(": passed all {n} cases.", n=len(ex.cases)))
    matches = [m for m in ex.mistakes if _matches(m, ex, got)]
    dtype_note = ""
    if not matches:  # the same values as a mistake's, in another dtype: name the mistake, and
        matches = [m for m in ex.mistakes if _matches(m, ex, got, dtype=False)]  # the dtype
        if matches:
            dtype_note = _dtype_note(ex, expected, got)
    shown = ((i, _first_difference(expected[i], got[i], names, ex.rtol, ex.atol)) for i in wrong)
    first = next(shown)  # or, if its texts are equal, the first case where the texts differ
    i, (part, where, e_text, g_text) = first if first[1][2] != first[1][3] else next(
        ((i, d) for i, d in shown if d[2] != d[3]), first)
    notes = ""
    if e_text == g_text:
        largest = _largest_difference(expected[i], got[i], names)
        if largest is not None:
            notes += tr("\n  (they differ by up to {largest}, below the digits shown)",
                        largest=f"{largest:.1e}")
    if all(_all_nan(g[0] if isinstance(g, (tuple, list)) and g else g) for g in got):
        notes += tr("\n  (your result is NaN on every case: other bugs that give NaN everywhere "
                    "look the same to this checker)")
    evidence = _compared(ex.cases[i].label, [(part, where, e_text, g_text)]) + notes
    if len(matches) == 1:
        m = matches[0]
        return Result(ex.key, ex.name, "mistake", head + tr(
            ": {says}\n{evidence}\n  Your result equals this mistake's on all {n} cases "
            "[{name}]. {see}", says=tr(m.says), evidence=evidence, n=len(ex.cases), name=m.name,
            see=see(m.see)) + dtype_note, (m.name,))
    if matches:
        listed = "\n".join(f"  - {tr(m.says)} [{m.name}] ({see(m.see, lower=True)})"
                           for m in matches)
        return Result(ex.key, ex.name, "ambiguous", head + tr(
            ": your result equals what each of these mistakes gives on every case; these cases "
            "cannot tell them apart:\n{listed}\n{evidence}", listed=listed, evidence=evidence)
            + dtype_note, tuple(m.name for m in matches))
    # a mistake nobody catalogued: which cases pass, and every part that differs, side by side
    # with what was expected (the weights too, where the function returns them)
    differing = _differences(expected[i], got[i], names, ex.rtol, ex.atol)
    lines = [_compared(ex.cases[i].label, differing)]
    if len(names) > 1 and isinstance(got[i], (tuple, list)) and len(got[i]) == len(names):
        lines += [tr("  {name}: as expected on this case", name=name) for name in names
                  if name not in {d[0] for d in differing}]
    return Result(ex.key, ex.name, "wrong", head + tr(
        ": wrong on {n} of {total} cases, and not one of the {known} mistakes this checker "
        "knows.", n=len(wrong), total=len(ex.cases), known=len(ex.mistakes)) + "\n"
        + which_cases(ex, wrong) + "\n".join(lines) + f"{notes}\n  {see(ex.see)}")


def _compared(label, differing):
    """"  case: ...", then "  expected part: ..." above "  got      part: ..." for each part."""
    lines = [tr("  case: {label}", label=tr(label))]
    for part, where, e_text, g_text in differing:
        lines += [tr("  expected {part}{where}: {text}", part=part, where=tr(where), text=e_text),
                  tr("  got      {part}{where}: {text}", part=part, where=tr(where), text=g_text)]
    return "\n".join(lines)


def _dtype_note(ex, expected, got):
    """A line for a result that equals a mistake's in values but not in dtype: which case's
    float32 came back in another dtype."""
    for case, e, g in zip(ex.cases, expected, got):
        for (_, e_part), (_, g_part) in zip(_parts(e, ex.outputs), _parts(g, ex.outputs)):
            e_dtype, g_dtype = getattr(e_part, "dtype", None), getattr(g_part, "dtype", None)
            if e_dtype is not None and _low_precision(np.asarray(e_part)) and e_dtype != g_dtype:
                return tr("\n  Also, the dtype: the case \"{label}\" expects {expected} and got "
                          "{got}; keep the inputs' dtype.", label=short(tr(case.label), 60),
                          expected=e_dtype, got=g_dtype or type(g_part).__name__)
    return ""


def _code_names(code):
    """The global names a code object reads, and those of the code nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
    return names


def names_read(fn) -> set[str] | None:
    """The global names the learner's `fn` reads, and those the functions of its own module
    that it reads read, and so on: every function of that module it can call. None when `fn`
    has no Python code to read (a builtin, a partial): then it can call anything."""
    code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or scope is None:
        return None
    found, todo = set(), [code]
    while todo:
        for name in _code_names(todo.pop()) - found:
            found.add(name)
            target = scope.get(name)
            if getattr(target, "__globals__", None) is scope and hasattr(target, "__code__"):
                todo.append(target.__code__)
    return found


def names_read_in_source(sources, name) -> set[str] | None:
    """`names_read` from source text, for grading a file without running it here: the names
    read by the last top-level `def name` of the sources (a notebook's code cells, IPython's
    magics left out) and, in turn, by the top-level functions those name. None when no source
    defines `name` with a def (it may be an alias, or made by exec) or a cell cannot be parsed."""
    defs = {}
    for src in sources:
        src = "\n".join(line for line in src.splitlines()
                        if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ClassDef, ast.Import,
                                   ast.ImportFrom)):  # a later rebinding of a def's name
                bound = (node.targets if isinstance(node, ast.Assign) else
                         [node.target] if isinstance(node, ast.AnnAssign) else [])
                for target in bound:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            defs.pop(leaf.id, None)
                if isinstance(node, ast.ClassDef):
                    defs.pop(node.name, None)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        defs.pop((alias.asname or alias.name).split(".")[0], None)
    if name not in defs:
        return None
    found, todo = set(), [defs[name]]
    while todo:
        node = todo.pop()
        for leaf in ast.walk(node):
            if isinstance(leaf, ast.Name) and leaf.id not in found:
                found.add(leaf.id)
                if leaf.id in defs:
                    todo.append(defs[leaf.id])
    return found


def run(ex: Exercise, fn, library: dict | None = None) -> Result:
    """Check the learner's `fn` against the exercise in this process (`answer`, then `verdict`);
    never raises for a wrong `fn`."""
    return verdict(ex, answer(ex, fn, library))
