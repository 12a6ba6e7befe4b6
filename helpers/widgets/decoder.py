"""Explorer of notebook 06 (the decoder and the whole Transformer): every attention of the
reversal Transformer, trained or random, on digits the learner types."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.analysis import attention_maps, greedy_decode_tokens, reversal_example
from helpers.language import tr
from helpers.plots import heatmap
from helpers.reversal import BOS, EOS, anti_diagonal_mass
from helpers.transformer import causal_mask
from helpers.widgets.explorer import Explorer, animate

__all__ = ["ATTENTION_KINDS", "attention_viewer"]

ATTENTION_KINDS = ["encoder self", "decoder self", "cross"]
BLOCKED_GREY = "0.8"  # cells the causal mask blocks (weight 0), told apart from small weights


def attention_viewer(models, text: str = "3 1 4 1 5", *, note: str = "") -> Explorer:
    """The three kinds of attention (encoder self, decoder self, cross) of a reversal model.

    models: {label: Transformer} of the reversal task, e.g. helpers.analysis.reversal_models()
    ({TRAINED: ..., RANDOM: ...}); the first is shown first, and the chosen label heads the
    figure, so the weights are always named. Controls: the weights, the digits (any 1 to 10,
    typed), the kind of attention, the layer and the head (or the mean of the heads). Every
    change runs the chosen model's forward pass on the digits (teacher forcing: the decoder
    reads <bos> and the reversed digits) and reads one map; decoder self-attention shows the
    cells its causal mask blocks in grey. The status line gives each query's strongest key, for
    cross-attention the share of weight on the reversed position (1 = reads the source
    backwards), and the model's own greedy answer.
    """
    models = dict(models)
    if not models:
        raise ValueError("attention_viewer needs at least one model, e.g. reversal_models()")
    first = next(iter(models.values()))
    n_layers = len(first.decoder.layers)
    n_heads = first.decoder.layers[0].cross_attn.n_heads
    reversal_example(text)  # a clear error now for digits it cannot show
    controls = {
        "weights": W.Dropdown(options=[(tr(label), label) for label in models],
                              value=next(iter(models)),
                              description="weights", layout=W.Layout(width="26em")),
        "digits": W.Text(value=text, description="digits", continuous_update=False),
        "kind": W.Dropdown(options=[(tr(kind), kind) for kind in ATTENTION_KINDS],
                           value="cross", description="attention"),
        "layer": W.IntSlider(value=n_layers - 1, min=0, max=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(tr("mean of heads"), -1)]
                           + [(tr("head {i}", i=i), i) for i in range(n_heads)], value=0,
                           description="head"),
    }

    def compute(weights, digits, kind, layer, head):
        src, tgt, src_labels, tgt_labels = reversal_example(digits)
        model = models[weights]
        maps = attention_maps(model, src, tgt)[kind][layer]  # (h, rows, cols)
        w = maps.mean(axis=0) if head < 0 else maps[head]
        rows = src_labels if kind == "encoder self" else tgt_labels
        cols = tgt_labels if kind == "decoder self" else src_labels
        blocked = causal_mask(len(rows)) if kind == "decoder self" else np.zeros(w.shape, bool)
        answer, _ = greedy_decode_tokens(model, src, BOS, EOS, len(src_labels) + 1)
        return {"weights": w, "rows": list(rows), "cols": list(cols), "blocked": blocked,
                "answer": answer, "reversed_share": (float(anti_diagonal_mass(w, len(cols)))
                                                     if kind == "cross" else None)}

    def title(values):
        head = tr("mean of heads") if values["head"] < 0 else tr("head {i}", i=values["head"])
        return tr("weights: {weights}\n{kind}-attention · layer {layer} · {head}",
                  weights=tr(values["weights"]), kind=tr(values["kind"]),
                  layer=values["layer"], head=head)

    def draw(fig, result, values):
        ax = fig.subplots()
        kind = values["kind"]
        image = heatmap(result["weights"], result["rows"], result["cols"], ax=ax, vmin=0, vmax=1,
                        annotate=False, title=" \n ",  # keeps the room of the two lines below
                        xlabel=tr("key (source)") if kind != "decoder self"
                        else tr("key (target so far; grey = blocked by the causal mask)"),
                        ylabel=tr("query (target)") if kind != "encoder self"
                        else tr("query (source)"))
        image.set_cmap(image.get_cmap().with_extremes(bad=BLOCKED_GREY))
        # the title changes with the controls, outside the layout (which would otherwise move
        # with its width and make the fast path differ from a full redraw)
        label = ax.text(0.5, 1.0, "", transform=ax.transAxes, ha="center", va="bottom",
                        fontsize=ax.title.get_fontsize())
        label.set_in_layout(False)
        changing = animate([image, label])

        def refresh(result, values):
            image.set_data(np.ma.masked_array(result["weights"], result["blocked"]))
            label.set_text(title(values))
            return changing

        refresh(result, values)
        return refresh

    def status(result, values):
        top = [result["cols"][j] for j in result["weights"].argmax(axis=-1)]
        out = [(tr("strongest key per query"), " ".join(top))]
        if result["reversed_share"] is not None:
            out.append((tr("weight on the reversed position"), f"{result['reversed_share']:.2f}"))
        out.append((tr("this model's greedy answer"), result["answer"]))
        return out

    return Explorer(controls, compute, draw, status,
                    layout_key=lambda v: (v["kind"], v["digits"]),
                    figsize=(6.0, 4.8), title="Attention viewer", note=note)
