"""Notebook 11's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/translation.py (its models of the same mistakes): index
loops, sorted() over tuples, heapq, string methods. tests/test_checks.py asserts that the checker
names exactly the mistake each one makes.
"""

import heapq
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

import helpers.translation
from helpers import checks
from helpers.checks.core import _call
from helpers.data import load_multi30k, load_translation_runs
from helpers.translation import words
from tests.exercises import ROOT, load, parts, solution_code, source

# ── 11.1 · bpe_step ───────────────────────────────────────────────────────────────────────────


def _pair_counts(spelled, weigh=True):
    counts = defaultdict(int)
    for symbols, n in spelled.items():
        for i in range(len(symbols) - 1):
            counts[symbols[i], symbols[i + 1]] += n if weigh else 1
    return counts


def _most_frequent(counts):
    top = max(counts.values())
    return max(p for p, n in counts.items() if n == top)


def _merge_all(symbols, pair):
    out, skip = [], False
    for i, s in enumerate(symbols):
        if skip:
            skip = False
        elif i + 1 < len(symbols) and s == pair[0] and symbols[i + 1] == pair[1]:
            out.append(s + symbols[i + 1])
            skip = True
        else:
            out.append(s)
    return tuple(out)


def bpe_word_counts_ignored(spelled):
    pair = _most_frequent(_pair_counts(spelled, weigh=False))
    return pair, {_merge_all(w, pair): n for w, n in spelled.items()}


def bpe_repeated_pair_counted_once(spelled):
    counts = Counter()
    for w, n in spelled.items():
        for pair in set(zip(w, w[1:])):  # each pair the word has, once
            counts[pair] += n
    pair = _most_frequent(counts)
    return pair, {_merge_all(w, pair): n for w, n in spelled.items()}


def bpe_ties_to_the_smaller_pair(spelled):
    counts = _pair_counts(spelled)
    pair = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]
    return pair, {_merge_all(w, pair): n for w, n in spelled.items()}


def bpe_ties_to_the_first_pair_counted(spelled):
    counts = Counter()
    for w, n in spelled.items():
        for p in zip(w, w[1:]):
            counts[p] += n
    pair = counts.most_common(1)[0][0]
    return pair, {_merge_all(w, pair): n for w, n in spelled.items()}


def bpe_first_occurrence_only(spelled):
    pair = _most_frequent(_pair_counts(spelled))
    new = {}
    for w, n in spelled.items():
        w = list(w)
        for i in range(len(w) - 1):
            if (w[i], w[i + 1]) == pair:
                w[i:i + 2] = [w[i] + w[i + 1]]
                break
        new[tuple(w)] = n
    return pair, new


def bpe_overlapping_merges(spelled):
    pair = _most_frequent(_pair_counts(spelled))
    new = {}
    for w, n in spelled.items():
        glue = [(a, b) == pair for a, b in zip(w, w[1:])]  # which boundaries disappear
        pieces = [w[0]]
        for symbol, joined in zip(w[1:], glue):
            if joined:
                pieces[-1] += symbol
            else:
                pieces.append(symbol)
        new[tuple(pieces)] = n
    return pair, new


def bpe_merges_right_to_left(spelled):
    pair = _most_frequent(_pair_counts(spelled))
    new = {}
    for w, n in spelled.items():
        w, i = list(w), len(w) - 2
        while i >= 0:
            if (w[i], w[i + 1]) == pair:
                w[i:i + 2] = [w[i] + w[i + 1]]
                i -= 2
            else:
                i -= 1
        new[tuple(w)] = n
    return pair, new


def bpe_string_replace(spelled):
    pair = _most_frequent(_pair_counts(spelled))
    return pair, {tuple(" ".join(w).replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1]).split()): n
                  for w, n in spelled.items()}


# ── 11.2 · beam_step ──────────────────────────────────────────────────────────────────────────


def _ranked(log_p, step, with_candidate=True):
    """Every continuation (log P, candidate, token), the most likely first (ties: the earlier)."""
    k, V = step.shape
    found = [((log_p[c] if with_candidate else 0.0) + step[c, v], c, v)
             for c in range(k) for v in range(V)]
    return sorted(found, key=lambda t: -t[0])  # sorted() is stable, as argsort(kind="stable")


def _search(log_p, step, eos_id, length, alpha=0.6, *, lp=None, keep=2, finish=1,
            eos_lives=False, eos_never=False, divide_live=False, with_candidate=True):
    k = len(log_p)
    penalty = lp(length, alpha) if lp else ((5 + length) / 6) ** alpha
    best = _ranked(log_p, step, with_candidate)[:keep * k]
    done = [] if eos_never else [(c, total, total / penalty)
                                 for total, c, v in best[:finish * k] if v == eos_id]
    if eos_lives or eos_never:
        live = best[:k]
    else:
        live = [t for t in best if t[2] != eos_id][:k]
    return (np.array([c for _, c, _ in live]), np.array([v for _, _, v in live]),
            np.array([total / (penalty if divide_live else 1) for total, _, _ in live]), done)


def beam_no_length_penalty(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, lp=lambda n, a: 1.0)


def beam_penalty_without_the_exponent(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, lp=lambda n, a: (5 + n) / 6)


def beam_penalty_over_5(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, lp=lambda n, a: ((5 + n) / 5) ** a)


def beam_penalised_log_p_lives_on(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, divide_live=True)


def beam_log_p_not_added(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, with_candidate=False)


def beam_eos_stays_live(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, eos_lives=True)


def beam_eos_never_finishes(log_p, step, eos_id, length, alpha=0.6):
    k, V = step.shape
    heap = [(-(log_p[c] + step[c, v]), c * V + v) for c in range(k) for v in range(V)]
    heapq.heapify(heap)
    best = [heapq.heappop(heap)[1] for _ in range(k)]  # no test for EOS at all
    return (np.array([j // V for j in best]), np.array([j % V for j in best]),
            np.array([log_p[j // V] + step[j // V, j % V] for j in best]), [])


def beam_eos_outside_the_first_k_finishes(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, finish=2)


def beam_only_k_continuations(log_p, step, eos_id, length, alpha=0.6):
    return _search(log_p, step, eos_id, length, alpha, keep=1)


# ── 11.3 · bleu ───────────────────────────────────────────────────────────────────────────────


def _grams(tokens, n):
    return Counter(zip(*(tokens[i:] for i in range(n))))


def _corpus(hypotheses, references, max_n, split=words, clip=True):
    """(clipped or not matches per n, n-grams per n, c, r)."""
    hits, total, c, r = [0] * max_n, [0] * max_n, 0, 0
    for h, ref in zip(hypotheses, references):
        h, ref = split(h), split(ref)
        c += len(h)
        r += len(ref)
        for n in range(1, max_n + 1):
            mine, theirs = _grams(h, n), _grams(ref, n)
            for g, k in mine.items():
                hits[n - 1] += min(k, theirs[g]) if clip else (k if g in theirs else 0)
            total[n - 1] += sum(mine.values())
    return hits, total, c, r


def _score(hits, total, c, r, brevity=True, always=False):
    if 0 in hits:
        return 0.0
    log_mean = sum(math.log(m / t) for m, t in zip(hits, total)) / len(hits)
    bp = math.exp(1 - r / c) if (always or c < r) and brevity else 1.0
    return 100 * bp * math.exp(log_mean)


def bleu_unclipped(hypotheses, references, max_n=4):
    return _score(*_corpus(hypotheses, references, max_n, clip=False))


def bleu_no_brevity_penalty(hypotheses, references, max_n=4):
    return _score(*_corpus(hypotheses, references, max_n), brevity=False)


def bleu_brevity_penalty_when_longer(hypotheses, references, max_n=4):
    return _score(*_corpus(hypotheses, references, max_n), always=True)


def bleu_sentence_average(hypotheses, references, max_n=4):
    scores = [_score(*_corpus([h], [r], max_n)) for h, r in zip(hypotheses, references)]
    return sum(scores) / len(scores)


def bleu_arithmetic_mean(hypotheses, references, max_n=4):
    hits, total, c, r = _corpus(hypotheses, references, max_n)
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    return 100 * bp * sum(m / t for m, t in zip(hits, total)) / max_n


def bleu_fraction_not_percent(hypotheses, references, max_n=4):
    return _score(*_corpus(hypotheses, references, max_n)) / 100


def bleu_split_on_spaces(hypotheses, references, max_n=4):
    return _score(*_corpus(hypotheses, references, max_n, split=str.split))


def bleu_one_order_short(hypotheses, references, max_n=4):
    hits, total, c, r = _corpus(hypotheses, references, max_n)
    hits, total = hits[:-1], total[:-1]  # orders 1 .. max_n - 1
    if not hits:
        return float("nan")
    return _score(hits, total, c, r)


# ── 11.4 · sentence_bleu ──────────────────────────────────────────────────────────────────────


def _one_sentence(mistake=None):
    """A learner's sentence BLEU: zip n-grams, a list of precisions, a sum of logs."""
    def sentence_bleu(hypothesis, reference):
        h, ref = words(hypothesis), words(reference)
        if not h:
            return 0.0
        if mistake != "nothing-smoothed" and not any(w in ref for w in h):
            return 0.0
        orders = 4 if mistake == "absent-orders" else min(4, len(h))
        precisions, found_none = [], 0
        for n in range(1, orders + 1):
            mine, theirs = _grams(h, n), _grams(ref, n)
            t = len(h) - n + 1
            if t < 1:  # no n-gram at all: none of them wrong
                precisions.append(1.0)
                continue
            m = sum(min(k, theirs[g]) if mistake != "unclipped" else k * (g in theirs)
                    for g, k in mine.items())
            if mistake == "add-one":
                precisions.append((m + 1) / (t + 1))
            elif m or mistake == "no-smoothing":
                precisions.append(m / t)
            else:
                found_none += 1
                k = {"every-order": n, "not-doubled": 1}.get(mistake, found_none)
                precisions.append(0.5 ** k if mistake == "undivided" else 0.5 ** k / t)
        if mistake == "arithmetic":
            mean = sum(precisions) / orders
        elif 0 in precisions:
            return 0.0
        else:
            mean = math.exp(sum(math.log(p) for p in precisions) / orders)
        c, r = len(h), len(ref)
        bp = {"no-bp": 1.0, "bp-inverted": math.exp(1 - c / r) if c < r else 1.0,
              "bp-always": math.exp(1 - r / c)}.get(mistake, math.exp(1 - r / c) if c < r else 1.0)
        return (1 if mistake == "fraction" else 100) * bp * mean

    return sentence_bleu


sbleu_no_smoothing = _one_sentence("no-smoothing")
sbleu_add_one_smoothing = _one_sentence("add-one")
sbleu_smoothing_counts_every_order = _one_sentence("every-order")
sbleu_smoothing_not_doubled = _one_sentence("not-doubled")
sbleu_smoothed_precision_not_divided = _one_sentence("undivided")
sbleu_smoothed_when_nothing_matches = _one_sentence("nothing-smoothed")
sbleu_absent_orders_in_the_mean = _one_sentence("absent-orders")
sbleu_unclipped = _one_sentence("unclipped")
sbleu_no_brevity_penalty = _one_sentence("no-bp")
sbleu_brevity_penalty_inverted = _one_sentence("bp-inverted")
sbleu_brevity_penalty_when_longer = _one_sentence("bp-always")
sbleu_arithmetic_mean = _one_sentence("arithmetic")
sbleu_fraction_not_percent = _one_sentence("fraction")


WRONG = {name.replace("_", "-"): fn for name, fn in list(globals().items())
         if name.startswith(("bpe_", "beam_", "bleu_", "sbleu_")) and callable(fn)}


# ── right answers written otherwise, the hand cases, the messages ─────────────────────────────


def test_right_answers_written_with_loops_pass():
    def bpe_step(spelled):
        pair = _most_frequent(_pair_counts(spelled))
        return pair, {_merge_all(w, pair): n for w, n in spelled.items()}

    def beam_step(log_p, step, eos_id, length, alpha=0.6):
        return _search(log_p, step, eos_id, length, alpha)

    def bleu(hypotheses, references, max_n=4):
        return _score(*_corpus(hypotheses, references, max_n))

    for fn in (bpe_step, beam_step, bleu):
        result = checks.check(fn)
        assert result.status == "passed", result.message


def test_the_hand_cases_are_what_their_labels_say():
    bpe, beam, score = (checks.CATALOGUE[key] for key in ("11.1", "11.2", "11.3"))
    pair, spelled = _call(bpe.reference, bpe.cases[0])
    assert pair == ("s", "t</w>") and _pair_counts(bpe.cases[0].args[0])[pair] == 9
    assert _pair_counts(bpe.cases[0].args[0])["e", "s"] == 9
    assert max(_pair_counts(bpe.cases[0].args[0]).values()) == 9
    assert spelled[("n", "e", "w", "e", "st</w>")] == 6
    assert _call(bpe.reference, bpe.cases[1])[1][("aa", "a", "a</w>")] == 3
    assert _call(bpe.reference, bpe.cases[3])[0] == ("y", "z</w>")

    origin, token, log_p, finished = _call(beam.reference, beam.cases[0])
    assert origin.tolist() == [0, 1] and token.tolist() == [1, 0]
    assert np.allclose(log_p, np.log([0.24, 0.12]))
    [(o, lp, s)] = finished
    assert o == 0 and np.isclose(lp, np.log(0.3)) and np.isclose(s, np.log(0.3) / 2)
    assert round(s, 3) == -0.602
    # the worked step of 11.2's task, with its numbers as printed there
    assert [round(float(x), 3) for x in (lp, *log_p)] == [-1.204, -1.427, -2.12]
    task = next(source(c) for c in load(ROOT / "notebooks" / "exercises" / "11_translation.ipynb")
                ["cells"] if source(c).startswith("## Exercise 11.2"))
    assert "**A worked step**" in task and "= [-1.427, -2.120]" in task \
        and "finished = [(0, -1.204, -0.602)]" in task
    assert len(_call(beam.reference, beam.cases[4])[3]) == 2  # both candidates finish

    assert round(_call(score.reference, score.cases[0]), 2) == 65.53
    assert math.isclose(_call(score.reference, score.cases[0]),
                        100 * math.exp(1 - 8 / 7) * math.sqrt(6 / 7 * 4 / 6))
    assert math.isclose(_call(score.reference, score.cases[1]), 100 * math.exp(1 - 6 / 4) * 2 / 4)
    assert _call(score.reference, score.cases[5]) == 0.0
    hypotheses, references = score.cases[4].args  # "longer than the references"
    assert sum(map(len, map(words, hypotheses))) > sum(map(len, map(words, references)))


def test_sentence_bleu_right_answers_written_otherwise_pass_and_an_unknown_smoothing_is_wrong():
    def sentence_bleu(hypothesis, reference):  # numpy arrays, the library's ngrams, a product
        hyp, ref = words(hypothesis), words(reference)
        n_max = min(4, len(hyp))
        grams = [(helpers.translation.ngrams(hyp, n), helpers.translation.ngrams(ref, n))
                 for n in range(1, n_max + 1)]
        matches = np.array([sum((mine & theirs).values()) for mine, theirs in grams], float)
        if n_max == 0 or matches[0] == 0:
            return 0.0
        zero = matches == 0
        matches[zero] = 0.5 ** np.arange(1, zero.sum() + 1)
        p = matches / (len(hyp) - np.arange(n_max))
        bp = min(1.0, math.exp(1 - len(ref) / len(hyp)))
        return 100 * bp * np.prod(p) ** (1 / n_max)

    result = checks.check(sentence_bleu)
    assert result.status == "passed", result.message

    def floor_smoothing(hypothesis, reference):  # Chen & Cherry's method 1: 0.1 match, not 1/2^k
        h, r = words(hypothesis), words(reference)
        if not set(h) & set(r):
            return 0.0
        n_max, logs = min(4, len(h)), 0.0
        for n in range(1, n_max + 1):
            m = sum(min(k, _grams(r, n)[g]) for g, k in _grams(h, n).items())
            logs += math.log((m or 0.1) / (len(h) - n + 1))
        return 100 * min(1.0, math.exp(1 - len(r) / len(h))) * math.exp(logs / n_max)

    result = checks.check(floor_smoothing, "11.4")
    assert result.status == "wrong" and not result.mistakes, result.message


def test_sentence_bleu_hand_cases_and_the_worked_case_of_the_task():
    ex = checks.CATALOGUE["11.4"]
    value = [_call(ex.reference, case) for case in ex.cases]
    assert math.isclose(value[0], 100 * math.exp(-1 / 4) / (2 * math.sqrt(2)))
    assert round(value[0], 2) == 27.53 and value[1] == 100.0 and value[6] == value[7] == 0.0
    assert math.isclose(value[4], 100 * math.exp(1 - 10 / 3) * (1 * 1 / 2 * 1 / 2) ** (1 / 3))
    hyp, ref = ex.cases[3].args  # "no 4-gram matches, longer"
    assert not _grams(words(hyp), 4) & _grams(words(ref), 4) and _grams(words(hyp), 3) & \
        _grams(words(ref), 3) and (len(words(hyp)), len(words(ref))) == (13, 10)
    task = next(source(c) for c in load(ROOT / "notebooks" / "exercises" / "11_translation.ipynb")
                ["cells"] if source(c).startswith("## Exercise 11.4"))
    assert "= 27.53$" in task and "Chen & Cherry (2014" in task


def test_sentence_bleu_equals_sacrebleus_sentence_bleu_on_test_translations():
    """The solution of the notebook and the checker's reference against sacrebleu.sentence_bleu
    (smoothing "exp", effective order: its defaults) on 200 of the committed model's test
    translations (76 of them share no 4-gram with the reference) and 60 cut or shuffled ones."""
    sacrebleu = pytest.importorskip("sacrebleu")
    nb = load(ROOT / "notebooks" / "exercises" / "11_translation.ipynb")
    scope = {"Counter": Counter, "np": np, "words": words}
    exec(solution_code(parts(nb)["11.4"]["solution"]), scope)
    _, english = load_multi30k("test_2016_flickr")
    pairs = list(zip(load_translation_runs()["decoding"]["greedy"]["hypotheses"], english))[:200]
    rng = np.random.default_rng(4)
    for sentence in english[200:260]:
        w = sentence.split()
        if rng.random() < 0.3:
            rng.shuffle(w)
        pairs.append((" ".join(w[:rng.integers(0, 6)]), sentence))  # 0 to 5 words
    assert sum(not _grams(words(h), 4) & _grams(words(r), 4) for h, r in pairs[:200]) == 76
    for hypothesis, reference in pairs:
        theirs = sacrebleu.sentence_bleu(hypothesis, [reference]).score
        assert math.isclose(scope["sentence_bleu"](hypothesis, reference), theirs, abs_tol=1e-9)
        assert math.isclose(checks.CATALOGUE["11.4"].reference(hypothesis, reference), theirs,
                            abs_tol=1e-9)


def test_the_library_parts_may_be_used_but_not_the_library_exercise():
    def bpe_step(spelled):  # notebook 11's counting and merging, put together by the learner
        pairs = helpers.translation.count_pairs(spelled)
        pair = max(pairs, key=lambda p: (pairs[p], p))
        return pair, {tuple(helpers.translation.merge_pair(list(w), pair)): n
                      for w, n in spelled.items()}

    assert checks.check(bpe_step).status == "passed"

    def bleu(hypotheses, references, max_n=4):
        return helpers.translation.bleu(hypotheses, references, max_n)

    for fn, key in ((helpers.translation.bpe_step, "11.1"), (bleu, "11.3"),
                    (helpers.translation.beam_step, "11.2")):
        result = checks.check(fn, key)
        assert result.status == "not credited", result.message
    assert "calls the library's bleu (helpers.translation)" in checks.check(bleu).message


def test_the_messages_show_the_words_and_the_finished_candidates():
    message = checks.check(bpe_overlapping_merges, "11.1").message
    assert ("  expected spelled (the entries that differ): {('aa', 'a', 'a</w>'): 3}\n"
            "  got      spelled (the entries that differ): {('aaa', 'a</w>'): 3}") in message
    message = checks.check(bpe_ties_to_the_smaller_pair, "11.1").message
    assert "  expected pair: ('s', 't</w>')\n  got      pair: ('e', 's')" in message
    message = checks.check(beam_eos_outside_the_first_k_finishes, "11.2").message
    assert ("  expected finished: [(0, -1.204, -0.602)]\n"
            "  got      finished: [(0, -1.204, -0.602), (1, -1.609, -0.8047)]") in message


def test_the_grader_grades_a_python_file_of_notebook_11(tmp_path, capsys):
    """A .py file of notebook 11's functions, through the command line's `main` (what `python -m
    helpers.checks` runs, tested from the shell in tests/test_grader.py; the solved notebook
    itself passes there, with the other ten)."""
    wrong = tmp_path / "11_wrong.py"
    wrong.write_text("import numpy as np\nfrom collections import Counter\n\n\n"
                     "def bpe_step(spelled):\n"
                     "    pairs = Counter()\n"
                     "    for w, n in spelled.items():\n"
                     "        for p in zip(w, w[1:]):\n"
                     "            pairs[p] += n\n"
                     "    pair = pairs.most_common(1)[0][0]\n"
                     "    return pair, {tuple(' '.join(w).replace(' '.join(pair), ''.join(pair))"
                     ".split()): n\n"
                     "                  for w, n in spelled.items()}\n", encoding="utf-8")
    code = checks.main([str(wrong)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "-- 11_wrong.py: 0 of 4 exercises passed" in out, out
    assert "✗ 11.2 beam_step: 11_wrong.py defines no beam_step." in out
    assert "✗ 11.1 bpe_step: wrong on" in out  # two mistakes at once: no one named
