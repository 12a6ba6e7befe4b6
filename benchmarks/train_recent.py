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

# ==== QK-norm (helper B) ====

# ==== mixture of experts (helper C) ====

# ==== multi-head latent attention (helper D) ====

LATENT_TARGET = 0.99  # validation exact match: notebook 09's target
LATENT_VARIANTS = {  # name -> RecentConfig fields over today's recipe (GQA, 2 key/value heads)
    "GQA": {},
    "MLA, d_c 32": {"d_latent": 32, "d_rope": 4},  # DeepSeek-V2's shape: d_c = 4 d_h, d_R = d_h/2
    "MLA, d_c 12": {"d_latent": 12, "d_rope": 4},  # a cache of 16 numbers: one key/value head's
}


def latent_config(fields: dict):
    """Today's reversal model (reversal_lm_config) with `fields`, its d_ff set to bring the
    parameter count closest to today's GQA model's, as reversal_lm_config does."""
    from dataclasses import asdict, replace

    from helpers.recent import RecentConfig
    from helpers.reversal import PIECES, parameter_count, pieces_of, reversal_lm_config

    today = reversal_lm_config(**pieces_of(**{p: "today" for p in PIECES}))
    target, base = parameter_count(today), RecentConfig(**asdict(today), **fields)
    one, two = (parameter_count(replace(base, d_ff=f)) for f in (1, 2))
    d_ff = 1 + (target - one) / (two - one)
    best = min({max(1, int(d_ff)), int(d_ff) + 1},
               key=lambda f: abs(parameter_count(replace(base, d_ff=f)) - target))
    return replace(base, d_ff=best)


def latent_run(job: dict) -> dict:
    """One reversal run of a LATENT_VARIANTS model at today's best peak rate (in a worker)."""
    from helpers.reversal import parameter_count, train_reverse_lm

    config = latent_config(LATENT_VARIANTS[job["variant"]])
    _, history, _ = train_reverse_lm(job["seed"], config, peak=job["rate"], warmup=100,
                                     steps=1500)
    steps = len(history["loss"])
    first = next((s for s, a in zip(history["eval_step"], history["accuracy"])
                  if a >= LATENT_TARGET), None)
    d_h = config.d_model // config.n_heads
    cache = (config.d_latent + config.d_rope if config.d_latent is not None
             else 2 * config.n_kv_heads * d_h)  # numbers per token and layer
    return {**job, "d_latent": config.d_latent, "d_rope": config.d_rope, "d_ff": config.d_ff,
            "parameters": parameter_count(config), "cache_per_token": cache, "first": first,
            "final": history["accuracy"][-1],
            "ms_per_step": float(f"{history['seconds'] / steps * 1e3:.4g}"),
            "loss": [float(f"{v:.4g}") for v in history["loss"][::10]],
            "accuracy": history["accuracy"]}


@piece
def run_latent(jobs) -> dict:
    """Multi-head latent attention against today's GQA on reversal, at matched parameters:
    LATENT_VARIANTS, seeds 0 and 1, today's best peak rate (data/modern_runs.json), 100 warm-up
    steps, 1500 steps. Returns {"target", "rate", "runs": [one record per run]}."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS

    rate = load_runs(MODERN_RUNS, MODERN_MANIFEST)["best_rate"]["today"]
    todo = [{"variant": v, "seed": s, "rate": rate} for s in (0, 1) for v in LATENT_VARIANTS]
    runs = in_workers(latent_run, todo, jobs)
    for r in runs:
        print(f"   {r['variant']:12s} seed {r['seed']}: d_ff {r['d_ff']:3d}, {r['parameters']:,} "
              f"parameters, cache {r['cache_per_token']:2d} numbers per token and layer; target "
              f"at {r['first']}, final {r['final']:.3f}, {r['ms_per_step']:.1f} ms per step",
              flush=True)
    return {"target": LATENT_TARGET, "rate": rate, "runs": runs}


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
