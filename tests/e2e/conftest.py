"""Fixtures of the real-browser suite: one JupyterLab server and one Chromium for the session,
a fresh browser context, notebook copy and kernel for every notebook checked.

Run it with ``python -m pytest -m e2e tests/e2e`` (see tests/e2e/README.md). Playwright is
imported only when the browser starts, so the default test run, which deselects ``e2e``, does
not need it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import psutil
import pytest

from .driver import RUN_TIMEOUT, SETTLE_TIMEOUT, Report, check_notebook, log_problems
from .lab import NOTEBOOKS, ROOT, LabServer, cleared_copy, fingerprint, repo_path

# The fixture notebooks are broken on purpose: never collect them (nbval would run them).
collect_ignore_glob = ["fixtures/*"]

ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")  # Debian's; never downloaded
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    # Without these Chromium tries to reach the internet (and is refused).
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
REPORTS = pytest.StashKey[list]()


class Lab:
    """Checks notebooks on the session's server and browser; keeps each report for the test."""

    def __init__(self, server: LabServer, browser, cache: dict):
        self.server = server
        self.browser = browser
        self.cache = cache  # reports shared by several tests (one run of a fixture notebook)
        self.node = None

    def check(self, source: Path, *, mutation: str | None = None, first_cells=(),
              prepare_page=None, settle_timeout: float = SETTLE_TIMEOUT,
              run_timeout: float = RUN_TIMEOUT, cached: bool = False,
              expect_problems: bool = False, self_check: bool = False) -> Report:
        """Check a fresh, output-free copy of ``source``; ``mutation`` names the copy.
        ``cached``: reuse this session's report of the same check (one run, several tests)."""
        key = (str(source), mutation, bool(prepare_page))
        if cached and key in self.cache:
            report = self.cache[key]
        else:
            folder = "mutated" if mutation else "series" if source.parent == NOTEBOOKS else "fixtures"
            name = source.name if not mutation else f"{source.stem}.{mutation}.ipynb"
            target = self.server.root_dir / folder / name
            cleared_copy(source, target, list(first_cells))
            label = repo_path(source) + (f" (mutation: {mutation})" if mutation else "")
            # Checked once: a stalled Run All or any other flake fails the test, never retried.
            report = check_notebook(self.browser, self.server, f"{folder}/{name}", label=label,
                                    prepare_page=prepare_page, settle_timeout=settle_timeout,
                                    run_timeout=run_timeout,
                                    expect_problems=expect_problems or bool(mutation),
                                    self_check=self_check)
            if cached:
                self.cache[key] = report
        self.node.stash[REPORTS].append(report)
        return report


def _interrupt(signum, frame):
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
def lab_server(e2e_tmp):
    (e2e_tmp / "root").mkdir()
    (e2e_tmp / "server").mkdir()
    server = LabServer(e2e_tmp / "root", e2e_tmp / "server").start()
    yield server
    killed = server.stop()
    assert not killed, f"had to kill after shutdown: {', '.join(killed)}"
    # What no check scanned: the end of the last one, the server's and its kernels' shutdown.
    rest = log_problems(server.log_text(server.scanned))
    assert not rest, "the server log after the last check: " + "; ".join(
        f"{first} ... {last}" for first, last in rest)


@pytest.fixture(scope="session")
def browser(e2e_tmp):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -r requirements-e2e.txt")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium fonts-dejavu-core")
    # Chromium writes crash reports, caches and $HOME/.pki; Playwright's driver makes the
    # browser profile in $TMPDIR: all of it goes into the temporary folder.
    home, tmp = e2e_tmp / "home", e2e_tmp / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp),
           "XDG_CONFIG_HOME": str(e2e_tmp / "xdg-config"),
           "XDG_CACHE_HOME": str(e2e_tmp / "xdg-cache")}
    saved_tmpdir = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)  # inherited by the driver, which creates the profile
    try:
        playwright = sync_playwright().start()
    finally:
        if saved_tmpdir is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved_tmpdir
    chromium: list[psutil.Process] = []
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS, env=env)
        chromium = [p for p in psutil.Process().children(recursive=True)
                    if "chrom" in p.name()]  # the browser's own processes, by id
        yield browser
        browser.close()
    finally:
        playwright.stop()
        _, alive = psutil.wait_procs(chromium, timeout=10)
        for proc in alive:
            proc.kill()
    assert not alive, f"Chromium outlived browser.close(): pids {[p.pid for p in alive]}"


@pytest.fixture(scope="session")
def _report_cache():
    return {}


@pytest.fixture
def lab(request, lab_server, browser, _report_cache) -> Lab:
    """Check notebooks in JupyterLab; a failing test keeps the artefacts of its reports."""
    request.node.stash[REPORTS] = []
    helper = Lab(lab_server, browser, _report_cache)
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
