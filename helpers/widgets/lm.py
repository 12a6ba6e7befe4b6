"""Explorer of notebook 10 (a language model that learns to write): the next character's
distribution and a sample, with the temperature, top-k, prompt and seed you choose."""

from __future__ import annotations

import ipywidgets as W
import numpy as np

from helpers.data import load_lm, load_shakespeare
from helpers.language import tr
from helpers.lm import (
    WORD,
    Characters,
    known_word_share,
    next_token_probabilities,
    sampler,
    split,
    write,
)
from helpers.modern import DecoderOnly
from helpers.module import clear_caches
from helpers.widgets.explorer import Explorer, animate

__all__ = ["LM_TRAINED", "LM_RANDOM", "TOP_K_OPTIONS", "committed_writing_explorer",
           "writing_explorer"]

LM_TRAINED = "trained (data/lm_model.npz, notebook 10)"
LM_RANDOM = "random (untrained, the same sizes)"
# top-k 0 keeps every character (a dropdown cannot hold None: the browser shows it blank)
TOP_K_OPTIONS = [("all", 0), ("20", 20), ("5", 5), ("1 (greedy)", 1)]
SHOWN = 12  # bars of the next character's most likely candidates


def _show(c: str) -> str:
    return {"\n": "⏎", " ": "␣"}.get(c, c)


def writing_explorer(models: dict, chars, words: set, prompt: str = "ROMEO:\n", *,
                     samples: int = 4, length: int = 32) -> Explorer:
    """What a character model writes after `prompt`, sampled with the temperature and top-k you
    choose (notebook 10 §7).

    models: {label: DecoderOnly} (say {LM_TRAINED: the trained model, LM_RANDOM: an untrained
    twin}); chars: the Characters of the text; words: the training text's words, against which
    the share of known words is measured. Controls: the weights, the prompt (any characters of
    the vocabulary; type \\n for a newline), the temperature, top-k and the seed of the sampler.
    The left panel shows the probabilities of the next character after the prompt, as the
    sampler sees them (the SHOWN most likely); the right panel `samples` continuations of
    `length` characters each, drawn from them in one batch with the KV cache of
    helpers.decoding.generate (one step per character: `length`, more than the batch, sets
    the update's cost; benchmarks/widget_update.py measures it). The status line says how many
    samples differ (top-k 1 or a low temperature: they agree) and the share of known words.
    """
    models = dict(models)
    if not models:
        raise ValueError("writing_explorer needs at least one model")
    chars.encode(prompt)  # a clear error now for characters the vocabulary lacks
    controls = {
        "weights": W.Dropdown(options=[(tr(label), label) for label in models],
                              value=next(iter(models)),
                              description="weights", layout=W.Layout(width="26em")),
        "prompt": W.Text(value=prompt.replace("\n", "\\n"), description="prompt",
                         continuous_update=False),
        "temperature": W.FloatSlider(value=0.8, min=0.1, max=2.0, step=0.1, description="temp.",
                                     readout_format=".1f"),
        "top_k": W.Dropdown(options=[(tr(label), k) for label, k in TOP_K_OPTIONS], value=0,
                            description="top-k"),
        "seed": W.IntSlider(value=0, min=0, max=9, description="seed"),
    }

    def compute(weights, prompt, temperature, top_k, seed):
        model, top_k = models[weights], top_k or None  # 0: all
        ids = chars.encode(prompt.replace("\\n", "\n") or "\n")[None, -model.config.max_len:]
        logits = model.logits(model.decode(ids)[:, -1])  # (1, vocab): after the prompt
        clear_caches(model)
        p = next_token_probabilities(logits, temperature, top_k)[0]
        order = np.argsort(-p, kind="stable")[:SHOWN]
        pick = sampler(np.random.default_rng(seed), temperature, top_k)
        rows = np.repeat(ids, samples, axis=0)  # (samples, T0): one batch, one step per character
        written = write(model, rows, length, pick=pick)[:, ids.shape[1]:]  # (samples, length)
        texts = [chars.decode(row) for row in written]
        return {"p": p[order], "labels": [_show(chars.chars[i]) for i in order],
                "texts": texts, "weights": weights, "prompt": prompt,
                "distinct": len(set(texts)), "known": known_word_share(" ".join(texts), words)}

    def draw(fig, result, values):
        ax_p, ax_text = fig.subplots(1, 2, width_ratios=[1, 1.1])
        bars = ax_p.bar(np.arange(SHOWN), result["p"], color="tab:blue")
        ax_p.set(ylim=(0, 1.02), xlim=(-0.6, SHOWN - 0.4), xticks=[],
                 ylabel=tr("probability of the next character"))
        ax_p.set_xlabel(tr("the {n} most likely next characters", n=SHOWN),
                        labelpad=20)  # room for the labels
        # the texts that change stay outside the layout, which would otherwise follow their
        # extent and make the fast path differ from a full redraw
        labels = [ax_p.text(i, -0.03, "", ha="center", va="top", fontsize=10,
                            family="monospace", in_layout=False) for i in range(SHOWN)]
        ax_text.axis("off")
        lines = [ax_text.text(0.0, 0.92 - 0.12 * k, "", ha="left", va="top", family="monospace",
                              fontsize=10.5, transform=ax_text.transAxes, in_layout=False)
                 for k in range(samples)]
        heading = fig.suptitle(" \n ", fontsize=10)
        changing = animate([*bars, *labels, *lines, heading])

        def refresh(result, values):
            for bar, value in zip(bars, result["p"], strict=True):
                bar.set_height(value)
            for label, text in zip(labels, result["labels"], strict=True):
                label.set_text(text)
            for k, (line, text) in enumerate(zip(lines, result["texts"], strict=True)):
                line.set_text(f"{k + 1}  " + text.replace("\n", "⏎"))
            heading.set_text(tr("weights: {weights}\nafter the prompt \"{prompt}\": {samples} "
                                "samples of {length} characters", weights=tr(result["weights"]),
                                prompt=result["prompt"], samples=samples, length=length))
            return changing

        refresh(result, values)
        return refresh

    def status(result, values):
        return [(tr("different samples"), tr("{n} of {total}", n=result["distinct"],
                                             total=samples)),
                (tr("known words"), f"{result['known']:.0%}")]

    return Explorer(controls, compute, draw, status, figsize=(10.0, 4.0),
                    title="Temperature and top-k",
                    note="Each update draws the samples again, one character per step with the KV "
                         "cache; ⏎ is a newline, ␣ a space.")


def committed_writing_explorer(seed: int = 0) -> Explorer:
    """writing_explorer as notebook 10 builds it, in one call (for benchmarks and tests): the
    committed model next to an untrained twin (weights drawn with `seed`), the committed text's
    characters, and the words of its training split."""
    text = load_shakespeare()
    chars = Characters(text)
    train_ids, _ = split(chars.encode(text))
    model, _ = load_lm()
    twin = DecoderOnly.from_config(model.config, np.random.default_rng(seed))
    words = set(WORD.findall(chars.decode(train_ids)))
    return writing_explorer({LM_TRAINED: model, LM_RANDOM: twin}, chars, words)
