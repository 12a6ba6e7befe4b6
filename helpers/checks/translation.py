"""Exercises of notebook 11: one merge of byte-pair encoding, one step of beam search, BLEU of a
corpus and of one sentence."""

import math
from collections import Counter

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.translation import END, beam_step, bleu, bpe_step, words

_rng = np.random.default_rng(111)  # the cases are the same on every run and every machine

# The headings of notebooks/11_translation.ipynb the messages send a learner to
# (tests/test_checks.py checks that each exists, in its section).
_BPE = "11 §2 · Words, then byte-pair encoding"
_BEAM = "11 §5 · Decoding: greedy, then beam search"
_BLEU = "11 §6 · BLEU"

# ── 11.1 · bpe_step ───────────────────────────────────────────────────────────────────────────


def _merged(symbols, pair, how="left"):
    """`symbols` with `pair` merged: "left" (right: every occurrence, left to right, none
    overlapping), "first" (the first occurrence only), "right" (from the right end), "overlap"
    (every boundary between a pair joined, so a a a -> aaa), "replace" (the symbols joined by
    spaces and the pair's text replaced, which also matches inside longer symbols)."""
    symbols = list(symbols)
    if how == "replace":
        return " ".join(symbols).replace(" ".join(pair), "".join(pair)).split(" ")
    if how == "overlap":
        out = [symbols[0]]
        for left, right in zip(symbols, symbols[1:]):
            if (left, right) == pair:
                out[-1] += right
            else:
                out.append(right)
        return out
    if how == "right":
        out, j = [], len(symbols) - 1
        while j >= 0:
            if j > 0 and (symbols[j - 1], symbols[j]) == pair:
                out.insert(0, symbols[j - 1] + symbols[j])
                j -= 2
            else:
                out.insert(0, symbols[j])
                j -= 1
        return out
    out, j, done = [], 0, False
    while j < len(symbols):
        if j + 1 < len(symbols) and (symbols[j], symbols[j + 1]) == pair and not done:
            out.append(symbols[j] + symbols[j + 1])
            j, done = j + 2, how == "first"
        else:
            out.append(symbols[j])
            j += 1
    return out


def _bpe(spelled, *, weighted=True, once=False, tie="larger", how="left"):
    """One merge with the switches of the mistakes below."""
    pairs = Counter()
    for symbols, count in spelled.items():
        found = list(zip(symbols, symbols[1:]))
        for pair in dict.fromkeys(found) if once else found:
            pairs[pair] += count if weighted else 1
    if tie == "larger":
        pair = max(pairs, key=lambda p: (pairs[p], p))
    elif tie == "smaller":
        pair = min(pairs, key=lambda p: (-pairs[p], p))
    else:  # the first pair counted among the most frequent: max(pairs, key=pairs.get)
        pair = max(pairs, key=pairs.get)
    return pair, {tuple(_merged(symbols, pair, how)): count for symbols, count in spelled.items()}


def _spelled(word_counts):
    """{word: count} -> {its characters, the last one marked END: count}."""
    return {(*word[:-1], word[-1] + END): count for word, count in word_counts.items()}


def _random_words(n, letters, longest):
    found = {}
    while len(found) < n:
        word = "".join(_rng.choice(list(letters), size=_rng.integers(1, longest + 1)))
        found.setdefault(word, int(_rng.integers(1, 20)))
    return found


def _after_merges(spelled, n):
    """The words after n merges of the reference: symbols of several characters."""
    for _ in range(n):
        spelled = bpe_step(spelled)[1]
    return spelled


BPE_STEP = Exercise(
    key="11.1", name="bpe_step", reference=bpe_step, see=_BPE, outputs=("pair", "spelled"),
    cases=(
        Case("low × 5, lower × 2, newest × 6, widest × 3, as characters (by hand: e s and "
             "s t</w> both occur 6 + 3 = 9 times, more than any other pair; of the two, the "
             "larger is ('s', 't</w>'), which becomes 'st</w>' in newest and widest)",
             (_spelled({"low": 5, "lower": 2, "newest": 6, "widest": 3}),)),
        Case("aaaa × 3 and baa × 1 (a a occurs 6 times; a a a a</w> becomes aa a a</w>: "
             "left to right, and a merged symbol is not merged again in the same step)",
             (_spelled({"aaaa": 3, "baa": 1}),)),
        Case("ababa × 2 and bab × 1 (a b occurs twice in ababa, 4 times in all: both are "
             "merged)", (_spelled({"ababa": 2, "bab": 1}),)),
        Case("xyz × 2 and ab × 2 (every pair occurs twice: the tie goes to the larger pair, "
             "('y', 'z</w>'))", (_spelled({"xyz": 2, "ab": 2}),)),
        Case("40 random words of the letters a to e, counts 1 to 19",
             (_spelled(_random_words(40, "abcde", 7)),)),
        Case("30 random words after 12 merges (symbols of several letters)",
             (_after_merges(_spelled(_random_words(30, "abcd", 8)), 12),)),
    ),
    mistakes=(
        Mistake("bpe-word-counts-ignored",
                "each pair is counted once per occurrence, not times the count of its word: "
                "a pair of a frequent word must weigh more",
                _BPE, lambda spelled: _bpe(spelled, weighted=False)),
        Mistake("bpe-repeated-pair-counted-once",
                "a pair that occurs twice in one word is counted once for it (a set of the "
                "word's pairs): count every occurrence, times the word's count",
                _BPE, lambda spelled: _bpe(spelled, once=True)),
        Mistake("bpe-ties-to-the-smaller-pair",
                "of the pairs tied for the most frequent, the smaller is merged; the rule is "
                "the larger, max over (count, pair)",
                _BPE, lambda spelled: _bpe(spelled, tie="smaller")),
        Mistake("bpe-ties-to-the-first-pair-counted",
                "of the pairs tied for the most frequent, the first one counted is merged "
                "(max(pairs, key=pairs.get) or most_common(1)): that depends on the order of "
                "the words; the rule is the larger pair, max over (count, pair)",
                _BPE, lambda spelled: _bpe(spelled, tie="first")),
        Mistake("bpe-first-occurrence-only",
                "only the first occurrence of the pair in each word is merged; every "
                "occurrence is",
                _BPE, lambda spelled: _bpe(spelled, how="first")),
        Mistake("bpe-overlapping-merges",
                "overlapping occurrences are all merged, so a a a becomes aaa; merge left to "
                "right and step past each merged pair: a a a becomes aa a",
                _BPE, lambda spelled: _bpe(spelled, how="overlap")),
        Mistake("bpe-merges-right-to-left",
                "the pairs are merged from the right end of the word, so a a a becomes a aa; "
                "merge from the left: aa a",
                _BPE, lambda spelled: _bpe(spelled, how="right")),
        Mistake("bpe-string-replace",
                "the symbols are joined by spaces and the pair's text replaced: 'a a' also "
                "matches inside 'b a a</w>' at the start of 'a</w>', a different symbol; "
                "compare whole symbols",
                _BPE, lambda spelled: _bpe(spelled, how="replace")),
    ),
)

# ── 11.2 · beam_step ──────────────────────────────────────────────────────────────────────────


def _beam(log_p, step, eos_id, length, alpha=0.6, *, add=True, lp=None, finish=1, take=2,
          eos_lives=False, eos_ignored=False, penalised_lives=False):
    """One step of beam search with the switches of the mistakes below: `finish` (the EOS among
    the first finish * k finish), `take` (take * k continuations are kept), `lp` (the penalty)."""
    k, V = step.shape
    total = ((log_p[:, None] if add else 0.0) + step).reshape(-1)
    best = np.argsort(-total, kind="stable")[:take * k]
    origin, token = best // V, best % V
    penalty = ((5.0 + length) / 6.0) ** alpha if lp is None else lp(length, alpha)
    finished = [] if eos_ignored else [
        (origin[j], total[best[j]], total[best[j]] / penalty)
        for j in range(min(finish * k, len(best))) if token[j] == eos_id]
    live = np.arange(k) if eos_lives or eos_ignored else np.flatnonzero(token != eos_id)[:k]
    new = total[best[live]] / (penalty if penalised_lives else 1.0)
    return origin[live], token[live], new, finished


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _beam_case(label, k, V, eos_id, length, *, first=False, eos_rank=(), eos_drop=False,
               pad=None, **kwargs):
    """log_p (k,) of k candidates (only the first alive at the first step), step (k, V);
    eos_rank [(row, r)]: EOS is row's r-th most likely next token (0: the most likely)."""
    log_p = np.r_[0.0, [-np.inf] * (k - 1)] if first else np.sort(-_rng.gamma(2.0, 1.5, k))[::-1]
    logits = _rng.normal(size=(k, V)) * 1.5
    for row, rank in eos_rank:
        others = np.sort(np.delete(logits[row], eos_id))[::-1]
        logits[row, eos_id] = others[0] + 0.5 if rank == 0 else others[rank - 1:rank + 1].mean()
    if eos_drop:
        logits[:, eos_id] = logits.min() - 10.0
    step = _log_softmax(logits)
    if pad is not None:
        step[:, pad] = -np.inf  # as beam search does: padding is never a token
    return Case(label, (log_p, step, eos_id, length), kwargs)


BEAM_STEP = Exercise(
    key="11.2", name="beam_step", reference=beam_step, see=_BEAM,
    outputs=("origin", "token", "log_p", "finished"),
    cases=(
        Case("k = 2, V = 5, EOS = 4, P = [0.6, 0.4], next-token probabilities [[0.05, 0.4, 0.03, "
             "0.02, 0.5], [0.3, 0.06, 0.1, 0.04, 0.5]], length 7, alpha = 1 (by hand: the most "
             "likely continuations are (0, EOS) 0.6 · 0.5 = 0.30, (0, 1) 0.24, (1, EOS) 0.20, "
             "(1, 0) 0.12, then (1, 2) 0.04; the best 2k = 4 are the first four; (0, EOS) is "
             "among the first k = 2, so it finishes with log P = ln 0.30 and score "
             "ln 0.30 / ((5 + 7) / 6) = -0.602; (1, EOS) is not, and is dropped; (0, 1) and "
             "(1, 0) live on with log P = ln 0.24 and ln 0.12)",
             (np.log([0.6, 0.4]), np.log([[0.05, 0.4, 0.03, 0.02, 0.5],
                                          [0.3, 0.06, 0.1, 0.04, 0.5]]), 4, 7),
             {"alpha": 1.0}),
        _beam_case("the first step: k = 3 copies of BOS, only the first alive (log P = [0, -inf, "
                   "-inf]), V = 10, EOS = 2 the second most likely token, length 1 (a penalty "
                   "of 1)", 3, 10, 2, 1, first=True,
                   eos_rank=[(0, 1)]),
        _beam_case("k = 4, V = 12, EOS = 0 the most likely next token of candidates 0 and 2 "
                   "(only candidate 0's EOS is among the first k), length 5, alpha 0.6 (the "
                   "default), padding (id 1) at -inf", 4, 12, 0, 5,
                   eos_rank=[(0, 0), (2, 0)], pad=1),
        _beam_case("k = 3, V = 9, EOS = 8 never among the best, length 4, alpha = 1", 3, 9, 8, 4,
                   eos_drop=True, alpha=1.0),
        Case("k = 2, V = 6, EOS = 5 the best continuation of both candidates, length 9, "
             "alpha = 0.8 (both finish; the next two continuations live on)",
             (np.array([-1.0, -1.5]), _log_softmax(np.array([[1.0, 2.0, 0.0, 0.5, 1.5, 4.0],
                                                             [0.0, 1.0, 2.5, 0.3, 0.2, 5.0]])),
              5, 9), {"alpha": 0.8}),
        _beam_case("k = 5, V = 20, EOS = 3, random, length 12", 5, 20, 3, 12,
                   eos_rank=[(1, 0), (3, 1), (4, 0)]),
    ),
    mistakes=(
        Mistake("beam-no-length-penalty",
                "a finished candidate's score is its log P: without the length penalty, short "
                "translations win; divide by ((5 + length) / 6) ** alpha",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, lp=lambda length, alpha: 1.0)),
        Mistake("beam-penalty-without-the-exponent",
                "the length penalty is (5 + length) / 6 without the exponent alpha",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, lp=lambda length, alpha: (5 + length) / 6)),
        Mistake("beam-penalty-over-5",
                "the length penalty is ((5 + length) / 5) ** alpha; GNMT's is "
                "((5 + length) / 6) ** alpha, which is 1 for a length of 1",
                _BEAM, lambda *a, **kw: _beam(
                    *a, **kw, lp=lambda length, alpha: ((5 + length) / 5) ** alpha)),
        Mistake("beam-penalised-log-p-lives-on",
                "the live candidates carry log P / penalty as their log-probability, so the "
                "penalty compounds step after step; only a finished candidate's score is "
                "divided by it",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, penalised_lives=True)),
        Mistake("beam-log-p-not-added",
                "the continuations are ranked by the next token's log-probability alone: add "
                "the candidate's log P to it (log P of the whole translation)",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, add=False)),
        Mistake("beam-eos-stays-live",
                "an EOS continuation is finished but also kept among the live candidates: the "
                "live ones are the first k continuations that are not EOS",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, eos_lives=True)),
        Mistake("beam-eos-never-finishes",
                "EOS is treated as any other token: nothing finishes and EOS continuations live "
                "on; an EOS among the first k finishes its candidate",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, eos_ignored=True)),
        Mistake("beam-eos-outside-the-first-k-finishes",
                "every EOS among the best 2k finishes; only an EOS among the first k does (the "
                "others are worse than k live candidates)",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, finish=2)),
        Mistake("beam-only-k-continuations",
                "only the best k continuations are taken: when some of them are EOS, fewer than "
                "k candidates live on; take the best 2k, of which at least k are not EOS",
                _BEAM, lambda *a, **kw: _beam(*a, **kw, take=1)),
    ),
)

# ── 11.3 · bleu ───────────────────────────────────────────────────────────────────────────────


def _ngrams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _bleu(hypotheses, references, max_n=4, *, clip=True, brevity="shorter", mean="geometric",
          scale=100.0, split=words, orders=0, per_sentence=False):
    """Corpus BLEU with the switches of the mistakes below: `orders` added to max_n."""
    if per_sentence:
        return float(np.mean([_bleu([h], [r], max_n) for h, r in zip(hypotheses, references)]))
    n_max = max_n + orders
    if n_max < 1:  # range(1, 1): no precision at all
        return float("nan")
    matches, totals, c, r = np.zeros(n_max), np.zeros(n_max), 0, 0
    for hypothesis, reference in zip(hypotheses, references):
        hyp, ref = split(hypothesis), split(reference)
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, n_max + 1):
            ref_counts = _ngrams(ref, n)
            matches[n - 1] += sum(min(k, ref_counts[g]) if clip else k * (g in ref_counts)
                                  for g, k in _ngrams(hyp, n).items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    p = matches / np.maximum(totals, 1)
    if mean == "arithmetic":
        combined = p.mean()
    elif not matches.all():
        return 0.0
    else:
        combined = np.exp(np.mean(np.log(p)))
    bp = 1.0 if (brevity == "never" or (brevity == "shorter" and c >= r)) else math.exp(1 - r / c)
    return float(scale * bp * combined)


# Multi30k-like captions, written for these cases; hypotheses as a model might translate them.
_REFERENCES = [
    "Two young men are playing soccer in a park.",
    "A woman in a red coat walks her black dog.",
    "A little girl is climbing the stairs of a wooden house.",
    "Three people sit on a bench near the river, talking.",
    "A man in an apron is cooking food on a grill outside.",
    "Children are running through a fountain on a hot day.",
    "A dog jumps over a log in the snow.",
    "An older woman is selling fruit at a market.",
]
_HYPOTHESES = [
    "Two young men play soccer in a park.",
    "A woman in a red jacket walks her dog.",
    "A small girl is climbing the stairs of a house.",
    "Three people are sitting on a bench by the river.",
    "A man with an apron cooks food on a grill.",
    "Kids run through a fountain on a hot day.",
    "A dog jumps over a log in snow.",
    "An old woman sells fruit at the market.",
]
_FILLERS = ["a", "the", "man", "dog", "is", "on", "in", "red", "small", ",", "."]


def _noisy(sentence, longer):
    """A sentence with a few words dropped, replaced or (when `longer`) added."""
    tokens = sentence.split()
    for _ in range(2):
        i = int(_rng.integers(len(tokens)))
        if longer:
            tokens.insert(i, str(_rng.choice(_FILLERS)))
        elif _rng.random() < 0.5 and len(tokens) > 3:
            del tokens[i]
        else:
            tokens[i] = str(_rng.choice(_FILLERS))
    return " ".join(tokens)


BLEU = Exercise(
    key="11.3", name="bleu", reference=bleu, see=_BLEU,
    cases=(
        Case("one sentence, max_n = 2: 'A dog runs in the snow.' against 'A dog is running in "
             "the snow.' (by hand: 6 of the 7 words and 4 of the 6 word pairs match; c = 7 < r = "
             "8, so BLEU = 100 exp(1 - 8/7) √(6/7 · 4/6) = 65.53)",
             (["A dog runs in the snow."], ["A dog is running in the snow."]), {"max_n": 2}),
        Case("one sentence, max_n = 1: 'the the the the' against 'the cat is on the mat' (by "
             "hand: 'the' counts at most twice, as often as the reference has it: precision 2/4; "
             "c = 4 < r = 6: BLEU = 100 exp(1 - 6/4) · 2/4 = 30.33)",
             (["the the the the"], ["the cat is on the mat"]), {"max_n": 1}),
        Case("8 captions and their translations, max_n = 4 (the default)",
             (_HYPOTHESES, _REFERENCES)),
        Case("the same captions with words dropped or replaced at random, max_n = 3",
             ([_noisy(s, False) for s in _REFERENCES], _REFERENCES), {"max_n": 3}),
        Case("the same captions with words added at random (longer than the references)",
             ([_noisy(s, True) for s in _REFERENCES], _REFERENCES)),
        Case("3 translations without a 4-gram in common with their references (BLEU 0)",
             (["A dog runs.", "Two men sit on a bench.", "A girl in red."],
              ["A dog is running.", "Two men are sitting on the bench.",
               "A girl dressed in red."])),
    ),
    mistakes=(
        Mistake("bleu-unclipped",
                "a hypothesis n-gram counts as often as the hypothesis has it, not at most as "
                "often as the reference has it: 'the the the the' would score 4/4",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, clip=False)),
        Mistake("bleu-no-brevity-penalty",
                "the brevity penalty is missing: a short hypothesis of safe words scores high; "
                "multiply by exp(1 - r / c) when c < r",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, brevity="never")),
        Mistake("bleu-brevity-penalty-when-longer",
                "exp(1 - r / c) multiplies the score also when the hypotheses are longer "
                "(c > r), where it is above 1; the penalty is 1 then",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, brevity="always")),
        Mistake("bleu-sentence-average",
                "each sentence's BLEU is computed and the scores averaged; corpus BLEU adds up "
                "the n-gram counts and lengths of all sentences first",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, per_sentence=True)),
        Mistake("bleu-arithmetic-mean",
                "the precisions are averaged arithmetically; BLEU takes their geometric mean, "
                "exp(mean(log p_n))",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, mean="arithmetic")),
        Mistake("bleu-fraction-not-percent",
                "the score is a fraction between 0 and 1; BLEU is reported in percent "
                "(as sacrebleu does), 0 to 100",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, scale=1.0)),
        Mistake("bleu-split-on-spaces",
                "the sentences are split on spaces, so 'snow.' is one word; split them with "
                "words(), BLEU's tokenizer, which makes 'snow' and '.' two",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, split=str.split)),
        Mistake("bleu-one-order-short",
                "the n-grams run from 1 to max_n - 1 (range(1, max_n)); they run to max_n "
                "included",
                _BLEU, lambda h, r, max_n=4: _bleu(h, r, max_n, orders=-1)),
    ),
)


# ── 11.4 · sentence_bleu ──────────────────────────────────────────────────────────────────────


def _sentence_bleu(hypothesis, reference, *, smooth="exp", clip=True, brevity="shorter",
                   mean="geometric", scale=100.0, effective=True, nothing_is_zero=True,
                   split=words):
    """Sentence BLEU as sacrebleu.sentence_bleu(hypothesis, [reference]) computes it by default:
    the n-gram precisions of 11.3 for one sentence, n = 1..min(4, c) (its effective order), a
    zero precision smoothed by Chen & Cherry's method 3 (the k-th order without a match counts
    1 / 2^k matches), 0 when no word matches; with the switches of the mistakes below (`split`
    is a default, so that the learner's words() is not taken for the library's work)."""
    hyp, ref = split(hypothesis), split(reference)
    c, r = len(hyp), len(ref)
    if not c or nothing_is_zero and not set(hyp) & set(ref):  # no word in common
        return 0.0
    orders = min(4, c) if effective else 4
    p, zeros = [], 0
    for n in range(1, orders + 1):
        ref_counts, total = _ngrams(ref, n), max(c - n + 1, 0)
        matches = sum(min(k, ref_counts[g]) if clip else k * (g in ref_counts)
                      for g, k in _ngrams(hyp, n).items())
        if total == 0:  # (effective=False) an order the hypothesis is too short for: 0 of 0
            p.append(1.0)
        elif smooth == "add-one":
            p.append((matches + 1) / (total + 1))
        elif matches or smooth == "none":
            p.append(matches / total)
        else:
            zeros = n if smooth == "every-order" else 1 if smooth == "not-doubled" else zeros + 1
            p.append(1 / 2 ** zeros / (1 if smooth == "undivided" else total))
    p = np.array(p)
    if mean == "arithmetic":
        combined = p.mean()
    elif not p.all():
        return 0.0
    else:
        combined = np.exp(np.log(p).sum() / orders)
    if brevity == "never" or (c >= r and brevity != "always"):
        bp = 1.0
    else:
        bp = math.exp(1 - c / r) if brevity == "inverted" else math.exp(1 - r / c)
    return float(scale * bp * combined)


def _sbleu_mistake(**switches):
    return lambda hypothesis, reference: _sentence_bleu(hypothesis, reference, **switches)


SENTENCE_BLEU = Exercise(
    key="11.4", name="sentence_bleu", reference=_sentence_bleu, see=_BLEU,
    cases=(
        Case("'A dog runs.' against 'A dog is running.' (by hand: precisions 3/4 and 1/3; no "
             "3-gram of 2 and no 4-gram of 1 matches: 1/(2 · 2) and 1/(4 · 1); c = 4 < r = 5: "
             "BLEU = 100 exp(1 - 5/4) (3/4 · 1/3 · 1/4 · 1/4)^(1/4) = 27.53)",
             ("A dog runs.", "A dog is running.")),
        Case("a perfect match (100)",
             ("Two young men are playing soccer in a park.",
              "Two young men are playing soccer in a park.")),
        Case("an ordinary translation, 4-grams matched (no smoothing needed)",
             ("A woman in a red jacket walks her dog.",
              "A woman in a red coat walks her black dog.")),
        Case("no 4-gram matches, the hypothesis longer than the reference (13 words against "
             "10: no brevity penalty)",
             ("Two men are sitting together on the old bench near the river.",
              "Two men sit on a bench by the river.")),
        Case("'Two men.', 3 words against 10: only n = 1 to 3 (no 4-gram at all), and a "
             "brevity penalty exp(1 - 10/3)",
             ("Two men.", "Two men sit on a bench by the river.")),
        Case("clipping: 'man' three times and 'and' twice, against a reference that has each "
             "once",
             ("A man and a man and a man.", "A man and a woman walk a dog.")),
        Case("no word in common (0, however smoothed)",
             ("Kids play outside", "A dog jumps over a log in the snow.")),
        Case("an empty hypothesis (0)", ("", "A dog runs.")),
    ),
    mistakes=(
        Mistake("sbleu-no-smoothing",
                "a precision of 0 gives 0, as corpus BLEU does: one sentence without a matching "
                "4-gram would score 0; smooth it: the k-th order without a match counts 1/2^k "
                "matches",
                _BLEU, _sbleu_mistake(smooth="none")),
        Mistake("sbleu-add-one-smoothing",
                "every order is smoothed by adding 1 to its matches and its n-grams; this "
                "method (Chen & Cherry's 3) changes only the orders without a match, to "
                "1 / (2^k n-grams)",
                _BLEU, _sbleu_mistake(smooth="add-one")),
        Mistake("sbleu-smoothing-counts-every-order",
                "the 2^k of the smoothing doubles at every order, matched or not (k = n); k "
                "counts only the orders without a match: the first gets 1/2, the second 1/4",
                _BLEU, _sbleu_mistake(smooth="every-order")),
        Mistake("sbleu-smoothing-not-doubled",
                "every order without a match counts 1/2 a match; the second counts 1/4, the "
                "third 1/8 (the geometric sequence)",
                _BLEU, _sbleu_mistake(smooth="not-doubled")),
        Mistake("sbleu-smoothed-precision-not-divided",
                "an order without a match gets precision 1/2^k; 1/2^k is its matches, to divide "
                "by its number of n-grams like every precision",
                _BLEU, _sbleu_mistake(smooth="undivided")),
        Mistake("sbleu-smoothed-when-nothing-matches",
                "a hypothesis with no word of the reference gets a smoothed score above 0; when "
                "no word matches there is nothing to smooth: 0",
                _BLEU, _sbleu_mistake(nothing_is_zero=False)),
        Mistake("sbleu-absent-orders-in-the-mean",
                "a hypothesis of fewer than 4 words has no 4-gram, and that order still counts "
                "in the mean (as a precision of 1, or dividing by 4); the mean runs over "
                "n = 1 .. min(4, c)",
                _BLEU, _sbleu_mistake(effective=False)),
        Mistake("sbleu-unclipped",
                "a hypothesis n-gram counts as often as the hypothesis has it, not at most as "
                "often as the reference has it",
                _BLEU, _sbleu_mistake(clip=False)),
        Mistake("sbleu-no-brevity-penalty",
                "the brevity penalty is missing: multiply by exp(1 - r / c) when c < r",
                _BLEU, _sbleu_mistake(brevity="never")),
        Mistake("sbleu-brevity-penalty-inverted",
                "the brevity penalty is exp(1 - c / r), above 1 for a short hypothesis; it is "
                "exp(1 - r / c), below 1",
                _BLEU, _sbleu_mistake(brevity="inverted")),
        Mistake("sbleu-brevity-penalty-when-longer",
                "exp(1 - r / c) multiplies the score also when the hypothesis is longer "
                "(c > r), where it is above 1; the penalty is 1 then",
                _BLEU, _sbleu_mistake(brevity="always")),
        Mistake("sbleu-arithmetic-mean",
                "the precisions are averaged arithmetically; BLEU takes their geometric mean, "
                "exp(mean(log p_n))",
                _BLEU, _sbleu_mistake(mean="arithmetic")),
        Mistake("sbleu-fraction-not-percent",
                "the score is a fraction between 0 and 1; it is in percent, 0 to 100, as 11.3's",
                _BLEU, _sbleu_mistake(scale=1.0)),
    ),
)

EXERCISES = (BPE_STEP, BEAM_STEP, BLEU, SENTENCE_BLEU)
