"""Malformed input at every public constructor and forward raises a ValueError naming the argument.

Hypothesis draws the malformations: sizes that are zero, negative, floats, bools, strings or None;
arrays of the wrong rank, the wrong width, a zero-length axis, or a dtype that is not a real number
(complex, bool, str, object); token ids of the wrong dtype, rank or range; masks that are not
boolean or do not broadcast. A crash deep inside NumPy (IndexError, TypeError, "zero-size array")
or a silent success fails the test.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.decoding import greedy_decode
from helpers.transformer import (
    DecoderBlock,
    Dropout,
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    Stack,
    Transformer,
    causal_mask,
    online_attention,
    padding_mask,
    positional_encoding,
    scaled_dot_product_attention,
    set_training,
    split_heads,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
D, H, F = 8, 2, 16

bad_sizes = st.one_of(st.integers(-5, 0), st.floats(allow_nan=True).map(lambda f: f + 0.5),
                      st.just(True), st.just(8.0), st.text(max_size=2), st.none())
bad_dtypes = st.sampled_from([np.complex128, np.bool_, np.str_, object])


def raises_naming(name, call):
    """A ValueError whose message names `name` as an argument: at the start or after a space or
    parenthesis, followed by a space, "=" or the end (so "x" does not match any word with an x)."""
    with pytest.raises(ValueError, match=rf"(^|[\s(]){re.escape(name)}(=| |$)"):
        call()


def rng():
    return np.random.default_rng(0)


# ── constructors ─────────────────────────────────────────────────────────────────────────────

CONSTRUCTORS = {
    "MultiHeadAttention": (lambda **k: MultiHeadAttention(rng=rng(), **k),
                           {"d_model": D, "n_heads": H}),
    "LayerNorm": (lambda **k: LayerNorm(**k), {"d_model": D}),
    "FeedForward": (lambda **k: FeedForward(rng=rng(), **k), {"d_model": D, "d_ff": F}),
    "EncoderBlock": (lambda **k: EncoderBlock(rng=rng(), **k),
                     {"d_model": D, "n_heads": H, "d_ff": F}),
    "DecoderBlock": (lambda **k: DecoderBlock(rng=rng(), **k),
                     {"d_model": D, "n_heads": H, "d_ff": F}),
    "Stack of EncoderBlocks": (lambda **k: Stack(EncoderBlock, rng=rng(), **k),
                               {"n_layers": 1, "d_model": D, "n_heads": H, "d_ff": F}),
    "Stack of DecoderBlocks": (lambda **k: Stack(DecoderBlock, rng=rng(), **k),
                               {"n_layers": 1, "d_model": D, "n_heads": H, "d_ff": F}),
    "Transformer": (lambda **k: Transformer(rng=rng(), **k),
                    {"src_vocab": 9, "tgt_vocab": 9, "d_model": D, "n_heads": H, "d_ff": F,
                     "n_layers": 1, "max_len": 12}),
}
SIZE_ARGS = [(cls, arg) for cls, (_, good) in CONSTRUCTORS.items() for arg in good]


@pytest.mark.parametrize("cls, arg", SIZE_ARGS, ids=[f"{c}.{a}" for c, a in SIZE_ARGS])
@FAST
@given(value=bad_sizes)
def test_constructors_refuse_bad_sizes(cls, arg, value):
    build, good = CONSTRUCTORS[cls]
    raises_naming(arg, lambda: build(**{**good, arg: value}))


@pytest.mark.parametrize("cls", list(CONSTRUCTORS))
@given(dtype=st.sampled_from([np.int64, np.bool_, np.complex64, "float", "junk"]))
@FAST
def test_constructors_refuse_a_dtype_that_is_not_a_float_type(cls, dtype):
    build, good = CONSTRUCTORS[cls]
    if dtype == "float":  # "float" is np.float64: a valid choice
        build(**good, dtype=dtype)
        return
    raises_naming("dtype", lambda: build(**good, dtype=dtype))


@pytest.mark.parametrize("cls", ["EncoderBlock", "DecoderBlock", "Stack of EncoderBlocks",
                                 "Stack of DecoderBlocks", "Transformer"])
@given(p=st.one_of(st.floats(1.0, 10.0), st.floats(-10.0, -1e-9), st.just(True),
                   st.text(max_size=2), st.just(float("nan"))))
@FAST
def test_dropout_must_be_a_probability(cls, p):
    build, good = CONSTRUCTORS[cls]
    raises_naming("dropout", lambda: build(**good, dropout=p))
    raises_naming("p", lambda: Dropout(p))


@pytest.mark.parametrize("kwargs, name", [
    ({"d_model": 10, "n_heads": 3}, "n_heads=3"),  # not a multiple
    ({"d_model": 7, "n_heads": 1}, "d_model"),  # odd: no sin/cos pairs
], ids=["not a multiple", "odd d_model"])
def test_transformer_refuses_inconsistent_sizes(kwargs, name):
    good = CONSTRUCTORS["Transformer"][1]
    raises_naming(name, lambda: Transformer(rng=rng(), **{**good, **kwargs}))


@given(pad_id=st.one_of(st.integers(-100, -1), st.integers(9, 100), st.floats(0, 8),
                        st.just(True), st.text(max_size=1)))
@FAST
def test_pad_id_is_a_token_id_or_none(pad_id):
    good = CONSTRUCTORS["Transformer"][1]
    raises_naming("pad_id", lambda: Transformer(rng=rng(), **good, pad_id=pad_id))


@given(eps=st.one_of(st.floats(max_value=0.0, exclude_max=True), st.just(float("nan")), st.just(True),
                     st.text(max_size=1)))
@FAST
def test_layer_norm_eps_is_a_number_not_below_zero(eps):
    raises_naming("eps", lambda: LayerNorm(D, eps=eps))


def test_set_training_takes_a_generator_or_none():
    raises_naming("rng", lambda: set_training(LayerNorm(D), 42))


# ── functions of sizes ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("name, call", [
    ("T", lambda v: positional_encoding(v, D)),
    ("T", lambda v: causal_mask(v)),
    ("T", lambda v: padding_mask(np.array([1]), v)),
    ("n_heads", lambda v: split_heads(np.zeros((2, 3, D)), v)),
    ("block_size", lambda v: online_attention(np.zeros((2, 4)), np.zeros((3, 4)),
                                              np.zeros((3, 4)), block_size=v)),
], ids=["positional_encoding", "causal_mask", "padding_mask", "split_heads", "online_attention"])
@given(value=bad_sizes)
@FAST
def test_functions_refuse_bad_sizes(name, call, value):
    raises_naming(name, lambda: call(value))


# ── arrays ───────────────────────────────────────────────────────────────────────────────────


@st.composite
def malformed(draw, shape, width_axis=-1, min_rank=2, zero_axes=(-1, -2)):
    """A float array of `shape` with one thing wrong: rank, width, a zero-length axis or dtype."""
    kind = draw(st.sampled_from(["rank", "width", "zero", "dtype"]))
    shape = list(shape)
    if kind == "rank":
        return np.zeros(shape[len(shape) - min_rank + 1:])  # one axis too few
    if kind == "width":
        shape[width_axis] += draw(st.integers(1, 3)) * draw(st.sampled_from([1, -1]))
        shape[width_axis] = max(shape[width_axis], 1 if shape[width_axis] != 1 else 2)
        return np.zeros(shape)
    if kind == "zero":
        shape[draw(st.sampled_from(zero_axes))] = 0
        return np.zeros(shape)
    return np.zeros(shape, dtype=draw(bad_dtypes))


@given(data=st.data(), which=st.sampled_from(["Q", "K", "V"]))
@FAST
def test_attention_refuses_malformed_q_k_v(data, which):
    args = {"Q": np.ones((2, 3, 4)), "K": np.ones((2, 5, 4)), "V": np.ones((2, 5, 6))}
    zero = {"Q": (-1,), "K": (-1, -2), "V": (-2,)}[which]  # no queries, or d_v = 0: fine
    bad = data.draw(malformed(args[which].shape, zero_axes=zero))
    if which == "V" and bad.ndim == 3 and bad.dtype == float and bad.shape[-1] != 6:
        return  # V's width is d_v: any width is fine
    args[which] = bad
    names = {"Q": "Q", "K": "K", "V": "V"}[which]
    for fn in (scaled_dot_product_attention, online_attention):
        with pytest.raises(ValueError, match=rf"\b{names}\b"):
            fn(**args)


@given(mask=st.one_of(st.sampled_from([np.zeros((3, 5), int), np.zeros((3, 5)),
                                       np.zeros((4, 5), bool), np.zeros((3, 4), bool),
                                       np.zeros((3, 2, 3, 5), bool)])))
@FAST
def test_attention_refuses_a_malformed_mask(mask):
    Q, K = np.ones((2, 3, 4)), np.ones((2, 5, 4))
    for fn in (scaled_dot_product_attention, online_attention):
        raises_naming("mask", lambda fn=fn: fn(Q, K, K, mask))


@given(data=st.data(), which=st.sampled_from(["query", "key", "value"]))
@FAST
def test_multi_head_attention_refuses_malformed_inputs(data, which):
    layer = MultiHeadAttention(D, H, rng())
    args = {"query": np.ones((2, 3, D)), "key": np.ones((2, 5, D)), "value": np.ones((2, 5, D))}
    args[which] = data.draw(malformed(args[which].shape))
    if which == "query" and args["query"].ndim == 3 and args["query"].shape[-2] == 0:
        return  # zero queries: an empty output, not an error
    with pytest.raises(ValueError, match=rf"\b{which}\b"):
        layer.forward(**args)


@pytest.mark.parametrize("module", ["LayerNorm", "FeedForward", "EncoderBlock",
                                    "Stack of EncoderBlocks"])
@given(data=st.data())
@FAST
def test_position_wise_modules_refuse_malformed_x(module, data):
    build, good = CONSTRUCTORS[module]
    x = data.draw(malformed((2, 3, D), min_rank=2 if "Enc" in module else 1,
                            zero_axes=(-1,)))
    if x.size == 0 and x.ndim >= 1 and x.shape[-1] == D:
        return
    raises_naming("x", lambda: build(**good).forward(x))


@given(data=st.data(), which=st.sampled_from(["x", "memory"]))
@FAST
def test_decoder_refuses_malformed_x_and_memory(data, which):
    args = {"x": np.ones((2, 3, D)), "memory": np.ones((2, 5, D))}
    args[which] = data.draw(malformed(args[which].shape))
    for module in (DecoderBlock(D, H, F, rng()), Stack(DecoderBlock, 1, D, H, F, rng())):
        raises_naming(which, lambda module=module: module.forward(args["x"], args["memory"]))


# ── token ids ────────────────────────────────────────────────────────────────────────────────


@st.composite
def malformed_tokens(draw, shape=(2, 4), vocab=9, max_len=12):
    kind = draw(st.sampled_from(["dtype", "rank", "zero", "low", "high", "long"]))
    if kind == "dtype":
        return np.ones(shape, dtype=draw(st.sampled_from([float, np.complex64, bool, str])))
    if kind == "rank":
        return np.ones(draw(st.sampled_from([(4,), (2, 4, 1), ()])), dtype=int)
    if kind == "zero":
        return np.ones(draw(st.sampled_from([(0, 4), (2, 0)])), dtype=int)
    if kind == "long":
        return np.ones((2, max_len + draw(st.integers(1, 5))), dtype=int)
    tokens = np.ones(shape, dtype=int)
    tokens[draw(st.integers(0, 1)), draw(st.integers(0, 3))] = (
        draw(st.integers(-50, -1)) if kind == "low" else draw(st.integers(vocab, vocab + 50)))
    return tokens


@given(data=st.data(), which=st.sampled_from(["src", "tgt"]))
@FAST
def test_transformer_refuses_malformed_token_ids(data, which):
    model = Transformer(9, 9, rng(), d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=12)
    args = {"src": np.array([[3, 4, 5, 0], [6, 7, 0, 0]]), "tgt": np.array([[1, 5, 4, 3]] * 2)}
    args[which] = data.draw(malformed_tokens())
    raises_naming(which, lambda: model.forward(**args))
    if which == "src":
        raises_naming("src", lambda: greedy_decode(model, args["src"], 1, 2, 4))


@given(name=st.sampled_from(["bos_id", "eos_id", "max_steps"]),
       value=st.one_of(st.integers(-20, -1), st.integers(9, 40), st.floats(0, 3), st.just(None)))
@FAST
def test_greedy_decode_refuses_bad_ids_and_lengths(name, value):
    model = Transformer(9, 9, rng(), d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=12)
    args = {"bos_id": 1, "eos_id": 2, "max_steps": 5, name: value}
    if name == "max_steps" and isinstance(value, int) and 1 <= value <= 12:
        return
    raises_naming(name, lambda: greedy_decode(model, np.array([[3, 4]]), **args))
