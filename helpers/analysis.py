"""Measurements of models for the notebooks and widgets.

Small computations the notebooks print and the explorers of ``helpers.widgets`` show: the entropy
of attention rows (01), the activation after every stage of an encoder block (05), and the
digits of the reversal task as tokens and back (07), and the trained reversal model of
``data/`` next to an untrained twin, with every attention map of one forward pass (the explorers
of 02, 04, 05 and 06 show them).
"""

from __future__ import annotations

import numpy as np

from helpers.data import load_reverse_model
from helpers.decoding import greedy_decode
from helpers.module import clear_caches
from helpers.reversal import BOS, EOS, FIRST_DIGIT, MAX_LEN, PAD
from helpers.transformer import EncoderBlock, Transformer

__all__ = ["entropy", "block_stages", "digits_to_tokens", "token_word", "greedy_decode_tokens",
           "TRAINED", "RANDOM", "reversal_models", "reversal_example", "attention_maps"]

TRAINED = "trained (data/reverse_model.npz, notebook 07)"
RANDOM = "random (untrained, same sizes)"


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


def token_word(t, *, eos_id=EOS, pad_id=PAD, bos_id=BOS) -> str:
    """One token of the reversal task as text: '<eos>', '<pad>' or '<bos>' by name, a digit
    token as its digit (token FIRST_DIGIT + d -> 'd'), never a negative "digit"."""
    names = {eos_id: "<eos>", pad_id: "<pad>", bos_id: "<bos>"}
    return names.get(int(t), str(int(t) - FIRST_DIGIT))


def greedy_decode_tokens(model, src, bos_id, eos_id, max_steps):
    """Greedy decoding as digits text, e.g. '6 2 9 <eos>', and the raw token ids."""
    tokens, _ = greedy_decode(model, src, bos_id, eos_id, max_steps)
    words = []
    for t in tokens[0, 1:]:
        words.append(token_word(t, eos_id=eos_id, pad_id=model.pad_id, bos_id=bos_id))
        if t == eos_id:
            break
    return " ".join(words), tokens


def reversal_models(seed: int = 0) -> dict[str, Transformer]:
    """{TRAINED: the reversal model trained in notebook 07, RANDOM: an untrained model of the same
    configuration (weights drawn with `seed`)}: the two sets of weights every attention explorer
    from 02 on offers, under labels that say which is which."""
    trained, _ = load_reverse_model()
    return {TRAINED: trained,
            RANDOM: Transformer.from_config(trained.config, np.random.default_rng(seed))}


def reversal_example(text: str) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """A digit string as one reversal example: src (1, S), the teacher-forced decoder input
    tgt (1, S) = <bos> followed by the reversed digits but the last, and the axis labels of both.
    '3 1 4' -> src digits 3 1 4, tgt <bos> 4 1 (the model reads these and should answer 4 1 3)."""
    src = digits_to_tokens(text, MAX_LEN)
    tgt = np.concatenate([[BOS], src[::-1][:-1]])
    src_labels, tgt_labels = [token_word(t) for t in src], [token_word(t) for t in tgt]
    return src[None, :], tgt[None, :], src_labels, tgt_labels


def attention_maps(model: Transformer, src, tgt) -> dict[str, list[np.ndarray]]:
    """Every attention weight of one forward pass of `model` on src (1, S) and tgt (1, T), by kind:
    {"encoder self": [(h, S, S) per layer], "decoder self": [(h, T, T) ...], "cross": [(h, T, S)
    ...]}. Copies, and the caches are cleared (no backward follows)."""
    model.forward(np.asarray(src), np.asarray(tgt))
    maps = {"encoder self": [b.self_attn.weights[0].copy() for b in model.encoder.layers],
            "decoder self": [b.self_attn.weights[0].copy() for b in model.decoder.layers],
            "cross": [b.cross_attn.weights[0].copy() for b in model.decoder.layers]}
    clear_caches(model)
    return maps
