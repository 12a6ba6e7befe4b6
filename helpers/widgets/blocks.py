"""Explorer of notebook 05 (the Post-LN block): every stage of a block, Post-LN or Pre-LN."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.analysis import block_stages
from helpers.module import clear_caches
from helpers.plots import label_fontsize
from helpers.transformer import EncoderBlock, Stack, positional_encoding
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
    """Slider options "0 · input", "1 · self-attention", ... for one ordering of the block."""
    stages = PRE_LN_STAGES if norm_first else POST_LN_STAGES
    return [(f"{i} · {name}", i) for i, (name, _) in enumerate(stages)]


def block_explorer(tokens: list[str], encoder: Stack | None = None, x=None, *, seed: int = 0,
                   features: int = 32, vmax: float = 3.0) -> Explorer:
    """Step through the stages of one block of a stack, Post-LN or Pre-LN, with the SAME weights.

    tokens: the T labels of the positions. encoder: a Post-LN Stack of EncoderBlocks (default:
    6 RANDOMLY initialised blocks, d_model 64, 4 heads, d_ff 256); a Pre-LN twin gets copies of
    its weights, so the toggle changes only the order of the operations. x: the input
    (T, d_model) (default: random embeddings, standard deviation 1, plus positional encoding).
    Every change runs the blocks up to the chosen one again and records the stages of that block.
    The heatmap shows the first `features` features (colours clipped at ±vmax); mean and std are
    per position over all d_model features.
    """
    if encoder is None:
        encoder = Stack(EncoderBlock, 6, 64, 4, 256, np.random.default_rng([seed, 5]))
    if encoder.norm is not None or encoder.layers[0].norm_first:
        raise ValueError("block_explorer expects a Post-LN Stack of EncoderBlocks "
                         "(norm_first=False); it builds the Pre-LN twin itself")
    first = encoder.layers[0]
    d_model, T, n_layers = first.d_model, len(tokens), len(encoder.layers)
    if x is None:
        emb = np.random.default_rng([seed, 6]).standard_normal((T, d_model))  # random tokens
        x = emb + positional_encoding(T, d_model)
    x = np.asarray(x)
    if x.shape != (T, d_model):
        raise ValueError(f"x must have shape (T={T}, d_model={d_model}), got {x.shape}")
    stacks = {False: encoder, True: _pre_ln_twin(encoder)}
    features = min(features, d_model)

    controls = {
        "norm_first": W.ToggleButton(value=False, description="Pre-LN (norm first)"),
        "layer": W.IntSlider(value=1, min=1, max=n_layers, description="block"),
        "stage": W.SelectionSlider(options=stage_options(False), value=0, description="stage"),
    }

    def follow_order(change, controls):  # the stage labels follow the toggle; keep the index
        if change["owner"] is not controls["norm_first"]:
            return
        keep = controls["stage"].value
        controls["stage"].options = stage_options(change["new"])
        controls["stage"].value = keep

    def compute(norm_first, layer, stage):
        stack = stacks[norm_first]
        h = x
        for block in stack.layers[:layer - 1]:  # the residual stream entering block `layer`
            h = block.forward(h)
        stages = block_stages(stack.layers[layer - 1], h)
        clear_caches(stack)  # no backward follows
        a = stages[stage]  # (T, d_model)
        name, formula = (PRE_LN_STAGES if norm_first else POST_LN_STAGES)[stage]
        return {"activations": a, "stages": stages, "stage": stage, "name": name,
                "formula": formula, "layer": layer, "norm_first": norm_first,
                "mean": a.mean(axis=-1), "std": a.std(axis=-1),
                "norm": np.linalg.norm(a, axis=-1)}  # (T,) each

    limits = _stage_limits(stacks.values(), x)  # fixed axes for every stage of both orders

    def title(result):
        order = "Pre-LN" if result["norm_first"] else "Post-LN"
        return (f"{order} · block {result['layer']} of {n_layers} · stage {result['stage']}: "
                f"{result['formula']} · RANDOM weights")

    def draw(fig, result, values):
        return _block_figure(fig, result, tokens, features, vmax, limits, title)

    def status(result, values):
        return [("stage", result["formula"]),
                ("mean |x| per position", f"{result['norm'].mean():.2f} "
                                          f"(√d_model = {np.sqrt(d_model):.2f})"),
                ("std per position", f"{result['std'].min():.3f} to {result['std'].max():.3f}")]

    return Explorer(controls, compute, draw, status, link=follow_order, figsize=(9.0, 4.4),
                    title="Block explorer",
                    note="RANDOM initial weights (not learned). Step through the stages of a "
                         "block; toggle Post-LN / Pre-LN (same weights, other order).")


def _pre_ln_twin(encoder: Stack) -> Stack:
    """A Pre-LN Stack with copies of the Post-LN `encoder`'s weights: the other order only."""
    first = encoder.layers[0]
    pre = Stack(EncoderBlock, len(encoder.layers), first.d_model, first.self_attn.n_heads,
                first.ffn.d_ff, np.random.default_rng(0), norm_first=True)
    for twin, layer in zip(pre.layers, encoder.layers, strict=True):
        twin.load_parameters(layer.parameters())  # the same weights, the other order
    return pre


def _stage_limits(stacks, x) -> dict[str, float]:
    """The largest |mean| and std per position over every stage of every block of `stacks`."""
    limits = {"mean": 0.5, "std": 1.5}  # the narrowest axes shown
    for stack in stacks:
        h = x
        for block in stack.layers:
            for a in block_stages(block, h):
                limits["mean"] = max(limits["mean"], float(np.abs(a.mean(axis=-1)).max()))
                limits["std"] = max(limits["std"], float(a.std(axis=-1).max()))
            h = block.forward(h)
        clear_caches(stack)
    return limits


def _block_figure(fig, result, tokens, features, vmax, limits, title):
    """Activations, mean and std per position on fixed margins; the fast path sets new numbers.

    limits: the largest |mean| and std of every stage (fixed axes); title(result): the heading.
    """
    fig.set_layout_engine("none")  # fixed margins keep the static background reusable
    grid = fig.add_gridspec(1, 5, width_ratios=[3.2, 0.1, 0.45, 1, 1], left=0.13,
                            right=0.98, bottom=0.13, top=0.88, wspace=0.12)
    ax_map, cax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    ax_mean = fig.add_subplot(grid[3], sharey=ax_map)
    ax_std = fig.add_subplot(grid[4], sharey=ax_map)
    mean_lim, std_lim = 1.1 * limits["mean"], 1.1 * limits["std"]
    panels = [
        _activation_panel(fig, ax_map, cax, result, tokens, features, vmax),
        _per_position_panel(ax_mean, result, "mean", "tab:purple", (-mean_lim, mean_lim),
                            {"x": 0, "color": "0.3", "lw": 0.8}),
        _per_position_panel(ax_std, result, "std", "tab:green", (0, std_lim),
                            {"x": 1, "color": "0.3", "lw": 0.8, "ls": ":"}),
    ]
    heading = fig.suptitle(title(result), fontsize=10)
    changing, refresh = join_panels(
        *panels, ([heading], lambda result, values: heading.set_text(title(result))))
    animate(changing)
    return refresh


def _activation_panel(fig, ax, cax, result, tokens, features, vmax):
    """The activations (T, first `features` features) as a heatmap, the tokens as rows."""
    T, d_model = result["activations"].shape
    image = ax.imshow(result["activations"][:, :features], cmap="RdBu_r", vmin=-vmax,
                      vmax=vmax, aspect="auto", interpolation="nearest")
    fig.colorbar(image, cax=cax, label=f"value (clipped at ±{vmax:g})")
    ax.set_yticks(np.arange(T), tokens, fontsize=label_fontsize(T))
    ax.set_xlabel(f"feature (first {features} of {d_model})")
    ax.tick_params(length=0)

    def update(result, values):
        image.set_data(result["activations"][:, :features])

    return [image], update


def _per_position_panel(ax, result, stat, color, xlim, reference):
    """Bars of result[stat] ("mean" or "std") per position, with a reference line."""
    bars = ax.barh(np.arange(len(result[stat])), result[stat], color=color)
    ax.set_xlim(*xlim)
    ax.axvline(**reference)
    ax.set_xlabel(f"{stat} per position")
    ax.tick_params(labelleft=False, length=2)

    def update(result, values):
        for bar, value in zip(bars, result[stat], strict=True):
            bar.set_width(value)

    return list(bars), update
