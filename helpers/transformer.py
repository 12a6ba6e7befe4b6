"""The Transformer of "Attention Is All You Need", in NumPy, in the order the notebooks build it.

Every definition below is written in a notebook first, in a cell that starts with
``# saved in helpers/transformer.py``; ``tests/test_sync.py`` proves the two copies are identical.
Edit the notebook, then copy the cell here (or the other way round): the test says if you forgot.

Conventions (see the README): weights act on the right (``x @ W``); masks are boolean with
``True`` = blocked; float32 in gives float32 out.
"""

import numpy as np

# ── 01 · Scaled dot-product attention ─────────────────────────────────────────────────────────


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`.

    Subtracting the maximum first changes nothing mathematically (the factor exp(-max) cancels)
    but keeps every exponent <= 0, so nothing overflows. A row that is entirely -inf (every key
    blocked) has no valid softmax; we return zeros for it instead of NaN.
    """
    x = np.asarray(x)
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0)  # all -inf row: keep it -inf, not NaN
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def as_real_array(x, name):
    """np.asarray(x), or a ValueError naming `name` unless it holds real numbers (int or float)."""
    x = np.asarray(x)
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise ValueError(f"{name} must hold real numbers (int or float), got dtype {x.dtype}")
    return x


def check_attention_inputs(Q, K, V, mask=None):
    """Raise a ValueError that names the argument and the shapes if Q, K, V, mask do not fit."""
    for name, a in (("Q", Q), ("K", K), ("V", V)):
        if a.ndim < 2:
            raise ValueError(f"{name} must have shape (..., T, d) with rank >= 2, got {a.shape}")
    if Q.shape[-1] == 0 or K.shape[-2] == 0:
        raise ValueError(f"attention needs d_k >= 1 and at least one key: Q {Q.shape}, K {K.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q and K must share d_k (last axis): Q {Q.shape} has d_k={Q.shape[-1]}, "
            f"K {K.shape} has d_k={K.shape[-1]}"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K and V must have the same number of keys T_k (axis -2): K {K.shape}, V {V.shape}"
        )
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch) axes of Q {Q.shape}, K {K.shape}, V {V.shape} do not broadcast"
        ) from None
    scores_shape = (*batch, Q.shape[-2], K.shape[-2])
    if mask is not None:
        if mask.dtype != bool:
            raise ValueError(
                f"mask must be boolean with True = blocked, got dtype {mask.dtype}; "
                "convert keep-masks or additive masks first"
            )
        try:
            np.broadcast_to(mask, scores_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} cannot broadcast to the scores' shape "
                f"{scores_shape} = (..., T_q, T_k)"
            ) from None


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, for any leading batch axes.

    Q: (..., T_q, d_k), K: (..., T_k, d_k), V: (..., T_k, d_v),
    mask: boolean, broadcastable to (..., T_q, T_k), True = this key is blocked for this query.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)). A query whose keys are all
    blocked gets all-zero weights and a zero output (never NaN).
    """
    Q, K, V = as_real_array(Q, "Q"), as_real_array(K, "K"), as_real_array(V, "V")
    mask = None if mask is None else np.asarray(mask)
    check_attention_inputs(Q, K, V, mask)
    dtype = np.result_type(Q, K, V)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    d_k = Q.shape[-1]
    scale = np.sqrt(d_k, dtype=dtype)  # a float32 scale keeps float32 scores float32

    scores = (Q @ K.swapaxes(-1, -2)).astype(dtype, copy=False) / scale  # (..., T_q, T_k)
    if mask is not None:
        scores = np.where(mask, -np.inf, scores).astype(dtype, copy=False)  # before softmax
    weights = softmax(scores, axis=-1)  # (..., T_q, T_k), rows sum to 1
    output = weights @ V.astype(dtype, copy=False)  # (..., T_q, d_v)
    return output, weights


# ── 02 · Multi-head attention ─────────────────────────────────────────────────────────────────


def check_positive_int(value, name, about=""):
    """`value` as an int if it is a positive int (True is not); else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        about = f" ({about})" if about else ""
        raise ValueError(f"{name}{about} must be a positive int, got {name}={value!r}")
    return int(value)


def check_float_dtype(dtype):
    """np.dtype(dtype) if it is a float type (float32, float64, ...); else a ValueError."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype!r}") \
            from None
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype must be a float type such as float32 or float64, got {dtype}")
    return dtype


def split_heads(x, n_heads):
    """(..., T, d_model) -> (..., h, T, d_k): cut the features into h slices of width d_k."""
    n_heads = check_positive_int(n_heads, "n_heads")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, d_model) with rank >= 2, got {x.shape}")
    *lead, T, d_model = x.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} (last axis of {x.shape}) is not divisible by "
                         f"n_heads={n_heads}")
    x = x.reshape(*lead, T, n_heads, d_model // n_heads)  # (..., T, h, d_k)
    return x.swapaxes(-3, -2)  # (..., h, T, d_k)


def merge_heads(x):
    """(..., h, T, d_k) -> (..., T, h * d_k): the inverse of split_heads."""
    *lead, h, T, d_k = x.shape
    x = x.swapaxes(-3, -2)  # (..., T, h, d_k): put the heads back next to each other
    return x.reshape(*lead, T, h * d_k)  # (..., T, d_model)


class MultiHeadAttention:
    """Multi-head attention (paper §3.2.2), all heads at once, no loop over heads.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o + b_o, with
    head_i = Attention(query W_q[:, i] + b_q[i], key W_k[:, i] + b_k[i], value W_v[:, i] + b_v[i])
    where [:, i] is the i-th block of d_k = d_model / h columns. Weights act on the right (x @ W).
    """

    def __init__(self, d_model, n_heads, rng, *, dtype=np.float64):
        d_model = check_positive_int(d_model, "d_model")
        n_heads = check_positive_int(n_heads, "n_heads")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be a positive multiple of n_heads={n_heads}")
        dtype = check_float_dtype(dtype)
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        std = 1.0 / np.sqrt(d_model)  # keeps x @ W at the scale of x for unit-variance x
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, rng.normal(0.0, std, (d_model, d_model)).astype(dtype))
        for name in ("b_q", "b_k", "b_v", "b_o"):
            setattr(self, name, np.zeros(d_model, dtype=dtype))
        self.weights = None  # the last attention weights, (..., h, T_q, T_k)
        self.cache = None  # kept for backward (notebook 07): forward's inputs and Q, K, V, heads

    def parameters(self):
        """The learnable arrays by paper name (the arrays themselves, not copies)."""
        names = ("W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o")
        return {name: getattr(self, name) for name in names}

    def load_parameters(self, params):
        """Set every parameter from a dict like parameters() returns (shapes must match)."""
        own = self.parameters()
        if set(params) != set(own):
            raise ValueError(f"expected parameters {sorted(own)}, got {sorted(params)}")
        for name, value in params.items():
            value = np.asarray(value)
            if value.shape != own[name].shape:
                raise ValueError(f"{name}: expected shape {own[name].shape}, got {value.shape}")
            setattr(self, name, value.astype(own[name].dtype, copy=True))

    def forward(self, query, key, value, mask=None):
        """query (..., T_q, d_model), key and value (..., T_k, d_model) -> (..., T_q, d_model).

        mask: boolean, True = blocked, broadcastable to (..., h, T_q, T_k); a mask with the
        inputs' rank, such as (B, T_q, T_k) for (B, T, d_model) inputs, gets a head axis.
        """
        query, key = as_real_array(query, "query"), as_real_array(key, "key")
        value = as_real_array(value, "value")
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.ndim < 2 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (..., T, d_model={self.d_model}), "
                                 f"got {x.shape}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"key {key.shape} and value {value.shape} must have the same "
                             "(..., T_k) axes")
        if key.shape[-2] == 0:
            raise ValueError(f"key must have at least one position (T_k >= 1), got {key.shape}")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.ndim == query.ndim and mask.ndim >= 3:
                mask = np.expand_dims(mask, -3)  # (B, T_q, T_k) -> (B, 1, T_q, T_k)
        h = self.n_heads
        Q = split_heads(query @ self.W_q + self.b_q, h)  # (..., h, T_q, d_k)
        K = split_heads(key @ self.W_k + self.b_k, h)  # (..., h, T_k, d_k)
        V = split_heads(value @ self.W_v + self.b_v, h)  # (..., h, T_k, d_k)
        heads, self.weights = scaled_dot_product_attention(Q, K, V, mask)  # (..., h, T_q, d_k)
        heads = merge_heads(heads)  # (..., T_q, d_model)
        self.cache = (query, key, value, Q, K, V, heads)  # kept for backward (notebook 07)
        return heads @ self.W_o + self.b_o  # (..., T_q, d_model)



# ── 03 · Positional encoding ──────────────────────────────────────────────────────────────────


def pe_frequencies(d_model):
    """Angular frequencies w_i = 1 / 10000^(2i / d_model) of the sinusoidal encoding.

    One per sin/cos pair i = 0 .. d_model/2 - 1, shape (d_model/2,). Pair i turns w_i radians per
    position, so its wavelength 2*pi / w_i runs from 2*pi (i = 0) to 2*pi * 10000^(1 - 2/d_model).
    """
    if isinstance(d_model, bool) or not isinstance(d_model, (int, np.integer)):
        raise ValueError(f"d_model must be an int, got {type(d_model).__name__} {d_model!r}")
    if d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be even and >= 2 (sin and cos come in pairs), got d_model={d_model}"
        )
    two_i = np.arange(0, d_model, 2)  # 2i = 0, 2, ..., d_model - 2
    return 1.0 / 10000.0 ** (two_i / d_model)  # (d_model/2,)


def positional_encoding(T, d_model, dtype=np.float64):
    """The paper's sinusoidal positional encoding for positions 0 .. T-1, shape (T, d_model).

    PE[pos, 2i] = sin(pos * w_i) and PE[pos, 2i + 1] = cos(pos * w_i), with w_i from pe_frequencies:
    the sin and cos of one frequency sit side by side. Computed in float64, returned as `dtype`.
    """
    T, dtype = check_positive_int(T, "T", "the number of positions"), check_float_dtype(dtype)
    omega = pe_frequencies(d_model)  # (d_model/2,)
    angles = np.arange(T, dtype=np.float64)[:, None] * omega  # (T, d_model/2), pos * w_i
    PE = np.empty((T, d_model))
    PE[:, 0::2] = np.sin(angles)  # columns 0, 2, 4, ...
    PE[:, 1::2] = np.cos(angles)  # columns 1, 3, 5, ...
    return PE.astype(dtype, copy=False)


def relative_position_matrix(k, d_model):
    """M_k of shape (d_model, d_model) with PE[pos + k] = PE[pos] @ M_k for every position pos.

    Row vectors, weights on the right (x @ W). M_k is block-diagonal; block i rotates pair i by the
    angle k * w_i: [[cos(k w_i), -sin(k w_i)], [sin(k w_i), cos(k w_i)]]. It depends on the offset
    k and on d_model, never on pos. k may be negative: M_{-k} = M_k^T undoes M_k.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(
            f"k (the offset in positions) must be an int, got {type(k).__name__} {k!r}"
        )
    omega = pe_frequencies(d_model)  # (d_model/2,)
    cos, sin = np.cos(k * omega), np.sin(k * omega)  # (d_model/2,) each
    even = np.arange(0, d_model, 2)  # row/column of the sin in each pair
    M = np.zeros((d_model, d_model))
    M[even, even], M[even, even + 1] = cos, -sin  # new sin = sin*cos(kw) + cos*sin(kw)
    M[even + 1, even], M[even + 1, even + 1] = sin, cos  # new cos = cos*cos(kw) - sin*sin(kw)
    return M


# ── 04 · Masks ────────────────────────────────────────────────────────────────────────────────


def causal_mask(T):
    """(T, T) boolean mask, True above the diagonal: query i may not see the keys j > i.

    Row i is query i, column j is key j. Broadcasts against scores (..., T, T); combine it with a
    padding mask by `|` (blocked if either blocks).
    """
    T = check_positive_int(T, "T", "the sequence length")
    return np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T), True where j > i


def padding_mask(lengths, T):
    """(B, 1, 1, T) boolean mask, True at the padded KEY positions j >= lengths[b].

    Sequence b holds lengths[b] real tokens followed by padding up to length T. The two singleton
    axes broadcast over the heads and over the queries of scores (B, h, T_q, T_k).
    """
    T = check_positive_int(T, "T", "the padded length")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be integers of shape (B,), got shape {lengths.shape} "
                         f"and dtype {lengths.dtype}")
    if np.any((lengths < 0) | (lengths > T)):
        raise ValueError(f"lengths must lie in 0 .. T={T}, got {lengths.tolist()}")
    blocked = np.arange(T) >= lengths[:, None]  # (B, T): position j of sequence b is padding
    return blocked[:, None, None, :]  # (B, 1, 1, T)


def padding_mask_from_tokens(tokens, pad_id):
    """(B, 1, 1, T) boolean mask, True where the token ids (B, T) equal pad_id (anywhere)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer ids of shape (B, T), got shape {tokens.shape} "
                         f"and dtype {tokens.dtype}")
    return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, T)


def mask_from_keep(keep):
    """Our mask (True = blocked) from a keep-mask (True or 1 = may attend), of the same shape."""
    keep = np.asarray(keep)
    if keep.dtype != bool:
        numeric = np.issubdtype(keep.dtype, np.integer) or np.issubdtype(keep.dtype, np.floating)
        if not numeric or not np.all((keep == 0) | (keep == 1)):
            raise ValueError(f"keep must hold True/False or 1/0 only, got dtype {keep.dtype} "
                             f"and shape {keep.shape}")
    return keep == 0  # (same shape), True where the keep-mask says "do not attend"


def mask_to_keep(mask):
    """The keep-mask (True = may attend) of our boolean mask (True = blocked)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    return ~mask


def mask_to_additive(mask, dtype, fill=-np.inf):
    """An additive mask of `dtype`: 0 where attending is allowed, `fill` where blocked.

    Add it to the scores before the softmax. The fill is converted to `dtype` first, so a float32
    mask stays float32 (a float64 constant would promote the scores to float64). A finite fill
    that overflows `dtype` (-1e9 in float16) is refused rather than silently becoming -inf.
    """
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    dtype = check_float_dtype(dtype)
    with np.errstate(over="ignore"):
        value = dtype.type(fill)  # the fill in the target dtype
    if not value < 0 or (np.isinf(value) and np.isfinite(fill)):
        raise ValueError(f"fill must be negative (or -inf) and fit in {dtype}: fill={fill!r} "
                         f"becomes {value}")
    return np.where(mask, value, dtype.type(0))  # (mask's shape), dtype `dtype`


def mask_from_additive(additive):
    """Our boolean mask from an additive one: 0 = attend; -inf or any value <= -1e4 = blocked.

    -1e4 is the blocked value of smallest magnitude in common use (-1e4, -1e6, -1e9 and -inf
    are all accepted).
    Any other value is a bias, not a mask, and is refused.
    """
    additive = np.asarray(additive)
    if not np.issubdtype(additive.dtype, np.floating):
        raise ValueError(f"additive must be a float array, got dtype {additive.dtype}")
    blocked = additive <= -1e4
    if not np.all(blocked | (additive == 0)):
        bad = np.unique(additive[~blocked & (additive != 0)])[:3]
        raise ValueError(f"additive of shape {additive.shape} must hold only 0 (attend) and "
                         f"values <= -1e4 or -inf (blocked), got values such as {bad}")
    return blocked


def lengths_from_padding_mask(mask):
    """The lengths (B,) of a right-padding mask of shape (B, 1, 1, T) or (B, T)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = blocked), got dtype {mask.dtype}")
    if mask.ndim == 4 and mask.shape[1:3] == (1, 1):
        mask = mask[:, 0, 0, :]  # (B, 1, 1, T) -> (B, T)
    if mask.ndim != 2:
        raise ValueError(f"mask must have shape (B, 1, 1, T) or (B, T), got {mask.shape}")
    lengths = np.sum(~mask, axis=-1)  # (B,): the unblocked positions of each sequence
    right_padded = mask == (np.arange(mask.shape[-1]) >= lengths[:, None])  # (B, T)
    if not np.all(right_padded):
        rows = np.flatnonzero(~right_padded.all(axis=-1)).tolist()
        raise ValueError(f"mask of shape {mask.shape}: rows {rows} are not 'real tokens, then "
                         "padding', so no lengths describe them")
    return lengths


# ── 05 · The Post-LN block ────────────────────────────────────────────────────────────────────


def set_parameters(module, params):
    """Load `params`, a dict shaped like ``module.parameters()``, into `module` (copies).

    Names and shapes are all checked first, so a bad dict changes nothing. A dotted name such as
    "ffn.W_1" or "layers.0.norm1.gamma" walks through attributes (and list indices) to its array.
    """
    own = module.parameters()
    if set(params) != set(own):
        missing, unexpected = sorted(set(own) - set(params)), sorted(set(params) - set(own))
        raise ValueError(f"parameter names differ: missing {missing}, unexpected {unexpected}")
    for name, value in params.items():
        if np.shape(value) != own[name].shape:
            raise ValueError(f"{name}: expected shape {own[name].shape}, got {np.shape(value)}")
    for name, value in params.items():
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            owner = owner[int(part)] if part.isdigit() else getattr(owner, part)
        setattr(owner, leaf, np.array(value, dtype=own[name].dtype))  # a copy, in our dtype


class LayerNorm:
    """Layer normalisation over the last axis: each position is normalised on its own.

    LN(x) = (x - mean) / sqrt(var + eps) * gamma + beta, with the mean and the population variance
    (divide by d_model, not d_model - 1) of the d_model features of one position. gamma starts at
    ones and beta at zeros, so a fresh LayerNorm only standardises.
    """

    def __init__(self, d_model, eps=1e-5, *, dtype=np.float64):
        self.d_model, dtype = check_positive_int(d_model, "d_model"), check_float_dtype(dtype)
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0:
            raise ValueError(f"eps must be a number >= 0, got eps={eps!r}")
        self.eps = eps
        self.gamma = np.ones(d_model, dtype=dtype)  # (d_model,) scale, learned
        self.beta = np.zeros(d_model, dtype=dtype)  # (d_model,) shift, learned
        self.cache = None  # kept for backward (notebook 07)

    def parameters(self):
        return {"gamma": self.gamma, "beta": self.beta}

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x):
        """x (..., d_model) -> (..., d_model), every position standardised separately."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        mean = x.mean(axis=-1, keepdims=True)  # (..., 1): one mean per position
        var = x.var(axis=-1, ddof=0, keepdims=True)  # (..., 1): population variance
        std = np.sqrt(var + self.eps)  # (..., 1)
        x_hat = (x - mean) / std  # (..., d_model): mean 0, variance just below 1
        self.cache = (x_hat, std)  # kept for backward (notebook 07)
        return x_hat * self.gamma + self.beta


class FeedForward:
    """Position-wise feed-forward network (paper §3.3): FFN(x) = ReLU(x W_1 + b_1) W_2 + b_2.

    The same two layers act on every position separately: nothing mixes positions. The paper
    uses d_ff = 4 * d_model (512 -> 2048 -> 512).
    """

    def __init__(self, d_model, d_ff, rng, *, dtype=np.float64):
        d_model, d_ff = check_positive_int(d_model, "d_model"), check_positive_int(d_ff, "d_ff")
        dtype = check_float_dtype(dtype)
        self.d_model, self.d_ff = d_model, d_ff
        self.W_1 = rng.normal(0.0, 1.0 / np.sqrt(d_model), (d_model, d_ff)).astype(dtype)
        self.b_1 = np.zeros(d_ff, dtype=dtype)
        self.W_2 = rng.normal(0.0, 1.0 / np.sqrt(d_ff), (d_ff, d_model)).astype(dtype)
        self.b_2 = np.zeros(d_model, dtype=dtype)
        self.cache = None  # kept for backward (notebook 07)

    def parameters(self):
        return {"W_1": self.W_1, "b_1": self.b_1, "W_2": self.W_2, "b_2": self.b_2}

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x):
        """x (..., T, d_model) -> (..., T, d_model), through a hidden layer of width d_ff."""
        x = as_real_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {x.shape}")
        hidden = np.maximum(x @ self.W_1 + self.b_1, 0)  # (..., T, d_ff), ReLU
        self.cache = (x, hidden)  # kept for backward (notebook 07)
        return hidden @ self.W_2 + self.b_2  # (..., T, d_model)


class Dropout:
    """Inverted dropout (paper §5.4): a training device, the identity until training turns it on.

    In training mode (`rng` is a np.random.Generator, set by set_training) forward zeroes each
    entry with probability p and divides the survivors by 1 - p, so the expected value is
    unchanged; in evaluation mode (rng None, the default) it returns x itself. The mask of kept
    entries is cached for the backward pass (notebook 07).
    """

    def __init__(self, p=0.0, *, name="p"):
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 <= p < 1:
            raise ValueError(f"{name} (the dropout probability) must lie in [0, 1), "
                             f"got {name}={p!r}")
        self.p = float(p)
        self.rng = None  # None: evaluation (identity); a Generator: training
        self.cache = None  # the kept entries of the last forward (None: nothing was dropped)

    def forward(self, x):
        if self.rng is None or self.p == 0.0:
            self.cache = None
            return x
        keep = self.rng.random(np.shape(x)) >= self.p  # True = kept
        self.cache = keep  # kept for backward (notebook 07)
        return x * keep / (1.0 - self.p)  # a Python float: float32 stays float32


def dropout_layers(module):
    """Every Dropout inside `module` (its attributes and lists of sub-modules), in a fixed order."""
    found, todo = [], [module]
    while todo:
        obj = todo.pop(0)
        if isinstance(obj, Dropout):
            found.append(obj)
        elif isinstance(obj, list):
            todo[:0] = obj
        elif hasattr(obj, "parameters"):  # a module: its sub-modules, in attribute order
            todo[:0] = [v for v in vars(obj).values() if isinstance(v, list)
                        or hasattr(v, "forward")]
    return found


def set_training(module, rng):
    """Training mode for every Dropout inside `module` (a block, a stack, a Transformer): rng, a
    np.random.Generator, draws their masks; rng=None is evaluation mode (dropout is the identity).
    """
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a np.random.Generator (training) or None (evaluation), "
                         f"got {type(rng).__name__}")
    for layer in dropout_layers(module):
        layer.rng = rng


class EncoderBlock:
    """One encoder layer (paper §3.1): self-attention, then a feed-forward network, each with a
    residual connection and a LayerNorm.

    Post-LN, the paper's order and the default:   x = LN(x + MHA(x));  x = LN(x + FFN(x)).
    Pre-LN (norm_first=True), common since 2019:  x = x + MHA(LN(x));  x = x + FFN(LN(x)).
    dropout: the paper's residual dropout (P_drop = 0.1) on each sub-layer's output before it is
    added; it acts only in training mode (set_training), so forward is deterministic otherwise.
    """

    def __init__(self, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.dropout1, self.dropout2 = (Dropout(dropout, name="dropout") for _ in range(2))

    def parameters(self):
        """Every learnable array by dotted name: "self_attn.W_q", "ffn.W_1", "norm1.gamma", ..."""
        return {f"{part}.{name}": value for part in ("self_attn", "ffn", "norm1", "norm2")
                for name, value in getattr(self, part).parameters().items()}

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x, mask=None):
        """x (..., T, d_model) -> (..., T, d_model). mask: True = blocked, passed to attention."""
        x = as_real_array(x, "x")
        if x.ndim < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., T, d_model={self.d_model}) with rank >= 2, "
                             f"got {x.shape}")
        if self.norm_first:  # Pre-LN: normalise what enters each sub-layer
            h = self.norm1.forward(x)
            x = x + self.dropout1.forward(self.self_attn.forward(h, h, h, mask))  # (.., T, d_model)
            return x + self.dropout2.forward(self.ffn.forward(self.norm2.forward(x)))
        a = self.dropout1.forward(self.self_attn.forward(x, x, x, mask))
        x = self.norm1.forward(x + a)  # Post-LN: add, then normalise
        return self.norm2.forward(x + self.dropout2.forward(self.ffn.forward(x)))


class Encoder:
    """A stack of n_layers EncoderBlocks (the paper: N = 6), same shape, each with its own weights.

    With norm_first=True (Pre-LN) the residual stream is never normalised inside the stack, so a
    final LayerNorm, `norm`, follows the last block; Post-LN needs none (each block ends with one).
    """

    def __init__(self, n_layers, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        n_layers = check_positive_int(n_layers, "n_layers")
        self.layers = [EncoderBlock(d_model, n_heads, d_ff, rng, norm_first=norm_first,
                                    dropout=dropout, dtype=dtype) for _ in range(n_layers)]
        self.norm = LayerNorm(d_model, dtype=dtype) if norm_first else None

    def parameters(self):
        params = {f"layers.{i}.{name}": value for i, layer in enumerate(self.layers)
                  for name, value in layer.parameters().items()}
        if self.norm is not None:
            params.update({f"norm.{name}": value for name, value in self.norm.parameters().items()})
        return params

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x, mask=None):
        """x (..., T, d_model) -> (..., T, d_model), through every block in turn."""
        for layer in self.layers:
            x = layer.forward(x, mask)
        return x if self.norm is None else self.norm.forward(x)
# ── 06 · The decoder and the whole Transformer ────────────────────────────────────────────────


class DecoderBlock:
    """One decoder layer (paper §3.1): masked self-attention, cross-attention, feed-forward.

    Cross-attention takes its queries from the decoder and its keys and values from the
    encoder's output, `memory`. Each sub-layer has a residual connection and a LayerNorm:
    Post-LN by default (x = LN(x + Sublayer(x))), Pre-LN with norm_first=True. dropout: as in
    EncoderBlock, on each sub-layer's output before the residual add, in training mode only.
    """

    def __init__(self, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.norm3 = LayerNorm(d_model, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout, name="dropout")
                                                       for _ in range(3))

    def parameters(self):
        parts = ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3")
        return {f"{part}.{name}": value for part in parts
                for name, value in getattr(self, part).parameters().items()}

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).

        self_mask blocks target keys (causal and padding), memory_mask blocks source keys
        (padding); both are boolean with True = blocked.
        """
        x, memory = as_real_array(x, "x"), as_real_array(memory, "memory")
        for name, a in (("x", x), ("memory", memory)):
            if a.ndim < 2 or a.shape[-1] != self.d_model or a.shape[-2] == 0:
                raise ValueError(f"{name} must have shape (..., T >= 1, d_model={self.d_model}), "
                                 f"got {a.shape}")
        if self.norm_first:
            h = self.norm1.forward(x)
            x = x + self.dropout1.forward(self.self_attn.forward(h, h, h, self_mask))
            h = self.norm2.forward(x)
            x = x + self.dropout2.forward(self.cross_attn.forward(h, memory, memory, memory_mask))
            return x + self.dropout3.forward(self.ffn.forward(self.norm3.forward(x)))
        a = self.dropout1.forward(self.self_attn.forward(x, x, x, self_mask))
        x = self.norm1.forward(x + a)
        a = self.dropout2.forward(self.cross_attn.forward(x, memory, memory, memory_mask))
        x = self.norm2.forward(x + a)
        return self.norm3.forward(x + self.dropout3.forward(self.ffn.forward(x)))


class Decoder:
    """A stack of n_layers DecoderBlocks (N = 6 in the paper); Pre-LN adds a final LayerNorm."""

    def __init__(self, n_layers, d_model, n_heads, d_ff, rng, *, norm_first=False, dropout=0.0,
                 dtype=np.float64):
        n_layers = check_positive_int(n_layers, "n_layers")
        self.layers = [DecoderBlock(d_model, n_heads, d_ff, rng, norm_first=norm_first,
                                    dropout=dropout, dtype=dtype) for _ in range(n_layers)]
        self.norm = LayerNorm(d_model, dtype=dtype) if norm_first else None

    def parameters(self):
        params = {f"layers.{i}.{name}": value for i, layer in enumerate(self.layers)
                  for name, value in layer.parameters().items()}
        if self.norm is not None:
            params.update({f"norm.{name}": value for name, value in self.norm.parameters().items()})
        return params

    def load_parameters(self, params):
        set_parameters(self, params)

    def forward(self, x, memory, self_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer.forward(x, memory, self_mask, memory_mask)
        return x if self.norm is None else self.norm.forward(x)


def check_token_id(value, name, n_ids):
    """`value` as an int if it is a token id in [0, n_ids) (True is not); else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value < n_ids:
        raise ValueError(f"{name} must be a token id in [0, {n_ids}), got {name}={value!r}")
    return int(value)


class Transformer:
    """The encoder-decoder of the paper: embeddings * sqrt(d_model) + PE, N encoder blocks,
    N decoder blocks, and a linear map to vocabulary logits.

    share_embeddings=True uses one embedding matrix for source and target (the paper's shared
    BPE vocabulary); tie_output=True computes logits with the target embedding matrix itself,
    logits = x @ E^T (paper §3.4), instead of a separate W_out, b_out. Token id `pad_id` is
    padding: padded source keys and padded target keys are masked; so are future target keys.
    pad_id=None: no token is padding. dropout: the paper's P_drop, on the sum of embeddings and
    PE and inside every block, in training mode only (set_training).
    """

    def __init__(self, src_vocab, tgt_vocab, rng, *, d_model=512, n_heads=8, d_ff=2048,
                 n_layers=6, max_len=256, pad_id=0, share_embeddings=False, tie_output=False,
                 norm_first=False, dropout=0.0, dtype=np.float64):
        src_vocab = check_positive_int(src_vocab, "src_vocab")
        tgt_vocab = check_positive_int(tgt_vocab, "tgt_vocab")
        d_model, dtype = check_positive_int(d_model, "d_model"), check_float_dtype(dtype)
        max_len = check_positive_int(max_len, "max_len", "the longest sequence")
        if share_embeddings and src_vocab != tgt_vocab:
            raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab={src_vocab} "
                             f"and tgt_vocab={tgt_vocab}")
        n_ids = min(src_vocab, tgt_vocab)  # pad_id pads source and target sequences alike
        try:
            pad_id = None if pad_id is None else check_token_id(pad_id, "pad_id", n_ids)
        except ValueError:
            raise ValueError(f"pad_id must be None (no padding) or a token id in [0, {n_ids}), "
                             f"got pad_id={pad_id!r}") from None
        self.src_vocab, self.tgt_vocab, self.d_model = src_vocab, tgt_vocab, d_model
        self.pad_id, self.share_embeddings, self.tie_output = pad_id, share_embeddings, tie_output
        self.pe = positional_encoding(max_len, d_model, dtype=dtype)  # (max_len, d_model)
        std = 1.0 / np.sqrt(d_model)  # times sqrt(d_model) below: unit-variance token vectors
        self.src_embed = rng.normal(0.0, std, (src_vocab, d_model)).astype(dtype)
        self.tgt_embed = (self.src_embed if share_embeddings
                          else rng.normal(0.0, std, (tgt_vocab, d_model)).astype(dtype))
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, rng, norm_first=norm_first,
                               dropout=dropout, dtype=dtype)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, rng, norm_first=norm_first,
                               dropout=dropout, dtype=dtype)
        if not tie_output:
            self.W_out = rng.normal(0.0, std, (d_model, tgt_vocab)).astype(dtype)
            self.b_out = np.zeros(tgt_vocab, dtype=dtype)
        self.src_dropout, self.tgt_dropout = (Dropout(dropout, name="dropout")  # on x + PE
                                              for _ in range(2))
        self.cache = None  # kept for backward (notebook 07)

    def parameters(self):
        params = {"src_embed": self.src_embed}
        if not self.share_embeddings:
            params["tgt_embed"] = self.tgt_embed
        params.update({f"encoder.{k}": v for k, v in self.encoder.parameters().items()})
        params.update({f"decoder.{k}": v for k, v in self.decoder.parameters().items()})
        if not self.tie_output:
            params.update({"W_out": self.W_out, "b_out": self.b_out})
        return params

    def load_parameters(self, params):
        set_parameters(self, params)
        if self.share_embeddings:
            self.tgt_embed = self.src_embed  # one matrix, two names in the model

    def check_tokens(self, tokens, vocab, name):
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"{name} must be integer token ids of shape (B, T), got "
                             f"{tokens.dtype} {tokens.shape}")
        if 0 in tokens.shape:
            raise ValueError(f"{name} must hold at least one sequence of at least one token, "
                             f"got shape {tokens.shape}")
        if tokens.shape[1] > len(self.pe):
            raise ValueError(f"{name} has T={tokens.shape[1]} positions, longer than the "
                             f"positional table (max_len={len(self.pe)})")
        if tokens.min() < 0 or tokens.max() >= vocab:
            raise ValueError(f"{name} has token ids in [{tokens.min()}, {tokens.max()}], outside "
                             f"the vocabulary [0, {vocab})")
        return tokens

    def embed(self, tokens, table, start=0):
        """Token vectors * sqrt(d_model) + PE: (B, T) ids -> (B, T, d_model)."""
        T = tokens.shape[-1]
        scale = np.sqrt(self.d_model, dtype=table.dtype)  # np.sqrt(d_model) alone is float64
        return table[tokens] * scale + self.pe[start:start + T]

    def encode(self, src):
        """src (B, S) ids -> memory (B, S, d_model) and the source padding mask (B, 1, 1, S)."""
        src = self.check_tokens(src, self.src_vocab, "src")
        src_mask = None if self.pad_id is None else padding_mask_from_tokens(src, self.pad_id)
        x = self.src_dropout.forward(self.embed(src, self.src_embed))  # (B, S, d_model)
        return self.encoder.forward(x, src_mask), src_mask

    def logits(self, x):
        """Decoder output (..., d_model) -> vocabulary logits (..., tgt_vocab)."""
        if self.tie_output:
            return x @ self.tgt_embed.swapaxes(-1, -2)
        return x @ self.W_out + self.b_out

    def decode(self, tgt, memory, src_mask):
        """tgt (B, T) ids (the decoder input, starting with BOS) -> logits (B, T, tgt_vocab)."""
        tgt = self.check_tokens(tgt, self.tgt_vocab, "tgt")
        if tgt.shape[0] != memory.shape[0]:
            raise ValueError(f"batch sizes differ: tgt has B={tgt.shape[0]}, the source "
                             f"B={memory.shape[0]}")
        self_mask = causal_mask(tgt.shape[1])  # (T, T)
        if self.pad_id is not None:
            self_mask = self_mask | padding_mask_from_tokens(tgt, self.pad_id)  # (B, 1, T, T)
        x = self.tgt_dropout.forward(self.embed(tgt, self.tgt_embed))  # (B, T, d_model)
        x = self.decoder.forward(x, memory, self_mask, src_mask)
        self.cache = {"tgt": tgt, "x": x}  # kept for backward (notebook 07)
        return self.logits(x)

    def forward(self, src, tgt):
        """Teacher forcing: src (B, S), tgt (B, T) -> logits (B, T, tgt_vocab)."""
        src, tgt = np.asarray(src), np.asarray(tgt)
        if src.ndim == 2 and tgt.ndim == 2 and src.shape[0] != tgt.shape[0]:
            raise ValueError(f"batch sizes differ: src {src.shape}, tgt {tgt.shape}")
        memory, src_mask = self.encode(src)
        logits = self.decode(tgt, memory, src_mask)
        self.cache["src"] = src  # kept for backward (notebook 07)
        return logits


def attention_step(attn, x_new, cache, memory=None, mask=None):
    """MultiHeadAttention for one new query position with a key/value cache.

    Self-attention (memory=None): the new position's key and value are appended to the cache
    and the query attends to every position so far; nothing later exists yet, so no causal
    mask is needed. Cross-attention: the keys and values of `memory` are computed on the first
    call and reused. mask blocks keys (True = blocked): the positions so far, (B, 1, 1, t), for
    self-attention; the memory's, (B, 1, 1, S), for cross-attention.
    x_new (B, 1, d_model) -> (B, 1, d_model).
    """
    h = attn.n_heads
    if memory is None:
        K_new = split_heads(x_new @ attn.W_k + attn.b_k, h)  # (B, h, 1, d_k)
        V_new = split_heads(x_new @ attn.W_v + attn.b_v, h)  # (B, h, 1, d_k)
        if "K" in cache:
            K_new = np.concatenate([cache["K"], K_new], axis=-2)  # (B, h, t, d_k)
            V_new = np.concatenate([cache["V"], V_new], axis=-2)
        cache["K"], cache["V"] = K_new, V_new
    elif "K" not in cache:
        cache["K"] = split_heads(memory @ attn.W_k + attn.b_k, h)  # (B, h, S, d_k), once
        cache["V"] = split_heads(memory @ attn.W_v + attn.b_v, h)
    Q = split_heads(x_new @ attn.W_q + attn.b_q, h)  # (B, h, 1, d_k)
    heads, attn.weights = scaled_dot_product_attention(Q, cache["K"], cache["V"], mask)
    return merge_heads(heads) @ attn.W_o + attn.b_o  # (B, 1, d_model)


def decoder_block_step(block, x_new, memory, cache, memory_mask=None, self_mask=None):
    """DecoderBlock.forward for ONE new target position, reusing cached keys and values.

    x_new (B, 1, d_model) is the newest position; `cache` is a dict this function fills (the
    self-attention keys/values of every earlier position and the cross-attention keys/values of
    `memory`). self_mask (B, 1, 1, t) blocks padded target positions so far. Returns
    (B, 1, d_model), equal to the last position of block.forward on the whole prefix under a
    causal mask. Dropout is left out: decoding runs in evaluation mode.
    """
    self_cache, cross_cache = cache.setdefault("self", {}), cache.setdefault("cross", {})
    if block.norm_first:
        h = block.norm1.forward(x_new)
        x_new = x_new + attention_step(block.self_attn, h, self_cache, mask=self_mask)
        h = block.norm2.forward(x_new)
        x_new = x_new + attention_step(block.cross_attn, h, cross_cache, memory, memory_mask)
        return x_new + block.ffn.forward(block.norm3.forward(x_new))
    a = attention_step(block.self_attn, x_new, self_cache, mask=self_mask)
    x_new = block.norm1.forward(x_new + a)
    a = attention_step(block.cross_attn, x_new, cross_cache, memory, memory_mask)
    x_new = block.norm2.forward(x_new + a)
    return block.norm3.forward(x_new + block.ffn.forward(x_new))


def greedy_decode(model, src, bos_id, eos_id, max_steps, *, use_cache=True):
    """Generate with the most likely token (never `pad_id`) at every step, one at a time.

    Returns (tokens (B, 1 + steps) starting with BOS, logits (B, steps, tgt_vocab)); the logits
    are those of model.forward(src, tokens[:, :-1]), masks included. Without the cache each step
    re-runs the decoder on the whole prefix; with it each step runs only the new position
    through the blocks. A sequence that has produced EOS is continued with `pad_id` (with EOS if
    pad_id is None); generation stops once every sequence has produced EOS or after max_steps.
    Decoding is evaluation: the model's dropout must be off (set_training(model, None)).
    """
    pad = model.pad_id
    bos_id = check_token_id(bos_id, "bos_id", model.tgt_vocab)
    eos_id = check_token_id(eos_id, "eos_id", model.tgt_vocab)
    if pad is not None and pad in (bos_id, eos_id):
        raise ValueError(f"bos_id={bos_id} and eos_id={eos_id} must differ from the padding id "
                         f"pad_id={pad}: a padded first position is masked, and padding is never "
                         "generated")
    max_steps = check_positive_int(max_steps, "max_steps")
    if max_steps > len(model.pe):
        raise ValueError(f"max_steps={max_steps} needs more decoder positions than the positional "
                         f"table has (max_len={len(model.pe)})")
    if any(layer.rng is not None for layer in dropout_layers(model)):
        raise ValueError("greedy_decode runs in evaluation mode: call set_training(model, None)")
    memory, src_mask = model.encode(src)
    B = memory.shape[0]
    tokens = np.full((B, 1), bos_id)
    caches = [{} for _ in model.decoder.layers]
    all_logits, done = [], np.zeros(B, dtype=bool)
    for t in range(max_steps):
        if use_cache:
            x = model.embed(tokens[:, -1:], model.tgt_embed, start=t)  # (B, 1, d_model)
            self_mask = None if pad is None else padding_mask_from_tokens(tokens, pad)
            for block, cache in zip(model.decoder.layers, caches, strict=True):
                x = decoder_block_step(block, x, memory, cache, src_mask, self_mask)
            if model.decoder.norm is not None:
                x = model.decoder.norm.forward(x)
            step_logits = model.logits(x)[:, -1]  # (B, tgt_vocab)
        else:  # the whole prefix again, with the masks of model.forward
            step_logits = model.decode(tokens, memory, src_mask)[:, -1]  # (B, tgt_vocab)
        choice = step_logits.copy()
        if pad is not None:
            choice[:, pad] = -np.inf  # padding is never a prediction
        next_token = np.where(done, eos_id if pad is None else pad, choice.argmax(axis=-1))
        tokens = np.concatenate([tokens, next_token[:, None]], axis=1)
        all_logits.append(step_logits)
        done |= next_token == eos_id
        if done.all():
            break
    return tokens, np.stack(all_logits, axis=1)


def transformer_parameter_count(d_model, n_heads, d_ff, n_layers, src_vocab, tgt_vocab, *,
                                share_embeddings=False, tie_output=False, norm_first=False):
    """Parameters of Transformer(...) with these settings, by formula (n_heads does not matter)."""
    attention = 4 * d_model * d_model + 4 * d_model  # W_q, W_k, W_v, W_o and their biases
    ffn = 2 * d_model * d_ff + d_ff + d_model  # W_1, b_1, W_2, b_2
    norm = 2 * d_model  # gamma, beta
    encoder = n_layers * (attention + ffn + 2 * norm) + (norm if norm_first else 0)
    decoder = n_layers * (2 * attention + ffn + 3 * norm) + (norm if norm_first else 0)
    embeddings = src_vocab * d_model + (0 if share_embeddings else tgt_vocab * d_model)
    output = 0 if tie_output else d_model * tgt_vocab + tgt_vocab
    return embeddings + encoder + decoder + output


# ── 08 · What attention costs ─────────────────────────────────────────────────────────────────


def online_attention(Q, K, V, mask=None, block_size=256):
    """scaled_dot_product_attention's output without ever building the (T_q, T_k) weights.

    Walks over blocks of `block_size` keys (the idea behind FlashAttention), keeping for every
    query a running maximum m of its scores, a running sum l of exp(score - m) and a running
    weighted sum of values; when a block raises the maximum, the old sums are rescaled by
    exp(m_old - m_new). Memory is O(T_q * block_size) instead of O(T_q * T_k).
    Shapes and mask as in scaled_dot_product_attention; returns the output (..., T_q, d_v) only.
    A query whose keys are all blocked gets a zero output (never NaN).
    """
    Q, K, V = as_real_array(Q, "Q"), as_real_array(K, "K"), as_real_array(V, "V")
    mask = None if mask is None else np.asarray(mask)
    check_attention_inputs(Q, K, V, mask)
    block_size = check_positive_int(block_size, "block_size")
    dtype = np.result_type(Q, K, V)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    K, V = K.astype(dtype, copy=False), V.astype(dtype, copy=False)
    Q = Q.astype(dtype, copy=False) / np.sqrt(Q.shape[-1], dtype=dtype)  # scale Q, not scores
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if mask is not None:
        mask = np.broadcast_to(mask, (*mask.shape[:-1], T_k))  # a view: the key axis in full
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    m = np.full((*lead, T_q, 1), -np.inf, dtype=dtype)  # running max of each query's scores
    l = np.zeros((*lead, T_q, 1), dtype=dtype)  # running sum of exp(score - m)
    acc = np.zeros((*lead, T_q, V.shape[-1]), dtype=dtype)  # running sum of exp(score - m) v
    for start in range(0, T_k, block_size):  # the only loop: over blocks of keys
        keys = slice(start, start + block_size)
        s = Q @ K[..., keys, :].swapaxes(-1, -2)  # (..., T_q, b): this block's scores only
        if mask is not None:
            np.copyto(s, -np.inf, where=mask[..., keys])  # blocked keys: exp(-inf) = 0
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (..., T_q, 1)
        shift = np.where(np.isfinite(m_new), m_new, 0)  # all blocked so far: no inf - inf
        s -= shift
        np.exp(s, out=s)  # (..., T_q, b), in place: no second block-sized array
        rescale = np.exp(m - shift)  # (..., T_q, 1), <= 1; 0 while nothing was seen
        l *= rescale
        l += s.sum(axis=-1, keepdims=True)
        acc *= rescale
        acc += s @ V[..., keys, :]  # (..., T_q, d_v)
        m = m_new
    acc /= np.where(l > 0, l, 1)  # fully blocked rows: 0 / 1 = 0
    return acc  # (..., T_q, d_v)
