"""A JupyterLab server for the browser tests (isolated, on 127.0.0.1, stopped by its own id),
and the notebooks it serves: temporary copies, never the files in notebooks/.

:class:`LabServer` starts ``python -m jupyterlab`` (the interpreter running pytest, so the kernel
is this environment's ``python3``) on a free port with a random token, over a temporary root
directory. Every Jupyter/IPython directory points into a temporary folder, so nothing from the
user's own set-up (kernelspecs, settings, workspaces, extensions' state) leaks in, and nothing is
written outside that folder. The server's stdout and stderr, which kernels inherit, go to one log
file that the checks scan for ``[E `` and ``Traceback`` lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SERIES_GLOB = "*.ipynb"  # every notebook (tests/test_hygiene.py checks their names)
CHINESE_IN_THE_BROWSER = ("01_scaled_dot_product_attention.ipynb", "04_masks.ipynb")

START_TIMEOUT = 120.0  # seconds for /api/status to answer; 2 to 3 s on an idle 2-core machine
STOP_TIMEOUT = 30.0

# JupyterLab user settings for a quiet, deterministic page (see tests/e2e/README.md).
LAB_SETTINGS = {
    # Never write the notebook under test (it is a temp copy, but outputs must not be saved).
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # No news toast, no update check: both would reach the internet.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # Attach every cell to the DOM, so every widget view renders and can be inspected.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # The extension manager would query PyPI.
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}


def series_notebooks() -> list[Path]:
    """Every notebook of the series, and two of its Chinese edition (notebooks/zh/: their code is
    the English, tests/test_zh.py; here their explorers run in Chinese); a new one gets its
    browser test automatically."""
    found = sorted(NOTEBOOKS.glob(SERIES_GLOB))
    if not found:
        raise RuntimeError(f"no notebook in {NOTEBOOKS}")
    return found + [NOTEBOOKS / "zh" / name for name in CHINESE_IN_THE_BROWSER]


def repo_path(path: Path) -> str:
    """How messages name a notebook: its path in the repository."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def cleared_copy(source: Path, target: Path, first_cells: list[str] = ()) -> None:
    """Copy a notebook without outputs and execution counts (so "every cell ran" is observable),
    optionally with code cells inserted at the top (the mutation tests)."""
    book = json.loads(Path(source).read_text(encoding="utf-8"))
    for cell in book["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    extra = [{"cell_type": "code", "execution_count": None, "id": f"e2e-mutation-{i}",
              "metadata": {}, "outputs": [], "source": code} for i, code in enumerate(first_cells)]
    book["cells"] = extra + book["cells"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(book, indent=1), encoding="utf-8")


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """(SHA-256, mtime in ns) of every file under ``folder``: proof that nothing wrote there."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                         p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent() -> list[str]:
    """A command prefix that makes the server get SIGTERM when pytest dies (util-linux
    ``setpriv``, on every Debian), so even a killed test run leaves no server behind; the
    server then shuts its kernels down. Empty where ``setpriv`` is missing."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM"] if setpriv else []


def isolated_env(base: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment (or ``environ``), with every Jupyter/IPython directory under
    ``base``."""
    env = dict(os.environ if environ is None else environ)
    env.pop("MPLBACKEND", None)  # an inherited Agg backend would turn inline plots off
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    env["JUPYTER_PREFER_ENV_PATH"] = "1"  # this environment's kernelspec before any user one
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(base / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"  # the machine has 2 cores: the browser needs one
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # no "frozen modules" debugger warning
    return env


class LabServer:
    """One JupyterLab server over ``root_dir``; use as a context manager or call start/stop."""

    def __init__(self, root_dir: Path, work_dir: Path, environ: dict[str, str] | None = None):
        self.root_dir = Path(root_dir)
        self.work_dir = Path(work_dir)
        # The environment to start from (default: this process's when the server starts). The
        # suite's workers pass a copy taken before any of them starts a browser, which changes
        # TMPDIR for a moment (see pool.py).
        self.environ = environ
        self.token = secrets.token_hex(24)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.work_dir / "server.log"
        self.scanned = 0  # how far the checks have scanned the log (bytes)
        self._log_file = None

    # -- lifetime ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LabServer:
        settings = self.work_dir / "lab-settings"
        for name, value in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = isolated_env(self.work_dir / "jupyter", self.environ)
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        for _attempt in range(3):  # the free port can be taken between probing and binding
            self.port = free_port()
            cmd = [
                *die_with_parent(), sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root_dir}",
                f"--LabServerApp.user_settings_dir={settings}",
                f"--LabServerApp.workspaces_dir={self.work_dir / 'workspaces'}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=", "--LabApp.check_for_updates_class="
                "jupyterlab.handlers.announcements.NeverCheckForUpdate",
                "--KernelSpecManager.allowed_kernelspecs=python3",
            ]
            self.proc = subprocess.Popen(
                cmd, cwd=self.work_dir, env=env, stdin=subprocess.DEVNULL,
                stdout=self._log_file, stderr=subprocess.STDOUT,
            )
            if self._wait_ready():
                return self
            self._kill()
        raise RuntimeError(f"JupyterLab did not start; log:\n{self.log_text()[-4000:]}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                self.api("GET", "/api/status", timeout=5)
                return True
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        return False

    def stop(self) -> list[str]:
        """Shut the server down (its kernels with it); return what had to be killed by pid."""
        killed: list[str] = []
        if self.proc is None:
            return killed
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        if self.proc.poll() is None:
            try:
                self.api("POST", "/api/shutdown", timeout=10)
            except (OSError, urllib.error.URLError):
                pass
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                killed.append(f"jupyter server pid {self.proc.pid}")
                self._kill()
        for child in children:  # kernels: the server shuts them down; make sure, by their pid
            try:
                if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                    killed.append(f"{child.name()} pid {child.pid}")
                    child.kill()
                    child.wait(10)
            except psutil.Error:
                pass
        self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return killed

    def _kill(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- REST ----------------------------------------------------------------------------------
    def api(self, method: str, path: str, body=None, timeout: float = 30):
        """Call the server's REST API; return the decoded JSON answer (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
        return json.loads(text) if text else None

    def sessions(self) -> list[dict]:
        return self.api("GET", "/api/sessions")

    def kernels(self) -> list[dict]:
        return self.api("GET", "/api/kernels")

    def wait_disconnected(self, timeout: float) -> bool:
        """Wait until no kernel has a websocket connection, that is until the server has run
        its close handler for every page that was closed. Until then it still forwards kernel
        messages to the closed socket, and jupyter_server 2.21 does not catch the
        ``WebSocketClosedError`` that raises for JupyterLab 4's websocket protocol (it logs a
        traceback). Returns False if a connection is still open after ``timeout``."""
        deadline = time.monotonic() + timeout
        while any(kernel.get("connections", 0) > 0 for kernel in self.kernels()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def delete_sessions(self, timeout: float = 60) -> None:
        """Delete every session (which shuts its kernel down) and wait until no kernel runs."""
        for session in self.sessions():
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except urllib.error.HTTPError as err:
                if err.code != 404:
                    raise
        deadline = time.monotonic() + timeout
        while self.kernels():
            if time.monotonic() > deadline:
                for kernel in self.kernels():  # a kernel without a session
                    self.api("DELETE", f"/api/kernels/{kernel['id']}")
                break
            time.sleep(0.2)

    def lab_url(self, notebook: str, workspace: str) -> str:
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?token={self.token}"

    # -- log -----------------------------------------------------------------------------------
    def log_size(self) -> int:
        if self._log_file is not None:
            self._log_file.flush()
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_text(self, start: int = 0, end: int | None = None) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(max(0, end - start))
        return data.decode("utf-8", "replace")

