"""Re-execute notebooks in place ("restart kernel and run all") and normalise them.

    python tests/regenerate.py                      # every notebook, exercises included
    python tests/regenerate.py notebooks/01_*.ipynb # some of them

Each notebook runs in a fresh `python3` kernel of this environment, from its own folder,
with one BLAS thread. Afterwards we remove what differs run to run and is not content: execution
timing metadata, stored widget state, volatile `language_info`. The view of a displayed widget
(a random model id) is replaced by a short note, because a widget only exists in a live kernel.
Two regenerations in a row give byte-identical files (tests/test_hygiene.py checks the result).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = "[interactive explorer: run this notebook in JupyterLab to use it]"
WIDGET_NOTES = {"TrainingMonitor": "[live training monitor: run in JupyterLab]"}  # by widget class
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def merge_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) chunks: how a kernel splits a stream is not content."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev["name"] == out["name"]):
            prev["text"] += out["text"]
        else:
            merged.append(out)
    return merged


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
        cell.metadata.pop("execution", None)
        cell.metadata.pop("scrolled", None)
        cell.metadata.pop("collapsed", None)
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and WIDGET_VIEW in data:
                plain = data.get("text/plain", "")  # the widget's repr: its class, then "("
                plain = "".join(plain) if isinstance(plain, list) else plain
                out["data"] = {"text/plain": WIDGET_NOTES.get(plain.split("(")[0], WIDGET_NOTE)}
            out.get("metadata", {}).pop("transient", None)
    return nb


def run(path: Path, timeout: int = 600) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    client.execute()
    nbformat.write(normalise(nb), path)


def main(argv: list[str]) -> int:
    os.environ.setdefault("JUPYTER_PREFER_ENV_PATH", "1")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ.pop("MPLBACKEND", None)
    paths = [Path(p).resolve() for p in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) + sorted(
        (NOTEBOOKS / "exercises").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"executing {path.relative_to(ROOT)}", flush=True)
        run(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
