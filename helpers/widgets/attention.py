"""Explorers of notebooks 01 (scaled dot-product attention) and 02 (multi-head attention)."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.analysis import entropy
from helpers.module import clear_caches
from helpers.plots import heatmap, heatmap_grid
from helpers.transformer import MultiHeadAttention, scaled_dot_product_attention, softmax
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["POWERS_OF_TWO", "HEAD_COUNTS", "scaling_explorer", "query_explorer", "head_explorer"]


# ── notebook 01 · scaled dot-product attention ──────────────────────────────────────────────

POWERS_OF_TWO = [2**k for k in range(0, 11)]  # d_k from 1 to 1024


def scaling_explorer(T: int = 8, seed: int = 0) -> Explorer:
    """d_k slider and a scaling toggle over random unit-variance queries and keys (T of each).

    The same random draw is used for both positions of the toggle, so the only change you see
    is the division by sqrt(d_k).
    """
    controls = {
        "d_k": W.SelectionSlider(options=POWERS_OF_TWO, value=64, description="d_k"),
        "scaled": W.ToggleButton(value=True, description="divide by √d_k"),
    }

    def compute(d_k, scaled):
        rng = np.random.default_rng([seed, d_k])
        Q = rng.standard_normal((T, d_k))  # random, unit variance per component
        K = rng.standard_normal((T, d_k))
        if scaled:
            _, weights = scaled_dot_product_attention(Q, K, K)
        else:
            weights = softmax(Q @ K.swapaxes(-1, -2), axis=-1)
        return {
            "weights": weights,
            "max_weight": float(weights.max(axis=-1).mean()),
            "entropy": float(entropy(weights).mean()),
        }

    def title(values):
        return (f"random Q, K · d_k = {values['d_k']} · "
                + ("scaled" if values["scaled"] else "NOT scaled"))

    def draw(fig, result, values):
        ax = fig.subplots()
        image = heatmap(result["weights"], [f"q{i}" for i in range(T)],
                        [f"k{j}" for j in range(T)], ax=ax, vmin=0, vmax=1, title=title(values),
                        annotate=False)  # 64 numbers would triple the update time
        changing = animate([image, ax.title])

        def refresh(result, values):  # same layout, new numbers
            image.set_data(result["weights"])
            ax.set_title(title(values))
            return changing

        return refresh

    def status(result, values):
        return [
            ("mean max weight", f"{result['max_weight']:.3f}"),
            ("mean entropy", f"{result['entropy']:.3f} nats (uniform = {np.log(T):.3f})"),
        ]

    return Explorer(controls, compute, draw, status, figsize=(5.6, 4.4),
                    title="Scaling explorer",
                    note="Random Q and K (unit variance), not learned. Move d_k; toggle scaling.")


def query_explorer(examples: dict[str, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]],
                   query: int = -1) -> Explorer:
    """Pick an example sentence and a query token; see that query's weights over the keys.

    examples: name -> (tokens, Q, K, V) with Q, K of shape (T, d_k) and V of shape (T, d_v).
    """
    names = list(examples)
    if not names:
        raise ValueError("query_explorer needs at least one example")

    def token_options(name):
        tokens = examples[name][0]
        return [(f"{i}: {t}", i) for i, t in enumerate(tokens)]

    first = token_options(names[0])
    controls = {
        "sentence": W.Dropdown(options=names, value=names[0], description="sentence"),
        "query": W.Dropdown(options=first, value=first[query][1], description="query"),
    }

    def follow_sentence(change, controls):  # keep the query position when the sentence changes
        if change["owner"] is not controls["sentence"]:
            return
        options = token_options(change["new"])
        keep = min(controls["query"].value, len(options) - 1)
        controls["query"].options = options  # this resets the value to the first option
        controls["query"].value = keep

    def compute(sentence, query):
        tokens, Q, K, V = examples[sentence]
        output, weights = scaled_dot_product_attention(Q, K, V)
        return {"tokens": tokens, "weights": weights, "row": weights[query],
                "output": output[query], "query": query}

    def draw(fig, result, values):
        ax_bar, ax_map = fig.subplots(1, 2, width_ratios=[1, 1.25])
        changing, refresh_panels = join_panels(_query_row_panel(ax_bar, result),
                                               _query_map_panel(ax_map, result))
        animate(changing)
        shown = result["tokens"]

        def refresh(result, values):
            if result["tokens"] is not shown:
                return None  # another sentence: new labels, full redraw
            return refresh_panels(result, values)

        return refresh

    def status(result, values):
        tokens, row = result["tokens"], result["row"]
        top = int(np.argmax(row))
        return [("strongest key", f"'{tokens[top]}' ({row[top]:.3f})"),
                ("row sum", f"{row.sum():.3f}")]

    return Explorer(controls, compute, draw, status, link=follow_sentence, figsize=(7.6, 3.4),
                    layout_key=lambda values: values["sentence"],
                    title="Query explorer",
                    note="Hand-built example weights (not learned). Pick a sentence and a query.")


def _query_row_panel(ax, result):
    """Bars: the chosen query's weight on every key, each with its value."""
    tokens, row, q = result["tokens"], result["row"], result["query"]
    bars = ax.barh(np.arange(len(tokens)), row, color="tab:blue")
    ax.set_yticks(np.arange(len(tokens)), tokens)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("weight")
    ax.set_title(f"query '{tokens[q]}' attends to")
    labels = [ax.text(min(w + 0.02, 0.8), j, f"{w:.2f}", va="center", fontsize=8)
              for j, w in enumerate(row)]

    def update(result, values):
        tokens, row, q = result["tokens"], result["row"], result["query"]
        for bar, label, w in zip(bars, labels, row, strict=True):
            bar.set_width(w)
            label.set_text(f"{w:.2f}")
            label.set_x(min(w + 0.02, 0.8))
        ax.set_title(f"query '{tokens[q]}' attends to")

    return [*bars, *labels, ax.title], update


def _query_map_panel(ax, result):
    """Heatmap: every query's weights, the chosen query's row framed in red."""
    tokens, q = result["tokens"], result["query"]
    heatmap(result["weights"], tokens, tokens, ax=ax, vmin=0, vmax=1, annotate=False,
            colorbar=False, title="all queries")
    lines = [ax.axhline(q + d, color="red", lw=2) for d in (-0.5, 0.5)]

    def update(result, values):
        q = result["query"]
        for line, d in zip(lines, (-0.5, 0.5), strict=True):
            line.set_ydata([q + d, q + d])

    return lines, update


# ── notebook 02 · multi-head attention ──────────────────────────────────────────────────────

HEAD_COUNTS = [1, 2, 4, 8]


def head_explorer(sentences: dict[str, list[str]], d_model: int = 64, seed: int = 0) -> Explorer:
    """Per-head attention weights of a RANDOMLY initialised MultiHeadAttention layer.

    Each token gets a fixed random embedding; for each number of heads (1, 2, 4, 8 at the same
    d_model) one layer is drawn once from its own seed. Every change runs the layer's forward
    pass again. Nothing here is learned: differences between heads come from their different
    random projections.
    """
    if not sentences:
        raise ValueError("head_explorer needs at least one sentence")
    vocab = sorted({t for tokens in sentences.values() for t in tokens})
    table_rng = np.random.default_rng([seed, 0])
    embedding = dict(zip(vocab, table_rng.standard_normal((len(vocab), d_model)), strict=True))
    layers = {h: MultiHeadAttention(d_model, h, np.random.default_rng([seed, h]))
              for h in HEAD_COUNTS}

    def head_options(n_heads):
        return [("all heads", -1)] + [(f"head {i}", i) for i in range(n_heads)]

    names = list(sentences)
    controls = {
        "sentence": W.Dropdown(options=names, value=names[0], description="sentence"),
        "n_heads": W.SelectionSlider(options=HEAD_COUNTS, value=4, description="heads"),
        "head": W.Dropdown(options=head_options(4), value=-1, description="show"),
    }

    def follow_heads(change, controls):
        if change["owner"] is not controls["n_heads"]:
            return
        keep = controls["head"].value
        controls["head"].options = head_options(change["new"])
        controls["head"].value = keep if keep < change["new"] else -1

    def compute(sentence, n_heads, head):
        tokens = sentences[sentence]
        x = np.stack([embedding[t] for t in tokens])[None]  # (1, T, d_model), random
        layer = layers[n_heads]
        out = layer.forward(x, x, x)  # (1, T, d_model)
        clear_caches(layer)  # no backward follows; layer.weights stays
        weights = layer.weights[0]  # (h, T, T)
        return {"tokens": tokens, "weights": weights, "output": out[0], "head": head,
                "entropy": entropy(weights).mean(axis=-1)}  # (h,)

    def draw(fig, result, values):
        if result["head"] == -1:
            return _all_heads_figure(fig, result)
        return _one_head_figure(fig, result)

    def status(result, values):
        ent = " ".join(f"{e:.2f}" for e in result["entropy"])
        return [("mean entropy per head (nats)", ent),
                ("uniform", f"{np.log(len(result['tokens'])):.2f}")]

    return Explorer(controls, compute, draw, status, link=follow_heads, figsize=(8.0, 4.6),
                    layout_key=lambda v: (v["sentence"], v["n_heads"], v["head"] == -1),
                    title="Head explorer",
                    note="RANDOM initial weights: the layer is untrained. "
                         "Learned heads: notebook 07.")


def _all_heads_figure(fig, result):
    """A grid of every head's weights; its layout key fixes the data, so nothing ever changes."""
    tokens, weights = result["tokens"], result["weights"]
    h = len(weights)
    heatmap_grid(weights, tokens, tokens, fig=fig, ncols=min(h, 4), annotate=False,
                 vmin=0, vmax=1, titles=[f"head {i}" for i in range(h)], xlabel=None,
                 ylabel=None, suptitle=f"{h} head(s) · random initial weights (not learned)")
    return lambda result, values: []  # same layout and data: nothing to redraw


def _one_head_figure(fig, result):
    """One head's weights, large; the fast path switches between the heads of the layer."""
    tokens, weights, head = result["tokens"], result["weights"], result["head"]
    h = len(weights)
    ax = fig.subplots()
    image = heatmap(weights[head], tokens, tokens, ax=ax, vmin=0, vmax=1, annotate=False,
                    title=f"head {head} of {h} · random initial weights (not learned)")
    changing = animate([image, ax.title])

    def refresh(result, values):
        image.set_data(result["weights"][result["head"]])
        ax.set_title(f"head {result['head']} of {h} · random initial weights (not learned)")
        return changing

    return refresh
