"""Root pytest configuration: shared by the unit tests and by nbval's notebook runs."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# Notebook outputs must not depend on the caller's environment: an inherited MPLBACKEND=Agg would
# turn inline figures off, and the kernelspec must be this environment's (JUPYTER_PREFER_ENV_PATH).
os.environ.pop("MPLBACKEND", None)
os.environ.setdefault("JUPYTER_PREFER_ENV_PATH", "1")


def pytest_configure(config):
    # nbval opens the sanitize file relative to the current directory; make it independent of
    # where pytest was started from (e.g. `cd notebooks && pytest`).
    path = getattr(config.option, "nbval_sanitize_with", None)
    if path and not os.path.isabs(path):
        config.option.nbval_sanitize_with = str(ROOT / path)
