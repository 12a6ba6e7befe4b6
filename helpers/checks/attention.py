"""Exercises of notebook 01: softmax, scaled dot-product attention with a mask, the variance of
the scores before and after the division by √d_k, and a log-softmax (the lesson's shift, applied
to a function it does not show)."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import scaled_dot_product_attention, softmax

_rng = np.random.default_rng(101)  # the cases are the same on every run and every machine


# Sections of notebook 04, which the learner meets later: the 01 checks point ahead to them.
_LATER_NO_KEY = "04 §4 · A query with nothing to see: `-inf` or `-1e9`? (a later notebook)"
_LATER_MASK_FIRST = "04 §3 · Mask before the softmax, not after (a later notebook)"
_LATER_ENCODINGS = "04 §7 · Other encodings (a later notebook)"

# ── 01.1 · softmax ────────────────────────────────────────────────────────────────────────────


def _no_shift(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def _shifted(x, axis):  # right, except for a row that is all -inf (NaN there)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _global_max(x, axis=-1):  # one shift for the whole array, not one per row
    e = np.exp(x - x.max())
    return e / e.sum(axis=axis, keepdims=True)


SOFTMAX = Exercise(
    key="01.1", name="softmax", reference=softmax,
    see="01 §3 · Softmax, without overflow",
    cases=(
        Case("x = [[1, 2, 3], [0, 0, 0]] (by hand: the second row is uniform)",
             (np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]),)),
        Case("x of shape (3, 4), axis=-1", (_rng.normal(size=(3, 4)),)),
        Case("x of shape (3, 4), axis=0 (columns sum to 1)", (_rng.normal(size=(3, 4)),),
             {"axis": 0}),
        Case("x of shape (2, 3, 4), the last axis", (_rng.normal(size=(2, 3, 4)),)),
        Case("large scores [[1000, 1001, 1002]] (exp(1000) overflows)",
             (np.array([[1000.0, 1001.0, 1002.0]]),)),
        Case("a row that is all -inf (every key blocked): zeros, not NaN",
             (np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]]),)),
        Case("rows far apart, [[1000, 1001], [-1000, -999]] (by hand: both rows are "
             "[0.2689, 0.7311])", (np.array([[1000.0, 1001.0], [-1000.0, -999.0]]),)),
    ),
    mistakes=(
        Mistake("softmax-no-max-shift",
                "exp(x) overflows for large scores: subtract the row's maximum before exp",
                "01 §3 · Softmax, without overflow", _no_shift),
        Mistake("softmax-ignores-axis",
                "the softmax always runs over the last axis: the `axis` argument is ignored",
                "01 §3 · Softmax, without overflow",
                lambda x, axis=-1: softmax(x, axis=-1)),
        Mistake("softmax-wrong-axis",
                "the softmax runs over axis 0 (down the columns), not over `axis`",
                "01 §2 · All the scores at once (row i holds query i's scores)",
                lambda x, axis=-1: softmax(x, axis=0)),
        Mistake("softmax-sum-over-everything",
                "the sum runs over the whole array, not along `axis`: no row sums to 1",
                "01 §3 · Softmax, without overflow",
                lambda x, axis=-1: np.exp(x - x.max()) / np.exp(x - x.max()).sum()),
        Mistake("softmax-nan-on-blocked-row",
                "a row that is all -inf gives NaN (-inf - (-inf)); it must give zeros",
                "01 §3 · Softmax, without overflow",
                lambda x, axis=-1: _shifted(x, axis)),
        Mistake("softmax-uniform-on-blocked-row",
                "-inf is replaced by a large finite number (-1e9) before the exp, so a row that "
                "is all -inf gets uniform weights (1/n each); it must give zeros",
                _LATER_NO_KEY,
                lambda x, axis=-1: softmax(np.where(np.isneginf(x), -1e9, x), axis=axis)),
        Mistake("softmax-global-max",
                "one maximum of the whole array (np.max(x)) is subtracted, not each row's: a row "
                "far below that maximum underflows to exp(...) = 0 and gets 0/0",
                "01 §3 · Softmax, without overflow", _global_max),
    ),
)

# ── 01.2 · scaled dot-product attention ───────────────────────────────────────────────────────


def _attend(scores, V):
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def _scores(Q, K, scale):
    return Q @ K.swapaxes(-1, -2) / scale


def _masked(scores, mask, fill=-np.inf):
    return scores if mask is None else np.where(mask, fill, scores)


def _mask_after_softmax(Q, K, V, mask=None):
    weights = softmax(_scores(Q, K, np.sqrt(Q.shape[-1])))
    if mask is not None:
        weights = np.where(mask, 0.0, weights)
    return weights @ V, weights


def _mask_times_scores(Q, K, V, mask=None):
    scores = _scores(Q, K, np.sqrt(Q.shape[-1]))
    return _attend(scores if mask is None else scores * ~mask, V)


def _nan_on_blocked(Q, K, V, mask=None):
    scores = _masked(_scores(Q, K, np.sqrt(Q.shape[-1])), mask)
    weights = _shifted(scores, -1)
    return weights @ V, weights


def _sdpa_case(label, T_q, T_k, d_k, d_v, mask=None, lead=()):
    Q = _rng.normal(size=(*lead, T_q, d_k))
    K, V = _rng.normal(size=(*lead, T_k, d_k)), _rng.normal(size=(*lead, T_k, d_v))
    return Case(label, (Q, K, V), {} if mask is None else {"mask": mask})


def _k_dot_t(Q, K, V, mask=None):  # K.T: right for one sequence, every axis reversed on a batch
    scores = _masked(Q @ K.T / np.sqrt(Q.shape[-1]), mask)
    return _attend(scores, V)


# notebook 01 §6's case to check by hand (3 tokens, d_k = d_v = 2)
_Q3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
_K3 = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
_V3 = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])

_BLOCKED = np.array([[False, False, True, True],  # query 0 sees keys 0-1
                     [False, True, False, True],  # query 1 sees keys 0 and 2
                     [True, True, True, True]])  # query 2 sees nothing

SDPA = Exercise(
    key="01.2", name="scaled_dot_product_attention", reference=scaled_dot_product_attention,
    see="01 §6 · Attention in six lines", outputs=("output", "weights"),
    cases=(
        Case("notebook 01's hand case, row i for query i: query 0 gets weights [0.4011 0.1978 "
             "0.4011], output[0] = [2.4067 2.2033]; query 2 gets weights [0.1978 0.4011 0.4011], "
             "output[2] = [2.2033 2.4067]", (_Q3, _K3, _V3)),
        _sdpa_case("2 queries, 3 keys, d_k = 16, d_v = 3, no mask", 2, 3, 16, 3),
        _sdpa_case("3 queries, 4 keys, d_k = 8, d_v = 5, a mask (True = blocked) whose last row "
                   "blocks every key", 3, 4, 8, 5, mask=_BLOCKED),
        _sdpa_case("a batch of 2, 3 queries, 4 keys, d_k = 9, d_v = 6, the mask above "
                   "broadcast over the batch", 3, 4, 9, 6, mask=_BLOCKED, lead=(2,)),
        _sdpa_case("a batch of 2, 3 queries, 4 keys, d_k = 5, d_v = 2, a padding mask of shape "
                   "(2, 1, 4): keys 2 and 3 of sequence 1 are padding, blocked for every one of "
                   "its queries (the mask broadcasts over the query axis)", 3, 4, 5, 2,
                   mask=np.array([[False] * 4, [False, False, True, True]])[:, None, :],
                   lead=(2,)),
    ),
    mistakes=(
        Mistake("attention-no-scaling",
                "the scores are not divided by √d_k: softmax(Q Kᵀ) V",
                "01 §4 · Why divide by √d_k",
                lambda Q, K, V, mask=None: _attend(_masked(_scores(Q, K, 1.0), mask), V)),
        Mistake("attention-scaled-by-d_k",
                "the scores are divided by d_k, not by √d_k",
                "01 §4 · Why divide by √d_k",
                lambda Q, K, V, mask=None: _attend(_masked(_scores(Q, K, Q.shape[-1]), mask), V)),
        Mistake("attention-scaled-by-sqrt-num-keys",
                "the scores are divided by √T_k (K.shape[-2], the number of keys), not by √d_k "
                "(K.shape[-1], the width of a key)",
                "01 §4 · Why divide by √d_k",
                lambda Q, K, V, mask=None: _attend(
                    _masked(_scores(Q, K, np.sqrt(K.shape[-2])), mask), V)),
        Mistake("attention-times-sqrt-d_k",
                "the scores are multiplied by √d_k instead of divided",
                "01 §4 · Why divide by √d_k",
                lambda Q, K, V, mask=None: _attend(
                    _masked(_scores(Q, K, 1 / np.sqrt(Q.shape[-1])), mask), V)),
        Mistake("attention-softmax-over-queries",
                "the softmax runs over the queries (axis -2): the weights of a query must sum to "
                "1 over the keys (the last axis)",
                "01 §2 · All the scores at once",
                lambda Q, K, V, mask=None: (
                    lambda w: (w @ V, w))(softmax(_masked(
                        _scores(Q, K, np.sqrt(Q.shape[-1])), mask), axis=-2))),
        Mistake("attention-k-transposed",
                "K.T (or np.transpose(K)) reverses every axis: right for one sequence, but a "
                "batch (B, T_k, d_k) becomes (d_k, T_k, B) and the matrix product fails; "
                "K.swapaxes(-1, -2) swaps only the last two axes",
                "01 §2 · All the scores at once (swapaxes, not .T)", _k_dot_t),
        Mistake("attention-values-are-keys",
                "the output mixes the keys (weights @ K), not the values (weights @ V)",
                "01 §1 · Queries, keys and values",
                lambda Q, K, V, mask=None: (
                    lambda o, w: (w @ K, w))(*scaled_dot_product_attention(Q, K, V, mask))),
        Mistake("attention-returns-weights-first",
                "the two results come back in the other order, (weights, output); return "
                "(output, weights), the output first",
                "01 §6 · Attention in six lines",
                lambda Q, K, V, mask=None: scaled_dot_product_attention(Q, K, V, mask)[::-1]),
        Mistake("mask-after-softmax",
                "the mask is applied after the softmax (blocked weights set to 0), so the "
                "remaining weights no longer sum to 1",
                _LATER_MASK_FIRST, _mask_after_softmax),
        Mistake("mask-inverted",
                "the mask is read as True = keep; in this series True = blocked",
                _LATER_ENCODINGS,
                lambda Q, K, V, mask=None: scaled_dot_product_attention(
                    Q, K, V, None if mask is None else ~mask)),
        Mistake("mask-multiplies-scores",
                "the mask multiplies the scores (a blocked score becomes 0, not -inf), so "
                "blocked keys still get weight",
                _LATER_MASK_FIRST, _mask_times_scores),
        Mistake("mask-fill-1e9-uniform-row",
                "blocked scores are set to -1e9: right where a query sees some key, but a query "
                "that sees none gets uniform weights instead of zeros",
                _LATER_NO_KEY,
                lambda Q, K, V, mask=None: _attend(
                    _masked(_scores(Q, K, np.sqrt(Q.shape[-1])), mask, -1e9), V)),
        Mistake("mask-added-1e9",
                "the mask is added to the scores (scores + mask * -1e9): right where a query sees "
                "some key, but a query that sees none keeps its scores' differences and gets the "
                "unmasked softmax instead of zeros",
                _LATER_NO_KEY,
                lambda Q, K, V, mask=None: _attend(
                    _scores(Q, K, np.sqrt(Q.shape[-1])) + (0 if mask is None else mask * -1e9),
                    V)),
        Mistake("mask-nan-on-blocked-row",
                "a query whose keys are all blocked gets NaN; it must get zero weights and a "
                "zero output",
                _LATER_NO_KEY, _nan_on_blocked),
    ),
)

# ── 01.3 · the variance of q·k, and the division by √d_k ────────────────────────────────────

_SCALE = "01 §4 · Why divide by √d_k"


def _dots(X_q, X_k, W_q, W_k):  # (n,): q_i · k_i, query i against key i
    return ((X_q @ W_q) * (X_k @ W_k)).sum(axis=-1)


def _score_variance(X_q, X_k, W_q, W_k):
    dots = _dots(X_q, X_k, W_q, W_k)
    return dots.var(), (dots / np.sqrt(W_q.shape[-1])).var()


def _variance_scaled_by(scale):  # scale(d_model, d_k) -> what the scores are divided by
    def model(X_q, X_k, W_q, W_k):
        dots = _dots(X_q, X_k, W_q, W_k)
        return dots.var(), (dots / scale(X_q.shape[-1], W_q.shape[-1])).var()
    return model


def _all_pairs(X_q, X_k, W_q, W_k):  # (n, n): q_i · k_j, every query against every key
    dots = (X_q @ W_q) @ (X_k @ W_k).T
    return dots.var(), (dots / np.sqrt(W_q.shape[-1])).var()


def _ddof_1(X_q, X_k, W_q, W_k):
    dots = _dots(X_q, X_k, W_q, W_k)
    return dots.var(ddof=1), (dots / np.sqrt(W_q.shape[-1])).var(ddof=1)


def _score_std(X_q, X_k, W_q, W_k):
    dots = _dots(X_q, X_k, W_q, W_k)
    return dots.std(), (dots / np.sqrt(W_q.shape[-1])).std()


def _variance_case(n, d_model, d_k, heads):
    """n random tokens for the queries and n for the keys (unit variance), and random projections
    with orthonormal columns. The tokens' entries are i.i.d. standard normal, so their projections
    on orthonormal columns are too: q and k have independent unit-variance components."""
    X_q, X_k = _rng.normal(size=(n, d_model)), _rng.normal(size=(n, d_model))
    W_q, W_k = (np.linalg.qr(_rng.normal(size=(d_model, d_k)))[0] for _ in range(2))
    raw, scaled = _score_variance(X_q, X_k, W_q, W_k)
    return Case(f"{n} random query and key tokens, d_model = {d_model}, d_k = {d_k} ({heads}): "
                f"about ({raw:.1f}, {scaled:.2f}), that is (d_k, 1)", (X_q, X_k, W_q, W_k))


# by hand: q = [1, 1], [2, 1] and k = [1, 0], [1, 2] (W picks the first two features), so the
# dot products are 1 and 4: variance 2.25, and 2.25 / 2 = 1.125 after dividing by √2
_XQ = np.array([[1.0, 1.0, 7.0], [2.0, 1.0, 0.0]])
_XK = np.array([[1.0, 0.0, 5.0], [1.0, 2.0, 3.0]])
_W_FIRST_TWO = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])

SCORE_VARIANCE = Exercise(
    key="01.3", name="score_variance", reference=_score_variance, see=_SCALE,
    outputs=("raw", "scaled"),
    cases=(
        Case("by hand: d_model = 3, d_k = 2, W_q = W_k keep the first two features, so the dot "
             "products are 1 and 4: (2.25, 1.125)", (_XQ, _XK, _W_FIRST_TWO, _W_FIRST_TWO)),
        _variance_case(1000, 64, 16, "4 heads"),
        _variance_case(1000, 512, 64, "8 heads, the paper's sizes"),
        _variance_case(2000, 32, 4, "8 heads"),
    ),
    mistakes=(
        Mistake("score-variance-all-pairs",
                "the variance is over every pair q_i·k_j (Q @ K.T, n² scores), not over the n "
                "scores q_i·k_i of query i with key i", _SCALE, _all_pairs),
        Mistake("score-variance-ddof-1",
                "the variance divides by n - 1 (ddof=1, the sample variance), not by n",
                _SCALE, _ddof_1),
        Mistake("score-variance-no-scaling",
                "the scores are not divided by √d_k: the second variance is the first one again",
                _SCALE, _variance_scaled_by(lambda d_model, d_k: 1.0)),
        Mistake("score-variance-scaled-by-d_k",
                "the scores are divided by d_k, not by √d_k: their variance becomes 1 / d_k, "
                "not 1", _SCALE, _variance_scaled_by(lambda d_model, d_k: d_k)),
        Mistake("score-variance-scaled-by-sqrt-d_model",
                "the scores are divided by √d_model (the width of the tokens), not by √d_k (the "
                "width of q and k, W_q's number of columns)",
                _SCALE, _variance_scaled_by(lambda d_model, d_k: np.sqrt(d_model))),
        Mistake("score-variance-is-std",
                "these are standard deviations (np.std), not variances: the standard deviation "
                "of q·k is √d_k, its variance d_k", _SCALE, _score_std),
    ),
)

# ── 01.4 · log-softmax, without underflow ────────────────────────────────────────────────────

_SOFTMAX = "01 §3 · Softmax, without overflow"


def _log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis` as x - m - log(sum(exp(x - m))), m the maximum: the sum is at
    least 1, so its log is finite; an all -inf row gives -inf (the log of 01.1's zeros)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)  # an all -inf row: never -inf - (-inf)
    total = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    return x - m - np.log(np.where(total > 0, total, 1))  # that row: x - 0 - log 1 = -inf


def _lse_mistake(shift="row", add_back=True, log=True, keepdims=True, axis_used=None):
    """The textbook x - m - log(sum(exp(x - m))), unguarded (NaN on an all -inf row), with one
    slip: shift "row" (each row's maximum), "global" (the whole array's) or None (no shift);
    add_back False (m missing from the result); log False (the sum itself subtracted);
    keepdims False; axis_used (the axis it runs along whatever `axis` says)."""
    def model(x, axis=-1):
        a = axis if axis_used is None else axis_used
        m = (np.max(x, axis=a, keepdims=keepdims) if shift == "row" else
             np.max(x) if shift == "global" else 0.0)
        s = x - m
        total = np.sum(np.exp(s), axis=a, keepdims=keepdims)
        return (s if add_back else x) - (np.log(total) if log else total)
    return model


def _zeros_on_blocked_row(x, axis=-1):  # 01.1's answer for that row, not its log
    out = _log_softmax(x, axis)
    return np.where(np.isneginf(x).all(axis=axis, keepdims=True), 0.0, out).astype(out.dtype)


LOG_SOFTMAX = Exercise(
    key="01.4", name="log_softmax", reference=_log_softmax, see=_SOFTMAX,
    cases=(
        Case("x = [[0, ln 3], [1, 1]] (by hand: [[ln 1/4, ln 3/4], [ln 1/2, ln 1/2]] = "
             "[[-1.3863, -0.2877], [-0.6931, -0.6931]])",
             (np.array([[0.0, np.log(3.0)], [1.0, 1.0]]),)),
        Case("x = [[1000, 0], [-1000, 0]] (by hand: [[0, -1000], [-1000, 0]]; e^-1000 "
             "underflows to 0, and exp(1000) overflows)",
             (np.array([[1000.0, 0.0], [-1000.0, 0.0]]),)),
        Case("rows far apart, [[1000, 1001], [-1000, -999]] (by hand: both rows are "
             "[-1.3133, -0.3133])", (np.array([[1000.0, 1001.0], [-1000.0, -999.0]]),)),
        Case("x of shape (2, 4, 4), the last axis", (_rng.normal(size=(2, 4, 4)) * 3,)),
        Case("x of shape (2, 4, 4), axis=1", (_rng.normal(size=(2, 4, 4)) * 3,), {"axis": 1}),
        Case("float32 x = [[0, -50, -120], [1, 2, 3]]: float32 in, float32 out (e^-120 "
             "underflows to 0 in float32)",
             (np.array([[0.0, -50.0, -120.0], [1.0, 2.0, 3.0]], dtype=np.float32),)),
        Case("a row that is all -inf, and one with a -inf entry: [[-inf, -inf, -inf], "
             "[0, -inf, 1]] (the all -inf row gives -inf, the log of 01.1's zeros, not NaN)",
             (np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]]),)),
    ),
    mistakes=(
        Mistake("logsoftmax-log-of-softmax",
                "this is np.log(softmax(x)): a weight that underflows to 0 (e^-1000) gives "
                "log(0) = -inf, where the right value is finite (-1000); stay in log space: "
                "x - m - log(sum(exp(x - m)))", _SOFTMAX,
                lambda x, axis=-1: np.log(softmax(x, axis=axis))),
        Mistake("logsoftmax-no-max-shift",
                "log(sum(exp(x))) is taken without subtracting the maximum: exp(1000) overflows "
                "to inf, and x - inf is -inf; subtract each row's maximum m first and add it "
                "back: log(sum(exp(x))) = m + log(sum(exp(x - m)))", _SOFTMAX,
                _lse_mistake(shift=None)),
        Mistake("logsoftmax-max-not-added-back",
                "the maximum m is subtracted inside the exp but missing from the result: "
                "log(sum(exp(x))) = m + log(sum(exp(x - m))), so the result is x - m - "
                "log(sum(exp(x - m))), not x - log(sum(exp(x - m)))", _SOFTMAX,
                _lse_mistake(add_back=False)),
        Mistake("logsoftmax-global-max",
                "one maximum of the whole array (np.max(x)) is subtracted, not each row's: in a "
                "row far below it every exp underflows to 0, and log(0) = -inf", _SOFTMAX,
                _lse_mistake(shift="global")),
        Mistake("logsoftmax-ignores-axis",
                "the log-softmax always runs over the last axis: the `axis` argument is ignored",
                _SOFTMAX, lambda x, axis=-1: _log_softmax(x, axis=-1)),
        Mistake("logsoftmax-no-keepdims",
                "the maximum and the sum are taken without keepdims=True: they lose the axis, "
                "and x - m lines them up with the wrong axis (or fails to broadcast)",
                _SOFTMAX, _lse_mistake(keepdims=False)),
        Mistake("logsoftmax-log-missing",
                "the sum itself is subtracted, not its log: x - m - sum(exp(x - m)); the "
                "log-softmax is x - m - log(sum(exp(x - m)))", _SOFTMAX,
                _lse_mistake(log=False)),
        Mistake("logsoftmax-nan-on-blocked-row",
                "a row that is all -inf gives NaN (-inf - (-inf), in x - m, or in subtracting "
                "log(0) = -inf); its softmax is zeros, so its log-softmax is -inf: subtract 0 "
                "where the maximum is not finite, and take the log of 1 where the sum is 0",
                _SOFTMAX, _lse_mistake()),
        Mistake("logsoftmax-zeros-on-blocked-row",
                "a row that is all -inf gives zeros: zeros are its softmax (01.1), and the log "
                "of a weight 0 is -inf", _SOFTMAX, _zeros_on_blocked_row),
        Mistake("logsoftmax-fill-1e9",
                "-inf is replaced by a large finite number (-1e9) first, so a row that is all "
                "-inf gets log(1/n) everywhere and a blocked entry about -1e9; both must be "
                "-inf", _LATER_NO_KEY,
                lambda x, axis=-1: _log_softmax(np.where(np.isneginf(x), -1e9, x), axis)),
        Mistake("logsoftmax-float64",
                "a float32 x comes back float64 (np.asarray(x, dtype=float), or a float64 "
                "constant): keep the input's dtype, as notebook 01 §7 checks",
                "01 §7 · Five checks",
                lambda x, axis=-1: _log_softmax(np.asarray(x, dtype=np.float64), axis)),
    ),
)

EXERCISES = (SOFTMAX, SDPA, SCORE_VARIANCE, LOG_SOFTMAX)
