"""Open one notebook in JupyterLab (headless Chromium), run it, check it, move its explorers.

:func:`check_notebook` is the whole check of one notebook; it returns a :class:`Report` whose
``problems`` are empty when the notebook passed. Every problem names the notebook, where it
happened (a cell, or an explorer and its control) and which check fired:

============== ===========================================================================
check          fires on
============== ===========================================================================
console-error  a browser console message of type ``error``
page-error     an uncaught exception in the page
dialog         a native dialog (alert, confirm, ...) or a JupyterLab ``.jp-Dialog``
cell-error     a cell that raised (an ``error`` output)
not-executed   a code cell without an execution count after "Run All"
stderr         a ``stderr`` stream output in a cell
widget-error   a widget view showing an error (error widget, "Error displaying widget",
               "Failed to load model class", ...)
widget-loading a widget view still showing "Loading widget..." once the kernel is idle
server-log     a line with ``[E `` or ``Traceback`` in the server's log (kernels log there too)
kernel-output  stderr or an error the kernel sent while it handled a widget change (JupyterLab
               shows such output in no cell: it would go unseen)
render         an explorer without its figure (every control is named), a control listed in the
               status line but not rendered (or the reverse), or a widget control outside any
               explorer (nothing would test it)
control        a control that cannot be moved, or whose shown value does not change
figure         the figure's ``src`` did not change and settle, or its pixels barely changed
value          the status line's value for a control differs from what the control shows
explorer-error the explorer's red error box appeared or changed after a move (its callback raised)
timeout        "Run All" did not start or did not finish (no explorer is moved then)
stalled        the kernel sat idle while cells stayed queued, with no kernel message at all and
               no cell finishing for STALL_SECONDS (seen twice in about 20 runs under load
               with ipykernel 7.3, none since the pin to 7.4, see README.md); never retried
harness        the harness itself timed out or failed (the message says at which step)
============== ===========================================================================

What is an explorer, a control, a figure comes from the DOM convention of helpers/widgets.py:
``.tx-explorer`` boxes, ``.tx-control.tx-control-<name>.tx-kind-<kind>`` controls, a
``.tx-figure`` image, a ``.tx-status`` line with ``.tx-value[data-control=<name>]`` spans and a
``.tx-error`` box. Every control of every explorer is moved once (which covers each kind it
has): a slider by one key press on its handle, a dropdown to its next option, a toggle by a
click. Text controls are not moved (what to type is specific to the explorer); a check given
``texts`` (tests/e2e/texts.py) types each of them into its explorer's text box once the other
controls were moved, and records what the explorer then showed in ``Report.typed`` for the
notebook's own test to judge.

Once a notebook passed, :meth:`NotebookCheck.self_check` breaks every explorer's callback in
the live kernel and moves every control again: each must then be reported, which proves the
checks are not blind to the notebook's own explorers.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:  # playwright is imported only where the browser is started (conftest.py)
    from playwright.sync_api import Browser, Locator, Page

    from .lab import LabServer

# Generous limits: the machine has 2 cores and other tests may run beside this suite.
OPEN_TIMEOUT = 180.0  # page load until the kernel is connected and idle (4 to 6 s idle machine)
RUN_START_TIMEOUT = 60.0  # Run All until the first cell is queued (under a second when idle)
STALL_SECONDS = 60.0  # kernel idle, cells queued, no kernel message: the queue will not move
RUN_TIMEOUT = 900.0  # "Run All" until every cell ran (a few seconds per notebook that does not train)
SETTLE_TIMEOUT = 90.0  # widget views leaving "Loading widget..."
DISCONNECT_TIMEOUT = 30.0  # closed page until the server ran its websocket close handler
VALUE_TIMEOUT = 30.0  # a moved control showing its new value
FIGURE_TIMEOUT = 90.0  # the figure's src changing and settling after a move
STABLE_SECONDS = 0.75  # a src unchanged this long, with the kernel idle, has settled
QUIET_SECONDS = 10.0  # the kernel idle this long and the src unchanged: no new figure will come
POLL = 0.1
MIN_CHANGED_PIXELS = 0.01  # a real redraw changes well over 1% of the figure's pixels
VIEWPORT = {"width": 1280, "height": 900}
MAX_SCREENSHOT_HEIGHT = 16000
CHECK_NAMES = (
    "console-error", "page-error", "dialog", "cell-error", "not-executed", "stderr",
    "widget-error", "widget-loading", "server-log", "kernel-output", "render", "control",
    "figure", "value", "explorer-error", "timeout", "stalled", "harness",
)
# What a broken callback causes: the self-check keeps these apart, anything else is a problem.
SELF_CHECK_EXPECTED = ("explorer-error", "figure", "value")


@dataclass(frozen=True)
class Problem:
    """One failed check: which notebook, where in it, which check, what was seen."""

    notebook: str
    where: str
    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.notebook}: {self.where}: [{self.check}] {self.detail}"


@dataclass
class Report:
    """What one notebook's check found; ``artefacts`` are kept on disk only if a test fails."""

    notebook: str
    problems: list[Problem] = field(default_factory=list)
    explorers: list[dict] = field(default_factory=list)
    moves: list[str] = field(default_factory=list)
    artefacts: dict[str, bytes | str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    self_check: list[Problem] = field(default_factory=list)  # what the self-check caught
    # one dict per text typed into an explorer's text box (NotebookCheck.type_and_record)
    typed: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def checks(self) -> set[str]:
        return {p.check for p in self.problems}

    def summary(self) -> str:
        lines = [f"{self.notebook}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


class Stalled(Exception):
    """The kernel is idle but cells stay queued: Run All will not go on by itself."""


class StallWatch:
    """Feed it every polled page state during Run All; :meth:`see` returns a message once the
    kernel has been idle with cells queued, no cell count changing and no kernel message at all
    (``state["iopub"]`` counts them) for ``seconds``.

    The status alone is not enough: with ipykernel 7, JupyterLab sends widget messages to a
    subshell, whose "idle" can show while the main shell still runs a long cell (notebook 07's
    training, which updates a widget as it goes, so its messages keep this watch quiet)."""

    def __init__(self, seconds: float = STALL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.key, self.since = None, clock()

    def see(self, state: dict) -> str | None:
        cells, status = state["cells"], (state.get("kernel") or {}).get("status")
        queued = [c["index"] + 1 for c in cells if c["prompt"] == "[*]:"]
        key = (tuple(c["count"] for c in cells), tuple(queued), status, state.get("iopub"))
        if not (queued and status == "idle") or key != self.key:
            self.key, self.since = key, self.clock()
            return None
        if self.clock() - self.since < self.seconds:
            return None
        ran = sum(c["count"] is not None for c in cells)
        return (f"the kernel sat idle for {self.seconds:.0f} s with cells {queued} still queued "
                f"({ran} cell(s) had run)")


class Abort(Exception):
    """Going on is pointless (say, a dialog blocks the page); the reason is already a Problem."""


# ── JavaScript run in the page ──────────────────────────────────────────────────────────────
# window.jupyterapp exists because the server runs with --LabApp.expose_app_in_browser=True.

JS_PANEL = """
  const panelFor = (path) => {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) {
      if (w.context && w.context.path === path && w.content && w.sessionContext) return w;
    }
    return null;
  };
  // How messages quote a cell: its first line that is not blank or an nbval marker.
  const headOf = (cell) => (cell.model.sharedModel.getSource().split('\\n')
    .find((line) => line.trim() && !line.startsWith('# NBVAL_')) || '').slice(0, 80);
"""


def with_panel(params: str, body: str) -> str:
    """A JS function of ``params`` whose body can call ``panelFor(path)``."""
    return f"({params}) => {{{JS_PANEL}{body}}}"


JS_STATE = with_panel("path", """
  const state = {app: !!window.jupyterapp, dialogs: [], panel: false};
  for (const d of document.querySelectorAll('.jp-Dialog')) {
    state.dialogs.push((d.innerText || '').trim().slice(0, 500));
  }
  for (const text of (window.__txDialogs || [])) {
    if (!state.dialogs.includes(text)) state.dialogs.push(text);
  }
  const panel = panelFor(path);
  if (!panel) return state;
  state.panel = true;
  state.iopub = window.__txIopubCount || 0;
  state.ready = panel.context.isReady;
  const session = panel.sessionContext.session;
  const kernel = session ? session.kernel : null;
  state.kernel = kernel ? {status: kernel.status, connection: kernel.connectionStatus} : null;
  state.cells = [];
  panel.content.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') return;
    const prompt = cell.node.querySelector('.jp-InputPrompt');
    state.cells.push({index, count: cell.model.executionCount,
                      prompt: prompt ? prompt.textContent.trim() : ''});
  });
  return state;
""")

JS_RUN_ALL = with_panel("path", """
  const app = window.jupyterapp;
  const panel = panelFor(path);
  app.shell.activateById(panel.id);
  // Name the notebook (CellBarExtension.WIDGET_ID_ARG): without it the command acts on the
  // tracker's current widget, which can still be unset just after the page loads (Run All
  // then does nothing). Fire and forget: awaiting the command inside evaluate can hang.
  void app.commands.execute('notebook:run-all-cells', {widgetId: panel.id});
  return true;
""")

JS_OUTPUTS = with_panel("path", """
  const panel = panelFor(path);
  return panel.content.widgets.map((cell, index) => {
    const info = {index, type: cell.model.type, head: headOf(cell),
                  count: null, outputs: []};
    if (cell.model.type !== 'code') return info;
    info.count = cell.model.executionCount;
    for (const out of cell.model.outputs.toJSON()) {
      const o = {type: out.output_type};
      if (out.output_type === 'stream') { o.name = out.name; o.text = String(out.text); }
      if (out.output_type === 'error') { o.ename = out.ename; o.evalue = out.evalue; }
      if (out.data) o.mimes = Object.keys(out.data);
      info.outputs.push(o);
    }
    return info;
  });
""")

JS_WIDGET_VIEWS = with_panel("path", """
  const panel = panelFor(path);
  const views = [];
  panel.content.widgets.forEach((cell, index) => {
    for (const out of cell.node.querySelectorAll('.jp-OutputArea-output')) {
      // A widget view's output node carries no data-mime-type: recognise it by its text.
      const text = (out.innerText || '').trim();
      const loading = text.startsWith('Loading widget');
      const errors = out.querySelectorAll('.jupyter-widgets-error-widget').length;
      const failed = /Error displaying widget|Failed to load (model|view) class|Failed to create view|Could not instantiate widget|Click to show javascript error/.test(text);
      if (!loading && !errors && !failed) continue;
      views.push({cell: index, head: headOf(cell), loading,
                  errors, failed, text: text.slice(0, 300)});
    }
  });
  return views;
""")

JS_EXPLORERS = with_panel("path", """
  const panel = panelFor(path);
  const cells = panel.content.widgets;
  const all = Array.from(panel.node.querySelectorAll('.tx-explorer'));
  return all.map((el) => {
    const cellIndex = cells.findIndex((c) => c.node.contains(el));
    const titleEl = el.querySelector(':scope > .widget-html b');
    const controls = [];
    for (const c of el.querySelectorAll('.tx-control')) {
      const name = [...c.classList].find((k) => k.startsWith('tx-control-'));
      const kind = [...c.classList].find((k) => k.startsWith('tx-kind-'));
      controls.push({name: name ? name.slice('tx-control-'.length) : '',
                     kind: kind ? kind.slice('tx-kind-'.length) : ''});
    }
    const status = [...el.querySelectorAll('.tx-status .tx-value')].map(
      (s) => s.getAttribute('data-control'));
    const fig = el.querySelector('.tx-figure');
    return {cell: cellIndex, title: titleEl ? titleEl.textContent.trim() : '', controls,
            status, figure: el.querySelectorAll('.tx-figure').length,
            figureIsImage: !!fig && fig.tagName === 'IMG' && !!fig.getAttribute('src'),
            figureError: !!el.querySelector('.tx-figure .jupyter-widgets-error-widget')};
  });
""")

# Called on an explorer element: the figure's src, the error box, the kernel's status, dialogs.
JS_EXPLORER_STATE = with_panel("el, path", """
  const panel = panelFor(path);
  const session = panel && panel.sessionContext.session;
  const kernel = session ? session.kernel : null;
  const fig = el.querySelector('.tx-figure');
  const err = el.querySelector('.tx-error');
  const errVisible = !!err && getComputedStyle(err).display !== 'none'
                     && err.getClientRects().length > 0 && err.innerText.trim() !== '';
  return {src: fig ? fig.getAttribute('src') : null,
          error: errVisible ? err.innerText.trim() : '',
          kernel: kernel ? kernel.status : 'none',
          widgetErrors: el.querySelectorAll('.jupyter-widgets-error-widget').length,
          dialogs: [...document.querySelectorAll('.jp-Dialog')].map(
            (d) => (d.innerText || '').trim().slice(0, 500))};
""")

# Installed before the page loads: every JupyterLab dialog ever shown, even one that came and went
# between two polls.
JS_DIALOG_RECORDER = """
window.__txDialogs = [];
new MutationObserver(() => {
  for (const d of document.querySelectorAll('.jp-Dialog')) {
    const text = (d.innerText || '').trim().slice(0, 500);
    if (text && !window.__txDialogs.includes(text)) window.__txDialogs.push(text);
  }
}).observe(document, {childList: true, subtree: true});
"""

# Called on a control element: the value it shows, as helpers.widgets.display_value writes it.
JS_SHOWN_VALUE = """
(el) => {
  const norm = (s) => (s === null || s === undefined ? '' : String(s))
    .replace(/\\u00a0/g, ' ').trim();
  const cls = el.classList;
  if (cls.contains('tx-kind-slider')) {
    const readout = el.querySelector('.widget-readout');
    if (readout && getComputedStyle(readout).display !== 'none') return norm(readout.textContent);
    const handle = el.querySelector('.noUi-handle');
    return handle ? norm(handle.getAttribute('aria-valuetext')) : null;
  }
  if (cls.contains('tx-kind-dropdown')) {
    const select = el.querySelector('select');
    if (!select) return null;
    const option = select.selectedOptions[0];
    return option ? norm(option.textContent) : '';
  }
  if (cls.contains('tx-kind-toggle')) {
    if (cls.contains('widget-toggle-button')) return cls.contains('mod-active') ? 'on' : 'off';
    const box = el.querySelector('input[type=checkbox]');
    if (box) return box.checked ? 'on' : 'off';
    if (el.querySelector('.widget-toggle-button')) {
      const active = el.querySelector('.widget-toggle-button.mod-active');
      return active ? norm(active.textContent) : '';
    }
    const radio = el.querySelector('input[type=radio]:checked');
    if (radio) return norm(radio.parentElement.textContent);
    return null;
  }
  const input = el.querySelector('input, textarea');
  return input ? norm(input.value) : null;
}
"""

# Run code in the notebook's kernel, silently (no output, no execution count); resolve to the
# reply's status.
JS_EXECUTE = with_panel("[path, code]", """
  const kernel = panelFor(path).sessionContext.session.kernel;
  const future = kernel.requestExecute({code, silent: true, store_history: false});
  return future.done.then((reply) => reply.content.status);
""")

# The self-check: every live explorer's callback raises from now on.
BREAK_CALLBACKS = """
import ipywidgets.widgets.widget as _e2e_widget
from helpers.widgets import Explorer as _E2eExplorer


_e2e_calls = [0]


def _e2e_broken_compute(**values):  # a new message each call: each control's failure shows
    _e2e_calls[0] += 1
    raise RuntimeError(f"e2e self-check: the explorer's callback fails (call {_e2e_calls[0]})")


for _e2e_w in list(_e2e_widget._instances.values()):
    if isinstance(_e2e_w, _E2eExplorer):
        _e2e_w.compute = _e2e_broken_compute
"""

# After the kernel is ready: record stderr and errors the kernel sends for anything but a cell
# (a widget change is a comm message; JupyterLab shows its output in no cell).
JS_RECORD_KERNEL_OUTPUT = with_panel("path", """
  const kernel = panelFor(path).sessionContext.session.kernel;
  window.__txKernelOutput = [];
  window.__txIopubCount = 0;  // any message at all: the kernel is alive and doing something
  // When it connects, JupyterLab's widget manager opens a 'jupyter.widget.control' comm to fetch
  // the kernel's widgets; before ipywidgets is imported the kernel logs that it has no such
  // target, then "No such comm: <id>" for the probe's follow-ups, and the manager carries on.
  // Whether those lines land before or after this recorder starts is timing, so they alone are
  // not problems: the target line, and "No such comm" for a probe or for a comm opened before
  // this recorder started (no cell has run by then: the only such comm is the probe). The same
  // words for a comm opened later, and anything else on stderr, are still problems.
  const probes = new Set(), opened = new Set();
  kernel.anyMessage.connect((_, {msg, direction}) => {
    if (msg.header.msg_type !== 'comm_open') return;
    opened.add(msg.content.comm_id);
    if (direction === 'send' && msg.content.target_name === 'jupyter.widget.control') {
      probes.add(msg.content.comm_id);
    }
  });
  const probeNoise = (text) => text.split('\\n').map((l) => l.trim()).filter((l) => l).every(
    (l) => l === 'No such comm target registered: jupyter.widget.control'
           || (l.startsWith('No such comm: ')
               && (probes.has(l.slice(14)) || !opened.has(l.slice(14)))));
  kernel.iopubMessage.connect((_, msg) => {
    window.__txIopubCount += 1;
    const type = msg.header.msg_type;
    const parent = (msg.parent_header || {}).msg_type || '';
    if (parent === 'execute_request') return;  // a cell's output: check_outputs sees it
    if (type === 'stream' && msg.content.name === 'stderr') {
      if (probeNoise(msg.content.text)) return;
      window.__txKernelOutput.push(`stderr (for a ${parent}): ${msg.content.text}`);
    } else if (type === 'error') {
      window.__txKernelOutput.push(
        `${msg.content.ename}: ${msg.content.evalue} (for a ${parent})`);
    }
  });
  return true;
""")

JS_TAKE_KERNEL_OUTPUT = """
() => { const out = window.__txKernelOutput || []; window.__txKernelOutput = []; return out; }
"""

# Widget controls (rendered by ipywidgets) that are not inside an explorer: nothing tests them.
JS_STRAY_CONTROLS = with_panel("path", """
  const panel = panelFor(path);
  const kinds = ['.widget-slider', '.widget-dropdown', '.widget-toggle-button',
                 '.widget-toggle-buttons', '.widget-checkbox', '.widget-radio', '.widget-text',
                 '.widget-textarea', '.widget-button'];
  const stray = [];
  panel.content.widgets.forEach((cell, index) => {
    for (const el of cell.node.querySelectorAll(kinds.join(','))) {
      if (!el.closest('.tx-explorer')) {
        stray.push({cell: index, head: headOf(cell),
                    what: [...el.classList].filter((c) => c.startsWith('widget-')).join(' ')});
      }
    }
  });
  return stray;
""")

JS_STATUS_VALUES = """
(el) => Object.fromEntries([...el.querySelectorAll('.tx-status .tx-value')].map(
  (s) => [s.getAttribute('data-control'),
          (s.textContent || '').replace(/\\u00a0/g, ' ').trim()]))
"""

# Called on an explorer element, in one round trip: the status line's values and what every
# control shows, [name, shown] in page order (JS_SHOWN_VALUE on each).
JS_STATUS_AND_SHOWN = f"""
(el) => {{
  const shownValue = {JS_SHOWN_VALUE.strip()};
  const status = ({JS_STATUS_VALUES.strip()})(el);
  const shown = [...el.querySelectorAll('.tx-control')].map((c) => {{
    const name = [...c.classList].find((k) => k.startsWith('tx-control-'));
    return [name ? name.slice('tx-control-'.length) : '', shownValue(c)];
  }});
  return {{status, shown}};
}}
"""

JS_NOTEBOOK_JSON = with_panel("path", """
  const p = panelFor(path);
  return p ? JSON.stringify(p.context.model.toJSON()) : '';
""")

JS_CONTENT_HEIGHT = """
() => Math.max(0, ...[...document.querySelectorAll(
  '.jp-NotebookPanel .jp-WindowedPanel-outer, .jp-NotebookPanel .jp-Notebook')]
  .map((n) => n.scrollHeight))
"""


JS_DECODED = "(img) => (img.decode ? img.decode().then(() => true, () => false) : true)"

JS_SCROLL_TOP = """
() => document.querySelectorAll('.jp-NotebookPanel .jp-WindowedPanel-outer')
  .forEach((n) => { n.scrollTop = 0; })
"""


def changed_fraction(png_a: bytes, png_b: bytes) -> float:
    """The fraction of pixels that differ at all between two screenshots (1.0 if sizes differ)."""
    a = np.asarray(Image.open(io.BytesIO(png_a)).convert("RGB"))
    b = np.asarray(Image.open(io.BytesIO(png_b)).convert("RGB"))
    if a.shape != b.shape:
        return 1.0
    return float((a != b).any(axis=-1).mean())


def log_problems(text: str) -> list[tuple[str, str]]:
    """``[E `` records and tracebacks in a server-log excerpt, as (first line, last line)."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        if "[E " in line or "Traceback" in line:
            block = [line]
            i += 1
            while i < len(lines) and not lines[i].startswith("[") and len(block) < 60:
                block.append(lines[i])
                i += 1
            last = next((b.strip() for b in reversed(block[1:]) if b.strip()), "")
            found.append((line.strip()[:300], last[:300]))
        else:
            i += 1
    return found


def reveal_error(error_widget: Locator) -> str:
    """An ipywidgets error widget's message: it shows "Click to show javascript error" until
    clicked, then the message and the JavaScript stack."""
    try:
        error_widget.click(timeout=5000)
        lines = error_widget.inner_text(timeout=5000).strip().splitlines()
    except Exception:  # noqa: BLE001 - the widget may be gone; say what we know
        return "an error widget"
    lines = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("[Open Browser")]
    return " / ".join(lines[:2])[:300] or "an error widget"


class NotebookCheck:
    """The check of one notebook in one browser page; see :func:`check_notebook`."""

    def __init__(self, page: Page, server: LabServer, path: str, label: str,
                 settle_timeout: float = SETTLE_TIMEOUT, run_timeout: float = RUN_TIMEOUT,
                 texts: tuple[tuple[str, str, str], ...] = ()):
        self.page = page
        self.texts = tuple(texts)  # (explorer title, text control, what to type), in order
        self.server = server
        self.path = path  # relative to the server's root
        self.label = label  # how messages name the notebook
        self.settle_timeout = settle_timeout
        self.run_timeout = run_timeout
        self.report = Report(label)
        self.console: list[str] = []
        self.phase = "open"
        self.phases: list[tuple[str, int]] = []  # (phase, server-log offset where it began)
        self.started: list[float] = []  # when each phase began (time.monotonic)
        self._dialogs_seen: set[str] = set()
        # explorer index -> (src, screenshot) of its figure once it last settled: the "before"
        # picture of the next move when the src is still the same (a src is a new blob URL for
        # every new image, so the same src is the same picture)
        self._shots: dict[int, tuple[str, bytes]] = {}
        # The log since the last scan (another check's end, the server's start) is scanned too.
        self._log_scanned = server.scanned
        self.phases.append(("before opening", server.scanned))
        self.started.append(time.monotonic())
        self.enter("open")
        self.in_flight: set = set()  # HTTP requests the page has not finished
        self.held: Callable = lambda request: False  # held back on purpose (check_notebook)
        page.on("request", lambda request: self.in_flight.add(request))
        page.on("requestfinished", lambda request: self.in_flight.discard(request))
        page.on("requestfailed", lambda request: self.in_flight.discard(request))
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)
        page.on("dialog", self._on_dialog)

    # -- bookkeeping ---------------------------------------------------------------------------
    def enter(self, phase: str) -> None:
        self.phase = phase
        self.phases.append((phase, self.server.log_size()))
        self.started.append(time.monotonic())
        if len(self.started) > 1:
            previous = self.phases[-2][0]
            self.report.timings[previous] = self.started[-1] - self.started[-2]

    def problem(self, check: str, detail: str, where: str | None = None) -> None:
        assert check in CHECK_NAMES, check
        self.report.problems.append(Problem(self.label, where or self.phase, check, detail))

    def _on_console(self, msg) -> None:
        loc = msg.location or {}
        where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
        self.console.append(f"[{self.phase}] {msg.type}: {msg.text}{where}")
        if msg.type == "error":  # the first line; the whole stack is in console.log
            first = (msg.text.strip().splitlines() or [""])[0]
            self.problem("console-error", f"{first[:300]}{where}")

    def _on_page_error(self, error) -> None:
        text = f"{getattr(error, 'name', '')}: {getattr(error, 'message', error)}"
        self.console.append(f"[{self.phase}] pageerror: {text}")
        self.problem("page-error", text[:500])

    def _on_dialog(self, dialog) -> None:
        self.problem("dialog", f"native {dialog.type} dialog: {dialog.message[:300]!r}")
        try:
            dialog.dismiss()
        except Exception:  # noqa: BLE001 - the page may be closing; the problem is recorded
            pass

    def _note_dialogs(self, dialogs: list[str]) -> None:
        new = [d for d in dialogs if d not in self._dialogs_seen]
        for text in new:
            self._dialogs_seen.add(text)
            self.problem("dialog", f"JupyterLab dialog: {' | '.join(text.splitlines())[:300]!r}")
        if dialogs:
            raise Abort

    def state(self) -> dict:
        state = self.page.evaluate(JS_STATE, self.path)
        self._note_dialogs(state["dialogs"])
        return state

    def wait_until(self, what: str, timeout: float, done: Callable[[dict], bool]) -> dict:
        """Poll the page state until ``done(state)``; a timeout is a harness problem."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if done(state):
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}; last state: "
                                   f"kernel {state.get('kernel')}")
            self.page.wait_for_timeout(POLL * 1000 * 2)

    # -- steps ---------------------------------------------------------------------------------
    def run(self) -> Report:
        start = time.monotonic()
        try:
            self.open()
            finished = self.run_all()
            self.check_outputs()
            self.check_widget_views()
            self.take_kernel_output()
            if finished:  # explorers are moved only in a notebook that ran to the end
                self.check_stray_controls()
                self.explore()
                self.enter("after exploring")
                self.check_widget_views(settle=False)
                self.check_outputs()  # a cell that changed while the explorers were moved
                self.take_kernel_output()
        except Abort:
            pass
        except Exception as exc:  # a Playwright error or timeout: report it, keep artefacts
            self.problem("harness", f"{type(exc).__name__}: {str(exc).splitlines()[0][:500]}")
        self.report.seconds = time.monotonic() - start
        return self.report

    def open(self) -> None:
        workspace = f"e2e-{uuid.uuid4().hex[:12]}"  # a fresh workspace: no restored layout
        self.page.goto(self.server.lab_url(self.path, workspace), wait_until="domcontentloaded")

        def kernel_ready(s):
            kernel = s.get("kernel")
            return bool(s.get("ready") and kernel and kernel["connection"] == "connected"
                        and kernel["status"] == "idle")

        self.wait_until("the notebook to open and its kernel to be idle", OPEN_TIMEOUT,
                        kernel_ready)
        self.page.evaluate(JS_RECORD_KERNEL_OUTPUT, self.path)

    def take_kernel_output(self, where: str | None = None) -> None:
        """A ``kernel-output`` problem for each stderr or error the kernel sent for no cell."""
        for text in self.page.evaluate(JS_TAKE_KERNEL_OUTPUT):
            self.problem("kernel-output", text.strip()[:300], where)

    def run_all(self) -> bool:
        """Run All, then wait until no cell is queued or running and the kernel is idle.

        Returns False (with a ``timeout`` problem) if that does not happen within
        ``run_timeout``: a widget front end that never loads, say, stalls the page's kernel
        messages, so the kernel never looks idle again."""
        self.enter("run all")
        if not self.state()["cells"]:
            return True
        def has_started(s):
            return any(c["count"] is not None or c["prompt"] == "[*]:" for c in s["cells"])

        self.page.evaluate(JS_RUN_ALL, self.path)  # fired once: a Run All that does nothing fails
        try:
            self.wait_until("Run All to start", RUN_START_TIMEOUT, has_started)
        except TimeoutError:
            self.problem("timeout", f"Run All did not start: no cell was queued within "
                         f"{RUN_START_TIMEOUT:.0f} s")
            return False
        settled_since: list[float] = []
        watch = StallWatch()

        def finished(s):
            cells, kernel = s["cells"], s.get("kernel") or {}
            started = has_started(s)
            busy = any(c["prompt"] == "[*]:" for c in cells) or kernel.get("status") != "idle"
            stalled = watch.see(s)
            if stalled:
                raise Stalled(stalled)
            if not started or busy:
                settled_since.clear()
                return False
            settled_since.append(time.monotonic())
            return settled_since[-1] - settled_since[0] >= 1.0  # idle and stable for a second

        try:
            self.wait_until("Run All to finish", self.run_timeout, finished)
        except Stalled as stalled:
            self.problem("stalled", str(stalled))
            return False
        except TimeoutError:
            state = self.state()
            running = [c["index"] + 1 for c in state["cells"] if c["prompt"] == "[*]:"]
            kernel = (state.get("kernel") or {}).get("status")
            self.problem("timeout", f"Run All did not finish within {self.run_timeout:.0f} s "
                         f"(kernel {kernel}; cells still queued or running: {running})")
            return False
        return True

    def check_outputs(self) -> None:
        """stderr, errors and cells that did not run (each problem reported once)."""
        seen = {(p.where, p.check, p.detail) for p in self.report.problems}
        before = len(self.report.problems)
        cells = self.page.evaluate(JS_OUTPUTS, self.path)
        failed_at = None
        for cell in cells:
            where = f"cell {cell['index'] + 1} ({cell['head']!r})"
            if cell["type"] != "code":
                continue
            for out in cell["outputs"]:
                if out["type"] == "stream" and out.get("name") == "stderr":
                    self.problem("stderr", f"wrote to stderr: {out['text'].strip()[:300]!r}", where)
                if out["type"] == "error":
                    failed_at = failed_at or where
                    self.problem("cell-error", f"raised {out['ename']}: {out['evalue'][:300]}",
                                 where)
            if cell["count"] is None and cell["head"].strip():
                detail = "did not run" + (f" (after the error in {failed_at})" if failed_at else "")
                self.problem("not-executed", detail, where)
        new = self.report.problems[before:]
        self.report.problems[before:] = [
            p for p in new if (p.where, p.check, p.detail) not in seen]

    def check_widget_views(self, settle: bool = True) -> None:
        """Every widget view rendered: none loading (after a wait), none showing an error."""
        deadline = time.monotonic() + (self.settle_timeout if settle else 0)
        while True:
            views = self.page.evaluate(JS_WIDGET_VIEWS, self.path)
            if not any(v["loading"] for v in views) or time.monotonic() > deadline:
                break
            self.page.wait_for_timeout(POLL * 1000 * 2)
        seen = {(p.where, p.check) for p in self.report.problems}
        for view in views:
            where = f"cell {view['cell'] + 1} ({view['head']!r})"
            if view["loading"] and (where, "widget-loading") not in seen:
                self.problem("widget-loading", f"still shows {view['text'][:80]!r} after "
                             f"{self.settle_timeout:.0f} s", where)
            if (view["errors"] or view["failed"]) and (where, "widget-error") not in seen:
                self.problem("widget-error", self._error_text(view), where)

    def check_stray_controls(self) -> None:
        """A widget control outside every ``.tx-explorer`` would never be moved: say where."""
        for stray in self.page.evaluate(JS_STRAY_CONTROLS, self.path):
            self.problem("render", f"a widget control ({stray['what']}) outside any explorer "
                         "(.tx-explorer): the suite cannot test it; build it with "
                         "helpers.widgets.Explorer", f"cell {stray['cell'] + 1} ({stray['head']!r})")

    def _error_text(self, view: dict) -> str:
        """The message of an error view (an error widget shows it only after a click)."""
        cell = self.page.locator(".jp-NotebookPanel .jp-Cell").nth(view["cell"])
        errors = cell.locator(".jupyter-widgets-error-widget")
        texts = [reveal_error(errors.nth(i)) for i in range(errors.count())]
        return " | ".join(texts) or view["text"][:300]

    # -- explorers -----------------------------------------------------------------------------
    def explore(self, type_texts: bool = True) -> None:
        explorers = self.page.evaluate(JS_EXPLORERS, self.path)
        self.report.explorers = explorers
        typed = set()  # indices into self.texts that found their explorer and text box
        for k, info in enumerate(explorers):
            name = f'explorer {k + 1} "{info["title"]}" (cell {info["cell"] + 1})'
            self.enter(name)
            controls = {c["name"]: c["kind"] for c in info["controls"]}
            for missing in [n for n in info["status"] if n not in controls]:
                self.problem("render", f'control "{missing}" is in the status line but was '
                             "not rendered", f'{name}, control "{missing}"')
            for extra in [n for n in controls if n not in info["status"]]:
                self.problem("render", f'control "{extra}" has no value in the status line',
                             f'{name}, control "{extra}"')
            broken = None
            if info["figure"] != 1:
                broken = f"it has {info['figure']} figures (.tx-figure), expected 1"
            elif info["figureError"] or not info["figureIsImage"]:
                error = self.page.locator(".jp-NotebookPanel .tx-explorer").nth(k).locator(
                    ".tx-figure .jupyter-widgets-error-widget")
                shown = reveal_error(error.first) if info["figureError"] else "no image"
                broken = f"its figure did not render: {shown}"
            if broken:  # no control can be checked: name each one
                for control in set(controls) | set(info["status"]):
                    self.problem("render", f"cannot be checked: {broken}",
                                 f'{name}, control "{control}"')
                if not controls and not info["status"]:
                    self.problem("render", broken)
                continue
            for control in info["controls"]:
                if control["kind"] == "text":
                    self.report.moves.append(f"{name}: {control['name']} (text) not moved")
                    continue
                where = f'{name}, control "{control["name"]}" ({control["kind"]})'
                self.enter(where)
                self.move_and_check(k, control["name"], control["kind"], where)
            for i, (title, control, text) in enumerate(self.texts if type_texts else ()):
                if title == info["title"] and controls.get(control) == "text":
                    typed.add(i)
                    where = f'{name}, control "{control}" (text)'
                    self.enter(where)
                    self.type_and_record(k, control, text, where)
        for i, (title, control, text) in enumerate(self.texts if type_texts else ()):
            if i not in typed:
                self.problem("control", f"nothing to type {text[:40]!r} into: no explorer "
                             f'"{title}" with a text control "{control}"', "explore")

    def move_and_check(self, k: int, name: str, kind: str, where: str) -> None:
        explorer = self.page.locator(".jp-NotebookPanel .tx-explorer").nth(k)
        control = explorer.locator(f'[class~="tx-control-{name}"]').first
        figure = explorer.locator(".tx-figure").first
        before = explorer.evaluate(JS_EXPLORER_STATE, self.path)
        self._note_dialogs(before["dialogs"])
        shot_src, before_png = self._shots.get(k, (None, b""))
        if shot_src is None or shot_src != before["src"]:
            figure.evaluate(JS_DECODED)
            before_png = figure.screenshot()
        before_value = control.evaluate(JS_SHOWN_VALUE)
        action = self.move(control, kind)
        if action is None:
            return
        # 1. the control shows its new value
        deadline = time.monotonic() + VALUE_TIMEOUT
        shown = before_value
        while shown == before_value and time.monotonic() < deadline:
            self.page.wait_for_timeout(POLL * 1000)
            shown = control.evaluate(JS_SHOWN_VALUE)
        if shown == before_value:
            self.problem("control", f"still shows {before_value!r} {VALUE_TIMEOUT:.0f} s after "
                         f"{action}")
            return
        self.report.moves.append(f"{where}: {before_value!r} -> {shown!r} ({action})")
        # 2. the figure changes and settles
        after = self.wait_for_figure(explorer, before["src"], before["error"], figure)
        if after["error"] and after["error"] != before["error"]:  # this move's own error
            lines = [ln for ln in after["error"].splitlines() if ln.strip()]
            self.problem("explorer-error", f"after {action} the explorer shows an error: "
                         f"{lines[-1][:300] if lines else ''}")
        if after["widgetErrors"]:
            self.problem("widget-error", f"after {action} the explorer shows "
                         f"{after['widgetErrors']} error widget(s)")
        if after["src"] == before["src"]:
            self.problem("figure", f"the figure did not change after {action}")
        elif not after["settled"]:
            self.problem("figure", f"the figure kept changing for {FIGURE_TIMEOUT:.0f} s after "
                         f"{action}")
        else:
            if after["png"] is None:  # the figure changed again after the screenshot
                figure.evaluate(JS_DECODED)
                after["png"] = figure.screenshot()
            self._shots[k] = (after["src"], after["png"])
            fraction = changed_fraction(before_png, after["png"])
            if fraction < MIN_CHANGED_PIXELS:
                self.problem("figure", f"after {action} the figure's src changed but only "
                             f"{fraction:.2%} of its pixels did (expected >= "
                             f"{MIN_CHANGED_PIXELS:.0%})")
        # 3. the status line agrees with every control of this explorer
        values = explorer.evaluate(JS_STATUS_AND_SHOWN)
        status = values["status"]
        for other_name, other_shown in values["shown"]:
            if other_name in status and status[other_name] != other_shown:
                of = "" if other_name == name else f' (control "{other_name}")'
                self.problem("value", f"after {action} the status line shows "
                             f"{other_name} = {status[other_name]!r} but the control{of} "
                             f"shows {other_shown!r}")
        # 4. the kernel said nothing on stderr and raised nothing while it handled the change
        self.take_kernel_output()

    def type_and_record(self, k: int, name: str, text: str, where: str) -> None:
        """Type ``text`` into the text box ``name`` of explorer ``k`` and press Enter; wait until
        the kernel is idle and the figure, status line and error box stayed put for
        STABLE_SECONDS (or nothing changed for QUIET_SECONDS); record what the explorer then
        shows in ``report.typed``. Problems: a new error in the explorer's error box, a status
        line that disagrees with a control, output from the kernel."""
        explorer = self.page.locator(".jp-NotebookPanel .tx-explorer").nth(k)
        box = explorer.locator(f'[class~="tx-control-{name}"]').first.locator(
            "input, textarea").first
        figure = explorer.locator(".tx-figure").first
        status = explorer.locator(".tx-status").first

        def look() -> dict:
            state = explorer.evaluate(JS_EXPLORER_STATE, self.path)
            self._note_dialogs(state["dialogs"])
            return {**state, "status": status.inner_text()}

        before = look()
        figure.evaluate(JS_DECODED)
        before_png = figure.screenshot()
        box.fill(text)
        box.press("Enter")
        start = last_change = time.monotonic()
        key = (before["src"], before["status"], before["error"])
        while True:
            now = time.monotonic()
            after = look()
            if (after["src"], after["status"], after["error"]) != key:
                key, last_change = (after["src"], after["status"], after["error"]), now
            changed = key != (before["src"], before["status"], before["error"])
            idle = after["kernel"] == "idle"
            if idle and now - last_change >= (STABLE_SECONDS if changed else QUIET_SECONDS):
                break
            if now - start > FIGURE_TIMEOUT:
                self.problem("figure", f"the explorer kept changing for {FIGURE_TIMEOUT:.0f} s "
                             f"after typing {text[:40]!r}")
                break
            self.page.wait_for_timeout(POLL * 1000)
        figure.evaluate(JS_DECODED)
        after_png = figure.screenshot()
        values = explorer.evaluate(JS_STATUS_AND_SHOWN)
        shown = dict(values["shown"])
        self.report.typed.append({
            "where": where, "control": name, "text": text, "shown": shown.get(name),
            "status": after["status"], "error": after["error"],
            "figure_changed": after["src"] != before["src"],
            "pixels": changed_fraction(before_png, after_png)})
        if after["error"] and after["error"] != before["error"]:
            lines = [ln for ln in after["error"].splitlines() if ln.strip()]
            self.problem("explorer-error", f"after typing {text[:40]!r} the explorer shows an "
                         f"error: {lines[-1][:300] if lines else ''}")
        for other_name, other_shown in values["shown"]:
            if values["status"].get(other_name, other_shown) != other_shown:
                self.problem("value", f"after typing {text[:40]!r} the status line shows "
                             f"{other_name} = {values['status'][other_name]!r} but the control "
                             f"shows {other_shown!r}")
        self.take_kernel_output()

    def move(self, control: Locator, kind: str) -> str | None:
        """Change a control once, as a user would; return what was done (None: could not)."""
        if control.count() == 0:
            self.problem("render", "the control is not rendered")
            return None
        error = control.locator(".jupyter-widgets-error-widget")
        if error.count():
            self.problem("render", f"the control shows an error widget: {reveal_error(error.first)}")
            return None
        part = {"slider": ".noUi-handle", "dropdown": "select"}.get(kind)
        if part and control.locator(part).count() == 0:
            self.problem("render", f"the {kind} has no {part} element")
            return None
        if kind == "slider":
            handle = control.locator(".noUi-handle").first
            now = float(handle.get_attribute("aria-valuenow") or 0)
            top = float(handle.get_attribute("aria-valuemax") or 0)
            key = "ArrowLeft" if now >= top else "ArrowRight"
            handle.focus()
            handle.press(key)
            return f"pressing {key} on the slider"
        if kind == "dropdown":
            select = control.locator("select").first
            n, index = select.evaluate("(s) => [s.options.length, s.selectedIndex]")
            if n < 2:
                self.problem("control", f"the dropdown has {n} option(s): nothing to choose")
                return None
            new = (index + 1) % n
            label = select.evaluate("(s, i) => s.options[i].textContent", new)
            select.select_option(index=new)
            return f"selecting {label.replace(chr(0xa0), ' ')!r}"
        if kind == "toggle":
            classes = (control.get_attribute("class") or "").split()
            if "widget-toggle-button" in classes:
                control.click()
                return "clicking the toggle button"
            target = control.locator(
                "input[type=checkbox], .widget-toggle-button:not(.mod-active), "
                "input[type=radio]:not(:checked)").first
            target.click()
            return "clicking the toggle"
        self.problem("control", f"unknown control kind {kind!r}")
        return None

    def wait_for_figure(self, explorer: Locator, before_src: str | None,
                        before_error: str = "", figure: Locator | None = None) -> dict:
        """Poll until the src differs from ``before_src`` and stayed put for STABLE_SECONDS with
        the kernel idle; stop early once the kernel has been idle QUIET_SECONDS with no change
        (or a second after a new error shows). Returns the last explorer state plus
        ``settled`` and, given the ``figure``, ``png``: its screenshot, taken while the wait for
        stability went on (the src it showed is the final one, or ``png`` is None)."""
        start = time.monotonic()
        last_src, last_change, idle_since = before_src, start, None
        shot_src, png = None, None
        while True:
            now = time.monotonic()
            state = explorer.evaluate(JS_EXPLORER_STATE, self.path)
            self._note_dialogs(state["dialogs"])
            if state["src"] != last_src:
                last_src, last_change = state["src"], now
            idle = state["kernel"] == "idle"
            idle_since = (idle_since or now) if idle else None
            if idle and state["src"] != before_src and now - last_change >= STABLE_SECONDS:
                return {**state, "settled": True,
                        "png": png if shot_src == state["src"] else None}
            if figure is not None and idle and state["src"] not in (before_src, shot_src):
                # The screenshot the pixel check needs, taken now rather than after the wait:
                # it counts only if the src is still this one once the figure has settled.
                figure.evaluate(JS_DECODED)
                shot_src, png = state["src"], figure.screenshot()
                continue
            quiet = idle_since is not None and now - max(idle_since, last_change)
            if state["src"] == before_src and quiet and (
                    quiet >= QUIET_SECONDS
                    or (state["error"] and state["error"] != before_error and quiet >= 1.0)):
                return {**state, "settled": False}
            if now - start > FIGURE_TIMEOUT:
                return {**state, "settled": False}
            self.page.wait_for_timeout(POLL * 1000)

    def self_check(self) -> None:
        """Prove the checks are not blind: break every explorer's callback in the live kernel,
        move every control again, and keep what was caught in ``report.self_check`` (each
        control must show up there as an ``explorer-error``)."""
        clean, moves = self.report.problems, self.report.moves
        self.report.problems, self.report.moves = [], []
        try:
            self.enter("self-check")
            status = self.page.evaluate(JS_EXECUTE, [self.path, BREAK_CALLBACKS])
            if status != "ok":
                self.problem("harness", f"breaking the callbacks failed: {status}")
            else:
                self.explore(type_texts=False)
            self.enter("after the self-check")
            self.scan_log(self.server.log_size())
        except Abort:
            pass
        except Exception as exc:  # noqa: BLE001 - recorded like any harness failure
            self.problem("harness", f"{type(exc).__name__}: {str(exc).splitlines()[0][:500]}")
        finally:
            found = self.report.problems
            self.report.self_check = [p for p in found if p.check in SELF_CHECK_EXPECTED]
            # Anything else (a console error, a dialog, a log line...) is a real problem.
            unexpected = [p for p in found if p.check not in SELF_CHECK_EXPECTED]
            self.report.problems, self.report.moves = clean + unexpected, moves

    # -- after the run -------------------------------------------------------------------------
    def quiesce(self, timeout: float = 10.0) -> None:
        """Wait until the page has no HTTP request in flight (JupyterLab polls the server), so
        closing it does not make the server log a "Stream is closed" error."""
        deadline = time.monotonic() + timeout
        while (any(not self.held(r) for r in list(self.in_flight))
               and time.monotonic() < deadline):
            self.page.wait_for_timeout(50)

    def capture(self, full: bool = True) -> None:
        """Keep what a failing test needs: the notebook as a picture and as executed JSON.
        ``full``: also a screenshot as tall as the notebook (a second or two)."""
        arts = self.report.artefacts
        arts["console.log"] = "\n".join(self.console) + "\n"
        arts["problems.txt"] = self.report.summary() + "\n"
        try:
            arts["executed.ipynb"] = self.page.evaluate(JS_NOTEBOOK_JSON, self.path)
        except Exception as exc:  # noqa: BLE001 - the page may be gone
            arts["executed.ipynb"] = f"(could not read the notebook: {exc})"
        try:
            arts["viewport.png"] = self.page.screenshot()
            if not full:
                return
            height = int(self.page.evaluate(JS_CONTENT_HEIGHT) or 0) + 200
            height = max(VIEWPORT["height"], min(height, MAX_SCREENSHOT_HEIGHT))
            self.page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
            self.page.wait_for_timeout(500)
            self.page.evaluate(JS_SCROLL_TOP)
            self.page.wait_for_timeout(500)
            arts["notebook.png"] = self.page.screenshot()
        except Exception as exc:  # noqa: BLE001
            arts["screenshot-error.txt"] = f"{type(exc).__name__}: {exc}\n"

    def scan_log(self, end: int) -> None:
        """Problems for ``[E `` and ``Traceback`` lines up to log offset ``end`` (from where the
        last scan stopped), each attributed to the phase it fell in."""
        bounds = [offset for _, offset in self.phases[1:]] + [end]
        for (phase, start), stop in zip(self.phases, bounds, strict=True):
            start, stop = max(start, self._log_scanned), min(stop, end)
            if stop <= start:
                continue
            for first, last in log_problems(self.server.log_text(start, stop)):
                detail = first if not last or last == first else f"{first} ... {last}"
                self.problem("server-log", detail, phase)
        self._log_scanned = max(self._log_scanned, end)
        self.server.scanned = max(self.server.scanned, end)
        self.report.artefacts["server.log"] = self.server.log_text(self.phases[0][1], end)


def check_notebook(browser: Browser, server: LabServer, path: str, *, label: str | None = None,
                   prepare_page: Callable[[Page], Callable | None] | None = None,
                   settle_timeout: float = SETTLE_TIMEOUT,
                   run_timeout: float = RUN_TIMEOUT, expect_problems: bool = False,
                   self_check: bool = False,
                   texts: tuple[tuple[str, str, str], ...] = ()) -> Report:
    """Open ``path`` (relative to the server's root) in a fresh browser context, run all cells,
    check outputs and widget views, move every explorer control; then close the context, wait
    until the server has run its close handler for the page's kernel websocket, delete the
    notebook's session (shutting its kernel down) and scan the server log.

    ``prepare_page`` is called with the page before it loads (the tests use it to break the
    widget front end on purpose); it may return a predicate that tells the requests it holds
    back in the browser on purpose (they never reach the server, so closing the page with them
    in flight cannot make the server log anything, and waiting for them would be in vain). ``expect_problems`` (a notebook broken on purpose) skips the
    full-height screenshot that a real failure keeps. ``self_check``: when the notebook passed,
    break its explorers' callbacks and check again (see :meth:`NotebookCheck.self_check`). The returned report's problems are empty when the notebook passed.
    """
    server.delete_sessions()  # independence: no kernel of an earlier test survives
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.add_init_script(JS_DIALOG_RECORDER)
    held = prepare_page(page) if prepare_page is not None else None
    check = NotebookCheck(page, server, path, label or path, settle_timeout=settle_timeout,
                          run_timeout=run_timeout, texts=texts)
    if held is not None:
        check.held = held
    try:
        check.run()
        check.scan_log(server.log_size())
        if check.report.problems:
            check.capture(full=not expect_problems)
        elif self_check and check.report.explorers:
            check.self_check()
            # Kept only if the test fails; the full-height screenshot (a few seconds) only when
            # the notebook itself failed (else the page as shown, the notebook's JSON, the logs).
            check.capture(full=bool(check.report.problems))
    finally:
        check.enter("closing")
        check.quiesce()
        context.close()
        # Shut the kernel down only once the server let go of the page's websocket (see
        # LabServer.wait_disconnected): otherwise its shutdown messages can log a traceback.
        if not server.wait_disconnected(DISCONNECT_TIMEOUT):
            check.problem("harness", f"the server still counted a connection to the kernel "
                          f"{DISCONNECT_TIMEOUT:.0f} s after the page closed: {server.kernels()}")
        server.delete_sessions()
        check.scan_log(server.log_size())
        if check.report.problems:
            check.report.artefacts["problems.txt"] = check.report.summary() + "\n"
    return check.report
