"""Notebook 06's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/decoder.py (its models of the same mistakes): a list of
sub-layers, other names, loops. tests/test_checks.py asserts that the checker names exactly the
mistake each one makes. The tests at the end check what is special here: the hand case, the
reference against the library's DecoderBlock, and the greedy cases' claims.
"""

import numpy as np

from helpers import checks

# ── 06.1 · the decoder block ──────────────────────────────────────────────────────────────────


def _add_norm(x, sublayer, norm):
    return norm(x + sublayer(x))


def cross_kv_from_decoder(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                          tgt_mask, src_mask):
    x = _add_norm(y, lambda t: self_attn(t, t, t, tgt_mask), norm1)
    x = _add_norm(x, lambda t: cross_attn(t, t, t, src_mask), norm2)  # "attention over x again"
    return _add_norm(x, feed_forward, norm3)


def cross_query_from_memory(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                            tgt_mask, src_mask):
    h = norm1(y + self_attn(y, y, y, tgt_mask))
    c = cross_attn(query=memory, key=h, value=h, mask=src_mask)  # memory asks, the decoder answers
    h = norm2(h + c)
    return norm3(h + feed_forward(h))


def cross_values_from_decoder(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                              tgt_mask, src_mask):
    h = norm1(y + self_attn(y, y, y, tgt_mask))
    h = norm2(h + cross_attn(h, memory, h, src_mask))
    return norm3(h + feed_forward(h))


def self_no_causal_mask(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                        tgt_mask, src_mask):
    h = norm1(y + self_attn(y, y, y))  # the mask forgotten
    h = norm2(h + cross_attn(h, memory, memory, src_mask))
    return norm3(h + feed_forward(h))


def cross_causal_mask(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                      tgt_mask, src_mask):
    mask = tgt_mask  # "the decoder's mask", for both attentions
    h = norm1(y + self_attn(y, y, y, mask))
    h = norm2(h + cross_attn(h, memory, memory, mask))
    return norm3(h + feed_forward(h))


def masks_swapped(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                  tgt_mask, src_mask):
    masks = [src_mask, tgt_mask]
    h = y
    for attn, kv, mask, norm in zip([self_attn, cross_attn], [None, memory], masks, [norm1, norm2]):
        source = h if kv is None else kv
        h = norm(h + attn(h, source, source, mask))
    return norm3(h + feed_forward(h))


def cross_no_mask(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                  tgt_mask, src_mask):
    h = norm1(y + self_attn(y, y, y, tgt_mask))
    h = norm2(h + cross_attn(h, memory, memory))
    return norm3(h + feed_forward(h))


def cross_before_self(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                      tgt_mask, src_mask):
    h = norm2(y + cross_attn(y, memory, memory, src_mask))
    h = norm1(h + self_attn(h, h, h, tgt_mask))
    return norm3(h + feed_forward(h))


def cross_uses_self_attn(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                         tgt_mask, src_mask):
    attend = self_attn  # one attention for both sub-layers
    h = norm1(y + attend(y, y, y, tgt_mask))
    h = norm2(h + attend(h, memory, memory, src_mask))
    return norm3(h + feed_forward(h))


def cross_reads_block_input(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                            tgt_mask, src_mask):
    a = self_attn(y, y, y, tgt_mask)
    c = cross_attn(y, memory, memory, src_mask)  # both attentions read the block's input
    h = norm2(norm1(y + a) + c)
    return norm3(h + feed_forward(h))


def one_norm_reused(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                    tgt_mask, src_mask):
    norm = norm1
    h = norm(y + self_attn(y, y, y, tgt_mask))
    h = norm(h + cross_attn(h, memory, memory, src_mask))
    return norm(h + feed_forward(h))


def pre_ln(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
           tgt_mask, src_mask):
    subs = [lambda t: self_attn(t, t, t, tgt_mask), lambda t: cross_attn(t, memory, memory, src_mask),
            feed_forward]
    for sub, norm in zip(subs, [norm1, norm2, norm3]):
        y = y + sub(norm(y))
    return y


def no_residual(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                tgt_mask, src_mask):
    a = norm1(self_attn(y, y, y, tgt_mask))
    b = norm2(cross_attn(a, memory, memory, src_mask))
    return norm3(feed_forward(b))


def norm_then_add(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                  tgt_mask, src_mask):
    y = y + norm1(self_attn(y, y, y, tgt_mask))  # "sub-layer, norm, then the residual"
    y = y + norm2(cross_attn(y, memory, memory, src_mask))
    return y + norm3(feed_forward(y))


def add_after_norm(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                   tgt_mask, src_mask):
    subs = [lambda t: self_attn(t, t, t, tgt_mask), lambda t: cross_attn(t, memory, memory, src_mask),
            feed_forward]
    for sub, norm in zip(subs, [norm1, norm2, norm3]):
        y = norm(y) + sub(y)  # the norm on the residual only
    return y


def norm_overwrites_input(y, memory, self_attn, cross_attn, feed_forward, norm1, norm2, norm3,
                          tgt_mask, src_mask):
    y = norm1(y)
    y = y + self_attn(y, y, y, tgt_mask)
    y = norm2(y)
    y = y + cross_attn(y, memory, memory, src_mask)
    y = norm3(y)
    return y + feed_forward(y)


# ── 06.2 · greedy decoding ────────────────────────────────────────────────────────────────────


def first_position(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    while len(out) <= max_steps:
        nxt = int(np.argmax(next_logits(out)[0]))
        out.append(nxt)
        if nxt == eos_id:
            break
    return out


def wrong_axis(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        nxt = next_logits(out).argmax(axis=0)[-1]  # as in notebook 06's (B, T, vocab) [:, -1]
        out.append(nxt)
        if nxt == eos_id:
            break
    return out


def flat_argmax(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        out.append(np.argmax(next_logits(out)))
        if out[-1] == eos_id:
            break
    return out


def max_not_argmax(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        out.append(np.max(next_logits(out)[-1]))
        if out[-1] == eos_id:
            break
    return out


def feeds_newest_token_only(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        out.append(int(next_logits([out[-1]])[-1].argmax()))  # "the model only needs the last one"
        if out[-1] == eos_id:
            break
    return out


def no_eos_stop(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        out.append(int(next_logits(out)[-1].argmax()))
    return out


def ignores_max_steps(next_logits, bos_id, eos_id, max_steps):
    tokens = [bos_id]
    while tokens[-1] != eos_id:  # "the model says when it is done"
        tokens.append(int(next_logits(tokens)[-1].argmax()))
    return tokens


def eos_dropped(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    for _ in range(max_steps):
        nxt = int(next_logits(out)[-1].argmax())
        if nxt == eos_id:
            break
        out.append(nxt)
    return out


def bos_dropped(next_logits, bos_id, eos_id, max_steps):
    prefix, generated = [bos_id], []
    while len(generated) < max_steps:
        nxt = int(next_logits(prefix + generated)[-1].argmax())
        generated.append(nxt)
        if nxt == eos_id:
            break
    return generated


def one_step_too_many(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    step = 0
    while step <= max_steps:
        out.append(int(next_logits(out)[-1].argmax()))
        step += 1
        if out[-1] == eos_id:
            break
    return out


def one_step_too_few(next_logits, bos_id, eos_id, max_steps):
    out = [bos_id]
    while len(out) < max_steps and out[-1] != eos_id:  # the length counted with BOS
        out.append(int(next_logits(out)[-1].argmax()))
    return out


# ── 06.3 · the parameter count of a configuration ─────────────────────────────────────────────


def _linear(n_in, n_out, bias=True):
    return n_in * n_out + (n_out if bias else 0)


def _learner_count(c, *, bias=True, norms=True, twice=False, tied_counted=False, cross=True,
                   dec_norms=3, final=True, ffn_mats=2, d_ff=None, per_head_full=False,
                   blocks=None, pe=False, out_bias=True):
    """A learner's count, walked through the model part by part, with switches for the ways it
    goes wrong (each WRONG function below sets one)."""
    d = c.d_model
    f = c.d_ff if d_ff is None else d_ff(c)
    if per_head_full:  # "every head has its own W_q, W_k, W_v"
        attn = c.n_heads * 3 * _linear(d, d, bias) + _linear(d, d, bias)
    else:
        attn = 4 * _linear(d, d, bias)
    ffn = _linear(d, f, bias) + (_linear(f, d, bias) if ffn_mats == 2 else 0)
    ln = 2 * d if norms else 0
    n = c.n_layers if blocks is None else blocks
    total = n * (attn + ffn + 2 * ln)  # the encoder
    total += n * ((2 if cross else 1) * attn + ffn + dec_norms * ln)  # the decoder
    if c.norm_first and final:
        total += 2 * ln  # one final LayerNorm per stack
    total += c.src_vocab * d
    if not c.share_embeddings or twice:
        total += c.tgt_vocab * d
    if not c.tie_output or tied_counted:
        total += _linear(d, c.tgt_vocab, bias and out_bias)
    return total + (c.max_len * d if pe else 0)


def wrong_count(**switches):
    """A learner's count_parameters with one of `_learner_count`'s switches set."""
    def count_parameters(config):
        return _learner_count(config, **switches)
    return count_parameters


# ── 06.4 · decoder_io ─────────────────────────────────────────────────────────────────────────


def _pad_rows(rows, T, pad_id):  # a learner's padding: each row then pad_id up to T
    out = np.full((len(rows), T), pad_id)
    for b, row in enumerate(rows):
        out[b, :len(row)] = row
    return out


def io_swapped(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 1
    labels = _pad_rows([[bos_id] + t for t in targets], T, pad_id)  # "the labels start the
    inputs = _pad_rows([t + [eos_id] for t in targets], T, pad_id)  # sentence"
    return inputs, labels


def io_labels_are_the_input(targets, bos_id, eos_id, pad_id):
    x = _pad_rows([[bos_id, *t] for t in targets], max(map(len, targets)) + 1, pad_id)
    return x, x.copy()  # "the model predicts its input"


def io_input_is_the_labels(targets, bos_id, eos_id, pad_id):
    y = _pad_rows([[*t, eos_id] for t in targets], max(map(len, targets)) + 1, pad_id)
    return y.copy(), y


def io_eos_in_input(targets, bos_id, eos_id, pad_id):
    full = _pad_rows([[bos_id] + t + [eos_id] for t in targets], max(map(len, targets)) + 2,
                     pad_id)
    return full[:, :-1], full[:, 1:]  # shift the whole padded sequence


def io_labels_no_eos(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 1
    x = _pad_rows([[bos_id] + t for t in targets], T, pad_id)
    return x, np.concatenate([x[:, 1:], np.full((len(targets), 1), pad_id)], axis=1)  # shifted


def io_eos_after_padding(targets, bos_id, eos_id, pad_id):
    padded = _pad_rows(targets, max(map(len, targets)), pad_id)  # (B, longest)
    B = len(targets)
    return (np.hstack([np.full((B, 1), bos_id), padded]),
            np.hstack([padded, np.full((B, 1), eos_id)]))


def io_eos_assumed_in_targets(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets)  # as if each target ended with EOS
    return (_pad_rows([[bos_id] + t[:-1] for t in targets], T, pad_id),
            _pad_rows(targets, T, pad_id))


def io_padded_left(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 1
    x, y = np.full((len(targets), T), pad_id), np.full((len(targets), T), pad_id)
    for b, t in enumerate(targets):
        x[b, T - len(t) - 1:] = [bos_id] + t  # right-aligned
        y[b, T - len(t) - 1:] = t + [eos_id]
    return x, y


def io_pad_zero(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 1
    x, y = np.zeros((len(targets), T), dtype=int), np.zeros((len(targets), T), dtype=int)
    for b, t in enumerate(targets):
        x[b, :len(t) + 1] = [bos_id] + t
        y[b, :len(t) + 1] = t + [eos_id]
    return x, y


def io_labels_padded_minus_100(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 1
    return (_pad_rows([[bos_id] + t for t in targets], T, pad_id),
            _pad_rows([t + [eos_id] for t in targets], T, -100))  # ignore_index=-100


def io_one_too_short(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets)
    def row(r):
        return (r + [pad_id] * T)[:T]  # cut silently
    return (np.array([row([bos_id] + t) for t in targets]),
            np.array([row(t + [eos_id]) for t in targets]))


def io_one_too_long(targets, bos_id, eos_id, pad_id):
    T = max(len(t) for t in targets) + 2  # "room for BOS and EOS"
    return (_pad_rows([[bos_id] + t for t in targets], T, pad_id),
            _pad_rows([t + [eos_id] for t in targets], T, pad_id))


WRONG = {
    "params-no-biases": wrong_count(bias=False),
    "params-no-output-bias": wrong_count(out_bias=False),
    "params-no-layernorm": wrong_count(norms=False),
    "params-shared-counted-twice": wrong_count(twice=True),
    "params-tied-output-counted": wrong_count(tied_counted=True),
    "params-no-cross-attention": wrong_count(cross=False),
    "params-decoder-two-norms": wrong_count(dec_norms=2),
    "params-no-final-norm": wrong_count(final=False),
    "params-ffn-one-matrix": wrong_count(ffn_mats=1),
    "params-d_ff-assumed-4-d_model": wrong_count(d_ff=lambda c: 4 * c.d_model),
    "params-heads-full-width": wrong_count(per_head_full=True),
    "params-one-layer": wrong_count(blocks=1),
    "params-positional-encoding-counted": wrong_count(pe=True),
    "decoder-cross-kv-from-decoder": cross_kv_from_decoder,
    "decoder-cross-query-from-memory": cross_query_from_memory,
    "decoder-cross-values-from-decoder": cross_values_from_decoder,
    "decoder-self-no-causal-mask": self_no_causal_mask,
    "decoder-cross-causal-mask": cross_causal_mask,
    "decoder-masks-swapped": masks_swapped,
    "decoder-cross-no-mask": cross_no_mask,
    "decoder-cross-before-self": cross_before_self,
    "decoder-cross-uses-self-attn": cross_uses_self_attn,
    "decoder-cross-reads-block-input": cross_reads_block_input,
    "decoder-one-norm-reused": one_norm_reused,
    "decoder-pre-ln": pre_ln,
    "decoder-no-residual": no_residual,
    "decoder-norm-then-add": norm_then_add,
    "decoder-add-after-norm": add_after_norm,
    "decoder-norm-overwrites-input": norm_overwrites_input,
    "greedy-first-position": first_position,
    "greedy-wrong-axis": wrong_axis,
    "greedy-flat-argmax": flat_argmax,
    "greedy-max-not-argmax": max_not_argmax,
    "greedy-feeds-newest-token-only": feeds_newest_token_only,
    "greedy-no-eos-stop": no_eos_stop,
    "greedy-ignores-max-steps": ignores_max_steps,
    "greedy-eos-dropped": eos_dropped,
    "greedy-bos-dropped": bos_dropped,
    "greedy-one-step-too-many": one_step_too_many,
    "greedy-one-step-too-few": one_step_too_few,
    "io-swapped": io_swapped,
    "io-labels-are-the-input": io_labels_are_the_input,
    "io-input-is-the-labels": io_input_is_the_labels,
    "io-eos-in-input": io_eos_in_input,
    "io-labels-no-eos": io_labels_no_eos,
    "io-eos-after-padding": io_eos_after_padding,
    "io-eos-assumed-in-targets": io_eos_assumed_in_targets,
    "io-padded-left": io_padded_left,
    "io-pad-zero": io_pad_zero,
    "io-labels-padded-minus-100": io_labels_padded_minus_100,
    "io-one-too-short": io_one_too_short,
    "io-one-too-long": io_one_too_long,
}


# ── what is special about these exercises ─────────────────────────────────────────────────────


def test_the_hand_case_of_the_decoder_block_gives_48_and_57():
    ex = checks.exercise("06.1")
    args, _ = ex.cases[0].arguments()
    np.testing.assert_array_equal(ex.reference(*args), [[[48.0], [57.0]]])


def test_the_hand_case_with_nonlinear_norms_gives_what_was_computed_by_hand():
    ex = checks.exercise("06.1")
    assert "by hand" in ex.cases[1].label and "not linear" in ex.cases[1].label
    args, _ = ex.cases[1].arguments()
    # y = [1, -3]; causal averaging self-attention: [1, -1]; norm1: |[2, -4]| + 1 = [3, 5]
    # cross-attention: memory position 1 is padded, so both read -10; norm2: |[-7, -5]| + 2
    # = [9, 7]; FFN: [-18, -14]; norm3: |[-9, -7]| + 3 = [12, 10]
    np.testing.assert_array_equal(ex.reference(*args), [[[12.0], [10.0]]])
    by_hand = {  # each wrong wiring on this case, by hand
        norm_then_add: [48.0, 36.0],  # [1, -3] + |[1, -1]| + 1 = [3, -1]; + |-10| + 2 = [15,
        # 11]; + |-2 y| + 3 = 3 y + 3
        add_after_norm: [18.0, 18.0],  # |y| + 1 + [1, -1] = [3, 3]; |.| + 2 - 10 = [-5, -5];
        # |.| + 3 + 10 = 18
        norm_overwrites_input: [-7.0, -4.0],  # [2, 4] + [2, 3] = [4, 7]; [6, 9] - 10 = [-4,
        # -1]; [7, 4] - 2 [7, 4]
    }
    for wrong, expected in by_hand.items():
        np.testing.assert_array_equal(wrong(*args).ravel(), expected, wrong.__name__)
    for wrong in by_hand:  # the affine norms of the first hand case (plus_k) cannot show these
        args, _ = ex.cases[0].arguments()
        assert np.array_equal(wrong(*args), ex.reference(*args)) == (wrong is not
                                                                     norm_overwrites_input)


def test_the_reference_decoder_block_is_the_library_block_also_when_S_differs_from_T():
    from helpers.transformer import DecoderBlock, causal_mask, padding_mask

    rng = np.random.default_rng(0)
    block = DecoderBlock(16, 4, 32, rng)
    for norm in (block.norm1, block.norm2, block.norm3):
        norm.gamma, norm.beta = rng.normal(size=16), rng.normal(size=16)
    y, memory = rng.normal(size=(2, 5, 16)), rng.normal(size=(2, 7, 16))
    src_mask = padding_mask([7, 4], 7)
    expected = block.forward(y, memory, causal_mask(5), src_mask)
    got = checks.exercise("06.1").reference(
        y, memory, block.self_attn.forward, block.cross_attn.forward, block.ffn.forward,
        block.norm1.forward, block.norm2.forward, block.norm3.forward, causal_mask(5), src_mask)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_the_greedy_cases_do_what_their_labels_say():
    ex = checks.exercise("06.2")
    results = [ex.reference(*c.arguments()[0]) for c in ex.cases]
    assert results[:2] == [[0, 1, 2, 3, 4], [0, 1, 2, 3]]  # the two "by hand" cases
    for case, tokens in zip(ex.cases, results):
        model, bos, eos, max_steps = case.arguments()[0]
        assert tokens[0] == bos and len(tokens) <= 1 + max_steps
        assert eos not in tokens[1:-1]
        if "does not come in time" in case.label:
            assert eos not in tokens and len(tokens) == 1 + max_steps, case.label
            if "would be the 8th" in case.label:  # later than max_steps + 1: told apart from
                # greedy-one-step-too-many, and it comes, so a loop that ignores max_steps stops
                later = ex.reference(model, bos, eos, 50)
                assert later[-1] == eos and len(later) == 1 + 8 and max_steps + 1 < 8
        else:
            nth = {"first": 1, "4th": 4, "5th": 5}[case.label.split("eos is the ")[1].split()[0]]
            assert tokens[-1] == eos and len(tokens) == 1 + nth, case.label
        if "the last one allowed" in case.label:
            assert len(tokens) == 1 + max_steps


def test_a_diagnosis_as_the_learner_reads_it():
    result = checks.check(cross_kv_from_decoder, "06.1")
    assert result.message.startswith(
        "✗ 06.1 decoder_block: the cross-attention takes its keys and values from the decoder "
        "state y; they come from the encoder's output: cross_attn(y, memory, memory, src_mask)\n"
        "  case: toy sub-layers, by hand")
    assert result.message.endswith("[decoder-cross-kv-from-decoder]. See 06 §1 · The decoder block.")
    result = checks.check(no_eos_stop, "06.2")
    assert "case: the counting model" in result.message  # the case shows what was expected
    assert "by hand: [0, 1, 2, 3, 4]" in result.message and "(11,)" in result.message


def test_a_loop_that_never_stops_is_stopped_by_the_toy_model_and_told_why():
    def never_stops(next_logits, bos_id, eos_id, max_steps):
        tokens = [bos_id]
        while tokens[-1] != eos_id:  # ignores max_steps, and the first row never leads to EOS
            tokens.append(int(next_logits(tokens)[0].argmax()))
        return tokens

    result = checks.check(never_stops, "06.2")
    assert result.status == "error"
    assert ("raised RuntimeError: next_logits was called 100 times: does your loop stop after "
            "max_steps new tokens?") in result.message
    assert "tokens.append(int(next_logits(tokens)[0].argmax()))" in result.message  # your line


def test_every_call_gets_a_fresh_next_logits_so_the_calls_are_counted_per_call():
    ex = checks.exercise("06.2")
    for _ in range(15):  # 15 x 11 calls of one case's model: past the bound of 100 if it were
        assert checks.run(ex, ex.reference)  # shared between calls
    first, second = ex.cases[0].arguments()[0][0], ex.cases[0].arguments()[0][0]
    assert first is not second


def test_a_residual_added_after_the_norm_is_shown_on_the_nonlinear_hand_case():
    result = checks.check(add_after_norm, "06.1")
    assert result.mistakes == ("decoder-add-after-norm",), result.message
    assert ("  case: by hand, with toy norms that are not linear" in result.message
            and "  expected result[0, 0]: [12]\n  got      result[0, 0]: [18]\n" in result.message
            ), result.message  # the first hand case's norms, h + k, cannot show it


def test_the_parameter_counts_are_the_built_models_and_the_hand_case_is_171():
    from helpers.transformer import Transformer

    ex = checks.exercise("06.3")
    (hand,), _ = ex.cases[0].arguments()
    # by hand (d = 2, d_ff = 3): attention 4 (2·2 + 2) = 24, FFN (2·3 + 3) + (3·2 + 2) = 17,
    # LayerNorm 2·2 = 4; embeddings 5·2 + 7·2 = 24, encoder 24 + 17 + 2·4 = 49, decoder
    # 2·24 + 17 + 3·4 = 77, output 2·7 + 7 = 21
    assert (24 + 49 + 77 + 21, "24 + 49 + 77 + 21 = 171") == (171, ex.cases[0].label[-23:])
    assert ex.reference(hand) == 171 and _learner_count(hand) == 171
    for case in ex.cases:
        (config,), _ = case.arguments()
        expected = ex.reference(config)
        assert _learner_count(config) == expected, case.label  # the tests' own count agrees
        if expected < 100_000:  # the paper's base model (63.1M) is counted, not built
            model = Transformer.from_config(config, np.random.default_rng(0))
            assert sum(p.size for p in model.parameters().values()) == expected, case.label
    assert round(ex.reference(ex.cases[-1].arguments()[0][0]) / 1e6, 1) == 63.1


def test_a_count_off_by_a_few_on_the_paper_model_alone_fails():
    ex = checks.exercise("06.3")
    result = checks.run(ex, lambda c: _learner_count(c) + (c.src_vocab == 37_000))
    assert result.status == "wrong" and "63082497" in result.message, result.message
    assert checks.check(lambda c: _learner_count(c), "06.3")  # the learner's own count passes


def test_the_decoder_io_hand_case_and_teacher_forcing_alignment():
    ex = checks.exercise("06.4")
    decoder_input, labels = ex.reference(*ex.cases[0].args)
    assert decoder_input.tolist() == [[1, 5, 6, 7], [1, 8, 0, 0]]
    assert labels.tolist() == [[5, 6, 7, 2], [8, 2, 0, 0]]
    assert "decoder_input [[1, 5, 6, 7], [1, 8, 0, 0]], labels [[5, 6, 7, 2], [8, 2, 0, 0]]" in (
        ex.cases[0].label)
    for case in ex.cases:
        targets, bos, eos, pad = case.args
        x, y = ex.reference(*case.args)
        assert x.shape == y.shape == (len(targets), max(map(len, targets)) + 1)
        assert x.dtype.kind == y.dtype.kind == "i"
        for b, t in enumerate(targets):  # input t + 1 is label t; padding after, both the same
            n = len(t)
            assert x[b, 0] == bos and y[b, n] == eos and x[b, 1:n + 1].tolist() == t
            assert np.array_equal(x[b, 1:n + 1], y[b, :n]) and (x[b, n + 1:] == pad).all()
            assert (y[b, n + 1:] == pad).all() and eos not in x[b] and bos not in y[b]


def test_decoder_io_written_with_np_pad_passes():
    def decoder_io(targets, bos_id, eos_id, pad_id):
        T = 1 + max(map(len, targets))
        inputs = [np.pad([bos_id, *t], (0, T - 1 - len(t)), constant_values=pad_id) for t in targets]
        labels = [np.pad([*t, eos_id], (0, T - 1 - len(t)), constant_values=pad_id) for t in targets]
        return np.stack(inputs), np.stack(labels)

    assert checks.check(decoder_io)


def test_decoder_io_with_eos_dropped_from_the_longest_is_wrong_and_not_named():
    def decoder_io(targets, bos_id, eos_id, pad_id):
        T = max(map(len, targets)) + 1
        x = np.full((len(targets), T), pad_id)
        y = np.full((len(targets), T), pad_id)
        for b, t in enumerate(targets):
            x[b, :len(t) + 1] = [bos_id, *t]
            y[b, :len(t)] = t
            if len(t) < T - 1:  # "the longest has no room for EOS"
                y[b, len(t)] = eos_id
        return x, y

    result = checks.check(decoder_io)
    assert result.status == "wrong" and result.mistakes == (), result.message


def test_decoder_io_that_calls_notebook_11s_batch_arrays_is_not_credited():
    from helpers.translation import batch_arrays

    def decoder_io(targets, bos_id, eos_id, pad_id):
        ended = [t + [eos_id] for t in targets]
        return batch_arrays(ended, ended, range(len(ended)), bos_id, pad_id)[1:]

    result = checks.check(decoder_io)
    assert result.status == "not credited" and "batch_arrays" in result.message, result.message
