"""ipywidgets explorers: controls that recompute real NumPy attention and redraw a figure.

The pattern every notebook uses is :class:`Explorer`:

* a dict of named controls (sliders, dropdowns, toggles, text boxes);
* ``compute(**values)`` does the NumPy work and returns a result (kept in ``explorer.result``,
  which is what the in-kernel tests assert on);
* ``draw(fig, result, values)`` draws on a bare matplotlib ``Figure`` (no pyplot state, so no
  figure leaks into the notebook). It may return a *fast path* ``refresh(result, values)`` that
  updates the artists it marked ``animated`` (``set_data``, ``set_text``...) and returns them, or
  returns ``None`` when the layout itself must change (new labels, say). The static rest of the
  figure is then drawn once and reused (matplotlib "blitting"), which keeps an update far below
  100 ms; without a fast path the figure is simply redrawn from scratch;
* ``status(result, values)`` returns ``[(label, text), ...]`` shown under the figure;
* optionally ``link(change, controls)`` adjusts dependent controls (say, the options of a token
  dropdown when the sentence changes) before the single recompute that follows a change.

The figure is rendered to PNG and swapped into one ``Image`` widget, so a change never clears
the output area (no flicker). An exception inside a callback is caught and *shown* in a red box
under the figure (and kept in ``explorer.last_error``); it is never swallowed.

Builders return the explorer; they never display it. The notebook displays it in a cell marked
``# NBVAL_IGNORE_OUTPUT`` and tests it in the next cell by setting a control's ``.value``.

DOM convention used by the browser tests (tests/e2e): the explorer has CSS class
``tx-explorer``; each control ``tx-control tx-control-<name> tx-kind-<kind>``; the figure
``tx-figure``; the status line ``tx-status`` with one ``<span class="tx-value"
data-control="<name>">`` per control; the error box ``tx-error``.
"""

from __future__ import annotations

import html
import io
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable

import ipywidgets as W
import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from helpers.plots import heatmap, heatmap_grid, label_fontsize
from helpers.transformer import (
    Encoder,
    EncoderBlock,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    pe_frequencies,
    positional_encoding,
    relative_position_matrix,
    scaled_dot_product_attention,
    softmax,
)

__all__ = [
    "Explorer",
    "control_kind",
    "display_value",
    "entropy",
    "scaling_explorer",
    "query_explorer",
    "head_explorer",
    "pe_explorer",
    "mask_explorer",
    "block_stages",
    "block_explorer",
    "attention_viewer",
    "cost_explorer",
    "TrainingMonitor",
    "digits_to_tokens",
    "attention_comparison",
    "greedy_decode_tokens",
]


def control_kind(control) -> str:
    """The kind of a control, as the browser tests name it: slider, dropdown, toggle or text."""
    if isinstance(control, (W.IntSlider, W.FloatSlider, W.SelectionSlider, W.FloatLogSlider)):
        return "slider"
    if isinstance(control, (W.Dropdown, W.Select)):
        return "dropdown"
    if isinstance(control, (W.ToggleButton, W.Checkbox, W.ToggleButtons, W.RadioButtons)):
        return "toggle"
    if isinstance(control, (W.Text, W.Textarea)):
        return "text"
    raise TypeError(f"unsupported control type {type(control).__name__}")


def display_value(control) -> str:
    """How a control's current value reads on screen (slider readout, option label, on/off)."""
    if isinstance(control, (W.ToggleButton, W.Checkbox)):
        return "on" if control.value else "off"
    if isinstance(control, (W.Dropdown, W.Select, W.SelectionSlider, W.ToggleButtons,
                            W.RadioButtons)):
        return str(control.label)
    if isinstance(control, W.FloatSlider):
        return format(control.value, control.readout_format)
    return str(control.value)


def entropy(weights, axis=-1):
    """Shannon entropy (nats) of probability rows; 0 * log 0 counts as 0."""
    w = np.asarray(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, -w * np.log(w), 0.0)
    return terms.sum(axis=axis)


class Explorer(W.VBox):
    """Controls -> compute (NumPy) -> draw (matplotlib Figure) -> PNG, plus a status line."""

    MAX_CACHED_LAYOUTS = 8

    def __init__(
        self,
        controls: dict[str, W.ValueWidget],
        compute: Callable[..., object],
        draw: Callable[[Figure, object, dict], Callable | None],
        status: Callable[[object, dict], list[tuple[str, str]]] | None = None,
        *,
        link: Callable[[dict, dict], None] | None = None,
        layout_key: Callable[[dict], object] | None = None,
        title: str = "",
        note: str = "",
        figsize: tuple[float, float] = (6.0, 4.0),
        dpi: int = 90,
    ):
        self.controls = dict(controls)
        self.compute = compute
        self.draw = draw
        self.status_fn = status
        self.link = link
        self._linking = False
        self.figsize = figsize
        self.dpi = dpi
        self.result = None
        self.layout_key = layout_key or (lambda values: None)
        self._drawn: OrderedDict = OrderedDict()  # layout key -> (figure, refresh, background)
        self.last_error: BaseException | None = None
        self.n_updates = 0
        self.last_update_ms = float("nan")

        for name, control in self.controls.items():
            control.add_class("tx-control")
            control.add_class(f"tx-control-{name}")
            control.add_class(f"tx-kind-{control_kind(control)}")
            control.observe(self._on_change, names="value")
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.image.add_class("tx-figure")
        self.status = W.HTML()
        self.status.add_class("tx-status")
        self.error = W.HTML(layout=W.Layout(display="none"))
        self.error.add_class("tx-error")
        header = [W.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        if note:
            header.append(W.HTML(f"<i>{html.escape(note)}</i>"))
        rows = [W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap"))]
        super().__init__(header + rows + [self.image, self.status, self.error])
        self.add_class("tx-explorer")
        self.update()

    # -- state -------------------------------------------------------------------------------
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change):
        if self._linking:  # a change made by `link` itself: one update follows below
            return
        if self.link is not None:
            self._linking = True
            try:
                self.link(change, self.controls)
            finally:
                self._linking = False
        self.update()

    def render_png(self, result, values) -> bytes:
        """Draw the figure for `result` and return PNG bytes (fast path when available).

        Figures are kept per layout key (say, one per sentence), so that coming back to a layout
        already drawn takes the fast path too.
        """
        key = self.layout_key(values)
        fig, refresh, background = self._drawn.get(key, (None, None, None))
        if key in self._drawn:
            self._drawn.move_to_end(key)
        artists = refresh(result, values) if refresh is not None else None
        if artists is None:  # first draw, no fast path, or the layout changed: full redraw
            fig = Figure(figsize=self.figsize, dpi=self.dpi, layout="constrained")
            FigureCanvasAgg(fig)
            refresh = self.draw(fig, result, values)
            fig.canvas.draw()  # everything except the artists marked animated
            background = fig.canvas.copy_from_bbox(fig.bbox)
            self._drawn[key] = (fig, refresh, background)
            while len(self._drawn) > self.MAX_CACHED_LAYOUTS:  # a few MB each: keep the newest
                self._drawn.popitem(last=False)
            artists = [a for a in fig.findobj() if a.get_animated()]
        fig.canvas.restore_region(background)
        for artist in artists:
            fig.draw_artist(artist)
        rgba = np.asarray(fig.canvas.buffer_rgba())
        buf = io.BytesIO()
        PIL.Image.fromarray(rgba).save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def update(self):
        """Recompute and redraw; on error keep the last figure and show the traceback."""
        start = time.perf_counter()
        try:
            values = self.values()
            result = self.compute(**values)
            png = self.render_png(result, values)
            extra = self.status_fn(result, values) if self.status_fn else []
        except Exception as exc:  # shown to the learner, never swallowed
            self.last_error = exc
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.error.value = (
                '<div style="color:#a00;border:1px solid #a00;padding:4px">'
                f"<b>This explorer hit an error:</b><pre>{html.escape(text)}</pre></div>"
            )
            self.error.layout.display = None
        else:
            self.result = result
            self.last_error = None
            self.image.value = png
            self.status.value = self._status_html(values, extra)
            self.error.value = ""
            self.error.layout.display = "none"
        self.n_updates += 1
        self.last_update_ms = (time.perf_counter() - start) * 1e3

    def _status_html(self, values, extra) -> str:
        parts = [
            f'{html.escape(name)} = <span class="tx-value" data-control="{html.escape(name)}">'
            f"{html.escape(display_value(control))}</span>"
            for name, control in self.controls.items()
        ]
        parts += [f"{html.escape(label)}: <b>{html.escape(text)}</b>" for label, text in extra]
        return '<span style="font-family:monospace">' + " · ".join(parts) + "</span>"


# ── notebook 01 · scaled dot-product attention ──────────────────────────────────────────────

POWERS_OF_TWO = [2**k for k in range(0, 11)]  # d_k from 1 to 1024


def scaling_explorer(T: int = 8, seed: int = 0) -> Explorer:
    """d_k slider and a scaling toggle over random unit-variance queries and keys (T of each).

    The same random draw is used for both positions of the toggle, so the only change you see
    is the division by sqrt(d_k).
    """
    controls = {
        "d_k": W.SelectionSlider(options=POWERS_OF_TWO, value=64, description="d_k"),
        "scaled": W.ToggleButton(value=True, description="divide by √d_k"),
    }

    def compute(d_k, scaled):
        rng = np.random.default_rng([seed, d_k])
        Q = rng.standard_normal((T, d_k))  # random, unit variance per component
        K = rng.standard_normal((T, d_k))
        if scaled:
            _, weights = scaled_dot_product_attention(Q, K, K)
        else:
            weights = softmax(Q @ K.swapaxes(-1, -2), axis=-1)
        return {
            "weights": weights,
            "max_weight": float(weights.max(axis=-1).mean()),
            "entropy": float(entropy(weights).mean()),
        }

    def title(values):
        return (f"random Q, K · d_k = {values['d_k']} · "
                + ("scaled" if values["scaled"] else "NOT scaled"))

    def draw(fig, result, values):
        ax = fig.subplots()
        image = heatmap(result["weights"], [f"q{i}" for i in range(T)],
                        [f"k{j}" for j in range(T)], ax=ax, vmin=0, vmax=1, title=title(values),
                        annotate=False)  # 64 numbers would triple the update time
        changing = [image, ax.title]
        for artist in changing:
            artist.set_animated(True)

        def refresh(result, values):  # same layout, new numbers
            image.set_data(result["weights"])
            ax.set_title(title(values))
            return changing

        return refresh

    def status(result, values):
        return [
            ("mean max weight", f"{result['max_weight']:.3f}"),
            ("mean entropy", f"{result['entropy']:.3f} nats (uniform = {np.log(T):.3f})"),
        ]

    return Explorer(controls, compute, draw, status, figsize=(5.6, 4.4),
                    title="Scaling explorer",
                    note="Random Q and K (unit variance), not learned. Move d_k; toggle scaling.")


def query_explorer(examples: dict[str, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]],
                   query: int = -1) -> Explorer:
    """Pick an example sentence and a query token; see that query's weights over the keys.

    examples: name -> (tokens, Q, K, V) with Q, K of shape (T, d_k) and V of shape (T, d_v).
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
    }

    def follow_sentence(change, controls):  # keep the query position when the sentence changes
        if change["owner"] is not controls["sentence"]:
            return
        options = token_options(change["new"])
        keep = min(controls["query"].value, len(options) - 1)
        controls["query"].options = options  # this resets the value to the first option
        controls["query"].value = keep

    def compute(sentence, query):
        tokens, Q, K, V = examples[sentence]
        output, weights = scaled_dot_product_attention(Q, K, V)
        return {"tokens": tokens, "weights": weights, "row": weights[query],
                "output": output[query], "query": query}

    def draw(fig, result, values):
        ax_bar, ax_map = fig.subplots(1, 2, width_ratios=[1, 1.25])
        tokens, row, q = result["tokens"], result["row"], result["query"]
        bars = ax_bar.barh(np.arange(len(tokens)), row, color="tab:blue")
        ax_bar.set_yticks(np.arange(len(tokens)), tokens)
        ax_bar.invert_yaxis()
        ax_bar.set_xlim(0, 1)
        ax_bar.set_xlabel("weight")
        ax_bar.set_title(f"query '{tokens[q]}' attends to")
        labels = [ax_bar.text(min(w + 0.02, 0.8), j, f"{w:.2f}", va="center", fontsize=8)
                  for j, w in enumerate(row)]
        heatmap(result["weights"], tokens, tokens, ax=ax_map, vmin=0, vmax=1, annotate=False,
                colorbar=False, title="all queries")
        lines = [ax_map.axhline(q + d, color="red", lw=2) for d in (-0.5, 0.5)]
        changing = [*bars, *labels, ax_bar.title, *lines]
        for artist in changing:
            artist.set_animated(True)
        shown = result["tokens"]

        def refresh(result, values):
            if result["tokens"] is not shown:
                return None  # another sentence: new labels, full redraw
            tokens, row, q = result["tokens"], result["row"], result["query"]
            for bar, label, w in zip(bars, labels, row, strict=True):
                bar.set_width(w)
                label.set_text(f"{w:.2f}")
                label.set_x(min(w + 0.02, 0.8))
            ax_bar.set_title(f"query '{tokens[q]}' attends to")
            for line, d in zip(lines, (-0.5, 0.5), strict=True):
                line.set_ydata([q + d, q + d])
            return changing

        return refresh

    def status(result, values):
        tokens, row = result["tokens"], result["row"]
        top = int(np.argmax(row))
        return [("strongest key", f"'{tokens[top]}' ({row[top]:.3f})"),
                ("row sum", f"{row.sum():.3f}")]

    return Explorer(controls, compute, draw, status, link=follow_sentence, figsize=(7.6, 3.4),
                    layout_key=lambda values: values["sentence"],
                    title="Query explorer",
                    note="Hand-built example weights (not learned). Pick a sentence and a query.")


# ── notebook 02 · multi-head attention ──────────────────────────────────────────────────────

HEAD_COUNTS = [1, 2, 4, 8]


def head_explorer(sentences: dict[str, list[str]], d_model: int = 64, seed: int = 0) -> Explorer:
    """Per-head attention weights of a RANDOMLY initialised MultiHeadAttention layer.

    Each token gets a fixed random embedding; for each number of heads (1, 2, 4, 8 at the same
    d_model) one layer is drawn once from its own seed. Every change runs the layer's forward
    pass again. Nothing here is learned: differences between heads come from their different
    random projections.
    """
    if not sentences:
        raise ValueError("head_explorer needs at least one sentence")
    vocab = sorted({t for tokens in sentences.values() for t in tokens})
    table_rng = np.random.default_rng([seed, 0])
    embedding = dict(zip(vocab, table_rng.standard_normal((len(vocab), d_model)), strict=True))
    layers = {h: MultiHeadAttention(d_model, h, np.random.default_rng([seed, h]))
              for h in HEAD_COUNTS}

    def head_options(n_heads):
        return [("all heads", -1)] + [(f"head {i}", i) for i in range(n_heads)]

    names = list(sentences)
    controls = {
        "sentence": W.Dropdown(options=names, value=names[0], description="sentence"),
        "n_heads": W.SelectionSlider(options=HEAD_COUNTS, value=4, description="heads"),
        "head": W.Dropdown(options=head_options(4), value=-1, description="show"),
    }

    def follow_heads(change, controls):
        if change["owner"] is not controls["n_heads"]:
            return
        keep = controls["head"].value
        controls["head"].options = head_options(change["new"])
        controls["head"].value = keep if keep < change["new"] else -1

    def compute(sentence, n_heads, head):
        tokens = sentences[sentence]
        x = np.stack([embedding[t] for t in tokens])[None]  # (1, T, d_model), random
        layer = layers[n_heads]
        out = layer.forward(x, x, x)  # (1, T, d_model)
        weights = layer.weights[0]  # (h, T, T)
        return {"tokens": tokens, "weights": weights, "output": out[0], "head": head,
                "entropy": entropy(weights).mean(axis=-1)}  # (h,)

    def draw(fig, result, values):
        tokens, weights, head = result["tokens"], result["weights"], result["head"]
        h = len(weights)
        if head == -1:
            heatmap_grid(weights, tokens, tokens, fig=fig, ncols=min(h, 4), annotate=False,
                         vmin=0, vmax=1, titles=[f"head {i}" for i in range(h)], xlabel=None,
                         ylabel=None,
                         suptitle=f"{h} head(s) · random initial weights (not learned)")
            return lambda result, values: []  # same layout and data: nothing to redraw
        ax = fig.subplots()
        image = heatmap(weights[head], tokens, tokens, ax=ax, vmin=0, vmax=1, annotate=False,
                        title=f"head {head} of {h} · random initial weights (not learned)")
        changing = [image, ax.title]
        for artist in changing:
            artist.set_animated(True)

        def refresh(result, values):
            image.set_data(result["weights"][result["head"]])
            ax.set_title(f"head {result['head']} of {h} · random initial weights (not learned)")
            return changing

        return refresh

    def status(result, values):
        ent = " ".join(f"{e:.2f}" for e in result["entropy"])
        return [("mean entropy per head (nats)", ent),
                ("uniform", f"{np.log(len(result['tokens'])):.2f}")]

    return Explorer(controls, compute, draw, status, link=follow_heads, figsize=(8.0, 4.6),
                    layout_key=lambda v: (v["sentence"], v["n_heads"], v["head"] == -1),
                    title="Head explorer",
                    note="RANDOM initial weights: the layer is untrained. "
                         "Learned heads: notebook 07.")



# ── notebook 03 · positional encoding ───────────────────────────────────────────────────────


PE_D_MODELS = [4, 8, 16, 32, 64, 128, 256, 512]


class _FastTicks:
    """Tick marks and labels of one axis drawn as plain artists, so the fast path can move them.

    Redrawing a matplotlib Axis costs ~20 ms; these few texts cost well under 1 ms each. Used for
    the axes whose range follows the number of positions or d_model.
    """

    def __init__(self, ax, which: str, count: int = 9):
        self.ax, self.which = ax, which
        if which == "x":
            ax.set_xticks([])
            where = {"transform": ax.get_xaxis_transform(), "ha": "center", "va": "top"}
            self.marks, = ax.plot([], [], ls="none", marker=3, color="black", clip_on=False,
                                  transform=ax.get_xaxis_transform())  # 3 = TICKDOWN
        else:
            ax.set_yticks([])
            where = {"transform": ax.get_yaxis_transform(), "ha": "right", "va": "center"}
            self.marks, = ax.plot([], [], ls="none", marker=0, color="black", clip_on=False,
                                  transform=ax.get_yaxis_transform())  # 0 = TICKLEFT
        self.labels = [ax.text(0, 0, "", fontsize=9, **where) for _ in range(count)]
        self.artists = [self.marks, *self.labels]

    def set_range(self, n: int):
        """Ticks at round positions in 0 .. n-1 (the cells of a table with n rows or columns)."""
        ticks = [t for t in MaxNLocator(nbins=6, integer=True).tick_values(0, n - 1)
                 if 0 <= t <= n - 1][: len(self.labels)]
        edge = np.zeros(len(ticks))
        if self.which == "x":
            self.marks.set_data(ticks, edge)
        else:
            self.marks.set_data(edge, ticks)
        for k, label in enumerate(self.labels):
            label.set_visible(k < len(ticks))
            if k < len(ticks):
                label.set_text(f"{ticks[k]:.0f}")
                label.set_position((ticks[k], -0.04) if self.which == "x" else (-0.015, ticks[k]))


def pe_explorer(T: int = 50, d_model: int = 64, dim: int = 6, pos: int = 10,
                offset: int = 5) -> Explorer:
    """The sinusoidal table, one of its dimensions, and the shift matrix M_k at work.

    Controls: ``positions`` (T, the rows of the table), ``d_model`` (its columns), ``dim`` (one
    column), ``pos`` (one row) and ``offset`` (k). Every change recomputes
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

    def compute(positions, d_model, dim, pos, offset):
        if not (0 <= dim < d_model and 0 <= pos < positions and 0 <= pos + offset < positions):
            raise ValueError(f"dim={dim}, pos={pos}, pos + offset={pos + offset} must index a "
                             f"table of shape ({positions}, {d_model})")
        PE = positional_encoding(positions, d_model)  # (T, d_model)
        M = relative_position_matrix(offset, d_model)  # (d_model, d_model)
        moved = PE[pos] @ M  # (d_model,)
        target = PE[pos + offset]  # (d_model,)
        pair = dim // 2
        omega = float(pe_frequencies(d_model)[pair])
        return {"PE": PE, "M": M, "moved": moved, "target": target,
                "error": float(np.abs(moved - target).max()), "pos": pos, "offset": offset,
                "dim": dim, "pair": pair, "omega": omega, "wavelength": 2 * np.pi / omega,
                "angle": offset * omega}

    def draw(fig, result, values):
        fig.set_layout_engine("none")  # fixed margins: the axes never move, so blitting is exact
        grid = fig.add_gridspec(2, 2, width_ratios=[1.3, 1], left=0.07, right=0.98, bottom=0.09,
                                top=0.94, wspace=0.24, hspace=0.42)
        ax_map, ax_pair = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        ax_dim, ax_vec = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])

        image = ax_map.imshow(result["PE"], cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                              interpolation="nearest")
        fig.colorbar(image, ax=ax_map, fraction=0.05, pad=0.02, label="PE value")
        ax_map.set_xlabel("dimension", labelpad=16)
        ax_map.set_ylabel("position", labelpad=24)
        row_from = ax_map.axhline(0, color="black", lw=2, ls="--")
        row_to = ax_map.axhline(0, color="tab:green", lw=2.5)
        column = ax_map.axvline(0, color="tab:purple", lw=2.5)

        turn = np.linspace(0, 2 * np.pi, 200)
        ax_pair.plot(np.sin(turn), np.cos(turn), color="0.85", lw=1)
        trail, = ax_pair.plot([], [], "o", ms=2.5, color="0.55")
        arc, = ax_pair.plot([], [], color="tab:green", lw=3, solid_capstyle="butt")
        start, = ax_pair.plot([], [], "o", ms=9, color="black")
        end, = ax_pair.plot([], [], "o", ms=12, mfc="none", mec="tab:green", mew=2)
        landed, = ax_pair.plot([], [], "x", ms=9, mew=2, color="tab:red")
        ax_pair.set(xlim=(-1.25, 1.25), ylim=(-1.25, 1.25), aspect="equal",
                    xlabel="dim 2i: sin(pos·ω_i)", ylabel="dim 2i+1: cos(pos·ω_i)")

        curve, = ax_dim.plot([], [], color="tab:purple", lw=1.5)
        dim_from, = ax_dim.plot([], [], "o", ms=7, color="black")
        dim_to, = ax_dim.plot([], [], "o", ms=10, mfc="none", mec="tab:green", mew=2)
        ax_dim.set_ylim(-1.15, 1.15)
        ax_dim.set_xlabel("position", labelpad=16)
        ax_dim.set_ylabel("PE[:, dim]")

        vec_from, = ax_vec.plot([], [], ".", color="0.45", label="PE[pos]")
        vec_to, = ax_vec.plot([], [], "o", mfc="none", mec="tab:green", label="PE[pos + k]")
        vec_moved, = ax_vec.plot([], [], "x", color="tab:red", label="PE[pos] @ M_k")
        ax_vec.set_ylim(-1.15, 1.75)
        ax_vec.set_xlabel("dimension", labelpad=16)
        ax_vec.set_ylabel("value")
        ax_vec.legend(loc="upper center", ncols=3, fontsize=7, handlelength=1.5,
                      columnspacing=0.8)
        for ax in (ax_map, ax_pair, ax_dim, ax_vec):
            ax.title.set_fontsize(9.5)
        ticks = {"map_x": _FastTicks(ax_map, "x"), "map_y": _FastTicks(ax_map, "y"),
                 "dim_x": _FastTicks(ax_dim, "x"), "vec_x": _FastTicks(ax_vec, "x")}

        def refresh(result, values):  # every change: data, limits, tick labels and titles
            PE = result["PE"]
            T, d = PE.shape
            p, k, j, i = result["pos"], result["offset"], result["dim"], result["pair"]
            image.set_data(PE)
            image.set_extent((-0.5, d - 0.5, T - 0.5, -0.5))
            ax_map.set(xlim=(-0.5, d - 0.5), ylim=(T - 0.5, -0.5))
            ax_dim.set_xlim(-0.5, T - 0.5)
            ax_vec.set_xlim(-0.5, d - 0.5)
            for name, n in (("map_x", d), ("map_y", T), ("dim_x", T), ("vec_x", d)):
                ticks[name].set_range(n)
            ax_map.title.set_text(f"PE: {T} positions × {d} dimensions")
            row_from.set_ydata([p, p])
            row_to.set_ydata([p + k, p + k])
            column.set_xdata([j, j])

            trail.set_data(PE[:, 2 * i], PE[:, 2 * i + 1])
            net = (result["angle"] + np.pi) % (2 * np.pi) - np.pi  # the same turn, within ±π
            theta = p * result["omega"] + np.linspace(0, net, 60)
            arc.set_data(1.12 * np.sin(theta), 1.12 * np.cos(theta))  # just outside the circle
            start.set_data([PE[p, 2 * i]], [PE[p, 2 * i + 1]])
            end.set_data([PE[p + k, 2 * i]], [PE[p + k, 2 * i + 1]])
            landed.set_data([result["moved"][2 * i]], [result["moved"][2 * i + 1]])
            ax_pair.title.set_text(f"pair {i} (dims {2 * i}, {2 * i + 1}): "
                                   f"turned by k·ω_{i} = {result['angle']:.2f} rad")

            curve.set_data(np.arange(T), PE[:, j])
            dim_from.set_data([p], [PE[p, j]])
            dim_to.set_data([p + k], [PE[p + k, j]])
            ax_dim.title.set_text(f"dim {j} = {'sin' if j % 2 == 0 else 'cos'}(pos·ω_{i}): "
                                  f"wavelength {result['wavelength']:.1f} positions")

            dims, size = np.arange(d), (6 if d <= 64 else 3)
            for line, y, extra in ((vec_from, PE[p], 0), (vec_to, result["target"], 3),
                                   (vec_moved, result["moved"], 0)):
                line.set_data(dims, y)
                line.set_markersize(size + extra)
            ax_vec.title.set_text(f"PE[{p}] @ M_{k} lands on PE[{p + k}]")
            return changing

        changing = [image, row_from, row_to, column, trail, arc, start, end, landed, curve,
                    dim_from, dim_to, vec_from, vec_to, vec_moved, ax_map.title, ax_pair.title,
                    ax_dim.title, ax_vec.title]
        changing += [a for t in ticks.values() for a in t.artists]
        refresh(result, values)
        for artist in changing:
            artist.set_animated(True)
        return refresh

    def status(result, values):
        return [
            ("pair", f"i = {result['pair']}, ω_i = {result['omega']:.4g} rad per position, "
                     f"wavelength {result['wavelength']:.1f}"),
            ("turn k·ω_i", f"{result['angle']:.3f} rad"),
            ("max |PE[pos] @ M_k − PE[pos + k]|", f"{result['error']:.1e}"),
        ]

    return Explorer(controls, compute, draw, status, link=keep_in_table, figsize=(9.4, 6.4),
                    title="Positional-encoding explorer",
                    note="Exact sinusoids, nothing learned. Pick a dimension, a position and an "
                         "offset k: M_k moves PE[pos] onto PE[pos + k].")


# ── notebook 04 · masks ─────────────────────────────────────────────────────────────────────

MASK_WORDS = "Xiaoming returned the book to Xiaohong because she has an exam tomorrow".split()
MASK_RGB = np.array([[0.93, 0.93, 0.93], [0.84, 0.15, 0.16]])  # allowed grey, blocked red


def mask_explorer(words: list[str] | None = None, T: int = 8, n_pad: int = 3, d_model: int = 64,
                  n_heads: int = 4, seed: int = 0) -> Explorer:
    """The causal and padding masks, and the weights they give in a RANDOM attention layer.

    Positions 0 .. T - n_pad - 1 hold the first words; the last n_pad positions hold "<pad>".
    Each token (and "<pad>") has a fixed random embedding, to which the sinusoidal positional
    encoding is added. Every change builds the mask from causal_mask and padding_mask and runs a
    randomly initialised MultiHeadAttention forward pass again. The length T changes the axes (a
    full redraw, one cached figure per T); padding, the toggles and the head take the fast path.
    """
    words = list(MASK_WORDS if words is None else words)
    if len(words) < 2 or not 2 <= T <= len(words) or not 0 <= n_pad <= T:
        raise ValueError(f"need at least 2 words, 2 <= T <= len(words)={len(words)} and "
                         f"0 <= n_pad <= T; got T={T}, n_pad={n_pad}")
    vocab = sorted(set(words)) + ["<pad>"]
    table_rng = np.random.default_rng([seed, 0])
    embedding = dict(zip(vocab, table_rng.standard_normal((len(vocab), d_model)), strict=True))
    layer = MultiHeadAttention(d_model, n_heads, np.random.default_rng([seed, 1]))  # random
    PE = positional_encoding(len(words), d_model)  # (T_max, d_model)

    controls = {
        "T": W.IntSlider(value=T, min=2, max=len(words), description="length T",
                         continuous_update=False),
        "n_pad": W.IntSlider(value=n_pad, min=0, max=T, description="padding"),
        "causal": W.ToggleButton(value=True, description="causal mask"),
        "padding": W.ToggleButton(value=True, description="padding mask"),
        "head": W.Dropdown(options=[(f"head {i}", i) for i in range(n_heads)], value=0,
                           description="head"),
    }

    def follow_length(change, controls):  # at most T padding tokens
        if change["owner"] is controls["T"]:
            controls["n_pad"].max = change["new"]  # clips n_pad if it was beyond

    def compute(T, n_pad, causal, padding, head):
        if not (2 <= T <= len(words) and 0 <= n_pad <= T and 0 <= head < n_heads):
            raise ValueError(f"T={T}, n_pad={n_pad}, head={head} out of range")
        n_real = T - n_pad
        tokens = words[:n_real] + ["<pad>"] * n_pad
        x = (np.stack([embedding[t] for t in tokens]) + PE[:T])[None]  # (1, T, d_model)
        mask = np.zeros((1, 1, T, T), dtype=bool)  # (B, h, T_q, T_k) after broadcasting
        if causal:
            mask = mask | causal_mask(T)  # (T, T) broadcasts
        if padding:
            mask = mask | padding_mask([n_real], T)  # (1, 1, 1, T) broadcasts
        output = layer.forward(x, x, x, mask)  # (1, T, d_model)
        weights = layer.weights[0]  # (h, T, T)
        mask = mask[0, 0]  # (T, T)
        full = mask.all(axis=-1)  # (T,) queries that may see no key at all
        sums = weights[head].sum(axis=-1)  # (T,)
        return {"tokens": tokens, "mask": mask, "weights": weights[head], "all_weights": weights,
                "output": output[0], "fully_blocked": full, "head": head, "x": x[0],
                "layer": layer,
                "row_sum_error": float(np.abs(sums[~full] - 1).max(initial=0.0)),
                "blocked_weight": float(np.abs(weights[:, mask]).max(initial=0.0))}

    def mask_title(values):
        parts = [name for name in ("causal", "padding") if values[name]]
        shown = " | ".join(parts) if parts else "none"
        return f"mask: {shown}\nred = blocked, grey = allowed"

    def weights_title(result):
        k = int(result["fully_blocked"].sum())
        blocked = f"{k} fully blocked row{'s' * (k != 1)}: all 0" if k else "no fully blocked row"
        return f"head {result['head']} weights (random layer)\n× = blocked key; {blocked}"

    def draw(fig, result, values):
        fig.set_layout_engine("none")  # fixed margins: faster than a constrained layout
        T = len(result["tokens"])
        ax_mask = fig.add_axes((0.13, 0.25, 0.33, 0.57))
        ax_w = fig.add_axes((0.55, 0.25, 0.33, 0.57))
        cax = fig.add_axes((0.9, 0.25, 0.015, 0.57))
        im_mask = ax_mask.imshow(MASK_RGB[result["mask"].astype(int)], interpolation="nearest")
        im_w = ax_w.imshow(result["weights"], cmap="viridis", vmin=0, vmax=1,
                           interpolation="nearest")
        fig.colorbar(im_w, cax=cax, label="attention weight")
        edges = np.arange(T + 1) - 0.5
        grid = [ax_mask.hlines(edges, -0.5, T - 0.5, color="white", lw=0.8),
                ax_mask.vlines(edges, -0.5, T - 0.5, color="white", lw=0.8)]
        rows, cols = np.nonzero(result["mask"])
        crosses, = ax_w.plot(cols, rows, "x", color="white", ms=max(3.0, 40 / T), mew=1)
        size = label_fontsize(T) * 0.95
        labels = []  # (position, Text): keys under both panels, queries left of the mask only
        for ax in (ax_mask, ax_w):
            ax.set_xticks(np.arange(T), [""] * T)
            ax.set_yticks(np.arange(T), [""] * T)
            ax.tick_params(length=2)
            ax.set_xlabel("key", labelpad=50)
            labels += [(j, ax.text(j, -0.02, "", transform=ax.get_xaxis_transform(),
                                   rotation=90, ha="center", va="top", fontsize=size))
                       for j in range(T)]
        labels += [(i, ax_mask.text(-0.02, i, "", transform=ax_mask.get_yaxis_transform(),
                                    ha="right", va="center", fontsize=size)) for i in range(T)]
        ax_mask.set_ylabel("query", labelpad=60)
        for ax in (ax_mask, ax_w):
            ax.title.set_fontsize(9)
        fig.suptitle("Masks on a real MultiHeadAttention forward pass (RANDOM weights, untrained)",
                     fontsize=10.5)

        def refresh(result, values):
            if len(result["tokens"]) != T:
                return None  # another length: new axes, full redraw
            im_mask.set_data(MASK_RGB[result["mask"].astype(int)])  # (T, T, 3)
            im_w.set_data(result["weights"])
            rows, cols = np.nonzero(result["mask"])
            crosses.set_data(cols, rows)
            for position, label in labels:
                label.set_text(result["tokens"][position])
            ax_mask.set_title(mask_title(values))
            ax_w.set_title(weights_title(result))
            return changing

        changing = [im_mask, *grid, im_w, crosses, *(label for _, label in labels), ax_mask.title,
                    ax_w.title]
        refresh(result, values)
        for artist in changing:
            artist.set_animated(True)
        return refresh

    def status(result, values):
        mask, T = result["mask"], len(result["tokens"])
        return [
            ("blocked", f"{int(mask.sum())} of {T * T} query–key pairs"),
            ("fully blocked queries", f"{int(result['fully_blocked'].sum())} (zero weights)"),
            ("max |row sum − 1| (other rows)", f"{result['row_sum_error']:.1e}"),
            ("max weight on a blocked key (all heads)", f"{result['blocked_weight']:.1f}"),
        ]

    return Explorer(controls, compute, draw, status, link=follow_length, figsize=(8.6, 4.6),
                    layout_key=lambda values: values["T"], title="Mask explorer",
                    note="RANDOM embeddings and a RANDOM, untrained attention layer: the masks "
                         "are exact, the weights mean nothing yet.")


# ── notebook 05 · the Post-LN block ─────────────────────────────────────────────────────────

POST_LN_STAGES = [("input", "x"), ("self-attention", "a = MHA(x)"), ("add", "r = x + a"),
                  ("norm", "y = LN₁(r)"), ("FFN", "f = FFN(y)"), ("add", "s = y + f"),
                  ("norm", "out = LN₂(s)")]
PRE_LN_STAGES = [("input", "x"), ("norm", "h = LN₁(x)"), ("self-attention", "a = MHA(h)"),
                 ("add", "r = x + a"), ("norm", "g = LN₂(r)"), ("FFN", "f = FFN(g)"),
                 ("add", "out = r + f")]


def block_stages(block: EncoderBlock, x, mask=None) -> list[np.ndarray]:
    """The activation after every stage of `block`, in the order its forward pass runs them.

    Post-LN: input, attention, add, norm, FFN, add, norm (POST_LN_STAGES); Pre-LN: input, norm,
    attention, add, norm, FFN, add (PRE_LN_STAGES). The last one is ``block.forward(x, mask)``.
    """
    x = np.asarray(x)
    if block.norm_first:
        h = block.norm1.forward(x)
        a = block.self_attn.forward(h, h, h, mask)
        r = x + a
        g = block.norm2.forward(r)
        f = block.ffn.forward(g)
        return [x, h, a, r, g, f, r + f]
    a = block.self_attn.forward(x, x, x, mask)
    r = x + a
    y = block.norm1.forward(r)
    f = block.ffn.forward(y)
    s = y + f
    return [x, a, r, y, f, s, block.norm2.forward(s)]


def stage_options(norm_first: bool) -> list[tuple[str, int]]:
    """Slider options "0 · input", "1 · self-attention", ... for one ordering of the block."""
    stages = PRE_LN_STAGES if norm_first else POST_LN_STAGES
    return [(f"{i} · {name}", i) for i, (name, _) in enumerate(stages)]


def block_explorer(tokens: list[str], encoder: Encoder | None = None, x=None, *, seed: int = 0,
                   features: int = 32, vmax: float = 3.0) -> Explorer:
    """Step through the stages of one block of a stack, Post-LN or Pre-LN, with the SAME weights.

    tokens: the T labels of the positions. encoder: a Post-LN Encoder (default: 6 RANDOMLY
    initialised blocks, d_model 64, 4 heads, d_ff 256); a Pre-LN twin gets copies of its weights,
    so the toggle changes only the order of the operations. x: the input (T, d_model) (default:
    random embeddings, standard deviation 1, plus positional encoding). Every change runs the
    blocks up to the chosen one again and records the stages of that block. The heatmap shows
    the first `features` features (colours clipped at ±vmax); mean and std are per position over
    all d_model features.
    """
    if encoder is None:
        encoder = Encoder(6, 64, 4, 256, np.random.default_rng([seed, 5]))
    if encoder.norm is not None or encoder.layers[0].norm_first:
        raise ValueError("block_explorer expects a Post-LN Encoder (norm_first=False); "
                         "it builds the Pre-LN twin itself")
    first = encoder.layers[0]
    d_model, T, n_layers = first.d_model, len(tokens), len(encoder.layers)
    if x is None:
        emb = np.random.default_rng([seed, 6]).standard_normal((T, d_model))  # random tokens
        x = emb + positional_encoding(T, d_model)
    x = np.asarray(x)
    if x.shape != (T, d_model):
        raise ValueError(f"x must have shape (T={T}, d_model={d_model}), got {x.shape}")
    pre = Encoder(n_layers, d_model, first.self_attn.n_heads, first.ffn.d_ff,
                  np.random.default_rng(0), norm_first=True)
    for twin, layer in zip(pre.layers, encoder.layers, strict=True):
        twin.load_parameters(layer.parameters())  # the same weights, the other order
    stacks = {False: encoder, True: pre}
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
        a = stages[stage]  # (T, d_model)
        name, formula = (PRE_LN_STAGES if norm_first else POST_LN_STAGES)[stage]
        return {"activations": a, "stages": stages, "stage": stage, "name": name,
                "formula": formula, "layer": layer, "norm_first": norm_first,
                "mean": a.mean(axis=-1), "std": a.std(axis=-1),
                "norm": np.linalg.norm(a, axis=-1)}  # (T,) each

    limits = {"mean": 0.5, "std": 1.5}  # fixed axes, wide enough for every stage of both orders
    for stack in stacks.values():
        h = x
        for block in stack.layers:
            for a in block_stages(block, h):
                limits["mean"] = max(limits["mean"], float(np.abs(a.mean(axis=-1)).max()))
                limits["std"] = max(limits["std"], float(a.std(axis=-1).max()))
            h = block.forward(h)

    def title(result):
        order = "Pre-LN" if result["norm_first"] else "Post-LN"
        return (f"{order} · block {result['layer']} of {n_layers} · stage {result['stage']}: "
                f"{result['formula']} · RANDOM weights")

    def draw(fig, result, values):
        fig.set_layout_engine("none")  # fixed margins keep the static background reusable
        grid = fig.add_gridspec(1, 5, width_ratios=[3.2, 0.1, 0.45, 1, 1], left=0.13,
                                right=0.98, bottom=0.13, top=0.88, wspace=0.12)
        ax_map, cax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
        ax_mean = fig.add_subplot(grid[3], sharey=ax_map)
        ax_std = fig.add_subplot(grid[4], sharey=ax_map)
        image = ax_map.imshow(result["activations"][:, :features], cmap="RdBu_r", vmin=-vmax,
                              vmax=vmax, aspect="auto", interpolation="nearest")
        fig.colorbar(image, cax=cax, label=f"value (clipped at ±{vmax:g})")
        ax_map.set_yticks(np.arange(T), tokens, fontsize=label_fontsize(T))
        ax_map.set_xlabel(f"feature (first {features} of {d_model})")
        ax_map.tick_params(length=0)
        rows = np.arange(T)
        mean_bars = ax_mean.barh(rows, result["mean"], color="tab:purple")
        std_bars = ax_std.barh(rows, result["std"], color="tab:green")
        ax_mean.set_xlim(-1.1 * limits["mean"], 1.1 * limits["mean"])
        ax_std.set_xlim(0, 1.1 * limits["std"])
        ax_mean.axvline(0, color="0.3", lw=0.8)
        ax_std.axvline(1, color="0.3", lw=0.8, ls=":")
        ax_mean.set_xlabel("mean per position")
        ax_std.set_xlabel("std per position")
        for ax in (ax_mean, ax_std):
            ax.tick_params(labelleft=False, length=2)
        heading = fig.suptitle(title(result), fontsize=10)
        changing = [image, *mean_bars, *std_bars, heading]

        def refresh(result, values):  # the layout never changes: new numbers only
            image.set_data(result["activations"][:, :features])
            for bar, m in zip(mean_bars, result["mean"], strict=True):
                bar.set_width(m)
            for bar, s in zip(std_bars, result["std"], strict=True):
                bar.set_width(s)
            heading.set_text(title(result))
            return changing

        for artist in changing:
            artist.set_animated(True)
        return refresh

    def status(result, values):
        return [("stage", result["formula"]),
                ("mean |x| per position", f"{result['norm'].mean():.2f} "
                                          f"(√d_model = {np.sqrt(d_model):.2f})"),
                ("std per position", f"{result['std'].min():.3f} to {result['std'].max():.3f}")]

    return Explorer(controls, compute, draw, status, link=follow_order, figsize=(9.0, 4.4),
                    title="Block explorer",
                    note="RANDOM initial weights (not learned). Step through the stages of a "
                         "block; toggle Post-LN / Pre-LN (same weights, other order).")


# ── notebook 06 · the decoder and the whole Transformer ─────────────────────────────────────

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
        return {"weights": attn.weights[0, head].copy(), "rows": list(rows), "cols": list(cols)}

    def title(values):
        return f"{values['kind']} attention · layer {values['layer']} · head {values['head']}"

    def draw(fig, result, values):
        ax = fig.subplots()
        image = heatmap(result["weights"], result["rows"], result["cols"], ax=ax, vmin=0, vmax=1,
                        annotate=False, title=title(values),
                        xlabel="key (source)" if values["kind"] != "decoder self" else "key",
                        ylabel="query (target)" if values["kind"] != "encoder self" else "query")
        changing = [image, ax.title]
        for artist in changing:
            artist.set_animated(True)

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


# ── notebook 08 · what attention costs ──────────────────────────────────────────────────────

COST_LENGTHS = [32, 64, 128, 256, 512]  # small sizes: both versions run in milliseconds


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
    from helpers.transformer import online_attention

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
        names = ["plain", "online"]
        colors = ["#c44e52", "#4c72b0"]
        mem_bars = ax_mem.bar(names, [result["bytes"][k] / 1e6 for k in names], color=colors)
        time_bars = ax_time.bar(names, [result["ms"][k] for k in names], color=colors)
        ax_mem.set_yscale("log")
        ax_mem.set_ylim(1e-3, 10)
        ax_mem.set_ylabel("MB (computed)")
        ax_mem.set_title("largest score array")
        ax_time.set_yscale("log")
        ax_time.set_ylim(1e-2, 1e4)
        ax_time.set_ylabel(f"ms (measured, best of {repeats})")
        ax_time.set_title("time on this machine")
        labels = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=9)
                  for ax in (ax_mem, ax_time) for i in range(2)]
        suptitle = fig.suptitle("")
        changing = [*mem_bars, *time_bars, *labels, suptitle]
        for artist in changing:
            artist.set_animated(True)

        def refresh(result, values):
            heights = [result["bytes"][k] / 1e6 for k in names] + [result["ms"][k] for k in names]
            tops = [ax_mem.get_ylim()[1]] * 2 + [ax_time.get_ylim()[1]] * 2
            for bar, label, height, top in zip([*mem_bars, *time_bars], labels, heights, tops,
                                               strict=True):
                bar.set_height(height)
                label.set_y(min(height * 1.15, top / 3))  # stays inside the axes
                label.set_text(f"{height:.3g}")
            suptitle.set_text(f"random float32 Q, K, V · n = {values['n']}, d_k = "
                              f"{values['d_k']}, block = {values['block']}")
            return changing

        refresh(result, values)
        return refresh

    def status(result, values):
        b, ms = result["bytes"], result["ms"]
        return [
            ("scores held", f"{b['plain'] / 1e6:.3g} MB plain, {b['online'] / 1e6:.3g} MB online "
                            f"({b['plain'] / b['online']:.0f}x less)"),
            ("operations", f"{result['flops'] / 1e6:.0f} MFLOP each"),
            ("time", f"{ms['plain']:.2f} ms plain, {ms['online']:.2f} ms online"),
            ("max |difference|", f"{result['max_diff']:.1e}"),
        ]

    return Explorer(controls, compute, draw, status, figsize=(6.4, 3.4),
                    title="Cost explorer",
                    note="Random inputs, one head, float32. Memory and operations are computed; "
                         "times are measured now and change from run to run.")


# ── notebook 07 · training ──────────────────────────────────────────────────────────────────


class TrainingMonitor(W.VBox):
    """A progress bar and a live loss curve for ``train(..., callback=monitor.update)``.

    The curve is a PNG swapped into one Image widget every `every` steps and at every
    evaluation (no cleared output, no flicker). Build it, display it, then train.
    """

    def __init__(self, steps: int, *, every: int = 25, title: str = "training"):
        self.every = every
        self.bar = W.IntProgress(value=0, min=0, max=steps, description="step")
        self.label = W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.fig = Figure(figsize=(6.4, 2.6), dpi=80, layout="constrained")
        FigureCanvasAgg(self.fig)
        self.ax = self.fig.subplots()
        (self.line,) = self.ax.plot([], [], lw=1, color="tab:blue", label="training loss")
        self.acc_ax = self.ax.twinx()
        (self.acc_line,) = self.acc_ax.plot([], [], "o-", color="tab:green", ms=3,
                                            label="validation exact match")
        self.ax.set(xlabel="step", ylabel="loss", xlim=(0, steps), title=title)
        self.acc_ax.set(ylim=(0, 1.05), ylabel="exact match")
        self.ax.legend(handles=[self.line, self.acc_line], loc="center right", fontsize=8)
        self.n_redraws = 0
        self.redraw({"loss": [], "eval_step": [], "accuracy": []})  # empty axes before step 1
        super().__init__([W.HBox([self.bar, self.label]), self.image])
        self.add_class("tx-training-monitor")

    def update(self, history: dict, model=None) -> None:
        """The callback of train(): history so far (the model is not needed here)."""
        step = len(history["loss"])
        self.bar.value = min(step, self.bar.max)
        evaluated = bool(history["eval_step"]) and history["eval_step"][-1] == step
        acc = f" · exact match {history['accuracy'][-1]:.3f}" if history["accuracy"] else ""
        norm = f" · gradient norm {history['grad_norm'][-1]:.2f}" if history.get("grad_norm") \
            else ""
        self.label.value = f"step {step} · loss {history['loss'][-1]:.3f}{norm}{acc}"
        if step % self.every == 0 or evaluated or step == 1:
            self.redraw(history)

    def redraw(self, history: dict) -> None:
        loss = np.asarray(history["loss"], dtype=float)
        self.line.set_data(np.arange(1, len(loss) + 1), loss)
        self.acc_line.set_data(history["eval_step"], history["accuracy"])
        self.ax.set_ylim(0, max(float(loss.max()) * 1.05, 1e-3) if loss.size else 3.0)
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png")
        self.image.value = buf.getvalue()
        self.n_redraws += 1


def digits_to_tokens(text: str, max_len: int) -> np.ndarray:
    """'3 1 4 1 5' or '31415' -> token ids (digit d is token d + 3), 1 to max_len digits."""
    digits = [c for c in text if not c.isspace() and c != ","]
    if not digits or len(digits) > max_len or not all(c in "0123456789" for c in digits):
        raise ValueError(f"type 1 to {max_len} digits 0-9 (spaces allowed), got {text!r}")
    return np.array([int(c) + 3 for c in digits])


def attention_comparison(random_model, trained_model, examples: list[str], *,
                         note: str = "") -> Explorer:
    """Cross-attention of an untrained and a trained reversal model, side by side.

    Controls: an example sequence (dropdown) or any typed digits (text), the decoder layer and
    the head (or the mean over heads). Both models read the same source and the same correct
    decoder input (teacher forcing), so the two panels have the same rows and columns. The
    status line gives the anti-diagonal mass of both and the trained model's greedy output.
    """
    from helpers.training import BOS, EOS, anti_diagonal_mass, make_targets

    max_len = trained_model.pe.shape[0] - 1
    n_layers = len(trained_model.decoder.layers)
    n_heads = trained_model.decoder.layers[0].cross_attn.n_heads
    controls = {
        "example": W.Dropdown(options=examples, value=examples[0], description="example"),
        "digits": W.Text(value=examples[0], description="or type", continuous_update=False),
        "layer": W.IntSlider(value=n_layers - 1, min=0, max=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[("mean of heads", -1)]
                           + [(f"head {i}", i) for i in range(n_heads)], value=-1,
                           description="head"),
    }
    labels = {"random": "random initial weights", "trained": "trained weights"}

    def link(change, controls):
        if change["owner"] is controls["example"]:
            controls["digits"].value = change["new"]

    def compute(example, digits, layer, head):
        tokens = digits_to_tokens(digits, max_len)
        src = tokens[None, :]  # (1, L)
        tgt_in, _ = make_targets(src, np.array([len(tokens)]))  # (1, L + 1): BOS + reversed
        tgt_in = tgt_in[:, :len(tokens) + 1]
        out = {}
        for kind, model in (("random", random_model), ("trained", trained_model)):
            model.forward(src, tgt_in)
            w = model.decoder.layers[layer].cross_attn.weights[0]  # (h, L + 1, L)
            w = w.mean(axis=0) if head < 0 else w[head]
            out[kind] = w
            out[kind + "_mass"] = float(anti_diagonal_mass(w, len(tokens)))
        generated, _ = greedy_decode_tokens(trained_model, src, BOS, EOS, max_len + 1)
        out["output"] = generated
        out["cols"] = [str(t - 3) for t in tokens]
        out["rows"] = ["<bos>"] + [str(t - 3) for t in tokens[::-1]]
        return out

    def panel_title(kind, result):
        return f"{labels[kind]}\nanti-diagonal mass {result[kind + '_mass']:.2f}"

    def draw(fig, result, values):
        axes = fig.subplots(1, 2)
        L = len(result["cols"])
        images, marks = [], []
        for ax, kind in zip(axes, ("random", "trained")):
            images.append(heatmap(result[kind], result["rows"], result["cols"], ax=ax, vmin=0,
                                  vmax=1, annotate=False, colorbar=False,
                                  title=panel_title(kind, result), xlabel="key (source digit)",
                                  ylabel="query (decoder input)"))
            if kind == "trained":
                fig.colorbar(images[-1], ax=ax, fraction=0.046, pad=0.03, label="attention weight")
            i = np.arange(L)  # the anti-diagonal, drawn after (on top of) the heatmap
            marks.append(ax.scatter(L - 1 - i, i, s=60, marker="s", facecolors="none",
                                    edgecolors="white", linewidths=0.8))
        changing = images + marks + [ax.title for ax in axes]
        for artist in changing:
            artist.set_animated(True)

        def refresh(result, values):
            for ax, image, kind in zip(axes, images, ("random", "trained")):
                image.set_data(result[kind])
                ax.set_title(panel_title(kind, result), fontsize=ax.title.get_fontsize())
            return changing

        return refresh

    def status(result, values):
        L = len(result["cols"])
        return [("anti-diagonal mass", f"random {result['random_mass']:.2f}, trained "
                 f"{result['trained_mass']:.2f} (uniform: 1/L = {1 / L:.2f})"),
                ("trained model writes", result["output"])]

    return Explorer(controls, compute, draw, status, link=link,
                    layout_key=lambda v: v["digits"], figsize=(8.4, 3.9),
                    title="Learned vs random cross-attention (reversal task)", note=note)


def greedy_decode_tokens(model, src, bos_id, eos_id, max_steps):
    """Greedy decoding as digits text, e.g. '6 2 9 <eos>', and the raw token ids."""
    from helpers.transformer import greedy_decode

    tokens, _ = greedy_decode(model, src, bos_id, eos_id, max_steps)
    words = []
    for t in tokens[0, 1:]:
        words.append("<eos>" if t == eos_id else "<pad>" if t == model.pad_id else str(t - 3))
        if t == eos_id:
            break
    return " ".join(words), tokens
