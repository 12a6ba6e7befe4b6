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

QK_TIMES = (1, 2, 4)  # peak rates: today's best (data/modern_runs.json) times these
QK_JOBS = [{"qk_norm": qk, "times": t, "seed": 0} for t in QK_TIMES for qk in (False, True)] \
    + [{"qk_norm": qk, "times": 4, "seed": 1} for qk in (False, True)]  # 8 runs: the CPU is shared
QK_BATCH = 256  # the first QK_BATCH validation sequences: the batch whose scores are measured


def sig4(x):
    """x rounded to 4 significant digits (None stays None)."""
    return None if x is None else float(f"{x:.4g}")


def attention_scores(model, src, lengths) -> list:
    """Per block, the scores q.k / sqrt(d_k) of every head where a real (not PAD) query may read
    a real key under the causal mask, over the sequences src: {"std": ..., "max": max |score|}."""
    from helpers.module import clear_caches
    from helpers.reversal import PAD, lm_sequences
    from helpers.transformer import causal_mask

    tokens, _ = lm_sequences(src, lengths)
    model.forward(tokens)
    real = tokens != PAD  # (B, T)
    seen = real[:, None, :, None] & real[:, None, None, :] & ~causal_mask(tokens.shape[1])
    out = []
    for block in model.decoder.layers:
        c = block.self_attn.cache
        scores = c.Q @ c.K.swapaxes(-1, -2) / np.sqrt(c.Q.shape[-1])  # (B, h, T, T)
        s = scores[np.broadcast_to(seen, scores.shape)].astype(np.float64)
        out.append({"std": sig4(s.std()), "max": sig4(np.abs(s).max())})
    clear_caches(model)
    return out


def qk_norm_run(job: dict) -> dict:
    """One run of today's reversal model (with QK-norm or not) at a multiple of today's best peak
    rate: steps to the target, final exact match, curves, and the attention scores' spread."""
    from dataclasses import asdict

    from helpers.data import MODERN_MANIFEST, MODERN_RUNS
    from helpers.recent import RecentConfig
    from helpers.reversal import (
        PIECES,
        parameter_count,
        pieces_of,
        reversal_lm_config,
        reverse_task,
        train_reverse_lm,
    )
    from helpers.training import TrainingDiverged

    today = reversal_lm_config(**pieces_of(**{p: "today" for p in PIECES}))
    config = RecentConfig(**asdict(today), qk_norm=job["qk_norm"])  # today's d_ff, kept
    rate = load_runs(MODERN_RUNS, MODERN_MANIFEST)["best_rate"]["today"] * job["times"]
    val = reverse_task()["val"]
    src, lengths = val["src"][:QK_BATCH], val["lengths"][:QK_BATCH]
    curve = []  # every 50 steps: the largest |score| of any block

    def callback(history, model):
        if len(history["loss"]) % 50 == 0:
            curve.append(max(b["max"] for b in attention_scores(model, src, lengths)))

    out = {**job, "rate": rate, "d_ff": config.d_ff, "parameters": parameter_count(config)}
    try:
        model, history, _ = train_reverse_lm(job["seed"], config, peak=rate, callback=callback,
                                              budget=job.get("budget"))  # budget: a quick look
    except TrainingDiverged as error:  # recorded as such, with what came before
        history, model = error.history, None
        out["diverged"] = len(history["loss"]) + 1
    first = next((s for s, a in zip(history["eval_step"], history["accuracy"]) if a >= 0.99),
                 None)
    out.update({"first": first, "final": history["accuracy"][-1] if model else None,
                "accuracy": history["accuracy"], "max_score": curve,
                "loss": [sig4(v) for v in history["loss"][::10]],
                "scores": attention_scores(model, src, lengths) if model else None,
                "ms_per_step": sig4(history["seconds"] / len(history["loss"]) * 1e3) if model
                else None})
    return out


@piece
def run_qk_norm(jobs: int) -> dict:
    """Today's reversal model with and without QK-norm, at 1, 2 and 4 times today's best peak
    rate, seed 0, and seed 1 at 4 times: QK_JOBS. A job data/recent_runs.json already holds is
    not run again (the same job gives the same run, bit for bit, on the same NumPy and BLAS):
    delete the record's "qk_norm" to run them all."""
    def key(job):
        return job["qk_norm"], job["times"], job["seed"]
    done = load_runs(RECENT_RUNS, RECENT_MANIFEST).get("qk_norm", {}) if RECENT_RUNS.exists() \
        else {}
    done = {key(r): r for r in done.get("runs", [])}
    todo = [job for job in QK_JOBS if key(job) not in done]
    done.update(zip(map(key, todo), in_workers(qk_norm_run, todo, jobs)))
    results = [done[key(job)] for job in QK_JOBS]
    print("   QK-norm  rate     seed  params  target  final   max|score| (block 0, 1)  std")
    for r in results:
        first = "never" if r["first"] is None else str(r["first"])
        final = f"diverged at step {r['diverged']}" if "diverged" in r else f"{r['final']:.3f}"
        ends = r["scores"] or []
        print(f"   {str(r['qk_norm']):7s}  {r['rate']:<7g}  {r['seed']:4d}  {r['parameters']:6,}  "
              f"{first:>6s}  {final}  {[e['max'] for e in ends]}  {[e['std'] for e in ends]}",
              flush=True)
    return {"target": 0.99, "batch": QK_BATCH, "runs": results}

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
