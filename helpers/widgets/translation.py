"""Explorer of notebook 11 (translating real sentences): a German sentence, the subword pieces
the model reads, its beam search's finished candidates and where the decoder looked."""

from __future__ import annotations

import textwrap
from collections import OrderedDict

import ipywidgets as W
import numpy as np

from helpers.language import CJK_FONT, language, tr
from helpers.plots import heatmap
from helpers.transformer import Dropout, Transformer
from helpers.translation import END, beam_search, cross_attention, words
from helpers.widgets.explorer import Explorer, animate

__all__ = ["PENALTY_ALPHAS", "MAX_BEAM", "committed_translation_explorer", "piece_label",
           "translation_explorer"]

MAX_BEAM = 8
CACHED_TRANSLATIONS = 64  # (sentence, beam, alpha) -> beam search and cross-attention, newest
ALPHA_STEP = 0.3  # one step of the alpha slider: enough to move the scores visibly
PENALTY_ALPHAS = (0.0, 0.3, 0.6, 0.9, 1.2, 1.5)  # its values; 0.6 is the paper's
LABEL_CHARS = 48  # of a German sentence in the dropdown
LINE_CHARS = 130  # of a line of text in the figure (the status line holds the whole text)


def piece_label(token: str) -> str:
    """A vocabulary token as the explorer shows it: a piece that ends a word loses its END
    marker ("Hut</w>" -> "Hut"), a piece inside a word gets a trailing "·" ("orange" ->
    "orange·", so "orange· farb· enen" is one word); special tokens stay ("</s>", "<unk>")."""
    if token.endswith(END):
        return token[: -len(END)]
    if token.startswith("<") and token.endswith(">"):
        return token
    return token + "·"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _lines(label: str, text: str, limit: int = LINE_CHARS, count: int = 2) -> list[str]:
    """`label: text` wrapped to at most `count` lines of `limit` characters (the last cut)."""
    return textwrap.wrap(f"{label}: {text}", limit, subsequent_indent="    ", max_lines=count,
                         placeholder=" …")


def _monospace():
    """The font family of the figure's header: monospace, then (in Chinese) the Chinese font
    that draws its labels, which the monospace font lacks."""
    return ["monospace", CJK_FONT] if language() == "zh" else "monospace"


def translation_explorer(model, vocab, sentences, *, beam: int = 4, alpha: float = 0.6,
                         note: str = "") -> Explorer:
    """Translate a German sentence with beam search and look at where the decoder looked.

    model: notebook 11's Transformer (dropout off) and vocab its Vocabulary, as
    helpers.data.load_translation() gives them; sentences: [(German, English reference), ...],
    say the first 20 pairs of the test set. Controls: a sentence of the list, a text box (a
    sentence typed there overrides the list; picking from the list clears it), the beam width
    (1 to 8), the length penalty alpha (0 to 1.5), the decoder layer and the head (or the mean
    of the heads). The figure shows the German words and the pieces they become (a piece inside
    a word ends in "·"), the best translation and the reference (for a sentence of the list),
    the beam's finished candidates (bars: log P in grey, the score log P / lp(Y) in colour,
    the best on top) and the best candidate's cross-attention: row t is where the decoder looked
    in the source when it wrote output piece t. The status line repeats the texts in full.
    Each (sentence, beam, alpha) is searched once and kept (CACHED_TRANSLATIONS of them), so
    changing the layer or the head costs no model call. A sentence longer than the model's
    positions gets a message in place of the figure.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be notebook 11's Transformer, got {type(model).__name__}")
    if any(isinstance(m, Dropout) and m.rng is not None for m in model.modules()):
        raise ValueError("the model is in training mode (dropout on): call "
                         "set_training(model, None) first")
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= MAX_BEAM:
        raise ValueError(f"beam must be an int from 1 to {MAX_BEAM}, got {beam!r}")
    if alpha not in PENALTY_ALPHAS:
        raise ValueError(f"alpha must be one of the slider's values {PENALTY_ALPHAS}, "
                         f"got {alpha!r}")
    pairs = [tuple(pair) for pair in sentences]
    if not pairs or any(len(p) != 2 or not all(isinstance(s, str) for s in p) for p in pairs):
        raise ValueError("sentences must be a non-empty list of (German, English) string pairs, "
                         f"got {len(pairs)} item(s)")
    n_layers = len(model.decoder.layers)
    n_heads = model.decoder.layers[0].cross_attn.n_heads
    positions = len(model.pe)
    controls = {
        "sentence": W.Dropdown(options=[(f"{i + 1}. {_short(de, LABEL_CHARS)}", i)
                                        for i, (de, _) in enumerate(pairs)],
                               value=0, description="sentence", layout=W.Layout(width="34em")),
        "text": W.Text(value="", description="or type",
                       placeholder="a German sentence (overrides the list)",
                       continuous_update=False, layout=W.Layout(width="34em")),
        "beam": W.IntSlider(value=beam, min=1, max=MAX_BEAM, description="beam"),
        "alpha": W.FloatSlider(value=alpha, min=PENALTY_ALPHAS[0], max=PENALTY_ALPHAS[-1],
                               step=ALPHA_STEP, description="alpha", readout_format=".1f"),
        "layer": W.Dropdown(options=[(tr("layer {i}", i=i), i) for i in range(n_layers)],
                            value=n_layers - 1, description="layer"),
        "head": W.Dropdown(options=[(tr("mean of heads"), -1)]
                           + [(tr("head {i}", i=i), i) for i in range(n_heads)], value=-1,
                           description="head"),
    }
    cache: OrderedDict = OrderedDict()

    def source(sentence, text):
        """(German sentence, its reference or None, a note or None) that the controls choose."""
        if text.strip():
            return " ".join(text.split()), None, None
        german, english = pairs[sentence]
        blank = (tr("the text box holds only spaces: translating the sentence picked from the "
                    "list") if text else None)
        return german, english, blank

    def search(german, beam, alpha):
        """Beam search on one sentence and the best candidate's cross-attention, kept."""
        key = (german, beam, round(alpha, 6))
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        ids = vocab.encode(german)
        word_pieces = [[piece_label(vocab.tokens[vocab.ids.get(p, vocab.unk_id)])
                        for p in vocab.segment(word)] for word in words(german)]
        found = {"ids": ids, "word_pieces": word_pieces,
                 "src_labels": [piece_label(vocab.tokens[i]) for i in ids]}
        if len(ids) > positions:
            found["message"] = tr("This sentence is {n} pieces long (with </s>), but the model "
                                  "has positions for {positions}: type a shorter one.",
                                  n=len(ids), positions=positions)
        else:
            src = np.array([ids])  # (1, S)
            steps = min(len(ids) + 50, positions)  # as translate: 50 more than the source
            candidates = beam_search(model, src, vocab.bos_id, vocab.eos_id, steps, beam=beam,
                                     alpha=alpha)[0]  # [(tokens, log P, score)], best first
            best = [int(t) for t in candidates[0][0]]
            tgt_in = np.array([[vocab.bos_id, *best[:-1]]])  # (1, T): what predicts `best`
            found |= {"candidates": [(vocab.decode(tokens), float(log_p), float(score),
                                      len(tokens)) for tokens, log_p, score in candidates],
                      "tokens": best, "tgt_labels": [piece_label(vocab.tokens[t]) for t in best],
                      "attention": cross_attention(model, src, tgt_in)[:, 0],  # (L, h, T, S)
                      "message": None}
        cache[key] = found
        while len(cache) > CACHED_TRANSLATIONS:
            cache.popitem(last=False)
        return found

    def link(change, controls):
        if change["owner"] is controls["sentence"]:  # a pick replaces a typed sentence
            controls["text"].value = ""

    def compute(sentence, text, beam, alpha, layer, head):
        german, reference, blank = source(sentence, text)
        found = search(german, beam, alpha)
        result = {"german": german, "reference": reference, "typed": reference is None,
                  "note": blank, "beam": beam, "alpha": alpha,
                  "word_pieces": found["word_pieces"], "src_labels": found["src_labels"],
                  "message": found["message"]}
        if found["message"] is None:
            maps = found["attention"][layer]  # (h, T, S)
            result |= {"candidates": found["candidates"], "tokens": found["tokens"],
                       "tgt_labels": found["tgt_labels"],
                       "translation": found["candidates"][0][0],
                       "weights": maps.mean(axis=0) if head < 0 else maps[head]}  # (T, S)
        return result

    def header(result):
        pieces = " ".join("".join(p) for p in result["word_pieces"]) + " </s>"
        lines = _lines(tr("German, {n} words", n=len(result["word_pieces"])), result["german"])
        lines += _lines(tr("as {n} pieces (· = the word goes on)", n=len(result["src_labels"])),
                        pieces)
        if result["message"] is None:
            lines += _lines(tr("translation (beam {beam}, alpha {alpha})", beam=result["beam"],
                               alpha=f"{result['alpha']:.1f}"), result["translation"])
            lines += _lines(tr("reference"), result["reference"] if not result["typed"]
                            else tr("none (a typed sentence)"), count=1)
        return "\n".join(lines)

    def map_title(values):
        head = tr("mean of heads") if values["head"] < 0 else tr("head {i}", i=values["head"])
        return tr("cross-attention of the best candidate · layer {layer} · {head}",
                  layer=values["layer"], head=head)

    def draw(fig, result, values):
        if result["message"] is not None:
            ax = fig.subplots()
            ax.axis("off")
            ax.text(0.0, 1.0, header(result), ha="left", va="top", fontsize=9,
                    family=_monospace(), transform=ax.transAxes, in_layout=False)
            ax.text(0.5, 0.5, "\n".join(textwrap.wrap(result["message"], 70)), ha="center",
                    va="center", fontsize=13, color="#a00", transform=ax.transAxes)
            return None  # nothing to refresh: every change draws anew
        fig.get_layout_engine().set(w_pad=8 / 72)  # room for the last tick label, at 0
        grid = fig.add_gridspec(2, 2, height_ratios=[1.1, 5], width_ratios=[1.2, 1])
        ax_text = fig.add_subplot(grid[0, :])
        ax_text.axis("off")
        ax_text.text(0.0, 1.0, header(result), ha="left", va="top", fontsize=9,
                     family=_monospace(), transform=ax_text.transAxes, in_layout=False)
        ax_map = fig.add_subplot(grid[1, 0])
        image = heatmap(result["weights"], result["tgt_labels"], result["src_labels"],
                        ax=ax_map, vmin=0, vmax=1, annotate=False, colorbar=False, title=" ",
                        xlabel=tr("source piece (German)"),
                        ylabel=tr("output piece (English) being written"))
        colorbar = fig.colorbar(image, cax=ax_map.inset_axes([1.02, 0, 0.025, 1]))
        colorbar.ax.tick_params(labelsize=8)
        label = ax_map.text(0.5, 1.01, "", transform=ax_map.transAxes, ha="center",
                            va="bottom", fontsize=9, in_layout=False)
        _candidates_panel(fig.add_subplot(grid[1, 1]), result)
        changing = animate([image, label])

        def refresh(result, values):
            image.set_data(result["weights"])
            label.set_text(map_title(values))
            return changing

        refresh(result, values)
        return refresh

    def status(result, values):
        pieces = " ".join("".join(p) for p in result["word_pieces"]) + " </s>"
        out = [(tr("pieces"), pieces)]
        if result["note"]:
            out.append((tr("note"), result["note"]))
        if result["message"] is not None:
            return out + [(tr("note"), result["message"])]
        best = result["candidates"][0]
        out += [(tr("translation"), result["translation"]),
                (tr("reference"), result["reference"] if not result["typed"]
                 else tr("none (typed)")),
                (tr("best"), tr("log P {log_p}, score {score}, {n} pieces, of {k} finished "
                                "candidate(s)", log_p=f"{best[1]:.2f}", score=f"{best[2]:.2f}",
                                n=best[3], k=len(result["candidates"])))]
        return out

    def layout_key(values):  # one figure per search; layer and head take the fast path
        german, reference, _ = source(values["sentence"], values["text"])
        return german, reference, values["beam"], round(values["alpha"], 6)

    return Explorer(controls, compute, draw, status, link=link, layout_key=layout_key,
                    figsize=(11.0, 7.6), title="Translation explorer", note=note)


def _candidates_panel(ax, result):
    """The finished candidates, best on top, one row each: its text, then a bar from 0 to its
    log P (grey) whose part from 0 to its score log P / lp(Y) is coloured (orange: the best);
    a larger alpha shortens the coloured part, a longer candidate's most."""
    candidates = result["candidates"]
    k = len(candidates)
    y = np.arange(k)
    log_p = np.array([c[1] for c in candidates])
    score = np.array([c[2] for c in candidates])
    ax.barh(y + 0.14, log_p, height=0.66, color="0.86")
    ax.barh(y + 0.14, score, height=0.66, color=["#fdae6b"] + ["#9ecae1"] * (k - 1))
    low = min(float(log_p.min()), -1e-3) * 1.02
    ax.set(xlim=(low, 0), ylim=(k - 0.5, -0.5), yticks=[])
    ax.set_xlabel(tr("grey: log P(Y | X) (0 = certain); colour: the score log P / lp(Y),\n"
                     "lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| = pieces with </s>"), fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    size = float(np.clip(10.5 - 0.4 * k, 7.5, 9.5))
    for j, (text, lp, sc, n) in enumerate(candidates):
        ax.text(low, j - 0.21, f" {j + 1}. {text}", ha="left", va="bottom", fontsize=size,
                weight="bold" if j == 0 else "normal", clip_on=True, in_layout=False)
        ax.text(low, j + 0.14, "  " + tr("log P {log_p} · score {score} · |Y| = {n}",
                                         log_p=f"{lp:.2f}", score=f"{sc:.2f}", n=n),
                ha="left", va="center", fontsize=size - 1, in_layout=False)
    ax.set_title(tr("{k} finished candidate(s), the best score first\n(beam {beam}, alpha "
                    "{alpha})", k=k, beam=result["beam"], alpha=f"{result['alpha']:.1f}"),
                 fontsize=9)


def committed_translation_explorer(n: int = 20) -> Explorer:
    """translation_explorer as notebook 11 builds it, in one call (for benchmarks and tests):
    the committed model and vocabulary (data/translation_model.npz) and the first `n` pairs of
    the Multi30k test set."""
    from helpers.data import load_multi30k, load_translation

    model, vocab, _ = load_translation()
    german, english = load_multi30k("test_2016_flickr")
    return translation_explorer(model, vocab, list(zip(german[:n], english[:n])))
