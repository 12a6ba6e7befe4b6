"""Every backward pass (helpers/training.py) against central differences, in float64.

Each module's loss is sum(G * output) for a fixed random G, so the analytic gradients come from
backward(G). Inputs are checked too (they are "parameters" of the check). Sizes are tiny, masks
and padding are present, and every parameter is moved away from its initial value (biases,
gamma and beta start at 0 and 1, which would hide mistakes). Single layers are checked entry by
entry; blocks, stacks and the whole model on up to 16 (6) random entries of every array, which
keeps the suite fast and still touches every array.
"""

import numpy as np
import pytest

from helpers.training import attention_backward, cross_entropy, gradient_check, softmax_backward
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
    padding_mask,
    scaled_dot_product_attention,
    set_training,
    softmax,
)
from tests.reference import randomise

TOL = 1e-6
B, T, S, D, H, F = 2, 4, 5, 8, 2, 12


def assert_gradients(f, params, grads, *, max_entries=None):
    """Overall and per-array relative error < TOL. b_k's gradient is zero in exact arithmetic
    (adding one number to every score of a row leaves the softmax unchanged), so for b_k we
    assert that the analytic gradient is zero to rounding instead of a ratio of two noises."""
    total, per_name = gradient_check(f, params, grads, max_entries=max_entries,
                                     rng=np.random.default_rng(0))
    assert total < TOL, total
    for name, err in per_name.items():
        if name.endswith("b_k"):
            assert np.abs(grads[name]).max() < 1e-12, name
        else:
            assert err < TOL, (name, err)
    return total


def reseed(module, seed):
    """set_training(module, np.random.default_rng(seed)), for f to call before every forward so
    that dropout draws the same masks at every call, with module's Dropout layers found once:
    walking the model's modules at every call of f took more than a tenth of these checks."""
    dropouts = [layer for layer in module.modules() if isinstance(layer, Dropout)]

    def set_masks():
        rng = np.random.default_rng(seed)
        for layer in dropouts:
            layer.rng = rng

    return set_masks


def test_softmax_backward(rng):
    x = rng.standard_normal((3, 6))
    x[0, 4:] = -np.inf  # blocked keys
    G = rng.standard_normal((3, 6))
    finite = np.isfinite(x)
    d_x = softmax_backward(softmax(x), G)
    assert np.all(d_x[~finite] == 0)
    z = np.where(finite, x, 0.0)

    def f():
        return float(np.sum(G * softmax(np.where(finite, z, -np.inf))))

    assert_gradients(f, {"x": z}, {"x": np.where(finite, d_x, 0.0)})


def test_attention_backward_with_mask(rng):
    Q, K, V = (rng.standard_normal((B, H, n, 3)) for n in (T, S, S))
    mask = padding_mask(np.array([5, 3]), S) | np.zeros((1, 1, T, 1), bool)
    mask[0, 0, 0, :] = True  # one query with every key blocked: zero output, zero gradient
    G = rng.standard_normal((B, H, T, 3))
    out, w = scaled_dot_product_attention(Q, K, V, mask)
    d_Q, d_K, d_V = attention_backward(Q, K, V, w, G)

    def f():
        return float(np.sum(G * scaled_dot_product_attention(Q, K, V, mask)[0]))

    assert_gradients(f, {"Q": Q, "K": K, "V": V}, {"Q": d_Q, "K": d_K, "V": d_V})


@pytest.mark.parametrize("cross", [False, True])
def test_mha_backward(rng, cross):
    layer = randomise(MultiHeadAttention(D, H, rng), rng)
    x = rng.standard_normal((B, T, D))
    memory = rng.standard_normal((B, S, D)) if cross else x
    if cross:
        mask = padding_mask(np.array([S, 2]), S)  # (B, 1, 1, S)
    else:
        mask = causal_mask(T) | padding_mask(np.array([T, 3]), T)
    G = rng.standard_normal((B, T, D))

    def f():
        return float(np.sum(G * layer.forward(x, memory, memory, mask)))

    f()
    (d_q, d_k, d_v), grads = layer.backward(G)
    assert list(grads) == list(layer.parameters())
    if cross:
        params, grads = {"x": x, "memory": memory, **layer.parameters()}, {
            "x": d_q, "memory": d_k + d_v, **grads}
    else:
        params, grads = {"x": x, **layer.parameters()}, {"x": d_q + d_k + d_v, **grads}
    assert_gradients(f, params, grads)


def test_layer_norm_backward(rng):
    norm = randomise(LayerNorm(D), rng)
    x = rng.standard_normal((B, T, D)) * 3 + 1
    G = rng.standard_normal((B, T, D))

    def f():
        return float(np.sum(G * norm.forward(x)))

    f()
    d_x, grads = norm.backward(G)
    assert list(grads) == ["gamma", "beta"]
    assert_gradients(f, {"x": x, **norm.parameters()}, {"x": d_x, **grads})


def test_ffn_backward(rng):
    ffn = randomise(FeedForward(D, F, rng), rng, 0.1)
    x = rng.standard_normal((B, T, D))
    G = rng.standard_normal((B, T, D))

    def f():
        return float(np.sum(G * ffn.forward(x)))

    f()
    d_x, grads = ffn.backward(G)
    assert list(grads) == list(ffn.parameters())
    assert_gradients(f, {"x": x, **ffn.parameters()}, {"x": d_x, **grads})


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["no dropout", "dropout 0.3"])
def test_encoder_block_and_stack_backward(rng, norm_first, p):
    x = rng.standard_normal((B, T, D))
    mask = padding_mask(np.array([T, 2]), T)
    G = rng.standard_normal((B, T, D))
    block = EncoderBlock(D, H, F, rng, norm_first=norm_first, dropout=p)
    stack = Stack(EncoderBlock, 2, D, H, F, rng, norm_first=norm_first, dropout=p)
    for module in (block, stack):
        randomise(module, rng, 0.2)
        set_masks = reseed(module, 3)

        def f(module=module, set_masks=set_masks):
            set_masks()  # the same masks at every call
            return float(np.sum(G * module.forward(x, mask)))

        f()
        d_x, grads = module.backward(G)
        assert list(grads) == list(module.parameters())
        assert_gradients(f, {"x": x, **module.parameters()}, {"x": d_x, **grads},
                         max_entries=16)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["no dropout", "dropout 0.3"])
def test_decoder_block_and_stack_backward(rng, norm_first, p):
    x = rng.standard_normal((B, T, D))
    memory = rng.standard_normal((B, S, D))
    self_mask = causal_mask(T) | padding_mask(np.array([T, 3]), T)
    memory_mask = padding_mask(np.array([S, 2]), S)
    G = rng.standard_normal((B, T, D))
    block = DecoderBlock(D, H, F, rng, norm_first=norm_first, dropout=p)
    stack = Stack(DecoderBlock, 2, D, H, F, rng, norm_first=norm_first, dropout=p)
    for module in (block, stack):
        randomise(module, rng, 0.2)
        set_masks = reseed(module, 3)

        def f(module=module, set_masks=set_masks):
            set_masks()  # the same masks at every call
            return float(np.sum(G * module.forward(x, memory, self_mask, memory_mask)))

        f()
        (d_x, d_memory), grads = module.backward(G)
        assert list(grads) == list(module.parameters())
        assert_gradients(f, {"x": x, "memory": memory, **module.parameters()},
                         {"x": d_x, "memory": d_memory, **grads}, max_entries=16)


def test_cross_entropy_gradient_with_smoothing_and_padding(rng):
    logits = rng.standard_normal((B, T, 7)) * 3
    targets = rng.integers(1, 7, (B, T))
    targets[1, 2:] = 0  # padding, ignored
    loss, d = cross_entropy(logits, targets, label_smoothing=0.1, ignore_id=0)
    assert np.all(d[1, 2:] == 0)

    def f():
        return cross_entropy(logits, targets, label_smoothing=0.1, ignore_id=0)[0]

    assert_gradients(f, {"logits": logits}, {"logits": d})


def test_dropout_backward(rng):
    x = rng.standard_normal((3, 5))
    G = rng.standard_normal((3, 5))
    layer = Dropout(0.4)

    def f():
        layer.rng = np.random.default_rng(1)  # the same mask at every call
        return float(np.sum(G * layer.forward(x)))

    f()
    assert 0 < layer.cache.keep.sum() < x.size  # something was dropped, something kept
    d_x, grads = layer.backward(G)
    assert grads == {}
    assert_gradients(f, {"x": x}, {"x": d_x})
    layer.rng = None  # evaluation: the identity, and so is its backward
    assert layer.forward(x) is x and layer.backward(G)[0] is G


WHOLE_MODELS = {
    "Post-LN, separate embeddings": {},
    "Pre-LN, separate embeddings": {"norm_first": True},
    "Post-LN, shared and tied": {"share_embeddings": True, "tie_output": True},
    "Pre-LN, shared embeddings": {"norm_first": True, "share_embeddings": True},
    "Post-LN, dropout 0.2 in training mode": {"dropout": 0.2},
    "Pre-LN, tied, dropout 0.2 in training mode": {"norm_first": True, "tie_output": True,
                                                   "dropout": 0.2},
}


@pytest.mark.parametrize("settings", list(WHOLE_MODELS.values()), ids=list(WHOLE_MODELS))
def test_whole_model_backward(rng, settings):
    """Embeddings (times sqrt(d_model)), the encoder's output read by the decoder, the output
    projection and the loss, around one block a side: a stack's own wiring, block into block
    (the memory's gradient summed over the decoder blocks too), is checked on two blocks, Post-LN
    and Pre-LN, with and without dropout, by the block and stack tests above."""
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=16,
                        **settings)
    randomise(model, rng, 0.2)
    src = rng.integers(3, 9, (B, S))
    src[1, 3:] = 0  # source padding
    tgt_in = rng.integers(3, 9, (B, T))
    tgt_in[:, 0], tgt_in[1, 2:] = 1, 0  # BOS, target padding
    tgt_out = rng.integers(3, 9, (B, T))
    tgt_out[1, 2:] = 0

    set_masks = reseed(model, 5)

    def f():
        set_masks()  # the same masks at every call
        return cross_entropy(model.forward(src, tgt_in), tgt_out, label_smoothing=0.1,
                             ignore_id=0)[0]

    set_training(model, np.random.default_rng(5))
    _, d_logits = cross_entropy(model.forward(src, tgt_in), tgt_out, label_smoothing=0.1,
                                ignore_id=0)
    if settings.get("dropout"):  # the masks really drop something, in every dropout layer
        assert all(0 < layer.cache.keep.mean() < 1 for layer in
                   (model.src_dropout, model.tgt_dropout, model.decoder.layers[0].dropout3))
    no_input_gradient, grads = model.backward(d_logits)
    assert no_input_gradient is None and list(grads) == list(model.parameters())
    assert_gradients(f, model.parameters(), grads, max_entries=6)


def test_the_check_catches_a_wrong_gradient(rng):
    """A gradient off by 1% (or one missing sqrt(d_model)) must fail the 1e-6 bar."""
    model = Transformer(9, 9, rng, d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=16)
    src, tgt = rng.integers(3, 9, (B, S)), rng.integers(3, 9, (B, T))

    def f():
        return cross_entropy(model.forward(src, tgt), tgt, ignore_id=0)[0]

    f()
    _, d_logits = cross_entropy(model.forward(src, tgt), tgt, ignore_id=0)
    _, grads = model.backward(d_logits)
    params = {"src_embed": model.src_embed, "W_out": model.W_out}
    good, _ = gradient_check(f, params, {k: grads[k] for k in params})
    bad, per = gradient_check(f, params, {"src_embed": grads["src_embed"] / np.sqrt(D),
                                          "W_out": grads["W_out"] * 1.01})
    assert good < TOL and bad > 1e-3 and per["W_out"] > 1e-3


def test_gradient_check_refuses_float32():
    x = np.ones(3, dtype=np.float32)
    with pytest.raises(ValueError, match="float64"):
        gradient_check(lambda: float(x.sum()), {"x": x}, {"x": np.ones(3)})
