"""Helpers for the series: the NumPy Transformer (transformer.py), plots, widgets."""
