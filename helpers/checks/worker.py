"""python -m helpers.checks.worker FILE: the child process that runs one learner's file.

The grader (`helpers.checks.grade`) starts it; nobody else needs to. It runs the file's cells in
order, as opening the notebook would (each under the soft limit of `core.time_limit`), then calls
the learner's function of each exercise asked for on the exercise's cases (`core.answer`) and
sends back what came back. It compares nothing: the grader does, in its own process. Messages,
one JSON line each (`wire`) on the descriptor --messages:

    {"t": "cell", "k": k}                      cell k starts
    {"t": "problem", "text": ...}              a cell raised or called exit(): the next still run
    {"t": "numbers", "numbers": [...]}         (--keys auto) the notebooks whose functions it has
    {"t": "exercise", "key": key}              the learner's function of `key` starts
    {"t": "answer", "key": key, "ended": ..., "said": ..., "line": ..., "outputs": [...]}
    {"t": "finished"}

The learner's prints go to stdout and stderr, which the grader reads.

``python -m helpers.checks.worker --zygote FD`` is the fork server of `helpers.checks.zygote`: it
imports all this once, then forks a worker that runs `main` for each child the grader asks for.
"""

from __future__ import annotations

import argparse
import inspect
import linecache
import os
import sys
from pathlib import Path

from helpers.checks import CATALOGUE, CELL_SECONDS, _notebook_cells, core, library, wire, zygote


def _numbers(text: str) -> set[int]:
    return {int(k) for k in text.split(",") if k}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m helpers.checks.worker")
    parser.add_argument("file", type=Path)
    parser.add_argument("--messages", type=int, required=True, help="the descriptor to write to")
    parser.add_argument("--keys", default="auto", help='"01.1,01.2", or "auto": by the functions')
    parser.add_argument("--skip", default="", help="cells not to run, e.g. 3,5")
    parser.add_argument("--limit", type=float, default=core.LIMIT_SECONDS)
    parser.add_argument("--cell-limit", type=float, default=CELL_SECONDS)
    args = parser.parse_args(argv)

    def send(**fields):  # a line the learner's code left unended cannot swallow a message
        data = b"\n" + wire.line(**fields)
        while data:
            data = data[os.write(args.messages, data):]

    path = args.file.resolve()
    cells, _ = _notebook_cells(path)
    os.chdir(path.parent)  # as `python file.py` would run it
    sys.path.insert(0, str(path.parent))
    core.LIMIT_SECONDS = args.limit
    ns = _run_cells(cells, path.name, _numbers(args.skip), args.cell_limit, send)
    if args.keys == "auto":
        numbers = sorted({ex.key[:2] for ex in CATALOGUE.values() if _written(ns.get(ex.name))})
        send(t="numbers", numbers=numbers)
        keys = [key for key in CATALOGUE if key[:2] in numbers]
    else:
        keys = [key for key in args.keys.split(",") if key in CATALOGUE]
    for key in keys:
        send(t="exercise", key=key)
        send(t="answer", key=key, **_answer(CATALOGUE[key], ns))
    send(t="finished")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit handler or thread of the learner's runs after the last answer


def _run_cells(cells, name, skip, limit, send) -> dict:
    """Run the learner's cells, but those in `skip`; a cell that raises is reported, not fatal."""
    ns: dict = {"__name__": "__learner__"}
    for k, src in enumerate(cells, 1):
        if k in skip:
            continue
        send(t="cell", k=k)
        src = "\n".join(line for line in src.splitlines()  # IPython magics mean nothing here
                        if not line.lstrip().startswith(("%", "!")))
        filename = f"{name}, cell {k}" if len(cells) > 1 else name
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        try:
            with core.time_limit(limit):
                exec(compile(src, filename, "exec"), ns)
        except BaseException as error:  # SystemExit too: one learner's exit() ends no file
            send(t="problem", text=f"{filename}: {type(error).__name__}: {error}")
    return ns


def _written(fn) -> bool:
    """Whether `fn` is a function (or class) the learner's file defines, not one it imports."""
    return callable(fn) and (getattr(fn, "__module__", None) or "__learner__") == "__learner__"


def _answer(ex, ns) -> dict:
    """The fields of one answer message."""
    fn = ns.get(ex.name)
    if fn is None:
        return {"ended": "missing"}
    module = getattr(fn, "__module__", None) or "__learner__"
    if (inspect.isroutine(fn) or inspect.isclass(fn)) and module != "__learner__":
        return {"ended": "imported", "said": str(module)}
    got = core.answer(ex, fn, library(ex))
    try:
        outputs = wire.encode(got.outputs)  # a tuple, within one limit
    except wire.TooBig as error:
        return {"ended": "too big", "said": str(error)}
    return {"ended": got.ended, "said": got.said, "line": got.line, "outputs": outputs}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:  # the fork server of helpers.checks.zygote
        zygote.serve(int(sys.argv[2]), main)
    else:
        main()
