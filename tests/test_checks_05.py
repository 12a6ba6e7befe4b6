"""Notebook 05's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/blocks.py (its models of the same mistakes): np.std and
np.var spelled out, sums instead of means, one variable reused through the block. tests/
test_checks.py asserts that the checker names exactly the mistake each one makes.
"""

import numpy as np

from helpers.checks import check

# ── 05.1 · layer_norm ─────────────────────────────────────────────────────────────────────────


def _moments(x, axis=-1, ddof=0):
    n = x.shape[axis]
    mu = np.sum(x, axis=axis, keepdims=True) / n
    var = np.sum((x - mu) ** 2, axis=axis, keepdims=True) / (n - ddof)
    return mu, var


def ln_unbiased_variance(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x, ddof=1)  # torch's default for Tensor.var
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def ln_eps_outside_sqrt(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    return gamma * (x - mu) / (np.sqrt(var) + eps) + beta


def ln_annotated_transformer(x, gamma, beta, eps=1e-5):  # its a_2 * (x - mean) / (std + eps) + b_2
    mean = np.mean(x, axis=-1, keepdims=True)
    std = np.std(x, axis=-1, ddof=1, keepdims=True)  # torch's x.std(-1) is unbiased
    return gamma * (x - mean) / (std + eps) + beta


def ln_no_sqrt(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    return gamma * ((x - mu) / (var + eps)) + beta


def ln_no_eps(x, gamma, beta, eps=1e-5):
    centred = x - x.mean(-1, keepdims=True)
    return gamma * centred / np.std(x, axis=-1, keepdims=True) + beta


def ln_ignores_eps(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    return gamma * (x - mu) / np.sqrt(var + 1e-5) + beta  # the default, whatever eps is


def ln_over_positions(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x, axis=-2)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def ln_axis_1(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=1, keepdims=True)  # "axis 1 = the features", true of (T, d_model) only
    var = x.var(axis=1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def ln_over_axis_0(x, gamma, beta, eps=1e-5):
    mu, var = np.mean(x, axis=0), np.var(x, axis=0)  # (no keepdims needed along axis 0)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def ln_over_everything(x, gamma, beta, eps=1e-5):
    return gamma * (x - np.mean(x)) / np.sqrt(np.var(x) + eps) + beta


def ln_gamma_beta_swapped(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    return beta * (x - mu) / np.sqrt(var + eps) + gamma


def ln_shift_before_scale(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * (beta + x_hat)


def ln_ignores_gamma_beta(x, gamma, beta, eps=1e-5):
    mu, var = _moments(x)
    return (x - mu) * (var + eps) ** -0.5


# ── 05.2 · post_ln_block ──────────────────────────────────────────────────────────────────────


def block_pre_ln(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = x + self_attn(norm1(x), mask)
    x = x + feed_forward(norm2(x))
    return x


def block_no_residual(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = norm1(self_attn(x, mask))
    x = norm2(feed_forward(x))
    return x


def block_norm_then_add(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = x + norm1(self_attn(x, mask))  # "add & norm" read as "norm, then add"
    x = x + norm2(feed_forward(x))
    return x


def block_one_norm(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = norm1(x + self_attn(x, mask))
    x = norm1(x + feed_forward(x))  # copied from the line above
    return x


def block_norms_swapped(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = norm2(self_attn(x, mask) + x)
    x = norm1(feed_forward(x) + x)
    return x


def block_mask_not_passed(x, self_attn, feed_forward, norm1, norm2, mask=None):
    a = self_attn(x)
    y = norm1(x + a)
    return norm2(y + feed_forward(y))


def block_ffn_first(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = norm1(x + feed_forward(x))
    x = norm2(x + self_attn(x, mask))
    return x


def block_ffn_reads_input(x, self_attn, feed_forward, norm1, norm2, mask=None):
    a, f = self_attn(x, mask), feed_forward(x)  # both sub-layers read x
    y = norm1(x + a)
    return norm2(y + f)


def block_residual_from_input(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x + self_attn(x, mask))
    f = feed_forward(y)
    return norm2(f + x)  # x is still the block's input


def block_add_after_norm(x, self_attn, feed_forward, norm1, norm2, mask=None):
    y = norm1(x) + self_attn(x, mask)  # "Add & Norm" read as "norm, then add"
    return norm2(y) + feed_forward(y)


def block_norm_overwrites_input(x, self_attn, feed_forward, norm1, norm2, mask=None):
    x = norm1(x)  # x reused: the residual now carries LN(x)
    x = x + self_attn(x, mask)
    x = norm2(x)
    x = x + feed_forward(x)
    return x


# ── 05.3 · which_order ────────────────────────────────────────────────────────────────────────


def order_swapped(block, x):
    out = block(1e3 * x)
    grows = np.max(np.abs(out)) > 0.5 * np.max(np.abs(1e3 * x))
    return "post" if grows else "pre"  # read the wrong way round


def order_mean_only(block, x):
    out = block(x)
    if np.all(np.abs(np.mean(out, axis=-1)) < 1e-4):  # "a LayerNorm output has mean 0"
        return "post"
    return "pre"


def order_std_one(block, x):
    out = block(x)
    mu, sd = out.mean(axis=-1), out.std(axis=-1)
    return "post" if np.allclose(mu, 0, atol=1e-4) and np.allclose(sd, 1, atol=1e-4) else "pre"


def order_tests_input(block, x):
    h = x  # meant: h = block(x)
    normalised = np.allclose(h.mean(-1), 0, atol=1e-4) and np.allclose(h.std(-1), 1, atol=1e-4)
    return "post" if normalised else "pre"


def order_fixed_threshold(block, x):
    return "post" if np.abs(block(x)).max() <= 3.0 else "pre"  # "LayerNorm outputs are small"


def order_probe_too_small(block, x):
    before, after = np.abs(block(x)).max(), np.abs(block(2 * x)).max()
    return "pre" if after / before > 1.5 else "post"  # doubling x should double a Pre-LN output


WRONG = {
    "ln-unbiased-variance": ln_unbiased_variance,
    "ln-eps-outside-sqrt": ln_eps_outside_sqrt,
    "ln-annotated-transformer": ln_annotated_transformer,
    "ln-no-sqrt": ln_no_sqrt,
    "ln-no-eps": ln_no_eps,
    "ln-ignores-eps": ln_ignores_eps,
    "ln-over-positions": ln_over_positions,
    "ln-axis-1": ln_axis_1,
    "ln-over-axis-0": ln_over_axis_0,
    "ln-over-everything": ln_over_everything,
    "ln-gamma-beta-swapped": ln_gamma_beta_swapped,
    "ln-shift-before-scale": ln_shift_before_scale,
    "ln-ignores-gamma-beta": ln_ignores_gamma_beta,
    "block-pre-ln": block_pre_ln,
    "block-no-residual": block_no_residual,
    "block-norm-then-add": block_norm_then_add,
    "block-one-norm": block_one_norm,
    "block-norms-swapped": block_norms_swapped,
    "block-mask-not-passed": block_mask_not_passed,
    "block-ffn-first": block_ffn_first,
    "block-ffn-reads-input": block_ffn_reads_input,
    "block-residual-from-input": block_residual_from_input,
    "block-add-after-norm": block_add_after_norm,
    "block-norm-overwrites-input": block_norm_overwrites_input,
    "order-swapped": order_swapped,
    "order-mean-only": order_mean_only,
    "order-std-one": order_std_one,
    "order-tests-input": order_tests_input,
    "order-fixed-threshold": order_fixed_threshold,
    "order-probe-too-small": order_probe_too_small,
}


# ── what is special about these exercises ─────────────────────────────────────────────────────


def test_the_hand_case_of_layer_norm_is_what_its_label_says():
    from helpers.checks.blocks import LAYER_NORM

    case = LAYER_NORM.cases[0]
    out = LAYER_NORM.reference(*case.args)
    assert "by hand" in case.label
    assert np.all(out[0] == 0)
    assert np.allclose(out[1], np.array([-2.0, -1.0, 0.0, 3.0]) / np.sqrt(3.5 + 1e-5), rtol=1e-12)


def test_the_constant_row_gives_beta_and_without_eps_nan():
    from helpers.checks.blocks import LAYER_NORM

    x, gamma, beta = LAYER_NORM.cases[-1].args
    assert np.ptp(x[2]) == 0
    assert np.allclose(LAYER_NORM.reference(x, gamma, beta, eps=1e-3)[2], beta, rtol=0, atol=1e-12)
    with np.errstate(invalid="ignore"):
        assert np.isnan(ln_no_eps(x, gamma, beta)[2]).all()


def test_the_reference_block_is_the_library_encoder_block():
    from helpers.checks.blocks import BLOCK, POST_LN_BLOCK

    for case in POST_LN_BLOCK.cases[2:]:  # the cases built from BLOCK's sub-layers
        args, kwargs = case.arguments()
        expected = BLOCK.forward(args[0], kwargs.get("mask"))
        assert np.allclose(POST_LN_BLOCK.reference(*args, **kwargs), expected, rtol=0, atol=1e-13)
    assert not np.allclose(BLOCK.norm1.gamma, BLOCK.norm2.gamma)  # the two norms differ
    assert not np.allclose(BLOCK.norm1.beta, 0) and not np.allclose(BLOCK.norm2.beta, 0)


def test_the_toy_block_case_returns_about_x():
    from helpers.checks.blocks import POST_LN_BLOCK

    case = POST_LN_BLOCK.cases[0]
    assert "by hand" in case.label
    assert np.allclose(POST_LN_BLOCK.reference(*case.args), case.args[0], atol=1e-5)


def test_pre_ln_is_named_with_both_formulas():
    result = check(block_pre_ln, "05.2")
    assert result.status == "mistake"
    assert ("this is the Pre-LN block, x + Sublayer(LN(x)); the paper's Post-LN block is "
            "LN(x + Sublayer(x))") in result.message
    assert "See 05 §5 · A stack of blocks, and Post-LN against Pre-LN." in result.message


def test_the_hand_case_with_nonlinear_norms_gives_what_was_computed_by_hand():
    from helpers.checks.blocks import POST_LN_BLOCK

    case = POST_LN_BLOCK.cases[1]
    assert "by hand" in case.label and "not linear" in case.label
    args, kwargs = case.arguments()
    # x = [1, -3]; causal averaging attention: [1, (1 - 3) / 2] = [1, -1]
    # y = norm1(x + a) = |[2, -4]| + 1 = [3, 5]; FFN(y) = [-6, -10]
    # out = norm2(y + FFN(y)) = 2 |[-3, -5]| = [6, 10]
    np.testing.assert_array_equal(POST_LN_BLOCK.reference(*args, **kwargs), [[[6.0], [10.0]]])
    by_hand = {  # each wrong wiring on this case, by hand
        block_add_after_norm: [0.0, 0.0],  # y = |x| + 1 + a = [3, 3]; 2|y| - 2y = 0
        block_norm_overwrites_input: [-8.0, -14.0],  # LN(x) = [2, 4], + its average [2, 3]
        # = [4, 7]; 2|.| = [8, 14]; plus -2 times itself
        block_norm_then_add: [15.0, 3.0],  # y = x + |a| + 1 = [3, -1]; y + 2|-2y| = 5y
        block_norms_swapped: [5.0, 9.0],  # y = 2|[2, -4]| = [4, 8]; |-y| + 1
    }
    for wrong, expected in by_hand.items():
        np.testing.assert_array_equal(wrong(*args, **kwargs).ravel(), expected, wrong.__name__)


def test_a_residual_added_after_the_norm_is_named():
    result = check(block_add_after_norm, "05.2")
    assert result.mistakes == ("block-add-after-norm",), result.message
    assert "LN(x) + Sublayer(x); Post-LN normalises the sum: LN(x + Sublayer(x))" in result.message


def test_the_two_hand_cases_of_which_order_give_the_same_output_on_x():
    from helpers.checks.blocks import WHICH_ORDER

    (post, x), (pre, x_again) = (case.args for case in WHICH_ORDER.cases[:2])
    assert "by hand" in WHICH_ORDER.cases[0].label and np.array_equal(x, x_again)
    assert np.allclose(post(x), x, atol=1e-4) and np.array_equal(pre(x), x)  # alike on x
    assert np.abs(post(1000 * x)).max() < 1.01 and np.array_equal(pre(1000 * x), 1000 * x)
    assert [WHICH_ORDER.reference(*case.args) for case in WHICH_ORDER.cases[:2]] == ["post", "pre"]


def test_which_order_is_right_on_library_blocks_of_either_order():
    from helpers.checks.blocks import which_order
    from helpers.transformer import EncoderBlock

    rng = np.random.default_rng(3)
    for norm_first, expected in ((False, "post"), (True, "pre")):
        block = EncoderBlock(16, 4, 32, rng, norm_first=norm_first)
        assert which_order(block.forward, rng.normal(size=(6, 16))) == expected
