"""Explorer of notebook 03 (positional encoding): the sinusoidal table and the shift matrix M_k."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.language import tr
from helpers.transformer import pe_frequencies, positional_encoding, relative_position_matrix
from helpers.widgets.explorer import Explorer, FastTicks, animate, join_panels

__all__ = ["PE_D_MODELS", "column_index_slip", "pe_explorer"]

PE_D_MODELS = [4, 8, 16, 32, 64, 128, 256, 512]


def column_index_slip(T: int, d_model: int) -> np.ndarray:
    """The table with the common bug of notebook 03: exponent j / d_model for column j (not the
    pair index 2i), so the sine and the cosine of a pair turn at different speeds. (T, d_model)."""
    j = np.arange(d_model)
    angles = np.arange(T)[:, None] / 10000.0 ** (j / d_model)  # (T, d_model)
    return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))


def pe_explorer(T: int = 50, d_model: int = 64, dim: int = 6, pos: int = 10,
                offset: int = 5) -> Explorer:
    """The sinusoidal table, one of its dimensions, and the shift matrix M_k at work.

    Controls: ``positions`` (T, the rows of the table), ``d_model`` (its columns), ``dim`` (one
    column), ``pos`` (one row), ``offset`` (k) and ``slip`` (the table built with the
    column-index slip instead: M_k then misses). Every change recomputes
    PE = positional_encoding(T, d_model) and M_k = relative_position_matrix(k, d_model) and moves
    PE[pos] with M_k, which must land on PE[pos + k]. The offset is kept so that pos + k is a row.
    One figure serves every T and d_model: every change, even of the table's size, is a fast path.
    """
    if not 2 <= T <= 200 or d_model not in PE_D_MODELS:
        raise ValueError(f"T must be in 2 .. 200 and d_model one of {PE_D_MODELS}, "
                         f"got T={T}, d_model={d_model}")
    if not (0 <= dim < d_model and 0 <= pos < T and 0 <= pos + offset < T):
        raise ValueError(f"need 0 <= dim < d_model and 0 <= pos, pos + offset < T; got dim={dim}, "
                         f"pos={pos}, offset={offset} with T={T}, d_model={d_model}")
    controls = {
        "positions": W.IntSlider(value=T, min=2, max=200, description="positions"),
        "d_model": W.SelectionSlider(options=PE_D_MODELS, value=d_model, description="d_model"),
        "dim": W.IntSlider(value=dim, min=0, max=d_model - 1, description="dim"),
        "pos": W.IntSlider(value=pos, min=0, max=T - 1, description="pos"),
        "offset": W.IntSlider(value=offset, min=-(T - 1), max=T - 1, description="offset k"),
        "slip": W.ToggleButton(value=False, description="column-index slip"),
    }

    def keep_in_table(change, controls):  # slider ranges follow T and d_model; pos + k stays a row
        T = controls["positions"].value
        if change["owner"] is controls["d_model"]:
            controls["dim"].max = change["new"] - 1  # clips dim if it was beyond
        if change["owner"] is controls["positions"]:
            controls["pos"].max = T - 1
            controls["offset"].min, controls["offset"].max = -(T - 1), T - 1
        p, k = controls["pos"].value, controls["offset"].value
        controls["offset"].value = min(max(k, -p), T - 1 - p)

    def compute(positions, d_model, dim, pos, offset, slip=False):
        if not (0 <= dim < d_model and 0 <= pos < positions and 0 <= pos + offset < positions):
            raise ValueError(f"dim={dim}, pos={pos}, pos + offset={pos + offset} must index a "
                             f"table of shape ({positions}, {d_model})")
        PE = (column_index_slip if slip else positional_encoding)(positions, d_model)  # (T, d)
        M = relative_position_matrix(offset, d_model)  # (d_model, d_model)
        moved = PE[pos] @ M  # (d_model,)
        target = PE[pos + offset]  # (d_model,)
        pair = dim // 2
        omega = float(pe_frequencies(d_model)[pair])
        dim_omega = 10000.0 ** (-dim / d_model) if slip else omega  # the slip: dim's own speed
        return {"PE": PE, "M": M, "moved": moved, "target": target,
                "error": float(np.abs(moved - target).max()), "pos": pos, "offset": offset,
                "dim": dim, "pair": pair, "omega": omega, "wavelength": 2 * np.pi / dim_omega,
                "angle": offset * omega, "slip": slip}

    def status(result, values):
        return [
            (tr("pair"), tr("i = {i}, ω_i = {omega} rad per position, wavelength {wavelength}",
                            i=result["pair"], omega=f"{result['omega']:.4g}",
                            wavelength=f"{result['wavelength']:.1f}")),
            (tr("turn k·ω_i"), f"{result['angle']:.3f} rad"),
            ("max |PE[pos] @ M_k − PE[pos + k]|", f"{result['error']:.1e}"),
        ]

    return Explorer(controls, compute, _pe_figure, status, link=keep_in_table, figsize=(9.4, 6.4),
                    title="Positional-encoding explorer",
                    note="Exact sinusoids, nothing learned. Pick a dimension, a position and an "
                         "offset k: M_k moves PE[pos] onto PE[pos + k]. The column-index slip "
                         "breaks it.")


def _pe_figure(fig, result, values):
    """Four panels on fixed margins; every change (data, limits, ticks, titles) is a fast path."""
    fig.set_layout_engine("none")  # fixed margins: the axes never move, so blitting is exact
    grid = fig.add_gridspec(2, 2, width_ratios=[1.3, 1], left=0.07, right=0.98, bottom=0.09,
                            top=0.94, wspace=0.24, hspace=0.42)
    ax_map, ax_pair = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_dim, ax_vec = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    changing, refresh = join_panels(_table_panel(fig, ax_map, result), _pair_panel(ax_pair),
                                    _dimension_panel(ax_dim), _shift_panel(ax_vec))
    refresh(result, values)
    animate(changing)
    return refresh


def _table_panel(fig, ax, result):
    """The table PE (positions x dimensions), the rows pos and pos + k, the column dim."""
    image = ax.imshow(result["PE"], cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02, label=tr("PE value"))
    ax.set_xlabel(tr("dimension"), labelpad=16)
    ax.set_ylabel(tr("position"), labelpad=24)
    row_from = ax.axhline(0, color="black", lw=2, ls="--")
    row_to = ax.axhline(0, color="tab:green", lw=2.5)
    column = ax.axvline(0, color="tab:purple", lw=2.5)
    ax.title.set_fontsize(9.5)
    ticks_x, ticks_y = FastTicks(ax, "x"), FastTicks(ax, "y")

    def update(result, values):
        PE = result["PE"]
        T, d = PE.shape
        p, k, j = result["pos"], result["offset"], result["dim"]
        image.set_data(PE)
        image.set_extent((-0.5, d - 0.5, T - 0.5, -0.5))
        ax.set(xlim=(-0.5, d - 0.5), ylim=(T - 0.5, -0.5))
        ticks_x.set_range(d)
        ticks_y.set_range(T)
        slip = tr(" (column-index slip)") if result["slip"] else ""
        ax.title.set_text(tr("PE{slip}: {T} positions × {d} dimensions", slip=slip, T=T, d=d))
        row_from.set_ydata([p, p])
        row_to.set_ydata([p + k, p + k])
        column.set_xdata([j, j])

    return [image, row_from, row_to, column, ax.title, *ticks_x.artists, *ticks_y.artists], update


def _pair_panel(ax):
    """The pair (dim 2i, dim 2i+1) of every position on the unit circle, and the turn by k·ω_i."""
    turn = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.sin(turn), np.cos(turn), color="0.85", lw=1)
    trail, = ax.plot([], [], "o", ms=2.5, color="0.55")
    arc, = ax.plot([], [], color="tab:green", lw=3, solid_capstyle="butt")
    start, = ax.plot([], [], "o", ms=9, color="black")
    end, = ax.plot([], [], "o", ms=12, mfc="none", mec="tab:green", mew=2)
    landed, = ax.plot([], [], "x", ms=9, mew=2, color="tab:red")
    ax.set(xlim=(-1.25, 1.25), ylim=(-1.25, 1.25), aspect="equal",
           xlabel=tr("dim 2i: sin(pos·ω_i)"), ylabel=tr("dim 2i+1: cos(pos·ω_i)"))
    ax.title.set_fontsize(9.5)

    def update(result, values):
        PE, p, k, i = result["PE"], result["pos"], result["offset"], result["pair"]
        trail.set_data(PE[:, 2 * i], PE[:, 2 * i + 1])
        net = (result["angle"] + np.pi) % (2 * np.pi) - np.pi  # the same turn, within ±π
        theta = p * result["omega"] + np.linspace(0, net, 60)
        arc.set_data(1.12 * np.sin(theta), 1.12 * np.cos(theta))  # just outside the circle
        start.set_data([PE[p, 2 * i]], [PE[p, 2 * i + 1]])
        end.set_data([PE[p + k, 2 * i]], [PE[p + k, 2 * i + 1]])
        landed.set_data([result["moved"][2 * i]], [result["moved"][2 * i + 1]])
        ax.title.set_text(tr("pair {i} (dims {even}, {odd}): turned by k·ω_{i} = {angle} rad",
                             i=i, even=2 * i, odd=2 * i + 1, angle=f"{result['angle']:.2f}"))

    return [trail, arc, start, end, landed, ax.title], update


def _dimension_panel(ax):
    """One column of the table, PE[:, dim], over the positions, with pos and pos + k marked."""
    curve, = ax.plot([], [], color="tab:purple", lw=1.5)
    dim_from, = ax.plot([], [], "o", ms=7, color="black")
    dim_to, = ax.plot([], [], "o", ms=10, mfc="none", mec="tab:green", mew=2)
    ax.set_ylim(-1.15, 1.15)
    ax.set_xlabel(tr("position"), labelpad=16)
    ax.set_ylabel("PE[:, dim]")
    ax.title.set_fontsize(9.5)
    ticks = FastTicks(ax, "x")

    def update(result, values):
        PE, p, k, j, i = (result[name] for name in ("PE", "pos", "offset", "dim", "pair"))
        T = PE.shape[0]
        ax.set_xlim(-0.5, T - 0.5)
        ticks.set_range(T)
        curve.set_data(np.arange(T), PE[:, j])
        dim_from.set_data([p], [PE[p, j]])
        dim_to.set_data([p + k], [PE[p + k, j]])
        ax.title.set_text(tr("dim {j} = {wave}(pos·ω_{i}): wavelength {wavelength} positions",
                             j=j, wave="sin" if j % 2 == 0 else "cos", i=i,
                             wavelength=f"{result['wavelength']:.1f}"))

    return [curve, dim_from, dim_to, ax.title, *ticks.artists], update


def _shift_panel(ax):
    """PE[pos], PE[pos + k] and PE[pos] @ M_k over the dimensions: the last two coincide."""
    vec_from, = ax.plot([], [], ".", color="0.45", label="PE[pos]")
    vec_to, = ax.plot([], [], "o", mfc="none", mec="tab:green", label="PE[pos + k]")
    vec_moved, = ax.plot([], [], "x", color="tab:red", label="PE[pos] @ M_k")
    ax.set_ylim(-1.15, 1.75)
    ax.set_xlabel(tr("dimension"), labelpad=16)
    ax.set_ylabel(tr("value"))
    ax.legend(loc="upper center", ncols=3, fontsize=7, handlelength=1.5, columnspacing=0.8)
    ax.title.set_fontsize(9.5)
    ticks = FastTicks(ax, "x")

    def update(result, values):
        PE, p, k = result["PE"], result["pos"], result["offset"]
        d = PE.shape[1]
        ax.set_xlim(-0.5, d - 0.5)
        ticks.set_range(d)
        dims, size = np.arange(d), (6 if d <= 64 else 3)
        for line, y, extra in ((vec_from, PE[p], 0), (vec_to, result["target"], 3),
                               (vec_moved, result["moved"], 0)):
            line.set_data(dims, y)
            line.set_markersize(size + extra)
        if result["error"] < 1e-9:
            ax.title.set_text(tr("PE[{p}] @ M_{k} lands on PE[{q}]", p=p, k=k, q=p + k))
        else:
            ax.title.set_text(tr("PE[{p}] @ M_{k} misses (by {error}) PE[{q}]", p=p, k=k,
                                 q=p + k, error=f"{result['error']:.2f}"))

    return [vec_from, vec_to, vec_moved, ax.title, *ticks.artists], update
