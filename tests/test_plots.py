"""helpers/plots.py: labelled heatmaps and grids, without global matplotlib side effects."""

import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

from helpers.plots import heatmap, heatmap_figsize, heatmap_grid, label_fontsize


def test_import_changes_no_global_matplotlib_state():
    code = (
        "import matplotlib, sys\n"
        "raw = lambda: {k: dict.__getitem__(matplotlib.rcParams, k) for k in matplotlib.rcParams}\n"
        "before = raw()  # raw values: reading rcParams['backend'] would itself import pyplot\n"
        "import helpers.plots\n"
        "after = raw()\n"
        "changed = {k for k in before if before[k] != after[k]}\n"
        "assert not changed, changed\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'importing plots imported pyplot'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_heatmap_draws_the_matrix_with_labels_colorbar_and_annotations():
    m = np.arange(9.0).reshape(3, 3) / 8
    fig = Figure()
    ax = fig.subplots()
    image = heatmap(m, ["a", "b", "c"], ["x", "y", "z"], ax=ax, title="t")
    np.testing.assert_array_equal(image.get_array(), m)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert len(fig.axes) == 2, "a colour bar axis is added"
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 9 and texts[-1] == "1.00"
    assert image.get_clim() == (0.0, 1.0)


def test_large_matrix_is_not_annotated_and_labels_shrink():
    fig = Figure()
    ax = fig.subplots()
    heatmap(np.zeros((64, 64)), [f"t{i}" for i in range(64)], [f"t{i}" for i in range(64)], ax=ax)
    assert not ax.texts
    assert ax.get_xticklabels()[0].get_fontsize() == pytest.approx(label_fontsize(64))


def test_label_sizes_and_figure_sizes_stay_readable_from_3_to_64_tokens():
    sizes = [label_fontsize(n) for n in range(3, 65)]
    assert all(5 <= s <= 10 for s in sizes) and sizes == sorted(sizes, reverse=True)
    for n in (3, 8, 16, 32, 64):
        w, h = heatmap_figsize(n, n)
        assert 3 <= w <= 9 and 2.4 <= h <= 8.5
        # at least ~7 points of height per label row at 64 tokens
        assert h * 72 / n >= 6.5 or n < 10


def test_grid_shared_and_separate_scales():
    mats = [np.full((3, 4), v) + np.eye(3, 4) for v in (0.0, 5.0)]
    fig = Figure()
    _, axes, images = heatmap_grid(mats, list("abc"), list("wxyz"), fig=fig, titles=["h0", "h1"])
    assert len(axes) == 2 and [ax.get_title() for ax in axes] == ["h0", "h1"]
    assert images[0].get_clim() == images[1].get_clim() == (0.0, 6.0)
    assert len(fig.axes) == 3, "one shared colour bar"
    fig2 = Figure()
    _, _, images2 = heatmap_grid(mats, fig=fig2, shared_scale=False, ncols=1)
    assert images2[0].get_clim() == (0.0, 1.0) and images2[1].get_clim() == (5.0, 6.0)
    assert len(fig2.axes) == 4, "a colour bar per panel"


def test_bad_input_raises():
    fig = Figure()
    with pytest.raises(ValueError, match="2-D matrix"):
        heatmap(np.zeros((2, 3, 4)), ax=fig.subplots())
    with pytest.raises(ValueError, match="row_labels has 2 labels but the matrix has 3"):
        heatmap(np.zeros((3, 3)), ["a", "b"], ax=fig.subplots())
    with pytest.raises(ValueError, match="2 titles for 1 matrices"):
        heatmap_grid([np.zeros((2, 2))], titles=["a", "b"], fig=Figure())
