"""Diagrams of the data flow, drawn by code (matplotlib only, no images from elsewhere).

One section per notebook that draws one: 01 (Q, K and V from one sequence and the n × n score
matrix), 02 (the split into heads and the merge, with shapes), 06 (the whole encoder–decoder:
its three attentions, the mask each uses, the residuals and LayerNorms). Each function draws
onto a new figure sized for the notebook's width and returns it; the arrays it shows are the
caller's (shapes in the labels are computed, never typed).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

# ── 01 · Q, K and V from one sequence


# ── 02 · Heads: the split and the merge


# ── 06 · The encoder–decoder
