"""The character language model of notebook 10: the text as token ids, batches of random windows,
reference losses, AdamW and the cosine schedule, the training recipe, sampling, and the measures
of what a model learned.

Every definition below is written in notebook 10 first, in a cell that starts with
``# saved in helpers/lm.py``; ``tests/test_sync.py`` proves the two copies are identical.
The model is notebook 09's DecoderOnly and the loop notebook 07's train(); nothing here
re-implements a block, a backward pass or the generation loop.
"""

import math
import re
import time
from dataclasses import dataclass

import numpy as np

from helpers.decoding import generate
from helpers.modern import DecoderOnly, DecoderOnlyConfig
from helpers.module import clear_caches
from helpers.training import Adam, cross_entropy, train
from helpers.transformer import softmax
from helpers.validation import (
    as_real_array,
    check_ids,
    check_int,
    check_number,
    check_positive_int,
    check_rng,
)

# ── 10 · A language model that learns to write ────────────────────────────────────────────────


class Characters:
    """The vocabulary of a text: its distinct characters, sorted, each one a token id."""

    def __init__(self, text):
        if not isinstance(text, str) or not text:
            raise ValueError(f"text must be a non-empty string, got {type(text).__name__}")
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        """A string -> token ids (int64); a character the vocabulary lacks raises a ValueError."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise ValueError(f"text has characters not in the vocabulary: {unknown[:5]}")
        return np.array([self.ids[c] for c in text], dtype=np.int64)

    def decode(self, ids):
        """Token ids -> the string (an id outside the vocabulary raises a ValueError: -1 is
        no character, though self.chars[-1] is one)."""
        ids = check_ids(ids, "ids", len(self.chars), min_size=0)
        return "".join(self.chars[i] for i in ids.reshape(-1).tolist())


def split(ids, train_fraction=0.9):
    """(train, val): the first 90% of the ids and the last 10%, as nanoGPT splits the text."""
    ids = np.asarray(ids)
    fraction = check_number(train_fraction, "train_fraction", "(0, 1)")
    n = int(fraction * len(ids)) if ids.ndim == 1 else 0
    if not 0 < n < len(ids):
        raise ValueError(f"ids (shape {ids.shape}) split at train_fraction={train_fraction} "
                         "leaves a part empty: split a 1-d array of at least two ids")
    return ids[:n], ids[n:]


def windows(data, rng, batch, context):
    """A batch of `batch` random windows of the ids `data`: x (batch, context) and y, the same
    windows one character later (position t of y is what position t of x must predict)."""
    rng, data = check_rng(rng), np.asarray(data)
    batch, context = check_positive_int(batch, "batch"), check_positive_int(context, "context")
    if data.ndim != 1 or len(data) <= context:
        raise ValueError(f"data must be 1-d with more than context={context} ids (a window and "
                         f"the character after it), got shape {data.shape}")
    starts = rng.integers(0, len(data) - context, size=batch)  # as nanoGPT's get_batch
    rows = starts[:, None] + np.arange(context)  # (batch, context)
    return data[rows], data[rows + 1]


def unigram_loss(train_ids, val_ids, vocab):
    """Cross-entropy (nats per character) of val_ids under the training text's character
    frequencies, each count plus one (so that a character unseen in training is not infinitely
    surprising)."""
    vocab = check_positive_int(vocab, "vocab")
    train_ids = check_ids(train_ids, "train_ids", vocab, ndim=1)
    val_ids = check_ids(val_ids, "val_ids", vocab, ndim=1)
    counts = np.bincount(train_ids, minlength=vocab) + 1.0
    log_p = np.log(counts / counts.sum())
    return float(-log_p[val_ids].mean())


def bigram_loss(train_ids, val_ids, vocab):
    """Cross-entropy of val_ids[1:] given the character before it, with the training text's
    pair counts, each plus one: the best a model that sees one character back can do, about."""
    vocab = check_positive_int(vocab, "vocab")
    train_ids = check_ids(train_ids, "train_ids", vocab, ndim=1)
    val_ids = check_ids(val_ids, "val_ids", vocab, ndim=1, min_size=2)  # one pair at least
    counts = np.ones((vocab, vocab))
    np.add.at(counts, (train_ids[:-1], train_ids[1:]), 1.0)
    log_p = np.log(counts / counts.sum(axis=1, keepdims=True))  # (vocab, vocab): row = previous
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def next_token_probabilities(logits, temperature=1.0, top_k=None):
    """Logits (..., vocab) -> the probabilities a sampler draws from: the logits divided by the
    temperature (below 1: sharper, above 1: flatter), only the top_k largest kept (None: all),
    then the softmax. -inf is a blocked token; each row needs a finite logit."""
    temperature = check_number(temperature, "temperature", "(0, inf)")
    logits = as_real_array(logits, "logits")
    if logits.ndim < 1 or np.isnan(logits).any() or np.isposinf(logits).any() \
            or not np.isfinite(logits).any(axis=-1).all():
        raise ValueError(f"logits must be real numbers (..., vocab), -inf allowed, no NaN or "
                         f"+inf, a finite one in every row; got shape {logits.shape}")
    with np.errstate(over="ignore"):
        z = logits.astype(np.float64) / temperature
    if np.isinf(z[np.isfinite(logits)]).any():
        raise ValueError(f"temperature={temperature!r} is so small that logits / temperature "
                         "overflows: for the most likely token, use greedy decoding (pick=None)")
    if top_k is not None:
        top_k = check_positive_int(top_k, "top_k")
        kth = np.sort(z, axis=-1)[..., -min(top_k, z.shape[-1]), None]  # the k-th largest
        z = np.where(z < kth, -np.inf, z)
    return softmax(z)  # notebook 01's


def sampler(rng, temperature=1.0, top_k=None):
    """A `pick` for generate(): draws each next token from next_token_probabilities, with rng."""
    rng, temperature = check_rng(rng), check_number(temperature, "temperature", "(0, inf)")
    top_k = None if top_k is None else check_positive_int(top_k, "top_k")

    def pick(logits):
        if np.ndim(logits) != 2:
            raise ValueError(f"pick takes logits of shape (B, vocab), got {np.shape(logits)}")
        p = next_token_probabilities(logits, temperature, top_k)  # (B, vocab)
        u = rng.random((len(p), 1))
        return np.minimum((np.cumsum(p, axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)  # (B,)
    return pick


def write_pieces(prompt_len, n, context):
    """The pieces in which write() continues a prompt of prompt_len tokens by n tokens, windows of
    at most `context`: a list of (keep, steps), each piece starting from the last `keep` tokens
    (context // 2, or all if fewer) and adding `steps` new ones."""
    length = check_positive_int(prompt_len, "prompt_len")
    end, pieces = length + check_positive_int(n, "n"), []
    context = check_int(context, "context", "[2, inf)")
    while length < end:
        keep = min(length, context // 2)
        steps = min(end - length, context - keep)
        pieces.append((keep, steps))
        length += steps
    return pieces


def write(model, prompt_ids, n, *, pick=None, context=None):
    """Continue prompt_ids (B, T0) by n tokens with generate() (greedy, or `pick`), its KV cache
    included. A model trained on windows of `context` tokens, each read from its first token,
    is kept to such windows: a longer text is written in pieces, each starting from the last
    context // 2 tokens."""
    max_len = model.config.max_len
    tokens = prompt_ids = check_ids(prompt_ids, "prompt_ids", model.config.vocab, ndim=2)
    n = check_positive_int(n, "n")  # a prompt longer than max_len is cut below
    context = max_len if context is None else check_int(context, "context", f"[2, {max_len}]")
    for keep, steps in write_pieces(prompt_ids.shape[1], n, context):
        out, _ = generate(model, tokens[:, -keep:], steps, pick=pick)
        tokens = np.concatenate([tokens, out[:, keep:]], axis=1)
    return tokens


WORD = re.compile(r"[A-Za-z']{3,}")  # 3 letters or more: a random "a" or "I" is right by chance
SPEAKER = re.compile(r"^[A-Z][A-Za-z' ]*:$")


def known_word_share(text, vocabulary):
    """The share of the words of `text` (WORD: three or more letters and apostrophes) that occur
    in `vocabulary`, a set of words (a string would find parts of words: "the" in "other")."""
    if not isinstance(text, str) or not isinstance(vocabulary, (set, frozenset, dict)):
        raise ValueError(f"text must be a string and vocabulary a set of words, got "
                         f"{type(text).__name__} and {type(vocabulary).__name__}")
    words = WORD.findall(text)
    return sum(w in vocabulary for w in words) / len(words) if words else 0.0


def speaker_line_share(text):
    """The share of the non-empty lines of `text` that open a speech as the play's do: a
    speaker's name and a colon ("MENENIUS:", "First Citizen:") after an empty line (or first).
    Without the empty line a verse line ending in a colon would count ("We hate alike:")."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    lines = text.split("\n")
    speakers = sum(bool(SPEAKER.match(line)) and (i == 0 or not lines[i - 1].strip())
                   for i, line in enumerate(lines))
    filled = sum(bool(line.strip()) for line in lines)
    return speakers / filled if filled else 0.0


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as nanoGPT uses it:
    before each Adam step every parameter with two or more axes (the matrices and the
    embedding) shrinks by the factor 1 - lr * weight_decay; biases and norm gains do not."""

    def __init__(self, params, *, weight_decay=0.1, **adam):
        super().__init__(params, **adam)
        self.weight_decay = check_number(weight_decay, "weight_decay", "[0, inf)")
        self.decayed = [p for p in params.values() if p.ndim >= 2]

    def step(self, grads, lr):
        update = self.update(grads, lr)  # grads and lr checked, no parameter changed yet
        for p in self.decayed:
            p *= 1.0 - lr * self.weight_decay
        self.apply(update)


def cosine_schedule(peak, warmup, total, floor):
    """nanoGPT's learning rate at step it = 0, 1, ...: a linear warm-up to `peak` over `warmup`
    steps, then half a cosine down to `floor` at step `total`, then `floor`. train() counts its
    steps from 1: pass lambda step: rate(step - 1)."""
    peak = check_number(peak, "peak", "(0, inf)")
    floor = check_number(floor, "floor", f"[0, {peak}]")
    warmup = check_int(warmup, "warmup", "[0, inf)")
    total = check_int(total, "total", f"({warmup}, inf)")

    def rate(it):
        it = check_int(it, "it", "[0, inf)")  # steps count from 0 here
        if it < warmup:
            return peak * (it + 1) / (warmup + 1)
        if it > total:
            return floor
        ratio = (it - warmup) / (total - warmup)  # 0 .. 1
        return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (peak - floor)
    return rate


def estimate_loss(model, data, rng, *, batches=20, batch=12, context=64):
    """nanoGPT's estimate of a loss: the mean over `batches` random windows (batch x context)."""
    batches = check_positive_int(batches, "batches")
    check_int(context, "context", f"[1, {model.config.max_len}]")
    losses = []
    for _ in range(batches):
        x, y = windows(data, rng, batch, context)
        losses.append(cross_entropy(model.forward(x), y)[0])
    clear_caches(model)  # no backward follows
    return float(np.mean(losses))


def split_loss(model, data, *, context=64, rows=32):
    """The loss over a whole split, in consecutive windows of `context` characters (each window
    read as in training, from its own first character), `rows` windows per forward (small batches
    keep the activations in the CPU's cache): every character predicted once, except the first
    (nothing comes before it) and the last (len(data) - 1) % context (no whole window)."""
    context = check_int(context, "context", f"[1, {model.config.max_len}]")
    rows, data = check_positive_int(rows, "rows"), check_ids(data, "data", model.config.vocab,
                                                             ndim=1)
    n = (len(data) - 1) // context
    if n == 0:
        raise ValueError(f"data has {len(data)} ids, fewer than one window of context={context} "
                         "and the character after it")
    x = data[:n * context].reshape(n, context)
    y = data[1:n * context + 1].reshape(n, context)
    total = 0.0
    for i in range(0, n, rows):
        total += cross_entropy(model.forward(x[i:i + rows]), y[i:i + rows])[0] * len(x[i:i + rows])
    clear_caches(model)
    return total / n


@dataclass(frozen=True)
class Recipe:
    """How a language model is trained: batches of `batch` windows of `context` characters,
    AdamW (betas, weight decay) with cosine_schedule(peak, warmup, steps, floor), gradients
    clipped to `clip`, evaluated every `eval_every` steps. NANOGPT_CPU is nanoGPT's documented
    CPU recipe for Shakespeare; the others are this series'."""

    steps: int = 2000
    batch: int = 12
    context: int = 64
    peak: float = 1e-3
    floor: float = 1e-4
    warmup: int = 100
    beta2: float = 0.99
    weight_decay: float = 0.1
    clip: float = 1.0
    eval_every: int = 250

    def __post_init__(self):
        for name in ("steps", "batch", "context", "eval_every"):
            check_positive_int(getattr(self, name), name)
        check_int(self.warmup, "warmup", f"[0, {self.steps})")
        check_number(self.peak, "peak", "(0, inf)")
        check_number(self.floor, "floor", f"[0, {self.peak}]")
        check_number(self.beta2, "beta2", "[0, 1)")
        check_number(self.weight_decay, "weight_decay", "[0, inf)")
        if self.clip is not None:
            check_number(self.clip, "clip", "(0, inf)")


NANOGPT_CPU = Recipe()


def train_lm(model, train_ids, val_ids, recipe, *, seed=0, callback=None):
    """Train `model` (a DecoderOnly) to predict the next character of train_ids with `recipe`;
    every recipe.eval_every steps history["val"] and history["train"] get 20-batch estimates
    (nanoGPT's method, as its README's CPU command runs it: --eval_iters=20), and
    history["eval_seconds"] the time they took. Batches and estimates draw from
    generators seeded with `seed`. Returns history (train()'s, with "seconds": the wall time
    of the training steps alone, without the estimates and the callback)."""
    if not isinstance(recipe, Recipe):
        raise ValueError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    check_int(recipe.context, "recipe.context", f"[1, {model.config.max_len}]")
    for name, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        check_ids(ids, name, model.config.vocab, ndim=1, min_size=recipe.context + 1)
    seed = check_int(seed, "seed", "[0, inf)")
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be a function or None, got {type(callback).__name__}")
    batch_rng, eval_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    spent = [0.0, 0.0]  # seconds in the estimates, in the callback
    rate = cosine_schedule(recipe.peak, recipe.warmup, recipe.steps, recipe.floor)

    def batches(step):
        x, y = windows(train_ids, batch_rng, recipe.batch, recipe.context)
        return (x,), y

    def evaluate(model):
        start = time.perf_counter()
        scores = {name: estimate_loss(model, data, eval_rng, batch=recipe.batch,
                                      context=recipe.context)
                  for name, data in (("val", val_ids), ("train", train_ids))}
        spent[0] += time.perf_counter() - start
        return {**scores, "eval_seconds": spent[0]}

    def timed(history, model):  # the callback's time (a plot, a sample) is not training time
        start = time.perf_counter()
        callback(history, model)
        spent[1] += time.perf_counter() - start

    optimizer = AdamW(model.parameters(), beta2=recipe.beta2, eps=1e-8,
                      weight_decay=recipe.weight_decay)
    start = time.perf_counter()
    history = train(model, batches, cross_entropy, lambda step: rate(step - 1),
                    steps=recipe.steps, clip=recipe.clip, evaluate=evaluate,
                    eval_every=recipe.eval_every, callback=callback and timed,
                    optimizer=optimizer)
    history["seconds"] = time.perf_counter() - start - sum(spent)
    return history


LM_CONFIG = DecoderOnlyConfig(vocab=65, d_model=128, n_heads=4, d_ff=344, n_layers=4,
                              max_len=64, tie_output=True, dtype="float32")


def lm_model(config=LM_CONFIG, seed=0):
    """A fresh DecoderOnly of `config` (default: nanoGPT's CPU sizes, today's pieces)."""
    if not isinstance(config, DecoderOnlyConfig):
        raise ValueError(f"config must be a DecoderOnlyConfig, got {type(config).__name__}")
    return DecoderOnly.from_config(config, np.random.default_rng(seed))


def head_pattern_shares(weights, text):
    """What attention weights (..., T, T) on `text` (T characters) put on three kinds of earlier
    positions, averaged over the queries that have one: the previous character, the first
    character of the query's own word (after the last space or newline before it), and the
    first character of its line. A window cut mid-word or mid-line does not show where that
    word or line starts, so queries whose space or newline lies outside `text` are skipped; so
    are those whose word or line starts at t - 1 (that is the previous character) or at t.
    One head's (T, T) gives floats; (layers, heads, T, T) gives (layers, heads) arrays."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    weights, T = as_real_array(weights, "weights"), len(text)
    if weights.ndim < 2 or weights.shape[-2:] != (T, T):
        raise ValueError(f"weights must end in (T, T) = ({T}, {T}), got {weights.shape}")
    keys = {"previous": {t: t - 1 for t in range(1, T)}, "word start": {}, "line start": {}}
    for t in range(1, T):  # where each query's word and line start: once for every head
        gap = max(text.rfind(" ", 0, t), text.rfind("\n", 0, t))
        newline = text.rfind("\n", 0, t)
        if 0 <= gap < t - 2:  # the word starts inside the window, two or more characters back
            keys["word start"][t] = gap + 1
        if 0 <= newline < t - 2:
            keys["line start"][t] = newline + 1
    shares = {kind: weights[..., list(k), list(k.values())].mean(axis=-1) if k  # query -> key
              else np.full(weights.shape[:-2], math.nan) for kind, k in keys.items()}  # none: nan
    return {kind: float(v) if weights.ndim == 2 else v for kind, v in shares.items()}
