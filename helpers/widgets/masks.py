"""Explorer of notebook 04 (masks): the causal and padding masks on the reversal Transformer of
notebook 07, trained or random, in its three attentions."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.analysis import TRAINED, reversal_models, token_word
from helpers.language import tr
from helpers.module import clear_caches
from helpers.plots import label_fontsize
from helpers.reversal import BOS, FIRST_DIGIT, MAX_LEN, PAD
from helpers.transformer import causal_mask, padding_mask_from_tokens
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["MASK_DIGITS", "MASK_RGBA", "MASK_KINDS", "mask_explorer"]

MASK_DIGITS = "3 1 4 1 5 9 2 6 5 3"  # the source digits; the last n_pad positions hold <pad>
MASK_RGBA = np.array([[0.0, 0.0, 0.0, 0.0], [0.84, 0.15, 0.16, 1.0]])  # allowed clear, blocked red
MASK_KINDS = ("encoder self", "decoder self", "cross")


def mask_example(T: int, n_pad: int, digits: str = MASK_DIGITS):
    """The reversal example of length T whose last n_pad positions are <pad>: src (1, T),
    tgt (1, T) (teacher-forced: <bos> and the reversed digits but the last, then <pad>), labels."""
    real = [FIRST_DIGIT + int(c) for c in digits.split()][:T - n_pad]
    tgt = ([BOS] + real[::-1][:-1]) if real else [BOS]
    src = real + [PAD] * (T - len(real))
    tgt = (tgt + [PAD] * T)[:T]
    labels = [[token_word(t) for t in row] for row in (src, tgt)]
    return np.array([src]), np.array([tgt]), labels[0], labels[1]


def masked_attention_maps(model, src, tgt, *, causal: bool, padding: bool) -> dict:
    """Every attention weight of one forward pass of the reversal `model` with the masks chosen
    here (the model's own forward always uses both): {kind: (n_layers, h, T_q, T_k)}, the three
    masks {kind: (T_q, T_k) bool} and the logits (T, vocab). Caches cleared (no backward)."""
    T = tgt.shape[1]
    src_mask = padding_mask_from_tokens(src, PAD) if padding else None  # (1, 1, 1, S)
    self_mask = causal_mask(T) if causal else None  # (T, T)
    if padding:
        pad_t = padding_mask_from_tokens(tgt, PAD)  # (1, 1, 1, T)
        self_mask = pad_t if self_mask is None else self_mask | pad_t
    memory = model.encoder.forward(model.embed(src, model.src_embed), src_mask)
    out = model.decoder.forward(model.embed(tgt, model.tgt_embed), memory, self_mask, src_mask)
    layers = zip(model.encoder.layers, model.decoder.layers)
    maps = np.array([(e.self_attn.weights[0], d.self_attn.weights[0], d.cross_attn.weights[0])
                     for e, d in layers])  # (n_layers, 3, h, T, T)
    logits = model.logits(out)[0]
    clear_caches(model)
    none = np.zeros((T, T), dtype=bool)

    def full(mask):
        return none if mask is None else np.broadcast_to(mask, (1, 1, T, T))[0, 0]

    return {"maps": dict(zip(MASK_KINDS, maps.swapaxes(0, 1), strict=True)), "logits": logits,
            "masks": dict(zip(MASK_KINDS, (full(src_mask), full(self_mask), full(src_mask)),
                              strict=True))}


def mask_explorer(T: int = 8, n_pad: int = 3, seed: int = 0) -> Explorer:
    """The causal and padding masks in the three attentions of the reversal Transformer.

    The source is the first T - n_pad digits of MASK_DIGITS followed by n_pad <pad>; the decoder
    reads <bos> and the reversed digits (teacher forcing), padded the same way; the status shows
    the argmax of that pass at each position (the correct digits fed in, not a greedy decode).
    Every change runs the model's encoder and decoder again with the masks chosen here:
    ``causal`` is the decoder self-attention's causal mask, ``padding`` the padding masks (source
    keys in the encoder and the cross-attention, target keys in the decoder). ``weights``: TRAINED
    (notebook 07) or RANDOM (an untrained twin). The length T changes the axes (a full redraw, one
    cached figure per T); everything else takes the fast path.
    """
    if not 2 <= T <= MAX_LEN or not 0 <= n_pad <= T:
        raise ValueError(f"need 2 <= T <= {MAX_LEN} and 0 <= n_pad <= T; got T={T}, "
                         f"n_pad={n_pad}")
    models = reversal_models(seed)
    config = models[TRAINED].config
    controls = {
        "weights": W.Dropdown(options=[(tr(label), label) for label in models], value=TRAINED,
                              description="weights"),
        "layer": W.Dropdown(options=[(tr("layer {i}", i=i), i) for i in range(config.n_layers)],
                            value=config.n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(tr("head {i}", i=i), i) for i in range(config.n_heads)],
                           value=0, description="head"),
        "T": W.IntSlider(value=T, min=2, max=MAX_LEN, description="length T",
                         continuous_update=False),
        "n_pad": W.IntSlider(value=n_pad, min=0, max=T, description="padding"),
        "causal": W.ToggleButton(value=True, description="causal mask"),
        "padding": W.ToggleButton(value=True, description="padding mask"),
    }

    def follow_length(change, controls):  # at most T padding tokens
        if change["owner"] is controls["T"]:
            controls["n_pad"].max = change["new"]  # clips n_pad if it was beyond

    def compute(weights, layer, head, T, n_pad, causal, padding):
        if not (2 <= T <= MAX_LEN and 0 <= n_pad <= T and 0 <= head < config.n_heads
                and 0 <= layer < config.n_layers):
            raise ValueError(f"T={T}, n_pad={n_pad}, layer={layer}, head={head} out of range")
        src, tgt, src_labels, tgt_labels = mask_example(T, n_pad)
        run = masked_attention_maps(models[weights], src, tgt, causal=causal, padding=padding)
        maps, masks = run["maps"], run["masks"]
        shown = {kind: maps[kind][layer, head] for kind in MASK_KINDS}  # (T_q, T_k) each
        pad_key = src[0] == PAD  # (S,)
        real_q = tgt[0] != PAD  # (T,) queries of the decoder that are real tokens
        real_s = ~pad_key
        leak = {"encoder self": float(maps["encoder self"][:, :, real_s][..., pad_key]
                                      .sum(-1).max(initial=0.0)),
                "cross": float(maps["cross"][:, :, real_q][..., pad_key].sum(-1).max(initial=0.0))}
        blocked = max(float(np.abs(maps[kind][..., masks[kind]]).max(initial=0.0))
                      for kind in MASK_KINDS)
        full = {kind: masks[kind].all(axis=-1) for kind in MASK_KINDS}  # (T_q,) each
        n_real = T - n_pad
        # the most likely token at each real position of this teacher-forced pass (the correct
        # digits fed in), not a greedy decode that feeds back its own outputs
        predicted = run["logits"].argmax(-1)[:n_real]  # (n_real,) token ids; <eos> by name
        return {"src_labels": src_labels, "tgt_labels": tgt_labels, "src": src, "tgt": tgt,
                "maps": maps, "masks": masks, "shown": shown, "fully_blocked": full,
                "leak": leak, "blocked_weight": blocked, "weights": weights, "layer": layer,
                "head": head, "causal": causal, "padding": padding,
                "predicted": " ".join(token_word(t) for t in predicted),
                "expected": " ".join(src_labels[:n_real][::-1])}

    def status(result, values):
        n_full = sum(int(f.sum()) for f in result["fully_blocked"].values())
        none = tr("(none)")
        return [
            (tr("total weight on <pad> keys (most, a real query, any layer and head)"),
             tr("encoder {encoder}, cross {cross}", encoder=f"{result['leak']['encoder self']:.2f}",
                cross=f"{result['leak']['cross']:.2f}")),
            (tr("max weight on a blocked key"), f"{result['blocked_weight']:.1f}"),
            (tr("fully blocked queries"), tr("{n} (zero weights)", n=n_full)),
            (tr("argmax at each position, correct digits fed in (teacher forcing)"),
             tr("{predicted} (reversal: {expected})", predicted=result["predicted"] or none,
                expected=result["expected"] or none)),
        ]

    return Explorer(controls, compute, _mask_figure, status, link=follow_length,
                    figsize=(10.5, 4.6), layout_key=lambda values: values["T"],
                    title="Mask explorer",
                    note="The reversal Transformer of notebook 07: TRAINED weights, or RANDOM "
                         "(untrained) ones. The masks are exact; red = blocked.")


def _mask_figure(fig, result, values):
    """The three attentions side by side on fixed margins; one figure per length T."""
    fig.set_layout_engine("none")  # fixed margins: faster than a constrained layout
    T = len(result["tgt_labels"])
    axes = [fig.add_axes((0.085 + 0.315 * k, 0.25, 0.215, 0.55)) for k in range(3)]
    cax = fig.add_axes((0.935, 0.25, 0.012, 0.55))
    panels = [_weights_panel(fig, ax, kind, result, cax if kind == "cross" else None)
              for ax, kind in zip(axes, MASK_KINDS, strict=True)]
    changing, refresh_panels = join_panels(*panels)
    suptitle = fig.suptitle("", fontsize=10.5)

    def refresh(result, values):
        if len(result["tgt_labels"]) != T:
            return None  # another length: new axes, full redraw
        label = tr("TRAINED") if result["weights"] == TRAINED else tr("RANDOM (untrained)")
        suptitle.set_text(tr("{weights} reversal Transformer, layer {layer}, head {head}: "
                             "attention weights, red = blocked", weights=label,
                             layer=result["layer"], head=result["head"]))
        return refresh_panels(result, values) + [suptitle]

    refresh(result, values)
    animate([*changing, suptitle])
    return refresh


def _token_labels(ax, T, *, xlabel, ylabel):
    """T key labels under `ax` and T query labels left of it, as texts the fast path sets."""
    size = label_fontsize(T)
    ax.tick_params(length=2)  # first: the ticks below are made with it, not made and changed
    ax.set_xticks(np.arange(T), [""] * T)
    ax.set_yticks(np.arange(T), [""] * T)
    ax.set_xlabel(xlabel, labelpad=30, fontsize=9)
    ax.set_ylabel(ylabel, labelpad=32, fontsize=9)
    keys = [ax.text(j, -0.02, "", transform=ax.get_xaxis_transform(), rotation=90,
                    ha="center", va="top", fontsize=size) for j in range(T)]
    queries = [ax.text(-0.02, i, "", transform=ax.get_yaxis_transform(), ha="right",
                       va="center", fontsize=size) for i in range(T)]
    ax.title.set_fontsize(9)
    return keys, queries


def _weights_panel(fig, ax, kind, result, cax):
    """One attention's weights (viridis) with the blocked entries in red and the tokens on both
    axes: source or target, by kind."""
    T = len(result["tgt_labels"])
    image = ax.imshow(result["shown"][kind], cmap="viridis", vmin=0, vmax=1,
                      interpolation="nearest")
    overlay = ax.imshow(MASK_RGBA[result["masks"][kind].astype(int)], interpolation="nearest")
    if cax is not None:
        fig.colorbar(image, cax=cax, label=tr("attention weight"))
    query_side, key_side = {"encoder self": ("src", "src"), "decoder self": ("tgt", "tgt"),
                            "cross": ("tgt", "src")}[kind]
    keys, queries = _token_labels(ax, T, xlabel=tr("key (source)") if key_side == "src"
                                  else tr("key (decoder input)"),
                                  ylabel=tr("query (source)") if query_side == "src"
                                  else tr("query (decoder input)"))

    def update(result, values):
        image.set_data(result["shown"][kind])
        overlay.set_data(MASK_RGBA[result["masks"][kind].astype(int)])  # (T, T, 4)
        for label, text in zip(keys, result[f"{key_side}_labels"], strict=True):
            label.set_text(text)
        for label, text in zip(queries, result[f"{query_side}_labels"], strict=True):
            label.set_text(text)
        parts = [tr(name) for name, used in (("causal", result["causal"]
                                               and kind == "decoder self"),
                                              ("padding", result["padding"])) if used]
        k = int(result["fully_blocked"][kind].sum())
        full = (tr("; {k} rows all 0", k=k) if k > 1 else tr("; {k} row all 0", k=k)) if k else ""
        ax.set_title(tr("{kind}\nmask: {masks}{full}", kind=tr(kind),
                        masks=" | ".join(parts) or tr("none"), full=full))

    return [image, overlay, *keys, *queries, ax.title], update
