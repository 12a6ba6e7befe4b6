"""Notebook 09's llama preset (helpers.modern.llama_config, LLAMA): Meta's Llama 2 model number
for number. Its forward against an independent PyTorch llama written as Meta's `llama/model.py`
is (benchmarks/llama_reference.py, run when PyTorch is installed: requirements-bench.txt); its
width rule and parameter counts against the published configurations; what the preset switches
off, switched off. Its gradients and cached generation are in test_modern.py (MODELS)."""

import numpy as np
import pytest

from helpers.modern import (
    LLAMA,
    DecoderOnly,
    DecoderOnlyConfig,
    GroupedQueryAttention,
    RMSNorm,
    llama_config,
    llama_hidden,
)
from helpers.reversal import parameter_count
from tests.reference import randomise

# Llama 2's params.json (meta-llama/llama) and the intermediate_size of the Hugging Face
# config.json of meta-llama/Llama-2-{7b,13b,70b}-hf: (dim, multiple_of, ffn_dim_multiplier): width
PUBLISHED_WIDTHS = {(4096, 256, None): 11008, (5120, 256, None): 13824, (8192, 4096, 1.3): 28672}


def llama_parameters(vocab, d_model, n_layers, n_heads, n_kv_heads, d_ff):
    """Llama's parameter count in closed form: per block W_q, W_o (d^2 each), W_k, W_v (d g d_k
    each), SwiGLU's three matrices and two RMSNorm gammas; the embedding, the untied output and
    the final norm."""
    d_k = d_model // n_heads
    block = 2 * d_model**2 + 2 * d_model * n_kv_heads * d_k + 3 * d_model * d_ff + 2 * d_model
    return n_layers * block + 2 * vocab * d_model + d_model


def small_llama(n_kv_heads, seed=0, norm_eps=1e-6):
    config = llama_config(61, 32, 2, 4, n_kv_heads, multiple_of=16, ffn_dim_multiplier=1.3,
                          norm_eps=norm_eps, max_len=64)
    return randomise(DecoderOnly.from_config(config, np.random.default_rng(seed)),
                     np.random.default_rng(seed + 1))


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])  # multi-head, grouped-query, multi-query
def test_the_llama_preset_is_a_pytorch_llama_number_for_number(n_kv_heads):
    torch = pytest.importorskip("torch")
    from benchmarks.llama_reference import ModelArgs, build, load_numpy

    ours = small_llama(n_kv_heads)
    args = ModelArgs(dim=32, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads, vocab_size=61,
                     multiple_of=16, ffn_dim_multiplier=1.3, norm_eps=1e-6, max_seq_len=64)
    theirs = load_numpy(torch, build(torch, args, torch.float64), ours.parameters())
    tokens = np.random.default_rng(5).integers(0, 61, (3, 20))
    with torch.no_grad():
        expected = theirs(torch.from_numpy(tokens)).numpy()
    got = ours.forward(tokens)
    assert got.shape == expected.shape == (3, 20, 61)
    assert np.abs(got - expected).max() < 1e-12 * np.abs(expected).max()  # rounding level


def test_the_pytorch_llama_refuses_a_model_with_biases():
    torch = pytest.importorskip("torch")
    from benchmarks.llama_reference import ModelArgs, build, load_numpy

    config = DecoderOnlyConfig(61, d_model=32, n_heads=4, d_ff=112, **{**LLAMA, "bias": True})
    with_biases = DecoderOnly.from_config(config, np.random.default_rng(0))
    with pytest.raises(ValueError, match="b_q"):
        load_numpy(torch, build(torch, ModelArgs(dim=32, n_layers=2, n_heads=4, vocab_size=61,
                                                  multiple_of=16)), with_biases.parameters())


@pytest.mark.parametrize(("args", "width"), PUBLISHED_WIDTHS.items())
def test_llama_hidden_gives_the_published_widths(args, width):
    assert llama_hidden(*args) == width


def test_the_parameter_count_in_closed_form_is_the_built_models_and_llama_2_7b_and_70b():
    for n_kv_heads in (4, 2, 1):
        config = small_llama(n_kv_heads).config
        assert parameter_count(config) == llama_parameters(61, 32, 2, 4, n_kv_heads, config.d_ff)
    assert llama_parameters(32000, 4096, 32, 32, 32, 11008) == 6_738_415_616  # "7B"
    assert llama_parameters(32000, 8192, 80, 64, 8, 28672) == 68_976_648_192  # "70B"


def test_the_preset_has_no_biases_no_embedding_scale_an_untied_output_and_its_epsilon():
    model = small_llama(2, norm_eps=3e-6)
    names = list(model.parameters())
    assert not [n for n in names if n.split(".")[-1].startswith("b_")] and "W_out" in names
    assert model.scale() == 1.0 and model.config.tie_output is False
    norms = [m for m in model.modules() if isinstance(m, RMSNorm)]
    assert len(norms) == 2 * 2 + 1 and {m.eps for m in norms} == {3e-6}  # the final norm too
    tokens = np.array([[3, 7, 7, 1]])
    model.forward(tokens)  # the first block sees the embedding rows themselves, unscaled
    first = model.decoder.layers[0].norm1
    np.testing.assert_allclose(first.cache.x_hat * first.cache.rms, model.token_embed[tokens],
                               rtol=1e-12)  # times sqrt(32) would be 5.7 times as large


def test_without_biases_the_layer_is_the_layer_with_zero_biases_and_they_stay_zero():
    rng = np.random.default_rng(3)
    plain = GroupedQueryAttention(16, 4, 2, np.random.default_rng(0))
    bare = GroupedQueryAttention(16, 4, 2, np.random.default_rng(0), bias=False)
    assert list(bare.parameters()) == ["W_q", "W_k", "W_v", "W_o"]
    x = rng.standard_normal((2, 5, 16))
    np.testing.assert_array_equal(bare.forward(x, x, x), plain.forward(x, x, x))  # b = 0 both
    (d_x, _, _), grads = bare.backward(rng.standard_normal((2, 5, 16)))
    assert set(grads) == {"W_q", "W_k", "W_v", "W_o"} and d_x.shape == x.shape
    assert all(not getattr(bare, f"b_{n}").any() for n in "qkvo")


def test_the_default_configuration_keeps_biases_and_the_scale():
    model = DecoderOnly(11, np.random.default_rng(0), d_model=8, n_heads=2, d_ff=12)
    assert "W_out" in model.parameters() and "b_out" in model.parameters()
    assert "decoder.layers.0.self_attn.b_k" in model.parameters()
    assert model.scale() == np.sqrt(8)
