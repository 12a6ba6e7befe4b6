"""The Transformer of "Attention Is All You Need", in NumPy, in the order the notebooks build it.

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/transformer.py``; ``tests/test_sync.py`` proves the two copies are identical.
Edit the notebook, then copy the cell here (or the other way round): the test says if you forgot.

Conventions (see the README): weights act on the right (``x @ W``); masks are boolean with
``True`` = blocked; float32 in gives float32 out.
"""

import numpy as np

# ── 01 · Scaled dot-product attention ─────────────────────────────────────────────────────────


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`.

    Subtracting the maximum first changes nothing mathematically (the factor exp(-max) cancels)
    but keeps every exponent <= 0, so nothing overflows. A row that is entirely -inf (every key
    blocked) has no valid softmax; we return zeros for it instead of NaN.
    """
    x = np.asarray(x)
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0)  # all -inf row: keep it -inf, not NaN
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def check_attention_inputs(Q, K, V, mask=None):
    """Raise a ValueError that names the argument and the shapes if Q, K, V, mask do not fit."""
    for name, a in (("Q", Q), ("K", K), ("V", V)):
        if a.ndim < 2:
            raise ValueError(f"{name} must have shape (..., T, d) with rank >= 2, got {a.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q and K must share d_k (last axis): Q {Q.shape} has d_k={Q.shape[-1]}, "
            f"K {K.shape} has d_k={K.shape[-1]}"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K and V must have the same number of keys T_k (axis -2): K {K.shape}, V {V.shape}"
        )
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch) axes of Q {Q.shape}, K {K.shape}, V {V.shape} do not broadcast"
        ) from None
    scores_shape = (*batch, Q.shape[-2], K.shape[-2])
    if mask is not None:
        if mask.dtype != bool:
            raise ValueError(
                f"mask must be boolean with True = blocked, got dtype {mask.dtype}; "
                "convert keep-masks or additive masks first"
            )
        try:
            np.broadcast_to(mask, scores_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} cannot broadcast to the scores' shape "
                f"{scores_shape} = (..., T_q, T_k)"
            ) from None


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, for any leading batch axes.

    Q: (..., T_q, d_k), K: (..., T_k, d_k), V: (..., T_k, d_v),
    mask: boolean, broadcastable to (..., T_q, T_k), True = this key is blocked for this query.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)). A query whose keys are all
    blocked gets all-zero weights and a zero output (never NaN).
    """
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    mask = None if mask is None else np.asarray(mask)
    check_attention_inputs(Q, K, V, mask)
    dtype = np.result_type(Q, K, V)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    d_k = Q.shape[-1]
    scale = np.sqrt(d_k, dtype=dtype)  # a float32 scale keeps float32 scores float32

    scores = (Q @ K.swapaxes(-1, -2)).astype(dtype, copy=False) / scale  # (..., T_q, T_k)
    if mask is not None:
        scores = np.where(mask, -np.inf, scores).astype(dtype, copy=False)  # before softmax
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k), rows sum to 1
    output = weights @ V.astype(dtype, copy=False)  # (..., T_q, d_v)
    return output, weights
