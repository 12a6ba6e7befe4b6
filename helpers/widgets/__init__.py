"""ipywidgets explorers: controls that recompute real NumPy attention and redraw a figure.

``from helpers import widgets as tw`` gives every explorer; the modules, in notebook order:

* ``explorer``  the Explorer pattern (controls -> compute -> draw -> PNG, the fast path, the DOM
                convention of the browser tests) and the check that a fast path draws what a full
                redraw draws (``assert_fast_path_matches_redraw``)
* ``attention`` 01-02: ``scaling_explorer``, ``query_explorer``, ``head_explorer``
                (the reversal model's heads, trained and random)
* ``positions`` 03: ``pe_explorer``
* ``masks``     04: ``mask_explorer``
* ``blocks``    05: ``block_explorer``, ``stage_options``, ``POST_LN_STAGES``, ``PRE_LN_STAGES``
* ``decoder``   06: ``attention_viewer``
* ``training``  07: ``TrainingMonitor``, ``attention_comparison``
* ``cost``      08: ``timed``, ``cost_explorer``
* ``modern``    09: ``pieces_explorer`` (the sixteen trained decoder-only models and random twins)
* ``lm``        10: ``writing_explorer`` (temperature, top-k and a sample of the language model)
* ``translation`` 11: ``translation_explorer`` (a German sentence, its pieces, the beam's
                candidates and the best one's cross-attention)

What the explorers measure (entropy, block stages, the reversal task's digits) lives in
``helpers.analysis``. Dependencies point down only: widgets -> plots, analysis -> reversal ->
training, decoding, translation -> transformer; nothing in helpers imports this package.
"""

from helpers.widgets.attention import (
    HEAD_KINDS,
    POWERS_OF_TWO,
    head_explorer,
    query_explorer,
    scaling_explorer,
)
from helpers.widgets.blocks import POST_LN_STAGES, PRE_LN_STAGES, block_explorer, stage_options
from helpers.widgets.cost import COST_LENGTHS, cost_explorer, timed
from helpers.widgets.decoder import ATTENTION_KINDS, attention_viewer
from helpers.widgets.explorer import (
    Explorer,
    assert_fast_path_matches_redraw,
    control_kind,
    display_value,
)
from helpers.widgets.lm import (
    LM_RANDOM,
    LM_TRAINED,
    TOP_K_OPTIONS,
    committed_writing_explorer,
    writing_explorer,
)
from helpers.widgets.masks import MASK_DIGITS, MASK_KINDS, MASK_RGBA, mask_explorer
from helpers.widgets.modern import MODERN_RANDOM, MODERN_TRAINED, PIECE_OPTIONS, pieces_explorer
from helpers.widgets.positions import PE_D_MODELS, column_index_slip, pe_explorer
from helpers.widgets.training import TrainingMonitor, attention_comparison
from helpers.widgets.translation import (
    MAX_BEAM,
    PENALTY_ALPHAS,
    committed_translation_explorer,
    translation_explorer,
)

__all__ = [
    # the pattern
    "Explorer",
    "assert_fast_path_matches_redraw",
    "control_kind",
    "display_value",
    # 01-02
    "POWERS_OF_TWO",
    "scaling_explorer",
    "query_explorer",
    "HEAD_KINDS",
    "head_explorer",
    # 03
    "PE_D_MODELS",
    "column_index_slip",
    "pe_explorer",
    # 04
    "MASK_DIGITS",
    "MASK_KINDS",
    "MASK_RGBA",
    "mask_explorer",
    # 05
    "POST_LN_STAGES",
    "PRE_LN_STAGES",
    "stage_options",
    "block_explorer",
    # 06
    "ATTENTION_KINDS",
    "attention_viewer",
    # 07
    "TrainingMonitor",
    "attention_comparison",
    # 08
    "COST_LENGTHS",
    "timed",
    "cost_explorer",
    # 09
    "MODERN_TRAINED",
    "MODERN_RANDOM",
    "PIECE_OPTIONS",
    "pieces_explorer",
    # 10
    "LM_TRAINED",
    "LM_RANDOM",
    "TOP_K_OPTIONS",
    "committed_writing_explorer",
    "writing_explorer",
    # 11
    "PENALTY_ALPHAS",
    "MAX_BEAM",
    "committed_translation_explorer",
    "translation_explorer",
]
