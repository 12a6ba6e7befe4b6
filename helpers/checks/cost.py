"""Exercises of notebook 08: what attention costs, and attention without the n x n matrix."""

import tracemalloc

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.checks.sentences import probe_text
from helpers.transformer import online_attention, scaled_dot_product_attention

_rng = np.random.default_rng(108)  # the cases are the same on every run and every machine

# ── 08.1 · the operations of one self-attention layer ─────────────────────────────────────────


def attention_flops(B, n, d_model, h, d_k):
    """FLOPs of one self-attention layer with h heads of width d_k (notebook 08 §1's count, where
    h d_k = d_model, generalised): four projections between d_model and h d_k, and each head's
    two n x n products, a multiply-add counted as 2."""
    return 8 * B * n * d_model * h * d_k + 4 * B * h * n**2 * d_k


_SECTION_1 = "08 §1 · Two ways to read a sequence, counted"
_HEADS_COST = "02 §5 · Compute: h heads cost about as much as one"

FLOPS = Exercise(
    key="08.1", name="attention_flops", reference=attention_flops, see=_SECTION_1,
    rtol=0.0, atol=0.0,  # exact integers
    cases=(
        Case("B = 1, n = 2, d_model = 4, one head of width d_k = 2 (by hand: 160 FLOPs)",
             (1, 2, 4, 1, 2)),
        Case("B = 2, n = 3, d_model = 8, h = 2, d_k = 4 (h · d_k = d_model)", (2, 3, 8, 2, 4)),
        Case("B = 3, n = 5, d_model = 6, h = 3, d_k = 4 (h · d_k = 12 > d_model)",
             (3, 5, 6, 3, 4)),
        Case("Gemma 7B's widths: B = 1, n = 4096, d_model = 3072, h = 16 heads of d_k = 256",
             (1, 4096, 3072, 16, 256)),
        Case("notebook 08's layer: B = 8, n = 1024, d_model = 512, h = 8, d_k = 64",
             (8, 1024, 512, 8, 64)),
    ),
    mistakes=(
        Mistake("flops-counts-multiply-adds",
                "this counts multiply-adds; a multiply-add is 2 FLOPs (a multiply and an add)",
                _SECTION_1, lambda B, n, d_model, h, d_k: attention_flops(B, n, d_model, h, d_k)
                // 2),
        Mistake("flops-no-projections",
                "the four projections (W^Q, W^K, W^V, W^O: 8·B·n·d_model·h·d_k FLOPs) are left "
                "out; that is Table 1's count, not the layer's",
                _SECTION_1, lambda B, n, d_model, h, d_k: 4 * B * h * n**2 * d_k),
        Mistake("flops-three-projections",
                "only three projections are counted: the output projection W^O, from h·d_k back "
                "to d_model, costs 2·B·n·h·d_k·d_model too",
                _SECTION_1, lambda B, n, d_model, h, d_k: (6 * B * n * d_model * h * d_k
                                                           + 4 * B * h * n**2 * d_k)),
        Mistake("flops-one-n-by-n-product",
                "only one of the two n × n products is counted: Q Kᵀ and weights · V cost "
                "2·n²·d_k each, per head and sequence",
                _SECTION_1, lambda B, n, d_model, h, d_k: (8 * B * n * d_model * h * d_k
                                                           + 2 * B * h * n**2 * d_k)),
        Mistake("flops-n-not-n-squared",
                "the scores are counted as n · d_k per head, not n² · d_k: every query meets "
                "every key",
                _SECTION_1, lambda B, n, d_model, h, d_k: (8 * B * n * d_model * h * d_k
                                                           + 4 * B * h * n * d_k)),
        Mistake("flops-n-and-d-swapped",
                "n and d_model are swapped in the n × n products: each head's Q Kᵀ compares n "
                "queries with n keys, n² · d_k multiply-adds, not d_model² · d_k",
                _SECTION_1, lambda B, n, d_model, h, d_k: (8 * B * n * d_model * h * d_k
                                                           + 4 * B * h * d_model**2 * d_k)),
        Mistake("flops-times-heads",
                "each head's n × n products are counted at the full width d_model; a head is "
                "d_k wide: n² · d_k per product",
                _HEADS_COST, lambda B, n, d_model, h, d_k: (8 * B * n * d_model * h * d_k
                                                            + 4 * h * B * n**2 * d_model)),
        Mistake("flops-one-head-only",
                "the n × n products are counted for one head of width d_k; there are h of them",
                _HEADS_COST, lambda B, n, d_model, h, d_k: (8 * B * n * d_model * h * d_k
                                                            + 4 * B * n**2 * d_k)),
        Mistake("flops-heads-fill-d-model",
                "this is notebook 08 §1's 8·B·n·d_model² + 4·B·n²·d_model, which holds only when "
                "the heads fill d_model (h · d_k = d_model); here the heads are h · d_k wide: "
                "put h · d_k wherever the count stands for the heads' width",
                _HEADS_COST, lambda B, n, d_model, h, d_k: (8 * B * n * d_model**2
                                                            + 4 * B * n**2 * d_model)),
        Mistake("flops-projections-d-model-square",
                "the projections are counted as d_model × d_model matrices; W^Q, W^K, W^V are "
                "d_model × h·d_k and W^O is h·d_k × d_model (equal only when h · d_k = d_model)",
                _HEADS_COST, lambda B, n, d_model, h, d_k: (8 * B * n * d_model**2
                                                            + 4 * B * h * n**2 * d_k)),
        Mistake("flops-no-batch",
                "the batch B is left out: every sequence of the batch costs the same again",
                _SECTION_1, lambda B, n, d_model, h, d_k: attention_flops(1, n, d_model, h, d_k)),
    ),
)

# ── 08.2 · the memory of the scores ───────────────────────────────────────────────────────────


def score_matrix_bytes(B, h, T_q, T_k, dtype):
    """Bytes of the (B, h, T_q, T_k) scores array: one T_q x T_k matrix per head and sequence."""
    return B * h * T_q * T_k * np.dtype(dtype).itemsize


_SECTION_4 = "08 §2 · The n × n matrix: memory"

MEMORY = Exercise(
    key="08.2", name="score_matrix_bytes", reference=score_matrix_bytes, see=_SECTION_4,
    rtol=0.0, atol=0.0,  # exact integers
    cases=(
        Case("B = 1, h = 1, T_q = 2 queries, T_k = 3 keys, float32 (by hand: 24 bytes)",
             (1, 1, 2, 3, np.float32)),
        Case("B = 2, h = 3, T_q = T_k = 5 (self-attention), float64", (2, 3, 5, 5, np.float64)),
        Case("B = 3, h = 2, one cached step: T_q = 1 against T_k = 7, float16",
             (3, 2, 1, 7, np.float16)),
        Case("notebook 08's question 2: B = 8, h = 8, T_q = T_k = 4096, float32",
             (8, 8, 4096, 4096, np.float32)),
        Case("the same model generating: B = 8, h = 8, T_q = 1 against T_k = 4096, float32",
             (8, 8, 1, 4096, np.float32)),
    ),
    mistakes=(
        Mistake("mem-no-heads",
                "the heads are left out: each of the h heads has its own T_q × T_k scores",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: score_matrix_bytes(B, 1, T_q, T_k,
                                                                             dtype)),
        Mistake("mem-no-batch",
                "the batch B is left out: each sequence of the batch has its own scores",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: score_matrix_bytes(1, h, T_q, T_k,
                                                                             dtype)),
        Mistake("mem-n-not-n-squared",
                "the scores are counted as T_k numbers per head; they are T_q × T_k (every "
                "query against every key)",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: score_matrix_bytes(B, h, 1, T_k,
                                                                             dtype)),
        Mistake("mem-keys-squared",
                "the scores are counted T_k × T_k, as if every key were also a query: there is "
                "one row per query, T_q × T_k (one cached step holds a single row)",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: score_matrix_bytes(B, h, T_k, T_k,
                                                                             dtype)),
        Mistake("mem-bits-not-bytes",
                "this counts bits: a float32 is 4 bytes (32 bits); use np.dtype(dtype).itemsize",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: 8 * score_matrix_bytes(B, h, T_q, T_k,
                                                                                 dtype)),
        Mistake("mem-always-4-bytes",
                "every number is counted as 4 bytes (float32) whatever the dtype: float64 has "
                "8, float16 2",
                _SECTION_4, lambda B, h, T_q, T_k, dtype: score_matrix_bytes(B, h, T_q, T_k,
                                                                             np.float32)),
    ),
)

# ── 08.3 · online attention ───────────────────────────────────────────────────────────────────


def _online(Q, K, V, block_size, *, rescale_sum=True, rescale_out=True, invert=False,
            divide=True, partial=True, store_max=True, use_max=True, m0=-np.inf, scale=True,
            per_query=True, first_block_max=False, dtype=None):
    """The online softmax of notebook 08 §3, with switches that turn on one mistake each."""
    dtype = dtype or Q.dtype  # the running sums in the inputs' dtype
    if scale:
        Q = Q / np.sqrt(Q.shape[-1], dtype=dtype)
    m = np.full((*Q.shape[:-1], 1), m0, dtype=dtype)
    ell = np.zeros((*Q.shape[:-1], 1), dtype=dtype)
    a = np.zeros((*Q.shape[:-1], V.shape[-1]), dtype=dtype)
    T_k = K.shape[-2]
    stop = T_k if partial else T_k - T_k % block_size
    for j in range(0, stop, block_size):
        s = Q @ K[..., j:j + block_size, :].swapaxes(-1, -2)
        block_max = s.max(axis=-1, keepdims=True) if per_query else s.max()
        m_new = np.maximum(m, block_max) if use_max else np.zeros_like(m)
        if first_block_max and j > 0:
            m_new = m
        p = np.exp(s - m_new)
        factor = np.exp(m_new - m) if invert else np.exp(m - m_new)
        ell = (ell * factor if rescale_sum else ell) + p.sum(axis=-1, keepdims=True)
        a = (a * factor if rescale_out else a) + p @ V[..., j:j + block_size, :]
        if store_max:
            m = m_new
    return a / ell if divide else a


def _mistake(**switches):
    return lambda Q, K, V, block_size=256: _online(Q, K, V, block_size, **switches)


def _full_matrix(Q, K, V, block_size=256):  # notebook 01's attention, in Q's dtype
    s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1], dtype=Q.dtype)  # (..., T_q, T_k)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ V


def _qkv(lead, T_q, T_k, d_k, d_v):
    return (_rng.normal(size=(*lead, T_q, d_k)), _rng.normal(size=(*lead, T_k, d_k)),
            _rng.normal(size=(*lead, T_k, d_v)))


def _rising():
    """One query, 12 keys whose scores rise by 800 from the first block of 4 to the second, and
    by 3 more to the third: a maximum kept from the first block overflows exp."""
    Q, K, V = _qkv((), 1, 12, 4, 3)
    rise = np.repeat([0.0, 800.0, 803.0], 4)[:, None] * np.sqrt(4) * Q / (Q @ Q.T)
    return Q, K + rise, V


def _low():
    """Two queries whose scores are all near -1000 (within 100 of each other): exp(s - 0)
    underflows to 0 for every key, exp(s - max) does not."""
    K = np.column_stack([_rng.uniform(45, 55, 6), _rng.normal(size=(6, 3))])
    Q = np.column_stack([[-40.0, -40.0], _rng.normal(size=(2, 3))])
    return Q, K, _rng.normal(size=(6, 3))


def _extreme():
    """Query 0 scores about +1000, query 1 about -1000: exp overflows or underflows unshifted."""
    K = np.column_stack([_rng.uniform(30, 40, 5), _rng.normal(size=5)])
    return np.array([[40.0, 0.0], [-40.0, 0.0]]), K, _rng.normal(size=(5, 3))


def _case(label, qkv, block_size):
    return Case(label, qkv, {"block_size": block_size})


_BELOW = probe_text("its peak memory stays below {limit} MB (3/4 of one T_q x T_k float64 matrix "
                    "of scores, {matrix} MB)")
_NOT_BELOW = probe_text("its peak memory is {limit} MB (3/4 of one T_q x T_k float64 matrix of "
                        "scores, {matrix} MB) or more: the whole matrix was built")
_UNSEEN = probe_text("no product with K was seen, so the work cannot be checked: K became an "
                     "array this check does not follow (K.view, K.tolist, ...); take the scores "
                     "from K itself")
_WITHIN = probe_text("at most {bound} multiply-adds of scores: no key block after the diagonal")
_BEYOND = probe_text("more than {bound} multiply-adds of scores: key blocks entirely after a "
                     "query block's diagonal were computed")


def _memory(fn, Q, K, V, block_size):
    """What one call allocates at its peak (tracemalloc), as a verdict: whether it stayed below
    three quarters of one float64 (T_q, T_k) matrix of scores, which an online softmax never
    builds. The margin leaves room for a scaled copy of Q or K (K / √d_k is 1/4 of the matrix
    here) next to a block of scores."""
    scores = Q.shape[-2] * K.shape[-2] * 8  # bytes of one (T_q, T_k) float64 matrix
    tracing = tracemalloc.is_tracing()  # someone else's measurement: keep it running
    if tracing:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    try:
        fn(Q, K, V, block_size=block_size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if not tracing:
            tracemalloc.stop()
    sizes = {"limit": f"{0.75 * scores / 1e6:.1f}", "matrix": f"{scores / 1e6:.1f}"}
    # one verdict per side, the same for every full matrix
    return (_BELOW if peak < 0.75 * scores else _NOT_BELOW).format(**sizes)


_SECTION_3 = "08 §3 · Attention without the n × n matrix"

ONLINE = Exercise(
    key="08.3", name="online_attention", reference=online_attention, see=_SECTION_3,
    cases=(
        _case("Q = 0, 3 keys in blocks of 2 (by hand: every score is 0, so the output is the "
              "mean of V's rows, [[3, 4]])",
              (np.zeros((1, 2)), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
               np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])), 2),
        _case("1 query, 12 keys in 3 blocks of 4 whose scores rise block by block, by 800 and "
              "then by 3 (the running max grows)", _rising(), 4),
        _case("3 queries, 10 keys in blocks of 4 (the last block holds 2), d_k = 8, d_v = 5",
              _qkv((), 3, 10, 8, 5), 4),
        _case("a batch of 2 with 3 heads, 4 queries, 7 keys in blocks of 3, d_k = 4, d_v = 6",
              _qkv((2, 3), 4, 7, 4, 6), 3),
        _case("2 queries whose scores are all near -1000, in one block that holds every key "
              "(block_size = 16 > T_k = 6)", _low(), 16),
        _case("scores near +1000 (query 0) and -1000 (query 1), 5 keys in blocks of 2",
              _extreme(), 2),
        _case("float32 Q, K and V: 3 queries, 9 keys in blocks of 4 (the output stays float32)",
              tuple(x.astype(np.float32) for x in _qkv((), 3, 9, 4, 3)), 4),
        Case("64 queries and 4,096 keys in blocks of 256, d_k = d_v = 16: the memory it takes "
             "(tracemalloc), which must stay below 1.6 MB (3/4 of one 64 x 4,096 float64 "
             "matrix of scores, 2.1 MB; a scaled copy of Q or K fits)",
             _qkv((), 64, 4096, 16, 16), {"block_size": 256}, probe=_memory),
    ),
    mistakes=(
        Mistake("online-no-rescale",
                "neither the running sum nor the running output is multiplied by "
                "exp(m_old - m_new) when a block raises the maximum",
                _SECTION_3,
                _mistake(rescale_sum=False, rescale_out=False)),
        Mistake("online-output-not-rescaled",
                "the running sum is rescaled by exp(m_old - m_new) when the maximum grows, but "
                "the running output is not",
                _SECTION_3, _mistake(rescale_out=False)),
        Mistake("online-sum-not-rescaled",
                "the running output is rescaled by exp(m_old - m_new) when the maximum grows, "
                "but the running sum is not",
                _SECTION_3, _mistake(rescale_sum=False)),
        Mistake("online-exp-inf-on-first-block",
                "on the first block the old maximum is -inf, and an exponential taken against "
                "it is exp(+inf) = inf, so the output is NaN: the rescale factor is "
                "exp(m_old - m_new) (not its inverse), and the block's terms are exp(s - m_new), "
                "with the new maximum",
                _SECTION_3, _mistake(invert=True)),
        Mistake("online-no-final-division",
                "the running output is returned without the final division by the running sum",
                _SECTION_3, _mistake(divide=False)),
        Mistake("online-drops-last-block",
                "the last block is dropped when T_k is not a multiple of block_size (the loop "
                "runs over full blocks only)",
                _SECTION_3, _mistake(partial=False)),
        Mistake("online-max-never-stored",
                "the new maximum is computed but never stored (m = m_new is missing): m stays "
                "-inf, every block's rescale is 0, and only the last block counts",
                _SECTION_3, _mistake(store_max=False)),
        Mistake("online-no-running-max",
                "the exponentials are taken without subtracting a running maximum: scores "
                "like +1000 overflow and -1000 underflow to 0 / 0",
                "01 §3 · Softmax, without overflow", _mistake(use_max=False)),
        Mistake("online-max-from-first-block",
                "the maximum is taken from the first block and never updated: a later block "
                "whose scores are far larger (here by 800) overflows exp(s - m); keep a running "
                "maximum and rescale the old sums when it grows",
                _SECTION_3, _mistake(first_block_max=True)),
        Mistake("online-max-over-all-queries",
                "one maximum is taken over the whole block, for all queries at once (no "
                "axis=-1): a query whose scores are far below another query's (-1000 against "
                "+1000) underflows to 0 / 0; each query needs its own maximum",
                _SECTION_3, _mistake(per_query=False)),
        Mistake("online-max-starts-at-zero",
                "the running maximum starts at 0, not -inf: a query whose scores are all far "
                "below 0 (like -1000) underflows to 0 / 0",
                _SECTION_3, _mistake(m0=0.0)),
        Mistake("online-float32-to-float64",
                "float32 inputs give a float64 output: the running sums were made with "
                "np.zeros or np.full, which are float64 unless told; make them in Q's dtype "
                "(dtype=Q.dtype), as the notebook does",
                _SECTION_3, _mistake(dtype=np.float64)),
        Mistake("online-full-matrix",
                "the whole T_q x T_k matrix of scores is built, softmax(Q Kᵀ / √d_k) V in one "
                "piece: the values are right, but the memory grows with T_q · T_k; go through "
                "the keys block by block, keeping only a running maximum, sum and output",
                _SECTION_3, _full_matrix),
        Mistake("online-no-scaling",
                "the scores are not divided by √d_k",
                "01 §4 · Why divide by √d_k", _mistake(scale=False)),
    ),
)


# ── 08.4 · online attention with a causal mask, block by block ────────────────────────────────


def _causal_attention(Q, K, V, block_size=256):
    """softmax attention with the causal mask aligned to the last key (query i at position
    i + T_k - T_q sees keys 0 … that position), in Q's dtype; a query that sees no key gets 0."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    blocked = np.arange(T_k) > np.arange(T_q)[:, None] + (T_k - T_q)  # (T_q, T_k)
    return scaled_dot_product_attention(Q, K, V, blocked)[0].astype(Q.dtype, copy=False)


def _causal(Q, K, V, block_size=256, *, skip=True, above=True, after_exp=False, safe=True,
            right=True, scale=True, rescale=True, fill=-np.inf, dtype=None, mask_future=False):
    """Causal online attention over blocks of queries and keys, with switches that turn on one
    mistake each."""
    dtype = dtype or Q.dtype
    Q, K, V = (x.astype(dtype, copy=False) for x in (Q, K, V))
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if scale:
        Q = Q / np.sqrt(Q.shape[-1], dtype=dtype)
    out = np.zeros((*Q.shape[:-1], V.shape[-1]), dtype=dtype)
    for i in range(0, T_q, block_size):
        q = Q[..., i:i + block_size, :]
        pos = np.arange(i, i + q.shape[-2])[:, None] + (T_k - T_q if right else 0)
        m = np.full((*q.shape[:-1], 1), -np.inf, dtype=dtype)
        ell, a = np.zeros_like(m), np.zeros((*q.shape[:-1], V.shape[-1]), dtype=dtype)
        stop = min(T_k, int(pos[-1, 0]) + 1) if skip else T_k
        for j in range(0, stop, block_size):
            s = q @ K[..., j:j + block_size, :].swapaxes(-1, -2)
            keys = np.arange(j, j + s.shape[-1])
            blocked = (keys > pos) if above else (keys >= pos)
            if not skip and not mask_future and j > pos[-1, 0]:
                blocked = np.zeros_like(blocked)  # a future block taken as it is
            if not after_exp:
                s = np.where(blocked, fill, s).astype(dtype, copy=False)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            shift = np.where(np.isfinite(m_new), m_new, 0) if safe else m_new
            p = np.exp(s - shift)
            if after_exp:
                p = np.where(blocked, 0, p).astype(dtype, copy=False)
            factor = np.exp(m - shift) if rescale else 1
            ell = ell * factor + p.sum(axis=-1, keepdims=True)
            a = a * factor + p @ V[..., j:j + block_size, :]
            m = m_new
        out[..., i:i + block_size, :] = a / np.where(ell > 0, ell, 1) if safe else a / ell
    return out


def _causal_mistake(**switches):
    return lambda Q, K, V, block_size=256: _causal(Q, K, V, block_size, **switches)


def _future_far_larger():
    """6 queries and keys in blocks of 3 whose last key scores about 1000 above the others for
    every query: only the last query may see it."""
    Q, K, V = _qkv((), 6, 6, 4, 3)
    K[5] += 1000 * np.sqrt(4) * Q.mean(axis=0) / (Q.mean(axis=0) @ Q.mean(axis=0))
    Q = Q.mean(axis=0) + 0.05 * Q  # queries close to their mean: every score of key 5 is high
    return Q, K, V


_PRODUCTS = (np.dot, np.vdot, np.inner, np.outer, np.tensordot, np.einsum, np.kron)
_CONVERTERS = ("asarray", "array", "ascontiguousarray", "asfortranarray", "copy")


def _work(fn, Q, K, V, block_size):
    """The multiply-adds of the products fn takes with K (its scores), as a verdict: whether it
    stays within the causal bound, the key blocks up to each query block's diagonal. K comes as
    a subclass that counts its products (@, np.matmul, np.einsum, np.dot, ..., and a broadcast
    product summed later); what is computed from K element by element is still K, and so is K
    passed through np.asarray, np.array, np.ascontiguousarray, np.asfortranarray or np.copy
    (wrapped in the numpy module for the duration of the call). A function whose products with
    K cannot be seen at all is not credited: its work cannot be checked."""
    count = [0]
    d = Q.shape[-1]

    def plain(x):
        if isinstance(x, Keys):
            return x.view(np.ndarray)
        if isinstance(x, (tuple, list)):
            return type(x)(plain(y) for y in x)
        return x

    def kept(result, like):  # a same-shaped result computed from K element by element is K
        if type(result) is np.ndarray and any(np.shape(x) == result.shape for x in like):
            return result.view(Keys)
        return result

    class Keys(np.ndarray):  # K, counting the products it takes part in
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            keys = [x for x in inputs if isinstance(x, Keys)]
            into = kwargs.get("out", (None,))[0]  # K /= 2 writes into K: K stays K
            if "out" in kwargs:
                kwargs["out"] = plain(kwargs["out"])
            result = getattr(ufunc, method)(*plain(inputs), **kwargs)
            if isinstance(into, Keys) and ufunc is not np.matmul:
                return into
            if method != "__call__" or not isinstance(result, np.ndarray):
                return result
            if ufunc is np.matmul:
                count[0] += result.size * d
                return result
            if ufunc is np.multiply and keys and result.size > max(x.size for x in keys):
                count[0] += result.size  # q[:, None] * K[None]: one multiply per term
                return result
            return kept(result, keys)

        def __array_function__(self, func, types, args, kwargs):
            if func in _PRODUCTS:
                result = func(*plain(args), **{k: plain(v) for k, v in kwargs.items()})
                count[0] += int(np.size(result)) * d
                return result
            result = super().__array_function__(func, types, args, kwargs)
            return kept(result, [x for x in args if isinstance(x, Keys)])

        def dot(self, other, out=None):
            return np.dot(self, other, out=out)

    def keep(convert):  # np.asarray(K) would strip the subclass: it stays K
        def converted(a, *args, **kwargs):
            result = convert(a, *args, **kwargs)
            return result.view(Keys) if isinstance(a, Keys) and type(result) is np.ndarray \
                else result
        return converted

    saved = {name: getattr(np, name) for name in _CONVERTERS}
    try:
        for name, convert in saved.items():
            setattr(np, name, keep(convert))
        fn(Q, K.view(Keys), V, block_size=block_size)
    finally:
        for name, convert in saved.items():
            setattr(np, name, convert)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    bound = 0
    for i in range(0, T_q, block_size):  # each query block, against the keys up to the end of
        last = min(i + block_size, T_q)  # its last query's key block
        keys = min(T_k, -(-max(last + T_k - T_q, 0) // block_size) * block_size)
        bound += (last - i) * keys * d
    if count[0] == 0:
        return _UNSEEN
    return (_WITHIN if count[0] <= bound else _BEYOND).format(bound=f"{bound:,}")


_CAUSAL_MASK = "04 §1 · The causal mask: no looking ahead"

CAUSAL = Exercise(
    key="08.4", name="causal_online_attention", reference=_causal, see=_SECTION_3,
    cases=(
        _case("Q = 0, 2 queries and 2 keys in blocks of 1 (by hand: query 0 sees key 0 only, "
              "query 1 both: [[1, 2], [2, 3]])",
              (np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 1.0]]),
               np.array([[1.0, 2.0], [3.0, 4.0]])), 1),
        _case("7 queries and 7 keys in blocks of 3: diagonal blocks partly masked, future "
              "blocks whole, a short last block", _qkv((), 7, 7, 4, 3), 3),
        _case("3 new queries against 8 keys (a cache: the queries sit at positions 5, 6, 7), "
              "blocks of 2", _qkv((), 3, 8, 4, 3), 2),
        _case("6 queries against 4 keys, blocks of 4: the first 2 queries sit before every key "
              "and see none (output 0)", _qkv((), 6, 4, 4, 3), 4),
        _case("6 queries and keys in blocks of 3, the last key scoring about 1000 above the "
              "others: only the last query may see it", _future_far_larger(), 3),
        _case("a batch of 2 with 3 heads, 5 queries and keys in blocks of 2",
              _qkv((2, 3), 5, 5, 4, 6), 2),
        _case("float32 Q, K and V: 9 queries and keys in blocks of 4 (the output stays float32)",
              tuple(x.astype(np.float32) for x in _qkv((), 9, 9, 4, 3)), 4),
        Case("64 queries and keys in blocks of 8, d_k = 4: the multiply-adds of the scores it "
             "computes (counted on K's products), at most 9,216 (the key blocks up to each "
             "query block's diagonal; all 64 x 64 scores are 16,384)", _qkv((), 64, 64, 4, 3),
             {"block_size": 8}, probe=_work),
    ),
    mistakes=(
        Mistake("causal-future-blocks-computed",
                "key blocks entirely after a query block's diagonal are computed and then masked "
                "(or the whole matrix of scores is): the values are right, but that work is "
                "wasted; stop each query block's key loop at its diagonal block",
                _SECTION_3, _causal_mistake(skip=False, mask_future=True)),
        Mistake("causal-mask-after-exp",
                "the mask is applied after the exponent (blocked terms zeroed), so the running "
                "maximum includes blocked scores: a future key scoring 1000 higher makes every "
                "visible exp(s - m) underflow to 0; set blocked scores to -inf before the "
                "maximum", _SECTION_3, _causal_mistake(after_exp=True)),
        Mistake("causal-future-blocks-unmasked",
                "key blocks entirely after a query block are neither skipped nor masked: those "
                "queries see future keys; stop the key loop at the block's last position",
                _CAUSAL_MASK, _causal_mistake(skip=False)),
        Mistake("causal-blocks-own-key",
                "the diagonal block blocks key k when k >= the query's position: a query sees "
                "its own key (k > position is blocked, k = position is not)",
                _CAUSAL_MASK, _causal_mistake(above=False)),
        Mistake("causal-nan-for-empty-rows",
                "a query that sees no key gets NaN (0 / 0, or exp(-inf - (-inf))): subtract 0 "
                "instead of an infinite maximum, and divide by 1 where the running sum is 0, so "
                "its output is 0 as in notebook 01",
                _SECTION_3, _causal_mistake(safe=False)),
        Mistake("causal-aligned-top-left",
                "query i is taken at position i; with fewer queries than keys (a cache), the "
                "queries are the last ones: query i sits at i + T_k - T_q",
                _CAUSAL_MASK, _causal_mistake(right=False)),
        Mistake("causal-blocked-score-zero",
                "blocked scores are set to 0, not -inf: exp(0 - m) is not 0, so blocked keys "
                "still count", _CAUSAL_MASK, _causal_mistake(fill=0.0)),
        Mistake("causal-no-rescale",
                "neither the running sum nor the running output is multiplied by "
                "exp(m_old - m_new) when a block raises the maximum",
                _SECTION_3, _causal_mistake(rescale=False)),
        Mistake("causal-no-scaling",
                "the scores are not divided by √d_k",
                "01 §4 · Why divide by √d_k", _causal_mistake(scale=False)),
        Mistake("causal-float32-to-float64",
                "float32 inputs give a float64 output: make the running sums and the output "
                "in Q's dtype (dtype=Q.dtype), and divide by np.sqrt(d_k, dtype=Q.dtype)",
                _SECTION_3, _causal_mistake(dtype=np.float64)),
    ),
)

EXERCISES = (FLOPS, MEMORY, ONLINE, CAUSAL)
