"""Train notebook 10's character language model on tiny Shakespeare, in NumPy, and compare with
nanoGPT's CPU recipe on this machine.

    python benchmarks/train_lm.py                             # the committed model's recipe
    python benchmarks/train_lm.py --save                      # ... and write data/lm_model.*
    python benchmarks/train_lm.py --recipe nanogpt-cpu        # nanoGPT's CPU hyper-parameters
    python benchmarks/train_lm.py --recipe nanogpt-cpu --blocks 2017   # with the 2017 blocks
    python benchmarks/train_lm.py --recipe nanogpt-cpu --vs-torch      # + PyTorch, same run

Both recipes train helpers.lm's DecoderOnly model with helpers.lm.train_lm (notebook 07's train
loop, AdamW, nanoGPT's cosine schedule) on random windows of the first 90% of the text, and
report nanoGPT's estimate of the validation loss (the mean over 20 random batches of the
training batch's size, 12 x 64 characters for nanogpt-cpu and 32 x 64 for series, as its
estimate_loss computes it with --eval_iters=20) every 250 iterations (500 for series), the wall
time (evaluations included and excluded), and at the end the loss over the whole validation
split (every character predicted once, in consecutive windows of the context).

--recipe nanogpt-cpu: nanoGPT's documented CPU recipe for character-level Shakespeare: 4 layers,
  4 heads, d_model 128, context 64, batch 12, 2000 iterations, no dropout, AdamW (0.9, 0.99,
  weight decay 0.1 on the matrices), learning rate 1e-3 with a warm-up of 100 and a cosine decay
  to 1e-4, gradients clipped to 1, tied input and output embeddings. The blocks are ours:
  --blocks today (default: pre-norm RMSNorm, SwiGLU of width 344, RoPE, multi-head attention;
  0.80M parameters) or --blocks 2017 (Post-LN LayerNorm, ReLU of width 512, sinusoidal
  positions). nanoGPT's own blocks are GPT-2's (learned positions, GELU, pre-norm LayerNorm).
--recipe series (default): the committed model: the same sizes and context, batches of 32
  windows, 5000 iterations, a peak rate of 2e-3 (in 400 steps, 1e-3 trained more slowly).
  --save writes data/lm_model.npz and data/lm_model.json; run with --threads 1, it is bit for
  bit the same with the same NumPy and BLAS build.
--record: instead, the comparison in notebook 10's Going further: nanoGPT's CPU recipe with today's
  blocks and with the 2017 blocks (and, with PyTorch installed, the --vs-torch runs), written
  to data/lm_runs.json, its SHA-256 into data/lm_model.json.
--vs-torch: also trains, in this process, on the same batches and from the same initial
  weights, the same architecture in PyTorch, and nanoGPT's architecture (GPT-2 blocks, written
  out here, its initial weights from PyTorch's generator); prints the three side by side.
  PyTorch is optional: `pip install -r requirements-bench.txt`.
--threads N: BLAS (and PyTorch) threads, default 2, the count of nanoGPT's reference run here.
This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import blas_setup  # noqa: E402

blas_setup.threads_from_command_line("2")  # before NumPy loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import (  # noqa: E402
    LM_MANIFEST,
    LM_MODEL,
    LM_RUNS,
    load_shakespeare,
    save_models,
    save_runs,
)
from helpers.lm import (  # noqa: E402
    LM_CONFIG,
    NANOGPT_CPU,
    Characters,
    Recipe,
    lm_model,
    split,
    split_loss,
    train_lm,
)
from helpers.modern import PAPER_2017, TODAY  # noqa: E402

SERIES = Recipe(steps=5000, batch=32, context=64, peak=2e-3, eval_every=500)
RECIPES = {"series": SERIES, "nanogpt-cpu": NANOGPT_CPU}
BLOCKS = {"today": {**TODAY, "d_ff": 344}, "2017": {**PAPER_2017, "d_ff": 512}}
LABELS = {"today": "today's blocks", "2017": "the 2017 blocks"}  # in the runs' names
NANOGPT_REFERENCE = (1.886, 98.0)  # measured here with nanoGPT itself, 2 threads (issue 20)


def config_for(recipe: Recipe, blocks: str):
    return replace(LM_CONFIG, max_len=recipe.context, **BLOCKS[blocks])


def first_at_or_below(history, level=1.88):
    """(iteration, seconds of training and evaluation until then) of the first estimate <= level."""
    for k, (step, val) in enumerate(zip(history["eval_step"], history["val"])):
        if val <= level:
            return step, history["wall"][k]
    return None, None


def run_numpy(recipe, blocks, train_ids, val_ids, seed=0):
    model = lm_model(config_for(recipe, blocks), seed)
    start, walls = time.perf_counter(), []

    def callback(history, model):
        if history["eval_step"] and history["eval_step"][-1] == len(history["loss"]) and \
                len(walls) < len(history["eval_step"]):
            walls.append(time.perf_counter() - start)

    history = train_lm(model, train_ids, val_ids, recipe, seed=seed, callback=callback)
    history["wall"] = walls
    history["total"] = time.perf_counter() - start
    return model, history


def report(name, history, full_val, parameters):
    step, wall = first_at_or_below(history)
    print(f"\n{name}: {parameters:,} parameters")
    print("   iter   val (20 batches)   train (20 batches)   wall s")
    for s, v, t, w in zip(history["eval_step"], history["val"], history["train"], history["wall"]):
        print(f"   {s:4d}   {v:16.4f}   {t:18.4f}   {w:6.1f}")
    print(f"   {len(history['loss'])} iterations in {history['total']:.1f} s "
          f"({history['seconds']:.1f} s of training steps, "
          f"{history['seconds'] / len(history['loss']) * 1e3:.1f} ms each)")
    print(f"   validation loss over the whole split: {full_val:.4f}")
    print("   first estimate <= 1.88: " + ("never" if step is None
                                           else f"iteration {step}, after {wall:.1f} s"))


def summary(history, full_val, parameters):
    """What data/lm_runs.json keeps of a run."""
    step, wall = first_at_or_below(history)
    return {"eval_step": history["eval_step"], "val": history["val"], "train": history["train"],
            "wall": history["wall"], "total": history["total"], "seconds": history["seconds"],
            "iterations": len(history["loss"]), "full_val": full_val, "parameters": parameters,
            "first_at_1.88": step, "seconds_to_1.88": wall}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", choices=list(RECIPES), default="series")
    parser.add_argument("--blocks", choices=list(BLOCKS), default="today")
    parser.add_argument("--save", action="store_true", help="write data/lm_model.npz and .json")
    parser.add_argument("--record", action="store_true",
                        help="the nanoGPT-recipe comparison, written to data/lm_runs.json")
    parser.add_argument("--vs-torch", action="store_true", help="PyTorch side by side")
    parser.add_argument("--threads", default="2", help="BLAS and PyTorch threads (default 2)")
    args = parser.parse_args(argv)
    if args.save and (args.recipe != "series" or args.blocks != "today"):
        parser.error("--save writes the committed model: the series recipe with today's blocks")
    if args.record and args.save:
        parser.error("--record and --save are two runs: one at a time")
    torch = None
    if args.vs_torch or args.record:
        try:
            import torch
        except ImportError:
            if args.vs_torch:
                print("--vs-torch needs PyTorch: .venv/bin/python -m pip install -r "
                      "requirements-bench.txt")
                return 1
        else:
            torch.set_num_threads(int(args.threads))
    text = load_shakespeare()
    chars = Characters(text)
    train_ids, val_ids = split(chars.encode(text))
    machine = (f"{platform.machine()} · Python {platform.python_version()} · NumPy "
               f"{np.__version__} · OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
               + (f" · PyTorch {torch.__version__}, {torch.get_num_threads()} threads"
                  if torch else ""))
    print(machine)
    print(f"text: {len(text):,} characters, {len(chars)} distinct; train {len(train_ids):,}, "
          f"validation {len(val_ids):,}")

    if args.record:
        recipe, runs = NANOGPT_CPU, {}
        print(f"recipe nanogpt-cpu: {asdict(recipe)}")
        for blocks in BLOCKS:
            model, history = run_numpy(recipe, blocks, train_ids, val_ids)
            full_val = split_loss(model, val_ids, context=recipe.context)
            parameters = sum(p.size for p in model.parameters().values())
            name = f"NumPy, {LABELS[blocks]}"
            report(name, history, full_val, parameters)
            runs[name] = summary(history, full_val, parameters)
        if torch is not None:
            from torch_models import compare  # noqa: E402  (benchmarks/torch_models.py)
            numpy_today = runs[f"NumPy, {LABELS['today']}"]
            runs.update(compare(torch, recipe, LABELS["today"], config_for(recipe, "today"),
                                train_ids, val_ids, numpy_today, report, summary))
        loss, seconds = NANOGPT_REFERENCE
        record = {"machine": machine, "recipe": asdict(recipe), "runs": runs,
                  "nanogpt_reference": {"val": loss, "seconds": seconds, "iterations": 2000}}
        digest = save_runs(record, LM_RUNS, LM_MANIFEST)  # and its SHA-256 into the manifest
        print(f"\nsaved {LM_RUNS.name} ({LM_RUNS.stat().st_size:,} bytes), SHA-256 {digest}")
        return 0

    recipe = RECIPES[args.recipe]
    print(f"recipe {args.recipe}: {asdict(recipe)}; blocks: {args.blocks}")
    model, history = run_numpy(recipe, args.blocks, train_ids, val_ids)
    full_val = split_loss(model, val_ids, context=recipe.context)
    parameters = sum(p.size for p in model.parameters().values())
    report(f"NumPy, {LABELS[args.blocks]}", history, full_val, parameters)
    if args.recipe == "nanogpt-cpu":
        loss, seconds = NANOGPT_REFERENCE
        print(f"   nanoGPT's own run here (issue 20): {loss} after 2000 iterations in {seconds} s")
    if args.vs_torch:
        from torch_models import compare  # noqa: E402  (benchmarks/torch_models.py)
        compare(torch, recipe, LABELS[args.blocks], config_for(recipe, args.blocks), train_ids,
                val_ids, summary(history, full_val, parameters), report, summary)
    if args.save:
        training = {"recipe": asdict(recipe), "blocks": args.blocks, "seed": 0,
                    "threads": os.environ["OPENBLAS_NUM_THREADS"],
                    "iterations": len(history["loss"]),
                    "val_estimates": dict(zip(map(str, history["eval_step"]), history["val"])),
                    "train_estimates": dict(zip(map(str, history["eval_step"]),
                                                history["train"])),
                    "loss_every_10": [float(f"{v:.4g}") for v in history["loss"][::10]],
                    "val_loss_full_split": full_val,
                    # notebook 10 checks the loaded model on this slice (the whole split: 5 s)
                    "val_loss_first_16384_characters": split_loss(model, val_ids[:16385],
                                                                  context=recipe.context),
                    "seconds": history["total"],
                    "regenerate": "python benchmarks/train_lm.py --save --threads 1",
                    "chars": "".join(chars.chars)}
        try:
            old = json.loads(LM_MANIFEST.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}  # none, or broken: lm_runs.json needs --record again
        extra = {"training": training}
        if "runs_sha256" in old:
            extra["runs_sha256"] = old["runs_sha256"]  # the --record run's file stays valid
        digest = save_models({"": model}, extra, LM_MODEL, LM_MANIFEST)
        print(f"\nsaved {LM_MODEL.name} ({LM_MODEL.stat().st_size:,} bytes), SHA-256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
