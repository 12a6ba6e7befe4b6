"""Break every explorer of a real notebook on purpose, to prove the browser check catches it.

Each mutation is a code cell inserted at the top of a temporary copy of a series notebook (the
file in notebooks/ is never touched). It patches ``helpers.widgets.Explorer`` before the notebook
builds its explorers, so every explorer of the notebook is broken the same way, while the
notebook's own in-kernel widget tests (which set ``.value`` from the kernel) still pass.
"""

from __future__ import annotations

CALLBACK = '''\
# e2e mutation: every explorer's callback raises for a change made in the browser
import helpers.widgets as _tw

_on_change = _tw.Explorer._on_change
_calls = [0]


def _on_change_failing_from_browser(self, change):
    if not change["owner"]._property_lock:  # set in the kernel: the notebook's own tests
        return _on_change(self, change)
    compute = self.compute

    def fail(**values):  # a new message each call: each control's failure shows
        _calls[0] += 1
        raise RuntimeError(f"e2e mutation: the explorer's callback fails (call {_calls[0]})")

    self.compute = fail
    try:
        return _on_change(self, change)
    finally:
        self.compute = compute


_tw.Explorer._on_change = _on_change_failing_from_browser
'''

FRONTEND = '''\
# e2e mutation: no explorer control has a front end (its view module is missing in the browser)
import helpers.widgets as _tw

_init = _tw.Explorer.__init__


def _init_without_front_end(self, controls, *args, **kwargs):
    for control in controls.values():
        control._view_module = "tx-e2e-mutation-missing-module"
    _init(self, controls, *args, **kwargs)


_tw.Explorer.__init__ = _init_without_front_end
'''

MUTATIONS = {
    # name: (cell, the check that must fire for every control)
    "callback": (CALLBACK, "explorer-error"),
    "frontend": (FRONTEND, "render"),
}


def chosen_mutations(setting: str) -> list[str]:
    """The mutations ``E2E_MUTATIONS`` asks for: "" none, "1" or "all" every one, else names."""
    if setting.strip() in ("", "0"):
        return []
    if setting.strip() in ("1", "all"):
        return sorted(MUTATIONS)
    names = [n.strip() for n in setting.split(",") if n.strip()]
    unknown = [n for n in names if n not in MUTATIONS]
    if unknown:
        raise ValueError(f"E2E_MUTATIONS: unknown mutation(s) {unknown}; "
                         f"known: {sorted(MUTATIONS)}")
    return names
