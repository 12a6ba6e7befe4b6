"""The package as pip installs it, and what importing it gives.

A wheel of the project, installed (not editable) into a fresh virtual environment, holds every
module of helpers/, and `python -m helpers.checks` grades exercises there. The fresh environment
borrows NumPy, Matplotlib and ipywidgets from this one through a .pth file naming this one's
site-packages as a plain path (the .pth files inside it, this project's editable install among
them, are not processed), so the test builds and installs offline, in a few seconds. Every
command runs from a temporary directory, so the source tree is never on sys.path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from tests.exercises import EXERCISE_NOTEBOOKS, load, parts, solution_code

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for p in (ROOT / "helpers").rglob("*.py") if p.name != "__main__.py")
ENV = {**{k: v for k, v in os.environ.items()
          if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")},
       "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1"}


def run(cmd, cwd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=ENV, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, site-packages, a working directory) of a fresh environment holding the wheel."""
    version = metadata.version("setuptools")
    assert int(version.split(".")[0]) >= 77, (
        f"setuptools {version}: the wheel is built offline with pyproject.toml's build backend, "
        "setuptools>=77 (pip install -r requirements-test.txt)")
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"  # what the build reads, copied: the build writes beside it
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "helpers", source / "helpers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # the wheel from pyproject.toml's build backend, called as pip would call it (PEP 517's
    # build_wheel) without pip's own start-up, which took longer than the build
    backend = re.search(r'^build-backend = "([\w.]+)"$', (ROOT / "pyproject.toml").read_text(),
                        re.MULTILINE)[1]  # (no tomllib in Python 3.10)
    built = run([sys.executable, "-c", f"import sys, {backend} as backend; "
                 "backend.build_wheel(sys.argv[1])", work / "dist"], cwd=source)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("*.whl")
    made = run([sys.executable, "-m", "venv", "--without-pip", work / "venv"], cwd=work)
    assert made.returncode == 0, made.stderr
    python = work / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    done = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                "--no-index", "-q", wheel], cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=work).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "borrowed_packages.pth").write_text("".join(f"{p}\n" for p in ours))
    cwd = work / "elsewhere"
    cwd.mkdir()
    return python, site, cwd


def test_the_wheel_holds_every_helpers_module_and_each_imports(installed):
    python, site, cwd = installed
    assert (site / "helpers" / "checks" / "__init__.py").exists()
    assert (site / "helpers" / "zh.json").read_bytes() == (ROOT / "helpers" / "zh.json").read_bytes()
    assert {p.relative_to(site).as_posix() for p in (site / "helpers").rglob("*.py")} == {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "helpers").rglob("*.py")}
    code = ("import importlib, json, sys\n"
            "print(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))")
    imported = run([python, "-c", code, *MODULES], cwd=cwd)
    assert imported.returncode == 0, imported.stderr
    files = json.loads(imported.stdout)
    assert set(files) == set(MODULES) and "helpers" in files
    outside = {n: f for n, f in files.items() if not Path(f).is_relative_to(site)}
    assert not outside, f"imported from outside the fresh environment: {outside}"


def test_the_installed_checker_grades_an_unsolved_exercise_notebook(installed):
    python, _, cwd = installed
    notebook = shutil.copy(EXERCISE_NOTEBOOKS[0], cwd)  # 01: unsolved, as committed
    graded = run([python, "-m", "helpers.checks", Path(notebook).name], cwd=cwd)
    assert graded.returncode == 1, graded.stdout + graded.stderr
    assert graded.stdout.count("not implemented") == len(parts(load(EXERCISE_NOTEBOOKS[0]))), (
        graded.stdout)


def test_the_installed_checker_passes_a_solved_file(installed):
    python, _, cwd = installed
    solutions = [solution_code(cells["solution"])
                 for cells in parts(load(EXERCISE_NOTEBOOKS[0])).values()]
    (cwd / "answers.py").write_text("import numpy as np\n\n\n" + "\n\n\n".join(solutions) + "\n")
    graded = run([python, "-m", "helpers.checks", "--notebook", "01", "answers.py"], cwd=cwd)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "passed" in graded.stdout and "not implemented" not in graded.stdout, graded.stdout


def test_installed_without_data_a_loader_says_where_data_is(installed):
    python, _, cwd = installed
    code = "from helpers.data import load_shakespeare\nload_shakespeare()"
    loaded = run([python, "-c", code], cwd=cwd)
    assert loaded.returncode == 1
    assert "FileNotFoundError" in loaded.stderr
    assert "data/ is not installed with the package" in loaded.stderr
    assert "run from a clone of the repository" in loaded.stderr


BACKWARD = """
import sys
import numpy as np
from helpers.transformer import LayerNorm

norm = LayerNorm(8)
x = np.random.default_rng(0).standard_normal((2, 3, 8))
y = norm.forward(x)
d_x, grads = norm.backward(np.ones_like(y))
assert d_x.shape == x.shape and list(grads) == ["gamma", "beta"], (d_x.shape, list(grads))
np.testing.assert_allclose(grads["beta"], np.full(8, 6.0))
np.testing.assert_allclose(d_x, 0, atol=1e-12)  # d_out = 1 everywhere: x's mean absorbs it

from helpers import transformer
from helpers.module import Module

classes = [c for c in vars(transformer).values()
           if isinstance(c, type) and issubclass(c, Module) and c is not Module]
missing = [c.__name__ for c in classes if c.backward is Module.backward]
assert not missing, missing
print(len(classes), "classes with a backward")
"""


@pytest.mark.parametrize("where", ["this environment", "the installed wheel"])
def test_backward_works_without_importing_helpers_training(request, where, tmp_path):
    python, cwd = sys.executable, tmp_path
    if where == "the installed wheel":
        python, _, cwd = request.getfixturevalue("installed")
    done = run([python, "-c", BACKWARD], cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "classes with a backward" in done.stdout
