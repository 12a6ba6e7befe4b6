"""What the models of 2023-2025 added to notebook 09's block, in NumPy: sliding-window attention
with a key/value cache bounded by the window, QK-norm, a mixture of experts with top-k routing and
a load-balancing loss, multi-head latent attention, and RoPE's base and scaling (notebook 09,
Going further). Each piece is one class or function with its backward pass; RecentDecoder is
notebook 09's DecoderOnly with any of them switched on (RecentConfig), everything off by default.

Every definition below is written in notebook 09 first, in a cell that starts with
``# saved in helpers/recent.py``; ``tests/test_sync.py`` proves the two copies are identical.
"""

from dataclasses import dataclass, field

import numpy as np

from helpers.decoding import KVCache
from helpers.modern import DecoderOnly, DecoderOnlyConfig, ModernBlock
from helpers.transformer import causal_mask
from helpers.validation import check_int, check_number, check_positive_int

# ── 09 · The Transformer today ────────────────────────────────────────────────────────────────

# ==== sliding-window attention (helper A) ====


def sliding_window_mask(T, window):
    """(T, T) boolean, True = blocked: query q sees the keys q - window < k <= q, itself and the
    window - 1 before it (Mistral's sliding window); window >= T is the causal mask."""
    T = check_positive_int(T, "T", "the sequence length")
    window = check_positive_int(window, "window")
    q, k = np.arange(T)[:, None], np.arange(T)[None, :]  # (T, 1) queries, (1, T) keys
    return (k > q) | (k <= q - window)  # (T, T): the future, and the keys too old


@dataclass(eq=False, kw_only=True)
class WindowCache(KVCache):
    """A KVCache for sliding-window attention: it keeps the keys and values of the last `window`
    positions only, so its arrays never grow past (B, g, window, d_k), however long the text.
    `length` still counts every position seen (RoPE's start position); `forgotten` is how many
    of them it no longer holds. Mistral's rolling buffer writes position i into slot i mod W
    (no copy); here the oldest positions are cut off, the same keys kept in their order."""

    window: int
    seen: int = field(default=0, init=False)

    def __post_init__(self):
        self.window = check_positive_int(self.window, "window")
        if self.fixed:
            raise ValueError("a WindowCache is self-attention's: fixed must be False")

    @property
    def length(self):
        """The number of positions seen so far, held or forgotten."""
        return self.seen

    @property
    def forgotten(self):
        """The number of positions seen whose keys and values are no longer held."""
        return self.seen - (0 if self.K is None else self.K.shape[-2])

    def add(self, K, V, source):
        """KVCache.add: this call's keys and values after the held ones, all of them returned;
        then only the last `window` positions are kept."""
        new = K.shape[-2]
        K, V = super().add(K, V, source)  # (B, g, held + new, d_k)
        self.K = K[..., -self.window:, :].copy()  # (B, g, <= window, d_k)
        self.V = V[..., -self.window:, :].copy()
        self.seen += new
        return K, V

# ==== QK-norm (helper B) ====

# ==== mixture of experts (helper C) ====

# ==== multi-head latent attention (helper D) ====

# ==== RoPE's base and scaling (helper E) ====

ROPE_SCALINGS = ("linear", "ntk", "yarn", "llama3")


def rope_frequencies(d, base=10000.0):
    """RoPE's d/2 angular frequencies w_i = base^(-2i/d): pair i turns once every 2 pi / w_i
    positions, its wavelength. base 10000 (RoFormer) gives notebook 03's pe_frequencies(d)."""
    two_i = np.arange(0, d, 2)  # 2i = 0, 2, ..., d - 2
    return 1.0 / base ** (two_i / d)  # (d/2,)


def check_rope_scaling(scaling):
    """scaling as a tuple (method, s, L): stretch RoPE s times past the L positions a model was
    trained on, by one of ROPE_SCALINGS; None (no scaling) stays None. A list (read back from
    JSON) becomes a tuple; anything else is a ValueError."""
    if scaling is None:
        return None
    if not isinstance(scaling, (tuple, list)) or len(scaling) != 3 \
            or scaling[0] not in ROPE_SCALINGS:
        raise ValueError(f"scaling must be None or (method, s, L) with method one of "
                         f"{ROPE_SCALINGS}, got scaling={scaling!r}")
    return (scaling[0], check_number(scaling[1], "scaling's s", "[1, inf)"),
            check_positive_int(scaling[2], "scaling's L"))


def ramp(r, low, high):
    """0 where r <= low, 1 where r >= high, a straight line between (YaRN's gamma)."""
    return np.clip((r - low) / (high - low), 0.0, 1.0)


def scaled_frequencies(d, base=10000.0, scaling=None):
    """(w, m): RoPE's frequencies w (d/2,) under a scaling (method, s, L), and the magnitude m
    that every rotation is multiplied by. r_i = L w_i / (2 pi) is how many turns pair i makes
    over the L trained positions (L / its wavelength).

    linear: w / s, position interpolation (Chen et al., 2023): position p is read as p / s.
    ntk: the base times s^(d / (d - 2)) ("NTK-aware", bloc97, 2023): the first pair is kept,
        the last one divided by s, the ones between by less and less.
    yarn: NTK-by-parts (Peng et al., 2023): w / s where r < 1, w kept where r > 32, a straight
        line (ramp) between; and m = 0.1 ln(s) + 1, YaRN's sqrt(1/t): rotating queries and keys
        by m multiplies every score by m^2 = 1/t, its attention temperature.
    llama3: Llama 3.1's rule: the same ramp between r = 1 and r = 4 (low_freq_factor 1,
        high_freq_factor 4), m = 1.
    """
    w = rope_frequencies(d, base)  # (d/2,)
    scaling = check_rope_scaling(scaling)
    if scaling is None:
        return w, 1.0
    method, s, L = scaling
    if method == "linear":
        return w / s, 1.0
    if method == "ntk":
        if d < 4:
            raise ValueError(f"ntk scaling needs d >= 4 (its first and last pairs differ), got "
                             f"d={d}")
        return rope_frequencies(d, base * s ** (d / (d - 2))), 1.0
    r = L * w / (2 * np.pi)  # (d/2,): turns over the trained length
    gamma = ramp(r, 1.0, 32.0 if method == "yarn" else 4.0)  # 0: interpolate, 1: keep
    m = 0.1 * np.log(s) + 1.0 if method == "yarn" else 1.0
    return (1.0 - gamma) * w / s + gamma * w, m


def rope_table(T, d, *, base=10000.0, scaling=None):
    """The (T, d/2) complex rotations m e^(i p w_i) of positions p = 0 .. T-1 that rope's
    `table=` takes (llama's freqs_cis), with the base and scaling of scaled_frequencies. With
    base 10000 and no scaling it is rotations(T, d), bit for bit."""
    T = check_int(T, "T", "[0, inf)")
    if check_int(d, "d", "[2, inf)") % 2:
        raise ValueError(f"d must be even (rope turns pairs of features), got d={d}")
    w, m = scaled_frequencies(d, check_number(base, "base", "(1, inf)"), scaling)
    angles = np.arange(T)[:, None] * w  # (T, d/2): p * w_i
    return m * np.exp(1j * angles)  # (T, d/2)


def rescale_rope(model, *, base=10000.0, scaling=None):
    """Give every block of a trained model (DecoderOnly or RecentDecoder, RoPE) the rotations
    of this base and scaling, for all its max_len positions, weights untouched; returns the
    model. Its config is left as it was: this is for evaluation."""
    blocks = [block.self_attn for block in model.decoder.layers]
    if any(getattr(attn, "turns", None) is None for attn in blocks):
        raise ValueError("rescale_rope: the model has a block without RoPE (position='rope')")
    for attn in blocks:
        attn.turns = rope_table(len(attn.turns), attn.d_k, base=base, scaling=scaling)
    return model

# ==== all of them in one model ====


@dataclass(frozen=True)
class RecentConfig(DecoderOnlyConfig):
    """DecoderOnlyConfig with the pieces of 2023-2025 models, each off by default (then the model
    is DecoderOnly's, weight for weight). See RecentDecoder."""

    window: int | None = None  # sliding-window attention: the keys each query sees (Mistral)
    qk_norm: bool = False  # an RMSNorm on every query and key head before the scores
    n_experts: int = 0  # 0: one dense feed-forward network; else a mixture of n_experts
    top_k: int = 2  # experts per token (mixture of experts)
    balance: float = 0.01  # the load-balancing loss's coefficient (mixture of experts)
    d_latent: int | None = None  # multi-head latent attention: the cached latent's width
    rope_base: float = 10000.0  # RoPE's base theta
    rope_scaling: tuple | None = None  # RoPE stretched: (method, s, L), see scaled_frequencies

    def __post_init__(self):
        super().__post_init__()
        if self.window is not None:
            object.__setattr__(self, "window", check_positive_int(self.window, "window"))
        object.__setattr__(self, "rope_base", check_number(self.rope_base, "rope_base",
                                                           "(1, inf)"))
        object.__setattr__(self, "rope_scaling", check_rope_scaling(self.rope_scaling))
        if self.position != "rope" and (self.rope_base != 10000.0 or self.rope_scaling):
            raise ValueError(f"rope_base and rope_scaling need position='rope', got "
                             f"position={self.position!r}")

    def build(self, rng):
        """The model of this configuration, its weights drawn from `rng`."""
        return RecentDecoder.from_config(self, rng)


class RecentBlock(ModernBlock):
    """ModernBlock with any of the new pieces: each replaces one part, after ModernBlock has
    drawn its own (so with every piece off it is ModernBlock, weight for weight)."""

    def __init__(self, d_model, n_heads, d_ff, rng, *, window=None, qk_norm=False, n_experts=0,
                 top_k=2, balance=0.01, d_latent=None, rope_base=10000.0, rope_scaling=None,
                 **options):
        super().__init__(d_model, n_heads, d_ff, rng, **options)
        attn = self.self_attn
        if getattr(attn, "turns", None) is not None:  # RoPE's table, of this base and scaling
            attn.turns = rope_table(len(attn.turns), attn.d_k, base=rope_base,
                                    scaling=rope_scaling)


class RecentDecoder(DecoderOnly):
    """DecoderOnly (notebook 09) built of RecentBlocks, configured by a RecentConfig."""

    Config, Block = RecentConfig, RecentBlock

    def block_options(self):
        c = self.config
        return {**super().block_options(), "window": c.window, "qk_norm": c.qk_norm,
                "n_experts": c.n_experts, "top_k": c.top_k, "balance": c.balance,
                "d_latent": c.d_latent, "rope_base": c.rope_base,
                "rope_scaling": c.rope_scaling}

    forgotten = 0  # set by decode: the oldest keys a WindowCache no longer holds

    def kv_caches(self):
        """One cache per block for cached decoding: WindowCaches with sliding-window attention
        (memory bounded by the window), else KVCaches."""
        if self.config.window is None:
            return super().kv_caches()
        return [WindowCache(window=self.config.window) for _ in self.decoder.layers]

    def decode(self, tokens, kv_caches=None):
        """DecoderOnly.decode. After a WindowCache has forgotten its oldest keys, the blocks read
        only the keys it holds and the new ones: the mask keeps only their columns."""
        caches = kv_caches if isinstance(kv_caches, list) else []
        windows = [c.window for c in caches if isinstance(c, WindowCache)]
        if windows and (len(windows) != len(caches) or set(windows) != {self.config.window}):
            raise ValueError(f"kv_caches must be one WindowCache of window={self.config.window} "
                             f"per block (kv_caches()), got windows {windows}")
        self.forgotten = caches[0].forgotten if windows else 0
        try:
            return super().decode(tokens, kv_caches)
        finally:
            self.forgotten = 0

    def mask(self, T):
        """The blocks' mask for T positions, True = blocked: the causal mask, or the band of
        sliding_window_mask; without the columns of the keys forgotten (decode)."""
        if self.config.window is None:
            return causal_mask(T)
        return sliding_window_mask(T, self.config.window)[:, self.forgotten:]
