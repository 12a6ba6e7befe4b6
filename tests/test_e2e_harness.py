"""The pure parts of the real-browser suite (tests/e2e), checked without a browser, so that
`make test` catches a broken harness before the slow `make e2e` runs it."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from tests.e2e.driver import Problem, Report, StallWatch, changed_fraction, log_problems
from tests.e2e.lab import NOTEBOOKS, LabServer, cleared_copy, fingerprint, series_notebooks
from tests.e2e.mutations import MUTATIONS, chosen_mutations


def png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_changed_fraction_counts_every_changed_pixel():
    a = np.full((10, 20, 3), 200)
    b = a.copy()
    assert changed_fraction(png(a), png(b)) == 0.0
    b[0, :5, 2] += 1  # a change of one grey level in one channel still counts
    b[3, 7] = 0
    assert changed_fraction(png(a), png(b)) == pytest.approx(6 / 200)
    assert changed_fraction(png(a), png(a[:, :10])) == 1.0  # another size: all changed


def test_log_problems_finds_errors_and_tracebacks_only():
    log = "\n".join([
        "[I 2026-11-29 12:00:00.000 ServerApp] Kernel started",
        "[W 2026-11-29 12:00:01.000 ServerApp] 404 GET /nothing",
        "[E 2026-11-29 12:00:02.000 ServerApp] Uncaught exception GET /api/x",
        "    Traceback (most recent call last):",
        '      File "x.py", line 1, in f',
        "    ValueError: boom",
        "[I 2026-11-29 12:00:03.000 ServerApp] Saving file",
        "Traceback (most recent call last):",
        "  RuntimeError: in a kernel",
    ])
    found = log_problems(log)
    assert [first[:3] for first, _ in found] == ["[E ", "Tra"]
    assert found[0][1] == "ValueError: boom"  # the last line of the record says what failed
    assert found[1] == ("Traceback (most recent call last):", "RuntimeError: in a kernel")
    assert log_problems("[I all fine]\n[W a warning]\n") == []


def test_wait_disconnected_polls_until_no_kernel_has_a_connection(monkeypatch, tmp_path):
    server = LabServer(tmp_path, tmp_path)
    answers = [[{"id": "k", "connections": 1}]] * 3 + [[{"id": "k", "connections": 0}]]
    monkeypatch.setattr(server, "kernels", lambda: answers.pop(0))
    assert server.wait_disconnected(timeout=5) and answers == []  # polled until 0 connections
    answers[:] = [[{"id": "j", "connections": 0}, {"id": "k", "connections": 1}]] * 1000
    assert not server.wait_disconnected(timeout=0.3)  # a later kernel still connected: says so


class FakeServer:
    """What check_notebook needs of a LabServer, with a real log file; records its calls."""

    def __init__(self, log, calls, let_go=True):
        self.log, self.calls, self.let_go, self.scanned = log, calls, let_go, 0

    def log_size(self):
        return self.log.stat().st_size

    def log_text(self, start=0, end=None):
        return self.log.read_bytes()[start:end].decode()

    def delete_sessions(self):
        self.calls.append("delete sessions")

    def wait_disconnected(self, timeout):
        self.calls.append("wait disconnected")
        return self.let_go

    def kernels(self):
        return [{"id": "k", "connections": 1}]


class FakePage:
    def add_init_script(self, script):
        pass

    def on(self, event, handler):
        pass


class FakeContext:
    def __init__(self, calls, on_close):
        self.calls, self.on_close = calls, on_close

    def set_default_timeout(self, ms):
        pass

    def new_page(self):
        return FakePage()

    def close(self):
        self.calls.append("close page")
        self.on_close()


@pytest.mark.parametrize("let_go", [True, False])
def test_closing_shuts_the_kernel_down_after_the_server_let_go_and_forgives_nothing(
        monkeypatch, tmp_path, let_go):
    import tests.e2e.driver as driver

    log, calls = tmp_path / "server.log", []
    log.write_text("[I 2026-11-29 12:00:00.000 ServerApp] started\n")
    race = ("Traceback (most recent call last):\n  File \"tornado/websocket.py\", line 1090\n"
            "tornado.websocket.WebSocketClosedError\n")

    def closed():  # a kernel message racing the page's close is logged
        with log.open("a") as f:
            f.write(race)

    class Browser:
        def new_context(self, viewport):
            return FakeContext(calls, closed)

    monkeypatch.setattr(driver.NotebookCheck, "run", lambda self: self.report)
    report = driver.check_notebook(Browser(), FakeServer(log, calls, let_go), "nb.ipynb")
    assert calls == ["delete sessions", "close page", "wait disconnected", "delete sessions"]
    found = [(p.where, p.check) for p in report.problems]
    assert ("closing", "server-log") in found  # the closing race is a problem like any other
    assert (("closing", "harness") in found) is not let_go, found


def test_series_notebooks_are_every_notebook():
    found = series_notebooks()
    files = sorted(p for p in NOTEBOOKS.iterdir() if p.is_file() and not p.name.startswith("."))
    chinese = [p for p in found if p.parent == NOTEBOOKS / "zh"]
    assert found == files + chinese and len(files) >= 8 and len(chinese) == 2
    assert all(p.exists() and (NOTEBOOKS / p.name).exists() for p in chinese)
    assert all(p.suffix == ".ipynb" for p in found)


def test_cleared_copy_strips_outputs_and_inserts_cells(tmp_path):
    source = series_notebooks()[0]
    target = tmp_path / "copy.ipynb"
    cleared_copy(source, target, ["print('first')"])
    original = json.loads(source.read_text(encoding="utf-8"))
    copy = json.loads(target.read_text(encoding="utf-8"))
    assert len(copy["cells"]) == len(original["cells"]) + 1
    assert copy["cells"][0]["source"] == "print('first')"
    code = [c for c in copy["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert [c["source"] for c in copy["cells"][1:]] == [c["source"] for c in original["cells"]]


def test_fingerprint_sees_a_rewrite(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_text('{"a": 1}')
    before = fingerprint(tmp_path)
    assert fingerprint(tmp_path) == before
    stat = path.stat()
    path.write_text('{"a": 2}')  # same size, same mtime: only the bytes differ
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(tmp_path) != before
    (tmp_path / "new.ipynb").write_text("{}")
    assert set(fingerprint(tmp_path)) == {"a.ipynb", "new.ipynb"}


def test_chosen_mutations():
    assert chosen_mutations("") == chosen_mutations("0") == []
    assert chosen_mutations("1") == chosen_mutations("all") == sorted(MUTATIONS)
    assert chosen_mutations(" frontend ") == ["frontend"]
    with pytest.raises(ValueError, match="unknown mutation"):
        chosen_mutations("frontend,nonsense")


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_cells_compile_and_patch_the_explorer(name):
    cell, check = MUTATIONS[name]
    compile(cell, f"<mutation {name}>", "exec")
    assert "helpers.widgets" in cell and check in {"explorer-error", "render"}


def page_state(counts, queued, status="idle"):
    cells = [{"index": i, "count": c, "prompt": "[*]:" if i + 1 in queued else ""}
             for i, c in enumerate(counts)]
    return {"cells": cells, "kernel": {"status": status}}


def test_stall_watch_fires_only_for_an_idle_kernel_with_a_queue_that_does_not_move():
    now = [0.0]
    watch = StallWatch(seconds=30, clock=lambda: now[0])
    stuck = page_state([1, 2, None, None], queued=[3, 4])
    assert watch.see(stuck) is None
    now[0] = 29.0
    assert watch.see(stuck) is None
    now[0] = 31.0
    assert watch.see(stuck) == ("the kernel sat idle for 30 s with cells [3, 4] still queued "
                                "(2 cell(s) had run)")
    # A busy kernel (a long cell) or a queue that moves is never a stall.
    for state in (page_state([1, 2, None, None], [3, 4], status="busy"),
                  page_state([1, 2, 3, None], [4]), page_state([1, 2, 3, 4], [])):
        now[0] += 100.0
        assert watch.see(state) is None
    # A long cell whose widget messages make the status read "idle" (ipykernel 7 subshells)
    # keeps sending messages: not a stall.
    long_cell = page_state([1, None, None], [2, 3])
    for tick in range(10):
        now[0] += 20.0
        assert watch.see({**long_cell, "iopub": tick}) is None


class PoolServer:
    """What a worker needs of a LabServer once the checks themselves are stubbed out."""

    def __init__(self, root):
        self.root_dir, self.scanned = root, 0

    def stop(self):
        return []

    def log_text(self, start=0):
        return ""


def stub_pool(monkeypatch, tmp_path, outcomes, workers=2):
    """A Pool whose workers start no server or browser and whose checks return ``outcomes``."""
    import tests.e2e.pool as pool

    def start(self):
        self.base.mkdir(parents=True)
        self.server = PoolServer(self.base)
        return None, None

    runs = []

    def check_notebook(browser, server, path, **kwargs):
        runs.append(path)
        return outcomes.pop(0)

    monkeypatch.setattr(pool.Worker, "_start", start)
    monkeypatch.setattr(pool, "check_notebook", check_notebook)
    return pool.Pool(tmp_path, "/no/chromium", workers), runs


def test_a_stalled_check_fails_and_is_not_retried(monkeypatch, tmp_path):
    from tests.e2e.pool import Check

    def stalled(label):
        return Report(label, problems=[Problem(label, "run all", "stalled", "stuck")])

    outcomes = [stalled("nb"), Report("nb")]  # a retry would pass
    pool, runs = stub_pool(monkeypatch, tmp_path, outcomes, workers=1)
    try:
        report = pool.result(Check(series_notebooks()[0]))
        assert [p.check for p in report.problems] == ["stalled"] and len(outcomes) == 1
        assert pool.result(Check(series_notebooks()[0])) is report  # asked again: the same run
    finally:
        assert pool.close() == []
    assert runs == [f"series/{series_notebooks()[0].name}"]


def test_the_pool_runs_every_planned_check_once_and_shares_equal_ones(monkeypatch, tmp_path):
    from tests.e2e.pool import Check

    first, second = sorted(series_notebooks()[:2], key=lambda p: -p.stat().st_size)
    reports = [Report(f"r{i}") for i in range(3)]
    pool, runs = stub_pool(monkeypatch, tmp_path, list(reports), workers=1)  # one order
    fixture = Check(tmp_path / "fixture.ipynb")
    (tmp_path / "fixture.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    try:
        # Planned in test order; queued the largest notebook first, equal checks once.
        pool.submit_all([fixture, Check(first), Check(second, mutation="m"), Check(first)])
        got = {pool.result(c).notebook for c in (fixture, Check(first), Check(second, mutation="m"))}
        assert got == {"r0", "r1", "r2"} and pool.result(Check(first)) is pool.result(Check(first))
    finally:
        assert pool.close() == []
    # The larger notebook first, the small fixture last.
    assert runs == [f"series/{first.name}", f"mutated/{second.stem}.m.ipynb",
                    "fixtures/fixture.ipynb"]
    assert not any(w.thread.is_alive() for w in pool.workers)


def test_texts_are_typed_only_where_texts_py_lists_them():
    from helpers.data import load_translation
    from tests.e2e.test_notebooks import clean
    from tests.e2e.texts import TEXTS, TOO_LONG, TRANSLATION_TEXTS, TRANSLATION_TITLE

    translation = clean(NOTEBOOKS / "11_translation.ipynb")
    assert translation.texts == TEXTS["11_translation.ipynb"]
    assert [text for _, _, text in translation.texts] == list(TRANSLATION_TEXTS)
    assert {(title, control) for title, control, _ in translation.texts} == {
        (TRANSLATION_TITLE, "text")}
    assert clean(NOTEBOOKS / "01_scaled_dot_product_attention.ipynb").texts == ()
    assert hash(translation) == hash(clean(NOTEBOOKS / "11_translation.ipynb"))  # one run
    model, vocab, _ = load_translation()  # the too-long text must stay too long for the model
    assert len(vocab.encode(TOO_LONG)) > len(model.pe)
