"""Multi-head latent attention (helpers/recent.py, LatentAttention; notebook 09, Going further):
against a loop over heads written from DeepSeek-V2's equations, its gradients against central
differences, cached decoding against the uncached logits, its cache's size, the "absorbed" form,
and its errors.
"""

from dataclasses import asdict, replace

import numpy as np
import pytest

from helpers.decoding import KVCache, generate
from helpers.modern import TODAY, DecoderOnly, GroupedQueryAttention, rotations
from helpers.recent import (
    LatentAttention,
    MixtureOfExperts,
    RecentBlock,
    RecentConfig,
    WindowCache,
    rescale_rope,
    rope_table,
)
from helpers.training import cross_entropy, gradient_check
from helpers.transformer import causal_mask
from tests.reference import loop_attention, rotated

D, H, D_C, D_R, B, T = 8, 2, 6, 4, 2, 5


def layer_and_input(rng, dtype=np.float64):
    attn = LatentAttention(D, H, D_C, D_R, rng, max_len=16, dtype=dtype)
    return attn, rng.standard_normal((B, T, D)).astype(dtype)


def loop_mla(attn, x, mask=None):
    """DeepSeek-V2's equations (9)-(19), one sequence and one head at a time: c = x W_dkv,
    k_C = c W_uk, v_C = c W_uv, k_R = RoPE(x W_kr) shared by the heads, q = [x W_q; RoPE(x W_qr)],
    scores over sqrt(d_h + d_R) (loop_attention divides by sqrt of the query's width)."""
    d_h, d_R = attn.d_h, attn.d_R
    out = []
    for b in range(x.shape[0]):
        c = x[b] @ attn.W_dkv  # (T, d_c)
        k_R = rotated(x[b] @ attn.W_kr, d_R)  # (T, d_R)
        heads = []
        for i in range(attn.n_heads):
            cols, rcols = slice(i * d_h, (i + 1) * d_h), slice(i * d_R, (i + 1) * d_R)
            q = np.concatenate([x[b] @ attn.W_q[:, cols],
                                rotated(x[b] @ attn.W_qr[:, rcols], d_R)], axis=-1)
            k = np.concatenate([c @ attn.W_uk[:, cols], k_R], axis=-1)
            heads.append(loop_attention(q, k, c @ attn.W_uv[:, cols], mask)[0])
        out.append(np.concatenate(heads, axis=-1) @ attn.W_o)
    return np.stack(out)


def test_latent_attention_against_a_loop_over_heads(rng):
    attn, x = layer_and_input(rng)
    assert np.allclose(attn.forward(x, x, x, causal_mask(T)), loop_mla(attn, x, causal_mask(T)),
                       rtol=1e-10, atol=1e-12)
    assert attn.weights.shape == (B, H, T, T)


def test_latent_attention_is_causal(rng):
    attn, x = layer_and_input(rng)
    later = x.copy()
    later[:, -1] += 1.0
    before, after = (attn.forward(a, a, a, causal_mask(T)) for a in (x, later))
    assert np.abs(after[:, :-1] - before[:, :-1]).max() < 1e-13
    assert np.abs(after[:, -1] - before[:, -1]).max() > 1e-3  # the last one did move


def test_latent_attention_gradients_against_central_differences(rng):
    attn, x = layer_and_input(rng)
    weights = rng.standard_normal((B, T, D))

    def forward():
        return attn.forward(x, x, x, causal_mask(T))

    forward()
    (d_query, d_key, d_value), grads = attn.backward(weights)
    assert list(grads) == list(attn.parameters())
    error, per_name = gradient_check(lambda: float((forward() * weights).sum()),
                                     attn.parameters(), grads)
    assert error < 1e-7 and max(per_name.values()) < 1e-7, per_name
    assert not d_value.any()  # the value's part is in d_key: one latent gives both
    x = x[:1]  # the input's check on one sequence: T * D entries
    forward()
    (d_query, d_key, _), _ = attn.backward(weights[:1])
    weights, numeric, eps = weights[:1], np.zeros_like(x), 1e-6
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = float((forward() * weights).sum())
        x[idx] = old - eps
        down = float((forward() * weights).sum())
        x[idx] = old
        numeric[idx] = (up - down) / (2 * eps)
    assert np.abs(d_query + d_key - numeric).max() < 1e-7
    assert np.abs(d_query).max() > 1e-3 and np.abs(d_key).max() > 1e-3  # both paths carry some


def test_the_whole_model_with_latent_attention_gradients(rng):
    config = RecentConfig(11, d_model=D, n_heads=H, d_ff=12, n_layers=2, d_latent=D_C,
                          d_rope=D_R, max_len=16)
    lm = config.build(np.random.default_rng(1))
    assert all(isinstance(b.self_attn, LatentAttention) for b in lm.decoder.layers)
    for p in lm.parameters().values():
        p += rng.normal(0, 0.3, p.shape)
    tokens, targets = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))
    grads = lm.backward(cross_entropy(lm.forward(tokens), targets)[1])[1]
    error, per_name = gradient_check(lambda: cross_entropy(lm.forward(tokens), targets)[0],
                                     lm.parameters(), grads, max_entries=3, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-6


def test_cached_decoding_gives_the_uncached_logits_and_caches_the_latent(rng):
    config = RecentConfig(11, d_model=D, n_heads=H, d_ff=12, n_layers=2, d_latent=D_C,
                          d_rope=D_R, max_len=16)
    lm = config.build(np.random.default_rng(3))
    tokens = rng.integers(0, 11, (B, 7))
    full = lm.forward(tokens)
    caches = [KVCache() for _ in lm.decoder.layers]
    steps = [lm.logits(lm.decode(tokens[:, :3], caches))]  # a prompt of 3, then one at a time
    steps += [lm.logits(lm.decode(tokens[:, :t], caches))[:, -1:] for t in range(4, 8)]
    assert np.abs(np.concatenate(steps, axis=1) - full).max() < 1e-12
    assert caches[0].K.shape == (B, 1, 7, D_C) and caches[0].V.shape == (B, 1, 7, D_R)
    held = sum(c.K.nbytes + c.V.nbytes for c in caches)
    assert held == B * 7 * 2 * (D_C + D_R) * 8  # d_c + d_R float64 numbers per token and layer


def test_latent_attention_keeps_float32(rng):
    attn, x = layer_and_input(rng, np.float32)
    out = attn.forward(x, x, x, causal_mask(T))
    (d_q, d_k, _), grads = attn.backward(out)
    assert out.dtype == d_q.dtype == d_k.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())


def test_the_absorbed_form_gives_the_same_scores(rng):
    """W_uk folded into the query: q_C k_C^T = (q_C W_uk_i^T) c^T, head by head, so decoding can
    score against the cached latent without computing k_C (DeepSeek-V2, §2.1.2)."""
    attn, x = layer_and_input(rng)
    attn.forward(x, x, x)
    c = attn.cache
    Q_C = c.Q[..., :attn.d_h]  # (B, h, T, d_h)
    W_uk = attn.W_uk.reshape(D_C, H, attn.d_h).transpose(1, 0, 2)  # (h, d_c, d_h)
    absorbed = (Q_C @ W_uk.swapaxes(-1, -2)) @ c.c_KV[:, None].swapaxes(-1, -2)  # (B, h, T, T)
    assert np.allclose(absorbed, Q_C @ c.K[..., :attn.d_h].swapaxes(-1, -2), atol=1e-12)


def test_without_d_latent_the_model_is_today_s_decoder_weight_for_weight(rng):
    fields = dict(d_model=D, n_heads=4, n_kv_heads=2, d_ff=12, n_layers=2, max_len=16)
    ours = RecentConfig(11, **fields).build(np.random.default_rng(5))
    theirs = DecoderOnly(11, np.random.default_rng(5), **fields, **TODAY)
    assert all(isinstance(b.self_attn, GroupedQueryAttention) for b in ours.decoder.layers)
    tokens = rng.integers(0, 11, (2, 6))
    assert np.array_equal(ours.forward(tokens), theirs.forward(tokens))


def test_latent_parameter_count_and_d_rope_default():
    config = RecentConfig(11, d_model=32, n_heads=4, d_latent=16)
    assert config.d_rope == 4  # half the head width, as DeepSeek-V2's 64 of 128
    block = RecentBlock(32, 4, 12, np.random.default_rng(0), d_latent=16, d_rope=4)
    counts = {k: v.size for k, v in block.self_attn.parameters().items()}
    assert counts == {"W_q": 32 * 32, "W_qr": 32 * 4 * 4, "W_dkv": 32 * 16, "W_kr": 32 * 4,
                      "W_uk": 16 * 32, "W_uv": 16 * 32, "W_o": 32 * 32}
    assert replace(config, d_latent=8).d_latent == 8  # asdict / replace round-trip
    assert RecentConfig(**asdict(config)) == config


def test_latent_attention_refuses_bad_input(rng):
    attn, x = layer_and_input(rng)
    with pytest.raises(ValueError, match="d_rope=3 must be even"):
        LatentAttention(D, H, D_C, 3, rng)
    with pytest.raises(ValueError, match="d_model=8 must be a multiple of n_heads=3"):
        LatentAttention(D, 3, D_C, D_R, rng)
    with pytest.raises(ValueError, match="d_latent"):
        LatentAttention(D, H, 0, D_R, rng)
    with pytest.raises(ValueError, match=r"query must have shape \(\.\.\., T, d_model=8\)"):
        attn.forward(x[..., :6], x, x)
    with pytest.raises(ValueError, match="value must be key itself"):
        attn.forward(x, x, x + 1.0)
    with pytest.raises(ValueError, match="self-attention: a KVCache with fixed=True"):
        attn.forward(x, x, x, kv_cache=KVCache(fixed=True))
    with pytest.raises(ValueError, match="run forward without a kv_cache first"):
        cache = KVCache()
        attn.forward(x[:, :2], x[:, :2], x[:, :2], causal_mask(2), kv_cache=cache)
        attn.forward(x[:, 2:3], x[:, 2:3], x[:, 2:3], kv_cache=cache)
        attn.backward(np.ones((B, 1, D)))
    with pytest.raises(ValueError, match="d_out must have shape"):
        attn.forward(x, x, x)
        attn.backward(np.ones((B, T, D + 1)))


def test_recent_config_refuses_bad_latent_fields():
    with pytest.raises(ValueError, match="needs position='rope' and an even d_rope"):
        RecentConfig(11, d_model=32, n_heads=4, d_latent=16, d_rope=3)
    with pytest.raises(ValueError, match="needs position='rope'"):
        RecentConfig(11, d_model=32, n_heads=4, d_latent=16, position="sinusoidal")
    with pytest.raises(ValueError, match="d_rope=4 is the width .* it needs d_latent"):
        RecentConfig(11, d_model=32, n_heads=4, d_rope=4)
    with pytest.raises(ValueError, match="d_latent"):
        RecentConfig(11, d_model=32, n_heads=4, d_latent=0)


def test_config_stores_the_checked_d_latent_and_refuses_qk_norm():
    config = RecentConfig(11, d_model=32, n_heads=4, d_latent=np.int64(16))
    assert type(config.d_latent) is int and config.d_latent == 16
    with pytest.raises(ValueError, match="qk_norm normalises grouped-query attention's heads"):
        RecentConfig(11, d_model=32, n_heads=4, qk_norm=True, d_latent=16)
    with pytest.raises(ValueError, match="qk_norm normalises grouped-query attention's heads"):
        RecentBlock(32, 4, 12, np.random.default_rng(0), qk_norm=True, d_latent=16)
    block = RecentBlock(32, 4, 12, np.random.default_rng(0), n_kv_heads=2, d_latent=16)
    assert isinstance(block.self_attn, LatentAttention)  # the GQA drawn first is replaced


def test_latent_attention_refuses_a_query_other_than_its_key(rng):
    attn, x = layer_and_input(rng)
    with pytest.raises(ValueError, match="query must be key itself: LatentAttention is self-"):
        attn.forward(x + 1.0, x, x)
    with pytest.raises(ValueError, match="query must be key itself"):
        attn.forward(x[:, :2], x, x)  # fewer queries: their RoPE positions would be 0, 1
    assert np.array_equal(attn.forward(x, x.copy(), x.copy()), attn.forward(x, x, x))


MLA_SIZES = {"vocab": 11, "d_model": D, "n_heads": H, "d_ff": 12, "n_layers": 2, "max_len": 40,
             "d_latent": D_C, "d_rope": D_R}


def test_mla_gets_the_configured_rope_table_and_rescale_rope_works_on_it(rng):
    """DeepSeek-V2 applies YaRN to k^R: its rotations are the base's and scaling's, and
    rescale_rope turns an unscaled model into the one built scaled, weight for weight."""
    yarn = {"rope_base": 5e5, "rope_scaling": ("yarn", 2.0, 32)}
    plain = RecentConfig(**MLA_SIZES).build(np.random.default_rng(7))
    scaled = RecentConfig(**MLA_SIZES, **yarn).build(np.random.default_rng(7))
    for a, b in zip(plain.decoder.layers, scaled.decoder.layers, strict=True):
        assert np.array_equal(a.self_attn.turns, rotations(40, D_R))  # base 10000: unchanged
        assert np.array_equal(b.self_attn.turns, rope_table(40, D_R, base=5e5,
                                                            scaling=yarn["rope_scaling"]))
    tokens = rng.integers(0, 11, (B, 9))
    assert np.abs(plain.forward(tokens) - scaled.forward(tokens)).max() > 1e-3
    rescale_rope(plain, base=5e5, scaling=yarn["rope_scaling"])
    assert np.array_equal(plain.forward(tokens), scaled.forward(tokens))
    rescale_rope(scaled)
    assert np.array_equal(scaled.decoder.layers[0].self_attn.turns, rotations(40, D_R))


def test_all_of_them_in_one_mla_model(rng):
    """Latent attention with a window, experts and YaRN's table: the whole model's backward of
    the task's loss plus the balance loss against central differences, and generation with
    bounded caches against generation without a cache (notebook 09's "All of them")."""
    lm = RecentConfig(**MLA_SIZES, window=3, n_experts=3, top_k=2, rope_base=5e5,
                      rope_scaling=("yarn", 2.0, 8)).build(np.random.default_rng(8))
    assert all(isinstance(b.self_attn, LatentAttention) and isinstance(b.ffn, MixtureOfExperts)
               and np.array_equal(b.self_attn.turns, rope_table(40, D_R, base=5e5,
                                                                scaling=("yarn", 2.0, 8)))
               for b in lm.decoder.layers)
    for p in lm.parameters().values():
        p += rng.normal(0, 0.3, p.shape)
    tokens, targets = rng.integers(0, 11, (B, 9)), rng.integers(0, 11, (B, 9))

    def loss():
        return cross_entropy(lm.forward(tokens), targets)[0] + lm.aux_loss()

    lm.forward(tokens)
    assert lm.aux_loss() > 0  # the experts' balance loss is in the checked loss
    grads = lm.backward(cross_entropy(lm.forward(tokens), targets)[1])[1]
    error, per_name = gradient_check(loss, lm.parameters(), grads, max_entries=3, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5, per_name
    caches = lm.kv_caches()
    assert all(isinstance(c, WindowCache) for c in caches)
    cached = generate(lm, tokens[:, :2], 12)[0]
    assert np.array_equal(cached, generate(lm, tokens[:, :2], 12, use_cache=False)[0])
    steps = [lm.logits(lm.decode(tokens[:, :2], caches))]  # the latents a window holds
    steps += [lm.logits(lm.decode(tokens[:, :t], caches))[:, -1:] for t in range(3, 10)]
    assert np.abs(np.concatenate(steps, axis=1) - lm.forward(tokens)).max() < 1e-12
    assert caches[0].K.shape == (B, 1, 3, D_C) and caches[0].forgotten == 6


def test_recent_config_checks_the_mixture_s_switches_even_without_experts():
    dense = RecentConfig(11, top_k=np.int64(3), balance=np.float32(0.5))
    assert type(dense.top_k) is int and type(dense.balance) is float
    for bad, message in (({"top_k": 0}, r"top_k must be an int in \[1, inf\)"),
                         ({"top_k": 2.0}, "top_k must be an int"),
                         ({"balance": -1.0}, r"balance must be a number in \[0, inf\)")):
        with pytest.raises(ValueError, match=message):
            RecentConfig(11, **bad)
