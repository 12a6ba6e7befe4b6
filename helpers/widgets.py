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
from collections.abc import Callable

import ipywidgets as W
import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from helpers.plots import heatmap
from helpers.transformer import scaled_dot_product_attention, softmax

__all__ = [
    "Explorer",
    "control_kind",
    "display_value",
    "entropy",
    "scaling_explorer",
    "query_explorer",
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
        self._drawn: dict = {}  # layout key -> (figure, fast path, cached background)
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
        artists = refresh(result, values) if refresh is not None else None
        if artists is None:  # first draw, no fast path, or the layout changed: full redraw
            fig = Figure(figsize=self.figsize, dpi=self.dpi, layout="constrained")
            FigureCanvasAgg(fig)
            refresh = self.draw(fig, result, values)
            fig.canvas.draw()  # everything except the artists marked animated
            background = fig.canvas.copy_from_bbox(fig.bbox)
            self._drawn[key] = (fig, refresh, background)
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
