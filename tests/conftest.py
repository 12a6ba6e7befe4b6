"""Test-suite configuration, and the fixtures every test file shares."""

import importlib.util

import numpy as np
import pytest

# Notebooks under tests/ are fixtures of the browser suite (some broken on purpose), never part of
# the nbval run, which covers notebooks/ only.
collect_ignore_glob = ["**/*.ipynb", "*.ipynb"]

# The real-browser suite (tests/e2e, marker `e2e`) needs Playwright, which the
# default test environment does not install; without it, do not even collect those files.
if importlib.util.find_spec("playwright") is None:
    collect_ignore_glob.append("e2e/*")


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed for every test: tests are deterministic and
    independent of the order they run in."""
    return np.random.default_rng(2017)

