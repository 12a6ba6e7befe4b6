"""Run the browser suite once; print its wall time and the peak memory of the whole process tree
(pytest, the JupyterLab server, its kernels, the Playwright driver and every Chromium process).

    python -m tests.e2e.measure                      # runs: python -m pytest -m e2e tests/e2e -q
    python -m tests.e2e.measure -m e2e tests/e2e -k 01_

`/usr/bin/time -v` reports the largest *single* process only; this samples the sum over the
tree every half second: RSS (counts shared pages once per process, so it overstates) and PSS
(shares them out, the fairer figure). It exits with pytest's exit code.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil

INTERVAL = 0.5


def tree_memory(root: psutil.Process) -> tuple[int, int, int]:
    """(RSS, PSS, number of processes) summed over ``root`` and its descendants, in bytes."""
    rss = pss = count = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0, 0
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
        count += 1
    return rss, pss, count


def main(args: list[str]) -> int:
    args = args or ["-m", "e2e", "tests/e2e", "-q"]
    start = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "pytest", *args])
    root = psutil.Process(child.pid)
    # Stopping this script stops the suite (which then tears down what it started).
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, f: child.send_signal(signal.SIGTERM))
    peak_rss = peak_pss = peak_count = 0
    while child.poll() is None:
        rss, pss, count = tree_memory(root)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        peak_count = max(peak_count, count)
        try:
            time.sleep(INTERVAL)
        except KeyboardInterrupt:  # Ctrl+C reaches pytest too (same process group): wait for it
            child.wait()
            raise
    wall = time.monotonic() - start
    gib = 1024**3
    print(f"wall time {wall:.0f} s; peak memory of the process tree: PSS {peak_pss / gib:.2f} GiB,"
          f" RSS {peak_rss / gib:.2f} GiB (up to {peak_count} processes)", flush=True)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
