"""Helpers for the series: the NumPy Transformer (transformer.py), plots, widgets.

Importing the package imports helpers.training, which attaches notebook 07's backward pass to
every module of helpers/transformer.py (add_to_class), so that backward works after
``from helpers.transformer import LayerNorm`` alone. transformer.py cannot import it itself:
imports point downward, and training is above transformer (README, "Layout").
"""

import helpers.training  # noqa: F401  (attaches every backward)
