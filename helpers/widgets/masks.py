"""Explorer of notebook 04 (masks): the causal and padding masks on a random attention layer."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.module import clear_caches
from helpers.plots import label_fontsize
from helpers.transformer import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    positional_encoding,
)
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["MASK_WORDS", "MASK_RGB", "mask_explorer"]

MASK_WORDS = "Xiaoming returned the book to Xiaohong because she has an exam tomorrow".split()
MASK_RGB = np.array([[0.93, 0.93, 0.93], [0.84, 0.15, 0.16]])  # allowed grey, blocked red


def mask_explorer(words: list[str] | None = None, T: int = 8, n_pad: int = 3, d_model: int = 64,
                  n_heads: int = 4, seed: int = 0) -> Explorer:
    """The causal and padding masks, and the weights they give in a RANDOM attention layer.

    Positions 0 .. T - n_pad - 1 hold the first words; the last n_pad positions hold "<pad>".
    Each token (and "<pad>") has a fixed random embedding, to which the sinusoidal positional
    encoding is added. Every change builds the mask from causal_mask and padding_mask and runs a
    randomly initialised MultiHeadAttention forward pass again. The length T changes the axes (a
    full redraw, one cached figure per T); padding, the toggles and the head take the fast path.
    """
    words = list(MASK_WORDS if words is None else words)
    if len(words) < 2 or not 2 <= T <= len(words) or not 0 <= n_pad <= T:
        raise ValueError(f"need at least 2 words, 2 <= T <= len(words)={len(words)} and "
                         f"0 <= n_pad <= T; got T={T}, n_pad={n_pad}")
    vocab = sorted(set(words)) + ["<pad>"]
    table_rng = np.random.default_rng([seed, 0])
    embedding = dict(zip(vocab, table_rng.standard_normal((len(vocab), d_model)), strict=True))
    layer = MultiHeadAttention(d_model, n_heads, np.random.default_rng([seed, 1]))  # random
    PE = positional_encoding(len(words), d_model)  # (T_max, d_model)

    controls = {
        "T": W.IntSlider(value=T, min=2, max=len(words), description="length T",
                         continuous_update=False),
        "n_pad": W.IntSlider(value=n_pad, min=0, max=T, description="padding"),
        "causal": W.ToggleButton(value=True, description="causal mask"),
        "padding": W.ToggleButton(value=True, description="padding mask"),
        "head": W.Dropdown(options=[(f"head {i}", i) for i in range(n_heads)], value=0,
                           description="head"),
    }

    def follow_length(change, controls):  # at most T padding tokens
        if change["owner"] is controls["T"]:
            controls["n_pad"].max = change["new"]  # clips n_pad if it was beyond

    def compute(T, n_pad, causal, padding, head):
        if not (2 <= T <= len(words) and 0 <= n_pad <= T and 0 <= head < n_heads):
            raise ValueError(f"T={T}, n_pad={n_pad}, head={head} out of range")
        n_real = T - n_pad
        tokens = words[:n_real] + ["<pad>"] * n_pad
        x = (np.stack([embedding[t] for t in tokens]) + PE[:T])[None]  # (1, T, d_model)
        mask = np.zeros((1, 1, T, T), dtype=bool)  # (B, h, T_q, T_k) after broadcasting
        if causal:
            mask = mask | causal_mask(T)  # (T, T) broadcasts
        if padding:
            mask = mask | padding_mask([n_real], T)  # (1, 1, 1, T) broadcasts
        output = layer.forward(x, x, x, mask)  # (1, T, d_model)
        clear_caches(layer)  # no backward follows; layer.weights stays
        weights = layer.weights[0]  # (h, T, T)
        mask = mask[0, 0]  # (T, T)
        full = mask.all(axis=-1)  # (T,) queries that may see no key at all
        sums = weights[head].sum(axis=-1)  # (T,)
        return {"tokens": tokens, "mask": mask, "weights": weights[head], "all_weights": weights,
                "output": output[0], "fully_blocked": full, "head": head, "x": x[0],
                "layer": layer,
                "row_sum_error": float(np.abs(sums[~full] - 1).max(initial=0.0)),
                "blocked_weight": float(np.abs(weights[:, mask]).max(initial=0.0))}

    def status(result, values):
        mask, T = result["mask"], len(result["tokens"])
        return [
            ("blocked", f"{int(mask.sum())} of {T * T} query–key pairs"),
            ("fully blocked queries", f"{int(result['fully_blocked'].sum())} (zero weights)"),
            ("max |row sum − 1| (other rows)", f"{result['row_sum_error']:.1e}"),
            ("max weight on a blocked key (all heads)", f"{result['blocked_weight']:.1f}"),
        ]

    return Explorer(controls, compute, _mask_figure, status, link=follow_length,
                    figsize=(8.6, 4.6), layout_key=lambda values: values["T"],
                    title="Mask explorer",
                    note="RANDOM embeddings and a RANDOM, untrained attention layer: the masks "
                         "are exact, the weights mean nothing yet.")


def _mask_figure(fig, result, values):
    """The mask and the weights side by side on fixed margins; one figure per length T."""
    fig.set_layout_engine("none")  # fixed margins: faster than a constrained layout
    T = len(result["tokens"])
    ax_mask = fig.add_axes((0.13, 0.25, 0.33, 0.57))
    ax_w = fig.add_axes((0.55, 0.25, 0.33, 0.57))
    cax = fig.add_axes((0.9, 0.25, 0.015, 0.57))
    changing, refresh_panels = join_panels(_mask_panel(ax_mask, result),
                                           _weights_panel(fig, ax_w, cax, result))
    fig.suptitle("Masks on a real MultiHeadAttention forward pass (RANDOM weights, untrained)",
                 fontsize=10.5)

    def refresh(result, values):
        if len(result["tokens"]) != T:
            return None  # another length: new axes, full redraw
        return refresh_panels(result, values)

    refresh(result, values)
    animate(changing)
    return refresh


def _token_labels(ax, T, *, queries: bool):
    """T key labels under `ax` (and T query labels left of it), as texts the fast path sets."""
    size = label_fontsize(T) * 0.95
    ax.set_xticks(np.arange(T), [""] * T)
    ax.set_yticks(np.arange(T), [""] * T)
    ax.tick_params(length=2)
    ax.set_xlabel("key", labelpad=50)
    labels = [(j, ax.text(j, -0.02, "", transform=ax.get_xaxis_transform(), rotation=90,
                          ha="center", va="top", fontsize=size)) for j in range(T)]
    if queries:
        labels += [(i, ax.text(-0.02, i, "", transform=ax.get_yaxis_transform(), ha="right",
                               va="center", fontsize=size)) for i in range(T)]
        ax.set_ylabel("query", labelpad=60)
    ax.title.set_fontsize(9)
    return labels


def _set_token_labels(labels, tokens):
    for position, label in labels:
        label.set_text(tokens[position])


def _mask_panel(ax, result):
    """The mask as cells, red = blocked, grey = allowed, with the tokens on both axes."""
    T = len(result["tokens"])
    image = ax.imshow(MASK_RGB[result["mask"].astype(int)], interpolation="nearest")
    edges = np.arange(T + 1) - 0.5
    grid = [ax.hlines(edges, -0.5, T - 0.5, color="white", lw=0.8),
            ax.vlines(edges, -0.5, T - 0.5, color="white", lw=0.8)]
    labels = _token_labels(ax, T, queries=True)

    def update(result, values):
        image.set_data(MASK_RGB[result["mask"].astype(int)])  # (T, T, 3)
        _set_token_labels(labels, result["tokens"])
        parts = [name for name in ("causal", "padding") if values[name]]
        shown = " | ".join(parts) if parts else "none"
        ax.set_title(f"mask: {shown}\nred = blocked, grey = allowed")

    return [image, *grid, *(label for _, label in labels), ax.title], update


def _weights_panel(fig, ax, cax, result):
    """One head's attention weights, a cross on every blocked key, the keys underneath."""
    T = len(result["tokens"])
    image = ax.imshow(result["weights"], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    fig.colorbar(image, cax=cax, label="attention weight")
    rows, cols = np.nonzero(result["mask"])
    crosses, = ax.plot(cols, rows, "x", color="white", ms=max(3.0, 40 / T), mew=1)
    labels = _token_labels(ax, T, queries=False)

    def update(result, values):
        image.set_data(result["weights"])
        rows, cols = np.nonzero(result["mask"])
        crosses.set_data(cols, rows)
        _set_token_labels(labels, result["tokens"])
        k = int(result["fully_blocked"].sum())
        blocked = f"{k} fully blocked row{'s' * (k != 1)}: all 0" if k else "no fully blocked row"
        ax.set_title(f"head {result['head']} weights (random layer)\n× = blocked key; {blocked}")

    return [image, crosses, *(label for _, label in labels), ax.title], update
