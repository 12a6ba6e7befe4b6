"""Exercises of notebook 03: the sinusoidal table, embeddings plus positions, the matrix M_k
that shifts the table by k positions, and the offset between two rows read back from them."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import positional_encoding, relative_position_matrix

_rng = np.random.default_rng(103)  # the cases are the same on every run and every machine

# ── 03.1 · positional_encoding ────────────────────────────────────────────────────────────────


def _angles(positions, exponent):  # (T, d_model/2): pos / 10000^exponent, one per pair
    return positions[:, None] / 10000.0 ** exponent


def _interleave(sin, cos):
    PE = np.empty((sin.shape[0], 2 * sin.shape[1]))
    PE[:, 0::2], PE[:, 1::2] = sin, cos
    return PE


def _pe(T, d_model, exponent=None, start=0):  # the right layout, with a chosen exponent or start
    exponent = np.arange(0, d_model, 2) / d_model if exponent is None else exponent
    angles = _angles(np.arange(start, start + T), exponent)
    return _interleave(np.sin(angles), np.cos(angles))


def _pe_halves(T, d_model):
    angles = _angles(np.arange(T), np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


def _pe_swapped(T, d_model):
    angles = _angles(np.arange(T), np.arange(0, d_model, 2) / d_model)
    return _interleave(np.cos(angles), np.sin(angles))


def _pe_column_index(T, d_model):  # column j uses 10000^(j / d_model): the cos of a pair is off
    j = np.arange(d_model)
    angles = np.arange(T)[:, None] / 10000.0 ** (j / d_model)
    return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))


def _pe_inverted(T, d_model):  # pos * 10000^(2i/d) instead of pos / 10000^(2i/d)
    return _pe(T, d_model, exponent=-np.arange(0, d_model, 2) / d_model)


PE_TABLE = Exercise(
    key="03.1", name="positional_encoding", reference=positional_encoding,
    see="03 §2 · The sinusoidal encoding",
    cases=(
        Case("T = 3, d_model = 4 (by hand: PE[0] = [0 1 0 1], PE[2] = [sin 2, cos 2, sin 0.02, "
             "cos 0.02] = [0.9093 -0.4161 0.0200 0.9998])", (3, 4)),
        Case("T = 6, d_model = 8", (6, 8)),
        Case("T = 5, d_model = 10 (an odd number of pairs)", (5, 10)),
        Case("T = 50, d_model = 64 (notebook 03's table)", (50, 64)),
    ),
    mistakes=(
        Mistake("pe-sin-cos-in-halves",
                "all the sines come first, then all the cosines ([sin | cos]); the paper "
                "interleaves them: column 2i is a sine, column 2i + 1 the cosine of the same angle",
                "03 §3 · The wavelengths (its layout pitfall, detailed in Going further)",
                _pe_halves),
        Mistake("pe-exponent-i-over-d",
                "the exponent is i / d_model with the pair index i; it is 2i / d_model, so "
                "ω_i = 1 / 10000^(2i / d_model)",
                "03 §2 · The sinusoidal encoding",
                lambda T, d_model: _pe(T, d_model, exponent=np.arange(d_model // 2) / d_model)),
        Mistake("pe-exponent-4i-over-d",
                "the exponent is 2 · (2i) / d_model: np.arange(0, d_model, 2) already gives 2i, "
                "and it was doubled again, so ω_i = 1 / 10000^(4i / d_model)",
                "03 §2 · The sinusoidal encoding",
                lambda T, d_model: _pe(T, d_model,
                                       exponent=2 * np.arange(0, d_model, 2) / d_model)),
        Mistake("pe-exponent-column-index",
                "the exponent is j / d_model with the column index j, so the sine and the cosine "
                "of a pair turn at different speeds; both use 2i / d_model, i = j // 2",
                "03 §5 · A shift by k positions is a rotation", _pe_column_index),
        Mistake("pe-sin-cos-swapped",
                "the cosine is in the even columns and the sine in the odd ones; PE[pos, 2i] = "
                "sin, PE[pos, 2i + 1] = cos, so PE[0] = [0 1 0 1 ...]",
                "03 §2 · The sinusoidal encoding", _pe_swapped),
        Mistake("pe-positions-from-1",
                "the positions are counted from 1; they run 0 .. T - 1, so PE[0] = [0 1 0 1 ...]",
                "03 §2 · The sinusoidal encoding", lambda T, d_model: _pe(T, d_model, start=1)),
        Mistake("pe-frequency-inverted",
                "the angle is pos · 10000^(2i / d_model); it is pos / 10000^(2i / d_model), "
                "so that the pairs turn more and more slowly",
                "03 §2 · The sinusoidal encoding", _pe_inverted),
    ),
)

# ── 03.2 · embed ──────────────────────────────────────────────────────────────────────────────


def _embed(tokens, table, PE, *, scale=None, pe_scale=1.0, by_token=False):
    T, d_model = tokens.shape[-1], table.shape[-1]
    scale = np.sqrt(d_model) if scale is None else scale
    pe = PE[tokens] if by_token else PE[:T]
    return table[tokens] * scale + pe * pe_scale


def _concatenated(tokens, table, PE):
    x = table[tokens] * np.sqrt(table.shape[-1])
    return np.concatenate([x, np.broadcast_to(PE[:tokens.shape[-1]], x.shape)], axis=-1)


def _embed_case(label, lead, T, vocab, d_model, T_max):
    tokens = _rng.integers(0, vocab, size=(*lead, T))
    table = _rng.normal(0, 1 / np.sqrt(d_model), (vocab, d_model))
    return Case(label, (tokens, table, positional_encoding(T_max, d_model)))


EMBED = Exercise(
    key="03.2", name="embed", reference=_embed,
    see="03 §4 · Back to \"cat eats fish\"",
    cases=(
        Case("tokens [0 2 1], table 0.5·[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], PE of 5 "
             "positions, d_model = 4 (by hand: row 0 = [1 0 0 0] + PE[0] = [1 1 0 1])",
             (np.array([0, 2, 1]), 0.5 * np.array([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]]),
              positional_encoding(5, 4))),
        _embed_case("a batch of 2 sequences of 5 tokens, vocabulary 10, d_model = 8, PE of 12 "
                    "positions", (2,), 5, 10, 8, 12),
        _embed_case("6 tokens, vocabulary 5 (tokens repeat), d_model = 6, PE of exactly 6 "
                    "positions", (), 6, 5, 6, 6),
        _embed_case("a batch of 3 sequences of 4 tokens, vocabulary 7, d_model = 16, PE of 20 "
                    "positions", (3,), 4, 7, 16, 20),
    ),
    mistakes=(
        Mistake("emb-pe-concatenated",
                "PE is concatenated to the embeddings, [token | PE] of width 2·d_model; the "
                "paper adds it, keeping the width d_model",
                "03 §6 · The factor √d_model: reading token and position back from the sum "
                "(then Going further: added or concatenated)", _concatenated),
        Mistake("emb-not-scaled",
                "the embeddings are not multiplied by √d_model, so PE[pos] (norm √(d_model/2)) "
                "drowns the token vector",
                "03 §6 · The factor √d_model: reading token and position back from the sum",
                lambda tokens, table, PE: _embed(tokens, table, PE, scale=1.0)),
        Mistake("emb-scaled-by-d_model",
                "the embeddings are multiplied by d_model, not by √d_model",
                "03 §6 · The factor √d_model: reading token and position back from the sum",
                lambda tokens, table, PE: _embed(tokens, table, PE, scale=table.shape[-1])),
        Mistake("emb-divided-by-sqrt-d_model",
                "the embeddings are divided by √d_model instead of multiplied",
                "03 §6 · The factor √d_model: reading token and position back from the sum",
                lambda tokens, table, PE: _embed(tokens, table, PE,
                                                 scale=1 / np.sqrt(table.shape[-1]))),
        Mistake("emb-scaled-by-sqrt-vocab",
                "the factor is √(number of rows of the table), the vocabulary size (len(table)); "
                "it is √d_model, the table's last axis",
                "03 §6 · The factor √d_model: reading token and position back from the sum",
                lambda tokens, table, PE: _embed(tokens, table, PE, scale=np.sqrt(len(table)))),
        Mistake("emb-pe-scaled-too",
                "the sum (embedding + PE) is multiplied by √d_model; only the embedding is: "
                "√d_model · E[token] + PE[pos]",
                "03 §4 · Back to \"cat eats fish\"",
                lambda tokens, table, PE: _embed(tokens, table, PE,
                                                 pe_scale=np.sqrt(table.shape[-1]))),
        Mistake("emb-pe-indexed-by-token",
                "PE is indexed by the token ids (PE[tokens]); it is indexed by the position: "
                "the token at position t gets PE[t], PE[:T] for the whole sequence",
                "03 §4 · Back to \"cat eats fish\"",
                lambda tokens, table, PE: _embed(tokens, table, PE, by_token=True)),
    ),
)

# ── 03.3 · the shift by k positions, M_k ─────────────────────────────────────────────────────

_ROTATION = "03 §5 · A shift by k positions is a rotation"


def _rotation(k, d_model, *, pair_index=2, times_k=True, swap=False, transpose=False,
              halves=False, inverted=False):
    """M_k built block by block, with a chosen slip: the exponent (pair_index·i / d_model), the
    angle ω instead of kω, cos and sin swapped, each block transposed, pairs (i, i + d/2), or
    the frequency inverted (k·10000^(2i/d))."""
    angle = (k if times_k else 1) / 10000.0 ** (pair_index * np.arange(d_model // 2) / d_model
                                                * (-1 if inverted else 1))
    c, s = (np.sin(angle), np.cos(angle)) if swap else (np.cos(angle), np.sin(angle))
    first = np.arange(d_model // 2) if halves else np.arange(0, d_model, 2)
    second = first + d_model // 2 if halves else first + 1
    M = np.zeros((d_model, d_model))
    M[first, first], M[first, second] = c, -s
    M[second, first], M[second, second] = s, c
    return M.T if transpose else M


def _rotation_mistake(name, says, **slip):
    return Mistake(name, says, _ROTATION, lambda k, d_model: _rotation(k, d_model, **slip))


ROTATION = Exercise(
    key="03.3", name="relative_position_matrix", reference=relative_position_matrix,
    see=_ROTATION,
    cases=(
        Case("k = 1, d_model = 4 (by hand: block 0 turns pair 0 by 1 radian, block 1 turns "
             "pair 1 by 0.01)", (1, 4)),
        Case("k = 3, d_model = 8", (3, 8)),
        Case("k = -2 (a shift back), d_model = 6", (-2, 6)),
        Case("k = 0, d_model = 4: the identity", (0, 4)),
        Case("k = 7, d_model = 16", (7, 16)),
    ),
    mistakes=(
        _rotation_mistake(
            "rotation-transposed",
            "each block is transposed, [[cos kω, sin kω], [-sin kω, cos kω]]: it turns the other "
            "way, so PE[pos] @ M_k gives PE[pos - k] (rows of PE are row vectors, the matrix acts "
            "on the right)", transpose=True),
        _rotation_mistake(
            "rotation-frequency-without-the-2",
            "pair i turns by k·10000^(-i/d_model): its frequency is 10000^(-2i/d_model), the one "
            "of positional_encoding's columns 2i and 2i + 1", pair_index=1),
        _rotation_mistake(
            "rotation-sin-cos-swapped",
            "sin and cos are swapped in each block, [[sin kω, -cos kω], [cos kω, sin kω]]: the "
            "diagonal must hold cos kω (M_0 is the identity)", swap=True),
        _rotation_mistake(
            "rotation-angle-not-times-k",
            "each block turns by ω_i, not by k·ω_i: that is M_1, a shift by one position, "
            "whatever k", times_k=False),
        _rotation_mistake(
            "rotation-frequency-inverted",
            "pair i turns by k·10000^(2i/d_model); it turns by k / 10000^(2i/d_model), so the "
            "later pairs turn slower, not faster", inverted=True),
        _rotation_mistake(
            "rotation-pairs-in-halves",
            "the blocks pair column i with column i + d_model/2; the table interleaves its "
            "pairs, sin in column 2i and cos in column 2i + 1", halves=True),
    ),
)

# ── 03.4 · the offset between two rows (a transfer: §5's rotation run backwards) ────────────

_TABLE = "03 §2 · The sinusoidal encoding"


def _offset(a, b, *, pair=None, exponent=2, angle="atan2", sign=1):
    """k with a = PE[p] and b = PE[p + k], p unknown: the angle by which the slowest pair of a
    turns into that of b, over its frequency; with the slips of the mistakes below (another
    pair, another exponent, another way to take the angle, the sign)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d_model = a.shape[-1]
    i = d_model // 2 - 1 if pair is None else pair  # the slowest pair: no wrap for |k| w < pi
    w = 10000.0 ** (-exponent * i / d_model)
    sa, ca, sb, cb = a[..., 2 * i], a[..., 2 * i + 1], b[..., 2 * i], b[..., 2 * i + 1]
    cross, dot = ca * sb - sa * cb, ca * cb + sa * sb  # sin(k w) and cos(k w)
    if angle == "atan2":
        theta = np.arctan2(cross, dot)
    elif angle == "arccos":  # the dot product alone: |k w|
        theta = np.arccos(np.clip(dot, -1.0, 1.0))
    elif angle == "arctan":  # the quadrant lost: |k w| <= pi / 2
        theta = np.arctan(cross / dot)
    else:  # "rows": each row's own angle, subtracted without wrapping
        theta = np.arctan2(sb, cb) - np.arctan2(sa, ca)
    k = np.rint(sign * theta / w).astype(int)
    return k if k.ndim else int(k)


def _rows(d_model, p, k):
    """(PE[p], PE[p + k]) of the d_model-wide table; p and k may be arrays (a batch of rows)."""
    p, k = np.asarray(p), np.asarray(k)
    PE = positional_encoding(int(max(np.max(p), np.max(p + k))) + 1, d_model)
    return PE[p], PE[p + k]


OFFSET = Exercise(
    key="03.4", name="offset_between", reference=_offset, see=_ROTATION,
    cases=(
        Case("d_model = 4, a = PE[0] = [0 1 0 1], b = PE[1] = [sin 1, cos 1, sin 0.01, "
             "cos 0.01] (by hand: pair 1 turns from angle 0 to 0.01, and ω_1 = 0.01: k = 1)",
             _rows(4, 0, 1)),
        Case("d_model = 4, a = PE[5], b = PE[2] (k = -3: back three)", _rows(4, 5, -3)),
        Case("d_model = 8, a = PE[2], b = PE[14] (k = 12: pair 0 turns by 12 radians, almost "
             "two full turns)", _rows(8, 2, 12)),
        Case("d_model = 4, a = PE[30], b = PE[230] (k = 200: pair 1 turns by 2 radians, more "
             "than a quarter turn)", _rows(4, 30, 200)),
        Case("d_model = 4, a = PE[300], b = PE[330] (k = 30: pair 1's angle passes π between "
             "the two rows, 3.0 -> 3.3)", _rows(4, 300, 30)),
        Case("d_model = 16, a batch of 3 pairs of rows, (3, 16) each: p = 0, 7, 40 and k = 5, "
             "-5, 0", _rows(16, [0, 7, 40], [5, -5, 0])),
        Case("d_model = 64 (notebook 03's width), a = PE[1000], b = PE[750] (k = -250)",
             _rows(64, 1000, -250)),
    ),
    mistakes=(
        Mistake("offset-sign-flipped",
                "the sign is flipped: that is the offset from b back to a (p - q), or the sine "
                "and the cosine of a pair were read from the wrong columns; b = PE[p + k] is "
                "a's pair turned forward by kω (03.3's M_k)",
                _ROTATION, lambda a, b: _offset(a, b, sign=-1)),
        Mistake("offset-from-dot-product",
                "the angle comes from the pair's dot product alone (arccos of cos kω): a "
                "cosine is even, so it gives |k| and never the direction; the pair's cross "
                "product, sin kω, carries the sign (np.arctan2 takes both)",
                _ROTATION, lambda a, b: _offset(a, b, angle="arccos")),
        Mistake("offset-fastest-pair",
                "the angle is read from pair 0, which turns by k radians: an angle is known only "
                "up to whole turns, so any |k| > π comes back wrapped; the slowest pair, the "
                "last, turns by less than π for every offset in the cases",
                "03 §3 · The wavelengths", lambda a, b: _offset(a, b, pair=0)),
        Mistake("offset-exponent-i-over-d",
                "the angle is divided by 10000^(-i / d_model); the pair's frequency is "
                "ω_i = 10000^(-2i / d_model)",
                _TABLE, lambda a, b: _offset(a, b, exponent=1)),
        Mistake("offset-arctan-loses-quadrant",
                "the angle is np.arctan(sin / cos), which only returns angles between -π/2 and "
                "π/2: a turn of 2 radians comes back as 2 - π; np.arctan2(sin, cos) keeps the "
                "quadrant", _ROTATION, lambda a, b: _offset(a, b, angle="arctan")),
        Mistake("offset-angles-not-wrapped",
                "each row's angle is taken on its own and the two subtracted: np.arctan2 returns "
                "angles between -π and π, so when the rows sit on either side of π the "
                "difference is off by a full turn, 2π; take the angle between the two pairs "
                "(np.arctan2 of their cross and dot products), or wrap the difference",
                _ROTATION, lambda a, b: _offset(a, b, angle="rows")),
    ),
)

EXERCISES = (PE_TABLE, EMBED, ROTATION, OFFSET)
