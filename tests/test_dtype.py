"""A float32 model computes in float32, a float64 one in float64: forward, loss and backward.

NumPy 2 promotes float32 arrays to float64 when they meet a float64 *array scalar* such as
np.sqrt(d_model), so one careless constant turns every activation, the logits, d_logits and every
gradient of a float32 model into float64 while its weights stay float32 (the trap the README's
conventions table warns about). These tests look at every array the model computes or keeps.
"""

import numpy as np
import pytest

from helpers.decoding import greedy_decode
from helpers.training import cross_entropy
from helpers.transformer import Transformer, online_attention, set_training


def kept_arrays(obj, path="model", seen=None):
    """Every float array a module holds: parameters, caches (tuples, dicts) and sub-modules."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if np.issubdtype(obj.dtype, np.floating):
            yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from kept_arrays(item, f"{path}[{i}]", seen)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from kept_arrays(item, f"{path}[{key!r}]", seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, np.random.Generator):
        for key, item in vars(obj).items():
            yield from kept_arrays(item, f"{path}.{key}", seen)


SETTINGS = {"Post-LN": {}, "Pre-LN, shared and tied": {"norm_first": True,
                                                         "share_embeddings": True,
                                                         "tie_output": True},
            "Post-LN, dropout in training mode": {"dropout": 0.1}}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("settings", list(SETTINGS.values()), ids=list(SETTINGS))
def test_forward_loss_and_backward_keep_the_model_dtype(dtype, settings):
    model = Transformer(13, 13, np.random.default_rng(0), d_model=16, n_heads=2, d_ff=32,
                        n_layers=2, max_len=12, dtype=dtype, **settings)
    set_training(model, np.random.default_rng(1))
    src = np.array([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt_in, tgt_out = np.array([[1, 5, 4, 3], [1, 9, 8, 7]]), np.array([[5, 4, 3, 2], [9, 8, 7, 6]])
    logits = model.forward(src, tgt_in)
    loss, d_logits = cross_entropy(logits, tgt_out, label_smoothing=0.1, ignore_id=0)
    _, grads = model.backward(d_logits)
    assert logits.dtype == dtype and d_logits.dtype == dtype and isinstance(loss, float)
    wrong = [name for name, g in grads.items() if g.dtype != dtype]
    assert not wrong, f"{len(wrong)} of {len(grads)} gradients are not {np.dtype(dtype)}: {wrong[:3]}"
    kept = list(kept_arrays(model))
    wrong = [path for path, a in kept if a.dtype != dtype]
    assert len(kept) > 100 and not wrong, f"arrays that are not {np.dtype(dtype)}: {wrong[:5]}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decoding_and_online_attention_keep_the_dtype(dtype):
    model = Transformer(13, 13, np.random.default_rng(0), d_model=16, n_heads=2, d_ff=32,
                        n_layers=1, max_len=12, dtype=dtype)
    tokens, logits = greedy_decode(model, np.array([[3, 4, 5]]), 1, 2, 6)
    assert logits.dtype == dtype and all(a.dtype == dtype for _, a in kept_arrays(model))
    q = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(dtype)
    assert online_attention(q, q, q, block_size=2).dtype == dtype


def test_the_check_sees_a_promoted_array():
    """kept_arrays must find a float64 array hidden in a float32 model's cache."""
    model = Transformer(13, 13, np.random.default_rng(0), d_model=8, n_heads=2, d_ff=16,
                        n_layers=1, max_len=12, dtype=np.float32)
    model.forward(np.array([[3, 4]]), np.array([[1, 5]]))
    layer = model.decoder.layers[0].cross_attn
    layer.cache = layer.cache._replace(weights=layer.cache.weights.astype(np.float64))
    assert [p for p, a in kept_arrays(model) if a.dtype != np.float32] == [
        "model.decoder.layers[0].cross_attn.cache[6]"]
