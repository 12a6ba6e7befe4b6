"""Every notebook of the series, in JupyterLab in headless Chromium: it runs clean, every widget
view renders, and every explorer control changes the figure and the status line agrees with it.

A new ``notebooks/NN_*.ipynb`` is picked up automatically, and so is a new explorer in it (the
DOM convention of helpers/widgets.py says what an explorer and its controls are). Text boxes
are typed into only where texts.py says what to type; a notebook's own test (such as
test_translation.py) then judges what its explorer showed.

Not blind: once a notebook passed, its explorers' callbacks are broken in the live kernel and
every control is moved again; each must then be reported, naming the notebook and the control.
With ``E2E_MUTATIONS=1`` (or a comma-separated list of names from mutations.py, such as
``E2E_MUTATIONS=frontend``) the suite also re-runs each notebook with its explorers broken from
the start (``callback``: it raises; ``frontend``: no control can render), at the cost of one more
full run of each notebook per mutation (run beside the others, see pool.py).
"""

from __future__ import annotations

import os

import pytest

from .lab import series_notebooks
from .mutations import MUTATIONS, chosen_mutations
from .pool import Check
from .texts import texts_for

pytestmark = pytest.mark.e2e

SERIES = series_notebooks()
IDS = [str(p.relative_to(p.parents[1] if p.parent.name == "zh" else p.parent)) for p in SERIES]
CHOSEN = chosen_mutations(os.environ.get("E2E_MUTATIONS", ""))


def clean(notebook) -> Check:
    """The notebook as it is, with the self-check, typing into its explorers' text boxes what
    texts.py lists for it."""
    return Check(notebook, self_check=True, texts=texts_for(notebook))


def mutated(notebook, mutation: str) -> Check:
    """The notebook with the mutation's cell at the top (mutations.py)."""
    return Check(notebook, mutation=mutation, first_cells=(MUTATIONS[mutation][0],))


def planned_checks(item) -> list[Check]:
    """What each test will ask for (conftest.py queues them all at the start of the session)."""
    params = item.callspec.params
    if item.originalname == "test_broken_explorers_are_caught":
        if params["mutation"] not in CHOSEN:
            return []
        return [clean(params["notebook"]), mutated(params["notebook"], params["mutation"])]
    return [clean(params["notebook"])]


def uncaught(report, explorers, check: str, cell_offset: int = 0) -> list[str]:
    """The controls of ``explorers`` that no ``check`` problem of ``report`` names;
    ``cell_offset``: how many cells were inserted at the top of the notebook checked."""
    missing = []
    for k, explorer in enumerate(explorers):
        named = f'explorer {k + 1} "{explorer["title"]}"'
        for control in explorer["controls"]:
            if control["kind"] == "text":  # not moved, see driver.py
                continue
            where = (f'{named} (cell {explorer["cell"] + 1 + cell_offset}), '
                     f'control "{control["name"]}"')
            if not any(p.check == check and p.where.startswith(where) for p in report):
                missing.append(where)
    return missing


@pytest.mark.parametrize("notebook", SERIES, ids=IDS)
def test_notebook_in_jupyterlab(lab, notebook):
    report = lab.check(clean(notebook))
    print(f"{report.notebook}: {len(report.explorers)} explorer(s), {report.seconds:.1f} s")
    for move in report.moves:
        print("  moved", move)
    assert not report.problems, report.summary()
    missing = uncaught(report.self_check, report.explorers, "explorer-error")
    assert not missing, ("self-check: a broken callback was not reported for "
                         + "; ".join(missing) + "\n" + "\n".join(map(str, report.self_check)))
    unnamed = [str(p) for p in report.self_check if 'control "' not in p.where]
    assert not unnamed, "self-check problems that name no control:\n" + "\n".join(unnamed)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("notebook", SERIES, ids=IDS)
def test_broken_explorers_are_caught(lab, notebook, mutation):
    """Break every explorer of the notebook from the start; every control must be named."""
    if mutation not in CHOSEN:
        pytest.skip(f"set E2E_MUTATIONS={mutation} (or 1) to run")
    explorers = lab.check(clean(notebook)).explorers  # the explorers and controls
    if not explorers:
        pytest.skip(f"{notebook.name} has no explorer")
    check = MUTATIONS[mutation][1]
    report = lab.check(mutated(notebook, mutation))
    missing = uncaught(report.problems, explorers, check, cell_offset=1)
    assert not missing, (f"mutation {mutation!r} was not caught as [{check}] for: "
                         f"{'; '.join(missing)}\n{report.summary()}")
    unnamed = [str(p) for p in report.problems if p.check == check and 'control "' not in p.where]
    assert not unnamed, f"[{check}] problems that name no control:\n" + "\n".join(unnamed)
