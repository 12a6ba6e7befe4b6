"""A fork server for the grading children: one process imports the worker's modules once and
forks a worker for each child a batch needs, so that thirty files do not pay NumPy's and the
catalogue's imports thirty times over.

`Zygote(env, cwd)` starts ``python -m helpers.checks.worker --zygote FD`` in `cwd` (the folder
that holds `helpers`), in a session of its own, and talks to it over a Unix socket, one JSON line
each way, in lockstep:

    grader -> {"run": [args]}, with two descriptors    fork a worker: its messages, its output
    zygote -> {"pid": pid}                              once the worker has its own session;
                                                        then it starts
    zygote -> {"ended": status}                         it ended, not reaped yet: its group id
                                                        stays the grader's to kill
    grader -> {"reap": pid}
    zygote -> {"reaped": pid}                           ready for the next

The forked worker is what ``python -m helpers.checks.worker`` started by `Child` would be: a
session of its own, stdin from /dev/null, stdout and stderr on the output pipe, the messages on
descriptor 3 and no other descriptor open, NumPy's global generator seeded afresh, then
`worker.main`. The zygote runs no learner's code itself, so nothing a file does reaches the next
file's worker. A worker can kill its parent, the zygote: the next spawn starts a new one. Where
the platform cannot fork (Linux only: macOS forbids forking after some of its libraries
started), or a zygote cannot start, `Child` starts each worker itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import traceback

import numpy as np

ANSWER_SECONDS = 60  # for the zygote's own answers: its imports, a fork, a reap


class Broken(Exception):
    """The zygote did not answer (it was killed, or it could not start)."""


def usable() -> bool:
    """Whether this platform grades with a zygote."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


class Zygote:
    """The grader's end: `spawn` a worker, see whether it `ended`, `reap` it for its status. A
    zygote that stopped answering (a worker can kill its parent) is replaced at the next spawn."""

    def __init__(self, env: dict, cwd):
        self.env, self.cwd = env, cwd
        self._start()

    def _start(self):
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "helpers.checks.worker", "--zygote",
                 str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), cwd=self.cwd, env=self.env,
                start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(ANSWER_SECONDS)
        self.sock, self.pending, self.broken = ours, bytearray(), False
        self.status: int | None = None  # of the worker running now, once it ended

    def _line(self, block=True) -> dict | None:
        """The zygote's next line; None if none is there yet (block=False)."""
        while b"\n" not in self.pending:
            try:
                self.sock.settimeout(ANSWER_SECONDS if block else 0)
                data = self.sock.recv(4096)
            except BlockingIOError:
                return None
            except OSError as error:  # socket.timeout too
                if not block and isinstance(error, TimeoutError):
                    return None
                self.broken = True
                raise Broken(str(error)) from None
            if not data:
                self.broken = True
                raise Broken("the zygote ended")
            self.pending += data
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        return json.loads(line)

    def spawn(self, args: list[str], fds: tuple[int, int]) -> int:
        """Fork a worker with `args`, its messages on fds[0] and its output on fds[1]."""
        if self.broken:
            self.close()
            try:
                self._start()
            except OSError as error:
                raise Broken(str(error)) from None
        try:
            socket.send_fds(self.sock, [json.dumps({"run": args}).encode() + b"\n"], list(fds))
        except OSError as error:
            self.broken = True
            raise Broken(str(error)) from None
        self.status = None
        return int(self._line()["pid"])

    def ended(self) -> bool:
        """Whether the worker ended (or the zygote can no longer tell)."""
        if self.status is None:
            try:
                message = self._line(block=False)
            except Broken:
                return True
            if message is not None:
                self.status = int(message["ended"])
        return self.status is not None

    def reap(self, pid: int) -> int:
        """The worker's status, as Popen.returncode gives it (the grader killed its group first)."""
        try:
            if self.status is None:
                self.status = int(self._line()["ended"])
            self.sock.sendall(json.dumps({"reap": pid}).encode() + b"\n")
            self._line()  # reaped: the next request cannot arrive with this one
        except (Broken, OSError):
            self.broken = True
            if self.status is None:
                return -signal.SIGKILL  # what the grader's kill did, if nothing else did first
        return self.status

    def close(self):
        self.sock.close()  # the zygote ends when it reads the end
        try:
            self.proc.wait(ANSWER_SECONDS if not self.broken else 1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ── the zygote's end ──────────────────────────────────────────────────────────────────────────


def _receive(sock) -> tuple[dict | None, list[int]]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
    while data and not data.endswith(b"\n"):  # the grader sends one line and waits
        more = sock.recv(1 << 16)
        if not more:
            break
        data += more
    return (json.loads(data) if data else None), fds


def _send(sock, **fields):
    sock.sendall(json.dumps(fields).encode() + b"\n")


def _status(info) -> int:
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _become_worker(main, args: list[str], fds: list[int], ready: int, go: int):
    """In the forked child: set up as `Child` would start a worker, then run `main`, the
    worker's; never returns."""
    code = 1
    try:
        messages, output = fds
        os.setsid()
        os.close(ready)  # the zygote tells the grader the pid only now: its group is its own
        if os.read(go, 1) != b"g":  # the zygote ended before the grader had the pid: no one
            os._exit(1)  # could kill this worker; it does not start
        os.close(go)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.dup2(messages, 3)
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # the socket, the received copies
        np.random.seed()  # noqa: NPY002 (the learner's: a fresh process seeds it from the OS)
        sys.argv = [sys.argv[0], "--messages", "3", *args]
        main(sys.argv[1:])  # ends the process itself
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def serve(fd: int, main):
    """The zygote's loop (``python -m helpers.checks.worker --zygote FD``): fork a worker that
    runs `main` for each request on the socket `fd`, until the grader closes it."""
    sock = socket.socket(fileno=fd)
    while True:
        request, fds = _receive(sock)
        if request is None:
            return
        wait, ready = os.pipe()
        go, start = os.pipe()
        pid = os.fork()
        if pid == 0:
            sock.close()
            os.close(wait)
            os.close(start)
            _become_worker(main, request["run"], fds, ready, go)
        for fd in (*fds, ready, go):
            os.close(fd)
        os.read(wait, 1)  # until the worker closed `ready` (or ended)
        os.close(wait)
        _send(sock, pid=pid)
        os.write(start, b"g")
        os.close(start)
        _send(sock, ended=_status(os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)))
        request, _ = _receive(sock)
        os.waitpid(pid, 0)
        if request is None:
            return
        _send(sock, reaped=pid)
