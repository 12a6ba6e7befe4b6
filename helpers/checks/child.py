"""One grading child: a process of its own, read as it runs, killed when its time is up.

`Child` starts ``python -m helpers.checks.worker`` in a new session (its own process group), or
has a zygote (`forks()`, `helpers.checks.zygote`) fork one set up the same way, with stdin from
/dev/null and two pipes: its messages (JSON lines, `helpers.checks.wire`) on a
descriptor of their own, and its stdout and stderr together. `Child.messages(deadline)` yields
each message as it comes and drains the output all along (into an `Excerpt`: never into a file,
which a hostile child could grow to fill the disk); when `deadline()` passes, the whole process
group is killed with SIGKILL, which no learner's code can catch or outlast. A line that is not a
message is counted in `malformed` and skipped.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.checks.wire import LIMIT_BYTES, parse
from helpers.checks.zygote import Broken, Zygote, usable

__all__ = ["Child", "Excerpt", "clean", "forks"]

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds `helpers`
LINE_BYTES = LIMIT_BYTES + 2**20  # a longer line is not a message


def worker_env() -> dict:
    """The environment of a grading child (and of the zygote that forks them)."""
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1"}  # a crash prints where it happened


_open: Zygote | None = None  # the zygote of the outermost forks() block, while it is open


@contextlib.contextmanager
def forks():
    """A zygote for the children started in the block (Child(..., zygote)), where the platform
    can fork; else None: each child is started on its own. Inside another forks() block, that
    block's zygote, started with the environment of then: grading many batches in one process
    (a test suite, a teacher's loop over grade()), wrap them in one block."""
    global _open
    if _open is not None:
        yield _open
        return
    if not usable():
        yield None
        return
    try:
        zygote = Zygote(worker_env(), ROOT)
    except OSError:
        yield None
        return
    _open = zygote
    try:
        yield zygote
    finally:
        _open = None
        zygote.close()


def clean(text: str, cap: int = 2000, indent: str = "    ") -> str:
    """`text` from a child, fit for a terminal: control characters shown as \\xNN, cut at `cap`,
    every line after the first indented by `indent`, so that none passes for a verdict."""
    text = str(text)
    if len(text) > cap:
        text = text[:cap] + f" … ({len(text) - cap:,} more characters)"
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", text)
    return text.replace("\n", "\n" + indent)


class Excerpt:
    """The first and the last `keep` bytes of a stream, and how long it was."""

    def __init__(self, keep: int = 1000):
        self.keep, self.total = keep, 0
        self.head, self.tail = bytearray(), bytearray()

    def add(self, data: bytes):
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail = (self.tail + data)[-self.keep:]

    def text(self) -> str:
        hidden = self.total - len(self.head) - len(self.tail)
        head, tail = (clean(bytes(b).decode("utf-8", "replace"), 10 * self.keep, indent="")
                      for b in (self.head, self.tail))
        if hidden <= 0:
            return head + tail
        return f"{head}\n… {hidden:,} bytes not shown …\n{tail}"


class Child:
    """``python -m helpers.checks.worker *args``, run from the folder that holds `helpers` (the
    worker moves to the learner's folder itself, once its own imports are done, so that a
    learner's file named like a module cannot replace the grader's)."""

    def __init__(self, args: list[str], output: Excerpt, zygote: Zygote | None = None):
        self.output, self.malformed, self.killed, self.status = output, 0, False, None
        self.proc = self.zygote = None
        if zygote is not None:
            read, write, out_read, out_write = *os.pipe(), *os.pipe()
            try:
                self.pid, self.zygote = zygote.spawn(args, (write, out_write)), zygote
            except BaseException as error:  # a worker it may have forked ends unstarted
                for fd in (read, write, out_read, out_write):
                    os.close(fd)
                if not isinstance(error, Broken):
                    raise
        if self.zygote is None:  # started on its own, in new pipes
            read, write, out_read, out_write = *os.pipe(), *os.pipe()
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "helpers.checks.worker", "--messages", str(write),
                     *args], stdin=subprocess.DEVNULL, stdout=out_write, stderr=out_write,
                    pass_fds=(write,), cwd=ROOT, env=worker_env(), start_new_session=True)
            except BaseException:
                for fd in (read, write, out_read, out_write):
                    os.close(fd)
                raise
            self.pid = self.proc.pid
        os.close(write)
        os.close(out_write)
        self._fds = {read: "messages", out_read: "output"}
        self._pending = bytearray()
        self._skipping = False  # inside a line too long to be a message

    def messages(self, deadline):
        """Yield each message until the process ends or `deadline()` (a time.monotonic() value,
        read again after each message) passes; then `status` (or `killed`) says how it ended."""
        selector = selectors.DefaultSelector()
        for fd in self._fds:
            selector.register(fd, selectors.EVENT_READ)
        if self.zygote is not None:  # its word that the worker ended wakes the wait at once
            selector.register(self.zygote.sock, selectors.EVENT_READ)
        try:
            while True:
                wait = deadline() - time.monotonic()
                if wait <= 0:
                    self.kill()
                    self.killed = True
                    break
                for key, _ in selector.select(min(wait, 0.05)):
                    if key.fd in self._fds:  # not the zygote's socket: _ended reads that
                        yield from self._read(key.fd, selector)
                if self._ended():  # what it wrote before it ended is still read
                    if self.zygote is not None:
                        selector.unregister(self.zygote.sock)
                    self.kill()  # what it started too
                    end = time.monotonic() + 1
                    while selector.get_map() and time.monotonic() < end:
                        ready = selector.select(0)
                        if not ready:
                            break
                        for key, _ in ready:
                            yield from self._read(key.fd, selector)
                    break
        finally:
            self.kill()
            selector.close()
            for fd in self._fds:
                os.close(fd)
            self._fds = {}
            self.status = self.proc.wait() if self.proc else self.zygote.reap(self.pid)

    def _read(self, fd, selector):
        data = os.read(fd, 1 << 16)
        if not data:
            selector.unregister(fd)
        elif self._fds[fd] == "output":
            self.output.add(data)
        else:
            self._pending += data
            if b"\n" not in data:  # a long message comes in many reads: split it once
                if len(self._pending) > LINE_BYTES:
                    self._pending, self._skipping = bytearray(), True
                return
            *lines, rest = self._pending.split(b"\n")
            self._pending = bytearray(rest)
            for raw in lines:
                if not raw.strip():
                    continue
                if self._skipping:
                    self._skipping = False
                    self.malformed += 1
                    continue
                try:
                    yield parse(bytes(raw))
                except ValueError:
                    self.malformed += 1
            if len(self._pending) > LINE_BYTES:
                self._pending, self._skipping = bytearray(), True

    def _ended(self) -> bool:
        """Whether the process ended, without reaping it (its group id stays ours to kill)."""
        if self.zygote is not None:
            return self.zygote.ended()
        if not hasattr(os, "waitid"):  # macOS
            return self.proc.poll() is not None
        try:
            return os.waitid(os.P_PID, self.proc.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # already reaped
            return True

    def kill(self):
        """SIGKILL the child's process group (its own and whatever it started)."""
        try:
            if hasattr(os, "killpg"):
                os.killpg(self.pid, signal.SIGKILL)
            else:
                self.proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
