"""Measurements of models for the notebooks and widgets.

Small computations the notebooks print and the explorers of ``helpers.widgets`` show: the entropy
of attention rows (01), the activation after every stage of an encoder block (05), and the
digits of the reversal task as tokens and back (07).
"""

from __future__ import annotations

import numpy as np

from helpers.decoding import greedy_decode
from helpers.module import clear_caches
from helpers.reversal import FIRST_DIGIT
from helpers.transformer import EncoderBlock

__all__ = ["entropy", "block_stages", "digits_to_tokens", "greedy_decode_tokens"]


def entropy(weights, axis=-1):
    """Shannon entropy (nats) of probability rows; 0 * log 0 counts as 0."""
    w = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, -w * np.log(w), 0.0)
    return terms.sum(axis=axis)


def block_stages(block: EncoderBlock, x, mask=None) -> list[np.ndarray]:
    """The input and the activation after every stage of `block`, in the order its forward pass
    runs them: what the block's own forward records (``stages=``, one entry per step of
    ``residual``), so the wiring is not written a second time here.

    Post-LN: input, attention, add, norm, FFN, add, norm (POST_LN_STAGES); Pre-LN: input, norm,
    attention, add, norm, FFN, add (PRE_LN_STAGES). The last one is ``block.forward(x, mask)``.
    No backward follows, so the block's caches are cleared.
    """
    x = np.asarray(x)
    stages = [x]
    block.forward(x, mask, stages=stages)
    clear_caches(block)
    return stages


def digits_to_tokens(text: str, max_len: int) -> np.ndarray:
    """'3 1 4 1 5' or '31415' -> token ids (digit d is token FIRST_DIGIT + d), 1 to max_len."""
    digits = [c for c in text if not c.isspace() and c != ","]
    if not digits or len(digits) > max_len or not all(c in "0123456789" for c in digits):
        raise ValueError(f"type 1 to {max_len} digits 0-9 (spaces allowed), got {text!r}")
    return np.array([FIRST_DIGIT + int(c) for c in digits])


def greedy_decode_tokens(model, src, bos_id, eos_id, max_steps):
    """Greedy decoding as digits text, e.g. '6 2 9 <eos>', and the raw token ids."""
    tokens, _ = greedy_decode(model, src, bos_id, eos_id, max_steps)
    words = []
    for t in tokens[0, 1:]:
        words.append("<eos>" if t == eos_id else "<pad>" if t == model.pad_id
                     else str(t - FIRST_DIGIT))
        if t == eos_id:
            break
    return " ".join(words), tokens
