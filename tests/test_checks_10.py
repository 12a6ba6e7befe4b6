"""Notebook 10's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/lm.py (its models of the same mistakes): loops over the
predictions, Counter tables, other spellings. tests/test_checks.py asserts that the checker names
exactly the mistake each one makes.
"""

import math
from collections import Counter

import numpy as np

from helpers import checks

# ── 10.1 · next_token_loss ────────────────────────────────────────────────────────────────────


def _log_probs(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def ntl_no_shift(logits, tokens):
    B, T, V = logits.shape
    lp = _log_probs(logits)
    return -np.mean([lp[b, t, tokens[b, t]] for b in range(B) for t in range(T)])


def ntl_shift_backwards(logits, tokens):
    lp = _log_probs(logits)[:, 1:]
    target = tokens[:, :-1]
    return -np.mean(np.take_along_axis(lp, target[..., None], axis=2))


def ntl_wraps_around(logits, tokens):
    nxt = np.roll(tokens, -1, axis=1)
    lp = _log_probs(logits)
    return -np.mean(np.take_along_axis(lp, nxt[..., None], axis=2))


def ntl_sum_not_mean(logits, tokens):
    lp = _log_probs(logits)
    return -sum(lp[b, t, tokens[b, t + 1]] for b in range(len(tokens))
                for t in range(tokens.shape[1] - 1))


def ntl_mean_over_sequences_only(logits, tokens):
    lp = _log_probs(logits)
    per_seq = [-sum(lp[b, t, tokens[b, t + 1]] for t in range(tokens.shape[1] - 1))
               for b in range(len(tokens))]
    return float(np.mean(per_seq))


def ntl_bits(logits, tokens):
    p = np.exp(_log_probs(logits))
    B, T, V = logits.shape
    return -np.mean([math.log2(p[b, t, tokens[b, t + 1]]) for b in range(B) for t in range(T - 1)])


def ntl_logits_not_log_probabilities(logits, tokens):
    picked = np.take_along_axis(logits[:, :-1], tokens[:, 1:, None], axis=2)
    return -picked.mean()


def ntl_softmax_overflows(logits, tokens):
    with np.errstate(all="ignore"):
        p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        return -np.mean(np.log(np.take_along_axis(p[:, :-1], tokens[:, 1:, None], axis=2)))


# ── 10.2 · next_token_probabilities ───────────────────────────────────────────────────────────


def _softmax(z):
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _top_k_mask(z, k):
    cut = -np.sort(-z, axis=-1)[..., k - 1:k]  # the k-th largest
    return z >= cut


def ntp_multiplies_temperature(logits, temperature=1.0, top_k=None):
    z = logits * temperature
    if top_k:
        z = np.where(_top_k_mask(z, top_k), z, -np.inf)
    return _softmax(z)


def ntp_ignores_temperature(logits, temperature=1.0, top_k=None):
    z = np.array(logits, dtype=float)
    if top_k:
        z = np.where(_top_k_mask(z, top_k), z, -np.inf)
    return _softmax(z)


def ntp_power_not_renormalised(logits, temperature=1.0, top_k=None):
    z = np.array(logits, dtype=float)
    if top_k:
        z = np.where(_top_k_mask(z, top_k), z, -np.inf)
    return _softmax(z) ** (1 / temperature)


def ntp_ignores_top_k(logits, temperature=1.0, top_k=None):
    return _softmax(logits / temperature)


def ntp_top_k_smallest(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k:
        cut = np.sort(z, axis=-1)[..., top_k - 1:top_k]  # the k-th smallest
        z = np.where(z <= cut, z, -np.inf)
    return _softmax(z)


def ntp_top_k_one_too_many(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k:
        cut = -np.sort(-z, axis=-1)[..., top_k:top_k + 1]  # off by one: the (k+1)-th largest
        z = np.where(z >= cut, z, -np.inf)
    return _softmax(z)


def ntp_top_k_one_too_few(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k:
        kth = np.sort(z, axis=-1)[..., -top_k, None]
        z = np.where(z <= kth, -np.inf, z)  # the k-th largest is cut too
    return _softmax(z)


def ntp_top_k_not_renormalised(logits, temperature=1.0, top_k=None):
    p = _softmax(logits / temperature)
    if top_k:
        p = np.where(_top_k_mask(logits / temperature, top_k), p, 0.0)
    return p


def ntp_top_k_cut_to_logit_0(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k:
        z = z * _top_k_mask(z, top_k)  # "mask out the rest": a 0 logit, not -inf
    return _softmax(z)


def ntp_softmax_overflows(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k:
        z = np.where(_top_k_mask(z, top_k), z, -np.inf)
    e = np.exp(z)  # "the softmax's definition"
    return e / e.sum(axis=-1, keepdims=True)


# ── 10.3 · bigram_loss ────────────────────────────────────────────────────────────────────────


def _pairs(ids):
    return Counter(zip(ids[:-1].tolist(), ids[1:].tolist()))


def bigram_no_smoothing(train_ids, val_ids, vocab):
    pairs, firsts = _pairs(train_ids), Counter(train_ids[:-1].tolist())
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.mean([np.log(pairs[(a, b)] / firsts[a]) if firsts[a] else -np.log(0.0)
                         for a, b in zip(val_ids[:-1].tolist(), val_ids[1:].tolist())])


def bigram_conditions_on_the_next_character(train_ids, val_ids, vocab):
    table = np.ones((vocab, vocab))
    for a, b in zip(train_ids[:-1], train_ids[1:]):
        table[a, b] += 1
    p = table / table.sum(axis=0, keepdims=True)  # p(previous | next)
    return float(-np.mean(np.log(p[val_ids[:-1], val_ids[1:]])))


def bigram_joint_not_conditional(train_ids, val_ids, vocab):
    table = np.ones((vocab, vocab))
    for a, b in zip(train_ids[:-1], train_ids[1:]):
        table[a, b] += 1
    return float(-np.mean(np.log(table[val_ids[:-1], val_ids[1:]] / table.sum())))


def bigram_denominator_without_vocabulary(train_ids, val_ids, vocab):
    pairs, firsts = _pairs(train_ids), Counter(train_ids[:-1].tolist())
    with np.errstate(divide="ignore"):
        losses = [-np.log(np.float64(pairs[(a, b)] + 1) / np.float64(firsts[a]))
                  for a, b in zip(val_ids[:-1].tolist(), val_ids[1:].tolist())]
    return float(np.mean(losses))


def bigram_repeated_pairs_counted_once(train_ids, val_ids, vocab):
    table = np.ones((vocab, vocab))
    table[train_ids[:-1], train_ids[1:]] += 1  # a repeated pair is added once
    p = table / table.sum(axis=1, keepdims=True)
    return float(-np.mean(np.log(p[val_ids[:-1], val_ids[1:]])))


def bigram_counts_the_validation_text(train_ids, val_ids, vocab):
    table = np.ones((vocab, vocab))
    np.add.at(table, (val_ids[:-1], val_ids[1:]), 1)
    table /= table.sum(axis=1, keepdims=True)
    return float(-np.log(table[val_ids[:-1], val_ids[1:]]).mean())


def bigram_ignores_the_previous_character(train_ids, val_ids, vocab):
    counts = Counter(train_ids.tolist())
    total = len(train_ids) + vocab
    return -np.mean([math.log((counts[b] + 1) / total) for b in val_ids[1:].tolist()])


# ── 10.4 · top_p_probabilities ────────────────────────────────────────────────────────────────


def _nucleus(mistake=None):
    """A learner's top-p, one row at a time: sort, add up, find the probability that reaches
    top_p, keep every token at least that probable."""
    def top_p_probabilities(logits, top_p):
        z = np.asarray(logits, dtype=float)
        e = np.exp(z) if mistake == "overflow" else np.exp(z - z.max(axis=-1, keepdims=True))
        probs = e / e.sum(axis=-1, keepdims=True)
        out = np.zeros_like(probs)
        for row, p in zip(out.reshape(-1, z.shape[-1]), probs.reshape(-1, z.shape[-1])):
            order = np.argsort(p, kind="stable")
            if mistake != "ascending":
                order = order[::-1] if mistake != "ties" else np.argsort(-p, kind="stable")
            ps = p[order]
            total = np.cumsum(ps)
            if mistake == "crossing":
                n = int((total <= top_p).sum())  # "stop before going past top_p"
            else:
                n = min(int((total < top_p).sum()) + 1, len(p))
            if mistake == "ties":
                keep = np.zeros(len(p), dtype=bool)
                keep[order[:n]] = True
            elif mistake == "unsorted":
                keep = np.arange(len(p)) < n  # the first n places, not the first n tokens
            else:
                keep = p >= ps[n - 1] if n else np.zeros(len(p), dtype=bool)
                if mistake == "ascending":
                    keep = p <= ps[n - 1]
            row[keep] = p[keep]
            if mistake != "no-renormalise":
                with np.errstate(invalid="ignore"):
                    row /= row.sum()
        return out

    return top_p_probabilities


topp_crossing_token_dropped = _nucleus("crossing")
topp_not_renormalised = _nucleus("no-renormalise")
topp_sorted_ascending = _nucleus("ascending")
topp_ties_split = _nucleus("ties")
topp_mask_not_unsorted = _nucleus("unsorted")
topp_softmax_overflows = _nucleus("overflow")


WRONG = {name.replace("_", "-"): fn for name, fn in list(globals().items())
         if name.startswith(("ntl_", "ntp_", "bigram_", "topp_")) and callable(fn)}


def test_a_learner_style_top_p_passes_and_the_cases_are_far_from_a_boundary():
    assert checks.check(_nucleus(None), "10.4").status == "passed"
    ex = checks.CATALOGUE["10.4"]
    for case in ex.cases:  # every cumulative sum is far from top_p: no rounding decides a case
        (logits, top_p), _ = case.arguments()
        p = np.sort(_softmax(np.asarray(logits, dtype=float)), axis=-1)[..., ::-1]
        gap = np.abs(np.cumsum(p, axis=-1) - top_p)
        assert gap[..., :-1].min() > 1e-6, case.label
    (logits, top_p), _ = ex.cases[0].arguments()
    assert np.allclose(ex.reference(logits, top_p), [[2 / 3, 1 / 3, 0, 0]])
    (logits, top_p), _ = ex.cases[5].arguments()
    assert (ex.reference(logits, top_p) > 0).sum(axis=-1).tolist() == [4, 3]


def test_a_right_loss_with_loops_passes():
    def next_token_loss(logits, tokens):
        lp = _log_probs(logits)
        B, T, _ = logits.shape
        return -np.mean([lp[b, t, tokens[b, t + 1]] for b in range(B) for t in range(T - 1)])

    assert checks.check(next_token_loss).status == "passed"


def test_a_right_bigram_with_a_counter_passes():
    def bigram_loss(train_ids, val_ids, vocab):
        pairs, firsts = _pairs(train_ids), Counter(train_ids[:-1].tolist())
        return -np.mean([math.log((pairs[(a, b)] + 1) / (firsts[a] + vocab))
                         for a, b in zip(val_ids[:-1].tolist(), val_ids[1:].tolist())])

    assert checks.check(bigram_loss).status == "passed"


# ── 10.5 · cosine_lr ──────────────────────────────────────────────────────────────────────────


def lr_warm_up_off_by_one(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * it / warmup  # step 0 gets 0
    if it > total:
        return floor
    progress = (it - warmup) / (total - warmup)
    return floor + (peak - floor) * (1 + math.cos(math.pi * progress)) / 2


def lr_warm_up_reaches_the_peak_early(it, peak, warmup, total, floor):
    if it >= warmup:
        if it > total:
            return floor
        progress = (it - warmup) / (total - warmup)
        return floor + 0.5 * (peak - floor) * (1 + np.cos(np.pi * progress))
    return (it + 1) / warmup * peak


def lr_decay_counted_from_step_0(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    if it > total:
        return floor
    return floor + 0.5 * (1 + math.cos(math.pi * it / total)) * (peak - floor)


def lr_decays_to_0(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    if it > total:
        return floor
    return peak * 0.5 * (1 + math.cos(math.pi * (it - warmup) / (total - warmup)))


def lr_no_half(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    if it > total:
        return floor
    coeff = 1 + math.cos(math.pi * (it - warmup) / (total - warmup))
    return floor + coeff * (peak - floor)


def lr_full_cosine(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    if it > total:
        return floor
    angle = 2 * math.pi * (it - warmup) / (total - warmup)
    return floor + (peak - floor) * (1 + math.cos(angle)) / 2


def lr_no_floor_after_total(it, peak, warmup, total, floor):
    if it < warmup:
        return peak * (it + 1) / (warmup + 1)
    decay_ratio = (it - warmup) / (total - warmup)
    return floor + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (peak - floor)


WRONG.update({name.replace("_", "-"): fn for name, fn in list(globals().items())
              if name.startswith("lr_") and callable(fn)})


def test_nanogpts_get_lr_passes():
    def cosine_lr(it, peak, warmup, total, floor):  # nanoGPT's get_lr, its names changed
        if it < warmup:
            return peak * (it + 1) / (warmup + 1)
        if it > total:
            return floor
        decay_ratio = (it - warmup) / (total - warmup)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # from 1 to 0
        return floor + coeff * (peak - floor)

    assert checks.check(cosine_lr).status == "passed"
