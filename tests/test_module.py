"""The module protocol (helpers/module.py, README "Conventions"), for every module of the model.

forward keeps a named cache; backward(d_out) answers (input gradients, {name: gradient}) keyed
and ordered like parameters(); a backward with no forward before it raises; a forward that no
backward follows (decoding) leaves no cache behind.
"""

import numpy as np
import pytest

import helpers.modern as modern_code
import helpers.training  # noqa: F401  (attaches every backward)
import helpers.transformer as model_code
from helpers.decoding import greedy_decode
from helpers.modern import DecoderOnly, GroupedQueryAttention, ModernBlock, RMSNorm, SwiGLU
from helpers.module import Module, add_to_class, clear_caches, collect_grads
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
)
from tests.reference import randomise

D, H, F, B, T, S = 8, 2, 12, 2, 4, 5


def cases(rng):
    """(module, forward's arguments, the shapes backward's input gradients must have)."""
    x, memory = rng.standard_normal((B, T, D)), rng.standard_normal((B, S, D))
    src, tgt = rng.integers(3, 9, (B, S)), rng.integers(3, 9, (B, T))
    tgt[:, 0] = 1
    dropout = Dropout(0.3)
    dropout.rng = np.random.default_rng(0)
    return {
        "MultiHeadAttention": (MultiHeadAttention(D, H, rng), (x, memory, memory),
                               ((B, T, D), (B, S, D), (B, S, D))),
        "LayerNorm": (LayerNorm(D), (x,), (B, T, D)),
        "FeedForward": (FeedForward(D, F, rng), (x,), (B, T, D)),
        "Dropout": (dropout, (x,), (B, T, D)),
        "EncoderBlock": (EncoderBlock(D, H, F, rng), (x,), (B, T, D)),
        "Stack of EncoderBlocks": (Stack(EncoderBlock, 2, D, H, F, rng, norm_first=True), (x,),
                                   (B, T, D)),
        "DecoderBlock": (DecoderBlock(D, H, F, rng), (x, memory, causal_mask(T)),
                         ((B, T, D), (B, S, D))),
        "Stack of DecoderBlocks": (Stack(DecoderBlock, 2, D, H, F, rng),
                                   (x, memory, causal_mask(T)), ((B, T, D), (B, S, D))),
        "Transformer": (Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1,
                                    max_len=8), (src, tgt), None),
        "RMSNorm": (RMSNorm(D), (x,), (B, T, D)),
        "SwiGLU": (SwiGLU(D, F, rng), (x,), (B, T, D)),
        "GroupedQueryAttention": (GroupedQueryAttention(D, 2, 1, rng), (x, x, x),
                                  ((B, T, D), (B, T, D), (B, T, D))),
        "ModernBlock": (ModernBlock(D, 2, F, rng, n_kv_heads=1), (x, causal_mask(T)), (B, T, D)),
        "Stack of ModernBlocks": (Stack(ModernBlock, 2, D, 2, F, rng), (x, causal_mask(T)),
                                  (B, T, D)),
        "DecoderOnly": (DecoderOnly(9, rng, d_model=D, n_heads=2, d_ff=F, n_layers=2),
                        (tgt,), None),
    }


def test_every_module_class_is_walked(rng):
    """A new module class in helpers/transformer.py or helpers/modern.py must join the walk
    below."""
    classes = {c for code in (model_code, modern_code) for c in vars(code).values()
               if isinstance(c, type) and issubclass(c, Module) and c is not Module}
    walked = {type(module) for module, _, _ in cases(rng).values()}
    assert classes == walked, classes ^ walked
    for cls in classes:
        assert cls.backward is not Module.backward, f"{cls.__name__} has no backward"


@pytest.mark.parametrize("name", list(cases(np.random.default_rng(0))))
def test_every_backward_answers_in_one_shape(rng, name):
    module, args, input_shapes = cases(rng)[name]
    randomise(module, rng, 0.1)
    out = module.forward(*args)
    answer = module.backward(rng.standard_normal(out.shape))
    assert isinstance(answer, tuple) and len(answer) == 2
    d_inputs, grads = answer
    params = module.parameters()
    assert isinstance(grads, dict) and list(grads) == list(params)
    for key, g in grads.items():
        assert g.shape == params[key].shape and g.dtype == params[key].dtype, key
    if input_shapes is None:  # token ids: no gradient
        assert d_inputs is None
    elif isinstance(input_shapes[0], tuple):  # several array inputs: one gradient each
        assert isinstance(d_inputs, tuple)
        assert [d.shape for d in d_inputs] == list(input_shapes)
    else:
        assert isinstance(d_inputs, np.ndarray) and d_inputs.shape == input_shapes


@pytest.mark.parametrize("name", list(cases(np.random.default_rng(0))))
def test_a_backward_without_a_forward_raises(rng, name):
    module, args, _ = cases(rng)[name]
    with pytest.raises(ValueError, match=r"backward needs the cache of a forward pass"):
        module.backward(np.zeros((B, T, D)))
    module.forward(*args)
    clear_caches(module)
    assert all(part.cache is None for part in module.modules())
    with pytest.raises(ValueError, match=rf"{type(module).__name__}\.backward needs the cache"):
        module.backward(np.zeros((B, T, D)))


def test_forward_then_greedy_decode_then_backward(rng):
    """Decoding clears the caches: the backward raises instead of reading the last step's
    arrays; forward again and the gradients are those of a forward and backward alone."""
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=2, max_len=12)
    src, tgt = rng.integers(3, 9, (B, S)), rng.integers(3, 9, (B, T))
    d_logits = rng.standard_normal((B, T, 9))
    model.forward(src, tgt)
    _, expected = model.backward(d_logits)
    model.forward(src, tgt)
    greedy_decode(model, src, 1, 2, 6)
    assert all(part.cache is None for part in model.modules())
    with pytest.raises(ValueError, match="Transformer.backward needs the cache of a forward"):
        model.backward(d_logits)
    model.forward(src, tgt)
    _, grads = model.backward(d_logits)
    assert all(np.array_equal(grads[k], expected[k]) for k in expected)


def test_parameters_collect_own_arrays_and_parts_in_attribute_order(rng):
    block = EncoderBlock(D, H, F, rng)
    names = list(block.parameters())
    assert names[:8] == [f"self_attn.{n}" for n in MultiHeadAttention.param_names]
    assert names[8:] == ["ffn.W_1", "ffn.b_1", "ffn.W_2", "ffn.b_2", "norm1.gamma",
                         "norm1.beta", "norm2.gamma", "norm2.beta"]
    assert block.parameters()["ffn.W_1"] is block.ffn.W_1  # the live arrays
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=8)
    names = list(model.parameters())
    assert names[:2] == ["src_embed", "tgt_embed"] and names[-2:] == ["W_out", "b_out"]
    assert names[2].startswith("encoder.layers.0.") and "decoder.norm.gamma" not in names
    tied = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=8,
                       share_embeddings=True, tie_output=True, norm_first=True)
    names = list(tied.parameters())
    assert "tgt_embed" not in names and "W_out" not in names and names[-1] == "decoder.norm.beta"
    assert [type(m).__name__ for m in Stack(EncoderBlock, 1, D, H, F, rng).modules()][:3] == \
        ["Stack", "EncoderBlock", "MultiHeadAttention"]


def test_collect_grads_names_like_parameters_and_refuses_a_gap(rng):
    block = EncoderBlock(D, H, F, rng)
    parts = {part: {k: np.zeros_like(v) for k, v in getattr(block, part).parameters().items()}
             for part in ("norm2", "ffn", "norm1", "self_attn")}  # any order in
    assert list(collect_grads(block, parts)) == list(block.parameters())  # parameters()' order out
    del parts["norm1"]
    with pytest.raises(ValueError, match=r"EncoderBlock: gradients for \['norm1.beta', "
                                         r"'norm1.gamma'\] are missing or unexpected"):
        collect_grads(block, parts)


def test_add_to_class_and_the_default_backward():
    class Doubler(Module):
        def forward(self, x):
            self.cache = x
            return 2 * x

    with pytest.raises(NotImplementedError, match="derived in notebook 07"):
        Doubler().backward(1.0)

    @add_to_class(Doubler, "backward")
    def doubler_backward(self, d_out):
        self.saved()
        return 2 * d_out, {}

    layer = Doubler()
    with pytest.raises(ValueError, match="Doubler.backward needs the cache"):
        layer.backward(1.0)
    layer.forward(3.0)
    assert layer.backward(1.0) == (2.0, {}) and Doubler.backward is doubler_backward


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_stage_view_is_the_blocks_own_forward(rng, norm_first):
    """EncoderBlock.forward(x, stages=[]) records what residual() computes, in order; checked
    against the steps written out by hand."""
    block = randomise(EncoderBlock(D, H, F, rng, norm_first=norm_first), rng, 0.1)
    x = rng.standard_normal((T, D))
    stages = []
    out = block.forward(x, stages=stages)
    attn = block.self_attn.forward
    if norm_first:
        h = block.norm1.forward(x)
        r = x + attn(h, h, h)
        expected = [h, attn(h, h, h), r, block.norm2.forward(r),
                    block.ffn.forward(block.norm2.forward(r)),
                    r + block.ffn.forward(block.norm2.forward(r))]
    else:
        a = attn(x, x, x)
        y = block.norm1.forward(x + a)
        f = block.ffn.forward(y)
        expected = [a, x + a, y, f, y + f, block.norm2.forward(y + f)]
    assert len(stages) == 6 and stages[-1] is out
    for got, want in zip(stages, expected):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    decoder_stages = []
    DecoderBlock(D, H, F, rng).forward(x[None], x[None], stages=decoder_stages)
    assert len(decoder_stages) == 9


def test_greedy_decode_clears_the_caches_even_when_a_step_fails(rng, monkeypatch):
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=2, max_len=12)
    def failing_logits(x):  # after the encoder and the first decoder step have run
        assert model.encoder.layers[0].self_attn.cache is not None
        raise RuntimeError("a step failed")

    monkeypatch.setattr(model, "logits", failing_logits)
    with pytest.raises(RuntimeError, match="a step failed"):
        greedy_decode(model, rng.integers(3, 9, (B, S)), 1, 2, 6)
    assert all(part.cache is None for part in model.modules())


def test_load_parameters_writes_into_the_arrays_the_module_has(rng):
    """A dict taken from parameters() before (an optimiser's) stays the module's, and a matrix
    two names share stays shared."""
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=8,
                        share_embeddings=True)
    before = model.parameters()
    other = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=8,
                        share_embeddings=True)
    model.load_parameters(other.parameters())
    assert all(before[k] is v for k, v in model.parameters().items())
    assert all(np.array_equal(before[k], v) for k, v in other.parameters().items())
    assert model.tgt_embed is model.src_embed and model.src_embed is not other.src_embed


def test_param_names_must_name_arrays_the_module_has():
    class Scale(Module):
        param_names = ("gamma", "betta")

        def __init__(self):
            self.gamma, self.beta = np.ones(3), np.zeros(3)

    with pytest.raises(AttributeError, match=r"Scale.param_names lists \['betta'\]"):
        Scale().parameters()


def test_a_list_of_parts_holds_modules_only(rng):
    stack = Stack(EncoderBlock, 2, D, H, F, rng)
    stack.layers.append("not a block")
    with pytest.raises(TypeError, match="Stack.layers mixes modules and other values"):
        stack.parameters()
