"""Kernel time of one explorer update (a control change -> recompute -> new PNG), per explorer.

    python benchmarks/widget_update.py [--repeats 20]

Prints the median and the 90th percentile in milliseconds. Target (DESIGN.md §7): well under
100 ms. This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from helpers import widgets as tw


def explorers():
    """Every explorer the notebooks build, with the controls to cycle through."""
    yield "01 scaling explorer (d_k)", tw.scaling_explorer(), "d_k", [16, 64, 256, 1024]
    yield "01 scaling explorer (toggle)", tw.scaling_explorer(), "scaled", [False, True]
    rng = np.random.default_rng(0)
    toks = "we walked along the river bank".split()
    ex = {" ".join(toks): (toks, *(rng.standard_normal((6, 4)) for _ in range(3)))}
    toks2 = "we paid cash at the bank".split()
    ex[" ".join(toks2)] = (toks2, *(rng.standard_normal((6, 4)) for _ in range(3)))
    yield "01 query explorer (query)", tw.query_explorer(ex), "query", [0, 2, 4, 5]
    yield "01 query explorer (sentence)", tw.query_explorer(ex), "sentence", list(ex)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
          f"NumPy {np.__version__}")
    print(f"{'explorer':34s} {'median ms':>10s} {'p90 ms':>8s}")
    for name, explorer, control, values in explorers():
        times = []
        for k in range(args.repeats):
            explorer.controls[control].value = values[k % len(values)]
            times.append(explorer.last_update_ms)
            assert explorer.last_error is None, explorer.last_error
        times.sort()
        p90 = times[int(0.9 * (len(times) - 1))]
        print(f"{name:34s} {statistics.median(times):10.1f} {p90:8.1f}")
    start = time.perf_counter()
    tw.scaling_explorer()
    print(f"building one explorer (incl. first draw): {(time.perf_counter() - start) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
