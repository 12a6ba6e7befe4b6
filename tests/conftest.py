"""Test-suite configuration, and the fixtures every test file shares."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

# Notebooks under tests/ are fixtures of the browser suite (some broken on purpose), never part of
# the nbval run, which covers notebooks/ only.
collect_ignore_glob = ["**/*.ipynb", "*.ipynb"]

# The real-browser suite (tests/e2e, marker `e2e`) needs Playwright, which the
# default test environment does not install; without it, do not even collect those files.
if importlib.util.find_spec("playwright") is None:
    collect_ignore_glob.append("e2e/*")


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed for every test: tests are deterministic and
    independent of the order they run in."""
    return np.random.default_rng(2017)


# ── how `make test` shares the work between its workers (pytest-xdist) ─────────────────────────
# A notebook's cells run in order in one kernel, and the tests of a file with a module-scoped
# fixture should compute it once: each such file goes to one worker whole. Every other test is a
# unit of its own. xdist hands out the files first, the largest first, then the single tests, so
# the two workers end together instead of one waiting while the other runs a long file.
# xdist's own `--dist loadgroup` would do this from `xdist_group` marks, but it passes the group by
# rewriting a node id field that pytest 9 no longer reads (pytest-xdist issue #1386): the marks
# are silently ignored. So `--dist loadgroup` here means this scheduler, which decides from the
# node id alone.
@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) there is no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    here = Path(__file__).parent
    shared = {f"tests/{path.name}" for path in here.glob("test_*.py")
              if 'scope="module"' in path.read_text(encoding="utf-8")}

    class WholeFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") or path in shared else nodeid

    return WholeFiles(config, log)
