"""Explorer of notebook 05 (the Post-LN block): every stage of an encoder block, trained or random,
Post-LN or Pre-LN."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.analysis import block_stages, reversal_example, reversal_models
from helpers.language import tr
from helpers.module import clear_caches
from helpers.plots import label_fontsize
from helpers.transformer import EncoderBlock, Stack
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["POST_LN_STAGES", "PRE_LN_STAGES", "stage_options", "block_explorer"]

# (name, formula) of each activation helpers.analysis.block_stages returns, in its order
POST_LN_STAGES = [("input", "x"), ("self-attention", "a = MHA(x)"), ("add", "r = x + a"),
                  ("norm", "y = LN₁(r)"), ("FFN", "f = FFN(y)"), ("add", "s = y + f"),
                  ("norm", "out = LN₂(s)")]
PRE_LN_STAGES = [("input", "x"), ("norm", "h = LN₁(x)"), ("self-attention", "a = MHA(h)"),
                 ("add", "r = x + a"), ("norm", "g = LN₂(r)"), ("FFN", "f = FFN(g)"),
                 ("add", "out = r + f")]


def stage_options(norm_first: bool) -> list[tuple[str, int]]:
    """Slider options "0 · input", "1 · self-attention", ... for one ordering of the block (the
    names in the chosen language)."""
    stages = PRE_LN_STAGES if norm_first else POST_LN_STAGES
    return [(f"{i} · {tr(name)}", i) for i, (name, _) in enumerate(stages)]


def _cosine(u, v):
    """Cosine between the vectors of each position: (..., T, d) and (..., T, d) -> (..., T)."""
    return (u * v).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))


def block_explorer(models: dict | None = None, text: str = "3 1 4 1 5 9 2 6", *,
                   stage: int = 2) -> Explorer:
    """Step through the stages of one encoder block, with trained or random weights, Post-LN or
    Pre-LN (the same weights in the other order).

    models: {label: Transformer} whose `.encoder` is a Post-LN Stack of EncoderBlocks (default
    helpers.analysis.reversal_models(): the reversal model trained in notebook 07 and an untrained
    twin, labelled TRAINED and RANDOM). text: the digits the encoder reads; the input is the
    model's own embedding (`model.embed`: token vectors * sqrt(d_model) + PE), as its encoder
    gets it. Blocks are numbered from 0, as the code indexes them (block k is
    `encoder.layers[k]`). For the chosen block and stage the figure shows, per position, the
    cosine between the stage and the block's input (how much of the input the stream still
    holds) and the standard deviation, and the mean of both over the positions at every stage of
    the block.
    """
    models = reversal_models() if models is None else dict(models)
    stacks = {}
    for label, model in models.items():
        encoder = model.encoder
        if encoder.norm is not None or encoder.layers[0].norm_first:
            raise ValueError(f"block_explorer expects models with a Post-LN encoder "
                             f"(norm_first=False); {label!r} has a Pre-LN one")
        stacks[label] = {False: encoder, True: _pre_ln_twin(encoder)}
    first_label = next(iter(models))
    n_layers = len(models[first_label].encoder.layers)

    controls = {
        "weights": W.Dropdown(options=[(tr(label), label) for label in models],
                              value=first_label, description="weights"),
        "digits": W.Text(value=text, description="digits", continuous_update=False),
        "norm_first": W.ToggleButton(value=False, description="Pre-LN order (same weights)"),
        "layer": W.IntSlider(value=0, min=0, max=n_layers - 1, description="block"),
        "stage": W.SelectionSlider(options=stage_options(False), value=stage, description="stage"),
    }

    def follow_order(change, controls):  # the stage labels follow the toggle; keep the index
        if change["owner"] is not controls["norm_first"]:
            return
        keep = controls["stage"].value
        controls["stage"].options = stage_options(change["new"])
        controls["stage"].value = keep

    limits: dict[str, float] = {}  # digits -> the largest std of any stage, any weights or order

    def encoder_input(weights, digits):
        """The model's own embedding of the digits, (S, d_model), and the position labels."""
        model = models[weights]
        src, _, labels, _ = reversal_example(digits)
        return model.embed(src, model.src_embed)[0], labels  # as model.encode computes it

    def all_stages(weights, digits, norm_first, layer):
        stack = stacks[weights][norm_first]
        h, labels = encoder_input(weights, digits)
        for block in stack.layers[:layer]:  # the residual stream entering stack.layers[layer]
            h = block.forward(h)
        stages = block_stages(stack.layers[layer], h)
        clear_caches(stack)  # no backward follows
        return np.stack(stages), labels  # (7, S, d_model)

    def std_limit(digits):
        if digits not in limits:
            limits[digits] = max(1.5, max(float(all_stages(w, digits, o, k)[0].std(-1).max())
                                          for w in models for o in (False, True)
                                          for k in range(n_layers)))
        return limits[digits]

    def compute(weights, digits, norm_first, layer, stage):
        stages, labels = all_stages(weights, digits, norm_first, layer)
        cos = _cosine(stages, stages[0])  # (7, S): each stage against the block's input
        std = stages.std(axis=-1)  # (7, S)
        a = stages[stage]  # (S, d_model)
        name, formula = (PRE_LN_STAGES if norm_first else POST_LN_STAGES)[stage]
        return {"activations": a, "stages": stages, "stage": stage, "name": name,
                "formula": formula, "layer": layer, "norm_first": norm_first, "weights": weights,
                "labels": labels, "cos_stages": cos, "std_stages": std, "cos": cos[stage],
                "mean": a.mean(axis=-1), "std": std[stage], "norm": np.linalg.norm(a, axis=-1),
                "std_limit": std_limit(digits)}

    def title(result):
        order = (tr("Pre-LN order (the same weights)") if result["norm_first"]
                 else tr("Post-LN (the paper's order)"))
        return tr("{weights} weights · {order}\nblock {layer} (encoder.layers[{layer}], blocks 0 "
                  "to {last}) · stage {stage}: {formula}", weights=tr(result["weights"]),
                  order=order, layer=result["layer"], last=n_layers - 1, stage=result["stage"],
                  formula=result["formula"])

    def draw(fig, result, values):
        return _block_figure(fig, result, title)

    def status(result, values):
        cos = result["cos"]
        return [(tr("stage"), result["formula"]),
                (tr("cos(stage, block input)"),
                 tr("mean {mean} ({low} to {high})", mean=f"{cos.mean():.2f}",
                    low=f"{cos.min():.2f}", high=f"{cos.max():.2f}")),
                (tr("std per position"), tr("{low} to {high}", low=f"{result['std'].min():.2f}",
                                            high=f"{result['std'].max():.2f}"))]

    return Explorer(controls, compute, draw, status, link=follow_order, figsize=(10.0, 4.4),
                    layout_key=lambda values: (values["norm_first"], values["digits"]),
                    title="Block explorer",
                    note="The encoder of notebook 07's reversal model (TRAINED) or an untrained "
                         "twin (RANDOM), on digits you type. Step through the stages of a "
                         "block; toggle Post-LN / Pre-LN (same weights, other order).")


def _pre_ln_twin(encoder: Stack) -> Stack:
    """A Pre-LN Stack with copies of the Post-LN `encoder`'s weights: the other order only."""
    first = encoder.layers[0]
    pre = Stack(EncoderBlock, len(encoder.layers), first.d_model, first.self_attn.n_heads,
                first.ffn.d_ff, np.random.default_rng(0), norm_first=True,
                dtype=first.norm1.gamma.dtype)
    for twin, layer in zip(pre.layers, encoder.layers, strict=True):
        twin.load_parameters(layer.parameters())  # the same weights, the other order
    return pre


def _block_figure(fig, result, title):
    """Per position: cosine with the block's input and std at the chosen stage; over the stages:
    their means. Fixed axes, so the fast path only sets new numbers."""
    fig.set_layout_engine("none")  # fixed margins keep the static background reusable
    grid = fig.add_gridspec(1, 3, width_ratios=[1, 1, 1.5], left=0.07, right=0.98,
                            bottom=0.22, top=0.8, wspace=0.3)
    ax_cos, ax_std, ax_line = (fig.add_subplot(grid[k]) for k in range(3))
    labels = [f"{t}: {d}" for t, d in enumerate(result["labels"])]
    panels = [
        _per_position_panel(ax_cos, result, "cos", "tab:blue", (-1.05, 1.05), labels,
                            tr("cos(stage, block input)"), (0, 1)),
        _per_position_panel(ax_std, result, "std", "tab:green", (0, 1.1 * result["std_limit"]),
                            None, tr("std per position"), (1,)),
        _stages_panel(ax_line, result),
    ]
    heading = fig.suptitle(title(result), fontsize=10)
    changing, refresh = join_panels(
        *panels, ([heading], lambda result, values: heading.set_text(title(result))))
    animate(changing)
    return refresh


def _per_position_panel(ax, result, key, color, xlim, labels, xlabel, references):
    """Bars of result[key] per position (the positions as rows), with reference lines."""
    values = result[key]
    bars = ax.barh(np.arange(len(values)), values, color=color)
    ax.set_xlim(*xlim)
    ax.set_ylim(len(values) - 0.5, -0.5)  # position 0 on top
    for x in references:
        ax.axvline(x, color="0.3", lw=0.8, ls=":")
    ax.set_xlabel(xlabel)
    if labels is None:
        ax.tick_params(labelleft=False, length=2)
    else:
        ax.set_yticks(np.arange(len(values)), labels, fontsize=label_fontsize(len(values)))
        ax.set_ylabel(tr("position: digit"))

    def update(result, values):
        for bar, value in zip(bars, result[key], strict=True):
            bar.set_width(value)

    return list(bars), update


def _stages_panel(ax, result):
    """The mean over positions of cosine and std at every stage; a band marks the chosen stage."""
    k = np.arange(len(result["cos_stages"]))
    marker = ax.axvspan(result["stage"] - 0.4, result["stage"] + 0.4, color="0.88")  # Rectangle
    cos_line, = ax.plot(k, result["cos_stages"].mean(1), "o-", color="tab:blue",
                        label=tr("cos(stage, block input)"))
    std_line, = ax.plot(k, result["std_stages"].mean(1), "s--", color="tab:green",
                        label=tr("std per position"))
    ax.set_ylim(-1.05, max(1.1, 1.1 * result["std_limit"]))
    ax.axhline(0, color="0.3", lw=0.8)
    names = PRE_LN_STAGES if result["norm_first"] else POST_LN_STAGES
    ax.set_xticks(k, [f"{i} · {tr(name)}" for i, (name, _) in enumerate(names)], rotation=35,
                  ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(k) - 0.5)
    ax.set(ylabel=tr("mean over positions"))
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)

    def update(result, values):
        s = result["stage"]
        marker.set_x(s - 0.4)
        cos_line.set_ydata(result["cos_stages"].mean(1))
        std_line.set_ydata(result["std_stages"].mean(1))

    return [marker, cos_line, std_line], update
