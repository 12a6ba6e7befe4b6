"""Exercises of notebook 04: the causal and the padding mask, the two combined, and a masked
softmax that gives a query with nothing to see zero weights, and a prefix-LM mask for a padded
batch (a mask the lesson does not show, built from its comparisons)."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import causal_mask, padding_mask, softmax
from helpers.transformer import softmax as _library_softmax  # watched in 04.4: see _masked_softmax

# The cases of 04.1-04.3 and 04.5 are sizes and lengths chosen by hand: nothing there is random.
# 04.4's scores are random, from this generator: the same on every run and every machine.
_rng = np.random.default_rng(104)

# ── 04.1 · the causal mask ────────────────────────────────────────────────────────────────────


def _grid(T):
    """(query i, key j) index grids, (T, 1) and (1, T)."""
    return np.arange(T)[:, None], np.arange(T)[None, :]


def _causal_where(T, blocked):
    i, j = _grid(T)
    return blocked(i, j)


CAUSAL = Exercise(
    key="04.1", name="causal_mask", reference=causal_mask,
    see="04 §1 · The causal mask: no looking ahead",
    cases=(
        Case("T = 3 (by hand: [[F, T, T], [F, F, T], [F, F, F]])", (3,)),
        Case("T = 1 (one token sees itself)", (1,)),
        Case("T = 4", (4,)),
        Case("T = 6", (6,)),
    ),
    mistakes=(
        Mistake("causal-diagonal-blocked",
                "the diagonal is blocked too (j >= i): a query must see its own key, so only "
                "j > i is blocked",
                "04 §1 · The causal mask: no looking ahead",
                lambda T: _causal_where(T, lambda i, j: j >= i)),
        Mistake("causal-inverted",
                "the mask is True where a key is visible (j <= i, a keep-mask); in this series "
                "True = blocked",
                "04 §7 · Other encodings",
                lambda T: _causal_where(T, lambda i, j: j <= i)),
        Mistake("causal-blocks-the-past",
                "the past is blocked instead of the future (j < i, below the diagonal): row i "
                "is query i, column j is key j, and the keys j > i are the future",
                "04 §1 · The causal mask: no looking ahead",
                lambda T: _causal_where(T, lambda i, j: j < i)),
        Mistake("causal-additive",
                "the mask is additive (0 and -inf, to be added to the scores); here a mask is "
                "boolean, True = blocked",
                "04 §7 · Other encodings",
                lambda T: np.where(causal_mask(T), -np.inf, 0.0)),
        Mistake("causal-additive-large-negative",
                "the mask is additive with a large negative number (0 and -1e9, to be added to "
                "the scores); here a mask is boolean, True = blocked",
                "04 §7 · Other encodings",
                lambda T: np.where(causal_mask(T), -1e9, 0.0)),
        Mistake("causal-keep-mask-numbers",
                "the mask holds 1 where a key is visible and 0 where it is blocked (a numeric "
                "keep-mask, np.tril of ones); here a mask is boolean, True = blocked",
                "04 §7 · Other encodings",
                lambda T: (~causal_mask(T)).astype(float)),
        Mistake("causal-not-boolean",
                "the mask holds numbers 0 and 1, not booleans: np.where(mask, ...) and ~mask "
                "need a boolean array (dtype=bool)",
                "04 §1 · The causal mask: no looking ahead",
                lambda T: causal_mask(T).astype(float)),
    ),
)


# ── 04.2 · the padding mask ───────────────────────────────────────────────────────────────────


def _padded(lengths, T, blocked):
    """(B, T) True where blocked(position j, length of sequence b)."""
    return blocked(np.arange(T)[None, :], np.asarray(lengths)[:, None])


PADDING = Exercise(
    key="04.2", name="padding_mask", reference=padding_mask,
    see="04 §2 · The padding mask: ignore the filler",
    cases=(
        Case("lengths = [2, 3], T = 3 (by hand: [[[[F, F, T]]], [[[F, F, F]]]])",
             (np.array([2, 3]), 3)),
        Case("lengths = [5, 3, 1], T = 6 (B = 3, no sequence fills T)", (np.array([5, 3, 1]), 6)),
        Case("lengths = [4, 0], T = 4 (one full sequence, one all padding)",
             (np.array([4, 0]), 4)),
        Case("lengths = [2], T = 5 (B = 1)", (np.array([2]), 5)),
    ),
    mistakes=(
        Mistake("padding-on-queries",
                "the mask has shape (B, 1, T, 1): it blocks the padded queries (rows), not the "
                "padded keys (columns); it must be (B, 1, 1, T)",
                "04 §5 · Columns and rows: padded keys, padded queries",
                lambda lengths, T: _padded(lengths, T, np.greater_equal)[:, None, :, None]),
        Mistake("padding-off-by-one",
                "position j = length is left unblocked (j > length): with length real tokens, "
                "positions 0 .. length - 1 are real and j >= length is padding",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: _padded(lengths, T, np.greater)[:, None, None, :]),
        Mistake("padding-inverted",
                "the mask is True at the real tokens (a keep-mask, j < length); in this series "
                "True = blocked",
                "04 §7 · Other encodings",
                lambda lengths, T: _padded(lengths, T, np.less)[:, None, None, :]),
        Mistake("padding-no-broadcast-axes",
                "the mask has shape (B, T): against scores (B, h, T_q, T_k) its batch axis "
                "lines up with the queries; add the singleton axes, (B, 1, 1, T)",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: _padded(lengths, T, np.greater_equal)),
        Mistake("padding-no-head-axis",
                "the mask has shape (B, 1, T): it fits single-head scores (B, T_q, T_k), but "
                "against (B, h, T_q, T_k) its batch axis lines up with the heads; it must be "
                "(B, 1, 1, T)",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: _padded(lengths, T, np.greater_equal)[:, None, :]),
        Mistake("padding-not-boolean",
                "the mask holds numbers 1 (padding) and 0, not booleans: np.where(mask, ...) and "
                "~mask need a boolean array (dtype=bool)",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: padding_mask(lengths, T).astype(float)),
        Mistake("padding-keep-mask-numbers",
                "the mask holds 1 at the real tokens and 0 at the padding (a numeric keep-mask, "
                "like Hugging Face's attention_mask); here a mask is boolean, True = blocked",
                "04 §7 · Other encodings",
                lambda lengths, T: (~padding_mask(lengths, T)).astype(float)),
        Mistake("padding-length-of-longest",
                "the mask is as long as the longest sequence, not T: the batch is padded to "
                "T, which may be longer",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: padding_mask(lengths, int(np.max(lengths)))),
    ),
)

# ── 04.3 · causal and padding together ───────────────────────────────────────────────────────


def _causal_padding_mask(lengths, T):
    return causal_mask(T) | padding_mask(lengths, T)  # (T, T) | (B, 1, 1, T) -> (B, 1, T, T)


def _queries_padded(lengths, T):
    return causal_mask(T) | _padded(lengths, T, np.greater_equal)[:, None, :, None]


COMBINED = Exercise(
    key="04.3", name="causal_padding_mask", reference=_causal_padding_mask,
    see="04 §2 · The padding mask: ignore the filler",
    cases=(
        Case("lengths = [2, 3], T = 3 (by hand: sequence 0 is [[F, T, T], [F, F, T], [F, F, T]])",
             (np.array([2, 3]), 3)),
        Case("lengths = [5, 3, 1], T = 6", (np.array([5, 3, 1]), 6)),
        Case("lengths = [4, 2], T = 4", (np.array([4, 2]), 4)),
    ),
    mistakes=(
        Mistake("combine-with-and",
                "the masks are combined with & (blocked only if both block); a key is blocked "
                "if either mask blocks it: |",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: causal_mask(T) & padding_mask(lengths, T)),
        Mistake("combine-padding-missing",
                "only the causal mask is returned: the padded keys are not blocked",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: causal_mask(T)),
        Mistake("combine-causal-missing",
                "only the padding mask is returned: a decoder's self-attention must also block "
                "the future",
                "04 §1 · The causal mask: no looking ahead",
                lambda lengths, T: padding_mask(lengths, T)),
        Mistake("combine-padding-on-queries",
                "the padding part blocks the padded queries (rows): a padded query then sees "
                "nothing; only the padded keys (columns) are to be blocked, and a padded query "
                "still sees the real keys",
                "04 §5 · Columns and rows: padded keys, padded queries", _queries_padded),
        Mistake("combine-no-head-axis",
                "the mask has shape (B, T, T): against scores (B, h, T, T) its batch axis lines "
                "up with the heads; it must be (B, 1, T, T)",
                "04 §2 · The padding mask: ignore the filler",
                lambda lengths, T: _causal_padding_mask(lengths, T)[:, 0]),
    ),
)

# ── 04.4 · a masked softmax, and a query with nothing to see ─────────────────────────────────

_NOTHING = "04 §4 · A query with nothing to see: `-inf` or `-1e9`?"


def _masked_softmax(scores, mask):
    # `check` does not credit the helpers functions a checker's reference calls by name, except
    # those named like another exercise (softmax is 01.1's). Under another name the library's
    # softmax is watched here: 04.4 asks for the masked softmax written out, not softmax(...).
    return _library_softmax(np.where(mask, -np.inf, scores), axis=-1)


def _textbook(scores):  # subtract the row's maximum, as usual: NaN for a row that is all -inf
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_then_mask(scores, mask):
    return np.where(mask, 0.0, softmax(scores, axis=-1))


def _renormalised(scores, mask):  # softmax, zero the blocked weights, divide by the new total
    kept = _softmax_then_mask(scores, mask)
    return kept / kept.sum(axis=-1, keepdims=True)


def _no_max_shift(scores, mask):
    e = np.exp(np.where(mask, -np.inf, scores))
    return e / e.sum(axis=-1, keepdims=True)


def _global_max(scores, mask):
    s = np.where(mask, -np.inf, scores)
    e = np.exp(s - s.max())
    return e / e.sum(axis=-1, keepdims=True)


# by hand: row 0 sees keys 0 and 1 with scores 0 and ln 3, so weights 1/4 and 3/4; row 1 sees
# nothing
_HAND_SCORES = np.array([[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0]])
_HAND_MASK = np.array([[False, False, True], [True, True, True]])
_LEFT_PADDED = causal_mask(5) | (np.arange(5) < np.array([[2], [0]]))[:, None, None, :]

MASKED_SOFTMAX = Exercise(
    key="04.4", name="masked_softmax", reference=_masked_softmax, see=_NOTHING,
    cases=(
        Case("scores [[0, ln 3, 5], [1, 2, 3]], mask [[F, F, T], [T, T, T]] (by hand: "
             "[[0.25, 0.75, 0], [0, 0, 0]])", (_HAND_SCORES, _HAND_MASK)),
        Case("random scores (4, 4) and the causal mask: every query sees at least one key",
             (_rng.normal(size=(4, 4)), causal_mask(4))),
        Case("random scores (2, 2, 5, 5) (a batch of 2, 2 heads), the causal mask of a batch "
             "whose first sequence has 2 <pad> on the left: its queries 0 and 1 see nothing",
             (_rng.normal(size=(2, 2, 5, 5)), _LEFT_PADDED)),
        Case("scores [[1000, 1001, 1002], [1000, 1001, 1002]] (exp(1000) overflows), mask "
             "[[F, F, T], [T, T, T]]",
             (np.array([[1000.0, 1001.0, 1002.0]] * 2), _HAND_MASK)),
        Case("rows far apart, scores [[1000, 1001, 5], [-1000, -999, 5]], mask [[F, F, T], "
             "[F, F, T]] (by hand: both rows are [0.2689, 0.7311, 0])",
             (np.array([[1000.0, 1001.0, 5.0], [-1000.0, -999.0, 5.0]]),
              np.array([[False, False, True]] * 2))),
        Case("a blocked key far above the visible ones: scores [[0, 0, 1000]], mask [[F, F, T]] "
             "(by hand: [[0.5, 0.5, 0]])",
             (np.array([[0.0, 0.0, 1000.0]]), np.array([[False, False, True]]))),
    ),
    mistakes=(
        Mistake("masked-softmax-nan-row",
                "a query whose keys are all blocked gets NaN (-inf - (-inf), or 0/0); it must "
                "get zeros", _NOTHING,
                lambda scores, mask: _textbook(np.where(mask, -np.inf, scores))),
        Mistake("masked-softmax-uniform-row",
                "blocked scores are set to -1e9: right where a query sees some key, but a query "
                "that sees none gets uniform weights over keys it may not see; it must get zeros",
                _NOTHING, lambda scores, mask: _textbook(np.where(mask, -1e9, scores))),
        Mistake("masked-softmax-added-1e9",
                "the mask is added to the scores (scores + mask * -1e9): a query that sees no "
                "key keeps its scores' differences and gets the unmasked softmax; it must get "
                "zeros", _NOTHING, lambda scores, mask: _textbook(scores + mask * -1e9)),
        Mistake("masked-softmax-mask-inverted",
                "the mask is read as True = keep; in this series True = blocked",
                "04 §7 · Other encodings",
                lambda scores, mask: _masked_softmax(scores, ~mask)),
        Mistake("masked-softmax-after-softmax",
                "the blocked weights are set to 0 after the softmax, so the weights a query "
                "keeps no longer sum to 1",
                "04 §3 · Mask before the softmax, not after", _softmax_then_mask),
        Mistake("masked-softmax-renormalised",
                "the softmax runs over every key, then the blocked weights are set to 0 and the "
                "rest divided by their sum: a blocked key far above the visible ones took all "
                "the weight, and what is left is 0/0; mask the scores before the softmax",
                "04 §3 · Mask before the softmax, not after", _renormalised),
        Mistake("masked-softmax-no-max-shift",
                "exp(scores) overflows for large scores: subtract the row's maximum (of the "
                "scores it may see) before exp", "01 §3 · Softmax, without overflow",
                _no_max_shift),
        Mistake("masked-softmax-global-max",
                "one maximum of the whole array is subtracted, not each row's: a row far below "
                "it underflows to exp(...) = 0 and gets 0/0",
                "01 §3 · Softmax, without overflow", _global_max),
    ),
)

# ── 04.5 · a prefix-LM mask for a padded batch ────────────────────────────────────────────────

_CAUSAL = "04 §1 · The causal mask: no looking ahead"
_PADDING = "04 §2 · The padding mask: ignore the filler"
_ROWS = "04 §5 · Columns and rows: padded keys, padded queries"


def _batch_grid(prefix_lens, lengths, T):
    """(query i, key j, prefix p, length n), broadcastable to (B, 1, T, T)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    p, n = (np.asarray(v)[:, None, None, None] for v in (prefix_lens, lengths))
    return i, j, p, n


def _prefix_lm_mask(prefix_lens, lengths, T):
    """(B, 1, T, T), True = blocked: key j is blocked for query i when it is padding (j >=
    lengths[b]), or in the future (j > i) and after the prefix (j >= prefix_lens[b]). A padded
    query sees the real keys, as in 04.3."""
    i, j, p, n = _batch_grid(prefix_lens, lengths, T)
    return ((j > i) & (j >= p)) | (j >= n)


def _prefix_where(blocked):
    """The (B, 1, T, T) mask where blocked(i, j, p, n) holds (the mistakes' models)."""
    def mask(prefix_lens, lengths, T):
        i, j, p, n = _batch_grid(prefix_lens, lengths, T)
        return np.broadcast_to(blocked(i, j, p, n), (len(lengths), 1, T, T))
    return mask


def _prefix_case(label, prefix_lens, lengths, T):
    return Case(label, (np.array(prefix_lens), np.array(lengths), T))


PREFIX_LM = Exercise(
    key="04.5", name="prefix_lm_mask", reference=_prefix_lm_mask, see=_CAUSAL,
    cases=(
        _prefix_case("prefix_lens = [2], lengths = [3], T = 4 (by hand: [[[[F, F, T, T], "
                     "[F, F, T, T], [F, F, F, T], [F, F, F, T]]]])", [2], [3], 4),
        _prefix_case("prefix_lens = [1, 3, 0], lengths = [4, 5, 2], T = 5 (a prefix and a "
                     "length of its own for each sequence)", [1, 3, 0], [4, 5, 2], 5),
        _prefix_case("prefix_lens = [0, 0], lengths = [3, 5], T = 5 (no prefix: 04.3's "
                     "causal_padding_mask)", [0, 0], [3, 5], 5),
        _prefix_case("prefix_lens = [3, 2], lengths = [3, 2], T = 4 (all prefix: only the "
                     "padding is blocked)", [3, 2], [3, 2], 4),
        _prefix_case("prefix_lens = [2, 4], lengths = [6, 4], T = 6", [2, 4], [6, 4], 6),
    ),
    mistakes=(
        Mistake("prefix-causal-everywhere",
                "this is 04.3's causal_padding_mask: the prefix is not opened, so a query in the "
                "prefix does not see the prefix keys after it", _CAUSAL,
                _prefix_where(lambda i, j, p, n: (j > i) | (j >= n))),
        Mistake("prefix-bidirectional-everywhere",
                "only the padding is blocked (bidirectional everywhere): only the prefix is read "
                "both ways; a key after the prefix stays hidden from the queries before it",
                _CAUSAL, _prefix_where(lambda i, j, p, n: j >= n)),
        Mistake("prefix-queries-see-the-future",
                "the prefix is opened by rows (its queries see every real key), so a prefix "
                "query sees the tokens after the prefix, the ones the model must predict; open "
                "the prefix's keys (columns) instead", _ROWS,
                _prefix_where(lambda i, j, p, n: ((j > i) & (i >= p)) | (j >= n))),
        Mistake("prefix-boundary-off-by-one",
                "key prefix_lens[b] is opened too (j > prefix_len is blocked, not j >= "
                "prefix_len): the prefix holds positions 0 .. prefix_len - 1", _CAUSAL,
                _prefix_where(lambda i, j, p, n: ((j > i) & (j > p)) | (j >= n))),
        Mistake("prefix-diagonal-shifted",
                "the diagonal is moved by the prefix length (np.triu(..., k=prefix_len + 1)): "
                "every query then sees prefix_len keys ahead of it, not the prefix; a key is "
                "blocked when it is in the future and after the prefix", _CAUSAL,
                _prefix_where(lambda i, j, p, n: (j > i + p) | (j >= n))),
        Mistake("prefix-combined-with-or",
                "'in the future' and 'after the prefix' are combined with |, which blocks a "
                "query's own past after the prefix; a key is blocked only if it is in the future "
                "and after the prefix (&), or padding", _PADDING,
                _prefix_where(lambda i, j, p, n: (j > i) | (j >= p) | (j >= n))),
        Mistake("prefix-one-prefix-for-the-batch",
                "every sequence gets the first sequence's prefix (prefix_lens[0]); each sequence "
                "b has its own, prefix_lens[b]", _PADDING,
                lambda prefix_lens, lengths, T: _prefix_lm_mask(
                    np.full(len(lengths), prefix_lens[0]), lengths, T)),
        Mistake("prefix-lengths-and-prefixes-swapped",
                "prefix_lens and lengths are swapped: the keys after prefix_lens[b] are blocked "
                "as padding and the prefix runs to lengths[b]; the call is prefix_lm_mask("
                "prefix_lens, lengths, T)", _PADDING,
                lambda prefix_lens, lengths, T: _prefix_lm_mask(lengths, prefix_lens, T)),
        Mistake("prefix-padding-not-blocked",
                "the padding keys are not blocked: a padded query sees the padding keys up to "
                "itself; never let a query see a key j >= lengths[b]", _PADDING,
                _prefix_where(lambda i, j, p, n: (j > i) & (j >= p))),
        Mistake("prefix-padding-on-queries",
                "the padding blocks the padded queries (rows), which then see nothing; block the "
                "padded keys (columns): a padded query still sees the real keys, as in 04.3",
                _ROWS,
                _prefix_where(lambda i, j, p, n: ((j > i) & (j >= p)) | (i >= n))),
        Mistake("prefix-no-head-axis",
                "the mask has shape (B, T, T): against scores (B, h, T, T) its batch axis lines "
                "up with the heads; it must be (B, 1, T, T)", _PADDING,
                lambda prefix_lens, lengths, T: _prefix_lm_mask(prefix_lens, lengths, T)[:, 0]),
        Mistake("prefix-inverted",
                "the mask is True where a key is visible (a keep-mask); in this series "
                "True = blocked", "04 §7 · Other encodings",
                lambda prefix_lens, lengths, T: ~_prefix_lm_mask(prefix_lens, lengths, T)),
        Mistake("prefix-not-boolean",
                "the mask holds numbers 0 and 1, not booleans: np.where(mask, ...) and ~mask "
                "need a boolean array (dtype=bool)", _CAUSAL,
                lambda prefix_lens, lengths, T: _prefix_lm_mask(prefix_lens, lengths,
                                                                T).astype(float)),
    ),
)

EXERCISES = (CAUSAL, PADDING, COMBINED, MASKED_SOFTMAX, PREFIX_LM)
