"""The reversal task of notebook 07: digit sequences, their reversal, the recipe that learns it.

Every definition below is written in notebook 07 first, in a cell that starts with
``# saved in helpers/reversal.py``; ``tests/test_sync.py`` proves the two copies are identical.
The training loop itself, ``helpers.training.train``, knows nothing of this task.
"""

import time
from dataclasses import replace

import numpy as np

from helpers.decoding import greedy_decode
from helpers.modern import PAPER_2017, DecoderOnlyConfig
from helpers.module import clear_caches
from helpers.training import cross_entropy, lrate, lrate_linear_decay, train
from helpers.transformer import Transformer, TransformerConfig
from helpers.validation import check_positive_int

# ── 07 · Training ─────────────────────────────────────────────────────────────────────────────


PAD = 0
BOS = 1
EOS = 2
DIGITS = 10
MAX_LEN = 10
FIRST_DIGIT = 3  # digit d is token FIRST_DIGIT + d: ids 0, 1, 2 are PAD, BOS, EOS


VOCAB_SIZE = FIRST_DIGIT + DIGITS


def sample_sequences(rng, n, *, max_len=MAX_LEN, exclude=None):
    """n random digit sequences of lengths 1..max_len, right-padded: (src (n, max_len), lengths).

    Digit d is token FIRST_DIGIT + d (0, 1, 2 are PAD, BOS, EOS). A sequence whose bytes are in
    the set `exclude` (the held-out sequences) is drawn again.
    """
    lengths = rng.integers(1, max_len + 1, size=n)
    src = rng.integers(FIRST_DIGIT, FIRST_DIGIT + DIGITS, size=(n, max_len))
    src[np.arange(max_len) >= lengths[:, None]] = PAD
    if exclude:
        again = np.array([row.tobytes() in exclude for row in src])
        if again.any():
            src[again], lengths[again] = sample_sequences(rng, int(again.sum()), max_len=max_len,
                                                          exclude=exclude)
    return src, lengths


def make_targets(src, lengths, task="reverse"):
    """Decoder input and target for a batch: (tgt_in, tgt_out), each (n, max_len + 1).

    task "reverse": tgt_out = the source reversed, then EOS, then PAD; "copy": the source itself.
    tgt_in = BOS followed by tgt_out shifted right (teacher forcing).
    """
    n, max_len = src.shape
    pos = np.arange(max_len)
    if task == "reverse":
        idx = np.clip(lengths[:, None] - 1 - pos, 0, None)  # (n, max_len): source index to read
        body = np.where(pos < lengths[:, None], np.take_along_axis(src, idx, axis=1), PAD)
    elif task == "copy":
        body = src
    else:
        raise ValueError(f"task must be 'reverse' or 'copy', got {task!r}")
    tgt_out = np.concatenate([body, np.full((n, 1), PAD)], axis=1)  # (n, max_len + 1)
    tgt_out[np.arange(n), lengths] = EOS
    tgt_in = np.concatenate([np.full((n, 1), BOS), tgt_out[:, :-1]], axis=1)
    tgt_in[tgt_in == EOS] = PAD  # EOS is only ever predicted, never read
    return tgt_in, tgt_out


def reverse_task(n_val=1000, n_val2=1000, seed=2017):
    """Two held-out sets: "val" (n_val sequences, watched during training: it chose the recipe)
    and "val2", validation 2 (n_val2 sequences, evaluated once per run, but its accuracy was seen
    while the recipe was tuned, so it is no test set), each a dict of src, lengths, tgt_out; and
    "exclude", the bytes of every sequence of length >= 4 in either set, which training never
    draws. No sequence of length >= 4 is in both sets. Lengths 1-3 are not held out: with only 10,
    100 and 1,000 possible sequences, training meets nearly all of them anyway, so those may be in
    both sets and in training."""
    rng = np.random.default_rng(seed)
    sets = {}
    for name, n in (("val", n_val), ("val2", n_val2)):
        seen = {row.tobytes() for s in sets.values() for row, k in zip(s["src"], s["lengths"])
                if k >= 4}
        src, lengths = sample_sequences(rng, n, exclude=seen)
        sets[name] = {"src": src, "lengths": lengths, "tgt_out": make_targets(src, lengths)[1]}
    exclude = {row.tobytes() for s in sets.values() for row, k in zip(s["src"], s["lengths"])
               if k >= 4}
    return {**sets, "exclude": exclude}


def exact_match(model, src, tgt_out):
    """Greedy decoding (notebook 06) of every source; True where the output, EOS included,
    equals tgt_out exactly. Returns a boolean array (n,)."""
    tokens, _ = greedy_decode(model, src, BOS, EOS, tgt_out.shape[1])
    out = np.full(tgt_out.shape, PAD)
    out[:, :tokens.shape[1] - 1] = tokens[:, 1:]  # drop BOS; PAD after the last step
    return np.all(out == tgt_out, axis=1)


REVERSE_CONFIG = TransformerConfig(src_vocab=VOCAB_SIZE, tgt_vocab=VOCAB_SIZE, d_model=32,
                                   n_heads=2, d_ff=128, n_layers=2, max_len=MAX_LEN + 1,
                                   dtype="float32")


def reverse_batches(rng, batch_size=128, *, exclude=None, task="reverse"):
    """batches(step) for train(): a fresh random batch at every step, drawn from `rng`, as
    ((src, tgt_in), tgt_out): forward's two arguments and the targets."""
    def batches(step):
        src, lengths = sample_sequences(rng, batch_size, exclude=exclude)
        tgt_in, tgt_out = make_targets(src, lengths, task)
        return (src, tgt_in), tgt_out
    return batches


def train_reverse(seed, *, norm_first=False, warmup=100, factor=0.5, ramp=True, steps=600,
                  budget=None, schedule="linear", clip=2.0, dropout=0.0, eval_every=50,
                  patience=None, callback=None):
    """This notebook's recipe: a 2 + 2 layer model (REVERSE_CONFIG), batches of 128, Adam, label
    smoothing 0.1, the paper's warm-up (`warmup` steps up to the peak factor / sqrt(32 * warmup)),
    then schedule "linear" (down to 0 at step `steps`, lrate_linear_decay) or "paper"
    (1 / sqrt(step), lrate); gradients clipped to a global norm of `clip` (None: never), dropout
    `dropout`. It runs all `steps` (or the first `budget` steps of that schedule) and keeps the
    last model; validation exact match, history["accuracy"], is measured every `eval_every`
    steps (None: never), and with `patience` the run stops early after that many evaluations in
    a row at 100%. ramp=False holds the peak rate from step 1 (no warm-up), then the same decay.
    Validation 2 is not touched. Returns (model, history, task). The same seed gives the same
    model, bit for bit, with the same NumPy and BLAS build (another CPU or BLAS build rounds
    differently, and training amplifies the difference)."""
    if schedule not in ("linear", "paper"):
        raise ValueError(f"schedule must be 'linear' or 'paper', got {schedule!r}")
    if patience is not None:
        patience = check_positive_int(patience, "patience")
    config = replace(REVERSE_CONFIG, norm_first=norm_first, dropout=dropout)
    model = Transformer.from_config(config, np.random.default_rng(seed))
    task, rng = reverse_task(), np.random.default_rng(seed + 1)  # rng: batches and dropout

    def rate(step):
        step = step if ramp else max(step, warmup)
        if schedule == "paper":
            return lrate(step, config.d_model, warmup, factor)
        return lrate_linear_decay(step, config.d_model, warmup, steps, factor)

    def loss(logits, tgt_out):
        return cross_entropy(logits, tgt_out, label_smoothing=0.1, ignore_id=PAD)

    def evaluate(model):
        return {"accuracy": float(exact_match(model, task["val"]["src"],
                                              task["val"]["tgt_out"]).mean())}

    def stop(history):
        return bool(patience) and history.get("accuracy", [])[-patience:] == [1.0] * patience

    history = train(model, reverse_batches(rng, exclude=task["exclude"]), loss, rate,
                    steps=budget or steps, rng=rng, clip=clip,
                    evaluate=evaluate if eval_every else None, eval_every=eval_every or 1,
                    stop=stop, callback=callback)
    history.setdefault("accuracy", [])
    return model, history, task


def trained_sequences(seed, steps=600, batch_size=128):
    """The sources train_reverse(seed, steps=steps) trains on, drawn again by the same
    reverse_batches from the same generator (seed + 1), step 1's batch first. Without dropout
    (the default) the batches are all that generator draws. Returns (src, lengths),
    (steps * batch_size, MAX_LEN) and (steps * batch_size,); the last batch_size rows are the
    last step's batch."""
    batches = reverse_batches(np.random.default_rng(seed + 1), batch_size,
                              exclude=reverse_task()["exclude"])
    src = np.concatenate([batches(step)[0][0] for step in range(1, steps + 1)])
    return src, (src != PAD).sum(axis=-1)


def anti_diagonal_mass(weights, length):
    """The share of attention on the anti-diagonal: target position i reading source L-1-i.

    weights (..., T_q, S) cross-attention of one sequence of length L = `length`; the mean of
    weights[..., i, L-1-i] over i = 0 .. L-1 (the query that predicts EOS is left out). Perfect
    reversal gives 1; uniform attention over the L real tokens gives 1/L.
    """
    i = np.arange(length)
    return weights[..., i, length - 1 - i].mean(axis=-1)


# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────


def lm_sequences(src, lengths):
    """Reversal as next-token prediction, for a decoder-only model: (tokens, targets), each
    (n, 2 max_len + 1).

    Row b is the digits, BOS (here: "now the answer"), the digits reversed, EOS, then PAD: for
    '3 1 4', 3 1 4 <bos> 4 1 3 <eos>. tokens = the row but its last entry, targets = the row
    shifted left by one (position t predicts token t + 1), with PAD wherever nothing is to be
    predicted: the question's digits are given, not predicted, so only the answer and its EOS
    count in the loss (cross_entropy's ignore_id=PAD).
    """
    src, lengths = np.asarray(src), np.asarray(lengths)
    n, L = src.shape
    p = np.arange(2 * L + 2)  # (2L + 2,): position in the row
    k = lengths[:, None]  # (n, 1)
    question = np.take_along_axis(src, np.broadcast_to(np.minimum(p, L - 1), (n, 2 * L + 2)), 1)
    answer = np.take_along_axis(src, np.clip(2 * k - p, 0, L - 1), 1)  # src[2k - p]: reversed
    row = np.select([p < k, p == k, p <= 2 * k, p == 2 * k + 1], [question, BOS, answer, EOS],
                    PAD)  # (n, 2L + 2)
    targets = np.where(p[1:] > k, row[:, 1:], PAD)  # only what follows <bos> is predicted
    return row[:, :-1], targets


def lm_exact_match(model, src, lengths):
    """True where a decoder-only model gets the whole answer right, EOS included: its most
    likely next token is the target at every predicted position, given the right tokens before
    it (one forward pass). That is exactly when greedy generation from the question and <bos>
    writes the answer: up to the first wrong token the two read the same prefix."""
    tokens, targets = lm_sequences(src, lengths)
    logits = model.forward(tokens)
    clear_caches(model)  # no backward follows
    return np.all((logits.argmax(axis=-1) == targets) | (targets == PAD), axis=1)


def linear_schedule(peak, warmup, total):
    """The learning rate rate(step) of notebook 09's runs: a straight line from peak / warmup up
    to `peak` at step `warmup` (warmup=0: the peak from step 1, no warm-up), then a straight
    line down to 0 at step `total`. step counts from 1."""
    def rate(step):
        if step <= warmup:
            return peak * step / warmup
        return peak * max(0.0, (total - step) / (total - warmup))
    return rate


LM_SIZES = {"vocab": VOCAB_SIZE, "d_model": 32, "n_heads": 4, "n_layers": 2, "max_len": 64,
            "dtype": "float32"}


def parameter_count(config):
    """The number of parameters of the model of `config`, counted on a model built from it."""
    model = config.build(np.random.default_rng(0))
    return sum(p.size for p in model.parameters().values())


def reversal_lm_config(**pieces):
    """Notebook 09's decoder-only reversal model with these pieces (PAPER_2017, TODAY or any
    mix, n_kv_heads included): LM_SIZES (d_model 32, 4 heads, 2 blocks, float32), and the hidden
    width d_ff that brings its parameter count closest to the 2017 model's (ReLU, d_ff = 4
    d_model = 128), so that recipes are compared at the same size."""
    base = DecoderOnlyConfig(**LM_SIZES, d_ff=128, **PAPER_2017)
    target = parameter_count(base)
    one, two = (parameter_count(replace(base, **pieces, d_ff=f)) for f in (1, 2))
    d_ff = 1 + (target - one) / (two - one)  # the count grows by (two - one) per unit of d_ff
    best = min({max(1, int(d_ff)), int(d_ff) + 1},
               key=lambda f: abs(parameter_count(replace(base, **pieces, d_ff=f)) - target))
    return replace(base, **pieces, d_ff=best)


def train_reverse_lm(seed, config, *, peak=5e-3, warmup=100, steps=1500, budget=None,
                     clip=2.0, eval_every=50, callback=None):
    """Notebook 09's recipe: DecoderOnly(config) (reversal_lm_config), batches of 128 reversals
    as next-token prediction (lm_sequences), Adam, linear_schedule(peak, warmup, steps), the
    gradients clipped to a global norm of `clip`; validation exact match (lm_exact_match),
    history["accuracy"], every `eval_every` steps (None: never). It runs all `steps`, or the
    first `budget` steps of that schedule. history["seconds"] is the wall time of the training
    steps, evaluations left out. Returns (model, history, task); the same seed gives the same
    model, bit for bit, with the same NumPy and BLAS build."""
    model = config.build(np.random.default_rng(seed))
    task, rng = reverse_task(), np.random.default_rng(seed + 1)  # rng: the batches
    val, spent = task["val"], [0.0]

    def batches(step):
        src, lengths = sample_sequences(rng, 128, exclude=task["exclude"])
        tokens, targets = lm_sequences(src, lengths)
        return (tokens,), targets

    def loss(logits, targets):
        return cross_entropy(logits, targets, ignore_id=PAD)

    def evaluate(model):
        start = time.perf_counter()
        accuracy = float(lm_exact_match(model, val["src"], val["lengths"]).mean())
        spent[0] += time.perf_counter() - start
        return {"accuracy": accuracy}

    start = time.perf_counter()
    history = train(model, batches, loss, linear_schedule(peak, warmup, steps),
                    steps=budget or steps, clip=clip, evaluate=evaluate if eval_every else None,
                    eval_every=eval_every or 1, callback=callback)
    history["seconds"] = time.perf_counter() - start - spent[0]
    history.setdefault("accuracy", [])
    return model, history, task


PIECES = {  # notebook 09's four switches: each piece's 2017 and today's settings
    "norm": {"2017": {"norm": "layer", "norm_first": False},  # Post-LN, LayerNorm
             "today": {"norm": "rms", "norm_first": True}},  # pre-norm, RMSNorm
    "ffn": {"2017": {"ffn": "relu"}, "today": {"ffn": "swiglu"}},
    "position": {"2017": {"position": "sinusoidal"}, "today": {"position": "rope"}},
    "attention": {"2017": {"n_kv_heads": None}, "today": {"n_kv_heads": 2}},  # 4 heads: MHA, GQA
}


def pieces_of(**choice):
    """The DecoderOnlyConfig fields for a choice of "2017" or "today" per piece of PIECES (a
    piece not named is 2017's): pieces_of(position="today") is the 2017 model with RoPE."""
    unknown = set(choice) - set(PIECES) or {v for v in choice.values()} - {"2017", "today"}
    if unknown:
        raise ValueError(f"choose '2017' or 'today' for each of {list(PIECES)}, got {choice}")
    fields = {}
    for piece, options in PIECES.items():
        fields.update(options[choice.get(piece, "2017")])
    return fields


def grid_name(**choice):
    """The name of a combination of pieces, as the 16 trained models of data/ are stored:
    "2017", "today", or the 2017 model with the pieces named, e.g. "2017 + RoPE + GQA"."""
    labels = {"norm": "pre-norm RMSNorm", "ffn": "SwiGLU", "position": "RoPE", "attention": "GQA"}
    new = [labels[p] for p in PIECES if choice.get(p, "2017") == "today"]
    if len(new) == len(PIECES):
        return "today"
    return " + ".join(["2017", *new])
