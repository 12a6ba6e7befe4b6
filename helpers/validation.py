"""Input checks of the model code: each raises a ValueError that names the argument, the value or
shape received and what was expected, so that a cryptic reshape error never escapes.

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/validation.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

import numpy as np

# ── 01 · Scaled dot-product attention ────────────────────────────────────────────────────────────


def as_real_array(x, name):
    """np.asarray(x), or a ValueError naming `name` unless it holds real numbers (int or float)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":  # signed or unsigned integers, floats (not bool or complex)
        raise ValueError(f"{name} must hold real numbers (int or float), got dtype {x.dtype}")
    return x


def check_attention_inputs(Q, K, V, mask=None):
    """Raise a ValueError that names the argument and the shapes if Q, K, V, mask do not fit."""
    for name, a in (("Q", Q), ("K", K), ("V", V)):
        if a.ndim < 2:
            raise ValueError(f"{name} must have shape (..., T, d) with rank >= 2, got {a.shape}")
    if Q.shape[-1] == 0 or K.shape[-2] == 0:
        raise ValueError(f"attention needs d_k >= 1 and at least one key: Q {Q.shape}, K {K.shape}")
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


# ── 02 · Multi-head attention ────────────────────────────────────────────────────────────────────


def check_positive_int(value, name, about=""):
    """`value` as an int if it is a positive int (True is not); else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        about = f" ({about})" if about else ""
        raise ValueError(f"{name}{about} must be a positive int, got {name}={value!r}")
    return int(value)


def check_float_dtype(dtype):
    """np.dtype(dtype) if it is a float type (float32, float64, ...); else a ValueError."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype!r}") \
            from None
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype}")
    return dtype


# ── 06 · The decoder and the whole Transformer ───────────────────────────────────────────────────


def check_token_id(value, name, n_ids):
    """`value` as an int if it is a token id in [0, n_ids) (True is not); else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < n_ids:
        raise ValueError(f"{name} must be a token id in [0, {n_ids}), got {name}={value!r}")
    return int(value)


def check_token_ids(tokens, name, n_ids, max_len):
    """`tokens` as an array if it holds integer ids of shape (B, T), 1 <= T <= max_len (the
    positional table), every id in [0, n_ids); else a ValueError naming `name`."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"{name} must be integer token ids of shape (B, T), got "
                         f"{tokens.dtype} {tokens.shape}")
    if 0 in tokens.shape:
        raise ValueError(f"{name} must hold at least one sequence of at least one token, "
                         f"got shape {tokens.shape}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} has T={tokens.shape[1]} positions, longer than the "
                         f"positional table (max_len={max_len})")
    if tokens.min() < 0 or tokens.max() >= n_ids:
        raise ValueError(f"{name} has token ids in [{tokens.min()}, {tokens.max()}], outside "
                         f"the vocabulary [0, {n_ids})")
    return tokens
