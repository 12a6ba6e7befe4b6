"""Paths into data/ and small loaders. Nothing here unpickles: arrays load with allow_pickle=False.

The trained reversal model (notebook 07) is ``data/reverse_model.npz``, one array per parameter
under the dotted names of ``Transformer.parameters()``; ``data/reverse_model.json`` records the
model's configuration, how it was trained, the SHA-256 of the .npz and every array's shape.
``data/reverse_runs.json`` holds the training curves of seeds 0-4 (notebook 07's recipe, the
paper's schedule, the warm-up study); the manifest holds its SHA-256.
``python benchmarks/train_reverse.py --seeds 0 1 2 3 4 --save`` regenerates all three, bit for bit
with the same NumPy and BLAS build.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from helpers.transformer import Transformer, TransformerConfig

DATA = Path(__file__).resolve().parents[1] / "data"
REVERSE_MODEL = DATA / "reverse_model.npz"
REVERSE_MANIFEST = DATA / "reverse_model.json"
REVERSE_RUNS = DATA / "reverse_runs.json"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_reverse_model(path: Path = REVERSE_MODEL, manifest: Path = REVERSE_MANIFEST):
    """The trained reversal Transformer and its manifest (a dict), after integrity checks.

    Raises ValueError if the file's SHA-256 differs from the manifest's, or if the arrays'
    names, shapes or dtype differ from what the manifest's configuration builds.
    """
    info = json.loads(Path(manifest).read_text(encoding="utf-8"))
    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != info["sha256"]:
        raise ValueError(f"{Path(path).name}: SHA-256 {digest[:16]}... differs from the "
                         f"manifest's {info['sha256'][:16]}...; the file is corrupted or stale "
                         "(regenerate: python benchmarks/train_reverse.py --seeds 0 1 2 3 4 "
                         "--save)")
    with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    config = TransformerConfig(**info["config"])
    dtype = np.dtype(config.dtype)
    model = Transformer.from_config(config, np.random.default_rng(0))
    expected = {name: p.shape for name, p in model.parameters().items()}
    found = {name: a.shape for name, a in arrays.items()}
    if found != expected or any(a.dtype != dtype for a in arrays.values()):
        raise ValueError(f"{Path(path).name}: arrays do not match the configuration: expected "
                         f"{len(expected)} {dtype} arrays named like Transformer.parameters(), "
                         f"got {len(found)} ({sorted(set(found) ^ set(expected))[:4]} differ)")
    model.load_parameters(arrays)
    return model, info


def save_reverse_model(model, training: dict, path: Path = REVERSE_MODEL,
                       manifest: Path = REVERSE_MANIFEST) -> str:
    """Write the parameters (.npz, no pickle) and the manifest (with model.config, the sizes
    the model was built with, minus the defaults); return the SHA-256."""
    defaults = TransformerConfig(model.config.src_vocab, model.config.tgt_vocab)
    config = {name: value for name, value in asdict(model.config).items()
              if name in ("src_vocab", "tgt_vocab") or value != getattr(defaults, name)}
    np.savez(path, **model.parameters())
    digest = sha256(path)
    info = {
        "file": Path(path).name,
        "sha256": digest,
        "config": config,
        "training": training,
        "arrays": {name: list(p.shape) for name, p in model.parameters().items()},
    }
    Path(manifest).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return digest


def save_runs(record: dict, path: Path = REVERSE_RUNS) -> str:
    """Write the recorded training curves as JSON; return the SHA-256 (the manifest keeps it)."""
    Path(path).write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    return sha256(path)


def load_runs(path: Path = REVERSE_RUNS, manifest: Path = REVERSE_MANIFEST) -> dict:
    """The recorded training curves (benchmarks/train_reverse.py --save), SHA-256 checked."""
    expected = json.loads(Path(manifest).read_text(encoding="utf-8"))["training"]["runs_sha256"]
    digest = sha256(path)
    if digest != expected:
        raise ValueError(f"{Path(path).name}: SHA-256 {digest[:16]}... differs from the "
                         f"manifest's {expected[:16]}...; the file is corrupted or stale")
    return json.loads(Path(path).read_text(encoding="utf-8"))
