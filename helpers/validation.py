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
        dtype = np.dtype(dtype) if dtype is not None else None  # np.dtype(None) is float64
    except TypeError:
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype!r}") \
            from None
    if dtype is None or not np.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype}")
    return dtype


# ── 06 · The decoder and the whole Transformer ───────────────────────────────────────────────────


def check_token_id(value, name, n_ids):
    """`value` as an int if it is a token id in [0, n_ids) (True is not); else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < n_ids:
        raise ValueError(f"{name} must be a token id in [0, {n_ids}), got {name}={value!r}")
    return int(value)


def _inside(value, interval):
    """Whether `value` lies in `interval`, written as in mathematics: "[0, 1)", "(0, inf)"."""
    low, high = (float(end) for end in interval[1:-1].split(","))
    above = low <= value if interval[0] == "[" else low < value
    return above and (value <= high if interval[-1] == "]" else value < high)


def check_number(value, name, interval):
    """`value` as a float if it is a real number (int, float, or NumPy's: np.float32(1.0) is one;
    True is not) inside `interval` ("[0, 1)", "(0, inf)"); else a ValueError naming `name`, what
    it got and what is allowed. NaN lies in no interval."""
    number = value.item() if isinstance(value, (np.integer, np.floating)) else value
    if isinstance(number, bool) or not isinstance(number, (int, float)) \
            or not _inside(number, interval) or not abs(number) <= 1.7976931348623157e308:
        raise ValueError(f"{name} must be a number in {interval}, got {name}={value!r:.40}")
    return float(number)


def check_int(value, name, interval):
    """`value` as an int if it is an integer (int or NumPy's; True is not) inside `interval`;
    else a ValueError naming `name`: a position of 0.5 or a count of 2.0 is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or not _inside(value, interval):
        raise ValueError(f"{name} must be an int in {interval}, got {name}={value!r:.40}")
    return int(value)


def check_flag(value, name):
    """`value` as a bool if it is True or False (NumPy's too); else a ValueError: rope="no" is a
    non-empty string, which Python would read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {name}={value!r}")
    return bool(value)


def check_rng(rng, name="rng"):
    """`rng` if it is a np.random.Generator (np.random.default_rng(seed)); else a ValueError."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"{name} must be a np.random.Generator, such as "
                         f"np.random.default_rng(0), got {type(rng).__name__}")
    return rng


def check_ids(ids, name, n_ids, *, ndim=None, min_size=1):
    """`ids` as an integer array if every entry is an id in [0, n_ids), with `ndim` axes (None:
    any) and at least `min_size` entries; else a ValueError naming `name`. A negative id would
    silently count from the end (table[-1] is the last row)."""
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer) or (ndim is not None and ids.ndim != ndim):
        axes = "" if ndim is None else f" with {ndim} axes"
        raise ValueError(f"{name} must be integer ids{axes}, got {ids.dtype} {ids.shape}")
    if ids.size < min_size:
        least = "one id" if min_size == 1 else f"{min_size} ids"
        raise ValueError(f"{name} must hold at least {least}, got shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= n_ids):
        raise ValueError(f"{name} has ids in [{ids.min()}, {ids.max()}], outside the vocabulary "
                         f"[0, {n_ids})")
    return ids


def check_token_ids(tokens, name, n_ids, max_len):
    """`tokens` as an array if it holds integer ids of shape (B, T), 1 <= T <= max_len (the
    positional table), every id in [0, n_ids); else a ValueError naming `name`."""
    tokens = check_ids(tokens, name, n_ids, ndim=2)  # one sequence of one token at least
    if tokens.shape[1] > max_len:
        raise ValueError(f"{name} has T={tokens.shape[1]} positions, longer than the "
                         f"positional table (max_len={max_len})")
    return tokens


def check_shape(x, name, shape):
    """`x` as an array of real numbers if its shape is `shape`; else a ValueError naming `name`,
    the shape received and the shape expected (a gradient must have its output's shape)."""
    x = as_real_array(x, name)
    if x.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {x.shape}")
    return x
