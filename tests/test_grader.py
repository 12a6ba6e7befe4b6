"""Grading from the shell (`python -m helpers.checks`): a verdict a teacher can trust (issue 29).

Each test writes a learner's file, honest or hostile, to tmp_path and grades it through the
command line's `main` (in this process: the grader runs no learner's code itself; one test runs
the real `python -m helpers.checks` in a subprocess), asserting what it prints AND its exit status: a file that exits,
crashes, hangs (in a loop that swallows the time limit, or inside one NumPy call), patches NumPy
or the checker, hides exercises by deleting metadata, floods the terminal, or hands in the
library's own function gets the verdict it deserves, and the files after it in the same command
get exactly the verdicts they get alone. The hang tests use small limits (--limit 0.5,
--cell-limit 1) so that each takes a few seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from helpers import checks
from tests.exercises import EXERCISE_NOTEBOOKS, load, parts, solution_code, solved

NOTEBOOK_01 = next(p for p in EXERCISE_NOTEBOOKS if p.name.startswith("01_"))
SOLUTIONS_01 = {key: solution_code(cells["solution"]) for key, cells in parts(load(NOTEBOOK_01)).items()}
N01 = len(SOLUTIONS_01)  # notebook 01's exercises
FAST = ("--limit", "0.5", "--cell-limit", "1")

ATTENTION = '''
def scaled_dot_product_attention(Q, K, V, mask=None):  # right, and calls no softmax of the file
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1)
    return weights @ V, weights


def score_variance(X_q, X_k, W_q, W_k):  # right
    scores = ((X_q @ W_q) * (X_k @ W_k)).sum(axis=-1)
    return scores.var(), (scores / np.sqrt(W_q.shape[-1])).var()
'''
GOOD = "import numpy as np\n\n" + "\n\n".join(SOLUTIONS_01.values()) + "\n"
WRONG = '''import numpy as np


def split_heads(x, n_heads):  # the right shapes, the wrong values
    *lead, T, d_model = x.shape
    return np.zeros((*lead, n_heads, T, d_model // n_heads))


def merge_heads(x):
    *lead, h, T, d_k = x.shape
    return np.zeros((*lead, T, h * d_k))


def multi_head_attention(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    *lead, T_q, d_model = query.shape
    return np.zeros((*lead, T_q, d_model)), np.zeros((*lead, n_heads, T_q, key.shape[-2]))


def previous_token_head(d_model):
    return np.zeros((d_model, d_model)), np.zeros((d_model, d_model))
'''


def softmax_file(body: str, head: str = "") -> str:
    """A notebook-01 file: `head` at the top, softmax with `body`, and a right attention."""
    return (f"import numpy as np\n{head}\n\ndef softmax(x, axis=-1):\n"
            + "".join(f"    {line}\n" for line in body.splitlines()) + ATTENTION)


SWALLOW = "while True:\n    try:\n        while True:\n            pass\n    except {}:\n        pass"
HOSTILE = {  # name: (source, the first line of its 01.1 verdict); its 01.2 and 01.3 are right
    "01_exit.py": (softmax_file("sys.exit(0)", "import sys"),
                   "✗ 01.1 softmax: did not finish: called exit()."),
    "01_os_exit.py": (softmax_file("os._exit(0)", "import os"),
                      "✗ 01.1 softmax: did not finish: the process ended with status 0."),
    "01_endless_loop.py": (softmax_file("while True:\n    pass"),  # the child's own limit
                           "✗ 01.1 softmax: did not finish: ran past the limit of 0.5 s and "
                           "was stopped."),
    "01_swallows_the_limit.py": (softmax_file(SWALLOW.format("Exception")),
                                 "✗ 01.1 softmax: did not finish: ran past the limit of 0.5 s "
                                 "and was stopped."),
    "01_swallows_everything.py": (softmax_file(SWALLOW.format("BaseException")),
                                  "✗ 01.1 softmax: did not finish: ran past the limit of 0.5 s "
                                  "and was stopped."),
    "01_one_numpy_call.py": (softmax_file("return np.broadcast_to(1.0, (10**6, 10**7)).sum()"),
                             "✗ 01.1 softmax: did not finish: ran past the limit of 0.5 s "
                             "and was stopped."),
    "01_segfault.py": (softmax_file("ctypes.string_at(0)", "import ctypes"),
                       "✗ 01.1 softmax: did not finish: the process ended with status -11 "
                       "(SIGSEGV)."),
    "01_wrapper.py": (softmax_file("return helpers.transformer.softmax(x, axis)",
                                   "import helpers.transformer"),
                      "✗ 01.1 softmax: calls the library's softmax (helpers.transformer) instead "
                      "of writing it; the checker compares with the library, so that is not "
                      "credited."),
}
PATCHES = {  # name: a patch above the WRONG functions; each must still score 0 of 4
    "02_patches_allclose.py": "np.allclose = lambda *a, **k: True",
    "02_patches_bool.py": "import helpers.checks.core\n"
                          "helpers.checks.core.Result.__bool__ = lambda self: True",
    "02_patches_run.py": "import helpers.checks\nfrom helpers.checks.core import Result\n"
                         "helpers.checks.run = lambda ex, fn, *a: Result(ex.key, ex.name, "
                         "'passed', f'✓ {ex.key} {ex.name}: passed all 5 cases.')",
    "02_patches_same.py": "import helpers.checks.core\n"
                          "helpers.checks.core.same = lambda *a, **k: True",
}


@pytest.fixture(scope="module", autouse=True)
def one_zygote():
    """Every `cli` call of this module forks its grading children from one zygote: each call's
    own would import the same modules again (`checks.child.forks`)."""
    with checks.child.forks():
        yield


@pytest.fixture(scope="module", autouse=True)
def short_grace():
    """A child past its limit is killed GRACE_SECONDS later if its own (signal) limit has not
    reported by then: the verdict is the same either way ("ran past the limit of ... and was
    stopped"), so these tests wait a tenth of a second for it, not half of one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checks, "GRACE_SECONDS", 0.1)
        yield


def shell(*files, args=(), cwd=None, timeout=120) -> tuple[int, str]:
    """(exit status, what it printed) of `python -m helpers.checks *args *files`."""
    proc = subprocess.run([sys.executable, "-m", "helpers.checks", *args, *map(str, files)],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or files[0].parent)
    return proc.returncode, proc.stdout + proc.stderr


class TookTooLong(Exception):
    pass


def cli(*files, args=(), timeout=120) -> tuple[int, str]:
    """What `shell` gives, from `checks.main` in this process and the folder of the first file:
    the grading process never runs a learner's code (the children do), so running it here
    spares a process per call. `shell` itself is tested by the refusal test below; `main` is all
    that `python -m helpers.checks` runs, as sys.exit(main())."""
    def stop(*_):
        raise TookTooLong(f"the grader took over {timeout} s")

    printed, here = io.StringIO(), os.getcwd()
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        os.chdir(files[0].parent)
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            try:
                code = checks.main([*args, *map(str, files)])
            except SystemExit as error:
                code = error.code
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
    return code, printed.getvalue()


def sections(out: str) -> dict[str, str]:
    """{file name: what was printed under its "== path" heading}."""
    found = {}
    for block in re.split(r"^== ", out, flags=re.M)[1:]:
        path, _, text = block.partition("\n")
        found[path.rsplit("/", 1)[-1]] = text
    return found


def summary(text: str) -> str:
    return re.findall(r"^-- .*$", text, re.M)[-1]


def write(folder, name, source):
    path = folder / name
    path.write_text(source, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """The honest files and what each gets alone: {name: (path, printed section)}."""
    folder = tmp_path_factory.mktemp("honest")
    found = {}
    for name, source, status in (("01_good.py", GOOD, 0), ("02_wrong.py", WRONG, 1)):
        path = write(folder, name, source)
        code, out = cli(path)
        assert code == status, out
        found[name] = (path, sections(out)[name])
    assert summary(found["01_good.py"][1]) == f"-- 01_good.py: {N01} of {N01} exercises passed"
    assert summary(found["02_wrong.py"][1]) == "-- 02_wrong.py: 0 of 4 exercises passed"
    return found


# ── each hostile file: its verdict and the exit status ────────────────────────────────────────


@pytest.fixture(scope="module")
def batch(tmp_path_factory, honest):
    """One run over every hostile and patching file, then the honest ones: (status, printed)."""
    folder = tmp_path_factory.mktemp("hostile")
    hostile = [write(folder, name, source) for name, (source, _) in HOSTILE.items()]
    hostile += [write(folder, name, WRONG.replace("import numpy as np\n",
                                                  f"import numpy as np\n{patch}\n", 1))
                for name, patch in PATCHES.items()]
    code, out = cli(*hostile, honest["01_good.py"][0], honest["02_wrong.py"][0], args=FAST,
                    timeout=120)
    return code, out


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_function_gets_its_verdict_and_the_batch_goes_on(batch, name):
    code, out = batch
    found = sections(out)
    assert HOSTILE[name][1] in found[name].splitlines(), out
    assert "✓ 01.2 scaled_dot_product_attention: passed all" in found[name], out  # graded after
    assert summary(found[name]) == f"-- {name}: 2 of {N01} exercises passed", out
    if name == "01_segfault.py":  # the crash is shown where it happened
        assert "output of 01_segfault.py while it was graded (stdout and stderr):" in out
        assert "  | Fatal Python error: Segmentation fault" in out
        assert '  |   File "01_segfault.py", line 5 in softmax' in out, out


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_a_file_that_patches_numpy_or_the_checker_is_still_wrong(batch, name):
    found = sections(batch[1])
    assert summary(found[name]) == f"-- {name}: 0 of 4 exercises passed", found[name]
    assert "✓" not in found[name]


def test_a_file_that_kills_the_zygote_harms_only_itself(tmp_path, honest, monkeypatch):
    """The children are forked by a zygote (`checks.zygote`), their parent: a file that kills it
    gets a verdict (what its child answered before the grader saw the zygote go), and the next
    child, of the file or the next one, is forked by a new zygote."""
    good, alone = honest["01_good.py"]
    killer = write(tmp_path, "01_killer.py", "import os\nimport signal\n\n"
                   "os.kill(os.getppid(), signal.SIGKILL)\n" + GOOD)
    monkeypatch.setattr(checks.child, "_open", None)  # a zygote of its own: this module's lives
    code, out = cli(killer, good)
    assert code in (0, 1), out
    assert re.fullmatch(rf"-- 01_killer.py: \d of {N01} exercises passed",
                        summary(sections(out)["01_killer.py"])), out
    assert sections(out)["01_good.py"] == alone, out


def test_where_the_platform_cannot_fork_each_child_is_started_on_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(checks.child, "_open", None)  # outside this module's forks() block
    monkeypatch.setattr(checks.child, "usable", lambda: False)  # as on macOS
    name = "01_os_exit.py"  # a child that ends, and the next one that grades the rest
    code, out = cli(write(tmp_path, name, HOSTILE[name][0]))
    assert code == 1 and HOSTILE[name][1] in out.splitlines(), out
    assert summary(out) == f"-- {name}: 2 of {N01} exercises passed", out


def test_a_patch_does_not_leak_into_the_next_file(tmp_path, honest):
    wrong, alone = honest["02_wrong.py"]
    patcher = write(tmp_path, "02_patcher.py",
                    "import numpy as np\nimport helpers.checks.core\n"
                    "np.allclose = np.array_equal = lambda *a, **k: True\n"
                    "helpers.checks.core.same = lambda *a, **k: True\n" + GOOD)
    code, out = cli(patcher, wrong)
    assert code == 1
    assert sections(out)["02_wrong.py"] == alone, out


def test_a_batch_of_every_hostile_file_finishes_and_the_honest_files_get_their_own_verdicts(
        batch, honest):
    code, out = batch
    found = sections(out)
    assert code == 1
    assert list(found) == [*HOSTILE, *PATCHES, "01_good.py", "02_wrong.py"], out
    assert found["01_good.py"] == honest["01_good.py"][1], out  # graded after them, as alone
    assert found["02_wrong.py"] == honest["02_wrong.py"][1], out


# ── cells, limits, output ─────────────────────────────────────────────────────────────────────


def notebook(*sources: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [],
                                  "execution_count": None} for s in sources],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_cell_that_hangs_or_ends_the_process_is_skipped_and_noted(tmp_path):
    path = write(tmp_path, "01_cells.ipynb", notebook(
        "import numpy as np\n\n" + SOLUTIONS_01["01.1"],
        "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except BaseException:\n"
        "        pass",
        "import os\nos._exit(3)",
        SOLUTIONS_01["01.2"], SOLUTIONS_01["01.3"], SOLUTIONS_01["01.4"]))
    code, out = cli(path, args=FAST, timeout=60)
    assert code == 0, out  # every exercise passed: a skipped cell is a note, not a failure
    assert "note: 01_cells.ipynb, cell 2: ran past the limit of 1 s and was stopped; graded " \
           "without it" in out
    assert "note: 01_cells.ipynb, cell 3: the process ended with status 3; graded without it" in out
    assert summary(out) == f"-- 01_cells.ipynb: {N01} of {N01} exercises passed"


def test_a_file_gets_no_more_than_its_own_time(tmp_path):
    loop = "".join(f"    {line}\n" for line in SWALLOW.format("BaseException").splitlines())
    path = write(tmp_path, "01_slow.py", f"def softmax(x, axis=-1):\n{loop}\n\n"
                 f"def scaled_dot_product_attention(Q, K, V, mask=None):\n{loop}")
    code, out = cli(path, args=("--limit", "20", "--file-limit", "0.75"), timeout=30)
    assert code == 1
    assert "✗ 01.1 softmax: did not finish: the file's limit of 0.75 s ran out." in out
    assert ("✗ 01.2 scaled_dot_product_attention: did not finish: the file's limit of 0.75 s "
            "ran out.") in out


def test_a_flood_of_output_reaches_the_terminal_cut(tmp_path):
    flood = "import sys\nsys.stdout.write('o' * 10_000_000)\nsys.stderr.write('e' * 10_000_000)\n"
    quiet = write(tmp_path, "01_quiet.py", flood + GOOD)  # nothing went wrong: not shown
    code, out = cli(quiet)
    assert code == 0 and len(out) < 2_000, out[:3000]
    assert summary(out) == f"-- 01_quiet.py: {N01} of {N01} exercises passed"
    loud = write(tmp_path, "01_loud.py", flood + softmax_file("return 1 / 0") + "\nprint('end')\n")
    code, out = cli(loud)
    assert code == 1 and len(out) < 5_000, out[:6000]
    assert "✗ 01.1 softmax: raised ZeroDivisionError: division by zero" in out
    assert "  | " + "o" * 1000 + "\n  | … 19,998,004 bytes not shown …\n  | " in out, out
    assert out.count("e") > 900  # the end of it is shown too


def test_a_file_cannot_hide_unsolved_exercises_by_deleting_their_metadata(tmp_path):
    nb = load(NOTEBOOK_01)
    cells = parts(nb)
    cells["01.1"]["stub"]["source"] = SOLUTIONS_01["01.1"]  # 01.1 solved, 01.2 left as a stub
    for cell in cells["01.2"].values():
        del cell["metadata"]["exercise"]
    code, out = cli(write(tmp_path, "bob.ipynb", json.dumps(nb)))
    assert code == 1, out
    assert "… 01.2 scaled_dot_product_attention: not implemented yet" in out
    assert summary(out) == f"-- bob.ipynb: 1 of {N01} exercises passed"


def test_solved_exercise_notebooks_pass_with_exit_status_0(tmp_path):
    """Every exercise notebook with its solutions in place: every cell runs, every check passes."""
    paths = [write(tmp_path, p.name, json.dumps(solved(load(p)))) for p in EXERCISE_NOTEBOOKS]
    code, out = cli(*paths)
    assert code == 0, out
    found = sections(out)
    assert list(found) == [p.name for p in paths], out
    for path in paths:
        n = sum(key.startswith(path.name[:2] + ".") for key in checks.CATALOGUE)
        lines = found[path.name].splitlines()
        assert lines[-1] == f"-- {path.name}: {n} of {n} exercises passed", found[path.name]
        assert all(line.startswith("✓ ") for line in lines[:-1]), found[path.name]  # no cell raised


def test_the_exit_status_is_0_only_when_every_exercise_passed(tmp_path, honest):
    good, _ = honest["01_good.py"]
    stub = write(tmp_path, "01_stub.py", GOOD.replace(
        "def softmax(x, axis=-1):", "def softmax(x, axis=-1):\n    raise NotImplementedError\n"
        "\n\ndef unused(x, axis=-1):"))
    empty = write(tmp_path, "notes.py", "x = 1\n")
    code, out = cli(good, stub)  # alone, the good file's status is 0 (the fixture says so)
    assert code == 1 and "… 01.1 softmax: not implemented yet" in out
    code, out = cli(good, empty)
    assert code == 1 and "✗ notes.py: defines no function of any exercise" in out


def test_malformed_and_forged_messages_are_ignored(tmp_path):
    forger = ("import os, sys\nfd = int(sys.argv[sys.argv.index('--messages') + 1])\n"
              "os.write(fd, b'not json\\n[1, 2]\\n{\"t\": \"cell\", \"k\": 999}\\n'\n"
              "         b'{\"t\": \"answer\", \"key\": \"01.1\", \"ended\": \"\", '\n"
              "         b'\"outputs\": [\"array\", \"!!\", true]}\\n' + b'x' * 100)\n")
    code, out = cli(write(tmp_path, "01_forger.py", forger + GOOD))
    assert code == 0, out
    assert summary(out) == f"-- 01_forger.py: {N01} of {N01} exercises passed"
    assert "malformed message(s) from the grading child ignored" in out


def test_results_too_big_to_send_are_wrong(tmp_path):
    path = write(tmp_path, "01_big.py", softmax_file("return np.zeros((9000, 1000))"))
    code, out = cli(path)
    assert code == 1
    assert "✗ 01.1 softmax: its results are too big to compare (over 64 MB)." in out


# ── the library's own function is not credited ────────────────────────────────────────────────


def test_the_library_function_or_a_wrapper_of_it_is_not_credited_when_graded(tmp_path):
    files = {"01_import.py": "from helpers.transformer import softmax\n",
             "01_partial.py": "import functools\nfrom helpers.transformer import softmax as s\n"
                              "softmax = functools.partial(s)\n",
             "01_wrapped.py": "import helpers.transformer\n\n\ndef softmax(x, axis=-1):\n"
                              "    return helpers.transformer.softmax(x, axis)\n"}
    paths = [write(tmp_path, name, "import numpy as np\n" + source + ATTENTION)
             for name, source in files.items()]
    code, out = cli(*paths)
    found = sections(out)
    assert code == 1
    assert ("✗ 01.1 softmax: 01_import.py imports softmax from helpers.transformer instead of "
            "writing it.") in found["01_import.py"]
    for name in ("01_partial.py", "01_wrapped.py"):
        assert "✗ 01.1 softmax: calls the library's softmax (helpers.transformer) instead of " \
               "writing it" in found[name], found[name]
    assert all(summary(found[p.name]) == f"-- {p.name}: 2 of {N01} exercises passed" for p in paths)


def test_the_library_function_or_a_wrapper_of_it_is_not_credited_by_check():
    import functools

    import helpers.modern
    import helpers.transformer

    def softmax(x, axis=-1):
        return helpers.transformer.softmax(x, axis)

    def rope(x, start=0):
        return helpers.modern.rope(x, start)

    said = {}
    for what, fn, key in (("the library's", helpers.transformer.softmax, "01.1"),
                          ("a wrapper", softmax, "01.1"),
                          ("a partial", functools.partial(helpers.transformer.softmax), "01.1"),
                          ("a wrapper", rope, "09.3"),
                          ("the reference", checks.exercise("09.3").reference, "09.3")):
        result = checks.check(fn, key)
        assert result.status == "not credited" and not result, (what, result.message)
        said[what, key] = result.message
    assert "calls the library's softmax (helpers.transformer) instead of writing it" in said[
        "a partial", "01.1"]
    assert "calls the library's rope (helpers.modern) instead of writing it" in said[
        "a wrapper", "09.3"]
    assert "calls the library's reference for 09.3 (helpers.checks.modern)" in said[
        "the reference", "09.3"]


def test_library_code_calling_the_library_is_not_the_learners_call():
    import helpers.transformer

    def softmax(x, axis=-1):  # through the library's attention, which calls its softmax itself
        x = np.moveaxis(x, axis, -1)
        d = x.shape[-1]  # softmax(Q K^T / sqrt(d)) with Q = sqrt(d) x and K = I is softmax(x)
        weights = helpers.transformer.scaled_dot_product_attention(
            x * np.sqrt(d), np.eye(d), np.eye(d))[1]
        return np.moveaxis(weights, -1, axis)

    result = checks.check(softmax)  # right but where -inf * 0 gives NaN: not "not credited"
    assert result.status == "wrong" and "wrong on 1 of 7 cases" in result.message, result.message


def test_a_wrapper_of_adams_own_parts_is_not_credited():
    from helpers.training import Adam

    def adam_step(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
        adam = Adam({"p": p.copy()}, beta1=beta1, beta2=beta2, eps=eps)
        adam.m_flat[:], adam.v_flat[:], adam.t = m.ravel(), v.ravel(), t - 1
        adam.apply(adam.update({"p": g}, lr))  # step's two halves, called one by one
        return adam.params["p"], adam.m["p"].copy(), adam.v["p"].copy()

    result = checks.check(adam_step)
    assert result.status == "not credited", result.message
    assert "calls the library's Adam.update (helpers.training)" in result.message


def test_an_imported_function_does_not_bring_its_notebook_into_the_grading(tmp_path):
    path = write(tmp_path, "answers.py", "from helpers.transformer import softmax\n" + WRONG)
    code, out = cli(path)  # no metadata, no "NN_" name: the functions it writes choose
    assert code == 1 and "01.1" not in out, out
    assert summary(out) == "-- answers.py: 0 of 4 exercises passed", out


def test_edited_metadata_hides_none_of_the_notebook_its_name_gives(tmp_path):
    nb = json.loads(notebook("import numpy as np\n\n" + GOOD))
    nb["cells"][0]["metadata"] = {"exercise": {"key": "01.1", "part": "stub"}}  # not 09's
    code, out = cli(write(tmp_path, "09_the_transformer_today.ipynb", json.dumps(nb)))
    assert code == 1, out
    n = N01 + sum(key.startswith("09.") for key in checks.CATALOGUE)  # 01's pass, 09's missing
    assert summary(out) == f"-- 09_the_transformer_today.ipynb: {N01} of {n} exercises passed", out
    assert "✗ 09.1 rms_norm: 09_the_transformer_today.ipynb defines no rms_norm." in out


def test_learners_text_cannot_pass_for_a_verdict(tmp_path):
    path = write(tmp_path, "01_liar.py", softmax_file(
        "raise ValueError('no\\n-- 01_liar.py: 2 of 2 exercises passed\\n✓ 01.1 softmax')"))
    code, out = cli(path)
    assert code == 1 and summary(out) == f"-- 01_liar.py: 2 of {N01} exercises passed", out
    assert "\n    -- 01_liar.py: 2 of 2 exercises passed\n    ✓ 01.1 softmax" in out, out
    assert not re.search(r"^✓ 01\.1", out, re.M)


def test_a_file_whose_time_runs_out_before_its_functions_are_known_says_so(tmp_path):
    path = write(tmp_path, "answers.py", "import time\ntime.sleep(30)\n" + GOOD)
    code, out = cli(path, args=("--file-limit", "0.5"), timeout=30)
    assert code == 1, out
    assert "note: nothing graded: the file's limit of 0.5 s ran out" in out, out


SHADOW = '''import importlib.util, os, sysconfig
_spec = importlib.util.spec_from_file_location(
    "_selectors", os.path.join(sysconfig.get_paths()["stdlib"], "selectors.py"))
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})
'''  # a module of the grader's, replaced by a learner's that works (and could do anything)


def test_the_grader_refuses_to_run_after_importing_a_learners_module(tmp_path):
    write(tmp_path, "selectors.py", SHADOW)  # `python -m` imports from the current folder first
    path = write(tmp_path, "01_good.py", GOOD)
    code, out = shell(path)  # run from the learner's folder
    assert code == 2, out
    assert out.startswith(f"✗ refused: the grader imported selectors ({tmp_path}/selectors.py) "
                          "from the current folder"), out
    code, out = shell(path, cwd=tmp_path.parent)  # from another folder: graded as usual
    assert code == 0 and summary(out) == f"-- 01_good.py: {N01} of {N01} exercises passed", out
