"""Train notebook 11's German -> English translation model on Multi30k, in NumPy, on a CPU.

    python benchmarks/train_translation.py train --minutes 80 --threads 1   # the committed run
    python benchmarks/train_translation.py train --steps 1000 --label-smoothing 0 --name no_ls
    python benchmarks/train_translation.py record                      # write data/translation_*

`train` learns the shared byte-pair vocabulary (4,000 merges on the German and English training
words), then trains notebook 06's Transformer with notebook 07's train loop and the paper's
recipe at small size: d_model 256, 8 heads, d_ff 512, 3 + 3 layers, Post-LN, dropout 0.1, one
embedding matrix for both languages and the output (paper §3.4), Adam (0.9, 0.98, 1e-9), the
paper's schedule (warm-up 400 steps, then 1 / sqrt(step)), label smoothing 0.1, batches by length
of at most 2,500 padded tokens a side. Every 250 steps it measures the validation loss (without
smoothing: its exponential is the perplexity) and the greedy BLEU on the validation set; every
100 steps it keeps a checkpoint (the last 20 are written to build/translation/<name>.npz with the
history, build/ is not committed). --minutes stops at the first evaluation after that time.

`record` reads those checkpoints and writes data/: the model chosen on the validation set among
the last checkpoint and the averages of the last 5 and 20 (paper §6.1), stored in float16
(translation_model.npz; every number recorded is of the stored weights), the merges
(translation_bpe.txt), and translation_runs.json: the training curves, checkpoint averaging,
label smoothing on and off at the same step, greedy against beam search (BLEU and time), and the
test set's translations. --threads N: BLAS threads (default 2). A benchmark that prints figures.
"""

from __future__ import annotations

import argparse
import sys

import blas_setup  # noqa: E402

blas_setup.threads_from_command_line("2")  # before NumPy loads

import json  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.data import load_multi30k  # noqa: E402
from helpers.decoding import greedy_decode  # noqa: E402
from helpers.training import cross_entropy, lrate, train  # noqa: E402
from helpers.transformer import Transformer  # noqa: E402
from helpers.translation import (  # noqa: E402
    Vocabulary,
    average_checkpoints,
    batch_arrays,
    bleu,
    encode_pairs,
    epochs_of_batches,
    length_batches,
    translate,
    words,
)

BUILD = Path(__file__).resolve().parents[1] / "build" / "translation"
N_MERGES = 4000
SIZES = dict(d_model=256, n_heads=8, d_ff=512, n_layers=3, max_len=128, share_embeddings=True,
             tie_output=True, dropout=0.1, dtype="float32")
RECIPE = dict(warmup=400, factor=0.35, max_tokens=2500, label_smoothing=0.1, eval_every=250,
              checkpoint_every=100, keep=20, seed=0)


def vocabulary():
    german, english = load_multi30k("train")
    counts = Counter(w for s in german + english for w in words(s))
    return Vocabulary.learn(counts, N_MERGES)


def translate_greedy(model, vocab, src, batch=200):
    """Greedy translations of the id lists `src`, in their order."""
    order = np.argsort([len(s) for s in src], kind="stable")
    out = [None] * len(src)
    for start in range(0, len(src), batch):
        rows = order[start:start + batch]
        s = batch_arrays(src, src, rows)[0]
        steps = min(s.shape[1] + 10, len(model.pe))
        tokens, _ = greedy_decode(model, s, vocab.bos_id, vocab.eos_id, steps)
        for i, row in zip(rows, tokens):
            out[i] = vocab.decode(row[1:])
    return out


def validation_loss(model, src, tgt, max_tokens=4000):
    total, count = 0.0, 0
    for rows in length_batches([len(s) for s in src], [len(t) for t in tgt], max_tokens):
        s, t_in, t_out = batch_arrays(src, tgt, rows)
        loss, _ = cross_entropy(model.forward(s, t_in), t_out, ignore_id=0)
        n = int((t_out != 0).sum())
        total, count = total + loss * n, count + n
    model.cache = None
    return total / count


def run_training(args):
    vocab = vocabulary()
    train_src, train_tgt = encode_pairs(vocab, *load_multi30k("train"))
    val_de, val_en = load_multi30k("val")
    val_src, val_tgt = encode_pairs(vocab, val_de, val_en)
    model = Transformer(len(vocab), len(vocab), np.random.default_rng(RECIPE["seed"]), **SIZES)
    rng = np.random.default_rng(RECIPE["seed"] + 1)
    batches = epochs_of_batches(train_src, train_tgt, RECIPE["max_tokens"], rng)
    n_params = sum(p.size for p in model.parameters().values())
    print(f"vocabulary {len(vocab)}, parameters {n_params:,}", flush=True)
    start, checkpoints, wall = time.perf_counter(), [], []

    def loss(logits, tgt_out):
        return cross_entropy(logits, tgt_out, label_smoothing=args.label_smoothing, ignore_id=0)

    def evaluate(model):
        t = time.perf_counter()
        val = validation_loss(model, val_src, val_tgt)
        score = bleu(translate_greedy(model, vocab, val_src), val_en)
        wall.append(time.perf_counter() - start)
        print(f"  val loss {val:.3f} (perplexity {np.exp(val):.2f}), greedy BLEU {score:.2f} "
              f"[{wall[-1] / 60:.1f} min, evaluation {time.perf_counter() - t:.0f} s]", flush=True)
        return {"val_loss": val, "val_bleu": score}

    def callback(history, model):
        step = len(history["loss"])
        if step % 50 == 0:
            print(f"step {step}: loss {np.mean(history['loss'][-50:]):.3f}, "
                  f"{(time.perf_counter() - start) / step:.2f} s/step", flush=True)
        if step % RECIPE["checkpoint_every"] == 0:
            checkpoints.append((step, {k: v.copy() for k, v in model.parameters().items()}))
            del checkpoints[:-RECIPE["keep"]]

    def stop(history):
        step = len(history["loss"])
        return (args.minutes is not None and step % RECIPE["eval_every"] == 0
                and time.perf_counter() - start > args.minutes * 60)

    history = train(model, batches, loss, lambda step: lrate(step, SIZES["d_model"],
                                                              RECIPE["warmup"], RECIPE["factor"]),
                    steps=args.steps, rng=rng, evaluate=evaluate, eval_every=RECIPE["eval_every"],
                    stop=stop, callback=callback)
    history["wall"] = wall
    history["seconds"] = time.perf_counter() - start
    BUILD.mkdir(parents=True, exist_ok=True)
    arrays = {f"{step}/{name}": value for step, params in checkpoints
              for name, value in params.items()}
    np.savez(BUILD / f"{args.name}.npz", **arrays)
    (BUILD / f"{args.name}.json").write_text(json.dumps(
        {"history": {k: (np.asarray(v).tolist() if isinstance(v, list) else v)
                     for k, v in history.items()},
         "label_smoothing": args.label_smoothing, "sizes": SIZES, "recipe": RECIPE,
         "vocabulary": len(vocab), "steps": [s for s, _ in checkpoints]}) + "\n")
    print(f"done: {len(history['loss'])} steps in {history['seconds'] / 60:.1f} min", flush=True)


MERGES = (1000, 2000, 4000, 8000, 16000)  # the sizes the trade-off compares


def vocabulary_sizes(merges=MERGES):
    """The trade-off behind N_MERGES: for each number of merges, the vocabulary, the mean pieces
    per German and English training sentence, the share of pieces seen fewer than 10 times, and
    the multiply-adds per target piece of this model's layers and its output layer."""
    german, english = load_multi30k("train")
    counts = Counter(w for s in german + english for w in words(s))
    d, ff, n = SIZES["d_model"], SIZES["d_ff"], SIZES["n_layers"]
    layers = n * (4 * d * d + 2 * d * ff) + n * (8 * d * d + 2 * d * ff)  # encoder + decoder
    rows = []
    for m in merges:
        vocab = Vocabulary.learn(counts, m)
        seen = Counter()
        for word, count in counts.items():
            for piece in vocab.segment(word):
                seen[piece] += count
        de = np.mean([sum(len(vocab.segment(w)) for w in words(s)) + 1 for s in german])
        en = np.mean([sum(len(vocab.segment(w)) for w in words(s)) + 1 for s in english])
        rows.append({"merges": m, "vocabulary": len(vocab), "pieces_de": round(float(de), 2),
                     "pieces_en": round(float(en), 2),
                     "rare_share": round(sum(c < 10 for c in seen.values()) / len(seen), 3),
                     "layer_madds": layers, "output_madds": len(vocab) * d})
        print(rows[-1], flush=True)
    return rows


def _rounded(values, digits=4):
    return [round(float(v), digits) for v in values]


def _load_run(name):
    info = json.loads((BUILD / f"{name}.json").read_text())
    with np.load(BUILD / f"{name}.npz") as archive:
        arrays = {key: archive[key] for key in archive.files}
    checkpoints = [{key.split("/", 1)[1]: a for key, a in arrays.items()
                    if key.split("/", 1)[0] == str(step)} for step in info["steps"]]
    return info, checkpoints


def _stored(model, params):
    """`params` as the model holds them once saved in float16 and loaded (what data/ keeps)."""
    model.load_parameters({k: v.astype(np.float16).astype(v.dtype) for k, v in params.items()})
    return model


def run_record(args):
    from helpers.data import save_translation

    vocab = vocabulary()
    n = 30 if args.quick else None  # --quick: a smoke run on 30 sentences, written to build/
    val_de, val_en = (side[:n] for side in load_multi30k("val"))
    test_de, test_en = (side[:n] for side in load_multi30k("test_2016_flickr"))
    val_src, val_tgt = encode_pairs(vocab, val_de, val_en)
    info, checkpoints = _load_run(args.name)
    model = Transformer(len(vocab), len(vocab), np.random.default_rng(0), **SIZES)
    candidates = {"last checkpoint": checkpoints[-1:], "average of the last 5": checkpoints[-5:],
                  "average of the last 20": checkpoints[-20:]}
    averaging = {}
    for name, chosen in candidates.items():
        _stored(model, average_checkpoints(chosen))
        t = time.perf_counter()
        averaging[name] = {
            "checkpoints": len(chosen), "steps": info["steps"][-len(chosen):],
            "val_loss": round(validation_loss(model, val_src, val_tgt), 4),
            "val_bleu": round(bleu(translate(model, vocab, val_de), val_en), 2),
            "test_bleu": round(bleu(translate(model, vocab, test_de), test_en), 2)}
        print(name, averaging[name], f"{time.perf_counter() - t:.0f} s", flush=True)
    best = max(averaging, key=lambda n: averaging[n]["val_bleu"])  # chosen on validation only
    _stored(model, average_checkpoints(candidates[best]))
    decoding = {}
    for name, beam in (("greedy", None), ("beam 1", 1), ("beam 4", 4)):
        t = time.perf_counter()
        hypotheses = translate(model, vocab, test_de, beam=beam)
        seconds = time.perf_counter() - t
        decoding[name] = {"bleu": round(bleu(hypotheses, test_en), 2),
                          "seconds": round(seconds, 1), "hypotheses": hypotheses}
        print(name, decoding[name]["bleu"], f"{seconds:.1f} s", flush=True)
    try:
        import sacrebleu

        for entry in decoding.values():
            metric = sacrebleu.BLEU()  # its defaults: 13a, exp smoothing, case-sensitive
            entry["sacrebleu"] = round(metric.corpus_score(entry["hypotheses"], [test_en]).score,
                                       2)
            entry["sacrebleu_signature"] = str(metric.get_signature())
    except ImportError:
        print("sacrebleu is not installed (requirements-test.txt): its score is not recorded")
    history = info["history"]
    smoothing = {}
    if (BUILD / "no_ls.json").exists():  # the same run without label smoothing, shorter
        other = json.loads((BUILD / "no_ls.json").read_text())["history"]
        steps = [step for step in other["eval_step"] if step in history["eval_step"]]
        smoothing["eval_step"] = steps
        for name, h in (("with", history), ("without", other)):
            at = [h["eval_step"].index(step) for step in steps]
            smoothing[name] = {"val_loss": [round(h["val_loss"][i], 4) for i in at],
                               "val_perplexity": [round(float(np.exp(h["val_loss"][i])), 2)
                                                  for i in at],
                               "val_bleu": [round(h["val_bleu"][i], 2) for i in at]}
    losses = np.asarray(history["loss"])
    n = len(losses) // 10 * 10
    runs = {
        "machine": machine(args.threads),
        "training": {"steps": len(losses), "minutes": round(history["seconds"] / 60, 1),
                     "loss_every_10": _rounded(losses[:n].reshape(-1, 10).mean(axis=1)),
                     "eval_step": history["eval_step"], "val_loss": _rounded(history["val_loss"]),
                     "val_bleu": _rounded(history["val_bleu"], 2),
                     "minutes_at_eval": _rounded(np.asarray(history["wall"]) / 60, 2)},
        "averaging": averaging, "chosen": best, "decoding": decoding,
        "label_smoothing": smoothing,
        "vocabulary_sizes": vocabulary_sizes((1000, 2000) if args.quick else MERGES),
        "distinct_words": len(Counter(w for side in load_multi30k("train") for s in side
                                      for w in words(s)))}
    manifest = {"recipe": RECIPE, "n_merges": N_MERGES, "chosen": best,
                "test_bleu": {name: entry["bleu"] for name, entry in decoding.items()},
                "training_steps": len(losses), "training_minutes": runs["training"]["minutes"]}
    paths = {} if not args.quick else {
        "path": BUILD / "quick_model.npz", "manifest": BUILD / "quick_model.json",
        "runs_path": BUILD / "quick_runs.json"}
    digest = save_translation(model, vocab, manifest, runs, **paths)
    print(f"wrote {paths.get('path', 'data/translation_model.npz')} ({digest[:12]}) and its "
          "manifest and runs", flush=True)


def machine(threads):
    import platform

    return (f"{platform.machine()} · Python {platform.python_version()} · NumPy "
            f"{np.__version__} · OPENBLAS_NUM_THREADS={threads}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("train", "record"))
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--name", default="main")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--quick", action="store_true",
                        help="record: 30 sentences and two vocabulary sizes, written to build/")
    args = parser.parse_args(argv)
    if args.command == "train":
        run_training(args)
    else:
        run_record(args)


if __name__ == "__main__":
    main()
