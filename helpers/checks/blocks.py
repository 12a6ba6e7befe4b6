"""Exercises of notebook 05: LayerNorm, the Post-LN block, and telling Post-LN from Pre-LN."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import EncoderBlock, LayerNorm, causal_mask, padding_mask, softmax

_rng = np.random.default_rng(105)  # the cases are the same on every run and every machine

# ── 05.1 · layer_norm ─────────────────────────────────────────────────────────────────────────


def _layer_norm(x, gamma, beta, eps=1e-5):
    """The library's LayerNorm with the given gamma and beta."""
    norm = LayerNorm(x.shape[-1], eps)
    norm.load_parameters({"gamma": np.asarray(gamma, dtype=float),
                          "beta": np.asarray(beta, dtype=float)})
    return norm.forward(x)


def _standardised(x, axis=-1, ddof=0, eps=1e-5, root=True):
    """(x - mean) / sqrt(var + eps) along `axis`; root=False: divided by var + eps."""
    mu = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, ddof=ddof, keepdims=True)
    return (x - mu) / (np.sqrt(var + eps) if root else var + eps)


def _eps_outside(x, gamma, beta, eps=1e-5, ddof=0):
    std = x.std(axis=-1, ddof=ddof, keepdims=True)
    return (x - x.mean(axis=-1, keepdims=True)) / (std + eps) * gamma + beta


def _no_eps(x, gamma, beta, eps=1e-5):
    return _standardised(x, eps=0.0) * gamma + beta


def _over_everything(x, gamma, beta, eps=1e-5):
    return (x - x.mean()) / np.sqrt(x.var() + eps) * gamma + beta


_ROWS = _rng.normal(size=(3, 5)) * np.array([[1.0], [0.01], [0.0]]) + 2.0  # std 1, 0.01, a constant

LAYER_NORM = Exercise(
    key="05.1", name="layer_norm", reference=_layer_norm,
    see="05 §1 · LayerNorm: every position on its own",
    cases=(
        Case("x = [[5, 5, 5, 5], [1, 2, 3, 6]], γ = 1, β = 0 (by hand: the constant row gives "
             "zeros, row 1 is (x - 3) / √(3.5 + ε))",
             (np.array([[5.0, 5.0, 5.0, 5.0], [1.0, 2.0, 3.0, 6.0]]), np.ones(4), np.zeros(4))),
        Case("x of shape (3, 8), random γ and β",
             (_rng.normal(size=(3, 8)) * 2 + 1, _rng.normal(size=8), _rng.normal(size=8))),
        Case("a batch x of shape (2, 3, 6), random γ and β",
             (_rng.normal(size=(2, 3, 6)) * np.array([[[0.5]], [[3.0]]]) - 1,
              _rng.normal(size=6), _rng.normal(size=6))),
        Case("eps = 1e-3; rows of std 1, 0.01 and 0 (a constant row gives β)",
             (_ROWS, _rng.normal(size=5), _rng.normal(size=5)), {"eps": 1e-3}),
    ),
    mistakes=(
        Mistake("ln-unbiased-variance",
                "the variance divides by d - 1 (unbiased, ddof=1); LayerNorm uses the "
                "population variance, divided by d",
                "05 §1 · Three near-misses",
                lambda x, gamma, beta, eps=1e-5:
                    _standardised(x, ddof=1, eps=eps) * gamma + beta),
        Mistake("ln-eps-outside-sqrt",
                "ε is added outside the square root, (x - μ) / (σ + ε); it belongs inside, "
                "(x - μ) / √(σ² + ε)",
                "05 §1 · Three near-misses", _eps_outside),
        Mistake("ln-annotated-transformer",
                "the unbiased standard deviation (ddof=1) with ε added outside it, "
                "(x - μ) / (std + ε), as in the Annotated Transformer: two near-misses at once",
                "05 §1 · Three near-misses",
                lambda x, gamma, beta, eps=1e-5: _eps_outside(x, gamma, beta, eps, ddof=1)),
        Mistake("ln-no-sqrt",
                "x - μ is divided by the variance σ² + ε, not by its square root",
                "05 §1 · LayerNorm: every position on its own",
                lambda x, gamma, beta, eps=1e-5:
                    _standardised(x, eps=eps, root=False) * gamma + beta),
        Mistake("ln-no-eps",
                "there is no ε: a constant row divides 0 by 0 and gives NaN",
                "05 §1 · LayerNorm: every position on its own", _no_eps),
        Mistake("ln-ignores-eps",
                "ε is fixed at 1e-5: the `eps` argument is ignored",
                "05 §1 · LayerNorm: every position on its own",
                lambda x, gamma, beta, eps=1e-5: _layer_norm(x, gamma, beta)),
        Mistake("ln-over-positions",
                "the mean and variance are taken over the positions (axis -2), not over the "
                "features of each position (the last axis)",
                "05 §1 · Three near-misses",
                lambda x, gamma, beta, eps=1e-5:
                    _standardised(x, axis=-2, eps=eps) * gamma + beta),
        Mistake("ln-axis-1",
                "the mean and variance are taken over axis 1: that is the features of a 2-D x, "
                "but the positions of a batch (B, T, d_model); the features are always the last "
                "axis, axis=-1",
                "05 §1 · Three near-misses",
                lambda x, gamma, beta, eps=1e-5:
                    _standardised(x, axis=1, eps=eps) * gamma + beta),
        Mistake("ln-over-axis-0",
                "the mean and variance are taken over axis 0 (the batch, as batch "
                "normalisation does), not over the features of each position (the last axis)",
                "05 §1 · Three near-misses",
                lambda x, gamma, beta, eps=1e-5:
                    _standardised(x, axis=0, eps=eps) * gamma + beta),
        Mistake("ln-over-everything",
                "the mean and variance are taken over the whole array (no axis): each position "
                "needs its own, over its features (axis=-1, keepdims=True)",
                "05 §1 · Three near-misses", _over_everything),
        Mistake("ln-gamma-beta-swapped",
                "γ and β are swapped: x̂ · β + γ; the scale is γ, the shift β",
                "05 §1 · LayerNorm: every position on its own",
                lambda x, gamma, beta, eps=1e-5: _layer_norm(x, beta, gamma, eps)),
        Mistake("ln-shift-before-scale",
                "β is added before multiplying by γ, (x̂ + β) · γ; LayerNorm is x̂ · γ + β",
                "05 §1 · LayerNorm: every position on its own",
                lambda x, gamma, beta, eps=1e-5: (_standardised(x, eps=eps) + beta) * gamma),
        Mistake("ln-ignores-gamma-beta",
                "γ and β are not applied: the result is only standardised, x̂",
                "05 §1 · LayerNorm: every position on its own",
                lambda x, gamma, beta, eps=1e-5: _standardised(x, eps=eps)),
    ),
)

# ── 05.2 · the Post-LN block ──────────────────────────────────────────────────────────────────


def _post_ln_block(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x + self_attn(x, mask))  # (..., T, d_model)
    return norm2(y + feed_forward(y))  # (..., T, d_model)


# The sub-layers of the cases: one EncoderBlock (d_model 8, 2 heads, d_ff 16, fixed weights)
# whose two norms get different, non-trivial γ and β, so that swapping them shows.
D_MODEL = 8
BLOCK = EncoderBlock(D_MODEL, 2, 16, _rng)
for _norm in (BLOCK.norm1, BLOCK.norm2):
    _norm.load_parameters({"gamma": _rng.uniform(0.5, 2.0, D_MODEL),
                           "beta": _rng.normal(0.0, 0.5, D_MODEL)})


def self_attn(h, mask=None):
    """Multi-head self-attention: queries, keys and values all from h."""
    return BLOCK.self_attn.forward(h, h, h, mask)


feed_forward, norm1, norm2 = BLOCK.ffn.forward, BLOCK.norm1.forward, BLOCK.norm2.forward
SUBLAYERS = (self_attn, feed_forward, norm1, norm2)


def _toy_attn(h, mask=None):  # the toy case: "attention" that returns its input
    return h


_TOY = (_toy_attn, lambda h: np.maximum(h, 0), LayerNorm(4).forward, LayerNorm(4).forward)


def _averaging_attn(h, mask=None):
    """A toy self-attention to follow by hand: each position averages the positions it may see."""
    scores = np.zeros(h.shape[:-1] + h.shape[-2:-1])  # (..., T, T), all equal
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    return softmax(scores) @ h


# Two toy norms that are not linear, |h| + 1 and 2|h|: |a + b| is not |a| + |b|, so a residual
# added on the wrong side of a norm changes the result (with h + k it would not); and they
# differ, so that swapping them shows too.
def _abs_plus_1(h):
    return np.abs(h) + 1


def _twice_abs(h):
    return 2 * np.abs(h)


_NONLINEAR = (_averaging_attn, lambda h: -2 * h, _abs_plus_1, _twice_abs)


def _wired(wrap):
    """The block with each sub-layer wrapped by wrap(h, sublayer, norm) -> the new h."""
    def block(x, self_attn, feed_forward, norm1, norm2, mask=None):
        y = wrap(x, lambda h: self_attn(h, mask), norm1)
        return wrap(y, feed_forward, norm2)
    return block


def _pre_ln(x, self_attn, feed_forward, norm1, norm2, mask=None):
    h = x + self_attn(norm1(x), mask)
    return h + feed_forward(norm2(h))


def _no_residual(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(self_attn(x, mask))
    return norm2(feed_forward(y))


def _norm_then_add(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = x + norm1(self_attn(x, mask))
    return y + norm2(feed_forward(y))


def _ffn_first(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x + feed_forward(x))
    return norm2(y + self_attn(y, mask))


def _ffn_reads_input(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x + self_attn(x, mask))
    return norm2(y + feed_forward(x))


def _residual_from_input(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x + self_attn(x, mask))
    return norm2(x + feed_forward(y))


def _block_case(label, shape, mask=None):
    x = _rng.normal(size=shape)
    return Case(label, (x, *SUBLAYERS), {} if mask is None else {"mask": mask})


POST_LN_BLOCK = Exercise(
    key="05.2", name="post_ln_block", reference=_post_ln_block,
    see="05 §3 · Residual connections and the paper's block, one step per cell",
    cases=(
        Case("toy sub-layers: attention returns its input, the FFN is ReLU, norms with γ = 1, "
             "β = 0; x = [[[-1, 1, -1, 1], [1, 1, -1, -1]]] (by hand: the output ≈ x)",
             (np.array([[[-1.0, 1.0, -1.0, 1.0], [1.0, 1.0, -1.0, -1.0]]]), *_TOY)),
        Case("by hand, with toy norms that are not linear: attention averages the positions "
             "the mask lets it see, feed_forward(h) = -2h, norm1(h) = |h| + 1, norm2(h) = "
             "2|h|; x = [1, -3] (one feature), the causal mask (by hand: the output is "
             "[6, 10])",
             (np.array([[[1.0], [-3.0]]]), *_NONLINEAR), {"mask": causal_mask(2)}),
        _block_case("one sentence of 5 tokens, d_model = 8, no mask", (1, 5, D_MODEL)),
        _block_case("a batch of 2, 4 tokens, the causal mask (4, 4)", (2, 4, D_MODEL),
                    causal_mask(4)),
        _block_case("a batch of 2, 5 tokens, a padding mask (lengths 5 and 2)", (2, 5, D_MODEL),
                    padding_mask(np.array([5, 2]), 5)),
    ),
    mistakes=(
        Mistake("block-pre-ln",
                "this is the Pre-LN block, x + Sublayer(LN(x)); the paper's Post-LN block is "
                "LN(x + Sublayer(x))",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN", _pre_ln),
        Mistake("block-no-residual",
                "the residual connections are missing: LN(Sublayer(x)) instead of "
                "LN(x + Sublayer(x))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _no_residual),
        Mistake("block-norm-then-add",
                "the norm is applied to the sub-layer's output before the addition, "
                "x + LN(Sublayer(x)); the paper adds first, then normalises: LN(x + Sublayer(x))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _norm_then_add),
        Mistake("block-one-norm",
                "norm1 is used after both sub-layers; the FFN's sum goes through norm2 (each "
                "norm has its own γ and β)",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                lambda x, self_attn, feed_forward, norm1, norm2, mask=None:
                    _post_ln_block(x, self_attn, feed_forward, norm1, norm1, mask)),
        Mistake("block-norms-swapped",
                "the norms are swapped: norm2 follows attention and norm1 the FFN",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                lambda x, self_attn, feed_forward, norm1, norm2, mask=None:
                    _post_ln_block(x, self_attn, feed_forward, norm2, norm1, mask)),
        Mistake("block-mask-not-passed",
                "the mask is not passed to self-attention: self_attn(x) attends to every key",
                "05 §4 · Checking the block",
                lambda x, self_attn, feed_forward, norm1, norm2, mask=None:
                    _post_ln_block(x, self_attn, feed_forward, norm1, norm2)),
        Mistake("block-ffn-first",
                "the sub-layers are in the wrong order: the FFN comes first, then attention",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _ffn_first),
        Mistake("block-ffn-reads-input",
                "the FFN reads the block's input x, not y = LN(x + MHA(x)), the output of the "
                "first sub-layer",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _ffn_reads_input),
        Mistake("block-residual-from-input",
                "the second residual adds the block's input x, LN(x + FFN(y)); it must add what "
                "the FFN read: LN(y + FFN(y))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _residual_from_input),
        Mistake("block-add-after-norm",
                "the norm is applied to the input alone and the sub-layer's output added after "
                "it, LN(x) + Sublayer(x); Post-LN normalises the sum: LN(x + Sublayer(x))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _wired(lambda h, sublayer, norm: norm(h) + sublayer(h))),
        Mistake("block-norm-overwrites-input",
                "x is replaced by LN(x) before the sub-layer, so the residual adds the normalised "
                "input, LN(x) + Sublayer(LN(x)); the paper's block adds the input itself and "
                "normalises the sum: LN(x + Sublayer(x))",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN",
                _wired(lambda h, sublayer, norm: norm(h) + sublayer(norm(h)))),
    ),
)

# ── 05.3 · which order does a block run? ─────────────────────────────────────────────────────


def which_order(block, x):
    """"post" if `block` ends with a LayerNorm (Post-LN), "pre" if its input passes through
    (Pre-LN): a Post-LN output is bounded by γ and β whatever comes in; a Pre-LN output is the
    input plus terms computed from normalised arrays, so it grows with the input."""
    big = x * (1e6 / x.std())  # (T, d_model): far larger than any LayerNorm output
    return "pre" if np.abs(block(big)).max() > 0.5 * np.abs(big).max() else "post"


def _encoder(norm_first, gamma=None, beta=None):
    """An EncoderBlock's forward (d_model 8, 2 heads, d_ff 16, random weights) whose two norms
    get gamma and beta (default 1 and 0)."""
    block = EncoderBlock(D_MODEL, 2, 16, _rng, norm_first=norm_first)
    for norm in (block.norm1, block.norm2):
        norm.load_parameters({"gamma": np.ones(D_MODEL) if gamma is None else gamma(),
                              "beta": np.zeros(D_MODEL) if beta is None else beta()})
    return block.forward


def _zero_sublayers_post(h):  # Post-LN with both sub-layers returning zeros: LN(LN(h))
    norm = LayerNorm(h.shape[-1])
    return norm.forward(norm.forward(h))


def _zero_sublayers_pre(h):  # Pre-LN with both sub-layers returning zeros: h + 0 + 0
    return h + 0.0


def _standardised_rows(x):
    return (x - x.mean(axis=-1, keepdims=True)) / x.std(axis=-1, keepdims=True)


def _looks_normalised(h, check_std=True):
    """Whether every row of h has mean 0 (and standard deviation 1), to 1e-3."""
    ok = np.allclose(h.mean(axis=-1), 0, atol=1e-3)
    return ok and (not check_std or np.allclose(h.std(axis=-1), 1, atol=1e-3))


_NORMALISED = np.array([[-1.0, 1.0, -1.0, 1.0]])  # mean 0, standard deviation 1 already
_ORDER = "05 §5 · A stack of blocks, and Post-LN against Pre-LN"
_SCALE = _rng.uniform(0.5, 5.0, D_MODEL), _rng.normal(0.0, 2.0, D_MODEL)

WHICH_ORDER = Exercise(
    key="05.3", name="which_order", reference=which_order, see=_ORDER,
    cases=(
        Case("by hand: both sub-layers return zeros, so Post-LN is LN(LN(h)), γ = 1, β = 0; "
             "x = [[-1, 1, -1, 1]] (block(x) ≈ x, as for the Pre-LN block of the next case) "
             "-> 'post'", (_zero_sublayers_post, _NORMALISED)),
        Case("by hand: both sub-layers return zeros, so Pre-LN is h + 0 + 0; x = "
             "[[-1, 1, -1, 1]] (block(x) = x, which looks like a LayerNorm output) -> 'pre'",
             (_zero_sublayers_pre, _NORMALISED)),
        Case("Post-LN, random weights, γ = 1, β = 0, x of shape (5, 8)",
             (_encoder(False), _rng.normal(size=(5, D_MODEL)))),
        Case("Pre-LN, random weights, γ = 1, β = 0, x with mean about 2 and std about 3",
             (_encoder(True), _rng.normal(size=(5, D_MODEL)) * 3 + 2)),
        Case("Post-LN, γ = 2, β = 0 (output rows have mean 0 and standard deviation 2)",
             (_encoder(False, lambda: np.full(D_MODEL, 2.0)), _rng.normal(size=(5, D_MODEL)))),
        Case("Post-LN, random γ (0.5 to 5) and β",
             (_encoder(False, lambda: _SCALE[0], lambda: _SCALE[1]),
              _rng.normal(size=(5, D_MODEL)))),
        Case("Pre-LN, random γ and β, x with rows already normalised (mean 0, std 1)",
             (_encoder(True, lambda: _SCALE[0], lambda: _SCALE[1]),
              _standardised_rows(_rng.normal(size=(5, D_MODEL))))),
        Case("Pre-LN, γ = 1, β = 0, a small x (std about 0.1)",
             (_encoder(True), _rng.normal(size=(5, D_MODEL)) * 0.1)),
    ),
    mistakes=(
        Mistake("order-swapped",
                "the answers are swapped: an output that stays bounded whatever the input's "
                "size comes from a block that ends with a LayerNorm, Post-LN; one that grows "
                "with the input carries x through its skips, Pre-LN",
                _ORDER,
                lambda block, x: "post" if which_order(block, x) == "pre" else "pre"),
        Mistake("order-mean-only",
                "only the mean of block(x)'s rows is tested: a Post-LN output's rows have mean "
                "0 only when β = 0 and γ is constant, and a Pre-LN block returns rows of mean 0 "
                "when x has them and its sub-layers add little; probe the block with an input "
                "of your own instead",
                _ORDER,
                lambda block, x: "post" if _looks_normalised(block(x), False) else "pre"),
        Mistake("order-std-one",
                "the test is 'block(x)'s rows have mean 0 and standard deviation 1', true of a "
                "Post-LN block only when γ = 1 and β = 0 (and of a Pre-LN block whose x is "
                "already normalised); what does not depend on γ and β is that a Post-LN "
                "output stays bounded whatever the input's size",
                _ORDER, lambda block, x: "post" if _looks_normalised(block(x)) else "pre"),
        Mistake("order-tests-input",
                "the statistics are taken of x, the block's input, not of what the block "
                "returns: x says nothing about the block",
                _ORDER, lambda block, x: "post" if _looks_normalised(x) else "pre"),
        Mistake("order-fixed-threshold",
                "block(x) is called 'post' when its values are small (below 3): a LayerNorm's "
                "output is bounded, but by its γ and β, which can be large, and a Pre-LN "
                "block's output is small too when x is; compare the output with the input "
                "you give it",
                _ORDER,
                lambda block, x: "post" if np.abs(block(x)).max() < 3 else "pre"),
        Mistake("order-probe-too-small",
                "the probe is too small (block(2·x) against block(x)): a Pre-LN output is x "
                "plus sub-layer outputs of a fixed size, so doubling a small or normalised x "
                "hardly changes it; scale x by 1000 so that x dominates",
                _ORDER,
                lambda block, x: "pre" if np.abs(block(2 * x)).max()
                > 1.5 * np.abs(block(x)).max() else "post"),
    ),
)

EXERCISES = (LAYER_NORM, POST_LN_BLOCK, WHICH_ORDER)
