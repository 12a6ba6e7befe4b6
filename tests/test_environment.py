"""The set-up: pins agree between pip and conda, the environment is the pinned one, the kernel
is this environment's, and the README's two commands are the ones CI and the Makefile run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)\s*(?:;\s*(.+))?$")


def marker_holds(marker: str | None, version: tuple[int, int]) -> bool:
    """Evaluate the only markers we use: python_version <op> "X.Y"."""
    if not marker:
        return True
    m = re.fullmatch(r'python_version\s*(>=|<|<=|>|==)\s*"(\d+)\.(\d+)"', marker.strip())
    assert m, f"unsupported marker {marker!r}"
    other = (int(m.group(2)), int(m.group(3)))
    return {">=": version >= other, "<": version < other, "<=": version <= other,
            ">": version > other, "==": version == other}[m.group(1)]


def pip_pins(path: Path, version: tuple[int, int]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            pins.update(pip_pins(path.parent / line[3:].strip(), version))
            continue
        if line.startswith("--extra-index-url "):  # where a pin is published, not a pin
            continue
        m = PIN.match(line)
        assert m, f"{path.name}: {raw!r} is not pinned with =="
        if marker_holds(m.group(3), version):
            pins[m.group(1).lower()] = m.group(2)
    return pins


def conda_pins(path: Path) -> tuple[str, dict[str, str]]:
    pins, python = {}, ""
    text = path.read_text(encoding="utf-8")
    for raw in text.split("\ndependencies:", 1)[1].splitlines():
        pip = re.match(r"^      - ([A-Za-z0-9_.\-]+)==([^\s#]+)\s*$", raw)  # under "pip:"
        if pip:
            pins[pip.group(1).lower()] = pip.group(2)
            continue
        m = re.match(r"^  - ([A-Za-z0-9_.\-]+)(?:=([^\s#]+))?\s*$", raw)
        if not m:
            continue
        name, version = m.group(1).lower(), m.group(2)
        if name == "python":
            python = version
        elif name != "pip":
            assert version, f"environment.yml: {name} is not pinned"
            pins[name] = version
    return python, pins


def test_pip_and_conda_name_the_same_packages_at_the_same_versions():
    python, conda = conda_pins(ROOT / "environment.yml")
    major, minor = (int(x) for x in python.split(".")[:2])
    pip = pip_pins(ROOT / "requirements-test.txt", (major, minor))
    assert pip == conda, f"requirements vs environment.yml differ:\n pip:   {pip}\n conda: {conda}"


def test_runtime_and_test_packages_are_all_pinned():
    pins = pip_pins(ROOT / "requirements-test.txt", sys.version_info[:2])
    for name in ("numpy", "matplotlib", "ipywidgets", "jupyterlab", "ipykernel", "pytest", "nbval"):
        assert name in pins, f"{name} is not pinned"


def test_drift_check_can_fail(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy==1.0\n")
    (tmp_path / "requirements-test.txt").write_text("-r requirements.txt\npytest==9.2.0\n")
    (tmp_path / "environment.yml").write_text("name: x\ndependencies:\n  - python=3.11\n  - numpy=2.0\n"
                                              "  - pytest=9.2.0\n")
    _, conda = conda_pins(tmp_path / "environment.yml")
    assert pip_pins(tmp_path / "requirements-test.txt", (3, 11)) != conda


def test_project_license_is_an_spdx_string():
    """setuptools deprecates `license = {text = ...}` (builds using it stop being supported after
    2027-02-18); the SPDX string form keeps `pip install -e .` working."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "MIT"
    assert any(req.startswith("setuptools>=") and int(req.split(">=")[1].split(".")[0]) >= 77
               for req in pyproject["build-system"]["requires"])  # the first to read SPDX


def test_installed_versions_are_the_pinned_ones():
    pins = pip_pins(ROOT / "requirements-test.txt", sys.version_info[:2])
    wrong = {n: (v, metadata.version(n)) for n, v in pins.items() if metadata.version(n) != v}
    assert not wrong, f"installed versions differ from the pins (pinned, installed): {wrong}"


def test_ipywidgets_8_with_its_lab_extension():
    assert metadata.version("ipywidgets").startswith("8.")
    assert metadata.version("jupyterlab_widgets").startswith("3."), "lab extension for widgets 8"


def test_python3_kernel_runs_in_this_environment(monkeypatch):
    from jupyter_client.manager import KernelManager

    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")
    cmd = KernelManager(kernel_name="python3").format_kernel_cmd()
    assert Path(cmd[0]).resolve() == Path(sys.executable).resolve(), cmd


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", section, re.S)
    assert block, "README quick start has no code block"
    return [ln.strip() for ln in block.group(1).splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def test_readme_quick_start_is_two_commands_that_ci_and_make_run():
    commands = quick_start_commands()
    assert commands == ["make lab", "make test"], commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^\s*(?:\w+=\S+\s+)*make test\b", ci, re.M), ".ci/run must call the README's test command"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_rerunning_set_up_does_not_reinstall():
    venv = ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve():
        pytest.skip("tests are not running in the Makefile's .venv (conda route?)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "pip install" not in dry.stdout, f"make test would reinstall:\n{dry.stdout}"


def test_browser_suite_is_pinned_wired_into_ci_and_documented():
    pins = pip_pins(ROOT / "requirements-e2e.txt", sys.version_info[:2])  # asserts every ==
    assert {"playwright", "psutil", "pillow"} <= set(pins)
    assert pins["jupyterlab"] == pip_pins(ROOT / "requirements.txt", sys.version_info[:2])[
        "jupyterlab"], "the browser suite must test the JupyterLab the series pins"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in ci.splitlines() if not ln.lstrip().startswith("#")]
    test_at = next(i for i, ln in enumerate(lines) if re.search(r"\bmake test\b", ln))
    apt_at = next(i for i, ln in enumerate(lines) if "apt-get install" in ln and "chromium" in ln)
    e2e_at = next(i for i, ln in enumerate(lines) if re.search(r"\bmake e2e\b", ln))
    assert test_at < e2e_at and apt_at < e2e_at, "CI: make test, then chromium, then make e2e"
    assert "playwright install" not in ci  # never download a browser
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^e2e:", makefile, re.M) and "requirements-e2e.txt" in makefile
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make e2e" in readme and "apt-get install -y chromium" in readme


def test_pytorch_is_an_optional_extra_of_the_benchmarks_only():
    bench = pip_pins(ROOT / "requirements-bench.txt", sys.version_info[:2])  # asserts every ==
    assert set(bench) == {"torch"}
    for name in ("requirements.txt", "requirements-test.txt", "requirements-e2e.txt",
                 "environment.yml", "pyproject.toml"):
        assert "torch" not in (ROOT / name).read_text(encoding="utf-8").lower(), name
    imports = re.compile(r"^\s*(?:import|from)\s+torch\b", re.M)
    sources = [p for p in (ROOT / "helpers").rglob("*.py")]
    assert sources and not [p for p in sources if imports.search(p.read_text(encoding="utf-8"))]
    for nb in (ROOT / "notebooks").rglob("*.ipynb"):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert not imports.search(code), f"{nb.name} imports PyTorch"


def test_the_pytorch_comparison_says_how_to_install_pytorch(tmp_path):
    fake = tmp_path / "torch"  # a torch package that cannot be imported: as if not installed
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_reverse.py"),
                           "--vs-torch"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "pip install -r requirements-bench.txt" in done.stdout


def test_the_pytorch_model_of_the_benchmark_has_our_parameter_count():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import train_reverse
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from helpers.reversal import REVERSE_CONFIG
    from helpers.transformer import transformer_parameter_count

    theirs = train_reverse.torch_reverse_model(torch, REVERSE_CONFIG)
    c = REVERSE_CONFIG
    ours = transformer_parameter_count(c.d_model, c.n_heads, c.d_ff, c.n_layers, c.src_vocab,
                                       c.tgt_vocab)
    assert sum(p.numel() for p in theirs.parameters()) == ours == 60_653


def test_workers_get_whole_notebooks_whole_fixture_files_and_single_tests():
    """conftest.py's scheduler: a notebook's cells share one kernel and a module fixture is
    computed once, so each goes to one worker whole; any other test is a unit of its own."""
    from conftest import shared_fixture_files, work_unit

    whole = shared_fixture_files()
    assert {"tests/test_grader.py", "tests/test_translation.py", "tests/test_widgets.py"} <= whole
    assert "tests/test_masks.py" not in whole  # no module-scoped fixture
    cells = [f"notebooks/07_training.ipynb::Cell {k}" for k in (0, 1, 88)]
    assert {work_unit(c, whole) for c in cells} == {"notebooks/07_training.ipynb"}
    grader = ["tests/test_grader.py::test_a", "tests/test_grader.py::test_b[x]"]
    assert {work_unit(t, whole) for t in grader} == {"tests/test_grader.py"}
    single = ["tests/test_masks.py::test_a", "tests/test_masks.py::test_b[1]"]
    assert [work_unit(t, whole) for t in single] == single
