"""Exercises of notebook 04: the causal and the padding mask, and the two combined."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import causal_mask, padding_mask

# The cases are sizes and lengths chosen by hand: nothing here is random.

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
                "04 §7 · Other encodings, and converters",
                lambda T: _causal_where(T, lambda i, j: j <= i)),
        Mistake("causal-blocks-the-past",
                "the past is blocked instead of the future (j < i, below the diagonal): row i "
                "is query i, column j is key j, and the keys j > i are the future",
                "04 §1 · The causal mask: no looking ahead",
                lambda T: _causal_where(T, lambda i, j: j < i)),
        Mistake("causal-additive",
                "the mask is additive (0 and -inf, to be added to the scores); here a mask is "
                "boolean, True = blocked",
                "04 §7 · Other encodings, and converters",
                lambda T: np.where(causal_mask(T), -np.inf, 0.0)),
        Mistake("causal-additive-large-negative",
                "the mask is additive with a large negative number (0 and -1e9, to be added to "
                "the scores); here a mask is boolean, True = blocked",
                "04 §7 · Other encodings, and converters",
                lambda T: np.where(causal_mask(T), -1e9, 0.0)),
        Mistake("causal-keep-mask-numbers",
                "the mask holds 1 where a key is visible and 0 where it is blocked (a numeric "
                "keep-mask, np.tril of ones); here a mask is boolean, True = blocked",
                "04 §7 · Other encodings, and converters",
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
                "04 §7 · Other encodings, and converters",
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
                "04 §7 · Other encodings, and converters",
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

EXERCISES = (CAUSAL, PADDING, COMBINED)
