"""Wall time of each notebook under nbval, one pytest process per notebook; and of `make test`.

    python benchmarks/nbval_times.py [notebooks/01_*.ipynb ...]   # every series notebook
    python benchmarks/nbval_times.py --threads 2                  # with two BLAS threads
    python benchmarks/nbval_times.py --make-test                  # also `make test`, warm

Each notebook runs with OPENBLAS_NUM_THREADS=--threads (1 by default: one core). Its time
includes kernel start-up (about a second) and pytest's own start-up. --make-test then times the
README's test command once, as it is (set-up already done: "warm"; its workers use every core, up
to 4). Prints a table and the totals; a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], env: dict) -> tuple[float, int, str]:
    """Wall time, exit status and the last output line of one command run from the root."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
    return time.perf_counter() - start, done.returncode, last


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--threads", type=int, default=1, help="OPENBLAS_NUM_THREADS (1)")
    parser.add_argument("--make-test", action="store_true", help="also time `make test`")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    total, failed = 0.0, 0
    print(f"{'notebook':45s} {'seconds':>8s}  result  (OPENBLAS_NUM_THREADS={args.threads})")
    for path in paths:
        seconds, status, last = timed([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist",
                                       str(path)],
                                      {**env, "OPENBLAS_NUM_THREADS": str(args.threads)})
        total += seconds
        failed += status != 0
        print(f"{Path(path).name:45s} {seconds:8.1f}  {last}")
    print(f"{'total':45s} {total:8.1f}")
    if args.make_test:
        seconds, status, last = timed(["make", "--no-print-directory", "test"], env)
        failed += status != 0
        print(f"{'make test (warm, ' + str(os.cpu_count()) + ' cores)':45s} {seconds:8.1f}  {last}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
