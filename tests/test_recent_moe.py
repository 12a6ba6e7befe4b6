"""The mixture of experts of notebook 09's Going further (helpers/recent.py): top_k_routing against
its definition, MixtureOfExperts against a loop over tokens (Mixtral's and Switch's gates) and
against SwiGLU with one expert, the Switch load-balancing loss in closed form and over the tokens
`keep` marks, the backward pass (the loss plus aux_loss) against central differences, top-1's
router gradient under each gate, RecentConfig's switches and their errors, PAD left out.
"""

from dataclasses import asdict, replace

import numpy as np
import pytest

from helpers.modern import DecoderOnly, SwiGLU
from helpers.recent import MixtureOfExperts, RecentConfig, RecentDecoder, top_k_routing
from helpers.training import gradient_check
from helpers.transformer import softmax

D, F, E = 6, 5, 4  # d_model, each expert's d_ff, n_experts


def test_top_k_routing_order_ties_and_gates():
    logits = np.array([[0.5, 2.0, 2.0, -1.0],     # a tie: the lower index first
                       [3.0, -2.0, 0.0, 3.5]])
    experts, gates = top_k_routing(logits, 2)
    assert experts.dtype == np.int64
    np.testing.assert_array_equal(experts, [[1, 2], [3, 0]])
    np.testing.assert_allclose(gates, [[0.5, 0.5], softmax(np.array([3.5, 3.0]))], atol=1e-15)
    experts, gates = top_k_routing(logits, 4)  # k = n_experts: the softmax over all, sorted
    np.testing.assert_array_equal(experts, [[1, 2, 0, 3], [3, 0, 2, 1]])
    np.testing.assert_allclose(gates, np.take_along_axis(softmax(logits), experts, -1),
                               atol=1e-15)
    experts, gates = top_k_routing(logits, 1)  # top-1 in Mixtral's form: its gate is 1
    np.testing.assert_array_equal(experts[:, 0], [1, 3])
    assert np.all(gates == 1.0)


def test_top_k_routing_is_stable_batched_and_keeps_float32(rng):
    logits = (rng.standard_normal((2, 3, 5)) * 1e4).astype(np.float32)  # exp(1e4) overflows
    experts, gates = top_k_routing(logits, 3)
    assert experts.shape == gates.shape == (2, 3, 3) and gates.dtype == np.float32
    assert np.all(np.isfinite(gates)) and np.allclose(gates.sum(-1), 1.0)
    reference = np.argsort(-logits.reshape(-1, 5), axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(experts.reshape(-1, 3), reference)


@pytest.mark.parametrize("k", [0, 5, 1.0, True])
def test_top_k_routing_refuses_a_bad_k(k):
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 4\]"):
        top_k_routing(np.zeros((3, 4)), k)


def reference_moe(moe, x, keep=None):
    """Token by token (a loop the layer avoids): the sum of gated experts (Mixtral's gates, or
    Switch's), and Switch's f, P and loss counted directly over the tokens `keep` marks."""
    rows = x.reshape(-1, moe.d_model)
    keep = np.ones(len(rows), bool) if keep is None else np.ravel(keep)
    out, counts, P = np.zeros_like(rows), np.zeros(moe.n_experts), np.zeros(moe.n_experts)
    for n, row in enumerate(rows):
        logits = row @ moe.W_r
        p = np.exp(logits) / np.exp(logits).sum()
        chosen = sorted(range(moe.n_experts), key=lambda i: (-logits[i], i))[:moe.top_k]
        weights = np.exp(logits[chosen] - logits[chosen].max())
        gates = weights / weights.sum() if moe.gate == "mixtral" else p[chosen]
        for i, g in zip(chosen, gates):
            out[n] += g * moe.experts[i].forward(row[None])[0]
            counts[i] += keep[n]
        P += keep[n] * p / keep.sum()
    f = counts / counts.sum()
    return out.reshape(x.shape), f, moe.balance * moe.n_experts * (f * P).sum()


@pytest.mark.parametrize("gate", ["mixtral", "switch"])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_moe_against_a_loop_over_tokens(rng, k, gate):
    moe = MixtureOfExperts(D, F, E, rng, top_k=k, balance=0.05, gate=gate)
    x = rng.standard_normal((2, 7, D))
    out = moe.forward(x)
    aux, load = moe.aux_loss, moe.load
    expected, f, expected_aux = reference_moe(moe, x)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    np.testing.assert_allclose(load, f, atol=1e-15)
    assert aux == pytest.approx(expected_aux, rel=1e-12) and load.sum() == pytest.approx(1.0)
    names = list(moe.parameters())
    assert names[:4] == ["W_r", "experts.0.W_1", "experts.0.V", "experts.0.W_2"]
    assert len(names) == 1 + 3 * E


def test_one_expert_is_swiglu(rng):
    moe = MixtureOfExperts(D, F, 1, np.random.default_rng(3), top_k=1, balance=0.01)
    dense = SwiGLU(D, F, np.random.default_rng(3))  # the same generator: the same weights
    x = rng.standard_normal((2, 5, D))
    np.testing.assert_array_equal(moe.forward(x), dense.forward(x))
    assert moe.aux_loss == pytest.approx(0.01)  # f = P = 1: balance * 1 * 1
    assert not moe.backward(rng.standard_normal(x.shape))[1]["W_r"].any()  # one expert: no choice


def test_balance_loss_closed_forms(rng):
    moe = MixtureOfExperts(D, F, E, rng, top_k=2, balance=0.01)
    x = rng.standard_normal((3, 4, D))
    moe.W_r[:] = 0.0  # a uniform router: P = 1/E whatever f is (every token picks 0 and 1)
    moe.forward(x)
    np.testing.assert_array_equal(moe.load, [0.5, 0.5, 0.0, 0.0])
    assert moe.aux_loss == pytest.approx(0.01, rel=1e-12)  # balance * E * sum(f) / E
    moe.W_r[:] = 0.0
    moe.W_r[0, 2] = 1e3  # every token to expert 2 with P_2 = 1 (x[..., 0] > 0 below)
    moe.forward(np.abs(x) + 0.1)
    assert moe.aux_loss == pytest.approx(0.01 * E / 2, rel=1e-9)  # f_2 = 1/2 (top-2), P_2 = 1


def no_near_ties(moe, x, gap=1e-4):
    z = np.sort(x.reshape(-1, moe.d_model) @ moe.W_r, axis=-1)
    return moe.top_k == moe.n_experts or (z[:, -moe.top_k] - z[:, -moe.top_k - 1]).min() > gap


def test_the_balance_loss_counts_the_tokens_keep_marks(rng):
    moe = MixtureOfExperts(D, F, E, rng, top_k=2, balance=0.05, gate="switch")
    x = rng.standard_normal((2, 7, D))
    keep = rng.random((2, 7)) < 0.6
    full = moe.forward(x)
    moe.keep = keep
    out = moe.forward(x)
    assert moe.keep is None  # one forward's
    np.testing.assert_array_equal(out, full)  # the output does not depend on keep
    _, f, expected_aux = reference_moe(moe, x, keep)
    np.testing.assert_allclose(moe.load, f, atol=1e-15)
    assert moe.aux_loss == pytest.approx(expected_aux, rel=1e-12)
    moe.forward(x[keep])  # the same as the kept tokens alone
    assert moe.aux_loss == pytest.approx(expected_aux, rel=1e-12)
    moe.keep = np.ones((2, 6), bool)
    with pytest.raises(ValueError, match=r"keep must have shape \(2, 7\)"):
        moe.forward(x)


def test_top_1_router_gradient_needs_switchs_gate(rng):
    """Mixtral's gate at k = 1 is always 1: the task's loss gives W_r no gradient at all;
    Switch's gate p_i does."""
    x, weights = rng.standard_normal((2, 5, D)), rng.standard_normal((2, 5, D))
    for gate in ("mixtral", "switch"):
        moe = MixtureOfExperts(D, F, E, np.random.default_rng(1), top_k=1, balance=0.0, gate=gate)
        moe.forward(x)
        d_W_r = moe.backward(weights)[1]["W_r"]
        assert (np.abs(d_W_r).max() > 1e-3) == (gate == "switch")


@pytest.mark.parametrize("gate", ["mixtral", "switch"])
@pytest.mark.parametrize("k", [1, 2])
def test_moe_backward_with_the_balance_loss(rng, k, gate):
    moe = MixtureOfExperts(D, F, E, rng, top_k=k, balance=0.5, gate=gate)  # large: it shows
    x = rng.standard_normal((2, 4, D))
    assert no_near_ties(moe, x)  # a step of 1e-6 must not change any token's experts
    weights = rng.standard_normal(x.shape)
    keep = np.array([[True, True, False, True], [False, True, True, True]])

    def loss():  # the balance loss over the kept tokens only
        moe.keep = keep
        return float((moe.forward(x) * weights).sum()) + moe.aux_loss

    loss()
    d_x, grads = moe.backward(weights)
    error, per_name = gradient_check(loss, moe.parameters(), grads, max_entries=8, rng=rng)
    assert error < 1e-7 and max(per_name.values()) < 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + 1e-6
        up = loss()
        x[i] = old - 1e-6
        numeric[i] = (up - loss()) / 2e-6
        x[i] = old
    np.testing.assert_allclose(d_x, numeric, atol=1e-7)


def test_the_balance_loss_reaches_the_router_only(rng):
    x = rng.standard_normal((2, 4, D))
    for balance in (0.0, 0.1):
        moe = MixtureOfExperts(D, F, E, rng, top_k=2, balance=balance)
        moe.forward(x)
        grads = moe.backward(np.zeros(x.shape))[1]  # the task's loss does not move: aux only
        assert all(not g.any() for name, g in grads.items() if name != "W_r")
        assert np.abs(grads["W_r"]).max() > 1e-4 if balance else not grads["W_r"].any()


def test_moe_keeps_float32_and_refuses_bad_input(rng):
    moe = MixtureOfExperts(D, F, E, rng, dtype=np.float32)
    out = moe.forward(rng.standard_normal((3, D)).astype(np.float32))
    assert out.dtype == np.float32 and moe.backward(np.ones((3, D), np.float32))[0].dtype \
        == np.float32
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., d_model=6\), got \(3, 5\)"):
        moe.forward(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="d_out"):
        moe.backward(np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"top_k must be an int in \[1, 4\], got top_k=5"):
        MixtureOfExperts(D, F, E, rng, top_k=5)
    with pytest.raises(ValueError, match=r"balance must be a number in \[0, inf\)"):
        MixtureOfExperts(D, F, E, rng, balance=-0.1)
    with pytest.raises(ValueError, match="run forward first"):
        MixtureOfExperts(D, F, E, rng).backward(np.zeros((3, D)))
    with pytest.raises(ValueError, match=r"gate must be one of \('mixtral', 'switch'\)"):
        MixtureOfExperts(D, F, E, rng, gate="softmax")


SMALL = dict(vocab=11, d_model=8, n_heads=2, d_ff=6, n_layers=2, max_len=16)


def test_recent_config_switches_and_errors():
    dense, rng = RecentConfig(**SMALL), np.random.default_rng(0)
    expected = DecoderOnly(rng=np.random.default_rng(0), **SMALL).parameters()
    got = dense.build(rng).parameters()  # n_experts=0: DecoderOnly, weight for weight
    assert list(got) == list(expected) and all(np.array_equal(got[n], expected[n]) for n in got)
    moe = replace(dense, n_experts=3, top_k=1)
    model = moe.build(np.random.default_rng(0))
    assert isinstance(model.decoder.layers[1].ffn, MixtureOfExperts)
    n_dense = sum(p.size for p in got.values())
    n_moe = sum(p.size for p in model.parameters().values())
    assert n_moe - n_dense == 2 * (2 * 3 * 8 * 6 + 8 * 3)  # two more experts and a router, twice
    assert "decoder.layers.0.ffn.experts.2.W_2" in model.parameters()
    for bad, message in (({"n_experts": -1}, r"n_experts must be an int in \[0, inf\)"),
                         ({"n_experts": 4, "top_k": 5}, r"top_k must be an int in \[1, 4\]"),
                         ({"n_experts": 4, "balance": -1.0}, r"balance must be a number"),
                         ({"n_experts": 4, "gate": "top"}, "gate must be one of"),
                         ({"n_experts": 4, "balance_ignore": 11},
                          r"balance_ignore must be an int in \[0, 10\]"),
                         ({"n_experts": 4, "ffn": "relu", "bias": True},
                          "n_experts=4 needs ffn='swiglu'")):
        with pytest.raises(ValueError, match=message):
            RecentConfig(**{**asdict(dense), **bad})
    RecentConfig(**SMALL, top_k=9)  # dense: top_k is checked against no n_experts
    for bad in ({"balance": -1.0}, {"gate": "top"}):  # ... but every switch is checked
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be"):
            RecentConfig(**SMALL, **bad)


def test_a_decoder_with_experts_is_causal_and_its_gradient_right(rng):
    config = RecentConfig(**SMALL, n_experts=3, top_k=2, balance=0.3)
    model = RecentDecoder.from_config(config, rng)
    tokens = rng.integers(0, 11, size=(2, 6))
    later = tokens.copy()
    later[:, -1] = (later[:, -1] + 1) % 11
    moved = np.abs(model.forward(later) - model.forward(tokens))
    assert moved[:, :-1].max() < 1e-12 and moved[:, -1].max() > 1e-3
    weights = rng.standard_normal(moved.shape)
    blocks = [b.ffn for b in model.decoder.layers]

    def loss():  # the model's loss plus every block's aux_loss: what backward differentiates
        return float((model.forward(tokens) * weights).sum()) + sum(m.aux_loss for m in blocks)

    loss()
    grads = model.backward(weights)[1]
    error, per_name = gradient_check(loss, model.parameters(), grads, max_entries=2, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5


def test_balance_ignore_leaves_pad_out_of_the_balance_loss(rng):
    config = RecentConfig(**SMALL, n_experts=3, top_k=1, balance=0.3, gate="switch",
                          balance_ignore=0)
    model = config.build(rng)
    tokens = rng.integers(1, 11, size=(2, 6))
    tokens[0, 4:] = 0  # PAD
    model.forward(tokens)
    aux = [b.ffn.aux_loss for b in model.decoder.layers]
    x = model.decoder.layers[0].ffn.cache.x.reshape(2, 6, -1)
    assert all(b.ffn.keep is None for b in model.decoder.layers)  # set for that forward only
    moe = model.decoder.layers[0].ffn
    moe.forward(x[tokens != 0])  # the first block's mixture on the real tokens alone
    assert moe.aux_loss == pytest.approx(aux[0], rel=1e-12)
    moe.forward(x)  # every position: another loss
    assert abs(moe.aux_loss - aux[0]) > 1e-6
    weights = rng.standard_normal((2, 6, 11))
    blocks = [b.ffn for b in model.decoder.layers]

    def loss():
        return float((model.forward(tokens) * weights).sum()) + sum(m.aux_loss for m in blocks)

    loss()
    grads = model.backward(weights)[1]
    error, per_name = gradient_check(loss, model.parameters(), grads, max_entries=2, rng=rng)
    assert error < 1e-6 and max(per_name.values()) < 1e-5
