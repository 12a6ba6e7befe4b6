"""Widgets of notebook 07 (training): a live training monitor, learned vs random attention."""

from __future__ import annotations

import io

import ipywidgets as W
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from helpers.analysis import digits_to_tokens, greedy_decode_tokens
from helpers.language import tr
from helpers.module import clear_caches
from helpers.plots import heatmap
from helpers.reversal import BOS, EOS, FIRST_DIGIT, anti_diagonal_mass, make_targets
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["TrainingMonitor", "attention_comparison"]

COMPARISON_LABELS = {"random": "RANDOM initial weights (untrained)",
                     "trained": "TRAINED weights (data/reverse_model.npz)"}


class TrainingMonitor(W.VBox):
    """A progress bar and a live loss curve for ``train(..., callback=monitor.update)``.

    The curve is a PNG swapped into one Image widget every `every` steps and at every
    evaluation (no cleared output, no flicker). `metric` names the history list of the
    evaluations to plot on the right axis, over `metric_range` (train's evaluate returns it; the
    reversal task's is "accuracy", its validation exact match; notebook 10's "val", the
    validation loss). Build it, display it, then train. When train() finds that the loss has not
    moved from its start (history["stalled"]), the status line says so. The title and the
    metric's label are shown in the chosen language (helpers.language.tr), as every text here.
    """

    def __init__(self, steps: int, *, every: int = 25, title: str = "training",
                 metric: str = "accuracy", metric_label: str = "validation exact match",
                 metric_range: tuple[float, float] = (0.0, 1.05)):
        self.every, self.metric, self.metric_label = every, metric, metric_label
        self.bar = W.IntProgress(value=0, min=0, max=steps, description=tr("step"))
        self.label = W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.fig = Figure(figsize=(6.4, 2.6), dpi=80, layout="constrained")
        FigureCanvasAgg(self.fig)
        self.ax = self.fig.subplots()
        (self.line,) = self.ax.plot([], [], lw=1, color="tab:blue", label=tr("training loss"))
        self.acc_ax = self.ax.twinx()
        (self.acc_line,) = self.acc_ax.plot([], [], "o-", color="tab:green", ms=3,
                                            label=tr(metric_label))
        self.ax.set(xlabel=tr("step"), ylabel=tr("loss"), xlim=(0, steps), title=tr(title))
        self.acc_ax.set(ylim=metric_range, ylabel=tr(metric_label))
        self.ax.legend(handles=[self.line, self.acc_line], loc="center right", fontsize=8)
        self.n_redraws = 0
        self.redraw({"loss": [], "eval_step": []})  # empty axes before step 1
        super().__init__([W.HBox([self.bar, self.label]), self.image])
        self.add_class("tx-training-monitor")

    def update(self, history: dict, model=None) -> None:
        """The callback of train(): history so far (the model is not needed here)."""
        step = len(history["loss"])
        self.bar.value = min(step, self.bar.max)
        evaluated = bool(history["eval_step"]) and history["eval_step"][-1] == step
        scores = history.get(self.metric)
        acc = f" · {tr(self.metric_label)} {scores[-1]:.3f}" if scores else ""
        norm = (tr(" · gradient norm {norm}", norm=f"{history['grad_norm'][-1]:.2f}")
                if history.get("grad_norm") else "")
        stalled = history.get("stalled")
        warning = (" · <b>" + tr("the loss has not moved from its start in {steps} steps: is the "
                                 "learning rate far too small, or so large that the outputs "
                                 "saturated?", steps=stalled) + "</b>" if stalled else "")
        self.label.value = tr("step {step} · loss {loss}", step=step,
                              loss=f"{history['loss'][-1]:.3f}") + norm + acc + warning
        if step % self.every == 0 or evaluated or step == 1:
            self.redraw(history)

    def redraw(self, history: dict) -> None:
        loss = np.asarray(history["loss"], dtype=float)
        self.line.set_data(np.arange(1, len(loss) + 1), loss)
        self.acc_line.set_data(history["eval_step"], history.get(self.metric, []))
        self.ax.set_ylim(0, max(float(loss.max()) * 1.05, 1e-3) if loss.size else 3.0)
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png")
        self.image.value = buf.getvalue()
        self.n_redraws += 1


def attention_comparison(random_model, trained_model, examples: list[str], *,
                         note: str = "") -> Explorer:
    """Cross-attention of an untrained and a trained reversal model, side by side.

    Controls: an example sequence (dropdown) or any typed digits (text), the decoder layer and
    the head (or the mean over heads). Both models read the same source and the same correct
    decoder input (teacher forcing), so the two panels have the same rows and columns. The
    status line gives the anti-diagonal mass of both and the trained model's greedy output.
    """
    max_len = trained_model.pe.shape[0] - 1
    n_layers = len(trained_model.decoder.layers)
    n_heads = trained_model.decoder.layers[0].cross_attn.n_heads
    controls = {
        "example": W.Dropdown(options=examples, value=examples[0], description="example"),
        "digits": W.Text(value=examples[0], description="or type", continuous_update=False),
        "layer": W.IntSlider(value=n_layers - 1, min=0, max=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(tr("mean of heads"), -1)]
                           + [(tr("head {i}", i=i), i) for i in range(n_heads)], value=-1,
                           description="head"),
    }

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
            clear_caches(model)  # no backward follows; the weights stay
            w = model.decoder.layers[layer].cross_attn.weights[0]  # (h, L + 1, L)
            w = w.mean(axis=0) if head < 0 else w[head]
            out[kind] = w
            out[kind + "_mass"] = float(anti_diagonal_mass(w, len(tokens)))
        generated, _ = greedy_decode_tokens(trained_model, src, BOS, EOS, max_len + 1)
        out["output"] = generated
        out["cols"] = [str(t - FIRST_DIGIT) for t in tokens]
        out["rows"] = ["<bos>"] + [str(t - FIRST_DIGIT) for t in tokens[::-1]]
        return out

    def draw(fig, result, values):
        axes = fig.subplots(1, 2)
        changing, refresh = join_panels(*(_comparison_panel(fig, ax, kind, result)
                                          for ax, kind in zip(axes, ("random", "trained"))))
        animate(changing)
        return refresh

    def status(result, values):
        L = len(result["cols"])
        return [(tr("anti-diagonal mass"),
                 tr("random {random}, trained {trained} (uniform: 1/L = {uniform})",
                    random=f"{result['random_mass']:.2f}", trained=f"{result['trained_mass']:.2f}",
                    uniform=f"{1 / L:.2f}")),
                (tr("trained model writes"), result["output"])]

    return Explorer(controls, compute, draw, status, link=link,
                    layout_key=lambda v: v["digits"], figsize=(8.4, 3.9),
                    title="Learned vs random cross-attention (reversal task)", note=note)


def _comparison_panel(fig, ax, kind, result):
    """The cross-attention of one model ("random" or "trained"), its anti-diagonal marked."""
    L = len(result["cols"])
    image = heatmap(result[kind], result["rows"], result["cols"], ax=ax, vmin=0, vmax=1,
                    annotate=False, colorbar=False, title=_comparison_title(kind, result),
                    xlabel=tr("key (source digit)"), ylabel=tr("query (decoder input)"))
    if kind == "trained":
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03, label=tr("attention weight"))
    i = np.arange(L)  # the anti-diagonal, drawn after (on top of) the heatmap
    mark = ax.scatter(L - 1 - i, i, s=60, marker="s", facecolors="none", edgecolors="white",
                      linewidths=0.8)

    def update(result, values):
        image.set_data(result[kind])
        ax.set_title(_comparison_title(kind, result), fontsize=ax.title.get_fontsize())

    return [image, mark, ax.title], update


def _comparison_title(kind, result):
    return tr("{weights}\nanti-diagonal mass {mass}", weights=tr(COMPARISON_LABELS[kind]),
              mass=f"{result[kind + '_mass']:.2f}")
