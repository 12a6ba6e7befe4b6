"""Notebook 06: DecoderBlock, the whole Transformer, greedy decoding with a KV cache, counts."""

import json
from dataclasses import asdict

import numpy as np
import pytest

from helpers import widgets as tw
from helpers.decoding import KVCache, greedy_decode, kv_caches
from helpers.module import clear_caches
from helpers.training import cross_entropy
from helpers.transformer import (
    DecoderBlock,
    Transformer,
    TransformerConfig,
    causal_mask,
    transformer_parameter_count,
)
from tests.reference import loop_mha, randomise

PAD, BOS, EOS = 0, 1, 2


def small_model(seed=0, **kw):
    settings = dict(d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=32)
    settings.update(kw)
    return Transformer(13, 13, np.random.default_rng(seed), **settings)


def reference_decoder_block(block, x, memory, self_mask, memory_mask):
    """Post-LN decoder block written out with the layers' own pieces, one sub-layer per line."""
    def ln(v, norm):
        mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * norm.gamma + norm.beta

    def mha(attn, q, kv, mask):
        return loop_mha(attn, q, kv, kv, mask)

    x = ln(x + mha(block.self_attn, x, x, self_mask), block.norm1)
    x = ln(x + mha(block.cross_attn, x, memory, memory_mask), block.norm2)
    ffn = np.maximum(x @ block.ffn.W_1 + block.ffn.b_1, 0) @ block.ffn.W_2 + block.ffn.b_2
    return ln(x + ffn, block.norm3)


def test_decoder_block_matches_reference_and_is_causal(rng):
    block = DecoderBlock(12, 3, 24, rng)
    for value in block.parameters().values():  # non-trivial biases, gammas, betas
        value += 0.1 * rng.standard_normal(value.shape)
    x, memory = rng.standard_normal((2, 5, 12)), rng.standard_normal((2, 4, 12))
    memory_mask = np.array([False, False, False, True])[None, None, None]  # last source = pad
    out = block.forward(x, memory, causal_mask(5), memory_mask)
    ref = reference_decoder_block(block, x, memory, causal_mask(5), memory_mask[0])  # no h axis
    np.testing.assert_allclose(out, ref, atol=1e-12)
    assert np.all(block.cross_attn.weights[..., 3] == 0)
    for t in range(5):  # outputs before t never depend on inputs from t on
        changed = x.copy()
        changed[:, t:] = rng.standard_normal(changed[:, t:].shape)
        np.testing.assert_array_equal(block.forward(changed, memory, causal_mask(5))[:, :t],
                                      block.forward(x, memory, causal_mask(5))[:, :t])


def test_pre_ln_decoder_block_differs_and_is_causal(rng):
    block = DecoderBlock(8, 2, 16, rng, norm_first=True)
    x, memory = rng.standard_normal((1, 4, 8)), rng.standard_normal((1, 3, 8))
    out = block.forward(x, memory, causal_mask(4))
    post = DecoderBlock(8, 2, 16, rng)
    post.load_parameters(block.parameters())
    assert not np.allclose(out, post.forward(x, memory, causal_mask(4)))
    changed = x.copy()
    changed[:, 2:] += 1.0
    np.testing.assert_array_equal(block.forward(changed, memory, causal_mask(4))[:, :2], out[:, :2])


def test_model_is_causal_in_the_target_and_respects_padding():
    model = small_model()
    src = np.array([[3, 4, 5, 6, PAD, PAD]])
    tgt = np.array([[BOS, 7, 8, 9, 10]])
    logits = model.forward(src, tgt)
    assert logits.shape == (1, 5, 13)
    for t in range(1, 5):
        changed = tgt.copy()
        changed[:, t:] = 11
        np.testing.assert_array_equal(model.forward(src, changed)[:, :t], logits[:, :t])
    # padded source tokens are invisible: changing them changes nothing
    src_longer = np.array([[3, 4, 5, 6, PAD, PAD, PAD, PAD]])
    np.testing.assert_allclose(model.forward(src_longer, tgt), logits, atol=1e-12)
    for layer in model.decoder.layers:
        assert np.all(layer.cross_attn.weights[..., 4:] == 0)


def test_embedding_scale_and_positional_encoding():
    model = small_model()
    tokens = np.array([[3, 3, 3]])
    x = model.embed(tokens, model.src_embed)
    expected = model.src_embed[3] * np.sqrt(16) + model.pe[:3]
    np.testing.assert_allclose(x[0], expected, atol=1e-15)


@pytest.mark.parametrize("settings", [dict(), dict(norm_first=True),
                                      dict(share_embeddings=True, tie_output=True)])
def test_kv_cache_gives_identical_tokens_and_logits(settings):
    model = small_model(seed=3, **settings)
    src = np.array([[3, 4, 5, 6, 7, EOS], [8, 9, EOS, PAD, PAD, PAD]])
    t_plain, l_plain = greedy_decode(model, src, BOS, EOS, 10, use_cache=False)
    t_cache, l_cache = greedy_decode(model, src, BOS, EOS, 10, use_cache=True)
    np.testing.assert_array_equal(t_plain, t_cache)
    np.testing.assert_allclose(l_cache, l_plain, atol=1e-12, rtol=0)
    assert t_plain[:, 0].tolist() == [BOS, BOS]


def test_greedy_decode_picks_the_argmax_and_stops_at_eos():
    model = small_model(seed=4, tie_output=False)
    model.b_out[:] = -100.0
    model.b_out[5] = 100.0  # the decoder always prefers token 5 ...
    tokens, logits = greedy_decode(model, np.array([[3, 4]]), BOS, EOS, 4)
    assert tokens.tolist() == [[BOS, 5, 5, 5, 5]] and logits.shape == (1, 4, 13)
    model.b_out[EOS] = 1000.0  # ... until EOS is overwhelming: one step, then stop
    tokens, _ = greedy_decode(model, np.array([[3, 4]]), BOS, EOS, 4)
    assert tokens.tolist() == [[BOS, EOS]]


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("settings", [dict(), dict(norm_first=True), dict(pad_id=None)])
def test_greedy_logits_are_the_forward_logits_after_eos_too(settings, use_cache):
    """Finished sequences are continued with <pad>; their later logits must still be exactly what
    model.forward computes on the generated tokens (the decode path masks <pad> keys as well)."""
    model = small_model(seed=3, tie_output=False, **settings)
    model.b_out[EOS] = 2.0  # EOS early for some sequences, late or never for others
    src = np.array([[3, 4, 5, 6, 7, EOS], [8, 9, EOS, PAD, PAD, PAD], [5, 5, 5, 5, 5, 5]])
    tokens, logits = greedy_decode(model, src, BOS, EOS, 12, use_cache=use_cache)
    finished = np.argmax(tokens == EOS, axis=1)
    assert np.any((finished > 0) & (finished < tokens.shape[1] - 1))  # some continue after EOS
    np.testing.assert_allclose(logits, model.forward(src, tokens[:, :-1]), atol=1e-12, rtol=0)
    after = np.arange(tokens.shape[1]) > np.where(finished > 0, finished, 99)[:, None]
    fill = EOS if settings.get("pad_id", 0) is None else PAD
    assert np.all(tokens[after] == fill)


def test_pad_id_none_works_everywhere():
    model = small_model(seed=2, pad_id=None)
    src, tgt = np.array([[0, 3, 4]]), np.array([[BOS, 0, 5]])  # id 0 is an ordinary token here
    logits = model.forward(src, tgt)
    _, d = cross_entropy(logits, np.array([[0, 5, EOS]]))
    assert set(model.backward(d)[1]) == set(model.parameters())
    with_pad = small_model(seed=2)  # same weights; id 0 is padding: a different function
    assert not np.allclose(with_pad.forward(src, tgt), logits)
    tokens, _ = greedy_decode(model, src, BOS, EOS, 5)
    assert tokens.shape[0] == 1 and tokens[0, 0] == BOS


@pytest.mark.parametrize("pad_id", [-1, 13, 20, 1.0, True, "0"])
def test_pad_id_must_be_a_valid_id_or_none(pad_id):
    with pytest.raises(ValueError, match=r"pad_id must be None \(no padding\) or a token id in "
                                         r"\[0, 13\)"):
        small_model(pad_id=pad_id)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: greedy_decode(m, np.zeros((1, 0), int), BOS, EOS, 5), r"src must hold at least one"),
        (lambda m: greedy_decode(m, np.zeros((0, 3), int), BOS, EOS, 5), r"src must hold at least one"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), 13, EOS, 5), r"bos_id must be a token id"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), BOS, -1, 5), r"eos_id must be a token id"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), PAD, EOS, 5), r"must differ from the padding id"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), BOS, PAD, 5), r"must differ from the padding id"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), BOS, EOS, 0), r"max_steps must be a positive"),
        (lambda m: greedy_decode(m, np.array([[3, 4]]), BOS, EOS, 33), r"max_steps=33 needs more"),
    ],
)
def test_greedy_decode_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(small_model())


def test_the_kv_cache_runs_the_same_forward_one_position_at_a_time(rng):
    block = randomise(DecoderBlock(8, 2, 16, rng), rng, 0.2)
    memory, xs = rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8))
    cache = {"self_attn": KVCache(), "cross_attn": KVCache(fixed=True)}
    for t in range(4):
        out = block.forward(xs[:, t:t + 1], memory, causal_mask(t + 1)[t:], kv_cache=cache)
        assert cache["self_attn"].K.shape == (1, 2, t + 1, 4) and cache["self_attn"].length == t + 1
        if t == 0:
            memory_keys = cache["cross_attn"].K
        assert cache["cross_attn"].K is memory_keys  # the memory's keys: computed once
    full = block.forward(xs, memory, causal_mask(4))
    np.testing.assert_allclose(out[:, 0], full[:, -1], atol=1e-12, rtol=0)


def test_decode_with_a_cache_continues_a_prompt(rng):
    """A prompt of 3 positions at once, then 2 more: the same decoder outputs as without a
    cache (the causal mask's rows for the new positions are used)."""
    model = small_model(seed=3)
    src, tgt = np.array([[3, 4, 5, 6]]), np.array([[BOS, 7, 8, 9, 10]])
    memory, src_mask = model.encode(src)
    caches = kv_caches(model.decoder)
    first = model.decode(tgt[:, :3], memory, src_mask, caches)  # (1, 3, d_model)
    rest = model.decode(tgt, memory, src_mask, caches)  # only positions 3 and 4 run
    clear_caches(model)
    full = model.decode(tgt, memory, src_mask)
    assert first.shape == (1, 3, 16) and rest.shape == (1, 2, 16)
    np.testing.assert_allclose(np.concatenate([first, rest], axis=1), full, atol=1e-12, rtol=0)


def test_kv_caches_refuse_another_memory_a_new_batch_and_a_prefix_already_cached(rng):
    model = small_model(seed=4)
    src, tgt = np.array([[3, 4, 5]]), np.array([[BOS, 6, 7]])
    memory, src_mask = model.encode(src)
    caches = kv_caches(model.decoder)
    model.decode(tgt[:, :2], memory, src_mask, caches)
    with pytest.raises(ValueError, match="holds the keys and values of another memory"):
        model.decode(tgt, model.encode(np.array([[5, 4, 3]]))[0], src_mask, caches)
    caches = kv_caches(model.decoder)  # after an error the caches are spent: start afresh
    model.decode(tgt[:, :2], memory, src_mask, caches)
    with pytest.raises(ValueError, match=r"all of them cached already"):
        model.decode(tgt[:, :2], memory, src_mask, caches)
    with pytest.raises(ValueError, match=r"kv_caches must hold one cache per block \(2\), got 1"):
        model.decode(tgt, memory, src_mask, kv_caches(model.decoder)[:1])
    cache = KVCache()
    cache.add(np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 3, 4)), None)
    with pytest.raises(ValueError, match=r"do not continue the cached \(1, 2, 3, 4\)"):
        cache.add(np.zeros((2, 2, 1, 4)), np.zeros((2, 2, 1, 4)), None)
    clear_caches(model)


def test_the_configuration_is_checked_once_and_kept_in_plain_types():
    config = TransformerConfig(np.int64(13), 13, d_model=np.int64(16), n_heads=4, d_ff=32,
                               n_layers=2, max_len=12, dtype=np.float32)
    assert type(config.src_vocab) is int and type(config.d_model) is int
    assert config.dtype == "float32" and json.loads(json.dumps(asdict(config)))["d_model"] == 16
    assert Transformer.from_config(config, np.random.default_rng(0)).config == config
    for bad, match in [({"d_model": 10, "n_heads": 3}, r"d_model=10 must be a multiple of n_heads=3"),
                       ({"n_heads": 2.0}, r"n_heads must be a positive int"),
                       ({"d_ff": 0}, r"d_ff must be a positive int"),
                       ({"norm_first": "no"}, r"norm_first must be True or False"),
                       ({"dropout": 1.5}, r"dropout \(the dropout probability\) must lie in")]:
        with pytest.raises(ValueError, match=match):
            TransformerConfig(13, 13, **{"d_model": 16, "n_heads": 4, **bad})


@pytest.mark.parametrize("settings", [dict(), dict(share_embeddings=True),
                                      dict(share_embeddings=True, tie_output=True),
                                      dict(norm_first=True), dict(tie_output=True)])
def test_parameter_count_formula_matches_built_models(settings):
    model = Transformer(11, 11, np.random.default_rng(0), d_model=16, n_heads=2, d_ff=24,
                        n_layers=3, **settings)
    built = sum(p.size for p in model.parameters().values())
    assert built == transformer_parameter_count(16, 2, 24, 3, 11, 11, **settings)


def test_parameter_count_hand_formula_for_the_paper():
    # per encoder layer: 4*512^2 + 4*512 (attention) + 2*512*2048 + 2048 + 512 (FFN) + 2*2*512
    enc = 4 * 512 * 512 + 4 * 512 + 2 * 512 * 2048 + 2048 + 512 + 4 * 512
    dec = 2 * (4 * 512 * 512 + 4 * 512) + 2 * 512 * 2048 + 2048 + 512 + 6 * 512
    assert transformer_parameter_count(512, 8, 2048, 6, 37000, 37000, share_embeddings=True,
                                       tie_output=True) == 6 * enc + 6 * dec + 37000 * 512
    big = transformer_parameter_count(1024, 16, 4096, 6, 37000, 37000, share_embeddings=True,
                                      tie_output=True)
    assert abs(big / 213e6 - 1) < 0.01


def test_parameters_roundtrip_and_sharing():
    a, b = small_model(seed=1, share_embeddings=True), small_model(seed=2, share_embeddings=True)
    b.load_parameters(a.parameters())
    src, tgt = np.array([[3, 4, 5]]), np.array([[BOS, 6]])
    np.testing.assert_array_equal(a.forward(src, tgt), b.forward(src, tgt))
    assert b.tgt_embed is b.src_embed and "tgt_embed" not in b.parameters()
    assert "decoder.layers.1.cross_attn.W_q" in a.parameters()


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda m: m.forward(np.ones((1, 33), int), np.ones((1, 2), int)), r"T=33.*max_len=32"),
        (lambda m: m.forward(np.ones((1, 3), int), np.full((1, 2), 13)), r"outside the vocabulary \[0, 13\)"),
        (lambda m: m.forward(np.ones((2, 3), int), np.ones((1, 2), int)), r"batch sizes differ"),
        (lambda m: m.encode(np.ones((1, 3))), r"src must be integer ids with 2 axes"),
        (lambda m: m.encode(np.ones(3, int)), r"src must be integer ids with 2 axes, got int64 \(3,\)"),
        (lambda m: Transformer(5, 6, np.random.default_rng(0), share_embeddings=True), r"one vocabulary"),
        (lambda m: m.forward(np.ones((1, 0), int), np.ones((1, 2), int)), r"src must hold at least one"),
        (lambda m: Transformer(5, 5, np.random.default_rng(0), d_model=16.0), r"d_model must be a positive int"),
        (lambda m: Transformer(5, 5, np.random.default_rng(0), max_len=0), r"max_len .* must be a positive int"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(small_model())


def test_attention_viewer_reads_the_chosen_weights():
    from helpers.analysis import reversal_example

    models = {"RANDOM seed 5": small_model(seed=5), "RANDOM seed 6": small_model(seed=6)}
    viewer = tw.attention_viewer(models, "3 4 5 6")
    assert viewer.result["weights"].shape == (4, 4)  # cross: target x source
    viewer.controls["weights"].value = "RANDOM seed 6"
    viewer.controls["kind"].value = "encoder self"
    viewer.controls["layer"].value = 0
    viewer.controls["head"].value = 2
    src, tgt, _, _ = reversal_example("3 4 5 6")
    model = models["RANDOM seed 6"]
    model.forward(src, tgt)
    np.testing.assert_array_equal(viewer.result["weights"],
                                  model.encoder.layers[0].self_attn.weights[0, 2])
    viewer.controls["head"].value = -1  # the mean of the heads
    np.testing.assert_allclose(viewer.result["weights"],
                               model.encoder.layers[0].self_attn.weights[0].mean(axis=0))
    clear_caches(model)
    viewer.controls["kind"].value = "decoder self"
    assert viewer.result["weights"].shape == (4, 4)
    assert np.all(viewer.result["weights"][causal_mask(4)] == 0)
    np.testing.assert_array_equal(viewer.result["blocked"], causal_mask(4))
    assert 'data-control="kind">decoder self</span>' in viewer.status.value
    assert viewer.last_error is None
    with pytest.raises(ValueError, match=r"type 1 to 10 digits"):
        tw.attention_viewer(models, "3 x")
    with pytest.raises(ValueError, match=r"at least one model"):
        tw.attention_viewer({})
