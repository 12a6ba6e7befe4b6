"""Explorer of notebook 06 (the decoder and the whole Transformer): every attention of a model."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.module import clear_caches
from helpers.plots import heatmap
from helpers.widgets.explorer import Explorer, animate

__all__ = ["ATTENTION_KINDS", "attention_viewer"]

ATTENTION_KINDS = ["encoder self", "decoder self", "cross"]


def attention_viewer(model, src, tgt, src_labels, tgt_labels, *, note: str = "") -> Explorer:
    """Layer, head and kind (encoder self / decoder self / cross) of a Transformer's attention.

    model: a helpers.transformer.Transformer; src (1, S) and tgt (1, T) token ids; labels for the
    axes. Every change runs model.forward(src, tgt) again and reads the chosen layer's weights.
    Whether the weights are random or trained is the caller's to say in `note`.
    """
    src, tgt = np.asarray(src), np.asarray(tgt)
    if src.shape != (1, len(src_labels)) or tgt.shape != (1, len(tgt_labels)):
        raise ValueError(f"src {src.shape} and tgt {tgt.shape} must be (1, S) and (1, T) with "
                         f"S={len(src_labels)} and T={len(tgt_labels)} labels")
    n_layers = len(model.encoder.layers)
    n_heads = model.encoder.layers[0].self_attn.n_heads
    controls = {
        "kind": W.Dropdown(options=ATTENTION_KINDS, value="cross", description="attention"),
        "layer": W.IntSlider(value=0, min=0, max=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(f"head {i}", i) for i in range(n_heads)], value=0,
                           description="head"),
    }

    def compute(kind, layer, head):
        model.forward(src, tgt)  # recompute: fills every layer's .weights
        attn = {"encoder self": model.encoder.layers[layer].self_attn,
                "decoder self": model.decoder.layers[layer].self_attn,
                "cross": model.decoder.layers[layer].cross_attn}[kind]
        rows = src_labels if kind == "encoder self" else tgt_labels
        cols = tgt_labels if kind == "decoder self" else src_labels
        clear_caches(model)  # no backward follows
        return {"weights": attn.weights[0, head].copy(), "rows": list(rows), "cols": list(cols)}

    def title(values):
        return f"{values['kind']} attention · layer {values['layer']} · head {values['head']}"

    def draw(fig, result, values):
        ax = fig.subplots()
        image = heatmap(result["weights"], result["rows"], result["cols"], ax=ax, vmin=0, vmax=1,
                        annotate=False, title=title(values),
                        xlabel="key (source)" if values["kind"] != "decoder self" else "key",
                        ylabel="query (target)" if values["kind"] != "encoder self" else "query")
        changing = animate([image, ax.title])

        def refresh(result, values):
            image.set_data(result["weights"])
            ax.set_title(title(values))
            return changing

        return refresh

    def status(result, values):
        w = result["weights"]
        top = [result["cols"][j] for j in w.argmax(axis=-1)]
        return [("strongest key per query", " ".join(top))]

    return Explorer(controls, compute, draw, status, layout_key=lambda v: v["kind"],
                    figsize=(5.8, 4.6), title="Attention viewer", note=note)
