"""The data-flow diagrams of helpers/diagrams.py: drawn from the arrays they are given (shapes in
their labels are computed), legible at notebook width, and without text drawn over text."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import diagrams  # noqa: E402


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of visible texts whose drawn boxes overlap (a diagram that is not legible)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(matplotlib.text.Text)
             if t.get_text().strip() and t.get_visible()]
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
            if box_a.overlaps(box_b)]


def assert_legible(fig):
    """Legible at notebook width: at most 11 in wide, no text under 8 pt, no text over text, and
    every text inside the figure."""
    assert fig.get_size_inches()[0] <= 11
    assert overlapping_texts(fig) == []
    renderer = fig.canvas.get_renderer()
    for t in fig.findobj(matplotlib.text.Text):
        if t.get_text().strip():
            assert t.get_fontsize() >= 8, t.get_text()
            assert fig.bbox.contains(*t.get_window_extent(renderer).p0), t.get_text()
            assert fig.bbox.contains(*t.get_window_extent(renderer).p1), t.get_text()


# ── 01 · Q, K and V from one sequence

def bank_example():
    """Notebook 01's hand-built "river bank" sentence: X (6, 4), W_q, W_k (4, 2), W_v (4, 4)."""
    X = np.array([[0, 0, 0, 1], [0, 0, 0, 0.5], [0, 0, 0, 1], [0, 0, 0, 1], [0, 2, 1, 0],
                  [0.5, 0.5, 1, 0]])
    W_q = np.array([[0, 0], [0, 0], [2, 0], [0, 1]], dtype=float)
    W_k = np.array([[1, 0], [1, 0], [0, 0], [0, 1]], dtype=float)
    return X, W_q, W_k, np.eye(4)


@pytest.mark.parametrize("n, d_model, d_k, d_v", [(6, 4, 2, 4), (5, 3, 2, 7), (12, 16, 8, 8)])
def test_qkv_diagram_labels_its_shapes_from_the_arrays(n, d_model, d_k, d_v):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d_model))
    W = [rng.standard_normal((d_model, d)) for d in (d_k, d_k, d_v)]
    tokens = [f"t{i}" for i in range(n)]
    fig = diagrams.qkv_diagram(X, *W, tokens=tokens, title="RANDOM weights")
    try:
        shown = "\n".join(texts(fig))
        for expected in (f"T × d_model = {n} × {d_model}", f"T × d_k = {n} × {d_k}",
                         f"d_k × T = {d_k} × {n}", f"T × T = {n} × {n}",
                         f"T × d_v = {n} × {d_v}", "Q = X W_q", "V = X W_v", "S = Q Kᵀ / √d_k"):
            assert expected in shown, expected
        assert shown.count(f"T × T = {n} × {n}") == 2  # the scores and the weights
        assert_legible(fig)
    finally:
        plt.close(fig)


def test_qkv_diagram_draws_the_callers_numbers():
    X, W_q, W_k, W_v = bank_example()
    fig = diagrams.qkv_diagram(X, W_q, W_k, W_v, tokens="we walked along the river bank".split())
    try:
        images = [im.get_array() for ax in fig.axes for im in ax.get_images()]
        Q, K = X @ W_q, X @ W_k
        S = Q @ K.T / np.sqrt(2)
        A = np.exp(S) / np.exp(S).sum(1, keepdims=True)
        for expected in (X, Q, K.T, S, A, A @ X @ W_v, X @ W_v):  # ..., out, V
            assert any(im.shape == expected.shape and np.allclose(im, expected) for im in images)
        assert len(images) == 7  # X, Q, K^T, S, A, out, V
        assert overlapping_texts(fig) == []
    finally:
        plt.close(fig)


# ── 02 · Heads: the split and the merge


@pytest.mark.parametrize("shape, h", [((2, 5, 12), 4), ((1, 3, 8), 2), ((3, 6, 16), 8)])
def test_heads_diagram_labels_the_shapes_it_computes(shape, h):
    B, T, d_model = shape
    fig = diagrams.heads_diagram(np.zeros(shape), h)
    labels = texts(fig)
    d_k = d_model // h
    for expected in [(B, T, d_model), (B, T, h, d_k), (B, h, T, d_k)]:
        assert sum(f"= {expected}" in t for t in labels) >= 2, (expected, labels)
    assert any(f"h = {h} heads of d_k = {d_k}" in t for t in labels)
    assert_legible(fig)
    # one coloured cell per (token, feature) in each of the 8 stages, coloured by head
    cells = [p for p in fig.axes[0].patches if p.get_facecolor()[3] == 1]
    assert len(cells) == 8 * T * d_model
    plt.close(fig)


def test_heads_diagram_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="divisible"):
        diagrams.heads_diagram(np.zeros((1, 4, 10)), 4)
    with pytest.raises(ValueError, match="small example"):
        diagrams.heads_diagram(np.zeros((1, 10, 512)), 8)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\)"):
        diagrams.heads_diagram(np.zeros((4, 12)), 4)


# ── 05 · One block, Post-LN and Pre-LN


def _block_orders_cases():
    from helpers.analysis import TRAINED, reversal_models
    from helpers.transformer import EncoderBlock, Stack, TransformerConfig

    rng = np.random.default_rng(0)
    return {"reversal encoder (Stack)": (reversal_models()[TRAINED].encoder, (32, 2, 128, 2)),
            "one block": (EncoderBlock(48, 3, 96, rng), (48, 3, 96, None)),
            "paper base config": (TransformerConfig(37000, 37000), (512, 8, 2048, 6)),
            "Pre-LN stack": (Stack(EncoderBlock, 4, 24, 4, 40, rng, norm_first=True),
                             (24, 4, 40, 4))}


@pytest.mark.parametrize("case", ["reversal encoder (Stack)", "one block", "paper base config",
                                  "Pre-LN stack"])
def test_block_orders_reads_the_sizes_and_draws_both_orders_legibly(case):
    obj, (d, h, d_ff, n) = _block_orders_cases()[case]
    fig = diagrams.block_orders(obj)
    try:
        assert_legible(fig)
        words = texts(fig)
    finally:
        plt.close(fig)
    joined = " ".join(words)
    for part in (f"h = {h} heads of d_k = {d // h}", f"{d} → {d_ff} → {d}, ReLU",
                 f"(B, T, {d})", "Post-LN (the paper)", "Pre-LN",
                 f"of {'N' if n is None else f'N = {n}'})"):
        assert part in joined, part
    # both orders: Post-LN adds then normalises (4 LayerNorms in all: 2 per order inside the
    # block), Pre-LN adds the sub-layer of the normalised input and ends the stack with one more
    assert words.count("add: x + sublayer(x)") == 2 and words.count("add: x + sublayer(LN(x))") == 2
    assert words.count("LayerNorm") == 4
    assert words.count("final LayerNorm (after the last block)") == 1
    assert words.count("multi-head self-attention\n" f"h = {h} heads of d_k = {d // h}") == 2
    assert words.count("skip: x") == 2 and "skip: LN output" in words and "skip: the sum" in words


def test_block_orders_leaves_the_06_figure_as_it_was():
    """The 05 diagram generalised _stack_06 (separate_add); 06's default is unchanged."""
    from helpers.transformer import TransformerConfig

    fig = diagrams.encoder_decoder(TransformerConfig(10, 12, d_model=16, n_heads=2, d_ff=32,
                                                     n_layers=1))
    words = texts(fig)
    plt.close(fig)
    assert words.count("add & LayerNorm") == 5 and "add: x + sublayer(x)" not in words


# ── 06 · The encoder–decoder


def _encoder_decoder_cases():
    from helpers.analysis import TRAINED, reversal_models
    from helpers.transformer import TransformerConfig

    return {"reversal model": reversal_models()[TRAINED],
            "paper base, shared": TransformerConfig(37000, 37000, share_embeddings=True,
                                                    tie_output=True),
            "Pre-LN, no padding": TransformerConfig(10, 12, d_model=48, n_heads=3, d_ff=96,
                                                    n_layers=4, norm_first=True, pad_id=None)}


@pytest.mark.parametrize("case", ["reversal model", "paper base, shared", "Pre-LN, no padding"])
def test_encoder_decoder_is_legible_and_inside_the_figure(case):
    fig = diagrams.encoder_decoder(_encoder_decoder_cases()[case])
    try:
        assert_legible(fig)
        renderer = fig.canvas.get_renderer()
        # the text of every box stays inside its box
        boxes = [p.get_window_extent(renderer) for p in fig.axes[0].patches
                 if isinstance(p, matplotlib.patches.FancyBboxPatch)]
        for t in fig.axes[0].texts:
            extent = t.get_window_extent(renderer)
            holder = [b for b in boxes if b.contains(*extent.get_points().mean(axis=0))]
            for b in holder:
                assert b.x0 <= extent.x0 and extent.x1 <= b.x1, t.get_text()
                assert b.y0 <= extent.y0 and extent.y1 <= b.y1, t.get_text()
    finally:
        plt.close(fig)


def test_encoder_decoder_reads_every_size_from_the_configuration():
    cases = _encoder_decoder_cases()
    fig = diagrams.encoder_decoder(cases["paper base, shared"])
    words = " ".join(texts(fig))
    plt.close(fig)
    for part in ("d_model = 512", "h = 8 heads of d_k = 64", "d_ff = 2048", "× N = 6",
                 "shared embedding (37,000 × 512)", "512 → 2048 → 512", "tied: x @ Eᵀ",
                 "(B, T, 37,000)", "Post-LN", "causal + target padding",
                 "mask: source padding (B, 1, 1, S)", "K, V of every decoder block",
                 "√d_model", "positional encoding (sin/cos, 256 × 512)"):
        assert part in words, part
    assert words.count("add & LayerNorm") == 2 + 3  # one per sub-layer: encoder 2, decoder 3
    fig = diagrams.encoder_decoder(cases["Pre-LN, no padding"])
    words = " ".join(texts(fig))
    plt.close(fig)
    for part in ("d_model = 48", "h = 3 heads of d_k = 16", "× N = 4", "Pre-LN",
                 "source embedding (10 × 48)", "target embedding (12 × 48)", "linear 48 → 12",
                 "mask: causal", "final LayerNorm", "mask: none"):
        assert part in words, part
    assert "add & LayerNorm" not in words and "padding" not in words.replace("pad_id", "")
    assert words.count("final LayerNorm") == 2


# ── 07 · The backward pass


def _backward_pass_cases():
    from dataclasses import replace

    from helpers.analysis import TRAINED, reversal_models
    from helpers.reversal import REVERSE_CONFIG
    from helpers.transformer import TransformerConfig

    return {"reversal model": reversal_models()[TRAINED],
            "reversal, tied": replace(REVERSE_CONFIG, tie_output=True),
            "paper base, shared": TransformerConfig(37000, 37000, share_embeddings=True,
                                                    tie_output=True)}


@pytest.mark.parametrize("case", ["reversal model", "reversal, tied", "paper base, shared"])
def test_backward_pass_is_legible_and_inside_the_figure(case):
    fig = diagrams.backward_pass(_backward_pass_cases()[case])
    try:
        assert_legible(fig)
    finally:
        plt.close(fig)


def test_backward_pass_reads_its_sizes_and_names_the_real_functions():
    from helpers import training

    cases = _backward_pass_cases()
    words = {}
    for case, model in cases.items():
        fig = diagrams.backward_pass(model)
        words[case] = " ".join(texts(fig))
        plt.close(fig)
    untied, tied, paper = words["reversal model"], words["reversal, tied"], words["paper base, shared"]
    n, d, v = (getattr(cases["reversal, tied"], k) for k in ("n_layers", "d_model", "tgt_vocab"))
    for part in (f"d_model = {d}", f"N = {n}", f"target embedding ({v} × {d})",
                 f"d_logits (B, T, {v})", f"d_memory (B, S, {d})",
                 f"Σ dK + dV over the N = {n} blocks", "d_logits = (p − q) / n", "one_hot.T @ rows"):
        assert part in untied and part in tied, part
    assert untied.count("DecoderBlock.backward") == untied.count("EncoderBlock.backward") == n
    assert f"decoder block {n - 1}:" in untied and f"decoder block {n}:" not in untied  # from 0
    # tied: the output uses the target embedding, whose gradient gets a second contribution
    assert "ADDS into E" in tied and "ADDS into E" not in untied
    assert "linear_backward" in untied and "linear_backward" not in tied
    assert f"W_out ({d} × {v})" in untied and "W_out" not in tied
    for part in ("d_model = 512", "N = 6", "37,000", "shared embedding (37,000 × 512)",
                 "d_src + d_tgt", "over the N = 6 blocks", "decoder block 5:"):
        assert part in paper, part
    assert "d_src + d_tgt" not in tied
    # every function the diagram names is one of helpers/training.py (or a method it attaches)
    for name in ("residual_backward", "embedding_backward", "linear_backward", "cross_entropy"):
        assert name in untied + tied and callable(getattr(training, name)), name
    for cls, method in (("Transformer", "backward"), ("Stack", "backward"),
                        ("EncoderBlock", "backward"), ("DecoderBlock", "backward"),
                        ("Dropout", "backward")):
        assert f"{cls}.{method}" in untied
        assert callable(getattr(getattr(training, cls), method))
