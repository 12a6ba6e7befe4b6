"""Kernel time of one explorer update (a control change -> recompute -> new PNG), per explorer.

    python benchmarks/widget_update.py [--repeats 20]

Prints the median and the 90th percentile in milliseconds, and the slowest single update (the
first visit of a new layout, e.g. a new number of heads, is a full redraw; later visits of the
same layout reuse the cached figure). Target (DESIGN.md §7): well under 100 ms. This is a
benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from helpers import analysis
from helpers import widgets as tw
from helpers.data import (
    MODERN_MANIFEST,
    MODERN_RUNS,
    load_modern_models,
    load_reverse_model,
    load_runs,
)
from helpers.reversal import REVERSE_CONFIG
from helpers.transformer import Transformer


def comparison():
    """Notebook 07's explorer: an untrained model next to the committed trained one."""
    trained, _ = load_reverse_model()
    random_model = Transformer.from_config(REVERSE_CONFIG, np.random.default_rng(0))
    return tw.attention_comparison(random_model, trained, ["3 1 4 1 5 9 2 6", "2 7 1 8"])


def pieces():
    """Notebook 09's explorer: the sixteen trained combinations of today's pieces."""
    models, _ = load_modern_models()
    return tw.pieces_explorer(models, record=load_runs(MODERN_RUNS, MODERN_MANIFEST))


def explorers():
    """Every explorer the notebooks build, with the controls to cycle through."""
    yield "01 scaling explorer (d_k)", tw.scaling_explorer(), "d_k", [16, 64, 256, 1024]
    yield ("01 scaling explorer (scoring)", tw.scaling_explorer(), "scoring",
           ["raw", "scaled", "additive"])
    rng = np.random.default_rng(0)
    toks = "we walked along the river bank".split()
    ex = {" ".join(toks): (toks, *(rng.standard_normal((6, 4)) for _ in range(3)))}
    toks2 = "we paid cash at the bank".split()
    ex[" ".join(toks2)] = (toks2, *(rng.standard_normal((6, 4)) for _ in range(3)))
    yield "01 query explorer (query)", tw.query_explorer(ex), "query", [0, 2, 4, 5]
    yield "01 query explorer (sentence)", tw.query_explorer(ex), "sentence", list(ex)
    heads = tw.head_explorer()
    heads.controls["head"].value = 0
    yield "02 head explorer (one head)", heads, "head", [1, 0]
    yield "02 head explorer (weights)", tw.head_explorer(), "weights", [
        analysis.RANDOM, analysis.TRAINED]
    yield "02 head explorer (kind)", tw.head_explorer(), "kind", [
        "encoder self", "decoder self", "cross"]
    yield "02 head explorer (digits)", tw.head_explorer(), "digits", ["2 7 1 8", "3 1 4 1 5"]
    yield "03 PE explorer (offset)", tw.pe_explorer(), "offset", [1, 5, 20, -3, 39]
    yield "03 PE explorer (dim)", tw.pe_explorer(), "dim", [0, 7, 30, 63]
    yield "03 PE explorer (d_model)", tw.pe_explorer(), "d_model", [16, 64, 512, 8]
    yield "03 PE explorer (positions)", tw.pe_explorer(), "positions", [20, 50, 200]
    yield "04 mask explorer (head)", tw.mask_explorer(T=10, n_pad=3), "head", [1, 0]
    yield "04 mask explorer (causal)", tw.mask_explorer(T=10, n_pad=3), "causal", [False, True]
    yield "04 mask explorer (padding)", tw.mask_explorer(T=10, n_pad=3), "n_pad", [0, 5, 10, 3]
    yield "04 mask explorer (length T)", tw.mask_explorer(), "T", [4, 8, 10, 2]
    yield "05 block explorer (stage)", tw.block_explorer(), "stage", [1, 3, 6, 0]
    yield "05 block explorer (layer)", tw.block_explorer(), "layer", [1, 0]
    yield "05 block explorer (weights)", tw.block_explorer(), "weights", [
        analysis.RANDOM, analysis.TRAINED]
    yield ("05 block explorer (Post/Pre-LN)", tw.block_explorer(), "norm_first",
           [True, False])
    yield "07 random vs trained (head)", comparison(), "head", [0, 1, -1]
    yield "07 random vs trained (layer)", comparison(), "layer", [0, 1]
    yield ("07 random vs trained (digits)", comparison(), "digits",
           ["3 1 4 1 5 9 2 6", "2 7 1 8", "0123456789"])
    yield "08 cost explorer (n)", tw.cost_explorer(), "n", [64, 512, 128, 256]
    yield "08 cost explorer (block)", tw.cost_explorer(), "block", [16, 256, 32, 128]
    yield "09 pieces explorer (a piece)", pieces(), "position", ["today", "2017"]
    yield "09 pieces explorer (head)", pieces(), "head", [0, 1, 2, -1]
    yield "09 pieces explorer (digits)", pieces(), "digits", ["3 1 4 1 5 9", "2 7 1 8 2 8"]
    yield ("10 writing explorer (temperature)", tw.committed_writing_explorer(), "temperature",
           [0.5, 1.2, 0.8])
    yield "10 writing explorer (seed)", tw.committed_writing_explorer(), "seed", [1, 2, 3, 0]
    # 11: a new (sentence, beam, alpha) runs beam search and draws a new figure (the max);
    # revisits, and every layer or head, reuse the kept search and figure
    yield ("11 translation explorer (head)", tw.committed_translation_explorer(), "head",
           [0, 3, 7, -1])
    yield ("11 translation explorer (layer)", tw.committed_translation_explorer(), "layer",
           [0, 1, 2])
    yield ("11 translation explorer (beam)", tw.committed_translation_explorer(), "beam",
           [1, 8, 4])
    yield ("11 translation explorer (alpha)", tw.committed_translation_explorer(), "alpha",
           [0.0, 1.5, 0.6])
    yield ("11 translation explorer (sentence)", tw.committed_translation_explorer(),
           "sentence", [1, 2, 3, 0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
          f"NumPy {np.__version__}")
    print(f"{'explorer':34s} {'median ms':>10s} {'p90 ms':>8s} {'max ms':>8s}")
    for name, explorer, control, values in explorers():
        times = []
        for k in range(args.repeats):
            explorer.controls[control].value = values[k % len(values)]
            times.append(explorer.last_update_ms)
            assert explorer.last_error is None, explorer.last_error
        times.sort()
        p90 = times[int(0.9 * (len(times) - 1))]
        print(f"{name:34s} {statistics.median(times):10.1f} {p90:8.1f} {times[-1]:8.1f}")
    start = time.perf_counter()
    tw.scaling_explorer()
    print(f"building one explorer (incl. first draw): {(time.perf_counter() - start) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
