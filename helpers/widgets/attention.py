"""Explorers of notebooks 01 (scaled dot-product attention) and 02 (multi-head attention)."""

from __future__ import annotations

import ipywidgets as W
import numpy as np
from matplotlib.ticker import FixedLocator

from helpers.analysis import (
    RANDOM,
    TRAINED,
    attention_maps,
    entropy,
    reversal_example,
    reversal_models,
)
from helpers.language import tr
from helpers.plots import heatmap
from helpers.transformer import scaled_dot_product_attention, softmax
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["POWERS_OF_TWO", "HEAD_KINDS", "scaling_explorer", "query_explorer", "head_explorer"]


# ── notebook 01 · scaled dot-product attention ──────────────────────────────────────────────

POWERS_OF_TWO = [2**k for k in range(0, 11)]  # d_k from 1 to 1024
SCORINGS = [("dot product ÷ √d_k", "scaled"), ("dot product, NOT scaled", "raw"),
            ("additive: v·tanh(qW+kU)", "additive")]
SCORING_NAMES = {"scaled": "q·k / √d_k", "raw": "q·k, NOT scaled", "additive": "additive"}
LOG_TICKS = [10.0**e for e in range(-1, 3)]  # the spread axis, 0.05 to 100
LOG_MINOR_TICKS = [m * 10.0**e for e in range(-2, 2) for m in range(2, 10) if m * 10.0**e >= 0.05]


def softmax_jacobian_norm(weights):
    """‖diag(p) − p pᵀ‖_F for every row p of `weights` (..., T): how much the softmax passes on."""
    eye = np.eye(weights.shape[-1])
    J = weights[..., :, None] * eye - weights[..., :, None] * weights[..., None, :]
    return np.linalg.norm(J, axis=(-2, -1))


def scaling_explorer(T: int = 8, seed: int = 0, d_a: int = 64) -> Explorer:
    """Random queries and keys (T of each), scored three ways; one fresh draw per `draw` value.

    For each (d_k, draw) the explorer draws RANDOM unit-variance Q, K and RANDOM additive weights
    W_a, U_a (d_k × d_a, variance 1/d_k) and v_a (variance 1/d_a), so switching the scoring
    changes nothing else. Left: the softmax weights. Right: every query row as a point (its
    scores' standard deviation, its softmax Jacobian norm) on the mean curve of Gaussian score
    rows of that spread: the curve rises, peaks at a moderate spread, then falls as softmax
    saturates.
    """
    controls = {
        "d_k": W.SelectionSlider(options=POWERS_OF_TWO, value=64, description="d_k"),
        "scoring": W.Dropdown(options=[(tr(label), value) for label, value in SCORINGS],
                              value="scaled", description="scores"),
        "draw": W.IntSlider(value=0, min=0, max=9, description="random draw"),
    }
    curve_rng = np.random.default_rng([seed, 2**20])
    spreads = np.geomspace(0.05, 100, 60)
    z = curve_rng.standard_normal((400, T))  # Gaussian score rows, scaled to each spread
    curve_x = np.array([(s * z).std(axis=-1).mean() for s in spreads])
    curve_y = np.array([softmax_jacobian_norm(softmax(s * z)).mean() for s in spreads])

    def compute(d_k, scoring, draw):
        rng = np.random.default_rng([seed, d_k, draw])
        Q = rng.standard_normal((T, d_k))  # random, unit variance per component
        K = rng.standard_normal((T, d_k))
        W_a, U_a = (rng.standard_normal((d_k, d_a)) / np.sqrt(d_k) for _ in range(2))
        v_a = rng.standard_normal(d_a) / np.sqrt(d_a)
        if scoring == "additive":
            scores = np.tanh((Q @ W_a)[:, None, :] + (K @ U_a)[None, :, :]) @ v_a  # (T, T)
        else:
            scores = Q @ K.swapaxes(-1, -2) / (np.sqrt(d_k) if scoring == "scaled" else 1.0)
        weights = softmax(scores, axis=-1)
        return {
            "scores": scores,
            "weights": weights,
            "row_std": scores.std(axis=-1),
            "jacobian_norm": softmax_jacobian_norm(weights),
            "max_weight": float(weights.max(axis=-1).mean()),
            "entropy": float(entropy(weights).mean()),
            "bound": float(np.abs(v_a).sum()),  # |additive score| <= ||v_a||_1
        }

    def title(values):
        return tr("RANDOM Q, K · d_k = {d_k} · {scoring}", d_k=values["d_k"],
                  scoring=tr(SCORING_NAMES[values["scoring"]]))

    def points(result):
        return np.column_stack([np.clip(result["row_std"], 0.05, 100), result["jacobian_norm"]])

    def draw(fig, result, values):
        ax, ax_j = fig.subplots(1, 2, width_ratios=[1, 1.15])
        image = heatmap(result["weights"], [f"q{i}" for i in range(T)],
                        [f"k{j}" for j in range(T)], ax=ax, vmin=0, vmax=1, title=" ",
                        annotate=False, colorbar=False)  # 64 numbers would triple the update time
        # the title's room is kept by the blank title; the text itself never moves the layout
        heading = ax.text(0.5, 1.02, title(values), transform=ax.transAxes, ha="center",
                          va="bottom", fontsize=9, in_layout=False)
        ax_j.plot(curve_x, curve_y, color="0.6",
                  label=tr("mean over Gaussian rows ({T} keys)", T=T))
        dots = ax_j.scatter(*points(result).T, color="tab:red", zorder=3,
                            label=tr("this draw's query rows"))
        ax_j.set(xscale="log", xlim=(0.05, 100), ylim=(0, 0.6),
                 xlabel=tr("std of a row's scores"), ylabel=tr("‖J‖_F of its softmax"),
                 title=tr("softmax Jacobian norm: rises, peaks, falls"))
        # the ticks a LogLocator shows in this fixed view, and only those (it would make 63
        # ticks, for 33 shown, each a costly matplotlib object)
        ax_j.xaxis.set_major_locator(FixedLocator(LOG_TICKS))
        ax_j.xaxis.set_minor_locator(FixedLocator(LOG_MINOR_TICKS))
        ax_j.title.set_fontsize(9)
        ax_j.legend(loc="upper right", fontsize=8)
        changing = animate([image, dots, heading])

        def refresh(result, values):  # same layout, new numbers
            image.set_data(result["weights"])
            dots.set_offsets(points(result))
            heading.set_text(title(values))
            return changing

        return refresh

    def status(result, values):
        items = [
            (tr("score std"), f"{result['scores'].std():.2f}"),
            (tr("mean max weight"), f"{result['max_weight']:.3f}"),
            (tr("mean entropy"), tr("{entropy} nats (uniform = {uniform})",
                                    entropy=f"{result['entropy']:.3f}",
                                    uniform=f"{np.log(T):.3f}")),
            (tr("mean ‖J‖_F"), f"{result['jacobian_norm'].mean():.3f}"),
        ]
        if values["scoring"] == "additive":
            items.append((tr("bound ‖v_a‖₁"), f"{result['bound']:.2f}"))
        return items

    return Explorer(controls, compute, draw, status, figsize=(9.0, 4.0),
                    title="Scaling explorer",
                    note="RANDOM Q, K and additive weights (not learned). Move d_k, switch the "
                         "scoring, draw again.")


def query_explorer(examples: dict[str, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]],
                   query: int = -1, value_names: list[str] | None = None) -> Explorer:
    """Pick a sentence, a query token and a strength s; see the query's weights and its output.

    examples: name -> (tokens, Q, K, V) with Q, K of shape (T, d_k) and V of shape (T, d_v).
    The strength multiplies Q (that is, W_q), so every score is multiplied by s: at s = 0 the
    weights are uniform, as s grows they concentrate on the best-matching key. The right panel
    is the output of the query, sum_j w_j v_j, each value feature split into the share each key
    contributes (one colour per key, as in the left panel).
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
        "strength": W.FloatSlider(value=1.0, min=0.0, max=4.0, step=0.5, readout_format=".1f",
                                  description="W_q × s"),
    }

    def follow_sentence(change, controls):  # keep the query position when the sentence changes
        if change["owner"] is not controls["sentence"]:
            return
        options = token_options(change["new"])
        keep = min(controls["query"].value, len(options) - 1)
        controls["query"].options = options  # this resets the value to the first option
        controls["query"].value = keep

    def compute(sentence, query, strength):
        tokens, Q, K, V = examples[sentence]
        output, weights = scaled_dot_product_attention(strength * np.asarray(Q), K, V)
        V = np.asarray(V, dtype=float)
        names = value_names or [f"v[{f}]" for f in range(V.shape[-1])]
        return {"tokens": tokens, "weights": weights, "row": weights[query],
                "output": output[query], "query": query, "V": V, "value_names": names,
                "contributions": weights[query][:, None] * V}  # (T_k, d_v): w_j v_j

    def draw(fig, result, values):
        ax_bar, ax_out = fig.subplots(1, 2, width_ratios=[1, 1.2])
        changing, refresh_panels = join_panels(_query_row_panel(ax_bar, result),
                                               _query_output_panel(ax_out, result))
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
        out = ", ".join(f"{n} {x:.2f}" for n, x in zip(result["value_names"], result["output"],
                                                       strict=True))
        return [(tr("strongest key"), f"'{tokens[top]}' ({row[top]:.3f})"),
                (tr("output"), out), (tr("row sum"), f"{row.sum():.3f}")]

    return Explorer(controls, compute, draw, status, link=follow_sentence, figsize=(8.4, 3.4),
                    layout_key=lambda values: values["sentence"],
                    title="Query explorer",
                    note="Hand-built example weights (not learned). Pick a sentence and a query; "
                         "s scales W_q.")


def _key_colours(n):
    return [f"C{j % 10}" for j in range(n)]


def _query_row_panel(ax, result):
    """Bars: the chosen query's weight on every key (one colour per key), each with its value."""
    tokens, row, q = result["tokens"], result["row"], result["query"]
    bars = ax.barh(np.arange(len(tokens)), row, color=_key_colours(len(tokens)))
    ax.set_yticks(np.arange(len(tokens)), tokens)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(tr("weight"))
    ax.set_title(tr("query '{token}' attends to", token=tokens[q]))
    labels = [ax.text(min(w + 0.02, 0.8), j, f"{w:.2f}", va="center", fontsize=8)
              for j, w in enumerate(row)]

    def update(result, values):
        tokens, row, q = result["tokens"], result["row"], result["query"]
        for bar, label, w in zip(bars, labels, row, strict=True):
            bar.set_width(w)
            label.set_text(f"{w:.2f}")
            label.set_x(min(w + 0.02, 0.8))
        ax.set_title(tr("query '{token}' attends to", token=tokens[q]))

    return [*bars, *labels, ax.title], update


def _stacks(contributions):
    """Left edges of each key's segment in each feature's stacked bar (positives right of 0,
    negatives left of 0), shape (T_k, d_v)."""
    pos, neg = np.maximum(contributions, 0), np.minimum(contributions, 0)
    starts_pos = np.cumsum(pos, axis=0) - pos
    starts_neg = np.cumsum(neg, axis=0)  # a negative segment spans [start, start - c]
    return np.where(contributions >= 0, starts_pos, starts_neg)


def _query_output_panel(ax, result):
    """Stacked bars: the output sum_j w_j v_j per value feature, split by key j."""
    V, contributions = result["V"], result["contributions"]
    n_keys, d_v = contributions.shape
    rows = np.arange(d_v)
    lefts = _stacks(contributions)
    colours = _key_colours(n_keys)
    segments = [ax.barh(rows, np.abs(contributions[j]), left=lefts[j], color=colours[j],
                        height=0.6) for j in range(n_keys)]
    ax.set_yticks(rows, result["value_names"])
    ax.invert_yaxis()
    lo, hi = min(0.0, V.min()), max(0.0, V.max())  # a convex mix stays inside these
    ax.set_xlim(lo - 0.05 * (hi - lo), hi + 0.25 * (hi - lo))
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_xlabel(tr("output = Σ_j w_j v_j (coloured by key j)"))
    ax.set_title(tr("output of '{token}'", token=result["tokens"][result["query"]]))
    totals = [ax.text(hi + 0.02 * (hi - lo), f, f"{x:.2f}", va="center", fontsize=8)
              for f, x in zip(rows, result["output"], strict=True)]

    def update(result, values):
        contributions = result["contributions"]
        lefts = _stacks(contributions)
        for j, bars in enumerate(segments):
            for f, bar in enumerate(bars):
                bar.set_width(abs(contributions[j, f]))
                bar.set_x(lefts[j, f])
        for text, x in zip(totals, result["output"], strict=True):
            text.set_text(f"{x:.2f}")
        ax.set_title(tr("output of '{token}'", token=result["tokens"][result["query"]]))

    return [*(b for bars in segments for b in bars), *totals, ax.title], update


# ── notebook 02 · multi-head attention ──────────────────────────────────────────────────────

HEAD_KINDS = ["cross", "encoder self", "decoder self"]  # the three attentions of the model
WEIGHT_LABELS = {TRAINED: "TRAINED (notebook 07)", RANDOM: "RANDOM (untrained)"}


def head_explorer(digits: str = "3 1 4 1 5 9 2 6", models: dict | None = None) -> Explorer:
    """Every head of one attention of the reversal model, side by side, on digits you type.

    models: {TRAINED: model, RANDOM: model} as ``helpers.analysis.reversal_models()`` returns
    (the default). Controls: the weights (trained first), the digits (1 to MAX_LEN of them), the
    attention kind (cross, encoder self, decoder self), the layer, and all heads or one. The
    decoder reads <bos> + the reversed digits (teacher forcing), so cross-attention row t is the
    query that writes output digit t. The status line measures every head: its mean entropy,
    its share of weight on the anti-diagonal (query t reading key L-1-t: reversal) and on the
    diagonal (a token reading itself). In decoder self-attention the causal mask blocks the
    anti-diagonal cells above the diagonal (t < L-1-t), so there the share is the mean over the
    cells it allows only, and the status line and titles say so.
    """
    models = reversal_models() if models is None else models
    some = next(iter(models.values()))
    n_layers, n_heads = len(some.decoder.layers), some.decoder.layers[0].cross_attn.n_heads
    maps_cache: dict = {}

    def maps_of(weights, text):  # one forward pass per (weights, digits), kept
        key = (weights, " ".join(text.split()))
        if key not in maps_cache:
            src, tgt, src_labels, tgt_labels = reversal_example(text)
            maps_cache[key] = (attention_maps(models[weights], src, tgt), src_labels, tgt_labels)
            while len(maps_cache) > 16:
                maps_cache.pop(next(iter(maps_cache)))
        return maps_cache[key]

    controls = {
        "weights": W.Dropdown(options=[(tr(WEIGHT_LABELS.get(k, k)), k) for k in models],
                              value=next(iter(models)), description="weights"),
        "digits": W.Text(value=digits, description="digits", continuous_update=False),
        "kind": W.Dropdown(options=[(tr(kind), kind) for kind in HEAD_KINDS], value="cross",
                           description="attention"),
        "layer": W.Dropdown(options=list(range(n_layers)), value=n_layers - 1,
                            description="layer"),
        "head": W.Dropdown(options=[(tr("all heads"), -1)] + [(tr("head {i}", i=i), i)
                                                              for i in range(n_heads)],
                           value=-1, description="show"),
    }

    def compute(weights, digits, kind, layer, head):
        maps, src_labels, tgt_labels = maps_of(weights, digits)
        w = maps[kind][layer]  # (h, T_q, T_k)
        rows = src_labels if kind == "encoder self" else tgt_labels
        cols = tgt_labels if kind == "decoder self" else src_labels
        L, i = len(src_labels), np.arange(len(src_labels))
        # decoder self-attention is causal: query i sees keys 0..i only, so the anti-diagonal
        # cell (i, L-1-i) is blocked for i < L-1-i. The share is measured over allowed cells.
        allowed = L - 1 - i <= i if kind == "decoder self" else np.ones(L, bool)
        return {"weights": w, "rows": rows, "cols": cols, "head": head,
                "ylabel": tr("query: source") if kind == "encoder self"
                else tr("query: decoder input"),
                "xlabel": tr("key: decoder input") if kind == "decoder self"
                else tr("key: source"),
                "label": tr("{weights} · {kind} attention, layer {layer}",
                            weights=tr(WEIGHT_LABELS.get(weights, weights)), kind=tr(kind),
                            layer=layer),
                "entropy": entropy(w).mean(axis=-1),  # (h,)
                "anti_diagonal": w[:, i[allowed], L - 1 - i[allowed]].mean(axis=-1),  # (h,)
                "anti_cells": (int(allowed.sum()), L),  # anti-diagonal cells measured, of L
                "diagonal": w[:, i, i].mean(axis=-1)}  # (h,)

    def draw(fig, result, values):
        if result["head"] == -1:
            return _all_heads_figure(fig, result)
        return _one_head_figure(fig, result)

    def status(result, values):
        def per_head(a):
            return " ".join(f"{v:.2f}" for v in a)

        return [(tr("mean entropy per head"),
                 tr("{entropy} nats (uniform {uniform})", entropy=per_head(result["entropy"]),
                    uniform=f"{np.log(len(result['cols'])):.2f}")),
                (_anti_label(result), per_head(result["anti_diagonal"])),
                (tr("diagonal share"), per_head(result["diagonal"]))]

    return Explorer(controls, compute, draw, status, figsize=(8.4, 4.0),
                    layout_key=lambda v: (" ".join(v["digits"].split()), v["kind"],
                                          v["head"] == -1),
                    title="Head explorer (the reversal model of notebook 07)",
                    note="TRAINED weights first, RANDOM (untrained) for comparison. "
                         "Type digits; pick the attention, the layer, a head.")


def _all_heads_figure(fig, result):
    """Every head of the chosen attention side by side; the fast path swaps their data."""
    weights = result["weights"]
    axes = np.atleast_1d(fig.subplots(1, len(weights)))
    images = [heatmap(w, result["rows"], result["cols"], ax=ax, vmin=0, vmax=1, annotate=False,
                      colorbar=False, title=_head_title(result, i), xlabel=result["xlabel"],
                      ylabel=result["ylabel"] if i == 0 else None)
              for i, (ax, w) in enumerate(zip(axes, weights, strict=True))]
    fig.colorbar(images[-1], ax=list(axes), fraction=0.046, pad=0.03, label=tr("weight"))
    suptitle = fig.suptitle(result["label"], fontsize=10)
    changing = animate([*images, *(ax.title for ax in axes), suptitle])

    def refresh(result, values):
        for i, (image, ax) in enumerate(zip(images, axes, strict=True)):
            image.set_data(result["weights"][i])
            ax.set_title(_head_title(result, i))
        suptitle.set_text(result["label"])
        return changing

    return refresh


def _one_head_figure(fig, result):
    """One head's weights, large; the fast path switches heads, layers and weights."""
    ax = fig.subplots()
    head = result["head"]
    image = heatmap(result["weights"][head], result["rows"], result["cols"], ax=ax, vmin=0,
                    vmax=1, annotate=False, title=_one_head_title(result),
                    xlabel=result["xlabel"], ylabel=result["ylabel"])
    changing = animate([image, ax.title])

    def refresh(result, values):
        image.set_data(result["weights"][result["head"]])
        ax.set_title(_one_head_title(result))
        return changing

    return refresh


def _anti_label(result):
    """The status label of the anti-diagonal share; it names the cells a causal mask leaves."""
    measured, L = result["anti_cells"]
    if measured == L:
        return tr("anti-diagonal share")
    return tr("anti-diagonal share (the {measured} of {L} cells the causal mask allows)",
              measured=measured, L=L)


def _head_title(result, i):
    measured, L = result["anti_cells"]
    allowed = "" if measured == L else tr(" ({measured} allowed cells)", measured=measured)
    return tr("head {i}: entropy {entropy}\nanti-diagonal{allowed} {share}", i=i,
              entropy=f"{result['entropy'][i]:.2f}", allowed=allowed,
              share=f"{result['anti_diagonal'][i]:.2f}")


def _one_head_title(result):
    return f"{result['label']}\n{_head_title(result, result['head']).replace(chr(10), ', ')}"
