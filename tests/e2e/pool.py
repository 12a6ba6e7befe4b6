"""The suite's checks, run ahead of the tests on several workers at once.

One notebook's check (open it, Run All, move every control, close) is mostly waiting: for the
page to load, the kernel to compute, a figure to settle. On 2 cores one check at a time leaves a
core idle most of the time, so the session runs ``E2E_WORKERS`` checks at once (default: 2, or 1
on a single core).

A :class:`Worker` is one JupyterLab server and one Chromium of its own, driven from its own
thread (Playwright's sync API belongs to the thread that started it), and checks one notebook at
a time exactly as a single-worker session would: its server's log holds only its own kernels'
lines, so every line is still attributed to the step of the one check that wrote it, and each
server's log is scanned without gaps (after its shutdown too). Nothing is shared between workers
but the queue.

At the start of the session every :class:`Check` that the selected tests will ask for is queued
(``planned_checks`` in the test modules say which, see conftest.py); the workers take them in
turn, and each test waits for the report of its own check. Equal checks run once and share their
report (one run of a fixture notebook serves all its test cases). A check no plan listed is
queued when a test asks for it. Each check runs once: a failure is never retried.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import psutil

from .driver import RUN_TIMEOUT, SETTLE_TIMEOUT, Report, check_notebook, log_problems
from .lab import NOTEBOOKS, LabServer, cleared_copy, repo_path

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    # Without these Chromium tries to reach the internet (and is refused).
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
JOIN_TIMEOUT = RUN_TIMEOUT + 300.0  # a worker finishing the check it is in, then its teardown


def default_workers() -> int:
    """``E2E_WORKERS`` if set, else 2 (1 on a single core): one check per core."""
    setting = os.environ.get("E2E_WORKERS", "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise ValueError(f"E2E_WORKERS must be a positive integer, not {setting!r}")
        return int(setting)
    return max(1, min(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class Check:
    """One check of one notebook, as a test asks for it; equal checks share one run.

    ``mutation`` names a copy with ``first_cells`` inserted at the top (mutations.py);
    ``prepare_page`` is called with the page before it loads; ``self_check``: break the explorers'
    callbacks once the notebook passed and move every control again (driver.py); ``texts``:
    (explorer title, text control, what to type) to type once the other controls were moved
    (texts.py)."""

    source: Path
    mutation: str | None = None
    first_cells: tuple[str, ...] = ()
    prepare_page: Callable | None = None
    settle_timeout: float = SETTLE_TIMEOUT
    run_timeout: float = RUN_TIMEOUT
    expect_problems: bool = False
    self_check: bool = False
    texts: tuple[tuple[str, str, str], ...] = ()

    @property
    def folder(self) -> str:
        """Where the server's copy goes: series, zh (the Chinese edition), mutated or fixtures."""
        return ("mutated" if self.mutation else
                "series" if Path(self.source).parent == NOTEBOOKS else
                "zh" if Path(self.source).parent == NOTEBOOKS / "zh" else "fixtures")

    @property
    def order(self) -> tuple:
        """The longest checks first, so that the session does not end with one worker on a long
        notebook while the others idle. A notebook's size (its committed outputs) stands in
        for how long it computes and renders (07, which trains, is by far the largest); the
        run with the self-check before the mutated run of the same notebook."""
        try:
            size = Path(self.source).stat().st_size
        except OSError:
            size = 0
        return (-size, self.mutation is not None)

    def run(self, browser, server: LabServer) -> Report:
        """Check a fresh, output-free copy of the notebook on ``server`` (once: never retried)."""
        name = (Path(self.source).name if not self.mutation
                else f"{Path(self.source).stem}.{self.mutation}.ipynb")
        cleared_copy(self.source, server.root_dir / self.folder / name, list(self.first_cells))
        label = repo_path(self.source) + (f" (mutation: {self.mutation})" if self.mutation else "")
        return check_notebook(browser, server, f"{self.folder}/{name}", label=label,
                              prepare_page=self.prepare_page, settle_timeout=self.settle_timeout,
                              run_timeout=self.run_timeout,
                              expect_problems=self.expect_problems or bool(self.mutation),
                              self_check=self.self_check, texts=self.texts)


class WorkerError(Exception):
    """A worker could not start (no Playwright, no Chromium, no server): no check can run."""


class Worker:
    """A thread with its own JupyterLab server and Chromium that runs the queued checks.

    Its temporary folder ``base`` holds the server's root, its Jupyter folders and log, and the
    browser's ``HOME``, ``TMPDIR`` and ``XDG_*`` folders. After the queue's end it stops the
    browser and the server; ``teardown_problems`` then says what had to be killed and which
    server-log lines no check scanned (the end of the last check, the shutdown)."""

    def __init__(self, index: int, base: Path, chromium: str, jobs: queue.Queue,
                 environ: dict[str, str], launch_lock: threading.Lock):
        self.index, self.base, self.chromium = index, base, chromium
        self.jobs, self.environ, self.launch_lock = jobs, environ, launch_lock
        self.server: LabServer | None = None
        self.browser_procs: list[psutil.Process] = []  # Chromium's own processes, by id
        self.teardown_problems: list[str] = []
        self.thread = threading.Thread(target=self._main, name=f"e2e-worker-{index}", daemon=True)

    def start(self) -> Worker:
        self.thread.start()
        return self

    # -- the thread ----------------------------------------------------------------------------
    def _main(self) -> None:
        playwright = browser = None
        error: WorkerError | None = None
        try:
            playwright, browser = self._start()
        except Exception as exc:  # noqa: BLE001 - every check this worker takes says why
            error = exc if isinstance(exc, WorkerError) else WorkerError(
                f"worker {self.index} could not start: {type(exc).__name__}: {exc}")
        try:
            while True:
                job = self.jobs.get()
                if job is None:  # the end of the queue
                    break
                check, future = job
                if not future.set_running_or_notify_cancel():
                    continue
                if error is not None:
                    future.set_exception(error)
                    continue
                try:
                    future.set_result(check.run(browser, self.server))
                except BaseException as exc:  # noqa: BLE001 - re-raised in the test
                    future.set_exception(exc)
        finally:
            self._stop(playwright, browser)

    def _start(self):
        (self.base / "root").mkdir(parents=True)
        (self.base / "server").mkdir()
        self.server = LabServer(self.base / "root", self.base / "server", self.environ).start()
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as exc:
            raise WorkerError("playwright is not installed: "
                              "pip install -r requirements-e2e.txt") from exc
        if not os.access(self.chromium, os.X_OK):
            raise WorkerError(f"no Chromium at {self.chromium}: "
                              "apt-get install -y chromium fonts-dejavu-core")
        # Chromium writes crash reports, caches and $HOME/.pki; Playwright's driver makes the
        # browser profile in $TMPDIR: all of it goes into this worker's folder.
        home, tmp = self.base / "home", self.base / "tmp"
        home.mkdir()
        tmp.mkdir()
        env = {**self.environ, "HOME": str(home), "TMPDIR": str(tmp),
               "XDG_CONFIG_HOME": str(self.base / "xdg-config"),
               "XDG_CACHE_HOME": str(self.base / "xdg-cache")}
        # One worker at a time: TMPDIR is changed for the driver, and the browser's processes
        # are told apart from another worker's by which ones are new.
        with self.launch_lock:
            saved_tmpdir = os.environ.get("TMPDIR")
            os.environ["TMPDIR"] = str(tmp)  # inherited by the driver, which creates the profile
            try:
                playwright = sync_playwright().start()
            finally:
                if saved_tmpdir is None:
                    os.environ.pop("TMPDIR")
                else:
                    os.environ["TMPDIR"] = saved_tmpdir
            before = {p.pid for p in psutil.Process().children(recursive=True)}
            try:
                browser = playwright.chromium.launch(executable_path=self.chromium,
                                                     headless=True, args=CHROMIUM_ARGS, env=env)
            except BaseException:
                playwright.stop()
                raise
            self.browser_procs = [p for p in psutil.Process().children(recursive=True)
                                  if p.pid not in before and "chrom" in p.name()]
        return playwright, browser

    def _stop(self, playwright, browser) -> None:
        try:
            if browser is not None:
                browser.close()
        except Exception as exc:  # noqa: BLE001 - aborted: the browser was killed
            self.teardown_problems.append(f"closing the browser: {type(exc).__name__}: {exc}")
        finally:
            if playwright is not None:
                playwright.stop()
            _, alive = psutil.wait_procs(self.browser_procs, timeout=10)
            for proc in alive:
                proc.kill()
            if alive:
                self.teardown_problems.append(
                    f"Chromium outlived browser.close(): pids {[p.pid for p in alive]}")
        if self.server is not None:
            killed = self.server.stop()
            if killed:
                self.teardown_problems.append(f"had to kill after shutdown: {', '.join(killed)}")
            # What no check scanned: the end of the last one, the server's and its kernels'
            # shutdown.
            rest = log_problems(self.server.log_text(self.server.scanned))
            if rest:
                self.teardown_problems.append("the server log after the last check: " + "; ".join(
                    f"{first} ... {last}" for first, last in rest))

    def kill(self) -> None:
        """After an interrupt: stop the browser and the server by pid, so that the check this
        worker is in fails at once instead of waiting out its timeouts."""
        for proc in self.browser_procs:
            try:
                proc.kill()
            except psutil.Error:
                pass
        server = self.server
        if server is not None and server.proc is not None:
            try:
                server.proc.terminate()
            except OSError:
                pass


class Pool:
    """Workers taking :class:`Check` s from one queue; :meth:`result` waits for one's report."""

    def __init__(self, base: Path, chromium: str, workers: int):
        self.jobs: queue.Queue = queue.Queue()
        self.futures: dict[Check, Future] = {}
        self.lock = threading.Lock()
        self.interrupted = False  # set by a test interrupted while it waited (conftest.py)
        environ = dict(os.environ)  # before any worker changes TMPDIR for its browser
        launch_lock = threading.Lock()
        self.workers = [Worker(i + 1, base / f"worker-{i + 1}", chromium, self.jobs, environ,
                               launch_lock).start() for i in range(workers)]

    def submit(self, check: Check) -> Future:
        with self.lock:
            if check not in self.futures:
                self.futures[check] = Future()
                self.jobs.put((check, self.futures[check]))
            return self.futures[check]

    def submit_all(self, checks: list[Check]) -> None:
        for check in sorted(dict.fromkeys(checks), key=lambda c: c.order):  # stable
            self.submit(check)

    def result(self, check: Check) -> Report:
        return self.submit(check).result()

    def close(self, abort: bool = False) -> list[str]:
        """Cancel what no worker took yet, let each worker finish its check (or, ``abort``, kill
        its browser and server), wait for their teardown; return their teardown problems."""
        with self.lock:
            for future in self.futures.values():
                future.cancel()  # only those not running yet
        for _ in self.workers:
            self.jobs.put(None)
        if abort:
            for worker in self.workers:
                worker.kill()
        problems = []
        for worker in self.workers:
            worker.thread.join(60 if abort else JOIN_TIMEOUT)
            if worker.thread.is_alive():
                problems.append(f"worker {worker.index} did not stop")
                worker.kill()
            problems += [f"worker {worker.index}: {p}" for p in worker.teardown_problems]
        return problems
