"""Exercises of notebook 06: the decoder block with cross-attention, greedy decoding, the
parameter count of a configuration, and the teacher-forced decoder input and labels of a padded
batch (a function the lesson does not show)."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.transformer import (
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    TransformerConfig,
    causal_mask,
    padding_mask,
    softmax,
    transformer_parameter_count,
)
from helpers.translation import batch_arrays

_rng = np.random.default_rng(106)  # the cases are the same on every run and every machine

# ── 06.1 · the decoder block ──────────────────────────────────────────────────────────────────


def decoder_block(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                  tgt_mask, src_mask):
    """Post-LN decoder layer: masked self-attention, cross-attention over memory, feed-forward."""
    y = norm1(y + self_attn(y, y, y, tgt_mask))
    y = norm2(y + cross_attn(y, memory, memory, src_mask))
    return norm3(y + feed_forward(y))


def _block(y, memory, sa, ca, ff, n1, n2, n3, tgt_mask, src_mask, *, self_args=None,
           cross_args=None, order=("self", "cross")):
    """The block with its wiring as parameters: self_args/cross_args(y, memory) -> the attention's
    (query, key, value, mask); `order` of the two attention sub-layers, each with its own norm."""
    self_args = self_args or (lambda h, m: (h, h, h, tgt_mask))
    cross_args = cross_args or (lambda h, m: (h, m, m, src_mask))
    sub = {"self": (lambda h: sa(*self_args(h, memory)), n1),
           "cross": (lambda h: ca(*cross_args(h, memory)), n2)}
    for name in order:
        sublayer, norm = sub[name]
        y = norm(y + sublayer(y))
    return n3(y + ff(y))


def _pre_ln(y, memory, sa, ca, ff, n1, n2, n3, tgt_mask, src_mask):
    h = n1(y)
    y = y + sa(h, h, h, tgt_mask)
    y = y + ca(n2(y), memory, memory, src_mask)
    return y + ff(n3(y))


def _no_residual(y, memory, sa, ca, ff, n1, n2, n3, tgt_mask, src_mask):
    y = n1(sa(y, y, y, tgt_mask))
    y = n2(ca(y, memory, memory, src_mask))
    return n3(ff(y))


def _cross_reads_block_input(y, memory, sa, ca, ff, n1, n2, n3, tgt_mask, src_mask):
    h = n1(y + sa(y, y, y, tgt_mask))
    h = n2(h + ca(y, memory, memory, src_mask))
    return n3(h + ff(h))


def _averaging_attention(query, key, value, mask=None):
    """A toy attention to follow by hand: each query averages the values of the keys it may see.
    One head, with its axis, as in MultiHeadAttention: masks (T_q, T_k) and (B, 1, 1, T_k)
    broadcast against its scores (B, 1, T_q, T_k)."""
    scores = np.zeros(query.shape[:-2] + (1,) + query.shape[-2:-1] + key.shape[-2:-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    return (softmax(scores) @ value[..., None, :, :])[..., 0, :, :]  # (B, T_q, d_model)


def _plus(k):
    def norm(x):
        return x + k
    norm.__name__ = norm.__qualname__ = f"plus_{k}"
    return norm


# Three toy norms that are not linear, |h| + k: |a + b| is not |a| + |b|, so a residual added on
# the wrong side of a norm changes the result (with plus_k, h + k, it does not).
def _abs_plus(k):
    def norm(x):
        return np.abs(x) + k
    norm.__name__ = norm.__qualname__ = f"abs_plus_{k}"
    return norm


def _wired(wrap):
    """The block with each sub-layer wrapped by wrap(h, sublayer, norm) -> the new h."""
    def block(y, memory, sa, ca, ff, n1, n2, n3, tgt_mask, src_mask):
        y = wrap(y, lambda h: sa(h, h, h, tgt_mask), n1)
        y = wrap(y, lambda h: ca(h, memory, memory, src_mask), n2)
        return wrap(y, ff, n3)
    return block


def _nonlinear_case():
    y = np.array([[[1.0], [-3.0]]])  # (B=1, T=2, d_model=1)
    memory = np.array([[[-10.0], [20.0]]])  # (B=1, S=2, d_model=1)
    src_mask = np.array([[[[False, True]]]])  # (B, 1, 1, S): memory position 1 is padding
    return Case("by hand, with toy norms that are not linear: the same attentions, "
                "feed_forward(h) = -2h, norm_k(h) = |h| + k; y = [1, -3], memory = [-10, 20] with "
                "position 1 padded -> [12, 10]",
                (y, memory, _averaging_attention, _averaging_attention, lambda x: -2 * x,
                 _abs_plus(1), _abs_plus(2), _abs_plus(3), causal_mask(2), src_mask))


def _toy_case():
    y = np.array([[[1.0], [3.0]]])  # (B=1, T=2, d_model=1)
    memory = np.array([[[10.0], [20.0]]])  # (B=1, S=2, d_model=1)
    src_mask = np.array([[[[False, True]]]])  # (B, 1, 1, S): memory position 1 is padding
    return Case("toy sub-layers, by hand: each attention averages the values it may see, "
                "feed_forward doubles, norm_k adds k; y = [1, 3], memory = [10, 20] with "
                "position 1 padded -> [48, 57]",
                (y, memory, _averaging_attention, _averaging_attention, lambda x: 2 * x,
                 _plus(1), _plus(2), _plus(3), causal_mask(2), src_mask))


_D_MODEL, _N_HEADS, _D_FF = 8, 2, 16
_SELF = MultiHeadAttention(_D_MODEL, _N_HEADS, _rng)
_CROSS = MultiHeadAttention(_D_MODEL, _N_HEADS, _rng)
_FFN = FeedForward(_D_MODEL, _D_FF, _rng)
_NORMS = tuple(LayerNorm(_D_MODEL) for _ in range(3))
for _norm in _NORMS:  # three different LayerNorms, so that using the wrong one shows
    _norm.gamma = 1.0 + 0.5 * _rng.normal(size=_D_MODEL)
    _norm.beta = 0.5 * _rng.normal(size=_D_MODEL)
_PARTS = (_SELF.forward, _CROSS.forward, _FFN.forward, *(n.forward for n in _NORMS))


def _block_case(label, B, T, tgt_mask, src_mask):
    y, memory = _rng.normal(size=(B, T, _D_MODEL)), _rng.normal(size=(B, T, _D_MODEL))
    return Case(label, (y, memory, *_PARTS, tgt_mask, src_mask))


_TGT_PADDED = causal_mask(3) | padding_mask([3, 2], 3)  # (B=2, 1, 3, 3): causal + target padding

DECODER_BLOCK = Exercise(
    key="06.1", name="decoder_block", reference=decoder_block,
    see="06 §1 · The decoder block",
    cases=(
        _toy_case(),
        _nonlinear_case(),
        _block_case("B = 2, T = S = 4, d_model = 8, library sub-layers: the causal mask, and a "
                    "source padding mask (lengths 4 and 2)", 2, 4, causal_mask(4),
                    padding_mask([4, 2], 4)),
        _block_case("B = 2, T = S = 3: the causal mask with target padding (2, 1, 3, 3), a source "
                    "padding mask (lengths 3 and 1)", 2, 3, _TGT_PADDED, padding_mask([3, 1], 3)),
        _block_case("B = 1, T = S = 5: the causal mask, no source mask (src_mask=None)", 1, 5,
                    causal_mask(5), None),
    ),
    mistakes=(
        Mistake("decoder-cross-kv-from-decoder",
                "the cross-attention takes its keys and values from the decoder state y; they "
                "come from the encoder's output: cross_attn(y, memory, memory, src_mask)",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, cross_args=lambda h, m: (h, h, h, p[-1]))),
        Mistake("decoder-cross-query-from-memory",
                "the cross-attention's roles are reversed (queries from memory, keys and values "
                "from the decoder): the queries come from the decoder, the keys and values from "
                "memory",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, cross_args=lambda h, m: (m, h, h, p[-1]))),
        Mistake("decoder-cross-values-from-decoder",
                "the cross-attention's values are the decoder state y; keys and values both come "
                "from memory: cross_attn(y, memory, memory, src_mask)",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, cross_args=lambda h, m: (h, m, h, p[-1]))),
        Mistake("decoder-self-no-causal-mask",
                "the self-attention gets no mask, so every target position sees the later ones; "
                "it takes tgt_mask (the causal mask)",
                "04 §1 · The causal mask: no looking ahead",
                lambda y, m, *p: _block(y, m, *p, self_args=lambda h, m: (h, h, h, None))),
        Mistake("decoder-cross-causal-mask",
                "the cross-attention gets the causal mask tgt_mask; its keys are source "
                "positions, so it takes the source padding mask src_mask",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, cross_args=lambda h, m: (h, m, m, p[-2]))),
        Mistake("decoder-masks-swapped",
                "the two masks are swapped: the self-attention takes tgt_mask (causal), the "
                "cross-attention src_mask (source padding)",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, self_args=lambda h, m: (h, h, h, p[-1]),
                                        cross_args=lambda h, m: (h, m, m, p[-2]))),
        Mistake("decoder-cross-no-mask",
                "the cross-attention gets no mask, so padded source positions are read; it takes "
                "src_mask",
                "04 §2 · The padding mask: ignore the filler",
                lambda y, m, *p: _block(y, m, *p, cross_args=lambda h, m: (h, m, m, None))),
        Mistake("decoder-cross-before-self",
                "the cross-attention runs before the masked self-attention; the order is "
                "self-attention, cross-attention, feed-forward",
                "06 §1 · The decoder block",
                lambda y, m, *p: _block(y, m, *p, order=("cross", "self"))),
        Mistake("decoder-cross-uses-self-attn",
                "the cross-attention calls self_attn (the self-attention's weights); it has its "
                "own, cross_attn",
                "06 §1 · The decoder block",
                lambda y, m, sa, ca, *p: _block(y, m, sa, sa, *p)),
        Mistake("decoder-cross-reads-block-input",
                "the cross-attention's query is the block's input y, not the output of the "
                "self-attention sub-layer",
                "06 §1 · The decoder block", _cross_reads_block_input),
        Mistake("decoder-one-norm-reused",
                "norm1 is used after every sub-layer; each sub-layer has its own LayerNorm "
                "(norm1, norm2, norm3)",
                "06 §1 · The decoder block",
                lambda y, m, sa, ca, ff, n1, n2, n3, *k: decoder_block(y, m, sa, ca, ff, n1, n1,
                                                                       n1, *k)),
        Mistake("decoder-pre-ln",
                "this is Pre-LN (y + Sublayer(LN(y))); the paper's block, asked here, is Post-LN: "
                "y = LN(y + Sublayer(y))",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN", _pre_ln),
        Mistake("decoder-no-residual",
                "the sub-layers have no residual connection: each LayerNorm gets Sublayer(y), "
                "not y + Sublayer(y)",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _no_residual),
        Mistake("decoder-norm-then-add",
                "each norm is applied to the sub-layer's output before the addition, "
                "y + LN(Sublayer(y)); the paper adds first, then normalises: "
                "LN(y + Sublayer(y))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _wired(lambda h, sublayer, norm: h + norm(sublayer(h)))),
        Mistake("decoder-add-after-norm",
                "each norm is applied to the sub-layer's input alone and the sub-layer's output "
                "added after it, LN(y) + Sublayer(y); Post-LN normalises the sum: "
                "LN(y + Sublayer(y))",
                "05 §3 · Residual connections and the paper's block, one step per cell",
                _wired(lambda h, sublayer, norm: norm(h) + sublayer(h))),
        Mistake("decoder-norm-overwrites-input",
                "y is replaced by LN(y) before each sub-layer, so the residual adds the "
                "normalised input, LN(y) + Sublayer(LN(y)); the paper's block adds y itself and "
                "normalises the sum: LN(y + Sublayer(y))",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN",
                _wired(lambda h, sublayer, norm: norm(h) + sublayer(norm(h)))),
    ),
)

# ── 06.2 · greedy decoding ────────────────────────────────────────────────────────────────────


def greedy_decode(next_logits, bos_id, eos_id, max_steps):
    """Start from [bos_id]; append the newest position's most likely token until eos_id or
    max_steps new tokens."""
    tokens = [bos_id]
    for _ in range(max_steps):
        logits = next_logits(tokens)  # (len(tokens), vocab)
        tokens.append(int(logits[-1].argmax()))  # the newest position's prediction
        if tokens[-1] == eos_id:
            break
    return tokens


_MAX_CALLS = 100  # no case needs more than 11 calls to next_logits; a loop that ignores
# max_steps and never meets EOS would call it forever: the toy model stops it with this message


def _toy_model(table, position=None):
    """A deterministic next-token "model" for the cases: row i of the logits is table[tokens[i]]
    (plus position[i]), so it sees the prefix up to i only. Any number is a valid token (taken
    mod the vocabulary), so that a wrong decoder gets wrong tokens, not an exception. It counts
    its calls and raises beyond _MAX_CALLS (each case builds a fresh one for every call)."""
    calls = 0

    def next_logits(tokens):
        nonlocal calls
        calls += 1
        if calls > _MAX_CALLS:
            raise RuntimeError(f"next_logits was called {_MAX_CALLS} times: does your loop stop "
                               "after max_steps new tokens?")
        t = np.asarray(tokens, dtype=float).astype(int).ravel() % len(table)
        logits = table[t]
        return logits if position is None else logits + position[np.arange(len(t)) % len(position)]
    return next_logits


def _greedy(choose=lambda logits: int(logits[-1].argmax()), steps=lambda n: n,
            feed=lambda tokens: tokens, stop=True, keep_eos=True, keep_bos=True):
    """Greedy decoding with one of its parts replaced (the mistakes' models)."""
    def decode(next_logits, bos_id, eos_id, max_steps):
        tokens = [bos_id]
        for _ in range(steps(max_steps)):
            token = choose(next_logits(feed(tokens)))
            if stop and token == eos_id:
                tokens += [token] if keep_eos else []
                break
            tokens.append(token)
        return tokens if keep_bos else tokens[1:]
    return decode


_V = 6  # the counting model: the next token is the last one plus 1 (mod 6)
_COUNTING = -((np.arange(_V)[None, :] - np.arange(_V)[:, None] - 1) % _V).astype(float)
_TABLE = (_rng.normal(size=(7, 7)), _rng.normal(size=(12, 7)))  # 7 tokens, 12 positions


def _greedy_case(label, model, bos_id, eos_id, max_steps):
    """A case whose next_logits is built afresh for every call (its call counter starts at 0)."""
    return Case(label, make=lambda: ((_toy_model(*model), bos_id, eos_id, max_steps), {}))


GREEDY_DECODE = Exercise(
    key="06.2", name="greedy_decode", reference=greedy_decode,
    see="06 §4 · Generating: greedy decoding",
    cases=(
        _greedy_case("the counting model (next token = last + 1 mod 6), bos 0, eos 4, max_steps "
                     "10: eos is the 4th new token (by hand: [0, 1, 2, 3, 4])",
                     (_COUNTING,), 0, 4, 10),
        _greedy_case("the counting model, bos 0, eos 4, max_steps 3: eos does not come in time "
                     "(by hand: [0, 1, 2, 3])", (_COUNTING,), 0, 4, 3),
        _greedy_case("a table model over 7 tokens (logits = table[token] + a position term), "
                     "bos 6, eos 2, max_steps 8: eos is the 5th new token", _TABLE, 6, 2, 8),
        _greedy_case("the same model, bos 0, eos 1, max_steps 5: eos does not come in time (it "
                     "would be the 8th new token)", _TABLE, 0, 1, 5),
        _greedy_case("the same model, bos 5, eos 1, max_steps 4: eos is the 4th new token, the "
                     "last one allowed", _TABLE, 5, 1, 4),
        _greedy_case("the same model, bos 2, eos 6, max_steps 5: eos is the first new token",
                     _TABLE, 2, 6, 5),
    ),
    mistakes=(
        Mistake("greedy-first-position",
                "the next token is the argmax of the first position's logits (logits[0]); it is "
                "the newest position's, logits[-1]",
                "06 §4 · Generating: greedy decoding",
                _greedy(choose=lambda logits: int(logits[0].argmax()))),
        Mistake("greedy-wrong-axis",
                "logits[:, -1].argmax() takes the last vocabulary entry's column and returns a "
                "position; the next token is logits[-1].argmax() (logits is (len(tokens), vocab), "
                "no batch axis)",
                "06 §4 · Generating: greedy decoding",
                _greedy(choose=lambda logits: int(logits[:, -1].argmax()))),
        Mistake("greedy-flat-argmax",
                "np.argmax(logits) without an axis is an index into the flattened "
                "(len(tokens) x vocab) array, not a token id; take logits[-1].argmax()",
                "06 §4 · Generating: greedy decoding",
                _greedy(choose=lambda logits: int(np.argmax(logits)))),
        Mistake("greedy-max-not-argmax",
                "the appended token is the largest logit's value (max), not its index (argmax)",
                "06 §4 · Generating: greedy decoding",
                _greedy(choose=lambda logits: logits[-1].max())),
        Mistake("greedy-feeds-newest-token-only",
                "next_logits gets only the newest token; it takes the whole prefix (BOS and "
                "every token so far)",
                "06 §4 · Generating: greedy decoding",
                _greedy(feed=lambda tokens: tokens[-1:])),
        Mistake("greedy-no-eos-stop",
                "decoding does not stop at eos_id: it always runs max_steps steps",
                "06 §4 · Generating: greedy decoding", _greedy(stop=False)),
        Mistake("greedy-ignores-max-steps",
                "decoding stops only at eos_id, so when eos_id comes late more than max_steps "
                "new tokens come back; stop also after max_steps new tokens",
                "06 §4 · Generating: greedy decoding",
                _greedy(steps=lambda n: _MAX_CALLS)),
        Mistake("greedy-eos-dropped",
                "decoding stops at eos_id but leaves it out; the returned tokens end with it",
                "06 §4 · Generating: greedy decoding", _greedy(keep_eos=False)),
        Mistake("greedy-bos-dropped",
                "the returned tokens leave out bos_id; they start with it",
                "06 §4 · Generating: greedy decoding", _greedy(keep_bos=False)),
        Mistake("greedy-one-step-too-many",
                "max_steps + 1 tokens are generated when eos_id does not come; at most "
                "max_steps new tokens (1 + max_steps with BOS)",
                "06 §4 · Generating: greedy decoding", _greedy(steps=lambda n: n + 1)),
        Mistake("greedy-one-step-too-few",
                "max_steps - 1 tokens are generated when eos_id does not come (max_steps counted "
                "with BOS?); max_steps counts the new tokens, so up to 1 + max_steps in all",
                "06 §4 · Generating: greedy decoding", _greedy(steps=lambda n: n - 1)),
    ),
)

# ── 06.3 · the parameter count of a configuration ─────────────────────────────────────────────


def count_parameters(config):
    """The number of parameters of Transformer.from_config(config, rng), from the configuration
    alone: the library's formula (notebook 06 §6), checked there against built models."""
    c = config
    return transformer_parameter_count(c.d_model, c.n_heads, c.d_ff, c.n_layers, c.src_vocab,
                                       c.tgt_vocab, share_embeddings=c.share_embeddings,
                                       tie_output=c.tie_output, norm_first=c.norm_first)


def _count(attention=lambda d, h: 4 * d * d + 4 * d, ffn=lambda d, f: 2 * d * f + f + d,
           norm=lambda d: 2 * d, decoder_attentions=2, decoder_norms=3, layers=lambda n: n,
           final_norm=True, shared_once=True, tied_free=True, output_bias=True, pe=False):
    """The count with one of its parts replaced (the mistakes' models)."""
    def count(c):
        d, n = c.d_model, layers(c.n_layers)
        attn, ff, ln = attention(d, c.n_heads), ffn(d, c.d_ff), norm(d)
        final = ln if c.norm_first and final_norm else 0
        encoder = n * (attn + ff + 2 * ln) + final
        decoder = n * (decoder_attentions * attn + ff + decoder_norms * ln) + final
        shared = c.share_embeddings and shared_once
        embeddings = c.src_vocab * d + (0 if shared else c.tgt_vocab * d)
        output = 0 if c.tie_output and tied_free else (
            d * c.tgt_vocab + (c.tgt_vocab if output_bias else 0))
        return embeddings + encoder + decoder + output + (c.max_len * d if pe else 0)
    return count


_HAND = TransformerConfig(src_vocab=5, tgt_vocab=7, d_model=2, n_heads=1, d_ff=3, n_layers=1,
                          max_len=8)
_COUNTED = "06 §6 · Counting the paper's parameters"

COUNT_PARAMETERS = Exercise(
    key="06.3", name="count_parameters", reference=count_parameters, see=_COUNTED,
    rtol=0.0, atol=0.0,  # a count is exact: off by 7 of 63M is wrong too
    cases=(
        Case("by hand: src_vocab 5, tgt_vocab 7, d_model 2, n_heads 1, d_ff 3, n_layers 1, "
             "Post-LN, separate matrices -> 24 + 49 + 77 + 21 = 171", (_HAND,)),
        Case("src_vocab = tgt_vocab = 11, d_model 16, n_heads 2, d_ff 32, n_layers 3, shared "
             "embeddings, a separate output layer",
             (TransformerConfig(11, 11, d_model=16, n_heads=2, d_ff=32, n_layers=3,
                                share_embeddings=True),)),
        Case("the same, shared and tied (logits = x @ E^T)",
             (TransformerConfig(11, 11, d_model=16, n_heads=2, d_ff=32, n_layers=3,
                                share_embeddings=True, tie_output=True),)),
        Case("src_vocab 13, tgt_vocab 9, d_model 12, n_heads 3, d_ff 20, n_layers 2, Pre-LN "
             "(norm_first=True)",
             (TransformerConfig(13, 9, d_model=12, n_heads=3, d_ff=20, n_layers=2,
                                norm_first=True),)),
        Case("src_vocab 6, tgt_vocab 10, d_model 8, n_heads 4, d_ff 8, n_layers 4, max_len 32, "
             "tied output, separate embeddings",
             (TransformerConfig(6, 10, d_model=8, n_heads=4, d_ff=8, n_layers=4, max_len=32,
                                tie_output=True),)),
        Case("the paper's base model: 37,000 shared and tied tokens, d_model 512, n_heads 8, "
             "d_ff 2048, n_layers 6 (about 63.1M)",
             (TransformerConfig(37_000, 37_000, share_embeddings=True, tie_output=True),)),
    ),
    mistakes=(
        Mistake("params-no-biases",
                "the linear layers' biases are left out (b_q, b_k, b_v, b_o of each attention, "
                "b_1 and b_2 of each feed-forward, b_out): a linear layer d -> m has d·m + m "
                "parameters",
                "02 §1 · Why more than one head",
                _count(attention=lambda d, h: 4 * d * d, ffn=lambda d, f: 2 * d * f,
                       output_bias=False)),
        Mistake("params-no-output-bias",
                "the output layer's bias b_out (tgt_vocab numbers) is left out when the output "
                "is not tied",
                _COUNTED, _count(output_bias=False)),
        Mistake("params-no-layernorm",
                "the LayerNorms' γ and β are left out: each LayerNorm has 2·d_model parameters "
                "(two per encoder block, three per decoder block)",
                "05 §1 · LayerNorm: every position on its own", _count(norm=lambda d: 0)),
        Mistake("params-shared-counted-twice",
                "with share_embeddings=True the one embedding matrix is counted twice, for the "
                "source and for the target",
                _COUNTED, _count(shared_once=False)),
        Mistake("params-tied-output-counted",
                "with tie_output=True the output layer is still counted; it reuses the target "
                "embedding matrix (logits = x @ E^T) and has no bias: 0 parameters of its own",
                _COUNTED, _count(tied_free=False)),
        Mistake("params-no-cross-attention",
                "each decoder block is counted with one attention; it has two, the masked "
                "self-attention and the cross-attention, each 4·d_model² + 4·d_model",
                "06 §1 · The decoder block", _count(decoder_attentions=1)),
        Mistake("params-decoder-two-norms",
                "each decoder block is counted with two LayerNorms, as an encoder block; it has "
                "three, one after each of its three sub-layers",
                "06 §1 · The decoder block", _count(decoder_norms=2)),
        Mistake("params-no-final-norm",
                "with norm_first=True (Pre-LN) the final LayerNorm after the last block of the "
                "encoder and of the decoder is left out (2·d_model each)",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN",
                _count(final_norm=False)),
        Mistake("params-ffn-one-matrix",
                "the feed-forward network is counted as one linear layer, d_model -> d_ff; it "
                "has two, W_1, b_1 (d_model -> d_ff) and W_2, b_2 (d_ff -> d_model)",
                "05 §2 · The position-wise feed-forward network",
                _count(ffn=lambda d, f: d * f + f)),
        Mistake("params-d_ff-assumed-4-d_model",
                "d_ff is taken as 4·d_model (the paper's ratio) instead of config.d_ff",
                "05 §2 · The position-wise feed-forward network",
                _count(ffn=lambda d, f: 2 * d * 4 * d + 4 * d + d)),
        Mistake("params-heads-full-width",
                "each head is counted with its own d_model x d_model projections; the h heads "
                "share one d_model x d_model matrix each for W_q, W_k, W_v (d_k = d_model/h "
                "columns per head), so the count does not depend on n_heads",
                "02 §1 · Why more than one head",
                _count(attention=lambda d, h: 3 * h * (d * d + d) + d * d + d)),
        Mistake("params-one-layer",
                "one block of each kind is counted; the encoder and the decoder have n_layers "
                "blocks each, with their own weights",
                "05 §5 · A stack of blocks, and Post-LN against Pre-LN",
                _count(layers=lambda n: 1)),
        Mistake("params-positional-encoding-counted",
                "the positional-encoding table (max_len x d_model) is counted; the sinusoids "
                "are computed, not learned: no parameters",
                "03 §2 · The sinusoidal encoding", _count(pe=True)),
    ),
)

# ── 06.4 · the decoder's input and labels for teacher forcing ─────────────────────────────────


def decoder_io(targets, bos_id, eos_id, pad_id):
    """(decoder input, labels), each (B, T) with T = the longest target + 1: BOS + tokens and
    tokens + EOS, padded at the end with pad_id, so that input position t predicts label t.
    Notebook 11's batch_arrays builds them from targets that end with EOS; calling it is what
    `check` does not credit here."""
    ended = [[*tokens, eos_id] for tokens in targets]
    _, decoder_input, labels = batch_arrays(ended, ended, range(len(ended)), bos_id, pad_id)
    return decoder_input, labels


def _rows(rows, width, fill, left=False):
    """Lists of ids -> (B, width), filled with `fill` at the end (at the start if left); a row
    longer than width is cut (a learner's list slicing, (row + [fill] * width)[:width])."""
    return np.array([([fill] * (width - len(r)) + r) if left else (r + [fill] * width)[:width]
                     for r in rows])


def _io(input_row=lambda bos, t, eos: [bos, *t], label_row=lambda bos, t, eos: [*t, eos],
        width=lambda longest: longest + 1, pad=lambda pad_id: pad_id, label_pad=None, left=False):
    """decoder_io with one of its parts replaced (the mistakes' models)."""
    def io(targets, bos_id, eos_id, pad_id):
        T, fill = width(max(len(t) for t in targets)), pad(pad_id)
        return (_rows([input_row(bos_id, list(t), eos_id) for t in targets], T, fill, left),
                _rows([label_row(bos_id, list(t), eos_id) for t in targets], T,
                      fill if label_pad is None else label_pad, left))
    return io


def _eos_in_input(targets, bos_id, eos_id, pad_id):
    """BOS + tokens + EOS, padded to longest + 2, then cut into [:, :-1] and [:, 1:]."""
    full = _rows([[bos_id, *t, eos_id] for t in targets], max(map(len, targets)) + 2, pad_id)
    return full[:, :-1], full[:, 1:]


def _eos_after_padding(targets, bos_id, eos_id, pad_id):
    """The tokens padded first, then BOS put before and EOS after the padded rows."""
    padded = _rows([list(t) for t in targets], max(map(len, targets)), pad_id)
    column = np.ones((len(targets), 1), dtype=padded.dtype)
    return (np.concatenate([bos_id * column, padded], axis=1),
            np.concatenate([padded, eos_id * column], axis=1))


def _io_case(label, targets, bos_id, eos_id, pad_id):
    return Case(label, (targets, bos_id, eos_id, pad_id))


_TEACHER = "06 §2 · The whole model"

DECODER_IO = Exercise(
    key="06.4", name="decoder_io", reference=decoder_io, see=_TEACHER,
    outputs=("decoder_input", "labels"), rtol=0.0, atol=0.0,
    cases=(
        _io_case("targets [[5, 6, 7], [8]], bos 1, eos 2, pad 0 (by hand: decoder_input "
                 "[[1, 5, 6, 7], [1, 8, 0, 0]], labels [[5, 6, 7, 2], [8, 2, 0, 0]])",
                 [[5, 6, 7], [8]], 1, 2, 0),
        _io_case("targets [[3, 4], [5, 6, 0, 1], [2]], bos 7, eos 8, pad 9 (the special ids "
                 "at the end of the vocabulary; 0 is a real token here)",
                 [[3, 4], [5, 6, 0, 1], [2]], 7, 8, 9),
        _io_case("targets [[3, 4], [4, 3]], bos 1, eos 2, pad 0 (the same length: no padding)",
                 [[3, 4], [4, 3]], 1, 2, 0),
        _io_case("targets [[], [3, 4, 5]], bos 1, eos 2, pad 0 (an empty target: BOS predicts "
                 "EOS)", [[], [3, 4, 5]], 1, 2, 0),
        _io_case("targets [[6, 6, 6]], bos 1, eos 2, pad 0 (B = 1)", [[6, 6, 6]], 1, 2, 0),
    ),
    mistakes=(
        Mistake("io-swapped",
                "the two are swapped: the decoder reads BOS + tokens, and the labels are "
                "tokens + EOS, the input shifted left by one", _TEACHER,
                lambda *a: decoder_io(*a)[::-1]),
        Mistake("io-labels-are-the-input",
                "the labels are the decoder input itself (BOS + tokens, no shift): position t "
                "would learn to repeat the token it reads; label t is the next token, "
                "tokens + EOS", _TEACHER,
                lambda *a: (decoder_io(*a)[0], decoder_io(*a)[0])),
        Mistake("io-input-is-the-labels",
                "the decoder input is the labels (tokens + EOS, no shift): position t reads the "
                "very token it must predict; the input is BOS + tokens", _TEACHER,
                lambda *a: (decoder_io(*a)[1], decoder_io(*a)[1])),
        Mistake("io-eos-in-input",
                "BOS + tokens + EOS was padded, then cut into [:, :-1] and [:, 1:]: a shorter "
                "target's input then holds its EOS; EOS is only predicted, never read: the "
                "input is BOS + tokens, then pad_id", _TEACHER, _eos_in_input),
        Mistake("io-labels-no-eos",
                "the labels have no EOS (tokens, then padding): the model never learns to stop; "
                "the labels are tokens + EOS", _TEACHER,
                _io(label_row=lambda bos, t, eos: t)),
        Mistake("io-eos-after-padding",
                "EOS is appended after the padded tokens, so a shorter target's EOS sits at the "
                "end, behind its padding; it follows its last token: pad each row after its EOS",
                _TEACHER, _eos_after_padding),
        Mistake("io-eos-assumed-in-targets",
                "the targets are taken to end with EOS already (input = BOS + tokens[:-1], "
                "labels = tokens): here they come without it, so the last token is lost; "
                "input = BOS + tokens, labels = tokens + EOS", _TEACHER,
                _io(input_row=lambda bos, t, eos: [bos, *t[:-1]],
                    label_row=lambda bos, t, eos: t, width=lambda longest: longest)),
        Mistake("io-padded-left",
                "the rows are padded on the left: a shorter target's BOS then sits at a later "
                "position, and its padded queries see no key at all; pad at the end, after "
                "the tokens", "04 §4 · A query with nothing to see: `-inf` or `-1e9`?",
                _io(left=True)),
        Mistake("io-pad-zero",
                "the rows are padded with 0, not pad_id: where pad_id is another id, 0 is a "
                "real token", _TEACHER, _io(pad=lambda pad_id: 0)),
        Mistake("io-labels-padded-minus-100",
                "the labels are padded with -100 (PyTorch's ignore_index), not pad_id: here "
                "both are padded with pad_id, the id the loss is told to ignore",
                "07 §6 · The loss, with label smoothing", _io(label_pad=-100)),
        Mistake("io-one-too-short",
                "T is the longest target's length, so the longest loses its last token from "
                "the input and its EOS from the labels; BOS + tokens has one more: T = longest "
                "+ 1", _TEACHER, _io(width=lambda longest: longest)),
        Mistake("io-one-too-long",
                "T is the longest target + 2 (for BOS and EOS); each of the two arrays adds "
                "only one of them: T = longest + 1", _TEACHER,
                _io(width=lambda longest: longest + 2)),
    ),
)

EXERCISES = (DECODER_BLOCK, GREEDY_DECODE, COUNT_PARAMETERS, DECODER_IO)
