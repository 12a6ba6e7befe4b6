"""Explorer of notebook 09 (the Transformer today): switch each piece of a decoder-only block
between 2017's and today's and see the attention and the numbers of that model change."""

from __future__ import annotations

from itertools import product

import ipywidgets as W
import numpy as np

from helpers.analysis import digits_to_tokens, token_word
from helpers.decoding import generate
from helpers.language import tr
from helpers.modern import DecoderOnly
from helpers.module import clear_caches
from helpers.plots import heatmap
from helpers.reversal import (
    BOS,
    EOS,
    FIRST_DIGIT,
    MAX_LEN,
    PIECES,
    grid_name,
    lm_exact_match,
    lm_sequences,
)
from helpers.transformer import causal_mask
from helpers.widgets.explorer import Explorer, animate, join_panels

__all__ = ["PIECE_OPTIONS", "MODERN_TRAINED", "MODERN_RANDOM", "pieces_explorer"]

MODERN_TRAINED = "trained (data/modern_models.npz, one model per combination)"
MODERN_RANDOM = "random (untrained, the same sizes)"
PIECE_OPTIONS = {  # control -> [(label, "2017" or "today")]
    "norm": [("2017: Post-LN LayerNorm", "2017"), ("today: pre-norm RMSNorm", "today")],
    "ffn": [("2017: ReLU", "2017"), ("today: SwiGLU", "today")],
    "position": [("2017: sinusoidal, added", "2017"), ("today: RoPE", "today")],
    "attention": [("2017: 4 key/value heads", "2017"), ("today: 2, grouped", "today")],
}
LENGTHS = np.arange(1, 17)  # digits per sequence in the right panel (trained on 1 to MAX_LEN)
BLOCKED_GREY = "0.8"


def pieces_explorer(models: dict, text: str = "3 1 4 1 5 9", *, record: dict | None = None,
                    seed: int = 0, sequences: int = 50) -> Explorer:
    """Attention and accuracy of a decoder-only reversal model whose four pieces you choose.

    models: {grid_name: DecoderOnly}, the sixteen trained models of
    helpers.data.load_modern_models() (one per combination of PIECES); every combination
    also gets an untrained twin (weights drawn with `seed`), labelled random. Controls: the
    weights, the four pieces, the layer and the head (or their mean), and the digits (1 to 16).
    The norm control switches the norm's placement and its type together (Post-LN LayerNorm or
    pre-norm RMSNorm), as the trained grid does; notebook 09 sets the two apart in four more runs.
    The left panel is the chosen model's attention as it reads the digits, <bos> and the
    reversed digits (teacher forcing; grey cells are blocked by the causal mask); the right
    panel its exact match for every length from 1 to 16 digits (trained on 1 to 10): for a
    trained model the one `record` (data/modern_runs.json) holds, measured on 1,000 sequences
    per length, else measured when the model is first shown on `sequences` random sequences.
    The status line gives the model, its answer and its parameter count.
    """
    models = dict(models)
    names = {grid_name(**dict(zip(PIECES, c)))
             for c in product(("2017", "today"), repeat=len(PIECES))}
    if set(models) != names:
        raise ValueError(f"pieces_explorer needs the 16 models named by grid_name, got "
                         f"{sorted(models)[:3]}...; use helpers.data.load_modern_models()")
    first = models["2017"]
    n_layers, n_heads = len(first.decoder.layers), first.config.n_heads
    random_twins: dict[str, DecoderOnly] = {}
    scores: dict[tuple, np.ndarray] = {}
    digits_to_tokens(text, LENGTHS[-1])  # a clear error now for digits it cannot show

    controls = {
        "weights": W.Dropdown(options=[(tr(label), label)
                                       for label in (MODERN_TRAINED, MODERN_RANDOM)],
                              value=MODERN_TRAINED, description="weights",
                              layout=W.Layout(width="30em")),
        **{piece: W.Dropdown(options=[(tr(label), value) for label, value in options],
                             value="2017", description=piece)
           for piece, options in PIECE_OPTIONS.items()},
        "layer": W.IntSlider(value=n_layers - 1, min=0, max=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(tr("mean of heads"), -1)]
                           + [(tr("head {i}", i=i), i) for i in range(n_heads)], value=-1,
                           description="head"),
        "digits": W.Text(value=text, description="digits", continuous_update=False),
    }

    def model_of(weights, choice):
        name = grid_name(**choice)
        if weights == MODERN_TRAINED:
            return name, models[name]
        if name not in random_twins:
            random_twins[name] = DecoderOnly.from_config(models[name].config,
                                                         np.random.default_rng(seed))
        return name, random_twins[name]

    def accuracy_by_length(weights, name, model):
        if weights == MODERN_TRAINED and record is not None:
            return np.array(record["grid"][name]["extrapolation"]["exact"])
        if (weights, name) not in scores:
            rng = np.random.default_rng(2026)  # the same sequences for every model
            scores[(weights, name)] = np.array([lm_exact_match(
                model, rng.integers(FIRST_DIGIT, FIRST_DIGIT + 10, (sequences, n)),
                np.full(sequences, n)).mean() for n in LENGTHS])
        return scores[(weights, name)]

    def compute(weights, norm, ffn, position, attention, layer, head, digits):
        choice = {"norm": norm, "ffn": ffn, "position": position, "attention": attention}
        name, model = model_of(weights, choice)
        src = digits_to_tokens(digits, LENGTHS[-1])[None, :]  # (1, n)
        n = src.shape[1]
        tokens, _ = lm_sequences(src, np.array([n]))  # digits, <bos>, the reversed digits, <eos>
        tokens = tokens[:, :2 * n + 1]  # what the model reads before it writes <eos>
        model.forward(tokens)
        maps = model.decoder.layers[layer].self_attn.weights[0]  # (h, T, T)
        clear_caches(model)  # no backward follows
        w = maps.mean(axis=0) if head < 0 else maps[head]
        prompt = np.concatenate([src, [[BOS]]], axis=1)
        written, _ = generate(model, prompt, n + 1, stop_id=EOS)
        answer = " ".join(token_word(t) for t in written[0, n + 1:])
        labels = [token_word(t) for t in tokens[0]]
        return {"weights": w, "labels": labels, "name": name, "trained": weights == MODERN_TRAINED,
                "answer": answer, "accuracy": accuracy_by_length(weights, name, model),
                "parameters": sum(p.size for p in model.parameters().values()),
                "right": answer.split() == [*labels[:n][::-1], "<eos>"]}

    def title(result, values):
        head = tr("mean of heads") if values["head"] < 0 else tr("head {i}", i=values["head"])
        kind = tr("TRAINED") if result["trained"] else tr("RANDOM (untrained)")
        return tr("{name} · {kind}\nself-attention, layer {layer} · {head}", name=result["name"],
                  kind=kind, layer=values["layer"], head=head)

    def draw(fig, result, values):
        ax_map, ax_acc = fig.subplots(1, 2, width_ratios=[1.15, 1])
        changing, refresh = join_panels(_attention_panel(ax_map, result),
                                        _accuracy_panel(ax_acc, result))
        heading = fig.suptitle(" \n ", fontsize=10)
        changing.append(heading)
        animate(changing)

        def refresh_all(result, values):
            refresh(result, values)
            heading.set_text(title(result, values))
            return changing

        refresh_all(result, values)
        return refresh_all

    def status(result, values):
        acc = result["accuracy"]
        answer = result["answer"]
        writes = (tr("{answer} (right)", answer=answer) if result["right"]
                  else tr("{answer} (wrong)", answer=answer))
        return [(tr("model"), tr("{name}, {n} parameters", name=result["name"],
                                 n=f"{result['parameters']:,}")),
                (tr("writes"), writes),
                (tr("exact match"), tr("1-{trained} digits {seen}, {longer}-{longest} digits "
                                       "{unseen}", trained=MAX_LEN,
                                       seen=f"{acc[:MAX_LEN].mean():.2f}", longer=MAX_LEN + 1,
                                       longest=LENGTHS[-1],
                                       unseen=f"{acc[MAX_LEN:].mean():.2f}"))]

    return Explorer(controls, compute, draw, status, layout_key=lambda v: v["digits"],
                    figsize=(10.0, 4.4), title="The pieces of today's block, one at a time",
                    note="Each combination of the four pieces is its own model, trained by "
                         "benchmarks/train_modern.py (TRAINED) or untrained (RANDOM). Switch "
                         "a piece and the same digits go through the other model.")


def _attention_panel(ax, result):
    """The attention map, the cells the causal mask blocks in grey."""
    T = len(result["labels"])
    image = heatmap(np.ma.masked_array(result["weights"], causal_mask(T)), result["labels"],
                    result["labels"], ax=ax, vmin=0, vmax=1, annotate=False, colorbar=False,
                    xlabel=tr("key (grey: blocked by the causal mask)"), ylabel=tr("query"))
    image.set_cmap(image.get_cmap().with_extremes(bad=BLOCKED_GREY))

    def update(result, values):
        image.set_data(np.ma.masked_array(result["weights"], causal_mask(T)))

    return [image], update


def _accuracy_panel(ax, result):
    """Exact match by number of digits; the lengths seen in training shaded."""
    ax.axvspan(0.5, MAX_LEN + 0.5, color="0.85",
               label=tr("trained on 1-{trained} digits", trained=MAX_LEN))
    bars = ax.bar(LENGTHS, result["accuracy"], color="tab:blue", width=0.6)
    ax.set(xlim=(0.5, LENGTHS[-1] + 0.5), ylim=(0, 1.05), xlabel=tr("digits"),
           ylabel=tr("exact match"), xticks=LENGTHS[::3],
           title=tr("exact match by number of digits"))
    ax.legend(loc="upper right", fontsize=8)

    def update(result, values):
        for bar, value in zip(bars, result["accuracy"], strict=True):
            bar.set_height(value)

    return list(bars), update
