"""Diagrams of the data flow, drawn by code (matplotlib only, no images from elsewhere).

One section per notebook that draws one: 01 (Q, K and V from one sequence and the T × T score
matrix), 02 (the split into heads and the merge, with shapes), 05 (one block, Post-LN and
Pre-LN, with its residual paths), 06 (the whole encoder–decoder: its three attentions, the mask
each uses, the residuals and LayerNorms), 07 (the backward pass through the whole model), 09
(a decoder-only block of 2017 next to today's, from their configurations). Each
function draws onto a new figure sized for the notebook's width and returns it; the arrays it
shows are the caller's (shapes in the labels are computed, never typed).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import ConnectionPatch, FancyBboxPatch

# ── 01 · Q, K and V from one sequence

def qkv_diagram(X, W_q, W_k, W_v, tokens=None, title=None, max_width=10.0):
    """Q, K, V projected from ONE sequence X, the T × T scores, softmax, and weights @ V.

    Every matrix is drawn as a small heatmap of the caller's numbers, one square per entry (so
    the picture's proportions are the shapes), with its name and its shape (computed) beside it.
    """
    X, W_q, W_k, W_v = (np.asarray(a, dtype=float) for a in (X, W_q, W_k, W_v))
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    n, d_model = X.shape
    d_k, d_v = Q.shape[1], V.shape[1]
    S = Q @ K.T / np.sqrt(d_k)
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    out = A @ V

    gap, label_h, margin = 0.85, 0.5, 0.15  # inches: between matrices, a two-line label, edges
    left = 0.75 if tokens is not None else margin  # room for the token names
    widths = [d_model, d_k, n, n, d_v]  # the main row: X, Q, S, A, out (in entries)
    cell = min(0.22, (max_width - left - margin - 4 * gap) / sum(widths))
    width = left + margin + 4 * gap + cell * sum(widths)
    y_main = margin + cell * n + label_h + gap / 2  # bottom of the main row (V sits below)
    y_top = y_main + cell * n + 0.25  # bottom of K^T (it sits above S)
    height = y_top + cell * d_k + label_h + (0.3 if title else 0.05)
    fig = plt.figure(figsize=(width, height))

    def place(x, y, matrix):  # lower-left corner (inches) -> an axes showing `matrix`
        rows, cols = matrix.shape
        ax = fig.add_axes((x / width, y / height, cols * cell / width, rows * cell / height))
        ax.imshow(matrix, cmap="viridis", aspect="auto")
        ax.set_xticks([])
        ax.set_yticks([])
        return ax

    xs = np.cumsum([left] + [w * cell + gap for w in widths])[:-1]
    ax_x, ax_q, ax_s, ax_a, ax_out = (place(x, y_main, m)
                                      for x, m in zip(xs, (X, Q, S, A, out), strict=True))
    ax_kt = place(xs[2], y_top, K.T)
    ax_v = place(xs[4], margin + label_h, V)
    if tokens is not None:
        ax_x.set_yticks(range(n), tokens, fontsize=8)

    def label(ax, text, symbols, shape, where="above"):
        y, va = (1.04, "bottom") if where == "above" else (-0.04, "top")
        ax.text(0.5, y, f"{text}\n{symbols} = {shape[0]} × {shape[1]}", transform=ax.transAxes,
                ha="center", va=va, fontsize=9, linespacing=1.2)

    label(ax_x, "X", "T × d_model", X.shape)
    label(ax_q, "Q = X W_q", "T × d_k", Q.shape)
    label(ax_kt, "Kᵀ  (K = X W_k)", "d_k × T", K.T.shape)
    label(ax_s, "S = Q Kᵀ / √d_k", "T × T", S.shape, "below")
    label(ax_a, "A = softmax(S)", "T × T", A.shape)
    label(ax_out, "out = A V", "T × d_v", out.shape)
    label(ax_v, "V = X W_v", "T × d_v", V.shape, "below")

    def arrow(a, xy_a, b, xy_b, style="arc3", coords="axes fraction"):
        fig.add_artist(ConnectionPatch(xy_a, xy_b, coords, "axes fraction", axesA=a, axesB=b,
                                       arrowstyle="-|>", color="0.3", lw=1.2,
                                       connectionstyle=style, mutation_scale=12))

    def note(x, y, text):  # a small operation label, just above the point (x, y) in inches
        fig.text(x / width, (y + 0.04) / height, text, ha="center", va="bottom", fontsize=9,
                 color="0.2")

    mid = y_main + cell * n / 2
    fork = xs[0] + d_model * cell + 0.25  # X's three projections part here (inches)
    arrow(ax_x, (1, 0.5), ax_q, (0, 0.5))
    for ax_to, style in ((ax_kt, "angle,angleA=90,angleB=180,rad=0"),
                         (ax_v, "angle,angleA=-90,angleB=180,rad=0")):
        arrow(None, (fork / width, mid / height), ax_to, (0, 0.5), style, "figure fraction")
    note((fork + xs[1]) / 2, mid, "× W_q")
    note(fork + 0.3, y_top + cell * d_k / 2, "× W_k")
    note(fork + 0.3, margin + label_h + cell * n / 2, "× W_v")
    arrow(ax_q, (1, 0.5), ax_s, (0, 0.5))
    arrow(ax_kt, (0.5, 0), ax_s, (0.5, 1))
    arrow(ax_s, (1, 0.5), ax_a, (0, 0.5))
    note(xs[3] - gap / 2, mid, "softmax\nper row")
    arrow(ax_a, (1, 0.5), ax_out, (0, 0.5))
    arrow(ax_v, (0.5, 1), ax_out, (0.5, 0))
    if title:
        fig.text(0.5, 1 - 0.05 / height, title, ha="center", va="top", fontsize=10)
    return fig


# ── 02 · Heads: the split and the merge

HEAD_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                "#8c8c8c"]


def heads_diagram(x, n_heads, *, cell=0.22):
    """The split into heads and the merge, drawn for the array `x` (B, T, d_model).

    Every stage's shape is computed by running the step on `x` itself (reshape, swap axes,
    attention keeps the shape, swap back, reshape, W_o keeps d_model), and each stage is drawn
    as the cells of sequence 0, coloured by the head their feature belongs to: rows framed by
    token before the swap, tiles framed by head after it. The input x is grey (every head reads
    all of it; only the columns of Q = x W_q are cut into heads), and so is the output after W_o:
    each of its features mixes all heads. Returns the figure.
    """
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"x must have shape (B, T, d_model), got {x.shape}")
    B, T, d_model = x.shape
    if d_model % n_heads or n_heads > len(HEAD_COLOURS):
        raise ValueError(f"need d_model={d_model} divisible by n_heads={n_heads} <= "
                         f"{len(HEAD_COLOURS)}")
    if T > 8 or d_model > 24:
        raise ValueError(f"draw a small example (T <= 8, d_model <= 24), got {x.shape}")
    h, d_k = n_heads, d_model // n_heads
    cut = x.reshape(B, T, h, d_k)  # the real steps, for their shapes
    split = cut.swapaxes(1, 2)
    back = split.swapaxes(1, 2)
    merged = back.reshape(B, T, d_model)

    def shape(a, names):
        return "(" + ", ".join(names) + ")\n= " + str(tuple(int(n) for n in a.shape))

    top = [("x", x, "input", ("B", "T", "d_model")),
           ("Q = x W_q (also K, V)", x @ np.zeros((d_model, d_model)), "flat",
            ("B", "T", "d_model")),
           ("cut features", cut, "cut", ("B", "T", "h", "d_k")),
           ("one sequence per head", split, "heads", ("B", "h", "T", "d_k"))]
    bottom = [("heads' outputs", split, "heads", ("B", "h", "T", "d_k")),
              ("heads side by side", back, "cut", ("B", "T", "h", "d_k")),
              ("Concat(heads)", merged, "flat", ("B", "T", "d_model")),
              ("output = Concat W_o\n(mixes all heads)", merged @ np.zeros((d_model, d_model)),
               "mixed", ("B", "T", "d_model"))]
    ops_top = ["@ W_q", "reshape", "swap T, h"]
    ops_bottom = ["swap back", "reshape", "@ W_o"]

    gap_cut, gap_heads, arrow = 0.6 * cell, 2.2 * cell, 1.9
    widths = {"flat": d_model * cell, "mixed": d_model * cell, "input": d_model * cell,
              "cut": d_model * cell + (h - 1) * gap_cut,
              "heads": d_model * cell + (h - 1) * gap_heads}
    height = T * cell
    fig, ax = plt.subplots(figsize=(10.5, 3.9), layout="constrained")
    ax.set_axis_off()

    def draw_stage(x0, y0, kind):
        """Cells of sequence 0 with lower left corner (x0, y0); frames by token or head.
        add_artist, not add_patch: the limits are set at the end, so the data limits that
        add_patch would update for each of the hundreds of cells are never used."""
        step = {"flat": 0.0, "mixed": 0.0, "input": 0.0, "cut": gap_cut, "heads": gap_heads}[kind]
        for t in range(T):
            for c in range(d_model):
                head = c // d_k
                left = x0 + c * cell + head * step
                grey = kind in ("input", "mixed")  # every head reads all of x; W_o mixes them
                colour = "0.6" if grey else HEAD_COLOURS[head]
                ax.add_artist(plt.Rectangle((left, y0 + (T - 1 - t) * cell), cell, cell,
                                            facecolor=colour, edgecolor="white",
                                            linewidth=0.6))
        frame = {"lw": 1.2, "edgecolor": "black", "facecolor": "none"}
        if kind == "heads":
            for i in range(h):
                ax.add_artist(plt.Rectangle((x0 + i * (d_k * cell + step), y0), d_k * cell,
                                            height, **frame))
        else:
            for t in range(T):
                ax.add_artist(plt.Rectangle((x0, y0 + t * cell), widths[kind], cell, **frame))

    def row(stages, ops, y0, right_to_left):
        xs, pos = [], 0.0
        for _, _, kind, _ in stages:
            xs.append(pos)
            pos += widths[kind] + arrow
        total = pos - arrow
        if right_to_left:  # the merge runs back along the bottom row
            xs = [total - x_ - widths[s[2]] for x_, s in zip(xs, stages, strict=True)]
        for (name, a, kind, names), x0 in zip(stages, xs, strict=True):
            draw_stage(x0, y0, kind)
            mid = x0 + widths[kind] / 2
            ax.text(mid, y0 + height + 0.12, name, ha="center", va="bottom", fontsize=9,
                    fontweight="bold")
            ax.text(mid, y0 - 0.12, shape(a, names), ha="center", va="top", fontsize=8.5,
                    family="monospace")
        for k, op in enumerate(ops):
            a_kind, b_kind = stages[k][2], stages[k + 1][2]
            if right_to_left:
                start, end = xs[k], xs[k + 1] + widths[b_kind]
            else:
                start, end = xs[k] + widths[a_kind], xs[k + 1]
            y = y0 + height / 2
            ax.annotate("", xy=(end + (0.08 if right_to_left else -0.08), y),
                        xytext=(start + (-0.08 if right_to_left else 0.08), y),
                        arrowprops={"arrowstyle": "->", "lw": 1.4})
            ax.text((start + end) / 2, y + 0.1, op, ha="center", va="bottom", fontsize=8.5)
        return xs, total

    y_top, y_bottom = height + 2.3, 0.0  # room for the shapes above and the names below
    xs_top, total = row(top, ops_top, y_top, False)
    xs_bottom, _ = row(bottom, ops_bottom, y_bottom, True)
    x_heads = xs_top[-1] + widths["heads"] / 2
    ax.annotate("", xy=(x_heads, y_bottom + height + 0.55), xytext=(x_heads, y_top - 0.75),
                arrowprops={"arrowstyle": "->", "lw": 1.4})
    ax.text(x_heads - 0.15, (y_top - 0.7 + y_bottom + height + 0.45) / 2,
            "Attention(Q, K, V) in every head:\none batched call, no loop", ha="right",
            va="center", fontsize=8.5)
    ax.text(0, y_top + height + 0.75, f"sequence 0 of B = {B} shown; colour = head "
            f"(h = {h} heads of d_k = {d_k} features), from Q on: every head reads all of x "
            "(grey)", fontsize=8.5, va="bottom")
    ax.set_xlim(-0.2, total + 0.2)
    ax.set_ylim(y_bottom - 0.95, y_top + height + 1.05)
    ax.set_aspect("equal")
    return fig


# ── 05 · One block, Post-LN and Pre-LN


def _sizes_05(obj):
    """(d_model, h, d_ff, N or None) of an EncoderBlock, a Stack, a Transformer or a config."""
    c = getattr(obj, "config", obj)
    n = len(c.layers) if hasattr(c, "layers") else getattr(c, "n_layers", None)
    c = c.layers[0] if hasattr(c, "layers") else c
    if hasattr(c, "self_attn"):
        return c.d_model, c.self_attn.n_heads, c.ffn.d_ff, n
    return c.d_model, c.n_heads, c.d_ff, n


def block_orders(block_or_config):
    """One encoder block in both orders, side by side: Post-LN (the paper: add, then LayerNorm,
    on the residual stream itself) and Pre-LN (LayerNorm on the branch into each sub-layer, the
    sum never normalised, one final LayerNorm after the stack). The residual paths are the
    arrows that skip each sub-layer. d_model, h and d_ff are read from the EncoderBlock, Stack,
    Transformer or configuration passed in."""
    d, h, d_ff, n = _sizes_05(block_or_config)
    sublayers = [("self", f"multi-head self-attention\nh = {h} heads of d_k = {d // h}",
                  "attention"),
                 ("ffn", f"feed-forward\n{d} → {d_ff} → {d}, ReLU", "ffn")]
    fig = plt.figure(figsize=(10.0, 6.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    width, y0 = 3.3, 0.75
    n_text = "N" if n is None else f"N = {n}"
    tops = {}  # the centre of each column -> the top of what it draws
    for x0, norm_first in ((1.0, False), (6.0, True)):  # Post-LN left, Pre-LN right
        cx = x0 + width / 2
        ax.text(cx, 0.45, f"x: (B, T, {d}), the residual stream", ha="center", va="center",
                fontsize=9)
        top, _ = _stack_06(ax, x0, width, y0, sublayers, norm_first, side=-1, separate_add=True)
        ax.add_patch(plt.Rectangle((x0 - 0.45, y0 - 0.05), width + 0.6, top - y0 + 0.15,
                                   fill=False, ec="0.45", lw=1.0, ls=(0, (4, 2))))
        ax.text(x0 + width + 0.3, (y0 + top) / 2, f"one block (of {n_text})", rotation=90,
                ha="center", va="center", fontsize=9)
        carried = ("skip: x", "skip: the sum") if norm_first else ("skip: x", "skip: LN output")
        join = 1.69 if norm_first else 1.15  # from a branch's split to its add, as _stack_06 draws
        for k in range(2):  # label each residual path: what it carries past the sub-layer
            y_mid = y0 + k * 1.86 + (0.1 + join) / 2
            ax.text(x0 - 0.3, y_mid, carried[k], rotation=90, ha="center", va="center",
                    fontsize=8, color="0.3")
        if norm_first:
            top = _final_norm_06(ax, x0, width, top + 0.15)
        tops[x0 + width / 2] = top
    top = max(tops.values()) + 0.3
    for cx, block_top in tops.items():
        _arrow_06(ax, (cx, block_top), (cx, top))
    ax.text(1.0 + width / 2, top + 0.1, "output: every position normalised (std 1)",
            ha="center", va="bottom", fontsize=9)
    ax.text(6.0 + width / 2, top + 0.1, "output normalised only by the final LayerNorm",
            ha="center", va="bottom", fontsize=9)
    notes = {"Post-LN (the paper)": "x = LN(x + Sublayer(x)): the LayerNorm sits on the stream;\n"
             "the second skip carries LN's output",
             "Pre-LN": "x = x + Sublayer(LN(x)): the LayerNorm sits on the branch;\n"
             "both skips carry the un-normalised sum"}
    for x0, name in ((1.0, "Post-LN (the paper)"), (6.0, "Pre-LN")):
        ax.text(x0 + width / 2, top + 1.05, name, ha="center", va="bottom", fontsize=11,
                fontweight="bold")
        ax.text(x0 + width / 2, top + 1.0, notes[name], ha="center", va="top", fontsize=8.5)
    height = top + 1.45
    ax.set(xlim=(0, 10), ylim=(0, height))
    fig.set_size_inches(10.0, height)
    return fig


# ── 06 · The encoder–decoder


_FILL_06 = {"attention": "#fbd5b0", "ffn": "#cfe2f3", "norm": "#f3eca0", "embed": "#f4cccc",
            "out": "#dcd3f0", "add": "#e4e4e4"}


def _box_06(ax, x, y, w, h, text, kind, fontsize=8.5):
    """A rounded box from (x, y) to (x + w, y + h) with centred text; returns its centre."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                fc=_FILL_06[kind], ec="0.25", lw=0.9))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
            linespacing=1.25)
    return x + w / 2, y + h / 2


def _arrow_06(ax, start, end, **style):
    style = {"arrowstyle": "-|>", "lw": 0.9, "color": "0.2", "shrinkA": 0, "shrinkB": 0, **style}
    ax.annotate("", xy=end, xytext=start, arrowprops=style)


def _stack_06(ax, x, width, y, sublayers, norm_first, side, separate_add=False,
              norm="LayerNorm"):
    """Draw the sub-layers of one block upwards from y, with residual branches on `side`
    (-1 left, +1 right); returns the block's top and the box positions (y0, y1) by name.
    separate_add (notebook 05): the add and the norm as two boxes each. norm: its name."""
    gap, main_h, norm_h = 0.2, 0.58, 0.34
    edge = x if side < 0 else x + width
    rail = edge + side * 0.16  # where the residual branches run
    cx, where = x + width / 2, {}
    short = "LN" if norm == "LayerNorm" else norm
    for name, text, kind in sublayers:
        steps = ([(norm, "norm", norm_h)] if norm_first else []) + [(text, kind, main_h)] \
            + [(f"add: x + sublayer({short}(x))" if norm_first else f"add & {norm}", "norm",
                norm_h)]
        if separate_add:
            steps[-1] = (steps[-1][0] if norm_first else "add: x + sublayer(x)", "add", norm_h)
            steps += [] if norm_first else [(norm, "norm", norm_h)]
        split = y + gap / 2  # the residual branch leaves the main path here
        for label, box_kind, h in steps:
            _arrow_06(ax, (cx, y), (cx, y + gap))
            y += gap
            _box_06(ax, x, y, width, h, label, box_kind)
            if label == text:
                where[name] = (y, y + h)
            y += h
            if label.startswith("add"):
                add_mid = y - norm_h / 2
        ax.plot([cx, rail, rail], [split, split, add_mid], color="0.2", lw=0.9)
        _arrow_06(ax, (rail, add_mid), (edge, add_mid))
    return y, where


def _final_norm_06(ax, x, width, y, norm="LayerNorm"):
    """Pre-LN: one norm after the last block of a stack; returns its top."""
    _arrow_06(ax, (x + width / 2, y + 0.15), (x + width / 2, y + 0.4))
    _box_06(ax, x, y + 0.4, width, 0.34, f"final {norm} (after the last block)", "norm")
    return y + 0.74


def encoder_decoder(model_or_config):
    """The whole encoder-decoder (paper Figure 1) for a Transformer or a TransformerConfig: the
    embeddings x sqrt(d_model) + positional encoding, N encoder blocks (self-attention with the
    source padding mask, feed-forward), N decoder blocks (masked self-attention with the causal +
    target padding mask, cross-attention whose keys and values are the encoder's output, with
    the source padding mask, feed-forward), every residual add and LayerNorm (Post-LN, or Pre-LN
    when norm_first), the output projection and the softmax. Every size is read from the
    configuration."""
    c = getattr(model_or_config, "config", model_or_config)
    d, h, d_ff, n, d_k = c.d_model, c.n_heads, c.d_ff, c.n_layers, c.d_model // c.n_heads
    sv, tv = f"{c.src_vocab:,}", f"{c.tgt_vocab:,}"
    pad = "none (pad_id=None)" if c.pad_id is None else "source padding (B, 1, 1, S)"
    fig = plt.figure(figsize=(10.0, 8.0))  # its height follows what is drawn, below
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    enc_x, dec_x, width = 0.75, 5.55, 3.7
    enc_c, dec_c = enc_x + width / 2, dec_x + width / 2

    # inputs and embeddings
    ax.text(enc_c, 0.2, "source token ids (B, S)", ha="center", va="center", fontsize=9)
    ax.text(dec_c, 0.2, "target token ids (B, T): <bos> + the target shifted right",
            ha="center", va="center", fontsize=9)
    embed_src = "shared embedding" if c.share_embeddings else "source embedding"
    embed_tgt = "shared embedding" if c.share_embeddings else "target embedding"
    for cx, x0, label, vocab in ((enc_c, enc_x, embed_src, sv), (dec_c, dec_x, embed_tgt, tv)):
        _arrow_06(ax, (cx, 0.35), (cx, 0.6))
        _box_06(ax, x0, 0.6, width, 0.62, f"{label} ({vocab} × {d}) × √d_model\n"
             f"+ positional encoding (sin/cos, {c.max_len} × {d})", "embed")
    y0 = 1.55  # the stacks' frames start here

    encoder = [("self", f"multi-head self-attention (h = {h}, d_k = {d_k})\nmask: {pad}",
                "attention"),
               ("ffn", f"feed-forward {d} → {d_ff} → {d}, ReLU", "ffn")]
    self_mask = "causal" if c.pad_id is None else "causal + target padding"  # (B, 1, T, T)
    decoder = [("self", f"masked multi-head self-attention (h = {h})\nmask: {self_mask} "
                f"(B, 1, T, T)", "attention"),
               ("cross", f"cross-attention: Q from the decoder, K, V =\nencoder output · mask: "
                f"{pad}", "attention"),
               ("ffn", f"feed-forward {d} → {d_ff} → {d}, ReLU", "ffn")]
    enc_top, _ = _stack_06(ax, enc_x, width, y0, encoder, c.norm_first, side=-1)
    dec_top, dec_boxes = _stack_06(ax, dec_x, width, y0, decoder, c.norm_first, side=+1)
    for x0, top, label, lx in ((enc_x, enc_top, "encoder", enc_x - 0.42),
                               (dec_x, dec_top, "decoder", dec_x + width + 0.42)):
        ax.add_patch(plt.Rectangle((x0 - 0.3, y0 - 0.02), width + 0.6, top - y0 + 0.17, fill=False,
                               ec="0.45", lw=1.0, ls=(0, (4, 2))))
        ax.text(lx, (y0 + top) / 2, f"{label} block × N = {n}", rotation=90, ha="center",
                va="center", fontsize=9.5, fontweight="bold")

    if c.norm_first:  # one LayerNorm after each stack, outside the repeated block
        enc_top, dec_top = (_final_norm_06(ax, x0, width, top + 0.15)
                            for x0, top in ((enc_x, enc_top), (dec_x, dec_top)))
    # the encoder's output feeds every decoder block's cross-attention
    cross_y = sum(dec_boxes["cross"]) / 2
    bend_y, bend_x = enc_top + 0.45, dec_x - 0.45
    ax.plot([enc_c, enc_c, bend_x, bend_x], [enc_top, bend_y, bend_y, cross_y], color="tab:red",
            lw=1.3)
    _arrow_06(ax, (bend_x, cross_y), (dec_x, cross_y), color="tab:red", lw=1.3)
    ax.text((enc_c + bend_x) / 2, bend_y + 0.05, f"encoder output (memory)\n(B, S, {d}) → "
            f"K, V of every decoder block", ha="center", va="bottom", fontsize=8.5,
            color="tab:red")

    # output projection and softmax
    _arrow_06(ax, (dec_c, dec_top), (dec_c, dec_top + 0.4))
    y = dec_top + 0.4
    linear = (f"linear {d} → {tv}, tied: x @ Eᵀ" if c.tie_output else f"linear {d} → {tv}")
    _box_06(ax, dec_x, y, width, 0.4, linear, "out")
    _arrow_06(ax, (dec_c, y + 0.4), (dec_c, y + 0.6))  # then the softmax
    _box_06(ax, dec_x, y + 0.6, width, 0.4, f"softmax → next-token probabilities (B, T, {tv})",
         "out")
    norm = "Pre-LN: x + Sublayer(LN(x))" if c.norm_first else "Post-LN: x = LN(x + Sublayer(x))"
    top = y + 1.0 + 0.85  # one data unit is one inch
    ax.set(xlim=(0, 10), ylim=(0, top))
    fig.set_size_inches(10.0, top)
    ax.text(5.0, top - 0.12, f"The Transformer, {norm}", ha="center", va="top",
            fontsize=11.5, fontweight="bold")
    ax.text(5.0, top - 0.47, f"d_model = {d}, h = {h} heads of d_k = {d_k}, d_ff = {d_ff}, "
            f"N = {n}; B = batch, S = source length, T = target length", ha="center", va="top",
            fontsize=9)
    return fig


# ── 07 · The backward pass


_GRAD_07 = "tab:red"  # the gradient path; the forward path is drawn faintly in grey


def _pass_box_07(ax, x, y, w, h, forward, backward, kind):
    """A faint box holding the forward step (grey, at the top) and, drawn strongly below it, the
    function of helpers/training.py that computes its gradient."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                fc=_FILL_06[kind], ec="0.6", lw=0.8, alpha=0.4))
    ax.text(x + w / 2, y + h - 0.16, forward, ha="center", va="center", fontsize=8,
            color="0.5")
    ax.text(x + w / 2, y + (h - 0.3) / 2, backward, ha="center", va="center", fontsize=8,
            color=_GRAD_07, fontweight="bold", linespacing=1.2)


def _both_ways_07(ax, cx, y_low, y_high, label=None):
    """Between two boxes of a column: the forward arrow up (faint), the gradient down (strong)."""
    _arrow_06(ax, (cx - 0.7, y_low), (cx - 0.7, y_high), color="0.7", lw=0.8)
    _arrow_06(ax, (cx + 0.7, y_high), (cx + 0.7, y_low), color=_GRAD_07, lw=1.8)
    if label:
        ax.text(cx + 0.8, (y_low + y_high) / 2, label, ha="left", va="center", fontsize=8,
                color=_GRAD_07)


def backward_pass(model_or_config):
    """The backward pass of the whole Transformer (Transformer.backward) for a Transformer or a
    TransformerConfig: the forward path drawn faintly (token ids, embeddings x sqrt(d_model) + PE
    and dropout, the encoder stack, the memory, the decoder stack, the output projection, the
    loss) and the gradient path strongly, in reverse, each step labelled with the function of
    helpers/training.py that computes it: d_logits = (p - q) / n, the output projection (tied:
    its gradient adds into the target embedding), the decoder blocks last first, d_memory summed
    over the decoder's N cross-attentions, the encoder blocks last first, the embeddings
    (one_hot.T @ rows). Every size is read from the configuration."""
    c = getattr(model_or_config, "config", model_or_config)
    d, n, sv, tv = c.d_model, c.n_layers, f"{c.src_vocab:,}", f"{c.tgt_vocab:,}"
    shared = c.share_embeddings
    enc_x, dec_x, w, gap, h, h_embed = 0.55, 4.95, 3.7, 0.4, 0.62, 0.95 if shared else 0.8
    enc_c, dec_c = enc_x + w / 2, dec_x + w / 2
    y0 = 0.5 + h_embed + gap  # the first block
    top = y0 + n * (h + gap) - gap  # the top of the last block
    proj_h = h + 0.22  # the output projection's box: two lines of gradient
    loss_y = top + gap + proj_h + gap
    height = loss_y + h + 0.6
    fig = plt.figure(figsize=(9.9, height))  # one data unit is one inch
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    ax.set(xlim=(0, 9.9), ylim=(0, height))

    # the embeddings: the first forward step, the last backward one
    for cx, x0, side, vocab in ((enc_c, enc_x, "source", sv), (dec_c, dec_x, "target", tv)):
        ax.text(cx, 0.22, f"{side} token ids (B, {side[0].upper()})", ha="center",
                va="center", fontsize=8, color="0.5")
        _arrow_06(ax, (cx, 0.33), (cx, 0.5), color="0.7", lw=0.8)
        name = "shared embedding" if shared else f"{side} embedding"
        back = ("Dropout.backward, then embedding_backward:\n"
                "one_hot.T @ rows: a repeated token's rows add up")
        back += "\nshared: one matrix, d_src + d_tgt" if shared else ""
        _pass_box_07(ax, x0, 0.5, w, h_embed, f"{name} ({vocab} × {d}) × √d_model + PE, dropout",
                     back, "embed")
        _both_ways_07(ax, cx, 0.5 + h_embed, y0)

    # the two stacks, block by block; the gradient leaves the last block first
    for i in range(n):
        y = y0 + i * (h + gap)
        _pass_box_07(ax, enc_x, y, w, h, f"encoder block {i}: self-attention → FFN",
                     "EncoderBlock.backward: 2 × residual_backward", "ffn")
        _pass_box_07(ax, dec_x, y, w, h, f"decoder block {i}: masked self-attn → cross-attn "
                     "→ FFN", "DecoderBlock.backward: 3 × residual_backward", "attention")
        if i:
            _both_ways_07(ax, enc_c, y - gap, y)
            _both_ways_07(ax, dec_c, y - gap, y)
    for x0, label, lx in ((enc_x, "encoder", enc_x - 0.3), (dec_x, "decoder", dec_x + w + 0.3)):
        ax.add_patch(plt.Rectangle((x0 - 0.12, y0 - 0.12), w + 0.24, top - y0 + 0.24, fill=False,
                                   ec="0.6", lw=0.8, ls=(0, (4, 2))))
        ax.text(lx, (y0 + top) / 2, f"{label} × N = {n}: Stack.backward, last block first",
                rotation=90, ha="center", va="center", fontsize=8, color=_GRAD_07)

    # the memory: read by every decoder block's cross-attention, its gradient summed
    mem_y = top + gap
    _pass_box_07(ax, enc_x, mem_y, w, h, f"memory (B, S, {d}): K, V of every cross-attention",
                 f"d_memory = Σ dK + dV over the N = {n} blocks", "norm")
    _both_ways_07(ax, enc_c, top, mem_y, f"d_memory (B, S, {d})")
    fwd_bus, grad_bus = enc_x + w + 0.15, enc_x + w + 0.32
    ax.plot([enc_x + w, fwd_bus, fwd_bus], [mem_y + h / 2 + 0.12] * 2 + [y0 + h / 2 + 0.12],
            color="0.7", lw=0.8)
    ax.plot([grad_bus, grad_bus], [y0 + h / 2 - 0.12, mem_y + h / 2 - 0.12], color=_GRAD_07,
            lw=1.8)
    _arrow_06(ax, (grad_bus, mem_y + h / 2 - 0.12), (enc_x + w, mem_y + h / 2 - 0.12),
              color=_GRAD_07, lw=1.8)
    for i in range(n):
        y = y0 + i * (h + gap) + h / 2
        _arrow_06(ax, (fwd_bus, y + 0.12), (dec_x, y + 0.12), color="0.7", lw=0.8)
        ax.plot([dec_x, grad_bus], [y - 0.12] * 2, color=_GRAD_07, lw=1.8)
        ax.plot(grad_bus, y - 0.12, "o", color=_GRAD_07, ms=4)  # where the sum gathers it

    # the output projection and the loss, where the gradient starts
    if c.tie_output:
        forward = f"logits = x @ Eᵀ, E the target embedding ({tv} × {d})"
        back = "Transformer.backward: d_x = d_logits @ E,\nand d_logitsᵀ x for E (tied)"
    else:
        forward = f"logits = x @ W_out + b_out, W_out ({d} × {tv})"
        back = "Transformer.backward → linear_backward:\nd_x, d_W_out, d_b_out"
    _pass_box_07(ax, dec_x, top + gap, w, proj_h, forward, back, "out")
    _both_ways_07(ax, dec_c, top, top + gap, f"d_x (B, T, {d})")
    _pass_box_07(ax, dec_x, loss_y, w, h, "loss = cross_entropy(logits, targets), label "
                 "smoothing", "cross_entropy: d_logits = (p − q) / n", "out")
    _both_ways_07(ax, dec_c, loss_y - gap, loss_y, f"d_logits (B, T, {tv})")
    if c.tie_output:  # the tied matrix's second gradient, added into the target embedding
        rail = dec_x + w + 0.65
        ax.plot([dec_x + w, rail, rail], [top + gap + 0.3] * 2 + [0.5 + h_embed / 2],
                color=_GRAD_07, lw=1.8, ls=(0, (5, 2)))
        _arrow_06(ax, (rail, 0.5 + h_embed / 2), (dec_x + w, 0.5 + h_embed / 2),
                  color=_GRAD_07, lw=1.8)
        ax.text(rail + 0.22, (0.5 + top + gap) / 2, "tied: d_logitsᵀ x ADDS into E's gradient",
                rotation=90, ha="center", va="center", fontsize=8, color=_GRAD_07)

    tied = "tied to the target embedding" if c.tie_output else "untied (W_out, b_out)"
    ax.text(4.95, height - 0.12, "The backward pass: Transformer.backward, the gradient (red) "
            "against the forward path (grey)", ha="center", va="top", fontsize=10.5,
            fontweight="bold")
    ax.text(4.95, height - 0.45, f"d_model = {d}, N = {n}, vocabulary {sv} → {tv}, output "
            f"{tied}{', shared embeddings' if shared else ''}; B batch, S, T lengths",
            ha="center", va="top", fontsize=8.5)
    return fig


# ── 09 · The Transformer today


def decoder_only_blocks(old, new):
    """Two decoder-only models side by side, bottom to top, for two DecoderOnlyConfigs (or
    models): `old` (the 2017 pieces, say) on the left, `new` (today's) on the right. Each shows
    how positions enter (added to the token vectors, or turned into the queries and keys), one
    block with its norm, attention (heads and key/value heads) and feed-forward network, the
    residual paths, and the final norm of a pre-norm stack. Every size is read from the
    configurations."""
    fig = plt.figure(figsize=(10.0, 6.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    width, y0, tops = 3.3, 1.35, {}
    for x0, c in ((1.0, getattr(old, "config", old)), (6.0, getattr(new, "config", new))):
        cx, norm = x0 + width / 2, "RMSNorm" if c.norm == "rms" else "LayerNorm"
        g = c.n_kv_heads or c.n_heads
        kind = ("multi-head" if g == c.n_heads else "multi-query" if g == 1 else "grouped-query")
        rope = "\nRoPE turns Q and K by position" if c.position == "rope" else ""
        ffn = (f"SwiGLU: {c.d_model} → 2 × {c.d_ff} → {c.d_model}" if c.ffn == "swiglu"
               else f"feed-forward: {c.d_model} → {c.d_ff} → {c.d_model}, ReLU")
        sublayers = [("self", f"masked {kind} self-attention\n{c.n_heads} query heads, {g} "
                      f"key/value head{'s' if g > 1 else ''}{rope}", "attention"),
                     ("ffn", ffn, "ffn")]
        entry = {"sinusoidal": "token vectors × √d_model + sinusoidal PE",
                 "rope": "token vectors × √d_model (no position added)",
                 "none": "token vectors × √d_model (no position at all)"}[c.position]
        ax.text(cx, 0.45, "tokens (B, T)", ha="center", va="center", fontsize=9)
        _arrow_06(ax, (cx, 0.6), (cx, 0.8))
        _box_06(ax, x0, 0.8, width, 0.4, entry, "embed")
        top, _ = _stack_06(ax, x0, width, y0 - 0.15, sublayers, c.norm_first, side=-1,
                           norm=norm)
        ax.add_patch(plt.Rectangle((x0 - 0.45, y0 - 0.1), width + 0.6, top - y0 + 0.2,
                                   fill=False, ec="0.45", lw=1.0, ls=(0, (4, 2))))
        ax.text(x0 + width + 0.3, (y0 + top) / 2, f"one block (of N = {c.n_layers})",
                rotation=90, ha="center", va="center", fontsize=9)
        if c.norm_first:
            top = _final_norm_06(ax, x0, width, top + 0.15, norm)
        _arrow_06(ax, (cx, top + 0.05), (cx, top + 0.3))
        _box_06(ax, x0, top + 0.3, width, 0.4, f"logits of the next token: {c.vocab}",
                "out")
        tops[x0] = top + 0.7
    top = max(tops.values())
    for x0, (name, note) in zip(tops, (("2017", "Post-LN: add, then the norm, on the stream"),
                                       ("today", "pre-norm: the norm on the branch only"))):
        ax.text(x0 + width / 2, top + 0.55, name, ha="center", va="bottom", fontsize=11,
                fontweight="bold")
        ax.text(x0 + width / 2, top + 0.5, note, ha="center", va="top", fontsize=8.5)
    height = top + 0.95
    ax.set(xlim=(0, 10), ylim=(0, height))
    fig.set_size_inches(10.0, height)
    return fig
