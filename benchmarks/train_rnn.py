"""Train notebook 10's character RNN (helpers/rnn.py, a GRU) on tiny Shakespeare exactly as the
committed Transformer was trained, and record it beside the Transformer.

    python benchmarks/train_rnn.py            # train and print the figures
    python benchmarks/train_rnn.py --save     # ... and write data/rnn_model.npz and .json

The same text split (the first 90% for training), the same recipe, read from
data/lm_model.json (5,000 steps of 32 random windows of 64 characters, AdamW (0.9, 0.99, weight
decay 0.1), the cosine schedule from 2e-3 to 1e-4 after 100 warm-up steps, gradients clipped
to 1), the same seed and hence the same batches, and the same loop: helpers.lm.train_lm. No
hyper-parameter differs: the peak rate 2e-3 is also char-rnn's default; no sweep was run.
The RNN has 812,993 parameters (embedding 128, GRU state 448), the Transformer 802,048.
Its state starts at zero in every window, as the Transformer's context does. The --save run
took 18 minutes on one core of a 2-core machine shared with other jobs (211 ms a training step).

The figures recorded: nanoGPT's 20-batch validation and training estimates every 500 steps,
the loss every 10 steps, the loss over the whole validation split (helpers.lm.split_loss, the
Transformer's measure, the same windows) of the weights as stored (float16, widened to float32;
the float32 weights' loss too), the wall time, a timing of both models' training steps side by
side (--time-steps steps each, interleaved, on the same batches, this process's BLAS threads),
and a sample of each model at the same temperature and seed. --threads N: BLAS threads
(default 1, the committed Transformer's). This is a benchmark that prints figures, not a timed
test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import blas_setup  # noqa: E402

blas_setup.threads_from_command_line("1")  # before NumPy loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import (  # noqa: E402
    LM_MANIFEST,
    REGENERATE,
    RNN_MODEL,
    load_lm,
    load_shakespeare,
    save_rnn,
)
from helpers.lm import (  # noqa: E402
    AdamW,
    Characters,
    Recipe,
    lm_model,
    sampler,
    split,
    split_loss,
    train_lm,
    windows,
    write,
)
from helpers.rnn import CharRNN, rnn_write  # noqa: E402
from helpers.training import clip_by_global_norm, cross_entropy  # noqa: E402

SAMPLE = {"prompt": "\n", "characters": 400, "temperature": 0.8, "seed": 0}


def time_steps(models, train_ids, recipe, steps):
    """Median seconds of one training step (forward, loss, backward, clipping, AdamW) of each
    model, the models taking turns on the same batches."""
    rng, times = np.random.default_rng(0), {name: [] for name in models}
    optimizers = {name: AdamW(m.parameters(), beta2=recipe.beta2, eps=1e-8,
                              weight_decay=recipe.weight_decay) for name, m in models.items()}
    for _ in range(steps):
        x, y = windows(train_ids, rng, recipe.batch, recipe.context)
        for name, model in models.items():
            start = time.perf_counter()
            loss, d_logits = cross_entropy(model.forward(x), y)
            _, grads = model.backward(d_logits)
            grads, _ = clip_by_global_norm(grads, recipe.clip)
            optimizers[name].step(grads, recipe.peak)
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def samples(rnn, transformer, chars, context):
    prompt = chars.encode(SAMPLE["prompt"])[None]
    out = {}
    for name, model in (("rnn", rnn), ("transformer", transformer)):
        pick = sampler(np.random.default_rng(SAMPLE["seed"]), SAMPLE["temperature"])
        if name == "rnn":
            ids = rnn_write(model, prompt, SAMPLE["characters"], pick=pick)
        else:
            ids = write(model, prompt, SAMPLE["characters"], pick=pick, context=context)
        out[name] = chars.decode(ids[0])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", action="store_true", help="write data/rnn_model.npz and .json")
    parser.add_argument("--steps", type=int, default=None,
                        help="fewer steps than the recipe's, to try (not with --save)")
    parser.add_argument("--time-steps", type=int, default=40)
    parser.add_argument("--threads", default="1", help="BLAS threads (default 1)")
    args = parser.parse_args(argv)
    if args.save and args.steps is not None:
        parser.error("--save records the recipe's full run: no --steps")
    lm_manifest = json.loads(LM_MANIFEST.read_text(encoding="utf-8"))
    recipe = Recipe(**lm_manifest["training"]["recipe"])  # the committed Transformer's
    if args.steps is not None:
        recipe = Recipe(**{**lm_manifest["training"]["recipe"], "steps": args.steps,
                           "warmup": min(recipe.warmup, args.steps - 1),
                           "eval_every": min(recipe.eval_every, args.steps)})
    text = load_shakespeare()
    chars = Characters(text)
    train_ids, val_ids = split(chars.encode(text))
    machine = (f"{platform.machine()} · Python {platform.python_version()} · NumPy "
               f"{np.__version__} · OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    print(machine, flush=True)

    model = CharRNN(len(chars), np.random.default_rng(0), max_len=recipe.context)
    parameters = sum(p.size for p in model.parameters().values())
    transformer, _ = load_lm()
    t_parameters = sum(p.size for p in transformer.parameters().values())
    print(f"CharRNN {model.config}: {parameters:,} parameters (Transformer {t_parameters:,})")
    print(f"recipe: {recipe}", flush=True)
    start = time.perf_counter()

    def progress(history, model):
        if history["eval_step"] and history["eval_step"][-1] == len(history["loss"]):
            print(f"  step {len(history['loss']):5d}  val {history['val'][-1]:.4f}  train "
                  f"{history['train'][-1]:.4f}  {time.perf_counter() - start:7.1f} s", flush=True)

    history = train_lm(model, train_ids, val_ids, recipe, seed=0, callback=progress)
    total = time.perf_counter() - start
    step_ms = history["seconds"] / len(history["loss"]) * 1e3
    full32 = split_loss(model, val_ids, context=recipe.context)
    for p in model.parameters().values():  # the weights as stored: float16, widened again
        p[...] = p.astype(np.float16)
    full = split_loss(model, val_ids, context=recipe.context)
    head = split_loss(model, val_ids[:16385], context=recipe.context)
    print(f"{len(history['loss'])} steps in {total:.1f} s ({step_ms:.1f} ms a training step)")
    print(f"validation loss over the whole split: {full:.4f} (float32 weights {full32:.4f}); "
          f"the Transformer's: {lm_manifest['training']['val_loss_full_split']:.4f}")
    timing = time_steps({"rnn": CharRNN(len(chars), np.random.default_rng(1),
                                        max_len=recipe.context),
                         "transformer": lm_model()}, train_ids, recipe, args.time_steps)
    print(f"a training step, median of {args.time_steps}, taking turns: RNN "
          f"{timing['rnn'] * 1e3:.1f} ms, Transformer {timing['transformer'] * 1e3:.1f} ms")
    written = samples(model, transformer, chars, recipe.context)
    for name, sample in written.items():
        print(f"\n--- {name}, temperature {SAMPLE['temperature']}, seed {SAMPLE['seed']} ---")
        print(sample)
    if args.save:
        every = {"eval_step": history["eval_step"]}
        training = {"recipe": lm_manifest["training"]["recipe"], "seed": 0,
                    "threads": os.environ["OPENBLAS_NUM_THREADS"], "machine": machine,
                    "iterations": len(history["loss"]), "parameters": parameters,
                    "transformer_parameters": t_parameters,
                    "val_estimates": dict(zip(map(str, every["eval_step"]), history["val"])),
                    "train_estimates": dict(zip(map(str, every["eval_step"]),
                                                history["train"])),
                    "loss_every_10": [float(f"{v:.4g}") for v in history["loss"][::10]],
                    "val_loss_full_split": full, "val_loss_full_split_float32": full32,
                    "val_loss_first_16384_characters": head,
                    "seconds": total, "training_step_ms": step_ms,
                    "step_ms_side_by_side": {name: t * 1e3 for name, t in timing.items()},
                    "side_by_side_steps": args.time_steps,
                    "samples": {**SAMPLE, **written},
                    "regenerate": REGENERATE[RNN_MODEL.name], "chars": "".join(chars.chars)}
        digest = save_rnn(model, {"training": training})
        print(f"\nsaved {RNN_MODEL.name} ({RNN_MODEL.stat().st_size:,} bytes), SHA-256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
