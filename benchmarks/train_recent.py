"""Measure what the pieces of notebook 09's "Since 2023" sections change, in NumPy, at matched
size: each piece is switched on in today's decoder-only reversal model (helpers.reversal,
reversal_lm_config with TODAY's pieces) or measured on the trained models of data/, and the runs
are recorded for notebook 09 in data/recent_runs.json (one key per piece).

    python benchmarks/train_recent.py --piece window          # one piece's runs, printed
    python benchmarks/train_recent.py --piece window --save   # the same, recorded
    python benchmarks/train_recent.py --save                  # every piece, recorded

Runs go to `--jobs` worker processes (default 2), each with one BLAS thread. On x86-64 with AVX2
the script sets OPENBLAS_CORETYPE=Haswell, as benchmarks/train_modern.py does, so that the runs
are bit for bit the record's. This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # each worker one BLAS thread: set before NumPy loads


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


if platform.machine() in ("x86_64", "AMD64") and _has_avx2():
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import RECENT_MANIFEST, RECENT_RUNS, load_runs, save_runs  # noqa: E402

PIECES = {}  # name -> function(jobs) -> the piece's record (JSON: numbers, lists, dicts)


def piece(function):
    """Register `run_<name>` as the piece <name>."""
    PIECES[function.__name__.removeprefix("run_")] = function
    return function


def in_workers(function, jobs: list, n_workers: int) -> list:
    """function(job) for every job, in n_workers processes, results in the jobs' order."""
    if n_workers <= 1:
        return [function(job) for job in jobs]
    with ProcessPoolExecutor(n_workers) as pool:
        return list(pool.map(function, jobs))


# ==== sliding-window attention (helper A) ====

WINDOWS = (4, 8, 16)  # the keys each query sees; the full causal mask is recorded already
WINDOW_SEEDS = (0, 1)
WINDOW_LENGTHS = tuple(range(1, 11))  # the lengths trained on


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def window_job(job: dict) -> dict:
    """One reversal run of today's recipe with sliding-window attention (a worker process):
    exact match per number of digits, 1,000 sequences each (train_modern.py's extrapolation
    draws, rng 2026, so the full-window record's first 10 entries compare)."""
    from dataclasses import asdict

    from helpers.recent import RecentConfig
    from helpers.reversal import (
        FIRST_DIGIT,
        lm_exact_match,
        parameter_count,
        pieces_of,
        reversal_lm_config,
        train_reverse_lm,
    )

    today = pieces_of(norm="today", ffn="today", position="today", attention="today")
    config = RecentConfig(**asdict(reversal_lm_config(**today)), window=job["window"])
    model, history, _ = train_reverse_lm(job["seed"], config, peak=job["rate"])
    rng, exact = np.random.default_rng(2026), []
    for n in WINDOW_LENGTHS:
        src = rng.integers(FIRST_DIGIT, FIRST_DIGIT + 10, size=(1000, n))
        exact.append(_sig(lm_exact_match(model, src, np.full(1000, n)).mean()))
    return {**job, "d_ff": config.d_ff, "parameters": parameter_count(config),
            "final": _sig(history["accuracy"][-1]), "exact": exact,
            "seconds": _sig(history["seconds"])}


@piece
def run_window(jobs) -> dict:
    """Reversal (1 to 10 digits, 2 layers) with each query seeing only the last `window`
    positions, today's recipe at its best peak rate, seeds 0 and 1; the full causal mask's runs
    (the same recipe, rate and seeds) are data/modern_runs.json's, reused."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS

    modern = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    rate = modern["best_rate"]["today"]
    todo = [{"window": w, "seed": s, "rate": rate} for w in WINDOWS for s in WINDOW_SEEDS]
    runs = in_workers(window_job, todo, jobs)
    full = [{"window": None, "seed": r["seed"], "rate": rate,
             "exact": [_sig(v) for v in r["exact"][:len(WINDOW_LENGTHS)]],
             "from": "modern_runs.json extrapolation 'today (RoPE)'"}
            for r in modern["extrapolation"]["today (RoPE)"] if r["seed"] in WINDOW_SEEDS]
    print("   window  seed  " + " ".join(f"{n:>5d}" for n in WINDOW_LENGTHS))
    for r in runs + full:
        print(f"   {str(r['window'] or 'full'):>6s}  {r['seed']:4d}  "
              + " ".join(f"{v:5.3f}" for v in r["exact"]), flush=True)
    return {"rate": rate, "lengths": list(WINDOW_LENGTHS), "runs": runs + full}

# ==== QK-norm (helper B) ====

# ==== mixture of experts (helper C) ====

# ==== multi-head latent attention (helper D) ====

# ==== RoPE's base and scaling (helper E) ====

# ==== the command line ====


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--piece", choices=sorted(PIECES), action="append",
                        help="only this piece (repeatable; default: every piece)")
    parser.add_argument("--save", action="store_true", help="record into data/recent_runs.json")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args(argv)
    print(f"{platform.machine()} · Python {platform.python_version()} · NumPy {np.__version__} · "
          f"{args.jobs} worker(s), OPENBLAS_NUM_THREADS=1 each, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(not set)')}\n", flush=True)
    record = load_runs(RECENT_RUNS, RECENT_MANIFEST) if args.save and RECENT_RUNS.exists() else {}
    for name in args.piece or sorted(PIECES):
        start = time.time()
        print(f"── {name}", flush=True)
        record[name] = PIECES[name](args.jobs)
        print(f"   ({time.time() - start:.0f} s)\n", flush=True)
    if args.save:
        if not RECENT_MANIFEST.exists():  # the first record: a manifest to keep its SHA-256 in
            RECENT_MANIFEST.write_text('{"written_by": "benchmarks/train_recent.py --save"}\n')
        save_runs(dict(sorted(record.items())), RECENT_RUNS, RECENT_MANIFEST)
        print(f"wrote {RECENT_RUNS.name} and {RECENT_MANIFEST.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
