"""The README's first command, `make lab`, starts JupyterLab: as root (Docker images, many class
servers) and as a normal user, with the set-up's settings (no news prompt over the notebook).

Each test runs `make lab` itself, with LAB_ARGS for a free port, a token and no browser, in an
isolated Jupyter configuration, waits until the server answers on 127.0.0.1 and stops it.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
START_TIMEOUT = 120  # seconds; JupyterLab answers after 3 to 5 s on an idle 2-core machine

pytestmark = [
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
    pytest.mark.skipif(Path(sys.prefix).resolve() != VENV.resolve(),
                       reason="tests are not running in the Makefile's .venv (conda route?)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - 127.0.0.1 only
        return json.loads(response.read())


def start_lab(home: Path, user: str | None = None):
    """`make lab` on a free port; returns (process, base url, token)."""
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "JUPYTER"))}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    lab_args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} "
                f"--ServerApp.port_retries=0 --IdentityProvider.token={token}")
    cmd = ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}"]
    if user is not None:  # a normal uid; read access to root's files, where the interpreter is
        caps = "+dac_override,+dac_read_search"
        cmd = ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}",
               "--clear-groups", f"--inh-caps={caps}", f"--ambient-caps={caps}", *cmd]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", token


def wait_until_it_answers(proc, base: str, token: str) -> dict:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"make lab exited with {proc.returncode}:\n{proc.stdout.read()[-3000:]}")
        try:
            return get(f"{base}/api/status?token={token}")
        except OSError:  # not listening yet: ask again a tenth of a second later
            time.sleep(0.1)
    pytest.fail(f"JupyterLab did not answer on {base} within {START_TIMEOUT} s")


def stop(proc) -> str:
    """Stop make and JupyterLab (one process group); return what they printed."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.stdout.read()


def check_running_lab(proc, base: str, token: str) -> str:
    try:
        status = wait_until_it_answers(proc, base, token)
        assert "started" in status
        setting = get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification"
                      f"?token={token}")
        # the set-up's overrides.json becomes the settings' defaults: never ask about news
        assert setting["schema"]["properties"]["fetchNews"]["default"] == "false", setting
        assert setting["schema"]["properties"]["checkForUpdates"]["default"] is False
        contents = get(f"{base}/api/contents?token={token}")
        assert any(item["name"].startswith("01_") for item in contents["content"])  # notebooks/
    finally:
        output = stop(proc)
    return output


def test_make_lab_starts_as_this_user(tmp_path):
    proc, base, token = start_lab(tmp_path)
    output = check_running_lab(proc, base, token)
    if os.geteuid() == 0:  # the CI user, and Docker's
        assert "make lab: running as root" in output, output[-2000:]
    else:
        assert "make lab: running as root" not in output
    assert "Running as root is not recommended" not in output  # Jupyter's refusal


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to start make lab as another user")
def test_make_lab_starts_as_a_normal_user(tmp_path):
    """As uid 65534 (nobody). Here the Python interpreter lives under /root, which only root may
    read, so the process keeps the capability to read files; it is not root, which is what
    Jupyter's root check and the Makefile look at."""
    user = "nobody"
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    tmp_path.chmod(0o755)
    proc, base, token = start_lab(home, user=user)
    output = check_running_lab(proc, base, token)
    assert "make lab: running as root" not in output, output[-2000:]


@pytest.mark.parametrize("lang, edition, opens", [
    ("C.UTF-8", None, "notebooks/"), ("en_GB.UTF-8", None, "notebooks/"),
    ("zh_CN.UTF-8", None, "notebooks/zh/"), ("zh_TW.UTF-8", None, "notebooks/zh/"),
    ("C.UTF-8", "zh", "notebooks/zh/"), ("zh_CN.UTF-8", "en", "notebooks/")])
def test_make_lab_opens_the_edition_lang_or_edition_asks_for(lang, edition, opens):
    """`make lab` opens notebooks/zh/ (中文版) where LANG is Chinese or EDITION=zh is given."""
    cmd = ["make", "--no-print-directory", "-n", "lab"] + ([f"EDITION={edition}"] if edition else [])
    env = {**os.environ, "LANG": lang}
    env.pop("EDITION", None)
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if "jupyter lab" in ln)
    assert line.split("jupyter lab ", 1)[1].split()[0] == opens
    assert (ROOT / opens).is_dir()
