"""Exercises of notebook 10: the next-token loss, the sampling step, the bigram baseline, top-p
sampling and the learning-rate schedule."""

import math

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.lm import bigram_loss, cosine_schedule, next_token_probabilities
from helpers.training import cross_entropy

_rng = np.random.default_rng(110)  # the cases are the same on every run and every machine

# ── 10.1 · next_token_loss ────────────────────────────────────────────────────────────────────


def _next_token_loss(logits, tokens):
    """The mean cross-entropy of logits[:, t] against tokens[:, t + 1]."""
    return cross_entropy(logits[:, :-1], tokens[:, 1:])[0]


def _log_softmax(z, *, stable=True):
    if stable:
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.log(np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))  # inf / inf: NaN


def _scored(logits, tokens, *, shift=1, stable=True, normalise=True):
    """log p(target) at every scored position: shift 1 (right), 0 (no shift), -1 (backwards)."""
    log_p = _log_softmax(logits, stable=stable) if normalise else logits
    if shift == 1:
        log_p, targets = log_p[:, :-1], tokens[:, 1:]
    elif shift == -1:
        log_p, targets = log_p[:, 1:], tokens[:, :-1]
    else:
        targets = tokens
    return np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]  # (B, T or T - 1)


def _case_tokens(B, T, V, scale=1.0):
    return _rng.normal(size=(B, T, V)) * scale, _rng.integers(0, V, size=(B, T))


_SECTION_2 = "10 §2 · Windows, and the next character as the target"

NEXT_TOKEN_LOSS = Exercise(
    key="10.1", name="next_token_loss", reference=_next_token_loss, see=_SECTION_2,
    cases=(
        Case("B = 1, T = 3, a vocabulary of 2, every logit 0 (by hand: each of the 2 "
             "predictions gives the right token probability 1/2, so the loss is ln 2 = 0.693)",
             (np.zeros((1, 3, 2)), np.array([[0, 1, 1]]))),
        Case("B = 2, T = 5, 4 tokens", _case_tokens(2, 5, 4)),
        Case("B = 3, T = 4, 6 tokens, logits up to about 1000 (a softmax without its maximum "
             "subtracted overflows)", _case_tokens(3, 4, 6, scale=400.0)),
        Case("B = 2, T = 7, 65 tokens", _case_tokens(2, 7, 65, scale=2.0)),
    ),
    mistakes=(
        Mistake("ntl-no-shift",
                "position t's logits are compared with tokens[:, t], the token the model has "
                "just read; they predict the next one, tokens[:, t + 1]",
                _SECTION_2, lambda logits, tokens: -_scored(logits, tokens, shift=0).mean()),
        Mistake("ntl-shift-backwards",
                "logits[:, 1:] are compared with tokens[:, :-1]: each position is asked for the "
                "token before it; logits[:, :-1] go with tokens[:, 1:]",
                _SECTION_2, lambda logits, tokens: -_scored(logits, tokens, shift=-1).mean()),
        Mistake("ntl-wraps-around",
                "np.roll makes the last position predict the first token of the same row: "
                "that pair is not in the text; the last position has no target",
                _SECTION_2, lambda logits, tokens: -np.take_along_axis(
                    _log_softmax(logits), np.roll(tokens, -1, axis=1)[..., None], -1).mean()),
        Mistake("ntl-sum-not-mean",
                "the losses are summed, not averaged over the B (T - 1) predictions",
                "07 §6 · The loss, with label smoothing",
                lambda logits, tokens: -_scored(logits, tokens).sum()),
        Mistake("ntl-mean-over-sequences-only",
                "each sequence's losses are summed and only the sequences averaged: every "
                "prediction counts once, so average over all B (T - 1) of them",
                "07 §6 · The loss, with label smoothing",
                lambda logits, tokens: -_scored(logits, tokens).sum(axis=1).mean()),
        Mistake("ntl-bits",
                "the logarithm is base 2 (bits); the series measures nats, with ln",
                "10 §3 · What a model must beat",
                lambda logits, tokens: -_scored(logits, tokens).mean() / np.log(2)),
        Mistake("ntl-logits-not-log-probabilities",
                "the target's logit is used as its log-probability: the log of the softmax's "
                "denominator, log Σ exp(z), is missing",
                "01 §3 · Softmax, without overflow",
                lambda logits, tokens: -_scored(logits, tokens, normalise=False).mean()),
        Mistake("ntl-softmax-overflows",
                "the softmax does not subtract each row's maximum: exp(1000) overflows to inf "
                "and the loss is NaN or inf",
                "01 §3 · Softmax, without overflow",
                lambda logits, tokens: -_scored(logits, tokens, stable=False).mean()),
    ),
)

# ── 10.2 · next_token_probabilities ───────────────────────────────────────────────────────────


def _probabilities(logits, temperature=1.0, top_k=None, *, multiply=False, smallest=False,
                   extra=0, renormalise=True, power=False, stable=True, fill=-np.inf):
    """Sampling probabilities with the switches of the mistakes below."""
    z = np.asarray(logits, dtype=float)
    z = z * temperature if multiply else (z if power else z / temperature)
    keep = np.ones(z.shape, dtype=bool)
    if top_k is not None:  # a cut at a value: ties with the cut are kept
        ordered = np.sort(z, axis=-1)
        if smallest:
            keep = z <= ordered[..., top_k - 1, None]  # the k-th smallest
        elif extra < 0:  # the k-th largest itself is cut: the k - 1 largest (none for k = 1)
            keep = z > ordered[..., -top_k, None]
        else:
            keep = z >= ordered[..., -(top_k + extra), None]
    if renormalise:
        z = np.where(keep, z, fill)
    with np.errstate(invalid="ignore", over="ignore"):  # every logit cut: -inf - (-inf) is NaN,
        p = np.exp(z - z.max(axis=-1, keepdims=True) if stable else z)  # as it is for you
    with np.errstate(invalid="ignore"):  # unstable: inf / inf is NaN
        p /= p.sum(axis=-1, keepdims=True)
    if power:
        p = p ** (1.0 / temperature)  # sharpened, never summed to 1 again
    return p if renormalise else np.where(keep, p, 0.0)


def _sampling_case(label, shape, **kwargs):
    return Case(label, (_rng.normal(size=shape) * 2,), kwargs)


_SECTION_4 = "10 §4 · Sampling: temperature and top-k"

PROBABILITIES = Exercise(
    key="10.2", name="next_token_probabilities", reference=next_token_probabilities,
    see=_SECTION_4,
    cases=(
        Case("logits [[0, ln 2, ln 3]] at temperature 1, all kept (by hand: softmax gives "
             "[1, 2, 3] / 6)", (np.log([[1.0, 2.0, 3.0]]),)),
        _sampling_case("2 rows of 6 logits, temperature 0.5", (2, 6), temperature=0.5),
        _sampling_case("2 rows of 6 logits, temperature 2, top_k = 3", (2, 6), temperature=2.0,
                       top_k=3),
        _sampling_case("a batch (2, 3, 10), temperature 1, top_k = 1 (greedy)", (2, 3, 10),
                       top_k=1),
        _sampling_case("3 rows of 65 logits, temperature 0.8, top_k = 10", (3, 65),
                       temperature=0.8, top_k=10),
        Case("ties at the cut: logits [[3, 1, 1, 0], [2, 2, 2, -1]], top_k = 2 (every logit "
             "equal to the k-th largest is kept: 3 tokens in each row)",
             (np.array([[3.0, 1.0, 1.0, 0.0], [2.0, 2.0, 2.0, -1.0]]),), {"top_k": 2}),
        Case("logits [[500, 498, 490, 0], [-3, 0, 2, 1]] at temperature 0.5, top_k = 3 (exp(1000) "
             "overflows unless each row's maximum is subtracted first)",
             (np.array([[500.0, 498.0, 490.0, 0.0], [-3.0, 0.0, 2.0, 1.0]]),),
             {"temperature": 0.5, "top_k": 3}),
    ),
    mistakes=(
        Mistake("ntp-multiplies-temperature",
                "the logits are multiplied by the temperature; they are divided by it "
                "(a low temperature sharpens the distribution)",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, multiply=True)),
        Mistake("ntp-ignores-temperature",
                "the temperature is ignored",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, 1.0, top_k)),
        Mistake("ntp-power-not-renormalised",
                "the probabilities are raised to 1 / temperature after the softmax and not "
                "divided by their sum again: they no longer add up to 1",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, power=True)),
        Mistake("ntp-ignores-top-k",
                "top_k is ignored: every token keeps its probability",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, None)),
        Mistake("ntp-top-k-smallest",
                "the k *smallest* logits are kept; top-k keeps the k largest",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, smallest=True)),
        Mistake("ntp-top-k-one-too-many",
                "k + 1 tokens are kept (an off-by-one at the cut)",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, extra=1)),
        Mistake("ntp-top-k-one-too-few",
                "the k-th largest logit is cut too (`z <= kth` instead of `z < kth`): k - 1 "
                "tokens are kept, and none when k = 1",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, extra=-1)),
        Mistake("ntp-top-k-not-renormalised",
                "the tokens outside the top k are zeroed after the softmax, and what is left "
                "is not divided by its sum: the probabilities add up to less than 1",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, renormalise=False)),
        Mistake("ntp-top-k-cut-to-logit-0",
                "the logits outside the top k are set to 0, not to -inf: exp(0) = 1, so the cut "
                "tokens keep a probability; a blocked token needs -inf",
                _SECTION_4, lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, fill=0.0)),
        Mistake("ntp-softmax-overflows",
                "the softmax does not subtract each row's maximum: exp of a large logit over the "
                "temperature overflows to inf, and inf / inf is NaN",
                "01 §3 · Softmax, without overflow", lambda logits, temperature=1.0, top_k=None:
                    _probabilities(logits, temperature, top_k, stable=False)),
    ),
)

# ── 10.3 · bigram_loss ────────────────────────────────────────────────────────────────────────


def _bigram(train_ids, val_ids, vocab, *, add=1.0, swap=False, joint=False, plain_rows=False,
            counted=None, unigram=False, once=False):
    """The smoothed bigram loss with the switches of the mistakes below."""
    source = train_ids if counted is None else counted
    counts = np.full((vocab, vocab), add)
    if once:  # fancy-index += : a pair that repeats is added once
        counts[source[:-1], source[1:]] += 1.0
    else:
        np.add.at(counts, (source[:-1], source[1:]), 1.0)
    if unigram:
        p = np.bincount(source, minlength=vocab) + add
        return float(-np.log(p / p.sum())[val_ids[1:]].mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        if joint:
            p = counts / counts.sum()
        elif swap:  # each column normalised: p(previous | next)
            p = counts / counts.sum(axis=0, keepdims=True)
        elif plain_rows:  # (count + 1) / the row's count of pairs, without + vocab
            p = counts / (counts - add).sum(axis=1, keepdims=True)
        else:
            p = counts / counts.sum(axis=1, keepdims=True)
        return float(-np.log(p[val_ids[:-1], val_ids[1:]]).mean())


def _ids(n, vocab):
    return _rng.integers(0, vocab, size=n)


_SECTION_3 = "10 §3 · What a model must beat"

BIGRAM = Exercise(
    key="10.3", name="bigram_loss", reference=bigram_loss, see=_SECTION_3,
    cases=(
        Case("train 'abab' and validation 'ab' as ids [0, 1, 0, 1] and [0, 1], 2 characters "
             "(by hand: 'a' was followed by 'b' twice and by 'a' never, so with one added to "
             "each count p(b | a) = 3/4, and the loss is -ln 3/4 = 0.288)",
             (np.array([0, 1, 0, 1]), np.array([0, 1]), 2)),
        Case("train [0, 0, 0, 0, 0, 1, 2, 0] and validation [0, 0, 1, 1], 3 characters (rows "
             "and columns of the counts give very different losses)",
             (np.array([0, 0, 0, 0, 0, 1, 2, 0]), np.array([0, 0, 1, 1]), 3)),
        Case("400 training and 50 validation ids of 5 characters", (_ids(400, 5), _ids(50, 5), 5)),
        Case("a vocabulary of 8 characters of which training uses only 4 (pairs it never saw)",
             (_ids(300, 4), np.r_[_ids(40, 8), 7, 6], 8)),
    ),
    mistakes=(
        Mistake("bigram-no-smoothing",
                "the counts get no +1: a pair the training text never had has probability 0, "
                "and its -ln 0 makes the loss infinite",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, add=0.0)),
        Mistake("bigram-conditions-on-the-next-character",
                "the counts are divided by their column sums (axis=0): that is "
                "p(previous | next); the prediction is p(next | previous), each row divided by "
                "its own sum (axis=1)",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, swap=True)),
        Mistake("bigram-joint-not-conditional",
                "the counts are divided by the number of all pairs: that is the joint "
                "probability p(previous, next); divide each row by its own sum",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, joint=True)),
        Mistake("bigram-denominator-without-vocabulary",
                "each count + 1 is divided by the row's count alone; with one added to each of "
                "the vocab entries of a row, the row's sum grows by vocab too",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, plain_rows=True)),
        Mistake("bigram-repeated-pairs-counted-once",
                "`table[a, b] += 1` with arrays of indices adds 1 once per distinct pair, however "
                "often it repeats; np.add.at(table, (a, b), 1) adds every occurrence",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, once=True)),
        Mistake("bigram-counts-the-validation-text",
                "the pairs are counted in the validation text: the loss then measures how well "
                "the text predicts itself; count the training text",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, counted=v)),
        Mistake("bigram-ignores-the-previous-character",
                "each character is predicted from the training text's character frequencies "
                "alone: that is the unigram loss; the bigram looks one character back",
                _SECTION_3, lambda t, v, vocab: _bigram(t, v, vocab, unigram=True)),
    ),
)

# ── 10.4 · top-p (nucleus) probabilities ─────────────────────────────────────────────────────


def _softmax_rows(logits, stable=True):
    z = np.asarray(logits, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):  # unstable: inf / inf is NaN
        e = np.exp(z - z.max(axis=-1, keepdims=True) if stable else z)
        return e / e.sum(axis=-1, keepdims=True)


def _top_p(logits, top_p, *, crossing=True, ascending=False, renormalise=True, stable=True,
           by_order=False, unsort=True):
    """Top-p probabilities: token i is kept when the tokens more probable than it hold less
    than top_p in total (so the token that reaches top_p is kept, and every token tied with
    it); with the switches of the mistakes below."""
    p = _softmax_rows(logits, stable)
    if by_order or not unsort:  # sorted, summed, cut by position: ties split by the order
        order = np.argsort(p if ascending else -p, axis=-1, kind="stable")
        ps = np.take_along_axis(p, order, axis=-1)
        kept = np.cumsum(ps, axis=-1) - ps < top_p
        keep = np.zeros_like(kept)
        if unsort:
            np.put_along_axis(keep, order, kept, axis=-1)
        else:  # the sorted mask laid on the tokens in their own order
            keep = kept
    else:
        before = p[..., None, :] < p[..., :, None] if ascending else \
            p[..., None, :] > p[..., :, None]  # [..., i, j]: j counts before i
        mass = (before * p[..., None, :]).sum(axis=-1)  # what comes before token i
        keep = mass < top_p if crossing else mass + p <= top_p
    with np.errstate(invalid="ignore"):  # nothing kept: 0 / 0, as it is for you
        q = np.where(keep, p, 0.0)
        return q / q.sum(axis=-1, keepdims=True) if renormalise else q


def _top_p_mistake(**switches):
    return lambda logits, top_p: _top_p(logits, top_p, **switches)


TOP_P = Exercise(
    key="10.4", name="top_p_probabilities", reference=_top_p, see=_SECTION_4,
    cases=(
        Case("logits ln [4, 2, 1, 1], top_p = 0.7 (by hand: probabilities [1/2, 1/4, 1/8, 1/8]; "
             "1/2 < 0.7, 3/4 reaches it: [2/3, 1/3, 0, 0])",
             (np.log([[4.0, 2.0, 1.0, 1.0]]), 0.7)),
        Case("2 rows of 6 logits, top_p = 0.9", (_rng.normal(size=(2, 6)) * 2, 0.9)),
        Case("a batch (2, 3, 10), top_p = 0.5", (_rng.normal(size=(2, 3, 10)) * 2, 0.5)),
        Case("5 logits, top_p = 1 (every token kept)", (_rng.normal(size=(1, 5)), 1.0)),
        Case("3 rows of 8 logits, top_p = 0.01 (only each row's most probable token)",
             (_rng.normal(size=(3, 8)) * 2, 0.01)),
        Case("ties: probabilities [0.4, 0.2, 0.2, 0.2] and logits [2, 2, 2, -1], top_p = 0.5 "
             "(every token tied with the one that reaches top_p is kept: 4 and 3 tokens)",
             (np.array([np.log([0.4, 0.2, 0.2, 0.2]), [2.0, 2.0, 2.0, -1.0]]), 0.5)),
        Case("logits [[800, 798, 790, 0]], top_p = 0.95 (exp(800) overflows unless the "
             "maximum is subtracted first)", (np.array([[800.0, 798.0, 790.0, 0.0]]), 0.95)),
        Case("logits [[0, 3, 1, 2, -1]] in no sorted order, top_p = 0.8",
             (np.array([[0.0, 3.0, 1.0, 2.0, -1.0]]), 0.8)),
    ),
    mistakes=(
        Mistake("topp-crossing-token-dropped",
                "the token whose probability takes the total to top_p or past it is dropped: "
                "it is kept (top-p keeps the smallest set that reaches top_p, and with "
                "top_p = 0.01 at least the most probable token)",
                _SECTION_4, _top_p_mistake(crossing=False)),
        Mistake("topp-not-renormalised",
                "the tokens outside the nucleus are zeroed, and what is left is not divided by "
                "its sum: the probabilities add up to less than 1",
                _SECTION_4, _top_p_mistake(renormalise=False)),
        Mistake("topp-sorted-ascending",
                "the probabilities are sorted in ascending order, so the least probable tokens "
                "are kept; sort in descending order (np.sort(p)[..., ::-1], or argsort of -p)",
                _SECTION_4, _top_p_mistake(ascending=True)),
        Mistake("topp-ties-split",
                "tokens tied with the one that reaches top_p are cut by their place in the "
                "sort; keep every token whose probability equals the last one kept (as 10.2 "
                "keeps ties at the k-th largest)",
                _SECTION_4, _top_p_mistake(by_order=True)),
        Mistake("topp-mask-not-unsorted",
                "the keep-mask is computed in sorted order and applied to the tokens in their "
                "own order: put it back where each token came from (the argsort's positions)",
                _SECTION_4, _top_p_mistake(unsort=False)),
        Mistake("topp-softmax-overflows",
                "the softmax does not subtract each row's maximum: exp(800) overflows to inf, "
                "and inf / inf is NaN",
                "01 §3 · Softmax, without overflow", _top_p_mistake(stable=False)),
    ),
)


# ── 10.5 · the warm-up and cosine learning-rate schedule ──────────────────────────────────────


def _cosine_lr(it, peak, warmup, total, floor):
    """nanoGPT's learning rate at step it (counted from 0): the library's cosine_schedule."""
    return cosine_schedule(peak, warmup, total, floor)(it)


def _lr(it, peak, warmup, total, floor, *, rise=(1, 1), start=None, half=0.5, turns=0.5,
        to_zero=False, hold=True):
    """The schedule with the switches of the mistakes below: the warm-up gives
    peak (it + rise[0]) / (warmup + rise[1]); the decay runs from `start` (the warm-up's end)."""
    if it < warmup:
        return peak * (it + rise[0]) / (warmup + rise[1])
    if hold and it > total:
        return floor
    start = warmup if start is None else start
    ratio = (it - start) / (total - start)
    low = 0.0 if to_zero else floor
    return low + half * (1.0 + math.cos(2 * math.pi * turns * ratio)) * (peak - low)


def _lr_mistake(**switches):
    return lambda it, peak, warmup, total, floor: _lr(it, peak, warmup, total, floor, **switches)


def _every_step(fn, peak, warmup, total, floor):
    """A probe: the rate at every step it = 0, 1, ..., total + 2, as one array (numbers only)."""
    rates = [fn(it, peak, warmup, total, floor) for it in range(total + 3)]
    numbers = all(isinstance(r, (int, float, np.integer, np.floating)) for r in rates)
    return np.array(rates, dtype=float) if numbers else rates


def _schedule_case(label, peak, warmup, total, floor):
    return Case(label, (peak, warmup, total, floor), probe=_every_step)


_RECIPE = "10 §6 · The recipe"

COSINE_LR = Exercise(
    key="10.5", name="cosine_lr", reference=_cosine_lr, see=_RECIPE,
    cases=(
        _schedule_case("by hand: peak 1, warm-up 2, total 6, floor 0, at it = 0 .. 8: "
                       "[1/3, 2/3, 1, 0.854, 0.5, 0.146, 0, 0, 0]", 1.0, 2, 6, 0.0),
        _schedule_case("peak 6e-4, warm-up 10, total 50, floor 6e-5, at it = 0 .. 52",
                       6e-4, 10, 50, 6e-5),
        _schedule_case("notebook 10's live run: peak 8e-3, warm-up 12, total 120, floor 1e-4",
                       8e-3, 12, 120, 1e-4),
        _schedule_case("no warm-up: peak 1e-3, warm-up 0, total 20, floor 1e-4 (it = 0 is the "
                       "peak)", 1e-3, 0, 20, 1e-4),
        _schedule_case("nanoGPT's CPU recipe: peak 1e-3, warm-up 100, total 2000, floor 1e-4",
                       1e-3, 100, 2000, 1e-4),
    ),
    mistakes=(
        Mistake("lr-warm-up-off-by-one",
                "the warm-up gives peak · it / warmup: the first step, it = 0, gets rate 0 and "
                "is wasted; it is peak · (it + 1) / (warmup + 1)", _RECIPE,
                _lr_mistake(rise=(0, 0))),
        Mistake("lr-warm-up-reaches-the-peak-early",
                "the warm-up gives peak · (it + 1) / warmup: it reaches the peak at "
                "it = warmup - 1, a step before the decay starts from it; divide by warmup + 1",
                _RECIPE, _lr_mistake(rise=(1, 0))),
        Mistake("lr-decay-counted-from-step-0",
                "the decay's progress is it / total, from step 0, not (it - warmup) / "
                "(total - warmup): the rate drops below the peak right after the warm-up",
                _RECIPE, _lr_mistake(start=0)),
        Mistake("lr-decays-to-0",
                "the cosine falls to 0, not to the floor: floor + (peak - floor) · "
                "(1 + cos(pi · ratio)) / 2", _RECIPE, _lr_mistake(to_zero=True)),
        Mistake("lr-no-half",
                "the factor 1/2 is missing: (1 + cos) goes from 2 to 0, so the decay starts at "
                "twice the peak", _RECIPE, _lr_mistake(half=1.0)),
        Mistake("lr-full-cosine",
                "a whole period of the cosine, cos(2 pi · ratio): the rate falls and climbs "
                "back to the peak at step total; half a period, cos(pi · ratio), only falls",
                _RECIPE, _lr_mistake(turns=1.0)),
        Mistake("lr-no-floor-after-total",
                "past step total the cosine goes on (and climbs back); from total on, the rate "
                "stays at the floor", _RECIPE, _lr_mistake(hold=False)),
    ),
)

EXERCISES = (NEXT_TOKEN_LOSS, PROBABILITIES, BIGRAM, TOP_P, COSINE_LR)
