"""Test-suite configuration."""

import importlib.util

# The real-browser suite (tests/e2e, marker `e2e`, run by `make e2e`) needs Playwright, which the
# default test environment does not install; without it, do not even collect those files.
collect_ignore_glob = [] if importlib.util.find_spec("playwright") else ["e2e/*"]
