"""The Explorer pattern: controls that recompute real NumPy and redraw a figure, in one place.

Every explorer of the series is an :class:`Explorer`:

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
  dropdown when the sentence changes) before the single recompute that follows a change;
  ``explorer.set_values(name=value, ...)`` changes several controls with one recompute.

The figure is rendered to PNG and swapped into one ``Image`` widget, so a change never clears
the output area (no flicker). An exception inside a callback is caught and *shown* in a red box
under the figure (and kept in ``explorer.last_error``); it is never swallowed.

What the learner reads goes through ``helpers.language.tr`` (English unless the notebook chose
another language): the Explorer translates the controls' descriptions, tooltips and placeholders,
its title and note, and its own words; each builder translates its figure's texts, its option
labels and its status line. The control names and the option values stay as the code wrote them.

A figure of several panels builds each panel with its own small function that returns
``(artists, update)``: the artists the panel changes and ``update(result, values)`` that changes
them; :func:`join_panels` makes one fast path of them. :func:`assert_fast_path_matches_redraw`
is the test that a fast path draws exactly what a full redraw draws.

Builders return the explorer; they never display it. The notebook displays it in a cell tagged
``nbval-ignore-output``; tests/test_widgets.py tests it by setting a control's ``.value``.

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
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from helpers.language import tr

__all__ = [
    "Explorer",
    "FastTicks",
    "animate",
    "assert_fast_path_matches_redraw",
    "control_kind",
    "display_value",
    "join_panels",
    "png_pixels",
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
    """How a control's current value reads on screen (slider readout, option label, on/off).

    "on" and "off" stay English in every language: the browser tests (tests/e2e/driver.py,
    JS_SHOWN_VALUE) read a toggle's state as those two words and compare it with this."""
    if isinstance(control, (W.ToggleButton, W.Checkbox)):
        return "on" if control.value else "off"
    if isinstance(control, (W.Dropdown, W.Select, W.SelectionSlider, W.ToggleButtons,
                            W.RadioButtons)):
        return str(control.label)
    if isinstance(control, W.FloatSlider):
        return format(control.value, control.readout_format)
    return str(control.value)


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
        self._holding = False  # inside set_values: changes wait for its single update
        self._held = False
        self.figsize = figsize
        self.dpi = dpi
        self.result = None
        self.layout_key = layout_key or (lambda values: None)
        self._drawn: OrderedDict = OrderedDict()  # layout key -> (figure, refresh, background)
        self.last_error: BaseException | None = None
        self.n_updates = 0
        self.n_full_draws = 0  # updates that drew a new figure instead of taking the fast path
        self.last_update_ms = float("nan")

        for name, control in self.controls.items():
            control.add_class("tx-control")
            control.add_class(f"tx-control-{name}")
            control.add_class(f"tx-kind-{control_kind(control)}")
            _translate_texts(control)
            control.observe(self._on_change, names="value")
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.image.add_class("tx-figure")
        self.status = W.HTML()
        self.status.add_class("tx-status")
        self.error = W.HTML(layout=W.Layout(display="none"))
        self.error.add_class("tx-error")
        header = [W.HTML(f"<b>{html.escape(tr(title))}</b>")] if title else []
        if note:
            header.append(W.HTML(f"<i>{html.escape(tr(note))}</i>"))
        rows = [W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap"))]
        super().__init__(header + rows + [self.image, self.status, self.error])
        self.add_class("tx-explorer")
        self.update()

    # -- state -------------------------------------------------------------------------------
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    @property
    def cached_layouts(self) -> list:
        """The layout keys whose figures are kept for the fast path, the oldest first."""
        return list(self._drawn)

    def _on_change(self, change):
        if self._linking:  # a change made by `link` itself: one update follows below
            return
        if self.link is not None:
            self._linking = True
            try:
                self.link(change, self.controls)
            finally:
                self._linking = False
        if self._holding:
            self._held = True
        else:
            self.update()

    def set_values(self, **values):
        """Set several controls with one recompute and redraw at the end (none if nothing
        changed). ``link`` still runs after each change, in the order given; drawing the
        states in between is what this skips (say, when a test puts an explorer back)."""
        self._holding, self._held = True, False
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        if self._held:
            self.update()

    # -- drawing -----------------------------------------------------------------------------
    def render_png(self, result, values, *, fresh: bool = False) -> bytes:
        """Draw the figure for `result` and return PNG bytes (fast path when available).

        Figures are kept per layout key (say, one per sentence), so that coming back to a layout
        already drawn takes the fast path too. ``fresh=True`` draws from scratch in a new figure
        and leaves the kept figures as they are (:meth:`redraw_pixels`, encoded).
        """
        if fresh:
            return _png(self.redraw_pixels(result, values))
        key = self.layout_key(values)
        fig, refresh, background = self._drawn.get(key, (None, None, None))
        if key in self._drawn:
            self._drawn.move_to_end(key)
        artists = refresh(result, values) if refresh is not None else None
        if artists is None:  # first draw, no fast path, or the layout changed: full redraw
            fig, refresh, background = self._new_figure(result, values)
            self._drawn[key] = (fig, refresh, background)
            self.n_full_draws += 1
            while len(self._drawn) > self.MAX_CACHED_LAYOUTS:  # a few MB each: keep the newest
                self._drawn.popitem(last=False)
            artists = _animated_artists(fig)
        return _png(_blit(fig, background, artists))

    def redraw_pixels(self, result, values) -> np.ndarray:
        """The pixels (H, W, 4) of `result` drawn from scratch in a new figure, the kept figures
        left as they are: what the fast path is compared with."""
        fig, _, background = self._new_figure(result, values)
        return _blit(fig, background, _animated_artists(fig))

    def _new_figure(self, result, values):
        """A new figure drawn by `draw`: (figure, its fast path or None, the static background)."""
        fig = Figure(figsize=self.figsize, dpi=self.dpi, layout="constrained")
        _SharedRendererCanvas(fig)
        refresh = self.draw(fig, result, values)
        fig.canvas.draw()  # everything except the artists marked animated
        background = fig.canvas.copy_from_bbox(fig.bbox)
        return fig, refresh, background

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
                f"<b>{html.escape(tr('This explorer hit an error:'))}</b>"
                f"<pre>{html.escape(text)}</pre></div>"
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


def _translate_texts(control) -> None:
    """The texts a control shows in the chosen language: its description (the label beside it),
    its tooltip and a text box's placeholder (not the blank one ipywidgets gives a text box by
    default). Its name, options and value stay as they are."""
    for name in ("description", "tooltip", "placeholder"):
        text = getattr(control, name, None)
        if isinstance(text, str) and any(c.isalnum() for c in text):
            setattr(control, name, tr(text))


class _SharedRendererCanvas(FigureCanvasAgg):
    """An Agg canvas whose renderer (its pixel buffer) is shared by every explorer figure of
    the same size and dpi.

    matplotlib keeps the sizes of the texts it has measured per renderer, so a new figure on a
    new renderer measures every label again: about a quarter of the cost of drawing a figure.
    Sharing is safe because an explorer's pixels are always made in one go: ``_blit`` restores
    the figure's whole background (a copy of its own) before drawing on it, and the pixels are
    encoded (or compared) before anything else draws.
    """

    _renderers: dict = {}  # (width, height, dpi) -> RendererAgg; a few sizes per session

    def get_renderer(self):
        w, h = self.figure.bbox.size
        key = (w, h, self.figure.dpi)
        if key not in self._renderers:
            self._renderers[key] = RendererAgg(w, h, self.figure.dpi)
        self.renderer = self._renderers[key]  # what draw() and buffer_rgba() use
        return self.renderer


def _animated_artists(fig) -> list:
    return [a for a in fig.findobj() if a.get_animated()]


def _blit(fig, background, artists) -> np.ndarray:
    """The static background with `artists` drawn on top: the figure's pixels (H, W, 4), a view
    of its canvas (the next draw changes them)."""
    fig.canvas.restore_region(background)
    for artist in artists:
        fig.draw_artist(artist)
    return np.asarray(fig.canvas.buffer_rgba())


def _png(rgba: np.ndarray) -> bytes:
    buf = io.BytesIO()
    PIL.Image.fromarray(rgba).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


# ── building fast paths ─────────────────────────────────────────────────────────────────────


def animate(artists: list) -> list:
    """Mark `artists` animated (drawn by the fast path, left out of the static background)."""
    for artist in artists:
        artist.set_animated(True)
    return artists


def join_panels(*panels) -> tuple[list, Callable]:
    """One fast path from several panels, each ``(artists, update)``.

    Returns ``(changing, refresh)``: every panel's artists, in panel order, and
    ``refresh(result, values)``, which runs each panel's update and returns ``changing``.
    """
    changing = [artist for artists, _ in panels for artist in artists]

    def refresh(result, values):
        for _, update in panels:
            update(result, values)
        return changing

    return changing, refresh


class FastTicks:
    """Tick marks and labels of one axis drawn as plain artists, so the fast path can move them.

    Redrawing a matplotlib Axis costs ~20 ms; these few texts cost well under 1 ms each. Used for
    the axes whose range follows the size of what is shown (positions, d_model).
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


# ── testing fast paths ──────────────────────────────────────────────────────────────────────


def png_pixels(png) -> np.ndarray:
    """PNG bytes (say, ``explorer.image.value``) as an array of pixels (H, W, channels)."""
    return np.asarray(PIL.Image.open(io.BytesIO(bytes(png))))


def assert_fast_path_matches_redraw(explorer: Explorer, control: str, value) -> np.ndarray:
    """Set ``explorer.controls[control].value = value``, then check the fast path against a redraw.

    Raises AssertionError when the change fails, changes nothing, is drawn from scratch (no fast
    path to check: a new layout, or ``refresh`` returned None) or when its image differs in any
    pixel from a full redraw of the same result in a new figure. The kept figures are left as
    they are, so successive calls follow one figure through many fast-path updates. Returns the
    image's pixels.
    """
    updates, full_draws = explorer.n_updates, explorer.n_full_draws
    explorer.controls[control].value = value
    where = f"{control} = {value!r}"
    if explorer.n_updates == updates:
        raise AssertionError(f"{where}: no update (the control already had that value?)")
    if explorer.last_error is not None:
        raise AssertionError(f"{where}: the update failed: {explorer.last_error!r}")
    if explorer.n_full_draws != full_draws:
        raise AssertionError(f"{where}: drawn from scratch (a new layout, or refresh returned "
                             "None), so there is no fast path to compare")
    fast = png_pixels(explorer.image.value)
    full = explorer.redraw_pixels(explorer.result, explorer.values())  # as PNG would decode
    if fast.shape != full.shape:
        raise AssertionError(f"{where}: fast path image {fast.shape}, full redraw {full.shape}")
    differ = np.any(fast != full, axis=-1)  # (H, W)
    if differ.any():
        rows, cols = np.nonzero(differ)
        raise AssertionError(f"{where}: the fast path differs from a full redraw in "
                             f"{int(differ.sum())} of {differ.size} pixels (rows {rows.min()}.."
                             f"{rows.max()}, columns {cols.min()}..{cols.max()})")
    return fast
