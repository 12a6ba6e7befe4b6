"""Explorer of notebook 08 (what attention costs): memory, operations and time of two versions."""

from __future__ import annotations

import time

import ipywidgets as W
import numpy as np

from helpers.language import tr
from helpers.transformer import online_attention, scaled_dot_product_attention
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["COST_LENGTHS", "timed", "cost_explorer"]

COST_LENGTHS = [32, 64, 128, 256, 512]  # small sizes: both versions run in milliseconds
VERSIONS = ["plain", "online"]
VERSION_COLORS = ["#c44e52", "#4c72b0"]


def timed(fn, repeats: int = 2):
    """fn()'s result and its best wall time over `repeats` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, min(times) * 1e3


def cost_explorer(seed: int = 0, repeats: int = 2) -> Explorer:
    """n, d_k and key block size: memory and operations (computed), time (measured) of plain
    attention (notebook 01) against online attention (notebook 08), one head, float32.

    Memory is the largest array of scores each version holds: n x n for plain attention,
    n x block for the online one. Both versions do the same 4 n^2 d_k matrix-product operations.
    """
    controls = {
        "n": W.SelectionSlider(options=COST_LENGTHS, value=256, description="n"),
        "d_k": W.SelectionSlider(options=[16, 32, 64, 128], value=64, description="d_k"),
        "block": W.SelectionSlider(options=[16, 32, 64, 128, 256], value=64,
                                   description="block"),
    }

    def compute(n, d_k, block):
        rng = np.random.default_rng([seed, n, d_k])
        Q, K, V = (rng.standard_normal((n, d_k)).astype(np.float32) for _ in range(3))  # random
        (plain, _), ms_plain = timed(lambda: scaled_dot_product_attention(Q, K, V), repeats)
        online, ms_online = timed(lambda: online_attention(Q, K, V, block_size=block), repeats)
        return {
            "bytes": {"plain": n * n * 4, "online": n * min(block, n) * 4},
            "flops": 4 * n * n * d_k,  # Q K^T and weights @ V, 2 operations per multiply-add
            "ms": {"plain": ms_plain, "online": ms_online},
            "max_diff": float(np.abs(plain - online).max()),
        }

    def draw(fig, result, values):
        ax_mem, ax_time = fig.subplots(1, 2)
        memory = _bars_panel(ax_mem, lambda r: [r["bytes"][k] / 1e6 for k in VERSIONS],
                             result, ylim=(1e-3, 10), ylabel=tr("MB (computed)"),
                             title=tr("largest score array"))
        times = _bars_panel(ax_time, lambda r: [r["ms"][k] for k in VERSIONS], result,
                            ylim=(1e-2, 1e4),
                            ylabel=tr("ms (measured, best of {repeats})", repeats=repeats),
                            title=tr("time on this machine"))
        suptitle = fig.suptitle("")

        def set_suptitle(result, values):
            suptitle.set_text(tr("random float32 Q, K, V · n = {n}, d_k = {d_k}, block = {block}",
                                 n=values["n"], d_k=values["d_k"], block=values["block"]))

        changing, refresh = join_panels(memory, times, ([suptitle], set_suptitle))
        animate(changing)
        refresh(result, values)
        return refresh

    def status(result, values):
        b, ms = result["bytes"], result["ms"]
        return [
            (tr("one score array (plain keeps ~3, section 2)"),
             tr("{plain} MB plain, {online} MB online ({ratio}x less)",
                plain=f"{b['plain'] / 1e6:.3g}", online=f"{b['online'] / 1e6:.3g}",
                ratio=f"{b['plain'] / b['online']:.0f}")),
            (tr("operations"), tr("{mflop} MFLOP each", mflop=f"{result['flops'] / 1e6:.0f}")),
            (tr("time"), tr("{plain} ms plain, {online} ms online", plain=f"{ms['plain']:.2f}",
                            online=f"{ms['online']:.2f}")),
            (tr("max |difference|"), f"{result['max_diff']:.1e}"),
        ]

    return Explorer(controls, compute, draw, status, figsize=(6.4, 3.4),
                    title="Cost explorer",
                    note="Random inputs, one head, float32. Memory and operations are computed; "
                         "times are measured now and change from run to run.")


def _bars_panel(ax, heights, result, *, ylim, ylabel, title):
    """One bar per version on a log axis, each labelled with its height, heights(result)."""
    bars = ax.bar([tr(v) for v in VERSIONS], heights(result), color=VERSION_COLORS)
    ax.set_yscale("log")
    ax.set_ylim(*ylim)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    labels = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=9) for i in range(2)]

    def update(result, values):
        top = ax.get_ylim()[1]
        for bar, label, height in zip(bars, labels, heights(result), strict=True):
            bar.set_height(height)
            label.set_y(min(height * 1.15, top / 3))  # stays inside the axes
            label.set_text(f"{height:.3g}")

    return [*bars, *labels], update
