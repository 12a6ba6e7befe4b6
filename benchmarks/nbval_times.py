"""Wall time of each notebook under nbval, one pytest process per notebook.

    python benchmarks/nbval_times.py [notebooks/01_*.ipynb ...]

Includes kernel start-up (about a second) and pytest's own start-up. Prints a table and the
total; a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    total, failed = 0.0, 0
    print(f"{'notebook':45s} {'seconds':>8s}  result")
    for path in paths:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", str(path)], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        total += seconds
        failed += done.returncode != 0
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
        print(f"{path.name:45s} {seconds:8.1f}  {last}")
    print(f"{'total':45s} {total:8.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
