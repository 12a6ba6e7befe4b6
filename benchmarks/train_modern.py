"""Measure what notebook 09's pieces change: the 2017 recipe against today's, on reversal as
next-token prediction, in NumPy, at matched parameter counts.

    python benchmarks/train_modern.py            # every table (about 35 minutes on 2 cores)
    python benchmarks/train_modern.py --save     # the same, and write data/modern_*.json/.npz
    python benchmarks/train_modern.py --jobs 1   # one run at a time
    python benchmarks/train_modern.py --norms-only --save   # only table 5, added to the record
    python benchmarks/train_modern.py --edges --save        # only table 1's two edge rates, added

Every run is `helpers.reversal.train_reverse_lm`: a decoder-only model of about 26,250
parameters (d_model 32, 4 heads, 2 blocks, float32; reversal_lm_config matches the hidden width
d_ff to the 2017 model's count), batches of 128 reversals of 1 to 10 digits, Adam, a linear
warm-up of 100 steps (or none) to the peak learning rate, then a linear decay to 0 at step
1500, gradients clipped to norm 2; validation exact match (1,000 held-out sequences) every 50
steps. "2017" is Post-LN LayerNorm, ReLU, sinusoidal positions, multi-head attention (4 key/value
heads); "today" is pre-norm RMSNorm, SwiGLU, RoPE, grouped-query attention (2 key/value heads).
The target is a validation exact match of at least TARGET.

1 · learning rates: each recipe at six peak learning rates, seeds 0-2; each recipe's best is the
    one with the fewest median steps to the target, and the rate tables 2 to 5 use. The two
    outer rates (EDGE_RATES) came later, when both bests sat at the ends of the inner four:
    --edges trains only those (seeds 0-2, 12 runs) and adds them to the saved record's table 1.
2 · warm-up: each recipe at its best rate, seeds 0-4, with the 100-step warm-up and without.
3 · length extrapolation: trained on 1 to 10 digits, tested on 1 to 16 (1,000 sequences per
    length, exact match and the share of answer tokens right), today's recipe with RoPE,
    sinusoidal positions or none, and the 2017 recipe, seeds 0-2.
4 · the sixteen combinations of the four pieces, seed 0, each at the best rate of the recipe
    whose norm it has (Post-LN or pre-norm): the trained models of notebook 09's explorer.
    Its "norm" piece switches two things at once: the placement (Post-LN or pre-norm) and the
    type (LayerNorm or RMSNorm).
5 · the norm's placement and type apart: for 2017's other pieces and for today's, the four
    combinations of placement (post, pre) and type (LayerNorm, RMSNorm), seed 0, warm-up 100,
    at the best rate of the recipe with that placement. Two of each four are table 4's models;
    the other two (pre-norm LayerNorm, Post-LN RMSNorm) are trained here, 4 runs. --norms-only
    trains only these, at the best rates of the saved record, and adds them to it.
Runs go to `--jobs` worker processes (default 2), each with one BLAS thread; the times printed
are measured while the other worker runs too. --save writes data/modern_models.npz (the sixteen
models) with its manifest data/modern_models.json, and data/modern_runs.json (every table and
curve, which notebook 09 reads); bit for bit the same with the same NumPy and BLAS build and the
same BLAS kernel (on x86-64 with AVX2 the script sets OPENBLAS_CORETYPE=Haswell, the record's).
This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import product
from pathlib import Path

import blas_setup  # noqa: E402

blas_setup.one_thread_record_kernel()  # before NumPy loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import MODERN_MANIFEST, MODERN_MODELS, MODERN_RUNS, save_models, save_runs  # noqa: E402
from helpers.modern import DecoderOnly  # noqa: E402
from helpers.reversal import (  # noqa: E402
    FIRST_DIGIT,
    PIECES,
    grid_name,
    lm_exact_match,
    lm_sequences,
    parameter_count,
    pieces_of,
    reversal_lm_config,
    train_reverse_lm,
)

TARGET = 0.99
RATES = (1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2)
EDGE_RATES = (RATES[0], RATES[-1])  # --edges: one rate beyond each end of the first four
SEEDS = (0, 1, 2)
MORE_SEEDS = (0, 1, 2, 3, 4)
LENGTHS = tuple(range(1, 17))
RECIPES = {"2017": {}, "today": {p: "today" for p in PIECES}}
# table 5: the two switches that PIECES["norm"] turns together, apart
PLACEMENTS = {"post": {"norm_first": False}, "pre": {"norm_first": True}}
NORM_TYPES = {"layernorm": {"norm": "layer"}, "rmsnorm": {"norm": "rms"}}
PLACEMENT_RECIPE = {"post": "2017", "pre": "today"}  # whose best rate a placement trains at


def config_of(recipe: dict, position: str | None = None, norm: dict | None = None):
    fields = pieces_of(**recipe)
    if position is not None:
        fields["position"] = position
    if norm is not None:  # table 5: placement and type set apart, over the recipe's "norm"
        fields.update(norm)
    return reversal_lm_config(**fields)


def extrapolation(model) -> dict:
    """Exact match and the share of answer tokens right, per number of digits (LENGTHS)."""
    rng = np.random.default_rng(2026)
    exact, tokens = [], []
    for n in LENGTHS:
        src = rng.integers(FIRST_DIGIT, FIRST_DIGIT + 10, size=(1000, n))
        lengths = np.full(1000, n)
        exact.append(float(lm_exact_match(model, src, lengths).mean()))
        inputs, targets = lm_sequences(src, lengths)
        right = model.forward(inputs).argmax(axis=-1) == targets
        scored = targets != 0
        tokens.append(float(right[scored].mean()))
    return {"exact": exact, "tokens": tokens}


def run(job: dict) -> dict:
    """One training run (in a worker process); what the tables print and notebook 09 plots."""
    config = config_of(job["recipe"], job.get("position"), job.get("norm"))
    model, history, _ = train_reverse_lm(job["seed"], config, peak=job["rate"],
                                         warmup=job["warmup"], steps=job["steps"])
    steps = len(history["loss"])
    first = next((s for s, a in zip(history["eval_step"], history["accuracy"]) if a >= TARGET),
                 None)
    out = {**job, "d_ff": config.d_ff, "parameters": parameter_count(config),
           "first": first, "final": history["accuracy"][-1],
           "ms_per_step": history["seconds"] / steps * 1e3,
           "seconds_to_target": None if first is None else history["seconds"] / steps * first,
           "loss": [float(f"{v:.4g}") for v in history["loss"][::10]],
           "accuracy": history["accuracy"]}
    if job.get("extrapolate"):
        out["extrapolation"] = extrapolation(model)
    if job.get("keep"):
        out["parameters_of_model"] = {k: v.copy() for k, v in model.parameters().items()}
        out["config"] = config
    return out


def key(job: dict) -> tuple:
    norm = config_of(job["recipe"], job.get("position"), job.get("norm"))
    return (tuple(sorted(job["recipe"].items())), job.get("position"), job["rate"],
            job["warmup"], job["seed"], norm.norm, norm.norm_first)


STEPS = [1500]  # --steps changes it (a quick look; --save needs the full 1500)


def run_all(jobs: list[dict], workers: int, done: dict) -> None:
    """Run the jobs not in `done` (by key), in parallel; add their results to `done`."""
    todo, seen = [], set(done)
    for job in jobs:
        job["steps"] = STEPS[0]
        if key(job) not in seen:
            seen.add(key(job))
            todo.append(job)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(run, todo):
            done[key(result)] = result
            print(f"   . {grid_name(**result['recipe'])}, position {result.get('position')}, "
                  f"norm {result.get('norm')}, "
                  f"rate {result['rate']:g}, warm-up {result['warmup']}, seed {result['seed']}: "
                  f"target at {result['first']}, final {result['final']:.3f}", flush=True)


def get(done, recipe, rate, warmup, seed, position=None, norm=None):
    return done[key({"recipe": recipe, "position": position, "rate": rate, "warmup": warmup,
                     "seed": seed, "norm": norm})]


def norm_jobs(best: dict) -> list[dict]:
    """Table 5's runs not in table 4: pre-norm LayerNorm and Post-LN RMSNorm, with 2017's and
    with today's other pieces (table 4 has post/layernorm and pre/rmsnorm of both)."""
    return [{"recipe": recipe, "norm": {**PLACEMENTS[place], **NORM_TYPES[kind]},
             "rate": best[PLACEMENT_RECIPE[place]], "warmup": 100, "seed": 0}
            for recipe in ({}, {p: "today" for p in PIECES if p != "norm"})
            for place, kind in (("pre", "layernorm"), ("post", "rmsnorm"))]


def norms_table(done: dict, best: dict, grid: dict) -> dict:
    """Print table 5 and return its record: {"others 2017" | "others today": {"post/layernorm":
    ..., "pre/layernorm": ..., "post/rmsnorm": ..., "pre/rmsnorm": ...}}. A combination table 4
    trained is {"grid": its name}; the others hold the run's rate, d_ff, parameters, steps to
    the target, final exact match, ms per step and validation curve."""
    table = {}
    print("   other pieces  placement  type       rate    d_ff  params  target  final")
    for others, recipe in (("others 2017", {}),
                           ("others today", {p: "today" for p in PIECES if p != "norm"})):
        for place, kind in product(PLACEMENTS, NORM_TYPES):
            if (place, kind) in (("post", "layernorm"), ("pre", "rmsnorm")):
                name = grid_name(**recipe, **({"norm": "today"} if place == "pre" else {}))
                r, entry = grid[name], {"grid": name}
            else:
                job = {"recipe": recipe, "norm": {**PLACEMENTS[place], **NORM_TYPES[kind]},
                       "rate": best[PLACEMENT_RECIPE[place]], "warmup": 100, "seed": 0}
                r = done[key(job)]
                entry = {k: r[k] for k in ("rate", "d_ff", "parameters", "first", "final",
                                           "ms_per_step", "accuracy")}
            print(f"   {others:12s}  {place:9s}  {kind:9s}  {r['rate']:<6g}  {r['d_ff']:4d}  "
                  f"{r['parameters']:6,}  {show(r['first']):>6s}  {r['final']:.3f}", flush=True)
            table.setdefault(others, {})[f"{place}/{kind}"] = entry
    return table


def median_steps(results) -> float:
    """The median steps to the target, a run that never reached it counting as infinite."""
    return float(np.median([r["first"] if r["first"] is not None else np.inf for r in results]))


def show(value, fmt="{:d}"):
    return "never" if value is None else fmt.format(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", action="store_true", help="write data/modern_*")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--steps", type=int, default=1500, help="steps per run (default 1500)")
    parser.add_argument("--edges", action="store_true",
                        help="only table 1's edge rates (EDGE_RATES); with --save they are added "
                             "to data/modern_runs.json")
    parser.add_argument("--norms-only", action="store_true",
                        help="only table 5, at the saved record's best rates; with --save it is "
                             "added to data/modern_runs.json")
    args = parser.parse_args(argv)
    if args.save and args.steps != 1500:
        parser.error("--save records the full runs: leave --steps at 1500")
    STEPS[0] = args.steps
    start = time.time()
    print(f"{platform.machine()} · Python {platform.python_version()} · NumPy {np.__version__} · "
          f"{args.jobs} worker(s), OPENBLAS_NUM_THREADS=1 each, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(not set)')}\n", flush=True)
    done: dict = {}
    if args.norms_only:
        return norms_only(args, start)
    if args.edges:
        return edges(args, start)
    record: dict = {"target": TARGET, "rates": list(RATES), "lengths": list(LENGTHS)}

    print(f"1 · steps to a validation exact match >= {TARGET} (evaluated every 50 steps), "
          "warm-up 100", flush=True)
    run_all([{"recipe": r, "rate": rate, "warmup": 100, "seed": s, "extrapolate": True,
              "keep": s == 0}
             for r in RECIPES.values() for rate in RATES for s in SEEDS], args.jobs, done)
    best, record["sweep"] = {}, {}
    print("   recipe  parameters  " + "  ".join(f"rate {r:<7g}" for r in RATES))
    for name, recipe in RECIPES.items():
        rows = {rate: [get(done, recipe, rate, 100, s) for s in SEEDS] for rate in RATES}
        best[name] = min(RATES, key=lambda rate: (median_steps(rows[rate]), rate))
        cells = ["/".join(show(r["first"]) for r in rows[rate]) for rate in RATES]
        print(f"   {name:6s}  {rows[RATES[0]][0]['parameters']:10,}  "
              + "  ".join(f"{c:<12s}" for c in cells))
        record["sweep"][name] = {str(rate): [r["first"] for r in rows[rate]] for rate in RATES}
    record["best_rate"] = best
    print("   best rate: " + ", ".join(f"{n} {r:g}" for n, r in best.items()) + "\n", flush=True)

    print("2 · warm-up, each recipe at its best rate, seeds 0-4", flush=True)
    run_all([{"recipe": recipe, "rate": best[name], "warmup": w, "seed": s}
             for name, recipe in RECIPES.items() for w in (100, 0) for s in MORE_SEEDS],
            args.jobs, done)
    record["warmup"] = {}
    print("   recipe  warm-up  steps to target (seeds 0-4)   median  s to target  ms/step  final")
    for name, recipe in RECIPES.items():
        for w in (100, 0):
            rs = [get(done, recipe, best[name], w, s) for s in MORE_SEEDS]
            secs = [r["seconds_to_target"] for r in rs if r["seconds_to_target"] is not None]
            print(f"   {name:6s}  {w:7d}  {'/'.join(show(r['first']) for r in rs):28s}  "
                  f"{median_steps(rs):6.0f}  {np.median(secs) if secs else np.nan:11.1f}  "
                  f"{np.median([r['ms_per_step'] for r in rs]):7.1f}  "
                  f"{min(r['final'] for r in rs):.3f}")
            record["warmup"][f"{name}/{w}"] = [
                {k: r[k] for k in ("seed", "first", "final", "ms_per_step", "seconds_to_target",
                                   "loss", "accuracy")} for r in rs]
    print(flush=True)

    print("3 · length extrapolation: exact match by number of digits (trained on 1 to 10), "
          "seeds 0-2", flush=True)
    today = RECIPES["today"]
    run_all([{"recipe": today, "position": p, "rate": best["today"], "warmup": 100, "seed": s,
              "extrapolate": True} for p in ("sinusoidal", "none") for s in SEEDS],
            args.jobs, done)
    record["extrapolation"] = {}
    rows = {"today (RoPE)": [get(done, today, best["today"], 100, s) for s in SEEDS],
            "today, sinusoidal": [get(done, today, best["today"], 100, s, "sinusoidal")
                                  for s in SEEDS],
            "today, no position": [get(done, today, best["today"], 100, s, "none")
                                   for s in SEEDS],
            "2017 (sinusoidal)": [get(done, RECIPES["2017"], best["2017"], 100, s)
                                  for s in SEEDS]}
    print("   " + " " * 20 + " ".join(f"{n:>5d}" for n in LENGTHS))
    for name, rs in rows.items():
        exact = np.mean([r["extrapolation"]["exact"] for r in rs], axis=0)
        print(f"   {name:20s}" + " ".join(f"{v:5.2f}" for v in exact))
        record["extrapolation"][name] = [{"seed": r["seed"], "first": r["first"],
                                          **r["extrapolation"]} for r in rs]
    print(flush=True)

    print("4 · the sixteen combinations (seed 0), at the best rate of their norm's recipe",
          flush=True)
    choices = [dict(zip(PIECES, c)) for c in product(("2017", "today"), repeat=len(PIECES))]
    rate_of = {c["norm"]: best[c["norm"]] for c in choices}
    run_all([{"recipe": {p: v for p, v in c.items() if v == "today"}, "rate": rate_of[c["norm"]],
              "warmup": 100, "seed": 0, "extrapolate": True, "keep": True} for c in choices],
            args.jobs, done)
    record["grid"], models = {}, {}
    print("   model                                             d_ff  params  target  final")
    for c in choices:
        recipe = {p: v for p, v in c.items() if v == "today"}
        r = get(done, recipe, rate_of[c["norm"]], 100, 0)
        name = grid_name(**c)
        print(f"   {name:48s} {r['d_ff']:5d} {r['parameters']:7,}  {show(r['first']):>6s}  "
              f"{r['final']:.3f}")
        record["grid"][name] = {"choice": c, "rate": r["rate"], "d_ff": r["d_ff"],
                                "parameters": r["parameters"], "first": r["first"],
                                "final": r["final"], "extrapolation": r["extrapolation"],
                                "accuracy": r["accuracy"]}
        model = DecoderOnly.from_config(r["config"], np.random.default_rng(0))
        model.load_parameters(r["parameters_of_model"])
        models[name] = model
    print("\n5 · the norm's placement and type apart (seed 0, warm-up 100)", flush=True)
    run_all(norm_jobs(best), args.jobs, done)
    record["norms"] = norms_table(done, best, record["grid"])
    print(f"\nall runs: {len(done)}, {time.time() - start:.0f} s", flush=True)

    if args.save:
        runs_digest = save_runs(record, MODERN_RUNS)
        training = {"recipe": "helpers.reversal.train_reverse_lm(0, config, peak=rate)",
                    "target": TARGET, "runs_sha256": runs_digest,
                    "regenerate": "python benchmarks/train_modern.py --save"}
        digest = save_models(models, {"runs_sha256": runs_digest, "training": training},
                             MODERN_MODELS, MODERN_MANIFEST)
        for path, sha in ((MODERN_MODELS, digest), (MODERN_RUNS, runs_digest)):
            print(f"saved {path.name} ({path.stat().st_size:,} bytes), SHA-256 {sha}")
    return 0


def save_record(record: dict) -> None:
    """Write the runs `record` back and its digest into the manifest (both of its copies)."""
    digest = save_runs(record, MODERN_RUNS, MODERN_MANIFEST)
    info = json.loads(MODERN_MANIFEST.read_text())
    info["training"]["runs_sha256"] = digest  # the copy under "training" too
    MODERN_MANIFEST.write_text(json.dumps(info, indent=1) + "\n")
    print(f"saved {MODERN_RUNS.name}, SHA-256 {digest}")


def norms_only(args, start: float) -> int:
    """Table 5 alone, at the best rates of the saved record, written into it with --save."""
    from helpers.data import load_runs
    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    best, done = record["best_rate"], {}
    print("5 · the norm's placement and type apart (seed 0, warm-up 100); best rates of the "
          f"record: {best}", flush=True)
    run_all(norm_jobs(best), args.jobs, done)
    record["norms"] = norms_table(done, best, record["grid"])
    print(f"\nruns: {len(done)}, {time.time() - start:.0f} s", flush=True)
    if args.save:
        save_record(record)
    return 0


def edges(args, start: float) -> int:
    """Table 1 at EDGE_RATES, seeds 0-2, warm-up 100, both recipes, added with --save to the
    saved record's table 1 (its rates in order); best_rate, the rate of tables 2 to 5, is kept."""
    from helpers.data import load_runs
    record = load_runs(MODERN_RUNS, MODERN_MANIFEST)
    done: dict = {}
    print(f"1 · steps to a validation exact match >= {TARGET}, warm-up 100, at the edge rates "
          f"{EDGE_RATES}", flush=True)
    run_all([{"recipe": r, "rate": rate, "warmup": 100, "seed": s}
             for r in RECIPES.values() for rate in EDGE_RATES for s in SEEDS], args.jobs, done)
    rates = sorted(set(record["rates"]) | set(EDGE_RATES))
    print("   recipe  " + "  ".join(f"rate {r:<7g}" for r in rates))
    for name, recipe in RECIPES.items():
        sweep = record["sweep"][name]
        for rate in EDGE_RATES:
            sweep[str(rate)] = [get(done, recipe, rate, 100, s)["first"] for s in SEEDS]
        record["sweep"][name] = {str(rate): sweep[str(rate)] for rate in rates}
        medians = {rate: median_steps([{"first": f} for f in sweep[str(rate)]]) for rate in rates}
        print(f"   {name:6s}  " + "  ".join(f"{'/'.join(map(show, sweep[str(r)])):<12s}"
                                            for r in rates)
              + f"  best of these: {min(rates, key=lambda r: (medians[r], r)):g}")
    record["rates"] = rates
    print(f"\nruns: {len(done)}, {time.time() - start:.0f} s", flush=True)
    if args.save:
        save_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
