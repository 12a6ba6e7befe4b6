"""Interrupt saves of a 3.2 MB model (notebook 10's) at random moments and count what is left.

    python benchmarks/interrupted_saves.py                    # this tree's helpers/data.py
    python benchmarks/interrupted_saves.py --source /tmp/old  # another tree's helpers/
    python benchmarks/interrupted_saves.py --signal SIGINT --trials 50

Each trial: a child process saves a pair (m.npz, m.json) with helpers.data.save_models, then
starts a second save of changed weights; this process sends it the signal at a random moment of
that save (uniform over 1.2 times the first save's duration), then reads what is on disk: a
broken .npz or manifest (the old good file lost), a pair whose SHA-256 disagrees (a new manifest
beside the old .npz: refused on load), the old pair or the new one intact, temporary files left.
A tree from before issue 29 (`git archive 1d76f14 helpers | tar -x -C /tmp/old`) wrote in place.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(source: str, folder: Path) -> None:
    sys.path.insert(0, source)
    from helpers.data import save_models
    from helpers.lm import lm_model

    model = lm_model()
    start = time.perf_counter()
    save_models({"": model}, {"n": 1}, folder / "m.npz", folder / "m.json")
    print(f"saved {time.perf_counter() - start:.6f}", flush=True)
    for p in model.parameters().values():
        p += 1
    print("saving", flush=True)
    save_models({"": model}, {"n": 2}, folder / "m.npz", folder / "m.json")
    print("done", flush=True)
    time.sleep(60)


def trial(source: str, kill: signal.Signals, rng: random.Random) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        proc = subprocess.Popen([sys.executable, __file__, "--child", source, tmp],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        duration = float(proc.stdout.readline().split()[1])
        assert proc.stdout.readline().strip() == "saving"
        time.sleep(rng.uniform(0, 1.2 * duration))
        os.kill(proc.pid, kill)
        proc.wait()
        found = {"finished before the signal": "done" in proc.stdout.read()}
        try:
            with zipfile.ZipFile(folder / "m.npz") as archive:
                npz = archive.testzip() is None
        except Exception:  # noqa: BLE001 - any failure to read is a broken file
            npz = False
        try:
            info = json.loads((folder / "m.json").read_text())
        except Exception:  # noqa: BLE001
            info = None
        found["broken .npz"], found["broken manifest"] = not npz, info is None
        if npz and info is not None:
            digest = hashlib.sha256((folder / "m.npz").read_bytes()).hexdigest()
            kind = ("pair that disagrees" if digest != info["sha256"]
                    else "old pair" if info["n"] == 1 else "new pair")
            found[kind] = True
        found["temporary files left"] = any(p.name not in ("m.npz", "m.json")
                                            for p in folder.iterdir())
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(ROOT), help="the folder that holds helpers/")
    parser.add_argument("--signal", default="SIGKILL", choices=["SIGKILL", "SIGINT", "SIGTERM"])
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    kill, rng, counts = getattr(signal, args.signal), random.Random(0), {}
    for _ in range(args.trials):
        for name, happened in trial(args.source, kill, rng).items():
            counts[name] = counts.get(name, 0) + happened
    broken = counts.get("broken .npz", 0) + counts.get("broken manifest", 0)
    print(f"{args.source}: {args.trials} saves interrupted by {args.signal}: {broken} broken files")
    for name in ("broken .npz", "broken manifest", "pair that disagrees", "old pair", "new pair",
                 "temporary files left", "finished before the signal"):
        print(f"   {name:28s} {counts.get(name, 0):4d}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
