"""QK-norm (GroupedQueryAttention(qk_norm=True) in helpers/modern.py, and RecentConfig.qk_norm): against loops, its
gradients against central differences, the bound on every score, what it leaves unchanged
(the weights drawn, the key/value cache's size, causality), and its errors.
"""

import math

import numpy as np
import pytest

from helpers.decoding import KVCache, generate
from helpers.modern import DecoderOnly, GroupedQueryAttention, rope
from helpers.recent import RecentBlock, RecentConfig, RecentDecoder
from helpers.training import cross_entropy, gradient_check
from helpers.transformer import causal_mask
from tests.reference import input_gradient_error, randomise, rotated

D, H, B, T = 8, 4, 2, 5


def loop_qk_norm(layer, x, mask):
    """GroupedQueryAttention(qk_norm=True) as loops: per sequence and head, the projection, the root mean square
    over the head's d_k features, the gain, the rotation of each pair by t / 10000^(2i/d_k)
    with math.cos and math.sin, then softmax attention."""
    h, g, d_k, eps = layer.n_heads, layer.n_kv_heads, layer.d_k, layer.q_norm.eps

    def normed(a, gamma):  # a (T, d_k)
        return a / np.sqrt((a ** 2).mean(axis=1, keepdims=True) + eps) * gamma

    def turned(a):  # a (T, d_k)
        return rotated(a, d_k) if layer.rotary else a

    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        heads = []
        for i in range(h):
            q_cols, j = slice(i * d_k, (i + 1) * d_k), i // (h // g)
            kv_cols = slice(j * d_k, (j + 1) * d_k)
            q = turned(normed(x[b] @ layer.W_q[:, q_cols] + layer.b_q[q_cols], layer.q_norm.gamma))
            k = turned(normed(x[b] @ layer.W_k[:, kv_cols] + layer.b_k[kv_cols],
                               layer.k_norm.gamma))
            v = x[b] @ layer.W_v[:, kv_cols] + layer.b_v[kv_cols]
            scores = np.where(mask, -np.inf, q @ k.T / math.sqrt(d_k))
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            heads.append(weights / weights.sum(axis=1, keepdims=True) @ v)
        out[b] = np.concatenate(heads, axis=1) @ layer.W_o + layer.b_o
    return out


def check_gradients(module, forward, rng):
    """The relative errors of module's parameter gradients for the loss sum(forward() * R)."""
    weights = rng.standard_normal(forward().shape)
    _, grads = module.backward(weights)
    return gradient_check(lambda: float((forward() * weights).sum()), module.parameters(), grads,
                          max_entries=12, rng=rng)


@pytest.mark.parametrize("g", [4, 2, 1])
@pytest.mark.parametrize("with_rope", [True, False])
def test_qk_norm_attention_against_loops(g, with_rope, rng):
    layer = randomise(GroupedQueryAttention(D, H, g, rng, rope=with_rope, eps=1e-3, qk_norm=True),
                      rng, scale=0.5)
    x = rng.standard_normal((B, T, D))
    out = layer.forward(x, x, x, causal_mask(T))
    assert np.abs(out - loop_qk_norm(layer, x, causal_mask(T))).max() < 1e-12
    assert list(layer.parameters())[-2:] == ["q_norm.gamma", "k_norm.gamma"]
    assert layer.q_norm.gamma.shape == layer.k_norm.gamma.shape == (D // H,)


@pytest.mark.parametrize("g, with_rope, bias", [(4, True, True), (2, True, False),
                                                 (1, False, True)])
def test_qk_norm_attention_gradients(g, with_rope, bias, rng):
    layer = randomise(GroupedQueryAttention(D, H, g, rng, rope=with_rope, bias=bias, qk_norm=True),
                      rng, scale=0.5)
    x = rng.standard_normal((B, T, D))
    error, per_name = check_gradients(layer, lambda: layer.forward(x, x, x, causal_mask(T)), rng)
    assert error < 1e-7 and max(per_name.values()) < 1e-6, per_name
    assert {"q_norm.gamma", "k_norm.gamma"} <= set(per_name)

    def backward(w):
        layer.forward(x, x, x, causal_mask(T))
        return sum(layer.backward(w)[0])
    assert input_gradient_error(lambda y: layer.forward(y, y, y, causal_mask(T)), backward, x,
                                rng) < 1e-7


def test_decoder_with_qk_norm_gradients_and_causality(rng):
    model = randomise(RecentDecoder(11, np.random.default_rng(1), d_model=D, n_heads=H,
                                    n_kv_heads=2, d_ff=12, n_layers=2, max_len=40, qk_norm=True),
                      np.random.default_rng(2))
    assert all(b.self_attn.qk_norm for b in model.decoder.layers)
    tokens, targets = rng.integers(0, 11, (B, 6)), rng.integers(0, 11, (B, 6))
    _, grads = model.backward(cross_entropy(model.forward(tokens), targets)[1])
    error, per_name = gradient_check(lambda: cross_entropy(model.forward(tokens), targets)[0],
                                     model.parameters(), grads, max_entries=3, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5, per_name
    changed = tokens.copy()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    moved = np.abs(model.forward(changed) - model.forward(tokens))
    assert moved[:, :-1].max() < 1e-13 and moved[:, -1].max() > 1e-3


def test_qk_norm_keeps_the_drawn_weights_and_adds_two_d_k_per_layer():
    sizes = {"d_model": D, "n_heads": H, "n_kv_heads": 2, "d_ff": 12, "n_layers": 3}
    plain = DecoderOnly(11, np.random.default_rng(4), **sizes)
    off = RecentDecoder(11, np.random.default_rng(4), **sizes)
    on = RecentDecoder(11, np.random.default_rng(4), **sizes, qk_norm=True)
    p_plain, p_off, p_on = plain.parameters(), off.parameters(), on.parameters()
    assert list(p_off) == list(p_plain)
    assert all(np.array_equal(p_plain[k], p_off[k]) and np.array_equal(p_plain[k], p_on[k])
               for k in p_plain)
    new = [k for k in p_on if k not in p_plain]
    assert new == [f"decoder.layers.{i}.self_attn.{n}_norm.gamma" for i in range(3) for n in "qk"]
    assert sum(p_on[k].size for k in new) == 3 * 2 * (D // H)
    assert all(np.array_equal(p_on[k], np.ones(D // H)) for k in new)


def test_every_score_is_within_the_bound_and_the_bound_is_reached(rng):
    # |q.k| / sqrt(d_k) <= |q| |k| / sqrt(d_k) < max|gamma_q| max|gamma_k| d_k / sqrt(d_k)
    x = rng.standard_normal((B, T, D))
    for scale in (1.0, 10.0, 1000.0):
        layer = randomise(GroupedQueryAttention(D, H, 2, rng, qk_norm=True), rng)
        plain = GroupedQueryAttention(D, H, 2, np.random.default_rng(0))
        plain.load_parameters({k: v for k, v in layer.parameters().items() if "norm" not in k})
        for attn in (layer, plain):
            attn.W_q *= scale
            attn.W_k *= scale
        scores = {}
        for name, attn in (("qk_norm", layer), ("plain", plain)):
            Q, K, _ = attn.project(x, x, x)
            scores[name] = np.abs(Q @ K.swapaxes(-1, -2)).max() / math.sqrt(D // H)
        bound = np.abs(layer.q_norm.gamma).max() * np.abs(layer.k_norm.gamma).max() \
            * math.sqrt(D // H)
        assert scores["qk_norm"] < bound
        if scale == 1000.0:
            assert scores["plain"] > 1e4 * bound  # grows with the square of the scale
    # the bound is the least: a query and a key in the same direction meet it (eps -> 0)
    layer = GroupedQueryAttention(D, H, H, rng, rope=False, eps=1e-12, qk_norm=True)
    layer.W_k, layer.q_norm.gamma[:], layer.k_norm.gamma[:] = layer.W_q, 1.5, -2.0
    Q, K, _ = layer.project(x, x, x)
    diagonal = np.einsum("...td,...td->...t", Q, K) / math.sqrt(D // H)
    assert np.abs(diagonal + 3.0 * math.sqrt(D // H)).max() < 1e-9


def test_without_eps_the_output_ignores_the_scale_of_w_q_and_w_k(rng):
    layer = randomise(GroupedQueryAttention(D, H, 2, rng, eps=0.0, qk_norm=True), rng)
    x = rng.standard_normal((B, T, D))
    before = layer.forward(x, x, x, causal_mask(T))
    for name, factor in (("W_q", 7.0), ("b_q", 7.0), ("W_k", 0.01), ("b_k", 0.01)):
        getattr(layer, name)[...] *= factor
    assert np.abs(layer.forward(x, x, x, causal_mask(T)) - before).max() < 1e-12


def test_the_cache_holds_normalised_rotated_keys_and_generation_is_unchanged(rng):
    model = randomise(RecentDecoder(11, np.random.default_rng(1), d_model=D, n_heads=H,
                                    n_kv_heads=1, d_ff=12, n_layers=2, max_len=40, qk_norm=True),
                      np.random.default_rng(2))
    prompt = rng.integers(0, 11, (3, 4))
    cached, logits_cached = generate(model, prompt, 10)
    plain, logits_plain = generate(model, prompt, 10, use_cache=False)
    assert np.array_equal(cached, plain) and np.abs(logits_cached - logits_plain).max() < 1e-12
    layer, cache = model.decoder.layers[0].self_attn, KVCache()
    x = rng.standard_normal((3, 6, D))
    layer.forward(x[:, :4], x[:, :4], x[:, :4], causal_mask(4), cache)
    layer.forward(x[:, 4:], x[:, 4:], x[:, 4:], causal_mask(6)[4:], cache)
    assert cache.K.shape == (3, 1, 6, D // H)  # one key head, not four
    unturned = rope(cache.K, inverse=True)  # positions 0..5 turned back
    rms = np.sqrt(((unturned / layer.k_norm.gamma) ** 2).mean(axis=-1))
    assert np.abs(rms - 1).max() < 1e-4  # 1 up to eps: normalised, then rotated


def test_qk_norm_keeps_float32_and_refuses_bad_input(rng):
    layer = GroupedQueryAttention(D, H, 2, rng, dtype=np.float32, qk_norm=True)
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    assert layer.q_norm.gamma.dtype == np.float32
    assert layer.forward(x, x, x, causal_mask(T)).dtype == np.float32
    assert all(g.dtype == np.float32 for g in layer.backward(np.ones_like(x))[1].values())
    with pytest.raises(ValueError, match="d_out must have shape"):
        layer.backward(np.ones((B, T + 1, D)))
    with pytest.raises(ValueError, match="fixed=True"):
        layer.forward(x, x, x, None, KVCache(fixed=True))
    cache = KVCache()
    layer.forward(x, x, x, causal_mask(T), cache)
    layer.forward(x[:, :1], x[:, :1], x[:, :1], None, cache)
    with pytest.raises(ValueError, match="keys cached by earlier calls"):
        layer.backward(np.ones((B, 1, D), np.float32))
    with pytest.raises(ValueError, match="qk_norm must be True or False"):
        RecentConfig(11, qk_norm="yes")
    with pytest.raises(ValueError, match="qk_norm must be True or False"):
        GroupedQueryAttention(D, H, 2, rng, qk_norm=None)
    with pytest.raises(ValueError, match="eps"):
        GroupedQueryAttention(D, H, 2, rng, eps=-1.0, qk_norm=True)
    with pytest.raises(ValueError, match="qk_norm must be True or False"):
        RecentBlock(D, H, 12, rng, qk_norm=1)
