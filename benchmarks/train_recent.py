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

import blas_setup  # noqa: E402

blas_setup.one_thread_record_kernel()  # before NumPy loads

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


# Going further · sliding-window attention

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

# Going further · QK-norm

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

# Going further · mixture of experts


MOE_SEEDS = (0, 1)
MOE_VARIANTS = {  # name -> (n_experts, top_k, balance, gate); n_experts 0: today's dense SwiGLU
    "dense": (0, 2, 0.01, "mixtral"),
    "4 experts, top-1": (4, 1, 0.01, "switch"),
    "4 experts, top-1, no balance loss": (4, 1, 0.0, "switch"),
    "4 experts, top-2": (4, 2, 0.01, "mixtral"),
    "4 experts, top-2, no balance loss": (4, 2, 0.0, "mixtral"),
}


def moe_config(n_experts, top_k, balance, gate):
    """Today's reversal model (reversal_lm_config with TODAY's pieces), its feed-forward network
    a mixture of n_experts SwiGLU experts whose width d_ff makes the ACTIVE parameters (the
    router, top_k experts per block, everything else) closest to the dense model's total. The
    balance loss leaves PAD positions out (balance_ignore=PAD)."""
    from dataclasses import asdict, replace

    from helpers.recent import RecentConfig
    from helpers.reversal import PAD, PIECES, parameter_count, pieces_of, reversal_lm_config

    dense = RecentConfig(**asdict(reversal_lm_config(**pieces_of(**{p: "today" for p in PIECES}))))
    if not n_experts:
        return dense, parameter_count(dense), parameter_count(dense)
    target = parameter_count(dense)

    def counts(d_ff):
        config = replace(dense, n_experts=n_experts, top_k=top_k, balance=balance, gate=gate,
                         balance_ignore=PAD, d_ff=d_ff)
        total = parameter_count(config)
        idle = config.n_layers * (n_experts - top_k) * 3 * config.d_model * d_ff  # unused experts
        return config, total, total - idle

    d_ff = min(range(1, 2 * dense.d_ff), key=lambda f: abs(counts(f)[2] - target))
    return counts(d_ff)


def moe_run(job: dict) -> dict:
    """One training run of the reversal model with this variant's feed-forward networks; the
    expert load at the end, on the validation set's real tokens (padding left out)."""
    from helpers.module import clear_caches
    from helpers.reversal import PAD, lm_sequences, train_reverse_lm

    config, total, active = moe_config(*MOE_VARIANTS[job["variant"]])
    model, history, task = train_reverse_lm(job["seed"], config, peak=job["rate"], warmup=100,
                                            steps=1500)
    steps = len(history["loss"])
    first = next((s for s, a in zip(history["eval_step"], history["accuracy"]) if a >= 0.99),
                 None)
    out = {**job, "d_ff": config.d_ff, "parameters": total, "active": active, "first": first,
           "final": history["accuracy"][-1],
           "ms_per_step": float(f"{history['seconds'] / steps * 1e3:.4g}"),
           "loss": [float(f"{v:.4g}") for v in history["loss"][::10]],
           "accuracy": history["accuracy"]}
    if config.n_experts:
        tokens, _ = lm_sequences(task["val"]["src"], task["val"]["lengths"])
        model.forward(tokens)
        real = (tokens != PAD).ravel()  # (B T,)
        out["load"], out["aux"] = [], []
        for block in model.decoder.layers:
            chosen = block.ffn.cache.experts[real]  # (real tokens, k)
            share = np.bincount(chosen.ravel(), minlength=config.n_experts) / chosen.size
            out["load"].append([float(f"{v:.4g}") for v in share])
            out["aux"].append(float(f"{block.ffn.aux_loss:.4g}"))  # real tokens (balance_ignore)
        clear_caches(model)
    print(f"   {job['variant']:36s} seed {job['seed']}: first {first}, final "
          f"{out['final']:.3f}, {out['ms_per_step']:.0f} ms/step, load {out.get('load')}",
          flush=True)
    return out


@piece
def run_moe(jobs) -> dict:
    """Dense against 4 experts (top-1 with Switch's gate, top-2 with Mixtral's) at matched
    ACTIVE parameters, with Switch's load-balancing loss (balance 0.01, PAD left out) and
    without it, today's recipe at its best peak rate, seeds MOE_SEEDS: seed 0 of every variant
    first."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS

    rate = load_runs(MODERN_RUNS, MODERN_MANIFEST)["best_rate"]["today"]
    work = [{"variant": v, "seed": s, "rate": rate} for s in MOE_SEEDS for v in MOE_VARIANTS]
    runs = in_workers(moe_run, work, jobs)
    record = {"rate": rate, "target": 0.99, "variants": {}}
    for name, (n_experts, top_k, balance, gate) in MOE_VARIANTS.items():
        mine = [r for r in runs if r["variant"] == name]
        record["variants"][name] = {
            "n_experts": n_experts, "top_k": top_k, "balance": balance, "gate": gate,
            "d_ff": mine[0]["d_ff"], "parameters": mine[0]["parameters"],
            "active": mine[0]["active"],
            "runs": [{k: v for k, v in r.items() if k not in ("variant", "rate", "d_ff",
                                                               "parameters", "active")}
                     for r in mine]}
    return record


# Going further · multi-head latent attention

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


# Going further · RoPE's base and scaling

ROPE_LENGTHS = tuple(range(1, 17))  # tested on 1 to 16 digits, as notebook 09's extrapolation
ROPE_TRAINED = 21  # positions of the longest training row: 10 digits, <bos>, 10 digits
ROPE_FACTOR = 32 / 20  # takes position 32 (the last of 16 digits' rows) to 20, the last trained
ROPE_METHODS = ("linear", "ntk", "yarn", "llama3")
TUNE_METHODS = (None, "linear", "ntk", "yarn")  # the fine-tunes: without scaling, and three
TUNE_STEPS, TUNE_PEAK, TUNE_WARMUP = 300, 0.005, 30  # a quarter of today's best peak rate


def rope_scaling_of(method):
    """helpers.recent's scaling (method, s, L) that takes 16 digits into the trained positions."""
    return None if method is None else (method, ROPE_FACTOR, ROPE_TRAINED)


def rope_extrapolation(model) -> dict:
    """benchmarks/train_modern.py's extrapolation(): exact match and the share of answer tokens
    right per number of digits, on the same 1,000 sequences per length (seed 2026)."""
    from helpers.module import clear_caches
    from helpers.reversal import FIRST_DIGIT, lm_exact_match, lm_sequences

    rng = np.random.default_rng(2026)
    exact, tokens = [], []
    for n in ROPE_LENGTHS:
        src = rng.integers(FIRST_DIGIT, FIRST_DIGIT + 10, size=(1000, n))
        lengths = np.full(1000, n)
        exact.append(float(f"{lm_exact_match(model, src, lengths).mean():.4g}"))
        inputs, targets = lm_sequences(src, lengths)
        right = model.forward(inputs).argmax(axis=-1) == targets
        clear_caches(model)
        tokens.append(float(f"{right[targets != 0].mean():.4g}"))
    return {"exact": exact, "tokens": tokens}


def rope_evaluate(name: str) -> dict:
    """One trained model of notebook 09 (data/modern_models.npz), tested without scaling and with
    each method at ROPE_FACTOR: no training."""
    from helpers.data import load_modern_models
    from helpers.recent import rescale_rope

    model = load_modern_models()[0][name]
    return {str(method): rope_extrapolation(rescale_rope(model, scaling=rope_scaling_of(method)))
            for method in (None, *ROPE_METHODS)}


def rope_fine_tune(method) -> dict:
    """Notebook 09's trained "today" model fine-tuned TUNE_STEPS steps on 1 to 16 digits (Adam
    afresh, batches of 128, warm-up then linear decay from TUNE_PEAK, clipped to 2), with this
    scaling throughout; the exact match on 16 digits every 25 steps, and at the end on 1-16."""
    from helpers.data import load_modern_models
    from helpers.recent import rescale_rope
    from helpers.reversal import (
        FIRST_DIGIT,
        PAD,
        linear_schedule,
        lm_exact_match,
        lm_sequences,
        sample_sequences,
    )
    from helpers.training import cross_entropy, train

    model = rescale_rope(load_modern_models()[0]["today"], scaling=rope_scaling_of(method))
    rng, probe = np.random.default_rng(1), np.random.default_rng(7)  # batches; 16-digit probe
    src16 = probe.integers(FIRST_DIGIT, FIRST_DIGIT + 10, size=(500, 16))

    def batch(step):
        tokens, targets = lm_sequences(*sample_sequences(rng, 128, max_len=16))
        return (tokens,), targets

    def evaluate(model):
        return {"exact16": float(lm_exact_match(model, src16, np.full(500, 16)).mean())}

    before, start = evaluate(model)["exact16"], time.time()
    history = train(model, batch, lambda logits, t: cross_entropy(logits, t, ignore_id=PAD),
                    linear_schedule(TUNE_PEAK, TUNE_WARMUP, TUNE_STEPS), steps=TUNE_STEPS,
                    clip=2.0, evaluate=evaluate, eval_every=25)
    return {"method": str(method), "steps": TUNE_STEPS, "peak": TUNE_PEAK,
            "warmup": TUNE_WARMUP, "seconds": round(time.time() - start, 1),
            "eval_step": [0, *history["eval_step"]],
            "exact16": [before, *history["exact16"]],
            "loss": [float(f"{v:.4g}") for v in history["loss"][::10]],
            "extrapolation": rope_extrapolation(model)}


@piece
def run_rope_scaling(jobs) -> dict:
    """Notebook 09's eight trained RoPE models tested on 1-16 digits with each scaling, no
    training; then "today" fine-tuned on 1-16 digits with none and three scalings (4 runs)."""
    from helpers.data import MODERN_MANIFEST, MODERN_RUNS
    from helpers.data import load_runs as load

    grid = load(MODERN_RUNS, MODERN_MANIFEST)["grid"]
    names = [name for name, g in grid.items() if g["choice"]["position"] == "today"]
    evaluated = dict(zip(names, in_workers(rope_evaluate, names, jobs)))
    for name, by_method in evaluated.items():
        row = "  ".join(f"{m} {np.mean(r['exact'][10:]):.2f}" for m, r in by_method.items())
        print(f"   . {name}: exact match on 11-16 digits, mean: {row}", flush=True)
    tuned = in_workers(rope_fine_tune, list(TUNE_METHODS), jobs)
    for run in tuned:
        print(f"   . fine-tuned with {run['method']}: exact at 16 digits every 25 steps "
              f"{run['exact16']}; 1-16 digits {run['extrapolation']['exact']}", flush=True)
    return {"lengths": list(ROPE_LENGTHS), "trained_positions": ROPE_TRAINED,
            "factor": ROPE_FACTOR, "methods": list(ROPE_METHODS), "evaluated": evaluated,
            "fine_tuned": tuned}

# the command line


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
