"""Notebook 08's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/cost.py (its models of the same mistakes): counts built
term by term, loops over the batch and over the queries, other spellings. tests/test_checks.py
asserts that the checker names exactly the mistake each one makes.
"""

import numpy as np

from helpers import checks
from helpers.checks.cost import _causal_attention
from helpers.transformer import scaled_dot_product_attention

# ── 08.1 · attention_flops ────────────────────────────────────────────────────────────────────


def _layer_macs(B, n, d_model, h, d_k, *, projections=4, products=2, score_n=None):
    """Multiply-adds of one layer, term by term as a learner would list them."""
    proj = projections * (B * n * d_model * h * d_k)  # x @ W: (B n, d_model) by (d_model, h d_k)
    scores = B * h * n * (n if score_n is None else score_n) * d_k  # h heads of width d_k
    return proj + products * scores


def flops_counts_multiply_adds(B, n, d_model, h, d_k):
    return _layer_macs(B, n, d_model, h, d_k)  # forgot the factor 2


def flops_no_projections(B, n, d_model, h, d_k):
    return 2 * _layer_macs(B, n, d_model, h, d_k, projections=0)


def flops_three_projections(B, n, d_model, h, d_k):
    q = k = v = 2 * B * n * d_model * (h * d_k)  # W^Q, W^K, W^V ... and W^O forgotten
    return q + k + v + 2 * 2 * B * n * n * d_k * h


def flops_one_n_by_n_product(B, n, d_model, h, d_k):
    return 2 * _layer_macs(B, n, d_model, h, d_k, products=1)


def flops_n_not_n_squared(B, n, d_model, h, d_k):
    return 2 * _layer_macs(B, n, d_model, h, d_k, score_n=1)


def flops_n_and_d_swapped(B, n, d_model, h, d_k):
    per_head = 2 * d_model * d_model * d_k  # "Q K^T: d_model by d_model"
    return 2 * (4 * B * n * d_model * h * d_k + B * h * per_head)


def flops_times_heads(B, n, d_model, h, d_k):
    one_head = 2 * 2 * B * n * n * d_model  # Q K^T and weights V, at the full width
    return 2 * 4 * B * n * d_model * h * d_k + h * one_head


def flops_one_head_only(B, n, d_model, h, d_k):
    return int(2 * (4 * B * n * d_model * h * d_k) + 2 * 2 * n * n * d_k * B)


def flops_heads_fill_d_model(B, n, d_model, h, d_k):
    return 8 * B * n * d_model**2 + 4 * B * n**2 * d_model  # notebook 08 §1, copied


def flops_projections_d_model_square(B, n, d_model, h, d_k):
    projections = 4 * 2 * B * n * d_model * d_model  # "each W is d_model x d_model"
    return projections + sum(2 * 2 * B * n * n * d_k for _ in range(h))


def flops_no_batch(B, n, d_model, h, d_k):
    return 2 * _layer_macs(1, n, d_model, h, d_k)


# ── 08.2 · score_matrix_bytes ─────────────────────────────────────────────────────────────────


def mem_no_heads(B, h, T_q, T_k, dtype):
    return np.zeros((1, 1), dtype=dtype).itemsize * T_q * T_k * B


def mem_no_batch(B, h, T_q, T_k, dtype):
    return h * T_q * T_k * np.dtype(dtype).itemsize


def mem_n_not_n_squared(B, h, T_q, T_k, dtype):
    return B * h * T_k * np.dtype(dtype).itemsize


def mem_keys_squared(B, h, T_q, T_k, dtype):
    return B * h * T_k**2 * np.dtype(dtype).itemsize  # notebook 08's n x n, with n = T_k


def mem_bits_not_bytes(B, h, T_q, T_k, dtype):
    return B * h * T_q * T_k * np.finfo(dtype).bits


def mem_always_4_bytes(B, h, T_q, T_k, dtype):
    return B * h * T_q * T_k * 4  # "a float is 4 bytes"


# ── 08.3 · online_attention ───────────────────────────────────────────────────────────────────


def _one_query(q, K, V, block_size, mistake=None):
    """One query at a time, with Python scalars for the running max and sum (Python floats
    keep a float32 array float32)."""
    d_k = len(q)
    m = 0.0 if mistake == "max-at-zero" else -np.inf
    total, out = 0.0, np.zeros(V.shape[-1], dtype=V.dtype)
    n_blocks = len(K) // block_size if mistake == "drop" else -(-len(K) // block_size)
    for b in range(n_blocks):
        keys, values = K[b * block_size:(b + 1) * block_size], V[b * block_size:(b + 1) * block_size]
        scores = keys @ q if mistake == "no-scale" else keys @ q / d_k**0.5
        if mistake == "no-max":
            total, out = total + np.sum(np.exp(scores)), out + np.exp(scores) @ values
            continue
        new_m = max(m, float(np.max(scores)))
        if mistake == "first-block" and b > 0:
            new_m = m  # "the first block's maximum will do"
        e = np.exp((scores - m) if mistake == "old-max" else (scores - new_m))
        grow = float(np.exp(new_m - m) if mistake == "inverted" else np.exp(m - new_m))
        total = (total if mistake in ("sum", "neither") else total * grow) + e.sum()
        out = (out if mistake in ("output", "neither") else out * grow) + e @ values
        if mistake != "forget-m":
            m = new_m
    return out if mistake == "no-division" else out / total


def _online(mistake):
    def online_attention(Q, K, V, block_size=256):
        lead = Q.shape[:-2]
        Qf, Kf = Q.reshape(-1, *Q.shape[-2:]), K.reshape(-1, *K.shape[-2:])
        Vf = V.reshape(-1, *V.shape[-2:])
        out = np.stack([np.stack([_one_query(q, Kf[i], Vf[i], block_size, mistake) for q in Qf[i]])
                        for i in range(len(Qf))])
        return out.reshape(*lead, *out.shape[-2:])

    return online_attention


def online_attention_one_max_for_all(Q, K, V, block_size=256):
    d_k = Q.shape[-1]
    big = -np.inf
    total = np.zeros(Q.shape[:-1] + (1,), dtype=Q.dtype)
    acc = np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype)
    for start in range(0, K.shape[-2], block_size):
        S = np.matmul(Q, np.swapaxes(K[..., start:start + block_size, :], -1, -2)) / d_k**0.5
        new_big = max(big, S.max())  # one number for the whole block
        shrink = np.exp(big - new_big)
        w = np.exp(S - new_big)
        total = shrink * total + w.sum(-1, keepdims=True)
        acc = shrink * acc + np.matmul(w, V[..., start:start + block_size, :])
        big = new_big
    return acc / total


def online_attention_full_matrix(Q, K, V, block_size=256):  # "block_size is only a hint"
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1]).astype(Q.dtype)
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return np.einsum("...qk,...kv->...qv", e / np.sum(e, axis=-1, keepdims=True), V)


# ── 08.4 · causal_online_attention ───────────────────────────────────────────────────────────


def _causal_learner(mistake=None):
    """A learner's causal online attention: one query block at a time, the key loop broken at
    the first future block, masks from index comparisons."""
    def causal_online_attention(Q, K, V, block_size=256):
        if mistake == "float64":
            Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
        dt = Q.dtype
        n_q, n_k = Q.shape[-2], K.shape[-2]
        shift_pos = 0 if mistake == "top-left" else n_k - n_q
        root = 1.0 if mistake == "no-scale" else np.sqrt(Q.shape[-1]).astype(dt)
        result = np.empty(Q.shape[:-1] + (V.shape[-1],), dtype=dt)
        for qs in range(0, n_q, block_size):
            qb = Q[..., qs:qs + block_size, :] / root
            where = shift_pos + np.arange(qs, qs + qb.shape[-2]).reshape(-1, 1)
            run_max = np.full(qb.shape[:-1] + (1,), -np.inf, dtype=dt)
            run_sum = np.zeros(qb.shape[:-1] + (1,), dtype=dt)
            acc = np.zeros(qb.shape[:-1] + (V.shape[-1],), dtype=dt)
            for ks in range(0, n_k, block_size):
                future = ks > where.max()
                if future and mistake not in ("no-skip", "mask-future"):
                    break
                sc = np.matmul(qb, np.swapaxes(K[..., ks:ks + block_size, :], -1, -2))
                idx = np.arange(ks, ks + sc.shape[-1]).reshape(1, -1)
                hide = (idx >= where) if mistake == "own-key" else (idx > where)
                if mistake == "no-skip" and future:
                    hide = np.zeros_like(hide)  # "the diagonal is all that needs a mask"
                if mistake != "after-exp":
                    sc = np.where(hide, dt.type(0) if mistake == "zero" else dt.type(-np.inf), sc)
                new_max = np.maximum(run_max, np.max(sc, axis=-1, keepdims=True))
                ref = new_max if mistake == "nan" else np.where(new_max == -np.inf, 0, new_max)
                e = np.exp(sc - ref)
                if mistake == "after-exp":
                    e[np.broadcast_to(hide, e.shape)] = 0
                f = 1 if mistake == "no-rescale" else np.exp(run_max - ref)
                run_sum = run_sum * f + np.sum(e, axis=-1, keepdims=True)
                acc = acc * f + np.matmul(e, V[..., ks:ks + block_size, :])
                run_max = new_max
            if mistake == "nan":
                result[..., qs:qs + block_size, :] = acc / run_sum
            else:
                result[..., qs:qs + block_size, :] = np.divide(
                    acc, run_sum, out=np.zeros_like(acc), where=run_sum > 0)
        return result

    return causal_online_attention


WRONG = {
    "flops-counts-multiply-adds": flops_counts_multiply_adds,
    "flops-no-projections": flops_no_projections,
    "flops-three-projections": flops_three_projections,
    "flops-one-n-by-n-product": flops_one_n_by_n_product,
    "flops-n-not-n-squared": flops_n_not_n_squared,
    "flops-n-and-d-swapped": flops_n_and_d_swapped,
    "flops-times-heads": flops_times_heads,
    "flops-one-head-only": flops_one_head_only,
    "flops-heads-fill-d-model": flops_heads_fill_d_model,
    "flops-projections-d-model-square": flops_projections_d_model_square,
    "flops-no-batch": flops_no_batch,
    "mem-no-heads": mem_no_heads,
    "mem-no-batch": mem_no_batch,
    "mem-n-not-n-squared": mem_n_not_n_squared,
    "mem-keys-squared": mem_keys_squared,
    "mem-bits-not-bytes": mem_bits_not_bytes,
    "mem-always-4-bytes": mem_always_4_bytes,
    "online-no-rescale": _online("neither"),
    "online-output-not-rescaled": _online("output"),
    "online-sum-not-rescaled": _online("sum"),
    "online-exp-inf-on-first-block": _online("inverted"),
    "online-no-final-division": _online("no-division"),
    "online-drops-last-block": _online("drop"),
    "online-max-never-stored": _online("forget-m"),
    "online-no-running-max": _online("no-max"),
    "online-max-from-first-block": _online("first-block"),
    "online-max-over-all-queries": online_attention_one_max_for_all,
    "online-max-starts-at-zero": _online("max-at-zero"),
    "online-no-scaling": _online("no-scale"),
    "online-full-matrix": online_attention_full_matrix,
    "causal-mask-after-exp": _causal_learner("after-exp"),
    "causal-future-blocks-computed": _causal_learner("mask-future"),
    "causal-future-blocks-unmasked": _causal_learner("no-skip"),
    "causal-blocks-own-key": _causal_learner("own-key"),
    "causal-nan-for-empty-rows": _causal_learner("nan"),
    "causal-aligned-top-left": _causal_learner("top-left"),
    "causal-blocked-score-zero": _causal_learner("zero"),
    "causal-no-rescale": _causal_learner("no-rescale"),
    "causal-no-scaling": _causal_learner("no-scale"),
    "causal-float32-to-float64": _causal_learner("float64"),
    "online-float32-to-float64": lambda Q, K, V, block_size=256: _online(None)(
        *(np.asarray(x, dtype=float) for x in (Q, K, V)), block_size),
}


# ── what is special here ──────────────────────────────────────────────────────────────────────


def test_the_learner_style_online_attention_without_a_mistake_passes():
    assert checks.check(_online(None), "08.3").status == "passed"


def test_the_hand_cases_and_notebook_08s_numbers():
    flops, memory, online = (checks.CATALOGUE[k] for k in ("08.1", "08.2", "08.3"))
    assert flops.reference(*flops.cases[0].args) == 160
    # heads that fill d_model (h d_k = d_model): notebook 08 §1's count
    assert flops.reference(8, 1024, 512, 8, 64) == 8 * 8 * 1024 * 512**2 + 4 * 8 * 1024**2 * 512
    assert memory.reference(*memory.cases[0].args) == 24
    assert memory.reference(8, 8, 4096, 4096, np.float32) == 4_294_967_296  # question 2: 4.3 GB
    assert memory.reference(8, 8, 1, 4096, np.float32) == 1_048_576  # one cached step: 1 MiB
    args, kwargs = online.cases[0].arguments()
    assert np.allclose(online.reference(*args, **kwargs), [[3.0, 4.0]])
    for case in online.cases:  # every case: online attention equals plain attention
        args, kwargs = case.arguments()
        out = online.reference(*args, **kwargs)
        tol = 1e-12 if out.dtype == np.float64 else 1e-6  # the float32 case: float32's rounding
        assert out.dtype == args[0].dtype
        assert np.allclose(out, scaled_dot_product_attention(*args)[0], rtol=tol, atol=tol)


def test_the_counts_are_checked_exactly():
    def attention_flops(B, n, d_model, h, d_k):  # off by one only on the largest cases,
        exact = 8 * B * n * d_model * h * d_k + 4 * B * h * n**2 * d_k  # where one is 3e-11
        return exact + (n >= 1024)  # of the count: far below the default rtol of 1e-6

    assert checks.check(attention_flops).status == "wrong"


def test_the_diagnosis_of_bits_is_quoted_exactly():
    result = checks.check(mem_bits_not_bytes, "08.2")
    assert result.message == (
        "✗ 08.2 score_matrix_bytes: this counts bits: a float32 is 4 bytes (32 bits); use "
        "np.dtype(dtype).itemsize\n"
        "  case: B = 1, h = 1, T_q = 2 queries, T_k = 3 keys, float32 (by hand: 24 bytes)\n"
        "  expected result: 24\n"
        "  got      result: 192\n"
        "  Your result equals this mistake's on all 5 cases [mem-bits-not-bytes]. "
        "See 08 §2 · The n × n matrix: memory.")


def test_exp_against_the_old_maximum_is_named_like_the_inverted_rescale():
    # both take exp(+inf) on the first block and give NaN everywhere: one mistake says both
    result = checks.check(_online("old-max"), "08.3")
    assert result.mistakes == ("online-exp-inf-on-first-block",), result.message
    assert "exp(s - m_new)" in result.message and "exp(m_old - m_new)" in result.message


def test_the_solutions_online_attention_keeps_float32():
    # the memory cell after 08.3 measures float32 inputs: the solution must not turn them into
    # float64 (a trap of notebook 08's Going further), or its peak would double
    from tests.exercises import ROOT, load, parts, solution_code

    nb = load(ROOT / "notebooks" / "exercises" / "08_attention_cost.ipynb")
    space = {"np": np}
    exec(solution_code(parts(nb)["08.3"]["solution"]), space)
    gen = np.random.default_rng(0)
    Q, K, V = (gen.standard_normal((5, 4)).astype(np.float32) for _ in range(3))
    out = space["online_attention"](Q, K, V, 2)
    assert out.dtype == np.float32
    assert np.allclose(out, scaled_dot_product_attention(Q, K, V)[0], rtol=1e-5, atol=1e-6)


def test_a_full_matrix_passes_every_value_but_is_named_by_the_memory_case():
    """softmax(Q K^T / sqrt(d_k)) V in one piece gives the right numbers; the memory case, which
    measures one call with tracemalloc, tells it from an online softmax."""

    def online_attention(Q, K, V, block_size=256):
        s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1], dtype=Q.dtype)  # (..., T_q, T_k)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ V

    result = checks.check(online_attention, "08.3")
    assert result.mistakes == ("online-full-matrix",), result.message
    assert ("  expected result: 'its peak memory stays below 1.6 MB (3/4 of one T_q x T_k "
            "float64 matrix of scores, 2.1 MB)'\n  got      result: 'its peak memory is 1.6 MB "
            "(3/4 of one T_q x T_k float64 matrix of scores, 2.1 MB) or more: the whole matrix "
            "was built'") in result.message, result.message
    assert checks.check(_online(None), "08.3").status == "passed"  # blocks: below the bound


def test_a_correct_solution_that_scales_k_before_the_loop_passes():
    """Dividing K (not Q) by √d_k once, before the loop, copies K: 4,096 x 16 float64 numbers,
    a quarter of the memory case's matrix of scores, next to a block of scores. Correct online
    attention, so it must pass the memory case too (it peaked at 1.06 MB, above half the matrix)."""

    def online_attention(Q, K, V, block_size=256):
        K = K / np.sqrt(Q.shape[-1], dtype=Q.dtype)  # a scaled copy of K
        m = np.full(Q.shape[:-1] + (1,), -np.inf, dtype=Q.dtype)
        ell = np.zeros(Q.shape[:-1] + (1,), dtype=Q.dtype)
        acc = np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype)
        for j in range(0, K.shape[-2], block_size):
            s = Q @ K[..., j:j + block_size, :].swapaxes(-1, -2)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            p = np.exp(s - m_new)
            ell = ell * np.exp(m - m_new) + p.sum(axis=-1, keepdims=True)
            acc = acc * np.exp(m - m_new) + p @ V[..., j:j + block_size, :]
            m = m_new
        return acc / ell

    result = checks.check(online_attention, "08.3")
    assert result.status == "passed", result.message


def test_the_missing_rescale_is_named_in_float64_too():
    """Written the natural way (np.sqrt(d) or np.zeros make float32 inputs float64), the missing
    rescale is still named: mistakes match in values; the dtype is reported after it."""
    def online_attention(Q, K, V, block_size=256):
        return _online("neither")(*(np.asarray(x, dtype=float) for x in (Q, K, V)), block_size)

    result = checks.check(online_attention, "08.3")
    assert result.status == "mistake" and result.mistakes == ("online-no-rescale",), result.message
    assert "Also, the dtype:" in result.message and "expects float32 and got float64" in \
        result.message
    assert "Also, the dtype" not in checks.check(_online("neither"), "08.3").message  # kept


def test_the_learner_style_causal_online_attention_without_a_mistake_passes():
    result = checks.check(_causal_learner(None), "08.4")
    assert result.status == "passed", result.message


def test_the_causal_cases_by_hand_and_against_a_full_mask():
    ex = checks.CATALOGUE["08.4"]
    args, kwargs = ex.cases[0].arguments()
    assert np.allclose(ex.reference(*args, **kwargs), [[1.0, 2.0], [2.0, 3.0]])
    args, kwargs = ex.cases[3].arguments()  # 6 queries, 4 keys: the first 2 see no key
    out = ex.reference(*args, **kwargs)
    assert np.array_equal(out[:2], np.zeros_like(out[:2])) and np.abs(out[2:]).min() > 0
    for case in ex.cases:  # the reference equals softmax attention with the causal mask
        args, kwargs = case.arguments()
        expected = _causal_attention(*args, **kwargs)
        assert expected.dtype == args[0].dtype
        assert checks.same(expected, ex.reference(*args, **kwargs))
        assert checks.same(expected, _causal_learner(None)(*args, **kwargs))


def test_the_whole_masked_matrix_is_named_by_the_work_case():
    def causal_online_attention(Q, K, V, block_size=256):  # right values, every score computed
        T_q, T_k = Q.shape[-2], K.shape[-2]
        s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1], dtype=Q.dtype)
        s = np.where(np.arange(T_k) > np.arange(T_q)[:, None] + T_k - T_q, -np.inf, s)
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(m), m, 0))
        total = e.sum(axis=-1, keepdims=True)
        return (e / np.where(total > 0, total, 1)) @ V

    result = checks.check(causal_online_attention, "08.4")
    assert result.mistakes == ("causal-future-blocks-computed",), result.message
    assert "more than 9,216 multiply-adds" in result.message


def test_the_solution_of_08_4_passes_and_keeps_float32():
    from tests.exercises import ROOT, load, parts, solution_code

    nb = load(ROOT / "notebooks" / "exercises" / "08_attention_cost.ipynb")
    space = {"np": np}
    exec(solution_code(parts(nb)["08.4"]["solution"]), space)
    assert checks.check(space["causal_online_attention"], "08.4").status == "passed"


def _causal_any_product(convert=None, product="matmul", skip=True):
    """The learner's causal online attention again, with K converted first (np.asarray, np.array,
    K.view) and the scores taken by @, np.einsum or np.dot: how 08.4's work case counts them."""
    def causal_online_attention(Q, K, V, block_size=256):
        if convert == "asarray":
            K = np.asarray(K)  # "make sure K is an array"
        elif convert == "array":
            K = np.array(K, dtype=Q.dtype)
        elif convert == "view":
            K = K.view(np.ndarray)
        n_q, n_k = Q.shape[-2], K.shape[-2]
        qs_all = Q / np.sqrt(Q.shape[-1]).astype(Q.dtype)
        if convert == "scale-k":  # the scale on K instead, in place
            qs_all = Q.copy()
            K /= np.sqrt(K.shape[-1]).astype(K.dtype)
        result = np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype)
        for qs in range(0, n_q, block_size):
            qb = qs_all[..., qs:qs + block_size, :]
            where = n_k - n_q + np.arange(qs, qs + qb.shape[-2]).reshape(-1, 1)
            run_max = np.full(qb.shape[:-1] + (1,), -np.inf, dtype=Q.dtype)
            run_sum, acc = np.zeros_like(run_max), np.zeros(qb.shape[:-1] + V.shape[-1:], Q.dtype)
            for ks in range(0, n_k, block_size):
                if skip and ks > where.max():
                    break
                kb = K[..., ks:ks + block_size, :]
                if product == "einsum":
                    sc = np.einsum("...qd,...kd->...qk", qb, kb)
                elif product == "dot" and qb.ndim == 2:
                    sc = np.dot(qb, kb.T)
                else:
                    sc = qb @ np.swapaxes(kb, -1, -2)
                sc = np.where(np.arange(ks, ks + sc.shape[-1]) > where, -np.inf, sc)
                new_max = np.maximum(run_max, sc.max(axis=-1, keepdims=True))
                ref = np.where(np.isinf(new_max), 0, new_max)
                e, f = np.exp(sc - ref), np.exp(run_max - ref)
                run_sum = run_sum * f + e.sum(axis=-1, keepdims=True)
                acc = acc * f + e @ V[..., ks:ks + block_size, :]
                run_max = new_max
            result[..., qs:qs + block_size, :] = acc / np.where(run_sum > 0, run_sum, 1)
        return result

    return causal_online_attention


def test_the_work_case_counts_products_through_asarray_einsum_and_dot():
    """The work case counts K's products however they are spelled: a future block computed
    through np.asarray(K), np.array(K), np.einsum, np.dot or a K scaled in place is named; the
    same code that skips the future blocks passes."""
    for convert, product in [("asarray", "matmul"), ("array", "matmul"), (None, "einsum"),
                             (None, "dot"), ("asarray", "einsum"), ("scale-k", "matmul")]:
        wrong = checks.check(_causal_any_product(convert, product, skip=False), "08.4")
        assert wrong.mistakes == ("causal-future-blocks-computed",), (convert, product,
                                                                      wrong.message)
        right = checks.check(_causal_any_product(convert, product), "08.4")
        assert right.status == "passed", (convert, product, right.message)


def test_products_that_cannot_be_counted_are_not_credited():
    """K turned into an array the work case cannot follow (a plain view): the work is not
    counted as 0 and passed, the function is not credited, and the message says why."""
    for skip in (True, False):
        result = checks.check(_causal_any_product("view", skip=skip), "08.4")
        assert result.status == "wrong", result.message
        assert "no product with K was seen, so the work cannot be checked" in result.message
