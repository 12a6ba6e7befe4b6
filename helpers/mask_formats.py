"""Converters between our masks (boolean, True = blocked) and the other encodings in common use:
keep-masks (True or 1 = may attend), additive masks (0 and -inf or -1e9), lengths.

Every definition below is written in notebook 04 first, in a cell that starts with
``# saved in helpers/mask_formats.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

import numpy as np

from helpers.validation import check_float_dtype

# ── 04 · Masks ───────────────────────────────────────────────────────────────────────────────────


def mask_from_keep(keep):
    """Our mask (True = blocked) from a keep-mask (True or 1 = may attend), of the same shape."""
    keep = np.asarray(keep)
    if keep.dtype != bool:
        numeric = np.issubdtype(keep.dtype, np.integer) or np.issubdtype(keep.dtype, np.floating)
        if not numeric or not np.all((keep == 0) | (keep == 1)):
            raise ValueError(f"keep must hold True/False or 1/0 only, got dtype {keep.dtype} "
                             f"and shape {keep.shape}")
    return keep == 0  # (same shape), True where the keep-mask says "do not attend"


def mask_to_keep(mask):
    """The keep-mask (True = may attend) of our boolean mask (True = blocked)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    return ~mask


def mask_to_additive(mask, dtype, fill=-np.inf):
    """An additive mask of `dtype`: 0 where attending is allowed, `fill` where blocked.

    Add it to the scores before the softmax. The fill is converted to `dtype` first, so a float32
    mask stays float32 (a float64 array would promote the scores to float64). A finite fill
    that overflows `dtype` (-1e9 in float16) is refused rather than silently becoming -inf.
    """
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    dtype = check_float_dtype(dtype)
    with np.errstate(over="ignore"):
        value = dtype.type(fill)  # the fill in the target dtype
    if not value < 0 or (np.isinf(value) and np.isfinite(fill)):
        raise ValueError(f"fill must be negative (or -inf) and fit in {dtype}: fill={fill!r} "
                         f"becomes {value}")
    return np.where(mask, value, dtype.type(0))  # (mask's shape), dtype `dtype`


def mask_from_additive(additive):
    """Our boolean mask from an additive one: 0 = attend; -inf or any value <= -1e4 = blocked.

    -1e4 is the blocked value of smallest magnitude in common use (-1e4, -1e6, -1e9 and -inf
    are all accepted).
    Any other value is a bias, not a mask, and is refused.
    """
    additive = np.asarray(additive)
    if not np.issubdtype(additive.dtype, np.floating):
        raise ValueError(f"additive must be a float array, got dtype {additive.dtype}")
    blocked = additive <= -1e4
    if not np.all(blocked | (additive == 0)):
        bad = np.unique(additive[~blocked & (additive != 0)])[:3]
        raise ValueError(f"additive of shape {additive.shape} must hold only 0 (attend) and "
                         f"values <= -1e4 or -inf (blocked), got values such as {bad}")
    return blocked


def lengths_from_padding_mask(mask):
    """The lengths (B,) of a right-padding mask of shape (B, 1, 1, T) or (B, T)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    if mask.ndim == 4 and mask.shape[1:3] == (1, 1):
        mask = mask[:, 0, 0, :]  # (B, 1, 1, T) -> (B, T)
    if mask.ndim != 2:
        raise ValueError(f"mask must have shape (B, 1, 1, T) or (B, T), got {mask.shape}")
    lengths = np.sum(~mask, axis=-1)  # (B,): the unblocked positions of each sequence
    right_padded = mask == (np.arange(mask.shape[-1]) >= lengths[:, None])  # (B, T)
    if not np.all(right_padded):
        rows = np.flatnonzero(~right_padded.all(axis=-1)).tolist()
        raise ValueError(f"mask of shape {mask.shape}: rows {rows} are not 'real tokens, then "
                         "padding', so no lengths describe them")
    return lengths
