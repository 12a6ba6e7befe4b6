"""Train notebook 07's reversal model in NumPy: time to the stopping rule, tokens per second.

    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py            # one core, seed 0
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --seeds 0 1 2
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --save     # regenerate data/

Prints, per seed, the steps and wall-clock seconds until the stopping rule (two validation
evaluations in a row with 100% exact match on the 1,000 validation sequences, greedy decoding,
EOS included), the time per training step, the training throughput in real (non-padding) target
tokens per second, training steps only, and the exact match on the 1,000 test sequences,
evaluated once after training.
--save writes data/reverse_model.npz and data/reverse_model.json (seed 0, the notebook's run);
the result is bit-for-bit the same on every run with the same NumPy and BLAS build.
This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import REVERSE_MODEL, save_reverse_model  # noqa: E402
from helpers.training import (  # noqa: E402
    PAD,
    REVERSE_CONFIG,
    exact_match,
    make_targets,
    sample_sequences,
    train_reverse,
)

NOTEBOOK_SEED = 0


def real_tokens_per_step(seed: int, steps: int, batch_size: int = 128) -> float:
    """Mean number of non-padding target tokens in a training batch (independent draw)."""
    rng = np.random.default_rng(seed)
    src, lengths = sample_sequences(rng, batch_size * min(steps, 50))
    _, tgt_out = make_targets(src, lengths)
    return float((tgt_out != PAD).sum()) / min(steps, 50)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[NOTEBOOK_SEED])
    parser.add_argument("--save", action="store_true", help="write data/reverse_model.{npz,json}")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
          f"NumPy {np.__version__} · OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    print(f"{'seed':>4s} {'steps':>6s} {'seconds':>8s} {'ms/step':>8s} {'train tok/s':>12s} "
          f"{'eval s':>7s} {'val':>6s} {'test':>6s}")
    for seed in args.seeds:
        eval_time = [0.0]
        step_times = []
        last = [time.perf_counter()]

        def callback(history, eval_time=eval_time, step_times=step_times, last=last):
            now = time.perf_counter()
            step_times.append(now - last[0])  # includes the evaluation when there was one
            last[0] = now

        start = time.perf_counter()
        model, history, task = train_reverse(seed, callback=callback)
        total = time.perf_counter() - start
        steps = len(history["loss"])
        # evaluation steps are the slow outliers: count training-only steps with the median
        train_step = float(np.median(step_times))
        eval_time[0] = total - train_step * steps
        tokens = real_tokens_per_step(seed, steps)
        acc = history["accuracy"][-1]
        test = float(exact_match(model, task["test"]["src"], task["test"]["tgt_out"]).mean())
        print(f"{seed:4d} {steps:6d} {total:8.1f} {train_step * 1e3:8.1f} "
              f"{tokens / train_step:12,.0f} {eval_time[0]:7.1f} {acc:6.3f} {test:6.3f}")
        if args.save and seed == NOTEBOOK_SEED:
            training = {"seed": seed, "steps": steps, "validation_exact_match": acc,
                        "test_exact_match": test,
                        "stopping_rule": "two validation evaluations in a row at 100%",
                        "recipe": "helpers.training.train_reverse(0)",
                        "regenerate": "python benchmarks/train_reverse.py --save"}
            digest = save_reverse_model(model, REVERSE_CONFIG, training)
            size = REVERSE_MODEL.stat().st_size
            print(f"saved {REVERSE_MODEL.name} ({size:,} bytes), SHA-256 {digest}")


if __name__ == "__main__":
    main()
