"""Root pytest configuration: shared by the unit tests and by nbval's notebook runs."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Notebook outputs must not depend on the caller's environment: an inherited MPLBACKEND=Agg would
# turn inline figures off, and the kernelspec must be this environment's (JUPYTER_PREFER_ENV_PATH).
os.environ.pop("MPLBACKEND", None)
os.environ.setdefault("JUPYTER_PREFER_ENV_PATH", "1")

# The Chinese lesson notebooks share the English ones' code and outputs byte for byte
# (tests/test_zh.py proves it), so nbval does not run them again; the Chinese exercise notebooks,
# whose checks answer in Chinese, it runs.
collect_ignore_glob = ["notebooks/zh/[0-9][0-9]_*.ipynb"]


def pytest_configure(config):
    # nbval opens the sanitize file relative to the current directory; make it independent of
    # where pytest was started from (e.g. `cd notebooks && pytest`).
    path = getattr(config.option, "nbval_sanitize_with", None)
    if path and not os.path.isabs(path):
        config.option.nbval_sanitize_with = str(ROOT / path)


# ── how pytest-xdist shares the tests between its workers (`make test`, `pytest -n N`) ──────────
# A notebook's cells run in order in one kernel, and the tests of a file with a module-scoped
# fixture should compute it once: each such file goes to one worker whole. Every other test is a
# unit of its own. xdist hands out the files first, the largest first, then the single tests, so
# the two workers end together instead of one waiting while the other runs a long file.
# xdist's own `--dist loadgroup` would do this from `xdist_group` marks, but it passes the group by
# rewriting a node id field that pytest 9 no longer reads (pytest-xdist issue #1386): the marks
# are silently ignored. So `--dist loadgroup` (the Makefile's), and `--dist load` (the default of
# `pytest -n N`, which would scatter a notebook's cells over the workers), mean this scheduler,
# which decides from the node id alone.
def shared_fixture_files() -> set[str]:
    """The test files with a module-scoped fixture, as node ids name them."""
    return {f"tests/{path.name}" for path in (ROOT / "tests").glob("test_*.py")
            if 'scope="module"' in path.read_text(encoding="utf-8")}


def work_unit(nodeid: str, whole_files: set[str]) -> str:
    """The unit a test is handed out in: its notebook, its file if in `whole_files`, or itself."""
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") or path in whole_files else nodeid


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) there is no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    whole_files = shared_fixture_files()

    class WholeFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid, whole_files)

    return WholeFiles(config, log)
