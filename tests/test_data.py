"""helpers/data.py: saves are atomic (an interrupted save leaves the old files whole), and every
loader's error names the file and the command that restores it. The committed files' contents
are checked where they are used (test_training.py, test_modern.py, test_lm.py)."""

from __future__ import annotations

import builtins
import errno
import gzip
import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import helpers.data as data
from helpers.data import (
    DATA,
    LM_MANIFEST,
    LM_MODEL,
    LM_RUNS,
    MODERN_MANIFEST,
    MODERN_MODELS,
    MODERN_RUNS,
    REVERSE_MANIFEST,
    REVERSE_MODEL,
    REVERSE_RUNS,
    SHAKESPEARE,
    load_lm,
    load_models,
    load_modern_models,
    load_reverse_model,
    load_runs,
    load_shakespeare,
    save_models,
    save_reverse_model,
    save_runs,
    sha256,
)

REVERSE = "OPENBLAS_NUM_THREADS=1 python benchmarks/train_reverse.py --seeds 0 1 2 3 4 --save"
MODERN = "python benchmarks/train_modern.py --save"
LM_SAVE = "python benchmarks/train_lm.py --save --threads 1"
LM_RECORD = "python benchmarks/train_lm.py --record"
GIT = "git checkout data/tinyshakespeare.txt.gz"
FILES = (REVERSE_MODEL, REVERSE_MANIFEST, REVERSE_RUNS, MODERN_MODELS, MODERN_MANIFEST,
         MODERN_RUNS, LM_MODEL, LM_MANIFEST, LM_RUNS, data.RNN_MODEL, data.RNN_MANIFEST,
         data.RECENT_RUNS, data.RECENT_MANIFEST, SHAKESPEARE)
TRANSLATION_FILES = (data.TRANSLATION_MODEL, data.TRANSLATION_MANIFEST, data.TRANSLATION_RUNS,
                     *(data.MULTI30K / name for name in data.MULTI30K_SHA256))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A copy of data/ in tmp_path; load_modern_models and load_lm read it."""
    for path in FILES:
        shutil.copy(path, tmp_path / path.name)
    for name in ("MODERN_MODELS", "MODERN_MANIFEST", "LM_MODEL", "LM_MANIFEST"):
        monkeypatch.setattr(data, name, tmp_path / getattr(data, name).name)
    return tmp_path


def test_every_file_of_data_has_its_command():
    assert {path.name for path in FILES + TRANSLATION_FILES} == set(data.REGENERATE)
    assert all(path.exists() for path in TRANSLATION_FILES)
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for name, command in data.REGENERATE.items():
        assert command in readme or command.startswith("git checkout"), (name, command)


# ── saves are atomic ─────────────────────────────────────────────────────────────────────────


def test_a_save_writes_what_np_savez_writes_and_a_manifest_of_its_digest(tmp_path):
    """The bytes of a .npz depend on NumPy's and Python's zip writers (3.10's differ from 3.11's),
    so they are compared with np.savez's in this environment, not with the committed file's."""
    model, info = load_reverse_model()
    digest = save_reverse_model(model, info["training"], tmp_path / "r.npz", tmp_path / "r.json")
    np.savez(tmp_path / "direct.npz", **model.parameters())  # how it was saved before: in place
    assert (tmp_path / "r.npz").read_bytes() == (tmp_path / "direct.npz").read_bytes()
    assert digest == sha256(tmp_path / "r.npz")
    assert json.loads((tmp_path / "r.json").read_text()) == {**info, "file": "r.npz",
                                                             "sha256": digest}
    model, info = load_lm()
    extra = {k: v for k, v in info.items() if k not in ("file", "sha256", "models")}
    digest = save_models({"": model}, extra, tmp_path / LM_MODEL.name,
                         tmp_path / LM_MANIFEST.name)
    saved = json.loads((tmp_path / LM_MANIFEST.name).read_text())
    assert saved == {**info, "sha256": digest} and digest == sha256(tmp_path / LM_MODEL.name)
    again, _ = load_models(tmp_path / LM_MODEL.name, tmp_path / LM_MANIFEST.name, "make")
    for name, array in model.parameters().items():
        np.testing.assert_array_equal(again[""].parameters()[name], array)
    assert save_runs(load_runs(), tmp_path / "runs.json") == sha256(REVERSE_RUNS)  # plain JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["r.npz", "r.json", "direct.npz", LM_MODEL.name, LM_MANIFEST.name, "runs.json"])


class DiskFull:
    """Files opened for writing in `folder` share `free` bytes: the write that goes past them
    writes what fits and raises `error`, as a full disk (or a Ctrl-C half-way) does."""

    def __init__(self, monkeypatch, folder: Path, free: int, error: BaseException):
        self.free, self.error, real = free, error, io.open

        def limited_open(file, mode="r", *args, **kwargs):
            f = real(file, mode, *args, **kwargs)
            if (isinstance(file, (str, Path)) and Path(file).parent == folder
                    and any(c in mode for c in "wxa+")):
                return _Limited(f, self)
            return f

        monkeypatch.setattr(builtins, "open", limited_open)
        monkeypatch.setattr(io, "open", limited_open)


class _Limited:
    def __init__(self, f, disk: DiskFull):
        self._f, self._disk = f, disk

    def write(self, chunk):
        size = len(chunk) if isinstance(chunk, str) else memoryview(chunk).nbytes
        if size <= self._disk.free:
            self._disk.free -= size
            return self._f.write(chunk)
        self._f.write(chunk[:self._disk.free] if isinstance(chunk, str)
                      else bytes(chunk)[:self._disk.free])
        self._disk.free = 0
        self._f.flush()
        raise self._disk.error

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def changed(model):
    for p in model.parameters().values():
        p += 1
    return model


def save_reverse(d):
    model, info = load_reverse_model()
    save_reverse_model(changed(model), info["training"], d / REVERSE_MODEL.name,
                       d / REVERSE_MANIFEST.name)


def save_lm(d):
    model, info = load_lm()
    save_models({"": changed(model)}, {"training": info["training"]}, d / LM_MODEL.name,
                d / LM_MANIFEST.name)


def save_reverse_runs(d):
    save_runs({**load_runs(), "extra": 1}, d / REVERSE_RUNS.name)


def save_lm_runs(d):
    save_runs({**load_runs(LM_RUNS, LM_MANIFEST), "extra": 1}, d / LM_RUNS.name,
              d / LM_MANIFEST.name)


def check_reverse(d):
    load_reverse_model(d / REVERSE_MODEL.name, d / REVERSE_MANIFEST.name)


def check_lm(d):
    load_lm()


def check_reverse_runs(d):
    assert load_runs(d / REVERSE_RUNS.name, d / REVERSE_MANIFEST.name) == load_runs()


def check_lm_runs(d):
    assert load_runs(d / LM_RUNS.name, d / LM_MANIFEST.name) == load_runs(LM_RUNS, LM_MANIFEST)


SAVES = {  # each save, the committed files it rewrites, the check that they still load
    "save_reverse_model": (save_reverse, [REVERSE_MODEL, REVERSE_MANIFEST], check_reverse),
    "save_models": (save_lm, [LM_MODEL, LM_MANIFEST], check_lm),
    "save_runs": (save_reverse_runs, [REVERSE_RUNS], check_reverse_runs),
    "save_runs with its manifest": (save_lm_runs, [LM_RUNS, LM_MANIFEST], check_lm_runs),
}


@pytest.mark.parametrize("share", [0.0, 0.5, 0.99])
@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   KeyboardInterrupt()], ids=["disk full", "Ctrl-C"])
@pytest.mark.parametrize("save", list(SAVES))
def test_an_interrupted_save_leaves_the_old_files_whole(folder, save, error, share):
    write, paths, check = SAVES[save]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    total = sum(len(p.read_bytes()) for p in paths)  # about what the save writes
    with pytest.MonkeyPatch.context() as patch, pytest.raises(type(error)):
        DiskFull(patch, folder, int(share * total), error)
        write(folder)
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert sorted(after) == sorted(before), "a temporary file was left behind"
    assert [name for name in before if after[name] != before[name]] == []
    check(folder)


@pytest.mark.parametrize("save", list(SAVES))
def test_a_failed_move_leaves_the_old_files_and_no_temporary_file(folder, save):
    write, paths, check = SAVES[save]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def replace(source, target):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    with pytest.MonkeyPatch.context() as patch, pytest.raises(PermissionError):
        patch.setattr(data.os, "replace", replace)
        write(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    check(folder)


@pytest.mark.parametrize("save", list(SAVES))
def test_a_save_that_completes_replaces_the_files(folder, save):
    write, paths, check = SAVES[save]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    write(folder)
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert sorted(after) == sorted(before)
    assert {name for name in before if after[name] != before[name]} == {p.name for p in paths}


# ── load errors name the file and the command ────────────────────────────────────────────────


def truncate(path: Path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte(path: Path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 1
    path.write_bytes(bytes(raw))


def remove(path: Path):
    path.unlink()


def without(key: str, model: str | None = None):
    def edit(path: Path):
        info = json.loads(path.read_text())
        if model is None:
            info.pop(key, None)
            if key == "runs_sha256" and "training" in info:
                info["training"].pop(key, None)
        else:
            del info["models"][model][key]
        path.write_text(json.dumps(info))
    edit.__name__ = f"without {key!r}"
    return edit


def with_matching_digest(damage):
    """`damage` the .npz, then record its new SHA-256 in the manifest: only opening it tells."""
    def edit(path: Path):
        damage(path)
        manifest = path.with_suffix(".json")
        info = json.loads(manifest.read_text())
        info["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest.write_text(json.dumps(info))
    edit.__name__ = f"{damage.__name__}, its digest recorded"
    return edit


def garbage(path: Path):
    path.write_bytes(b"not what the loader reads\n")


def recompressed_and_altered(path: Path):
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[1000] ^= 1
    path.write_bytes(gzip.compress(bytes(raw)))


LOADERS = {
    "load_reverse_model": lambda d: load_reverse_model(d / REVERSE_MODEL.name,
                                                        d / REVERSE_MANIFEST.name),
    "load_runs (reverse)": lambda d: load_runs(d / REVERSE_RUNS.name, d / REVERSE_MANIFEST.name),
    "load_modern_models": lambda d: load_modern_models(),
    "load_runs (modern)": lambda d: load_runs(d / MODERN_RUNS.name, d / MODERN_MANIFEST.name),
    "load_lm": lambda d: load_lm(),
    "load_runs (lm)": lambda d: load_runs(d / LM_RUNS.name, d / LM_MANIFEST.name),
    "load_shakespeare": lambda d: load_shakespeare(d / SHAKESPEARE.name),
}

CASES = [  # loader, the file damaged, how, the command the message must give
    *[("load_reverse_model", f, d, REVERSE)
      for f, d in [(REVERSE_MODEL, remove), (REVERSE_MODEL, truncate), (REVERSE_MODEL, flip_a_byte),
                   (REVERSE_MODEL, with_matching_digest(garbage)),
                   (REVERSE_MODEL, with_matching_digest(truncate)),
                   (REVERSE_MANIFEST, remove), (REVERSE_MANIFEST, truncate),
                   (REVERSE_MANIFEST, without("sha256")), (REVERSE_MANIFEST, without("config"))]],
    *[("load_runs (reverse)", f, d, REVERSE)
      for f, d in [(REVERSE_RUNS, remove), (REVERSE_RUNS, truncate), (REVERSE_RUNS, flip_a_byte),
                   (REVERSE_MANIFEST, truncate), (REVERSE_MANIFEST, without("runs_sha256"))]],
    *[("load_modern_models", f, d, MODERN)
      for f, d in [(MODERN_MODELS, remove), (MODERN_MODELS, truncate),
                   (MODERN_MODELS, with_matching_digest(truncate)),
                   (MODERN_MANIFEST, remove), (MODERN_MANIFEST, truncate),
                   (MODERN_MANIFEST, without("sha256")), (MODERN_MANIFEST, without("models")),
                   (MODERN_MANIFEST, without("kind", "2017")),
                   (MODERN_MANIFEST, without("config", "2017"))]],
    *[("load_runs (modern)", f, d, MODERN)
      for f, d in [(MODERN_RUNS, remove), (MODERN_RUNS, truncate),
                   (MODERN_MANIFEST, without("runs_sha256"))]],
    *[("load_lm", f, d, LM_SAVE)
      for f, d in [(LM_MODEL, remove), (LM_MODEL, truncate), (LM_MODEL, flip_a_byte),
                   (LM_MODEL, with_matching_digest(garbage)), (LM_MANIFEST, remove),
                   (LM_MANIFEST, truncate), (LM_MANIFEST, without("sha256")),
                   (LM_MANIFEST, without("kind", ""))]],
    *[("load_runs (lm)", f, d, c)
      for f, d, c in [(LM_RUNS, remove, LM_RECORD), (LM_RUNS, truncate, LM_RECORD),
                      (LM_RUNS, flip_a_byte, LM_RECORD),
                      (LM_MANIFEST, without("runs_sha256"), LM_RECORD),
                      (LM_MANIFEST, truncate, LM_SAVE)]],
    *[("load_shakespeare", SHAKESPEARE, d, GIT)
      for d in [remove, truncate, flip_a_byte, garbage, recompressed_and_altered]],
]


@pytest.mark.parametrize("loader, path, damage, command", CASES,
                         ids=[f"{c[0]}: {c[1].name} {c[2].__name__}" for c in CASES])
def test_a_load_error_names_the_file_and_the_command(folder, loader, path, damage, command):
    damaged = folder / path.name
    damage(damaged)
    expected = FileNotFoundError if damage is remove else ValueError
    with pytest.raises(expected) as raised:
        LOADERS[loader](folder)
    assert type(raised.value) is expected
    message = str(raised.value)
    assert str(damaged) in message, message
    assert command in message, message


@pytest.mark.parametrize("loader", list(LOADERS))
def test_the_copies_load(folder, loader):
    LOADERS[loader](folder)  # the damage above is what fails, not the copying


def test_a_file_of_data_is_named_as_in_the_repository_with_git_to_restore_it():
    with pytest.raises(FileNotFoundError) as raised:
        load_reverse_model(DATA / "no_such_model.npz")
    assert str(raised.value) == (
        "data/no_such_model.npz: no such file; restore the committed file (git checkout "
        f"data/no_such_model.npz) or regenerate it: {REVERSE}")


def test_without_data_a_missing_file_says_data_is_not_installed(tmp_path, monkeypatch):
    """A wheel installs helpers/ only: data/ is beside helpers/ in a clone of the repository."""
    monkeypatch.setattr(data, "DATA", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match="data/ is not installed with the package.*"
                                                "run from a clone of the repository"):
        load_shakespeare(tmp_path / "data" / SHAKESPEARE.name)


def test_an_npz_holding_a_pickle_is_refused_by_name(tmp_path):
    with open(tmp_path / "m.npz", "wb") as f:
        np.savez(f, W_q=np.array([{"a": 1}], dtype=object))  # pickled: never loaded
    shutil.copy(LM_MANIFEST, tmp_path / "m.json")
    info = json.loads((tmp_path / "m.json").read_text())
    info["sha256"] = sha256(tmp_path / "m.npz")
    (tmp_path / "m.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match=r"m\.npz: not a readable \.npz file .*regenerate it: x"):
        data.load_models(tmp_path / "m.npz", tmp_path / "m.json", "x")
