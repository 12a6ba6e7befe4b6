"""Fixtures of the real-browser suite: the session's workers (each one JupyterLab server and one
Chromium, see pool.py), a fresh browser context, notebook copy and kernel for every check.

Run it with ``python -m pytest -m e2e tests/e2e`` (see tests/e2e/README.md). Playwright is
imported only when a worker starts its browser, so the default test run, which deselects
``e2e``, does not need it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

from .driver import Report
from .lab import NOTEBOOKS, ROOT, fingerprint
from .pool import Check, Pool, WorkerError, default_workers

# The fixture notebooks are broken on purpose: never collect them (nbval would run them).
collect_ignore_glob = ["fixtures/*"]

ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")  # Debian's; never downloaded
REPORTS = pytest.StashKey[list]()
PLAN = pytest.StashKey[list]()


def pytest_collection_finish(session):
    """The checks the selected tests will ask for (each test module's ``planned_checks``), so
    that the workers can start on them at once."""
    plan = []
    for item in session.items:
        planner = getattr(getattr(item, "module", None), "planned_checks", None)
        if planner is not None:
            plan += planner(item)
    session.config.stash[PLAN] = plan


class Lab:
    """Gives each test the reports of the checks it asks for; keeps them for its artefacts."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.node = None

    def check(self, check: Check) -> Report:
        """The report of ``check`` (run by a worker, once per session for equal checks)."""
        try:
            report = self.pool.result(check)
        except WorkerError as exc:
            pytest.fail(str(exc))
        except KeyboardInterrupt:  # Ctrl+C or SIGTERM while waiting: the workers are stopped
            self.pool.interrupted = True
            raise
        self.node.stash[REPORTS].append(report)
        return report


INTERRUPTED = threading.Event()


def _interrupt(signum, frame):
    INTERRUPTED.set()
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def e2e_tmp():
    """The session's temporary folder (server root, Jupyter dirs, log); removed at the end.
    SIGTERM is turned into KeyboardInterrupt meanwhile, so that a stopped run (a CI timeout,
    ``kill``) still tears down: server, kernels and browser stopped, this folder removed."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    path = Path(tempfile.mkdtemp(prefix="tx-e2e-"))
    try:
        yield path
    finally:
        signal.signal(signal.SIGTERM, previous)
    shutil.rmtree(path, ignore_errors=True)
    assert not path.exists(), f"could not remove {path}"


@pytest.fixture(scope="session", autouse=True)
def no_leftovers():
    """After the session: notebooks/ unchanged, no process of ours left (killed by pid if so)."""
    before = fingerprint(NOTEBOOKS)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # artefacts describe the latest run only
    yield
    leftovers = []
    for proc in psutil.Process().children(recursive=True):
        try:
            leftovers.append(f"{proc.name()} (pid {proc.pid})")
            proc.kill()
        except psutil.Error:
            pass
    assert fingerprint(NOTEBOOKS) == before, "the browser suite wrote to notebooks/"
    assert not leftovers, f"processes left running (now killed): {', '.join(leftovers)}"


@pytest.fixture(scope="session")
def pool(request, e2e_tmp):
    """The session's workers, started on every planned check at once; after the session each
    one's browser and server must stop cleanly and its server log hold nothing unscanned."""
    plan = request.config.stash.get(PLAN, [])
    workers = max(1, min(default_workers(), len(set(plan)) or 1))
    pool = Pool(e2e_tmp, CHROMIUM, workers)
    pool.submit_all(plan)
    yield pool
    # Interrupted: kill the browsers and servers rather than wait for the checks they are in.
    problems = pool.close(abort=pool.interrupted or INTERRUPTED.is_set())
    assert not problems, "; ".join(problems)


@pytest.fixture
def lab(request, pool) -> Lab:
    """Check notebooks in JupyterLab; a failing test keeps the artefacts of its reports."""
    request.node.stash[REPORTS] = []
    helper = Lab(pool)
    helper.node = request.node
    return helper


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure keep a screenshot, the server log, console log and executed notebook."""
    outcome = yield
    rep = outcome.get_result()
    reports = item.stash.get(REPORTS, [])
    if rep.when != "call" or not rep.failed or not reports:
        return
    folder = ARTIFACTS / _slug(item.name)
    for i, report in enumerate(reports):
        target = folder if len(reports) == 1 else folder / f"{i + 1}-{_slug(report.notebook)}"
        target.mkdir(parents=True, exist_ok=True)
        for name, content in report.artefacts.items():
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            (target / name).write_bytes(data)
    rep.sections.append(("e2e artefacts", f"kept in {folder}"))
