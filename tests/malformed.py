"""Malformed calls to the public functions of modern.py, lm.py, decoding.py, training.py,
translation.py and the data loaders, each with the argument it gets wrong (used by tests/test_malformed_calls.py).

Every call must raise a ValueError or TypeError whose message names that argument ("good"); a
call that returns is "silent", one that raises anything else, or a message that names something
else, is "unclear". `python -m tests.malformed` prints the count of each and every call that is
not good (the figures of issue 29, before and after).
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.data import (
    LM_MANIFEST,
    LM_MODEL,
    MULTI30K,
    REVERSE_MANIFEST,
    REVERSE_RUNS,
    SHAKESPEARE,
    load_models,
    load_multi30k,
    load_reverse_model,
    load_runs,
    load_shakespeare,
)
from helpers.decoding import KVCache, generate
from helpers.lm import (
    AdamW,
    Characters,
    Recipe,
    bigram_loss,
    cosine_schedule,
    estimate_loss,
    head_pattern_shares,
    known_word_share,
    lm_model,
    next_token_probabilities,
    sampler,
    speaker_line_share,
    split,
    split_loss,
    train_lm,
    unigram_loss,
    windows,
    write,
)
from helpers.modern import (
    DecoderOnly,
    DecoderOnlyConfig,
    GroupedQueryAttention,
    ModernBlock,
    RMSNorm,
    SwiGLU,
    attention_traffic,
    flash_attention,
    llama_hidden,
    rope,
    rotations,
    sigmoid,
    swiglu_hidden,
)
from helpers.training import (
    Adam,
    attention_backward,
    clip_by_global_norm,
    cross_entropy,
    embedding_backward,
    first_below,
    gradient_check,
    linear_backward,
    log_softmax,
    lrate,
    lrate_linear_decay,
    softmax_backward,
    sum_rows,
    train,
)
from helpers.transformer import FeedForward, LayerNorm, MultiHeadAttention, Transformer
from helpers.translation import (
    Vocabulary,
    average_checkpoints,
    beam_search,
    beam_step,
    bleu,
    bpe_step,
    cross_attention,
    learn_bpe,
    length_batches,
    pad,
    segment,
    translate,
    words,
)


@dataclass(frozen=True)
class Call:
    label: str  # what is wrong, e.g. "rope(start=0.5)"
    argument: str  # the name the error message must contain
    call: Callable[[], object]


def names(message: str, argument: str) -> bool:
    """Whether `message` names `argument`: at the start, or after a space, a parenthesis or a
    quote (or a "/": a file's name in its path), followed by a space, "=", ":", "'", "," or the
    end (so "x" matches no word with an x)."""
    return re.search(rf"(^|[\s('\"/]){re.escape(argument)}(=| |:|'|,|\)|$)", message) is not None


def classify(call: Call) -> tuple[str, str]:
    """("good" | "silent" | "unclear", what happened)."""
    try:
        result = call.call()
    except (ValueError, TypeError) as error:
        if names(str(error), call.argument) and "unexpected keyword" not in str(error):
            return "good", f"{type(error).__name__}: {error}"
        return "unclear", f"{type(error).__name__} not naming {call.argument}: {error}"
    except Exception as error:  # noqa: BLE001 - anything else is what we count
        return "unclear", f"{type(error).__name__}: {error}"
    return "silent", f"returned {result!r:.80}"


def rng():
    return np.random.default_rng(0)


# Values that are not a number, not a count or not a flag, with what each is wrong for.
NOT_NUMBERS = [float("nan"), float("inf"), "1", None, True, 1j, [1.0]]
NOT_COUNTS = [0, -1, 1.5, 2.0, True, "3", None, np.float64(2)]
NOT_FLAGS = ["no", "", 1, 0, None, np.int64(1)]
NOT_REAL_ARRAYS = [np.ones((2, 8), complex), np.array([["a"] * 8]), np.ones((2, 8), bool)]

CALLS: list[Call] = []


def bad(label: str, argument: str, build: Callable, values) -> None:
    """One Call per value: build(value) must refuse it, naming `argument`."""
    for value in values:
        shown = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))  # no address: the same each run
        CALLS.append(Call(f"{label} {argument}={shown:.30}", argument,
                          lambda value=value: build(value)))


def one(label: str, argument: str, call: Callable) -> None:
    CALLS.append(Call(label, argument, call))


# ── modern.py (notebook 09) ──────────────────────────────────────────────────────────────────

D, H, F, V = 8, 2, 16, 11
X = np.random.default_rng(1).standard_normal((2, 5, D))


def tiny(**options):
    return DecoderOnly(V, rng(), **{"d_model": D, "n_heads": H, "d_ff": F, "n_layers": 1,
                                     "max_len": 12, **options})


bad("RMSNorm", "d_model", lambda v: RMSNorm(v), NOT_COUNTS)
bad("RMSNorm", "eps", lambda v: RMSNorm(D, eps=v), [-1e-5, *NOT_NUMBERS])
bad("RMSNorm", "dtype", lambda v: RMSNorm(D, dtype=v), [None, np.int32, "junk", complex])
bad("RMSNorm.forward", "x", lambda v: RMSNorm(D).forward(v),
    [np.ones((2, 7)), np.ones(()), np.full((1, D), 1e200), *NOT_REAL_ARRAYS])
bad("SwiGLU", "d_ff", lambda v: SwiGLU(D, v, rng()), NOT_COUNTS)
bad("SwiGLU", "d_model", lambda v: SwiGLU(v, F, rng()), NOT_COUNTS[:4])
bad("SwiGLU.forward", "x", lambda v: SwiGLU(D, F, rng()).forward(v),
    [np.ones((2, 7)), *NOT_REAL_ARRAYS])
bad("sigmoid", "a", sigmoid, [np.ones(3, complex), "0.5", np.array(["a"])])
bad("swiglu_hidden", "d_model", swiglu_hidden, NOT_COUNTS[:5])
bad("rope", "start", lambda v: rope(X, start=v), [0.5, 2.0, "1", None, True, np.float32(1)])
bad("rope", "x", rope, [np.ones((4, 7)), np.ones(8), np.ones((2, 8), complex), "x"])
one("rope beyond its table", "table", lambda: rope(X, 10, table=rotations(12, D)))
bad("GroupedQueryAttention", "n_kv_heads",
    lambda v: GroupedQueryAttention(D, H, v, rng()), [0, -1, 3, 1.0, None, True])
bad("GroupedQueryAttention", "rope", lambda v: GroupedQueryAttention(D, H, 1, rng(), rope=v),
    NOT_FLAGS)
bad("GroupedQueryAttention", "max_len",
    lambda v: GroupedQueryAttention(D, H, 1, rng(), max_len=v), NOT_COUNTS[:4])
one("GroupedQueryAttention odd head width with RoPE", "d_model",
    lambda: GroupedQueryAttention(6, 2, 1, rng()))
bad("ModernBlock", "n_kv_heads", lambda v: ModernBlock(D, H, F, rng(), n_kv_heads=v),
    [0, -2, 3, 0.5, "2"])
bad("ModernBlock", "rope", lambda v: ModernBlock(D, H, F, rng(), rope=v), NOT_FLAGS[:4])
bad("ModernBlock", "norm_first", lambda v: ModernBlock(D, H, F, rng(), norm_first=v),
    NOT_FLAGS[:4])
bad("ModernBlock", "dtype", lambda v: ModernBlock(D, H, F, rng(), dtype=v),
    [None, np.int64, "flo"])
bad("ModernBlock", "norm", lambda v: ModernBlock(D, H, F, rng(), norm=v),
    ["RMS", None, ["rms"], 1])
bad("ModernBlock", "ffn", lambda v: ModernBlock(D, H, F, rng(), ffn=v), ["relu6", None, {}])
bad("ModernBlock", "dropout", lambda v: ModernBlock(D, H, F, rng(), dropout=v),
    [1.0, -0.1, float("nan"), "0.1"])
bad("ModernBlock.forward", "x", lambda v: ModernBlock(D, H, F, rng()).forward(v),
    [np.ones((2, 5, 7)), np.ones(D), *NOT_REAL_ARRAYS])
for field in ("vocab", "d_model", "n_heads", "d_ff", "n_layers", "max_len"):
    bad("DecoderOnlyConfig", field, lambda v, f=field: DecoderOnlyConfig(
        **{"vocab": V, "d_model": D, "n_heads": H, f: v}), NOT_COUNTS[:6])
bad("DecoderOnlyConfig", "position", lambda v: DecoderOnlyConfig(V, position=v),
    ["learned", None, ["rope"]])
bad("DecoderOnlyConfig", "tie_output", lambda v: DecoderOnlyConfig(V, tie_output=v),
    NOT_FLAGS[:3])
bad("DecoderOnlyConfig", "norm_first", lambda v: DecoderOnlyConfig(V, norm_first=v),
    NOT_FLAGS[:3])
for field in ("bias", "embed_scale"):
    bad("DecoderOnlyConfig", field, lambda v, f=field: DecoderOnlyConfig(V, **{f: v}),
        NOT_FLAGS[:3])
bad("DecoderOnlyConfig", "norm_eps", lambda v: DecoderOnlyConfig(V, norm_eps=v),
    [-1e-5, float("nan"), "1e-5", None])
bad("DecoderOnlyConfig", "bias", lambda v: DecoderOnlyConfig(V, bias=v, ffn="relu"), [False])
bad("GroupedQueryAttention", "bias", lambda v: GroupedQueryAttention(D, H, 2, rng(), bias=v),
    NOT_FLAGS[:3])
bad("llama_hidden", "multiple_of", lambda v: llama_hidden(64, v), NOT_COUNTS[:4])
bad("llama_hidden", "ffn_dim_multiplier", lambda v: llama_hidden(64, 16, v),
    [0, -1.3, float("nan"), "1.3"])
bad("DecoderOnlyConfig", "dtype", lambda v: DecoderOnlyConfig(V, dtype=v),
    [None, "int32", "complex64"])
bad("DecoderOnly", "rng", lambda v: DecoderOnly(V, v, d_model=D, n_heads=H, d_ff=F),
    [0, None, np.random.RandomState(0)])
bad("DecoderOnly.forward", "tokens", lambda v: tiny().forward(v),
    [np.array([[1, 2, 11]]), np.array([[-1, 2]]), np.array([[1.0, 2.0]]), np.array([1, 2]),
     np.ones((1, 13), int), np.zeros((1, 0), int), np.zeros((0, 3), int)])
bad("DecoderOnly.decode", "kv_caches", lambda v: tiny().decode(np.array([[1, 2]]), v),
    [[KVCache(), KVCache()], [], [KVCache(fixed=True)], [None], KVCache(), "cache"])
bad("DecoderOnly.backward", "d_logits",
    lambda v: (lambda m: (m.forward(np.array([[1, 2, 3]])), m.backward(v)))(tiny()),
    [np.ones((1, 3, V + 1)), np.ones((1, 2, V)), np.ones((3, V))])


def another_prompt():
    """The issue: caches built for one prompt, then a different prompt of the same shape."""
    model, caches = tiny(), [KVCache()]
    model.decode(np.array([[1, 2, 3]]), caches)
    return model.decode(np.array([[4, 5, 6, 7]]), caches)


one("DecoderOnly.decode, caches of another prompt", "tokens", another_prompt)
bad("flash_attention", "K", lambda v: flash_attention(np.ones((3, 4)), v, v, 2, 2),
    [np.ones((0, 4)), np.ones((3, 5)), np.ones(4), np.ones((3, 4), complex)])
bad("flash_attention", "block_q", lambda v: flash_attention(X[0], X[0], X[0], v, 2),
    NOT_COUNTS[:5])
bad("flash_attention", "traffic", lambda v: flash_attention(X[0], X[0], X[0], 2, 2, v),
    [[], "reads", 1])
bad("flash_attention", "version",
    lambda v: flash_attention(X[0], X[0], X[0], 2, 2, version=v), [0, 3, 1.0, "2", True, None])
bad("attention_traffic", "M", lambda v: attention_traffic(64, 16, v), NOT_COUNTS[:5])
bad("attention_traffic", "version", lambda v: attention_traffic(64, 16, 256, v),
    [0, 3, 1.0, "2", True, None])

bad("rotations", "T", lambda v: rotations(v, 8), [-1, 2.5, None])
bad("rotations", "d", lambda v: rotations(4, v), [7, 0, 8.0, None])
bad("rotations", "start", lambda v: rotations(4, 8, v), [0.5, "1"])
bad("DecoderOnly.logits", "x", lambda v: tiny().logits(v), [np.ones((2, 3, D + 1)), np.ones(()),
                                                            np.ones((2, D), complex)])


def after_forward(module, x, d_out, *rest):
    """module.backward(d_out) after a forward of x (and rest)."""
    module.forward(x, *rest)
    return module.backward(d_out)


for label, make in (("RMSNorm", lambda: RMSNorm(D)), ("SwiGLU", lambda: SwiGLU(D, F, rng())),
                    ("LayerNorm", lambda: LayerNorm(D)),
                    ("FeedForward", lambda: FeedForward(D, F, rng())),
                    ("ModernBlock", lambda: ModernBlock(D, H, F, rng()))):
    bad(f"{label}.backward", "d_out", lambda v, make=make: after_forward(make(), X, v),
        [np.ones((2, 5, D + 1)), np.ones((2, 4, D)), np.ones((2, 5, D), complex)])
for label, make in (("MultiHeadAttention", lambda: MultiHeadAttention(D, H, rng())),
                    ("GroupedQueryAttention", lambda: GroupedQueryAttention(D, H, 1, rng()))):
    bad(f"{label}.backward", "d_out", lambda v, make=make: after_forward(make(), X, v, X, X),
        [np.ones((2, 5, D + 1)), np.ones((5, D))])

# ── decoding.py (notebooks 06 and 09) ────────────────────────────────────────────────────────

PROMPT = np.array([[1, 2], [3, 4]])
bad("generate", "steps", lambda v: generate(tiny(), PROMPT, v), [*NOT_COUNTS, 12])
bad("generate", "prompt", lambda v: generate(tiny(), v, 2),
    [np.array([[1, 20]]), np.array([[-1, 2]]), np.array([1, 2]), np.array([[1.5, 2.0]]),
     np.ones((1, 13), int), [["a"]]])
bad("generate", "pick", lambda v: generate(tiny(), PROMPT, 2, pick=v),
    [lambda logits: np.array([15, 0]), lambda logits: np.array([-1, 0]),
     lambda logits: np.zeros(2), lambda logits: np.array([1]), lambda logits: 3, "greedy"])
bad("generate", "stop_id", lambda v: generate(tiny(), PROMPT, 2, stop_id=v),
    [-1, V, 2.0, "2", True])
bad("generate", "use_cache", lambda v: generate(tiny(), PROMPT, 2, use_cache=v), NOT_FLAGS[:3])
bad("generate", "model", lambda v: generate(v, PROMPT, 2),
    [None, "model", RMSNorm(D), Transformer(9, 9, rng(), d_model=D, n_heads=H, d_ff=F,
                                            n_layers=1, max_len=12)])
bad("rope", "table", lambda v: rope(X, table=v), [[[1.0] * 4] * 5, np.ones((12, D // 2)),
                                                   np.ones((12, 3), complex)])
one("KVCache.start, a cache filled without its tokens", "tokens",
    lambda: (lambda c: (c.add(np.ones((1, 1, 2, 4)), np.ones((1, 1, 2, 4)), None),
                        c.start(np.array([[1, 2, 3]]))))(KVCache()))
one("KVCache.start, a prefix that does not continue the cache", "tokens",
    lambda: (lambda c: (c.add(np.ones((1, 1, 2, 4)), np.ones((1, 1, 2, 4)), None),
                        setattr(c, "tokens", np.array([[1, 2]])),
                        c.start(np.array([[1, 3, 4]]))))(KVCache()))

# ── training.py (notebook 07) ────────────────────────────────────────────────────────────────

LOGITS = np.random.default_rng(2).standard_normal((2, 3, 5))
TARGETS = np.array([[0, 1, 2], [3, 4, 0]])
bad("cross_entropy", "targets", lambda v: cross_entropy(LOGITS, v),
    [np.array([[0, 1, 2], [3, 4, -1]]), np.array([[0, 1, 2], [3, 4, 5]]), np.zeros((2, 3)),
     np.zeros((2, 4), int), np.zeros(3, int)])
one("cross_entropy, an empty batch", "targets",
    lambda: cross_entropy(np.zeros((0, 5)), np.zeros(0, int)))
one("cross_entropy, every target ignored", "targets",
    lambda: cross_entropy(LOGITS, np.zeros((2, 3), int), ignore_id=0))
bad("cross_entropy", "label_smoothing", lambda v: cross_entropy(LOGITS, TARGETS,
                                                                label_smoothing=v),
    [1.0, -0.1, *NOT_NUMBERS])
bad("cross_entropy", "logits", lambda v: cross_entropy(v, TARGETS),
    [LOGITS.astype(complex), np.ones((2, 3, 5), bool)])
bad("cross_entropy", "ignore_id", lambda v: cross_entropy(LOGITS, TARGETS, ignore_id=v),
    ["0", 0.5, [0]])
bad("lrate", "d_model", lambda v: lrate(10, v, 4000), [-4, 0, *NOT_NUMBERS])
bad("lrate", "warmup", lambda v: lrate(10, 512, v), [-4, 0, *NOT_NUMBERS])
bad("lrate", "factor", lambda v: lrate(10, 512, 4000, v), [-1.0, 0, *NOT_NUMBERS[:5]])
bad("lrate", "step", lambda v: lrate(v, 512, 4000), [0, -1, np.array([1, 0]), float("nan"),
                                                     np.array([1j]), "1"])
bad("lrate_linear_decay", "total", lambda v: lrate_linear_decay(10, 512, 100, v),
    [100, 50, float("nan"), "600", None])
bad("lrate_linear_decay", "warmup", lambda v: lrate_linear_decay(10, 512, v, 600),
    [0, -1, float("nan"), None])
bad("clip_by_global_norm", "max_norm", lambda v: clip_by_global_norm({"w": np.ones(3)}, v),
    [0, -1.0, float("inf"), float("nan"), "2", True])
PARAMS = {"w": np.ones((2, 3)), "b": np.zeros(3)}
bad("Adam", "beta1", lambda v: Adam(PARAMS, beta1=v), [1.0, -0.1, 1.5, *NOT_NUMBERS[:5]])
bad("Adam", "beta2", lambda v: Adam(PARAMS, beta2=v), [1.0, -0.5, *NOT_NUMBERS[:5]])
bad("Adam", "eps", lambda v: Adam(PARAMS, eps=v), [0.0, -1e-9, *NOT_NUMBERS[:5]])
bad("Adam", "params", lambda v: Adam(v), [[np.ones(3)], {"w": [1.0, 2.0]},
                                        {"w": np.ones(3, int)}, None])
bad("Adam.step", "lr", lambda v: Adam({"w": np.ones(3)}).step({"w": np.ones(3)}, v),
    [-1.0, *NOT_NUMBERS])
bad("Adam.step", "grads", lambda v: Adam({"w": np.ones(3)}).step(v, 0.1),
    [{"v": np.ones(3)}, {"w": np.ones(4)}, {}, [np.ones(3)]])
bad("AdamW", "weight_decay", lambda v: AdamW(PARAMS, weight_decay=v), [-0.1, *NOT_NUMBERS])
bad("AdamW.step", "lr", lambda v: AdamW({"w": np.ones((2, 2))}).step({"w": np.ones((2, 2))}, v),
    [-1.0, float("nan"), None])


def train_with(**options):
    model = tiny()
    ids = np.random.default_rng(3).integers(0, V, (2, 6))

    def batches(step):
        return (ids[:, :-1],), ids[:, 1:]
    arguments = {"batches": batches, "loss": cross_entropy, "schedule": lambda step: 1e-3,
                 "steps": 3, **options}
    return train(model, **arguments)


P = np.full((2, 3), 1 / 3)
bad("softmax_backward", "d_p", lambda v: softmax_backward(P, v), [np.ones((2, 4)), np.ones(3),
                                                                   P.astype(complex)])
QKV = np.ones((2, 3, 4))
WEIGHTS = np.full((2, 3, 3), 1 / 3)
bad("attention_backward", "d_out", lambda v: attention_backward(QKV, QKV, QKV, WEIGHTS, v),
    [np.ones((2, 3, 5)), np.ones((3, 4))])
bad("linear_backward", "d_y", lambda v: linear_backward(np.ones((2, 3, 4)), np.ones((4, 5)), v),
    [np.ones((2, 3, 4)), np.ones((2, 5)), np.ones((2, 3, 5), complex)])
bad("sum_rows", "a", sum_rows, [np.float64(1.0), np.ones(3, complex)])
bad("log_softmax", "logits", log_softmax, [np.ones((2, 0)), np.ones(3, complex), np.float64(1.0)])
bad("embedding_backward", "tokens", lambda v: embedding_backward(np.ones((5, 4)), v,
                                                                 np.ones((2, 3, 4)), 2.0),
    [np.array([[0, 1, 5], [0, 1, 2]]), np.array([[0, 1, -1], [0, 1, 2]]), np.ones((2, 3))])
bad("embedding_backward", "d_x", lambda v: embedding_backward(np.ones((5, 4)),
                                                              np.zeros((2, 3), int), v, 2.0),
    [np.ones((2, 3, 5)), np.ones((2, 4))])


def transformer_backward(d_logits):
    model = Transformer(9, 9, rng(), d_model=D, n_heads=H, d_ff=F, n_layers=1, max_len=12)
    model.forward(np.array([[3, 4, 5]]), np.array([[1, 4, 5, 6]]))
    return model.backward(d_logits)


bad("Transformer.backward", "d_logits", transformer_backward,
    [np.ones((1, 4, 10)), np.ones((1, 3, 9)), np.ones((4, 9))])
bad("gradient_check", "grads", lambda v: gradient_check(lambda: 0.0, {"w": np.ones(2)}, v),
    [{"v": np.ones(2)}, [np.ones(2)]])
bad("train", "steps", lambda v: train_with(steps=v), NOT_COUNTS)
bad("train", "eval_every", lambda v: train_with(eval_every=v), NOT_COUNTS[:6])
bad("train", "clip", lambda v: train_with(clip=v), [0, -1.0, float("nan"), "1", True])
bad("train", "rng", lambda v: train_with(rng=v), [0, "rng", np.random.RandomState(0)])
bad("train", "batches", lambda v: train_with(batches=v), [None, [((1,), 2)]])
bad("train", "schedule", lambda v: train_with(schedule=v), [1e-3, None])
bad("train", "callback", lambda v: train_with(callback=v), ["print", 3])
bad("train", "evaluate", lambda v: train_with(evaluate=v), [{"val": 1.0}])
bad("gradient_check", "eps", lambda v: gradient_check(lambda: 0.0, {"w": np.ones(2)},
                                                      {"w": np.ones(2)}, eps=v),
    [0.0, -1e-6, float("nan"), "1e-6"])
bad("gradient_check", "max_entries", lambda v: gradient_check(
    lambda: 0.0, {"w": np.ones(2)}, {"w": np.ones(2)}, max_entries=v, rng=rng()),
    [0, -1, 1.5])
bad("first_below", "window", lambda v: first_below([1.0] * 20, 0.5, v), NOT_COUNTS[:5])
bad("first_below", "level", lambda v: first_below([1.0] * 20, v), [float("nan"), "1", None])

# ── lm.py (notebook 10) ──────────────────────────────────────────────────────────────────────

IDS = np.random.default_rng(4).integers(0, V, 200)
CHARS = Characters("hello, world\n")
bad("Characters", "text", Characters, ["", None, 3, ["a", "b"]])
bad("Characters.decode", "ids", CHARS.decode, [[-1], [len(CHARS)], [1.5], ["a"]])
bad("Characters.encode", "text", CHARS.encode, [None, 3, ["h"], "héllo"])
bad("split", "train_fraction", lambda v: split(IDS, v), [1.5, 0.0, 1.0, -0.5, *NOT_NUMBERS])
bad("split", "ids", lambda v: split(v, 0.9), [np.arange(1), np.ones((10, 2)), []])
bad("windows", "context", lambda v: windows(IDS, rng(), 4, v), [0, -3, 200, 500, 2.0, None])
bad("windows", "batch", lambda v: windows(IDS, rng(), v, 8), NOT_COUNTS[:6])
bad("windows", "rng", lambda v: windows(IDS, v, 4, 8), [0, None, "rng"])
bad("windows", "data", lambda v: windows(v, rng(), 4, 8), [np.arange(8), np.ones((20, 2))])
bad("unigram_loss", "vocab", lambda v: unigram_loss(IDS, IDS, v), [0, -1, 2.5, None])
one("unigram_loss, ids beyond the vocabulary", "train_ids", lambda: unigram_loss(IDS, IDS, 5))
bad("unigram_loss", "val_ids", lambda v: unigram_loss(IDS, v, V),
    [np.array([-1]), np.array([], int), np.array([V]), np.array([0.5]), np.ones((2, 2), int)])
bad("unigram_loss", "train_ids", lambda v: unigram_loss(v, IDS, V),
    [np.array([-3, 1]), np.array([], int), np.array(["a"])])
bad("bigram_loss", "val_ids", lambda v: bigram_loss(IDS, v, V),
    [np.array([1]), np.array([-1, 2]), np.array([0, V])])
bad("bigram_loss", "vocab", lambda v: bigram_loss(IDS, IDS, v), [0, None])
one("bigram_loss, ids beyond the vocabulary", "train_ids", lambda: bigram_loss(IDS, IDS, 3))
ROW = np.random.default_rng(5).standard_normal((2, 6))
bad("next_token_probabilities", "temperature",
    lambda v: next_token_probabilities(ROW, v), [0.0, -1.0, 1e-309, *NOT_NUMBERS])
bad("next_token_probabilities", "top_k", lambda v: next_token_probabilities(ROW, top_k=v),
    NOT_COUNTS[:6])
bad("next_token_probabilities", "logits", lambda v: next_token_probabilities(v),
    [np.full((1, 6), np.nan), ROW + 1j, np.full((1, 3), -np.inf), np.array([[np.inf, 0.0]]),
     "logits"])
bad("sampler", "rng", lambda v: sampler(v), [0, None])
bad("sampler", "temperature", lambda v: sampler(rng(), v), [0.0, float("nan"), "1"])
bad("sampler", "top_k", lambda v: sampler(rng(), top_k=v), [0, 2.5])
bad("sampler's pick", "logits", lambda v: sampler(rng())(v),
    [np.zeros(6), np.zeros((1, 2, 6)), np.full((1, 6), np.nan), np.zeros((1, 6), complex)])
bad("write", "n", lambda v: write(tiny(), PROMPT, v), NOT_COUNTS[:6])
bad("write", "context", lambda v: write(tiny(), PROMPT, 4, context=v), [1, 13, 4.0, "8"])
bad("write", "prompt_ids", lambda v: write(tiny(), v, 4), [np.array([1, 2]),
                                                          np.array([[1, V]])])
bad("known_word_share", "vocabulary", lambda v: known_word_share("the other", v),
    ["the", ["the"], None])
bad("known_word_share", "text", lambda v: known_word_share(v, {"the"}), [None, ["the"], 3])
bad("speaker_line_share", "text", speaker_line_share, [None, 3, ["A:"]])
bad("cosine_schedule", "peak", lambda v: cosine_schedule(v, 10, 100, 0.0), [0.0, -1e-3,
                                                                           *NOT_NUMBERS[:5]])
bad("cosine_schedule", "floor", lambda v: cosine_schedule(1e-3, 10, 100, v),
    [-1e-4, 2e-3, float("nan")])
bad("cosine_schedule", "total", lambda v: cosine_schedule(1e-3, 10, v, 0.0), [10, 5, 100.0])
bad("cosine_schedule", "warmup", lambda v: cosine_schedule(1e-3, v, 100, 0.0), [-1, 2.5, None])
bad("cosine_schedule's rate", "it", lambda v: cosine_schedule(1e-3, 10, 100, 1e-4)(v),
    [-1, -20, 0.5, "3"])
bad("estimate_loss", "context", lambda v: estimate_loss(tiny(), IDS, rng(), context=v),
    [13, 0, 2.0])
bad("estimate_loss", "batches", lambda v: estimate_loss(tiny(), IDS, rng(), batches=v),
    [0, -1, 1.5])
bad("split_loss", "data", lambda v: split_loss(tiny(), v, context=8),
    [np.arange(5), np.array([], int), np.array([0, 1, V] * 5), np.ones((4, 4), int)])
bad("split_loss", "context", lambda v: split_loss(tiny(), IDS, context=v), [0, 13, 1.5])
bad("split_loss", "rows", lambda v: split_loss(tiny(), IDS, context=8, rows=v), [0, -2, None])
for field, values in {"steps": NOT_COUNTS[:6], "batch": [0, 1.5], "context": [0, -1],
                      "eval_every": [0, -5, 2.5], "warmup": [-1, 2000, 0.5],
                      "peak": [0.0, float("nan"), "1e-3"], "floor": [-1.0, 1.0],
                      "beta2": [1.0, -0.1], "weight_decay": [-0.1, float("inf")],
                      "clip": [0.0, -1.0, "1"]}.items():
    bad("Recipe", field, lambda v, f=field: Recipe(**{f: v}), values)
SMALL = Recipe(steps=2, batch=2, context=8, eval_every=1, warmup=0)
bad("train_lm", "recipe", lambda v: train_lm(tiny(), IDS, IDS, v), [None, {"steps": 2}])
one("train_lm, a context longer than the model's", "recipe.context",
    lambda: train_lm(tiny(), IDS, IDS, Recipe(steps=2, context=13, warmup=0)))
bad("train_lm", "train_ids", lambda v: train_lm(tiny(), v, IDS, SMALL),
    [np.arange(5), IDS + V, IDS - V, IDS.reshape(20, 10)])
bad("train_lm", "val_ids", lambda v: train_lm(tiny(), IDS, v, SMALL), [np.arange(3), IDS * 1.0])
bad("train_lm", "seed", lambda v: train_lm(tiny(), IDS, IDS, SMALL, seed=v), [-1, 0.5, "0"])
bad("train_lm", "callback", lambda v: train_lm(tiny(), IDS, IDS, SMALL, callback=v), ["plot"])
bad("lm_model", "config", lambda v: lm_model(v), [None, {"vocab": 65}, 65])
bad("head_pattern_shares", "weights", lambda v: head_pattern_shares(v, "abc"),
    [np.ones((3, 4)), np.ones(3), np.ones((3, 3), complex)])
bad("head_pattern_shares", "text", lambda v: head_pattern_shares(np.ones((3, 3)), v),
    [None, ["a", "b", "c"], 3])

# ── translation.py (notebook 11) ─────────────────────────────────────────────────────────────

TRANSLATOR = Transformer(13, 13, rng(), d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=12)
SOURCE = np.array([[5, 6, 7, 2]])
VOCAB = Vocabulary.learn({"low": 5, "lower": 2, "newest": 6}, 4)
bad("words", "sentence", words, [3, None, ["a"], b"bytes"])
bad("bpe_step", "spelled", bpe_step, [{("a",): 1}, {}])
bad("learn_bpe", "word_counts", lambda v: learn_bpe(v, 3),
    ["low lower", {"a b": 1}, {"": 1}, {"ab": 0}, {"ab": 1.5}, {3: 1}, None])
bad("learn_bpe", "n_merges", lambda v: learn_bpe({"ab": 2}, v), [-1, 1.5, "3", None, True])
bad("segment", "word", lambda v: segment(v, {}), ["", 3, None])
bad("Vocabulary.encode", "sentence", VOCAB.encode, [3, None])
bad("Vocabulary.decode", "ids", VOCAB.decode, [[len(VOCAB)], [-1], [1.5], "ab"])
bad("length_batches", "src_lengths", lambda v: length_batches(v, [3, 4], 10),
    [[3], [0, 4], [1.5, 2.0], [[3, 4]]])
bad("length_batches", "max_tokens", lambda v: length_batches([3, 4], [3, 4], v),
    [0, 1.5, None, "10"])
bad("pad", "sequences", pad, [[], [[1], []]])
bad("beam_step", "log_p", lambda v: beam_step(v, np.zeros((2, 9)), 2, 3),
    [np.zeros(3), np.zeros((2, 1)), np.zeros(5)])
bad("beam_step", "log_p", lambda v: beam_step(np.zeros(2), v, 2, 3), [np.zeros((2, 4)), np.zeros(9)])
bad("beam_search", "beam", lambda v: beam_search(TRANSLATOR, SOURCE, 1, 2, 5, beam=v),
    [0, 1.5, 6, None])
bad("beam_search", "alpha", lambda v: beam_search(TRANSLATOR, SOURCE, 1, 2, 5, alpha=v),
    [-0.5, float("nan"), "0.6"])
bad("beam_search", "max_steps", lambda v: beam_search(TRANSLATOR, SOURCE, 1, 2, v),
    [0, 13, 2.5])
bad("beam_search", "use_cache", lambda v: beam_search(TRANSLATOR, SOURCE, 1, 2, 5, use_cache=v),
    NOT_FLAGS)
bad("beam_search", "eos_id", lambda v: beam_search(TRANSLATOR, SOURCE, 1, v, 5), [13, -1, 2.0])
bad("beam_search", "model", lambda v: beam_search(v, SOURCE, 1, 2, 5), [None, "model"])
bad("beam_search", "src", lambda v: beam_search(TRANSLATOR, v, 1, 2, 5),
    [np.array([[13]]), np.array([5, 6]), np.array([[0.5]])])
bad("translate", "sentences", lambda v: translate(TRANSLATOR, VOCAB, v), ["Ein Hund."])
bad("translate", "sentence", lambda v: translate(TRANSLATOR, VOCAB, v), [[3], [None]])
bad("bleu", "hypotheses", lambda v: bleu(v, ["a b"]), [["a", "b"], [], "a b"])
bad("average_checkpoints", "checkpoints", average_checkpoints,
    [[], [{"w": np.zeros(2)}, {"w": np.zeros(3)}], [{"w": np.zeros(2)}, {"v": np.zeros(2)}]])
bad("cross_attention", "model", lambda v: cross_attention(v, SOURCE, SOURCE), [None, 3])
bad("load_multi30k", "split", load_multi30k, ["dev", "test", None])
for name in ("val.de.gz", "val.en.gz"):
    def altered(name=name):
        with tempfile.TemporaryDirectory() as folder:
            for other in ("val.de.gz", "val.en.gz"):
                data = (MULTI30K / other).read_bytes()
                with open(f"{folder}/{other}", "wb") as f:
                    f.write(data[:-5] if other == name else data)
            return load_multi30k("val", Path(folder))
    one(f"load_multi30k, a truncated {name}", name, altered)


# ── the data loaders (helpers/data.py) ───────────────────────────────────────────────────────


def broken(name: str, data: bytes, load: Callable):
    """load(path) of a file `name` holding `data`, in a fresh temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/{name}"
        with open(path, "wb") as f:
            f.write(data)
        return load(path)


TEXT = SHAKESPEARE.read_bytes()
for label, data in (("truncated", TEXT[:len(TEXT) // 2]), ("not gzip", b"First Citizen:"),
                    ("altered", gzip.compress(gzip.decompress(TEXT)[:-1] + b"?")),
                    ("empty", b"")):
    one(f"load_shakespeare, a {label} file", "text.gz",
        lambda data=data: broken("text.gz", data, load_shakespeare))
NPZ = LM_MODEL.read_bytes()
for label, data in (("truncated", NPZ[:len(NPZ) // 3]), ("not a zip", b"\x93NUMPY"),
                    ("altered", NPZ[:-9] + bytes(9)), ("empty", b"")):
    one(f"load_models, a {label} .npz", "lm.npz",
        lambda data=data: broken("lm.npz", data, lambda p: load_models(p, LM_MANIFEST, "make")))
MANIFEST = json.loads(LM_MANIFEST.read_text())
for label, data in (("not JSON", b"{'sha256': 1"), ("a list", b"[]"),
                    ("without sha256", json.dumps({**MANIFEST, "sha256": None}).encode()),
                    ("without models", json.dumps({**MANIFEST, "models": 3}).encode()),
                    ("of an unknown kind", json.dumps({**MANIFEST, "models": {
                        "": {"kind": "GPT", "config": {}}}}).encode()),
                    ("of a bad config", json.dumps({**MANIFEST, "models": {
                        "": {"kind": "DecoderOnly", "config": {"vocab": -1}}}}).encode())):
    one(f"load_models, a manifest {label}", "lm.json",
        lambda data=data: broken("lm.json", data, lambda p: load_models(LM_MODEL, p, "make")))
    one(f"load_reverse_model, a manifest {label}", "rev.json",
        lambda data=data: broken("rev.json", data, lambda p: load_reverse_model(manifest=p)))
one("load_runs, a runs file that is not the recorded one", "runs.json",
    lambda: broken("runs.json", b"{}", lambda p: load_runs(p, REVERSE_MANIFEST)))
one("load_runs, a manifest without runs_sha256", "m.json",
    lambda: broken("m.json", b"{}", lambda p: load_runs(REVERSE_RUNS, p)))
bad("load_shakespeare", "path", load_shakespeare, [3, None, 2.5])
bad("load_models", "manifest", lambda v: load_models(LM_MODEL, v, "make"), [None, 3])
bad("load_models", "path", lambda v: load_models(v, LM_MANIFEST, "make"), [None, 3])


if __name__ == "__main__":
    counts: dict[str, int] = {}
    for entry in CALLS:
        kind, what = classify(entry)
        counts[kind] = counts.get(kind, 0) + 1
        if kind != "good":
            print(f"{kind:8s} {entry.label}: {what}"[:200])
    total = len(CALLS)
    print(f"{total} malformed calls: " + ", ".join(f"{counts.get(k, 0)} {k}"
                                                   for k in ("good", "silent", "unclear")))
