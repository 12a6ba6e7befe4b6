"""Matplotlib helpers: token-labelled heatmaps and grids of them.

Importing this module changes no global matplotlib state (no style, no rcParams, no backend, and
pyplot is imported only when a function has to create a figure for you). Every function takes
``ax=`` (or ``fig=``) and returns the artists it made, so it works both in notebooks (pyplot,
inline backend) and inside widgets (a bare ``matplotlib.figure.Figure``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["heatmap", "heatmap_grid", "heatmap_figsize", "label_fontsize"]

# Annotate each cell with its value only when the matrix is small enough to read the numbers.
ANNOTATE_MAX_CELLS = 144  # e.g. 12 x 12


def label_fontsize(n: int) -> float:
    """Tick-label font size that stays readable from 3 to 64 labels on a figure of ~6 inches."""
    return float(np.clip(11.0 - 0.09 * n, 5.0, 10.0))


def heatmap_figsize(n_rows: int, n_cols: int, *, cell: float | None = None) -> tuple[float, float]:
    """A figure size (inches) that keeps cells square-ish and labels legible for 3 to 64 tokens."""
    n = max(n_rows, n_cols)
    if cell is None:
        cell = float(np.clip(4.8 / max(n, 1), 0.1, 0.6))
    width = float(np.clip(n_cols * cell + 1.8, 3.0, 9.0))
    height = float(np.clip(n_rows * cell + 1.2, 2.4, 8.5))
    return width, height


def _as_matrix(matrix) -> np.ndarray:
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix (rows, cols), got shape {m.shape}")
    return m


def _check_labels(labels, n: int, name: str):
    if labels is None or labels is False:
        return labels
    labels = [str(t) for t in labels]
    if len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix has {n} along that axis")
    return labels


def heatmap(
    matrix,
    row_labels=None,
    col_labels=None,
    *,
    ax=None,
    title: str | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = None,
    fmt: str = ".2f",
    colorbar: bool = True,
    xlabel: str | None = "key",
    ylabel: str | None = "query",
):
    """Draw `matrix` (rows x cols) with token labels on both axes; return the AxesImage.

    Labels None number the rows/columns; False draws no ticks on that axis.
    annotate=None annotates values when the matrix has at most ANNOTATE_MAX_CELLS cells.
    With ax=None a new pyplot figure sized for the matrix is created.
    """
    m = _as_matrix(matrix)
    n_rows, n_cols = m.shape
    row_labels = _check_labels(row_labels, n_rows, "row_labels")
    col_labels = _check_labels(col_labels, n_cols, "col_labels")
    if ax is None:
        import matplotlib.pyplot as plt  # only when we must create the figure

        _, ax = plt.subplots(figsize=heatmap_figsize(n_rows, n_cols), layout="constrained")
    finite = m[np.isfinite(m)] if np.issubdtype(m.dtype, np.floating) else m.ravel()
    if vmin is None:
        vmin = float(finite.min()) if finite.size else 0.0
    if vmax is None:
        vmax = float(finite.max()) if finite.size else 1.0
    if vmax <= vmin:
        vmax = vmin + 1e-12
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")

    n = max(n_rows, n_cols)
    size = label_fontsize(n)
    # tick parameters first: the ticks below are made with them, not made and then changed
    ax.tick_params(length=0)
    rotate = col_labels and max((len(s) for s in col_labels), default=0) > 2
    if rotate:
        ax.tick_params(axis="x", labelrotation=90 if n_cols > 12 else 45)
    if col_labels is False:  # no ticks at all (inner panels of a grid; ticks are costly)
        ax.set_xticks([])
    else:
        ax.set_xticks(np.arange(n_cols), col_labels or range(n_cols), fontsize=size)
    if row_labels is False:
        ax.set_yticks([])
    else:
        ax.set_yticks(np.arange(n_rows), row_labels or range(n_rows), fontsize=size)
    if rotate and n_cols <= 12:
        for t in ax.get_xticklabels():
            t.set_horizontalalignment("right")
            t.set_rotation_mode("anchor")
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=size + 1)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=size + 1)
    if title:
        ax.set_title(title, fontsize=size + 2)

    if annotate is None:
        annotate = m.size <= ANNOTATE_MAX_CELLS
    if annotate:
        norm = image.norm
        cmap_obj = image.get_cmap()
        text_size = float(np.clip(13.0 - 0.55 * n, 6.0, 10.0))
        for i in range(n_rows):
            for j in range(n_cols):
                value = m[i, j]
                r, g, b, _ = cmap_obj(norm(value))
                luminance = 0.299 * r + 0.587 * g + 0.114 * b
                ax.text(
                    j, i, format(value, fmt), ha="center", va="center", fontsize=text_size,
                    color="black" if luminance > 0.5 else "white",
                )
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    return image


def heatmap_grid(
    matrices,
    row_labels=None,
    col_labels=None,
    *,
    titles=None,
    ncols: int | None = None,
    shared_scale: bool = True,
    fig=None,
    suptitle: str | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = False,
    fmt: str = ".2f",
    xlabel: str | None = "key",
    ylabel: str | None = "query",
):
    """One heatmap per matrix (one per head, say) in a grid; return (fig, axes, images).

    matrices: a sequence of 2-D arrays or an array (n, rows, cols). With shared_scale=True every
    panel uses the same vmin/vmax (given, or the data's range) and one colour bar is drawn for
    the grid; otherwise each panel gets its own scale and colour bar.
    """
    mats = [_as_matrix(m) for m in matrices]
    if not mats:
        raise ValueError("heatmap_grid needs at least one matrix")
    n = len(mats)
    if titles is not None and len(titles) != n:
        raise ValueError(f"got {len(titles)} titles for {n} matrices")
    ncols = min(n, 4) if ncols is None else ncols
    nrows = int(np.ceil(n / ncols))
    rows, cols = mats[0].shape
    w, h = heatmap_figsize(rows, cols)
    w, h = min(w * 0.8, 4.2), min(h * 0.8, 4.0)
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(w * ncols + 0.8, h * nrows + 0.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False).ravel())
    if shared_scale:
        vmin = float(min(np.nanmin(m) for m in mats)) if vmin is None else vmin
        vmax = float(max(np.nanmax(m) for m in mats)) if vmax is None else vmax
    images = []
    for k, (ax, m) in enumerate(zip(axes, mats, strict=False)):
        first_col, bottom = k % ncols == 0, k + ncols >= n  # labels on the outer edge only
        images.append(
            heatmap(
                m, row_labels if first_col else False, col_labels if bottom else False, ax=ax,
                title=None if titles is None else titles[k], cmap=cmap, vmin=vmin, vmax=vmax,
                annotate=annotate, fmt=fmt, colorbar=not shared_scale,
                xlabel=xlabel if bottom else None, ylabel=ylabel if first_col else None,
            )
        )
    for ax in axes[n:]:
        ax.set_visible(False)
    if shared_scale:
        fig.colorbar(images[0], ax=list(axes[:n]), fraction=0.046 / ncols, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle)
    return fig, axes[:n], images
