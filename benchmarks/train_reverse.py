"""Train notebook 07's reversal model in NumPy: per-seed results, time per step, tokens per second.

    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py                    # seed 0
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --seeds 0 1 2 3 4  # the seed table
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --seeds 0 1 2 3 4 --recipes --warmup
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --seeds 0 1 2 3 4 --save  # data/
    python benchmarks/train_reverse.py --vs-torch         # one step against PyTorch's, 1 thread
    OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --live --seeds 0 1 2 3 4 5 6 7

For each seed it trains `helpers.reversal.train_reverse(seed)`, notebook 07's recipe (the paper's
warm-up, then a linear decay to 0 at step 600, gradients clipped to norm 2, no early stop), and
prints the steps and wall-clock seconds, the time per training step (median; evaluations are the
slow outliers), the training throughput in real (non-padding) target tokens per second, the
validation exact match (1,000 sequences, greedy decoding, EOS included) at the end and the first
step at which it reached 1.000, then the exact match on the 1,000 sequences of validation 2,
evaluated once at the end. The validation curve is what chose the recipe; validation 2's accuracy
was seen while it was tuned, so it is no test set (notebook 07 draws its test set itself).

--recipes also trains every seed without each of the two additions, for the same 600 steps: no
          clipping; the paper's schedule (1 / sqrt(step) after the warm-up); and both, the paper's
          schedule without clipping, the recipe notebook 07 started from.
--warmup  also runs notebook 07's warm-up study (Going further) for every seed: Post-LN and
          Pre-LN, with and without warm-up, 250 steps each of the same 600-step schedule.
--save    writes data/reverse_model.npz and .json (seed 0's model) and data/reverse_runs.json
          (every curve printed, which notebook 07 plots); it implies --recipes and --warmup and
          needs seeds 0-4. Bit for bit the same files with the same NumPy and BLAS build.
--vs-torch  instead, times one training step (forward, loss, backward, clipping, Adam) of this
          model and of the same model in PyTorch (nn.Transformer with the same sizes, 60,653
          parameters each), one thread each, in one process, on the same batches, the two
          alternating step by step (which goes first alternates too); prints both medians and
          the ratio. PyTorch is optional: `pip install -r requirements-bench.txt`.
--live    instead, notebook 07's live run (section 10: 240 steps, warm-up 40) for each seed, and
          whether it passes the notebook's checks of that run: validation and validation 2
          (all, and lengths 4-10) at least 0.99, the mean loss of the last 50 steps within 0.05 of
          its floor; and the share of clipped steps, which the notebook only prints.
This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

if "--vs-torch" in sys.argv and os.environ.get("OPENBLAS_NUM_THREADS") != "1":
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # one BLAS thread: decided before NumPy loads
    os.execv(sys.executable, [sys.executable, *sys.argv])

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import REVERSE_MODEL, REVERSE_RUNS, save_reverse_model, save_runs  # noqa: E402
from helpers.reversal import (  # noqa: E402
    PAD,
    REVERSE_CONFIG,
    exact_match,
    make_targets,
    reverse_batches,
    sample_sequences,
    train_reverse,
)
from helpers.training import (  # noqa: E402
    Adam,
    clip_by_global_norm,
    cross_entropy,
    first_below,
    lrate_linear_decay,
)
from helpers.transformer import Transformer, positional_encoding  # noqa: E402

NOTEBOOK_SEED = 0
WARMUP_BUDGET = 250
RECIPES = {  # name -> the arguments of train_reverse that differ from notebook 07's recipe
    "ours": {},
    "no clipping": {"clip": None},
    "paper's schedule": {"schedule": "paper"},
    "paper's schedule, no clipping": {"schedule": "paper", "clip": None},
}
TITLES = {
    "ours": "notebook 07's recipe: warm-up 100, linear decay to 0 at step 600, clip 2",
    "no clipping": "the same without clipping",
    "paper's schedule": "the paper's schedule (1 / sqrt(step) after the warm-up), clip 2",
    "paper's schedule, no clipping": "the paper's schedule and no clipping (where we started)",
}


def real_tokens_per_step(seed: int, batch_size: int = 128, batches: int = 50) -> float:
    """Mean number of non-padding target tokens in a training batch (independent draw)."""
    src, lengths = sample_sequences(np.random.default_rng(seed), batch_size * batches)
    _, tgt_out = make_targets(src, lengths)
    return float((tgt_out != PAD).sum()) / batches


def first_perfect(history: dict) -> int | None:
    """The first evaluation step with 100% validation exact match (None if there is none)."""
    return next((s for s, a in zip(history["eval_step"], history["accuracy"]) if a == 1.0), None)


def rounded(values, digits=5) -> list:
    return [float(f"{v:.{digits}g}") for v in values]


def run(seed: int, **recipe) -> dict:
    """One training run, timed; returns what the tables print and notebook 07 plots."""
    step_times, last = [], [time.perf_counter()]

    def callback(history, model):
        now = time.perf_counter()
        step_times.append(now - last[0])  # includes the evaluation when there was one
        last[0] = now

    start = time.perf_counter()
    model, history, task = train_reverse(seed, callback=callback, **recipe)
    seconds = time.perf_counter() - start
    val2 = float(exact_match(model, task["val2"]["src"], task["val2"]["tgt_out"]).mean())
    step = float(np.median(step_times))
    return {"model": model, "seed": seed, "steps": len(history["loss"]), "seconds": seconds,
            "ms_per_step": step * 1e3, "eval_seconds": seconds - step * len(history["loss"]),
            "tokens_per_second": real_tokens_per_step(seed) / step, "val2": val2,
            "val": history["accuracy"][-1], "first_perfect": first_perfect(history),
            "history": history}


def curves(r: dict) -> dict:
    h = r["history"]
    return {"seed": r["seed"], "steps": r["steps"], "val2_exact_match": r["val2"],
            "loss": rounded(h["loss"]), "grad_norm": rounded(h["grad_norm"]),
            "eval_step": h["eval_step"], "accuracy": h["accuracy"]}


def print_table(title: str, results: list[dict]) -> None:
    print(f"\n{title}")
    print(f"{'seed':>4s} {'steps':>6s} {'seconds':>8s} {'ms/step':>8s} {'train tok/s':>12s} "
          f"{'eval s':>7s} {'val':>6s} {'first 1.000':>12s} {'max |g|':>8s} {'val 2':>6s}")
    for r in results:
        first = r["first_perfect"] if r["first_perfect"] is not None else "never"
        print(f"{r['seed']:4d} {r['steps']:6d} {r['seconds']:8.1f} {r['ms_per_step']:8.1f} "
              f"{r['tokens_per_second']:12,.0f} {r['eval_seconds']:7.1f} {r['val']:6.3f} "
              f"{first!s:>12s} {max(r['history']['grad_norm']):8.1f} {r['val2']:6.3f}")
    perfect = sum(r["val2"] == 1.0 for r in results)
    print(f"validation 2 exact match 1.000 for {perfect} of {len(results)} seeds")


def warmup_study(seed: int) -> dict:
    """Notebook 07's warm-up study (Going further) for one seed: 4 runs of WARMUP_BUDGET steps."""
    rows = {}
    for norm_first in (False, True):
        for ramp in (True, False):
            _, h, _ = train_reverse(seed, norm_first=norm_first, ramp=ramp, budget=WARMUP_BUDGET,
                                    eval_every=WARMUP_BUDGET)
            name = f"{'Pre-LN' if norm_first else 'Post-LN'}, {'warm-up' if ramp else 'no warm-up'}"
            rows[name] = {"loss": rounded(h["loss"]), "accuracy": h["accuracy"][-1]}
    return rows


def torch_reverse_model(torch, config):
    """The same model in PyTorch: embeddings * sqrt(d_model) + the same sinusoidal PE, Post-LN
    nn.Transformer blocks (no final LayerNorm, like ours), a linear map to the logits."""
    nn, c = torch.nn, config

    class Reverse(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
            self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model)
            layer = {"dim_feedforward": c.d_ff, "dropout": 0.0, "batch_first": True}
            encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(c.d_model, c.n_heads,
                                                                       **layer),
                                            c.n_layers, enable_nested_tensor=False)
            decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(c.d_model, c.n_heads,
                                                                       **layer), c.n_layers)
            self.transformer = nn.Transformer(c.d_model, c.n_heads, custom_encoder=encoder,
                                              custom_decoder=decoder, batch_first=True)
            self.out = nn.Linear(c.d_model, c.tgt_vocab)
            pe = positional_encoding(c.max_len, c.d_model, dtype=np.float32)
            self.register_buffer("pe", torch.from_numpy(pe))

        def forward(self, src, tgt):
            S, T = src.shape[1], tgt.shape[1]
            scale = c.d_model**0.5
            x = self.src_embed(src) * scale + self.pe[:S]
            y = self.tgt_embed(tgt) * scale + self.pe[:T]
            causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            y = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src == PAD,
                                 tgt_key_padding_mask=tgt == PAD,
                                 memory_key_padding_mask=src == PAD)
            return self.out(y)

    return Reverse()


def vs_torch(seed: int, steps: int = 120, skip: int = 20) -> int:
    """One training step of notebook 07's model, NumPy against PyTorch: the same sizes, batches,
    loss (label smoothing 0.1, padding ignored), clipping (2.0), Adam and learning rates."""
    try:
        import torch
    except ImportError:
        print("--vs-torch needs PyTorch, an optional extra of the benchmarks (never of the "
              "series):\n    .venv/bin/python -m pip install -r requirements-bench.txt")
        return 1
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    config = REVERSE_CONFIG
    ours = Transformer.from_config(config, np.random.default_rng(seed))
    theirs = torch_reverse_model(torch, config)
    n_ours = sum(p.size for p in ours.parameters().values())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    optimizer = Adam(ours.parameters())
    torch_optimizer = torch.optim.Adam(theirs.parameters(), betas=(0.9, 0.98), eps=1e-9)
    torch_loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD)
    batches = reverse_batches(np.random.default_rng(seed + 1))

    def numpy_step(step, src, tgt_in, tgt_out):
        loss, d_logits = cross_entropy(ours.forward(src, tgt_in), tgt_out, label_smoothing=0.1,
                                       ignore_id=PAD)
        _, grads = ours.backward(d_logits)
        grads, _ = clip_by_global_norm(grads, 2.0)
        optimizer.step(grads, float(rate(step)))
        return loss

    def torch_step(step, src, tgt_in, tgt_out):
        for group in torch_optimizer.param_groups:
            group["lr"] = float(rate(step))
        torch_optimizer.zero_grad(set_to_none=True)
        logits = theirs(src, tgt_in)
        loss = torch_loss(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 2.0)
        torch_optimizer.step()
        return loss.item()

    def rate(step):
        return lrate_linear_decay(step, config.d_model, 100, 600, factor=0.5)

    times = {"NumPy": [], "PyTorch": []}
    losses = {}
    for step in range(1, steps + 1):
        (src, tgt_in), tgt_out = batches(step)
        tensors = [torch.from_numpy(a.astype(np.int64)) for a in (src, tgt_in, tgt_out)]
        runs = [("NumPy", numpy_step, (src, tgt_in, tgt_out)), ("PyTorch", torch_step, tensors)]
        for name, fn, args in runs if step % 2 else runs[::-1]:  # who goes first alternates
            start = time.perf_counter()
            losses[name] = fn(step, *args)
            if step > skip:  # the first steps warm caches and allocators up
                times[name].append(time.perf_counter() - start)
    ms = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
    print(f"PyTorch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}")
    print(f"notebook 07's model, batch 128, float32: {n_ours:,} parameters in NumPy, "
          f"{n_theirs:,} in PyTorch")
    print(f"one training step (forward, loss, backward, clipping, Adam), median of "
          f"{steps - skip} steps after {skip} to warm up, the two alternating:")
    for name in times:
        print(f"   {name:8s} {ms[name]:6.1f} ms   (loss after {steps} steps {losses[name]:.3f})")
    print(f"   NumPy / PyTorch step-time ratio: {ms['NumPy'] / ms['PyTorch']:.2f}")
    return 0


def live(seeds: list[int]) -> int:
    """Notebook 07's live run for each seed, against the checks the notebook makes of it."""
    q = np.full(13, 0.1 / 13)  # the smoothed target of notebook 07 section 6: 13 tokens, 0.1
    q[0] += 0.9
    floor = float(-(q * np.log(q)).sum())  # the lowest loss: the entropy of q
    print(f"notebook 07's live run (240 steps, warm-up 40); floor {floor:.3f}")
    print(f"{'seed':>4s} {'seconds':>8s} {'val':>6s} {'val 2':>6s} {'4-10':>6s} {'loss':>6s} "
          f"{'clipped':>8s}  checks")
    passed = 0
    for seed in seeds:
        start = time.perf_counter()
        model, history, task = train_reverse(seed, steps=240, warmup=40, eval_every=80)
        seconds = time.perf_counter() - start
        val2 = task["val2"]
        correct = exact_match(model, val2["src"], val2["tgt_out"])
        unseen = val2["lengths"] >= 4
        loss = float(np.mean(history["loss"][-50:]))
        ok = (min(history["accuracy"][-1], correct.mean(), correct[unseen].mean()) >= 0.99
              and 0 <= loss - floor <= 0.05)
        passed += ok
        print(f"{seed:4d} {seconds:8.1f} {history['accuracy'][-1]:6.3f} {correct.mean():6.3f} "
              f"{correct[unseen].mean():6.3f} {loss:6.3f} "
              f"{np.mean(np.array(history['grad_norm']) > 2):8.0%}  {'pass' if ok else 'FAIL'}")
    print(f"the notebook's checks pass for {passed} of {len(seeds)} seeds")
    return 0 if passed == len(seeds) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[NOTEBOOK_SEED])
    parser.add_argument("--recipes", action="store_true", help="also the recipe without each "
                        "addition (clipping, the linear decay)")
    parser.add_argument("--warmup", action="store_true", help="also the warm-up study "
                        "(notebook 07, Going further)")
    parser.add_argument("--save", action="store_true", help="write data/reverse_*.{npz,json}")
    parser.add_argument("--vs-torch", action="store_true", help="instead, time one training "
                        "step against the same model in PyTorch (requirements-bench.txt)")
    parser.add_argument("--live", action="store_true", help="instead, notebook 07's live run "
                        "(240 steps) for each seed, against the notebook's checks")
    args = parser.parse_args()
    if args.live:
        sys.exit(live(args.seeds))
    if args.vs_torch:
        sys.exit(vs_torch(args.seeds[0]))
    if args.save and sorted(args.seeds) != [0, 1, 2, 3, 4]:
        parser.error("--save records seeds 0 1 2 3 4 (notebook 07 reads all five)")
    recipes, warmup = args.recipes or args.save, args.warmup or args.save
    print(f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
          f"NumPy {np.__version__} · OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")

    record, ours = {"recipes": {}}, None
    for name, recipe in RECIPES.items():
        if name != "ours" and not recipes:
            continue
        results = [run(seed, **recipe) for seed in args.seeds]
        print_table(TITLES[name], results)
        record["recipes"][name] = {"arguments": recipe, "runs": [curves(r) for r in results]}
        ours = results if name == "ours" else ours
    if warmup:
        print(f"\nwarm-up study: steps until the mean of 10 losses is below 1.0 "
              f"({WARMUP_BUDGET} steps of each)")
        names = ["Post-LN, warm-up", "Post-LN, no warm-up", "Pre-LN, warm-up",
                 "Pre-LN, no warm-up"]
        print(f"{'seed':>4s} " + " ".join(f"{n:>20s}" for n in names))
        record["warmup"] = []
        for seed in args.seeds:
            rows = warmup_study(seed)
            record["warmup"].append({"seed": seed, "runs": rows})
            print(f"{seed:4d} " + " ".join(f"{first_below(rows[n]['loss'], 1.0)!s:>20s}"
                                          for n in names))
    if args.save:
        model = next(r["model"] for r in ours if r["seed"] == NOTEBOOK_SEED)
        seed0 = next(r for r in ours if r["seed"] == NOTEBOOK_SEED)
        runs_digest = save_runs(record)
        training = {"seed": NOTEBOOK_SEED, "steps": seed0["steps"],
                    "validation_exact_match": seed0["val"], "val2_exact_match": seed0["val2"],
                    "recipe": "helpers.reversal.train_reverse(0)",
                    "regenerate": "python benchmarks/train_reverse.py --seeds 0 1 2 3 4 --save",
                    "runs": REVERSE_RUNS.name, "runs_sha256": runs_digest}
        digest = save_reverse_model(model, training)
        print(f"\nsaved {REVERSE_MODEL.name} ({REVERSE_MODEL.stat().st_size:,} bytes), "
              f"SHA-256 {digest}")
        print(f"saved {REVERSE_RUNS.name} ({REVERSE_RUNS.stat().st_size:,} bytes), "
              f"SHA-256 {runs_digest}")


if __name__ == "__main__":
    main()
