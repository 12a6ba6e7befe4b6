"""Exercises of notebook 02: multi-head attention: split_heads, merge_heads, the layer, and a
hand-built head that attends to the previous token."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.checks.sentences import probe_text
from helpers.transformer import merge_heads, scaled_dot_product_attention, softmax, split_heads

_rng = np.random.default_rng(102)  # the cases are the same on every run and every machine

# notebook 02's example: x[b, t, c] = 1000 b + 100 t + c (B = 2, T = 5, d_model = 12)
_CODED = 1000 * np.arange(2)[:, None, None] + 100 * np.arange(5)[:, None] + np.arange(12)

# ── 02.1 · split_heads ────────────────────────────────────────────────────────────────────────


def _cut(x, n_heads):  # (..., T, d_model) -> (..., T, h, d_k), the right first step
    return x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)


def _split_no_transpose(x, n_heads):
    *lead, T, d_model = x.shape
    return x.reshape(*lead, n_heads, T, d_model // n_heads)


def _split_strided(x, n_heads):  # features cut into d_k groups of h: head i = features i, i+h, ...
    *lead, T, d_model = x.shape
    return np.moveaxis(x.reshape(*lead, T, d_model // n_heads, n_heads), -1, -3)


SPLIT = Exercise(
    key="02.1", name="split_heads", reference=split_heads,
    see="02 §2 · Split and merge, one step at a time",
    cases=(
        Case("x = [[0 .. 5], [6 .. 11]] (T = 2, d_model = 6), n_heads = 3 (by hand: head i "
             "holds columns 2i and 2i + 1 of both tokens)",
             (np.arange(12).reshape(2, 6), 3)),
        Case("notebook 02's x[b, t, c] = 1000 b + 100 t + c, shape (2, 5, 12), n_heads = 4",
             (_CODED, 4)),
        Case("two leading axes: x of shape (2, 3, 4, 6), n_heads = 2",
             (_rng.normal(size=(2, 3, 4, 6)), 2)),
    ),
    mistakes=(
        Mistake("split-reshape-without-transpose",
                "x is reshaped straight to (..., h, T, d_k) without the swap, so a 'head' holds "
                "whole tokens instead of d_k features of every token",
                "02 §2 · Split and merge, one step at a time", _split_no_transpose),
        Mistake("split-swaps-last-two-axes",
                "after the reshape to (..., T, h, d_k) the last two axes are swapped (giving "
                "(..., T, d_k, h)); the token and head axes, -3 and -2, must be swapped",
                "02 §2 · Split and merge, one step at a time",
                lambda x, n_heads: _cut(x, n_heads).swapaxes(-1, -2)),
        Mistake("split-fixed-axes",
                "the swap is written swapaxes(1, 2), which is right only with exactly one batch "
                "axis; swap axes -3 and -2 so that any number of leading axes works",
                "02 §2 · Split and merge, one step at a time (the library versions: Going further)",
                lambda x, n_heads: _cut(x, n_heads).swapaxes(1, 2)),
        Mistake("split-strided-features",
                "the features are cut into (d_k, h) instead of (h, d_k), so head i gets features "
                "i, i + h, i + 2h, ... instead of the block i·d_k .. (i + 1)·d_k - 1",
                "02 §2 · Split and merge, one step at a time", _split_strided),
    ),
)

# ── 02.2 · merge_heads ────────────────────────────────────────────────────────────────────────


def _merge_no_transpose(x):
    *lead, h, T, d_k = x.shape
    return x.reshape(*lead, T, h * d_k)


def _merge_fixed_axes(x):
    *lead, h, T, d_k = x.shape
    return x.swapaxes(1, 2).reshape(*lead, T, h * d_k)


def _merge_interleaved(x):  # heads last: feature j of head i lands in column j·h + i
    *lead, h, T, d_k = x.shape
    return np.moveaxis(x, -3, -1).reshape(*lead, T, h * d_k)


MERGE = Exercise(
    key="02.2", name="merge_heads", reference=merge_heads,
    see="02 §2 · Split and merge, one step at a time",
    cases=(
        Case("x = [0 .. 11] as (h = 2, T = 3, d_k = 2) (by hand: row 0 is [0 1 6 7], head 0's "
             "token 0 then head 1's token 0)",
             (np.arange(12).reshape(2, 3, 2),)),
        Case("the heads of notebook 02's x (1000 b + 100 t + c), shape (2, 4, 5, 3): the merge "
             "gives x back", (split_heads(_CODED, 4),)),
        Case("two leading axes: x of shape (2, 3, 2, 4, 3)", (_rng.normal(size=(2, 3, 2, 4, 3)),)),
    ),
    mistakes=(
        Mistake("merge-reshape-without-transpose",
                "the heads are reshaped straight to (..., T, h·d_k) without swapping back first, "
                "so a 'token' row holds pieces of several tokens",
                "02 §2 · Split and merge, one step at a time", _merge_no_transpose),
        Mistake("merge-fixed-axes",
                "the swap back is written swapaxes(1, 2), which is right only with exactly one "
                "batch axis; swap axes -3 and -2",
                "02 §2 · Split and merge, one step at a time (the library versions: Going further)",
                _merge_fixed_axes),
        Mistake("merge-heads-interleaved",
                "the head axis is moved last, so the features of the heads are interleaved "
                "(column j·h + i) instead of head 0's d_k features, then head 1's, ...",
                "02 §2 · Split and merge, one step at a time", _merge_interleaved),
        Mistake("merge-concat-along-tokens",
                "the heads are concatenated along the token axis, giving (..., h·T, d_k); "
                "Concat(head_1, ..., head_h) joins them along the features, (..., T, h·d_k)",
                "02 §2 · Split and merge, one step at a time",
                lambda x: np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-2)),
    ),
)

# ── 02.3 · multi-head attention ───────────────────────────────────────────────────────────────


def _mha(query, key, value, W_q, W_k, W_v, W_o, n_heads, *, split=split_heads,
         merge=merge_heads, project_out=True):
    Q, K, V = split(query @ W_q, n_heads), split(key @ W_k, n_heads), split(value @ W_v, n_heads)
    heads, weights = scaled_dot_product_attention(Q, K, V)
    concat = merge(heads)
    return (concat @ W_o if project_out else concat), weights


def _mha_scaled_by_d_model(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    Q, K, V = (split_heads(x @ W, n_heads) for x, W in ((query, W_q), (key, W_k), (value, W_v)))
    weights = softmax(Q @ K.swapaxes(-1, -2) / np.sqrt(W_q.shape[-1]))  # √d_model, not √d_k
    return merge_heads(weights @ V) @ W_o, weights


def _mha_one_head(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    out, weights = scaled_dot_product_attention(query @ W_q, key @ W_k, value @ W_v)
    return out @ W_o, weights


def _mha_transposed(query, key, value, W_q, W_k, W_v, W_o, n_heads):
    return _mha(query, key, value, W_q.T, W_k.T, W_v.T, W_o.T, n_heads)


def _mha_case(label, T_q, T_k, d_model, n_heads, lead=(), self_attention=False, same_kv=False):
    W_q, W_k, W_v, W_o = _rng.normal(0, 1 / np.sqrt(d_model), (4, d_model, d_model))
    query = _rng.normal(size=(*lead, T_q, d_model))
    key = query if self_attention else _rng.normal(size=(*lead, T_k, d_model))
    value = key if self_attention or same_kv else _rng.normal(size=(*lead, T_k, d_model))
    return Case(label, (query, key, value, W_q, W_k, W_v, W_o, n_heads))


_X_HAND = np.array([[3.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 3.0, 6.0]])
_ZERO, _EYE = np.zeros((4, 4)), np.eye(4)

MHA = Exercise(
    key="02.3", name="multi_head_attention", reference=_mha,
    see="02 §3 · The layer in eight lines", outputs=("output", "weights"),
    cases=(
        Case("W_q = W_k = 0, W_v = W_o = I, h = 2, x = 3·[[1, 0, 0, 0], [0, 1, 0, 0], "
             "[0, 0, 1, 2]] (by hand: every weight is 1/3, every output row [1 1 1 2])",
             (_X_HAND, _X_HAND, _X_HAND, _ZERO, _ZERO, _EYE, _EYE, 2)),
        _mha_case("self-attention: a batch of 2, T = 5, d_model = 12, h = 4",
                  5, 5, 12, 4, lead=(2,), self_attention=True),
        _mha_case("cross-attention: a batch of 2, 3 queries, 6 keys (key = value), d_model = 8, "
                  "h = 2", 3, 6, 8, 2, lead=(2,), same_kv=True),
        _mha_case("no batch axis, 4 queries, 5 keys, key ≠ value, d_model = 6, h = 3",
                  4, 5, 6, 3),
    ),
    mistakes=(
        Mistake("mha-no-output-projection",
                "the merged heads are returned without the output projection: Concat(heads) "
                "W_o, not Concat(heads)",
                "02 §3 · The layer in eight lines",
                lambda *args: _mha(*args, project_out=False)),
        Mistake("mha-scaled-by-sqrt-d_model",
                "each head's scores are divided by √d_model; a head's dot products have d_k "
                "terms, so divide by √d_k = √(d_model / h)",
                "01 §4 · Why divide by √d_k", _mha_scaled_by_d_model),
        Mistake("mha-no-split",
                "Q, K and V are never split into heads: one attention of width d_model (weights "
                "(..., T_q, T_k)) instead of h attentions of width d_k (weights "
                "(..., h, T_q, T_k))",
                "02 §1 · Why more than one head", _mha_one_head),
        Mistake("mha-kv-from-query",
                "K and V are projected from the query input; K = key @ W_k and V = value @ W_v "
                "(in cross-attention the keys and values come from the other sequence)",
                "02 §4 · What the vectorised layer must equal",
                lambda q, k, v, *rest: _mha(q, q, q, *rest)),
        Mistake("mha-v-from-key",
                "V is projected from the key input (key @ W_v); it is value @ W_v: the values "
                "can be another sequence than the keys",
                "02 §4 · What the vectorised layer must equal (b: V_i = value @ W_v)",
                lambda q, k, v, *rest: _mha(q, k, k, *rest)),
        Mistake("mha-weights-transposed",
                "every projection is x @ W.T (PyTorch's nn.Linear convention); in this series "
                "weights act on the right: x @ W",
                "02 §3 · The layer in eight lines",
                _mha_transposed),
        Mistake("mha-split-without-transpose",
                "the heads are split with a reshape alone, (..., h, T, d_k) without the swap "
                "(does your split_heads pass 02.1?)",
                "02 §2 · Split and merge, one step at a time",
                lambda *args: _mha(*args, split=_split_no_transpose)),
        Mistake("mha-merge-without-transpose",
                "the heads are merged with a reshape alone, without swapping back first (does "
                "your merge_heads pass 02.2?)",
                "02 §2 · Split and merge, one step at a time",
                lambda *args: _mha(*args, merge=_merge_no_transpose)),
        Mistake("mha-weights-averaged-over-heads",
                "the weights returned are averaged over the heads, (..., T_q, T_k), as PyTorch's "
                "nn.MultiheadAttention returns them by default (average_attn_weights=True); "
                "return every head's, (..., h, T_q, T_k)",
                "02 §3 · The layer in eight lines",
                lambda *args: (lambda out, weights: (out, weights.mean(axis=-3)))(*_mha(*args))),
        Mistake("mha-split-and-merge-without-transpose",
                "the heads are split and merged with reshapes alone: the two undo each other (a "
                "round trip gives x back), but in between each 'head' sees whole tokens",
                "02 §2 · Split and merge, one step at a time",
                lambda *args: _mha(*args, split=_split_no_transpose, merge=_merge_no_transpose)),
    ),
)

# ── 02.4 · a head that attends to the previous token ─────────────────────────────────────────


def previous_token_head(d_model):
    """W_q, W_k (d_model, d_model) of a head that, on one-hot positions (token t = feature t),
    puts almost all of query t's weight on key t - 1: q_t = 10·√d_model·e_(t-1), k_s = e_s."""
    return 10 * np.sqrt(d_model) * np.eye(d_model, k=-1), np.eye(d_model)


_SHARP = 0.9  # the weight each query t >= 1 must put on key t - 1
_SIZES = ((3, 3), (8, 8), (16, 5), (16, 16), (32, 32))  # (d_model, T) of the cases
_LOOKS = probe_text("the key each query 1 .. T-1 puts its largest weight on")
_ENOUGH = probe_text("the smallest weight on key t - 1")
_AT_LEAST, _UNDER = probe_text("at least {sharp}"), probe_text("under {sharp}")
_NOT_A_PAIR = probe_text("not a pair (W_q, W_k) of arrays")
_SHAPES = probe_text("the shapes of W_q and W_k")
_SHAPES_ARE = probe_text("{q} and {k}, not ({d_model}, d_k) each")
_RETURNED = probe_text("returned")


def _weights(fn, d_model, T):
    """The (T, T) weights of the head fn(d_model) returns, run on T one-hot positions (no mask),
    or a dict saying what is wrong with what it returned."""
    returned = fn(d_model)
    try:
        W_q, W_k = (np.asarray(w, dtype=float) for w in returned)
    except Exception:
        return {_RETURNED: _NOT_A_PAIR}
    if W_q.ndim != 2 or W_q.shape[0] != d_model or W_k.shape != W_q.shape:
        return {_SHAPES: _SHAPES_ARE.format(q=W_q.shape, k=W_k.shape, d_model=d_model)}
    X = np.eye(T, d_model)  # (T, d_model): token t is position feature t
    return softmax((X @ W_q) @ (X @ W_k).T / np.sqrt(W_q.shape[1]))


def _head_on_positions(T):
    """A probe: where each query t >= 1 of the head looks most, on T one-hot positions."""
    def probe(fn, d_model):
        weights = _weights(fn, d_model, T)
        if isinstance(weights, dict):
            return weights
        return {_LOOKS: [int(k) for k in weights[1:].argmax(axis=-1)]}
    return probe


def _sharp_at_every_size(fn, sizes):
    """A probe: whether every query t >= 1, at every size, puts at least _SHARP of its weight on
    key t - 1. One answer for all sizes, so that a head too soft at T = 32 only and one too soft
    everywhere both match head-too-soft (where it looks is the other cases' business)."""
    smallest = 1.0
    for d_model, T in sizes:
        weights = _weights(fn, d_model, T)
        if isinstance(weights, dict):
            return weights
        rows = np.arange(1, T)
        smallest = min(smallest, float(weights[rows, rows - 1].min()))
    return {_ENOUGH: (_AT_LEAST if smallest >= _SHARP else _UNDER).format(sharp=_SHARP)}


def _head_case(label, d_model, T):
    return Case(label, (d_model,), probe=_head_on_positions(T))


_HEADS = "02 §6 · Two heads, two jobs, built by hand"

PREVIOUS_TOKEN_HEAD = Exercise(
    key="02.4", name="previous_token_head", reference=previous_token_head, see=_HEADS,
    cases=(
        _head_case("by hand: d_model = 3, T = 3 one-hot positions: query 1 looks most at key 0, "
                   "query 2 at key 1 -> [0, 1]", 3, 3),
        _head_case("d_model = 8, T = 8", 8, 8),
        _head_case("d_model = 16, T = 5 (fewer tokens than position features)", 16, 5),
        _head_case("d_model = 16, T = 16", 16, 16),
        _head_case("d_model = 32, T = 32", 32, 32),
        Case(f"the five sizes above: every query t >= 1 must put at least {_SHARP} of its weight "
             "on key t - 1 (at T = 32, 31 other keys share what is left)", (_SIZES,),
             probe=_sharp_at_every_size),
    ),
    mistakes=(
        Mistake("head-next-token",
                "each query looks at the next token, t + 1: the shift goes the wrong way; "
                "query t must carry the feature of position t - 1, so W_q[t, t - 1] is the one "
                "set in row t: ones below the diagonal, np.eye(d_model, k=-1)",
                _HEADS,
                lambda d: (10 * np.sqrt(d) * np.eye(d, k=1), np.eye(d))),
        Mistake("head-looks-at-itself",
                "each query looks at itself: q_t and k_t carry the same position feature (W_q "
                "and W_k equal, or shifted alike); only one of them is shifted by one position",
                _HEADS,
                lambda d: (10 * np.sqrt(d) * np.eye(d), np.eye(d))),
        Mistake("head-too-soft",
                f"each query looks most at t - 1, but at one size at least puts less than "
                f"{_SHARP} of its weight there: after the division by √d_k, the score of key "
                "t - 1 beats the T - 1 others by too little; scale W_q (or W_k) up until "
                "e^score >= 9·(T - 1) at every size, T = 32 included",
                "01 §4 · Why divide by √d_k",
                lambda d: (np.eye(d, k=-1), np.eye(d))),
    ),
)

EXERCISES = (SPLIT, MERGE, MHA, PREVIOUS_TOKEN_HEAD)
