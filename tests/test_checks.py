"""The exercise checkers (helpers/checks): each catalogued mistake is caught with its own diagnosis.

Every catalogued mistake also exists as a wrong implementation written the way a learner would
write it, in tests/test_checks_NN.py (`WRONG = {mistake name: function}`), independent of the
checker's own model of it; the tests here assert that the checker names exactly that mistake.
They also check the catalogue itself (reachable sections, distinguishable mistakes), the
messages, grading a file, and that every exercise notebook passes every check once solved.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers import checks
from helpers.checks.core import run
from tests.exercises import EXERCISE_NOTEBOOKS, ROOT, load, parts, solution_code, solved, source

CHECK_TESTS = sorted((ROOT / "tests").glob("test_checks_[0-9][0-9].py"))
WRONG = {}  # mistake name -> a learner-style wrong function
for _path in CHECK_TESTS:
    for _name, _entry in importlib.import_module(f"tests.{_path.stem}").WRONG.items():
        assert _name not in WRONG, f"{_name} has two wrong implementations"
        WRONG[_name] = _entry
MISTAKES = checks.mistakes()


@pytest.fixture(scope="module", autouse=True)
def one_zygote():
    """The files graded here (checks.grade) fork their children from one zygote, which imports
    the grading modules once for all of them (`checks.child.forks`)."""
    with checks.child.forks():
        yield


def learners_softmax(x, axis=-1):  # right, and the learner's own: check() credits no library call
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def learners_attention(Q, K, V, mask=None):
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
    weights = learners_softmax(scores if mask is None else np.where(mask, -np.inf, scores))
    return weights @ V, weights


# ── the catalogue ─────────────────────────────────────────────────────────────────────────────


def test_the_catalogue_has_at_least_25_named_mistakes():
    names = [m.name for ex in checks.CATALOGUE.values() for m in ex.mistakes]
    assert len(names) == len(set(names)), "two mistakes share a name"
    assert len(names) >= 25, f"{len(names)} mistakes"
    assert all(re.fullmatch(r"[a-z0-9_]+(-[a-z0-9_]+)*", n) for n in names), names


def test_exercise_names_and_keys_are_unique_and_numbered_by_notebook():
    names = [ex.name for ex in checks.CATALOGUE.values()]
    assert len(names) == len(set(names)), names
    for key, ex in checks.CATALOGUE.items():
        assert key == ex.key and re.fullmatch(r"\d\d\.\d", key), key


def test_every_mistake_has_a_learner_style_wrong_implementation():
    assert set(WRONG) == set(MISTAKES), (
        f"no wrong implementation for {sorted(set(MISTAKES) - set(WRONG))}; "
        f"unknown names {sorted(set(WRONG) - set(MISTAKES))}")


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_checker_names_exactly_this_mistake(name):
    ex, mistake = MISTAKES[name]
    result = run(ex, WRONG[name])
    assert result.mistakes == (name,) and result.status == "mistake", result.message
    assert not result
    assert mistake.says in result.message and mistake.see in result.message
    assert "\n  expected " in result.message and "\n  got      " in result.message


@pytest.mark.parametrize("key", sorted(checks.CATALOGUE))
def test_the_reference_passes_and_every_mistake_model_is_told_apart(key):
    ex = checks.CATALOGUE[key]
    assert run(ex, ex.reference).status == "passed"
    for m in ex.mistakes:  # each model differs from the reference and from every other mistake
        result = run(ex, m.model)
        assert result.mistakes == (m.name,), f"{m.name}: {result.message}"


@functools.cache  # one read of each notebook for all the references that name it
def headings(number, edition="notebooks"):
    """(section number, heading text) for every heading of notebook `number`, LaTeX made plain
    (edition "notebooks/zh": of its Chinese twin)."""
    path = next((ROOT / edition).glob(f"{number}_*.ipynb"))
    section, out = None, []
    for cell in load(path)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for line in source(cell).splitlines():
            match = re.match(r"(#+) (.*)", line)
            if not match:
                continue
            text = match.group(2)
            numbered = re.match(r"(\d+) · (.*)", text)  # "## 4 · Why divide by √d_k"
            if match.group(1) == "##":
                section = numbered.group(1) if numbered else None
            plain = re.sub(r"\\sqrt\{([^}]*)\}", r"√\1", numbered.group(2) if numbered else text)
            plain = re.sub(r"\\text\{([^}]*)\}", r"\1", plain).replace("$", "")
            out.append((section, plain.replace("_{", "_").replace("}", "")))
    return tuple(out)


def all_sees():
    for ex in checks.CATALOGUE.values():
        yield ex.key, ex.see
        for m in ex.mistakes:
            yield m.name, m.see


@pytest.mark.parametrize("who, see", list(all_sees()))
def test_every_reference_names_an_existing_section(who, see):
    match = re.fullmatch(r"(\d\d) §(\d+) · (.+?)( \(.*\))?", see)
    assert match, f"{who}: {see!r} is not 'NN §k · heading'"
    number, section, title = match.group(1), match.group(2), match.group(3)
    found = [(s, t) for s, t in headings(number) if t == title]
    assert found, f"{who}: notebook {number} has no heading {title!r}"
    assert any(s == section for s, _ in found), f"{who}: {title!r} is not in §{section}: {found}"


# ── the messages ──────────────────────────────────────────────────────────────────────────────


def test_what_a_learner_sees_for_a_stub_an_exception_none_and_an_unknown_mistake():
    def softmax(x, axis=-1):
        raise NotImplementedError("exercise 01.1: write softmax")

    result = checks.check(softmax)
    assert result.status == "not implemented" and "not implemented yet" in result.message
    assert "exercise 01.1: write softmax" in result.message

    def softmax(x, axis=-1):  # noqa: F811 (the learner's second attempt)
        return np.exp(x) / np.exp(x).sum(axis=axis, keepdim=True)

    result = checks.check(softmax)
    assert result.status == "error" and "TypeError" in result.message
    assert "keepdim=True" in result.message  # the learner's own line is quoted

    def softmax(x, axis=-1):  # noqa: F811 (forgot to return)
        np.exp(x)

    result = checks.check(softmax)
    assert result.status == "wrong" and "got      result: None" in result.message

    def softmax(x, axis=-1):  # noqa: F811 (a mistake nobody catalogued)
        return np.ones_like(x) / 2

    result = checks.check(softmax)
    assert result.status == "wrong" and "not one of the" in result.message
    assert "expected result[0]: [0.09003 0.2447 0.6652]" in result.message  # the hand case


def test_a_result_prints_its_message_and_is_true_only_when_passed(capsys):
    result = checks.check(learners_softmax, "01.1")
    assert result and result.status == "passed" and str(result) == result.message
    result._ipython_display_()
    assert capsys.readouterr().out == result.message + "\n"
    assert repr(result) == "<Result 01.1 softmax: passed>"


def test_check_needs_a_known_exercise_and_a_function():
    with pytest.raises(KeyError, match="no exercise 'soft_max'"):
        checks.check(lambda x: x, "soft_max")
    with pytest.raises(ValueError, match="give the exercise's key"):
        checks.check(lambda x: x)
    result = checks.check(None, "01.1")
    assert result.status == "wrong" and "expected a function" in result.message


def test_rounding_level_differences_pass():
    def noisy(x, axis=-1):
        return learners_softmax(x, axis) * (1 + 1e-12)

    assert checks.check(noisy, "01.1")


# ── grading a file, and the exercise notebooks ────────────────────────────────────────────────


def test_grade_a_python_file_from_the_shell(tmp_path):
    solutions = {k: solution_code(cells["solution"])
                 for k, cells in parts(load(EXERCISE_NOTEBOOKS[0])).items()}  # notebook 01's
    n = len(solutions)
    good = "\n\n".join(solutions.values())
    (tmp_path / "answers.py").write_text("import numpy as np\n\n" + good + "\n")
    wrong = good.replace(solutions["01.2"], solutions["01.2"].replace("/ np.sqrt(d_k)", ""))
    assert wrong != good
    (tmp_path / "wrong.py").write_text("import numpy as np\n\n" + wrong + "\n")
    # one command for both files (a grader in a subprocess imports NumPy twice: its own and its
    # zygote's); the exit status 0 of a file that passes everything, from the shell, is
    # tests/test_grader.py's test_the_grader_refuses_to_run_after_importing_a_learners_module's
    both = subprocess.run([sys.executable, "-m", "helpers.checks", "--notebook", "01",
                           str(tmp_path / "answers.py"), str(tmp_path / "wrong.py")],
                          capture_output=True, text=True)
    ok, _, bad = both.stdout.partition(f"== {tmp_path / 'wrong.py'}\n")
    assert both.returncode == 1 and bad, both.stdout + both.stderr  # one file failed
    assert f"answers.py: {n} of {n} exercises passed" in ok and "✗" not in ok, ok
    assert "[attention-no-scaling]" in bad
    assert f"wrong.py: {n - 1} of {n} exercises passed" in bad


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_grading_an_unsolved_notebook_finds_every_exercise_not_implemented(path):
    results = checks.grade(path)
    number = path.name[:2]
    assert [r.key for r in results] == [k for k in checks.CATALOGUE if k.startswith(number + ".")]
    assert {r.status for r in results} == {"not implemented"}


@pytest.mark.parametrize("path", EXERCISE_NOTEBOOKS, ids=lambda p: p.name)
def test_exercise_notebook_structure(path):
    nb = load(path)
    found = parts(nb)
    number = path.name[:2]
    assert list(found) == [k for k in checks.CATALOGUE if k.startswith(number + ".")]
    assert 2 <= len(found) <= 8, f"{len(found)} exercises"
    for key, cells in found.items():
        assert list(cells) == ["stub", "check", "hint", "solution"], (key, list(cells))
        ex = checks.CATALOGUE[key]
        stub = source(cells["stub"])
        assert f"def {ex.name}(" in stub and "raise NotImplementedError" in stub, key
        assert source(cells["check"]).strip() == f"check({ex.name})", key
        for part in ("hint", "solution"):
            assert source(cells[part]).startswith("<details><summary>"), (key, part)
        solution = solution_code(cells["solution"])
        assert f"def {ex.name}(" in solution and "NotImplementedError" not in solution
        checks_out = "".join(source({"source": o.get("text", "")}) for o in cells["check"]["outputs"])
        assert checks_out.startswith(f"… {key} {ex.name}: not implemented yet"), checks_out
    assert (ROOT / "notebooks" / path.name).exists(), "an exercise notebook is named as its notebook"


def test_every_notebook_with_exercises_points_to_them():
    for path in EXERCISE_NOTEBOOKS:
        series = ROOT / "notebooks" / path.name
        markdown = "\n".join(source(c) for c in load(series)["cells"] if c["cell_type"] == "markdown")
        assert f"(exercises/{path.name})" in markdown, f"{series.name} does not link its exercises"


def test_a_function_that_changes_its_input_in_place_is_checked_on_intact_cases():
    def softmax(x, axis=-1):
        x -= np.where(np.isfinite(m := x.max(axis=axis, keepdims=True)), m, 0)  # in place
        np.exp(x, out=x)
        total = x.sum(axis=axis, keepdims=True)
        return x / np.where(total > 0, total, 1)

    assert checks.check(softmax).status == "passed"


def test_readme_lists_every_exercise_notebook_and_counts_the_catalogue():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d\d) \| .*\| \[(\d) exercises\]\(notebooks/exercises/\1_\w+\.ipynb\) "
                           r"\| \d+ \|$", readme, re.M))
    per_notebook = {}
    for key in checks.CATALOGUE:
        per_notebook[key[:2]] = per_notebook.get(key[:2], 0) + 1
    assert rows == {k: str(v) for k, v in per_notebook.items()}, rows
    for link in re.findall(r"\]\((notebooks/exercises/\w+\.ipynb)\)", readme):
        assert (ROOT / link).exists(), link
    assert {p.name[:2] for p in EXERCISE_NOTEBOOKS} == set(per_notebook)
    n_mistakes = sum(len(ex.mistakes) for ex in checks.CATALOGUE.values())
    assert f"{len(checks.CATALOGUE)} exercises" in readme
    assert f"{n_mistakes} named mistakes" in readme


# ── what the checker does with code that misbehaves ───────────────────────────────────────────


def test_wrong_kinds_of_result_are_described_not_crashed_on():
    def softmax(x, axis=-1):  # returns the total too
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True), e.sum(axis=axis)

    result = checks.check(softmax)
    assert result.status == "wrong" and "got      result: a tuple of 2 values" in result.message

    def scaled_dot_product_attention(Q, K, V, mask=None):  # the output only
        return learners_attention(Q, K, V, mask)[0]

    result = checks.check(scaled_dot_product_attention)
    assert "expected result: a tuple of 2 (output, weights)" in result.message
    assert "got      result: one array of shape (3, 2)" in result.message


def test_an_endless_loop_is_stopped_and_reported(monkeypatch):
    monkeypatch.setattr("helpers.checks.core.LIMIT_SECONDS", 0.2)

    def softmax(x, axis=-1):
        while True:
            pass

    result = checks.check(softmax)
    assert result.status == "did not finish" and not result, result.message
    assert "did not finish: ran past the limit of 0.2 s and was stopped." in result.message


def test_the_error_points_at_the_learners_line_or_at_the_call():
    def softmax(x, axis=-1):
        return np.einsum("ij,jk->ik", x, x)  # raises inside NumPy for non-square x

    result = checks.check(softmax)
    assert result.status == "error"
    assert 'return np.einsum("ij,jk->ik", x, x)' in result.message  # not NumPy's own line

    def softmax(x):  # noqa: F811 (no axis parameter)
        return x

    result = checks.check(softmax)
    assert "at: the call itself: the checker calls softmax(x, axis=…)" in result.message


def test_the_same_values_is_said_only_when_the_values_are_the_same():
    def padding_mask(lengths, T):  # 1 = padding, as floats: the values of the boolean mask
        return (np.arange(T) >= np.asarray(lengths)[:, None]).astype(float)[:, None, None, :]

    result = checks.check(padding_mask)
    assert "got      result: dtype float64 (the same values)" in result.message

    def padding_mask(lengths, T):  # noqa: F811 (1 = keep, as ints: other values)
        return (np.arange(T) < np.asarray(lengths)[:, None]).astype(int)[:, None, None, :]

    result = checks.check(padding_mask)
    assert "(the same values)" not in result.message
    assert "got      result[0, 0, 0]: [1 1 0] (dtype int64)" in result.message


def test_a_difference_below_the_digits_shown_is_said():
    def softmax(x, axis=-1):
        return learners_softmax(x, axis) * (1 + 1e-5)

    result = checks.check(softmax)
    assert result.status == "wrong"
    assert re.search(r"\(they differ by up to \d\.\de-06, below the digits shown\)", result.message)


def test_grading_survives_exit_errors_and_imports(tmp_path, capsys):
    path = tmp_path / "answers.py"
    path.write_text("import sys\nfrom helpers.transformer import softmax\nsys.exit(0)\n")
    results = checks.grade(path, "1")  # "1" is notebook 01
    assert [r.status for r in results] == ["missing"] * len(
        [k for k in checks.CATALOGUE if k.startswith("01.")])
    assert "imports softmax from helpers.transformer instead of writing it" in results[0].message
    with pytest.raises(ValueError, match="no exercises for notebook '99'"):
        checks.grade(path, "99")
    (tmp_path / "broken.ipynb").write_text("{not json")
    capsys.readouterr()
    code = checks.main([str(tmp_path / "broken.ipynb"), str(path), "--notebook", "01"])
    out = capsys.readouterr().out  # what `python -m helpers.checks` prints: sys.exit(main())
    assert code == 1 and "broken.ipynb: cannot be graded: JSONDecodeError" in out
    assert f"answers.py: 0 of {len(results)} exercises passed" in out


def test_a_renamed_exercise_notebook_is_graded_by_its_cells(tmp_path):
    renamed = tmp_path / "bob.ipynb"
    renamed.write_text(json.dumps(solved(load(EXERCISE_NOTEBOOKS[0]))))
    results = checks.grade(renamed)
    assert [r.key for r in results] == [k for k in checks.CATALOGUE if k.startswith("01.")]
    assert all(results)


def test_a_wrong_result_names_the_learners_earlier_functions_that_fail():
    namespace = {"np": np}
    exec("def softmax(x, axis=-1):\n"  # NaN on a blocked row
         "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
         "    return e / e.sum(axis=axis, keepdims=True)\n"
         "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
         "    s = Q @ K.swapaxes(-1, -2) / Q.shape[-1]\n"
         "    s = s if mask is None else np.where(mask, -np.inf, s)\n"
         "    w = softmax(s)\n"
         "    return w @ V, w\n", namespace)
    result = checks.check(namespace["scaled_dot_product_attention"])
    assert result.status == "wrong"  # two mistakes at once: no catalogued one
    assert result.message.endswith("Note: this function calls your softmax (01.1), which does "
                                   "not pass yet: fix that first.")
    from helpers.transformer import softmax

    namespace["softmax"] = softmax  # with a right softmax, the one mistake is named, no note
    result = checks.check(namespace["scaled_dot_product_attention"])
    assert result.mistakes == ("attention-scaled-by-d_k",) and "Note:" not in result.message


def test_the_note_names_only_earlier_functions_this_one_can_call(tmp_path):
    namespace = {"np": np}
    exec("def softmax(x, axis=-1):\n"  # wrong
         "    return np.exp(x)\n"
         "def _weights(s):\n"  # the learner's own helper calls it
         "    return softmax(s)\n"
         "def through_a_helper(Q, K, V, mask=None):\n"
         "    w = _weights(Q @ K.swapaxes(-1, -2))\n"
         "    return w @ V, w\n"
         "def on_its_own(Q, K, V, mask=None):\n"  # writes its softmax inline: cannot call it
         "    e = np.exp(Q @ K.swapaxes(-1, -2))\n"
         "    w = e / e.sum(-1, keepdims=True)\n"
         "    return w @ V, w\n", namespace)
    assert "Note: this function calls your softmax (01.1)" in checks.check(
        namespace["through_a_helper"], "01.2").message
    result = checks.check(namespace["on_its_own"], "01.2")
    assert result.status == "wrong" and "Note:" not in result.message, result.message
    # 05.2 is given its norms: a wrong layer_norm is no reason to look there
    namespace = {"np": np}
    exec("def layer_norm(x, gamma, beta, eps=1e-5):\n"
         "    return x\n"
         "def post_ln_block(x, self_attn, feed_forward, norm1, norm2, mask=None):\n"
         "    y = norm1(x + self_attn(x, mask))\n"
         "    return norm2(feed_forward(y))\n", namespace)  # a residual forgotten, once
    result = checks.check(namespace["post_ln_block"])
    assert result.status == "wrong" and "layer_norm" not in result.message, result.message
    # grading reads the same from the file's source, without running it in the grader
    path = tmp_path / "05_answers.py"
    path.write_text("import numpy as np\n\n\n" + "".join(
        f"def layer_norm(x, gamma, beta, eps=1e-5):\n    return x\n\n\n"
        f"def post_ln_block(x, self_attn, feed_forward, norm1, norm2, mask=None):\n"
        f"    y = {call}(x + self_attn(x, mask))\n"
        f"    return norm2(feed_forward(y))\n" for call in ("norm1",)))
    results = checks.grade(path)
    assert [r.status for r in results] == ["wrong", "wrong", "missing"]  # 05.3 is not written
    assert "Note:" not in results[1].message, results[1].message
    path.write_text(path.read_text().replace("y = norm1(", "y = layer_norm(").replace(
        "(x + self_attn(x, mask))", "(x + self_attn(x, mask), 1.0, 0.0)"))
    assert checks.grade(path)[1].message.endswith(
        "Note: this function calls your layer_norm (05.1), which does not pass yet: fix that "
        "first.")


def test_an_unknown_mistake_says_which_cases_pass_and_shows_the_weights():
    """A made-up wrong attention, right without a batch axis and wrong with one: the message
    names the trait that tells the passing cases from the failing ones, lists them, and shows
    the weights of the failing case next to the expected ones."""
    def multi_head_attention(query, key, value, W_q, W_k, W_v, W_o, n_heads):
        def split(x):
            T, d = x.shape[-2:]
            heads = x.reshape(-1, T, n_heads, d // n_heads)  # (B or 1, T, h, d_k)
            heads = heads.transpose(2, 0, 1, 3)  # (h, B, T, d_k)
            return heads.reshape(*x.shape[:-2], n_heads, T, d // n_heads)  # h and B mixed up
        Q, K, V = split(query @ W_q), split(key @ W_k), split(value @ W_v)
        weights = learners_softmax(Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1]))
        heads = weights @ V
        merged = np.moveaxis(heads, -3, -2).reshape(*heads.shape[:-3], heads.shape[-2], -1)
        return merged @ W_o, weights

    result = checks.check(multi_head_attention)
    message = result.message
    assert result.status == "wrong" and result.mistakes == (), message
    assert "wrong on 2 of 4 cases, and not one of the" in message
    assert ("  The cases where query has 2 axes pass; those where it has 3 axes fail:\n"
            "    ✓ 1. W_q = W_k = 0, W_v = W_o = I, h = 2") in message, message
    assert "\n    ✗ 2. self-attention: a batch of 2, T = 5, d_model = 12, h = 4\n" in message
    assert "\n    ✓ 4. no batch axis, 4 queries, 5 keys" in message
    assert "\n  case: self-attention: a batch of 2" in message  # the first failing case
    lines = message.splitlines()
    expected = next(i for i, line in enumerate(lines) if line.startswith("  expected weights["))
    assert lines[expected + 1].startswith("  got      weights["), message  # side by side
    assert re.fullmatch(r"  expected weights\[\d, \d, \d\]: \[[-0-9. e]+\]", lines[expected])
    assert message.endswith("See 02 §3 · The layer in eight lines.")

    def scaled_dot_product_attention(Q, K, V, mask=None):  # the weights right, the output not
        out, weights = learners_attention(Q, K, V, mask)
        return out + 1, weights

    message = checks.check(scaled_dot_product_attention).message
    assert "  expected output[0]: " in message and "\n  weights: as expected on this case\n" in (
        message)
    assert "The case" not in message  # every case fails: nothing to tell apart


def test_the_trait_named_can_be_a_missing_argument_or_the_hand_case():
    from helpers.checks.core import _which_pass

    ln = checks.CATALOGUE["05.1"]  # only the last case gives eps
    assert _which_pass(ln, [True, True, True, False]) == (
        "The cases where eps is left at its default pass; the one where it is given fails.")
    block = checks.CATALOGUE["06.1"]  # the two toy cases are done by hand
    assert _which_pass(block, [True, True, False, False, False]) == (
        "The cases done by hand pass; the others fail.")
    assert _which_pass(block, [False, True, False, True, True]) == ""  # nothing tells them apart


def test_two_mistakes_the_cases_cannot_tell_apart_are_both_named():
    from helpers.checks import Case, Exercise, Mistake

    toy = Exercise(  # on positive inputs, |x| and x look the same: the checker must say so
        key="00.1", name="double", reference=lambda x: 2 * x, see="01 §1 · Queries, keys and values",
        cases=(Case("x = [1, 2]", (np.array([1.0, 2.0]),)),),
        mistakes=(Mistake("forgot-to-double", "x is returned as it is", "01 §1", lambda x: x),
                  Mistake("absolute-value", "|x| instead of 2x", "01 §2", np.abs)))
    result = run(toy, lambda x: x + 0.0)
    assert result.status == "ambiguous" and not result
    assert result.mistakes == ("forgot-to-double", "absolute-value")
    assert "these cases cannot tell them apart" in result.message
    assert "- x is returned as it is [forgot-to-double] (see 01 §1.)" in result.message


def test_an_empty_tuple_and_a_list_of_outputs_are_diagnosed():
    assert checks.check(lambda Q, K, V, mask=None: (), "01.2").status == "wrong"

    def scaled_dot_product_attention(Q, K, V, mask=None):  # a list, not a tuple: still passes
        return list(learners_attention(Q, K, V, mask))

    assert checks.check(scaled_dot_product_attention)


def test_an_inner_time_limit_gives_the_outer_one_back(monkeypatch):
    import time

    from helpers.checks.core import time_limit

    with pytest.raises(TimeoutError), time_limit(0.3):
        with time_limit(5):
            pass  # the inner limit ends at once; the outer one must still fire
        time.sleep(2)


def test_a_file_numbered_like_no_notebook_is_graded_by_its_functions(tmp_path):
    path = tmp_path / "99_homework.py"
    path.write_text("def lrate(step, d_model, warmup):\n    return 0\n")
    assert [r.key for r in checks.grade(path)] == [k for k in checks.CATALOGUE
                                                   if k.startswith("07.")]
