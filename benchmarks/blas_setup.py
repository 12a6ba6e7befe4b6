"""The BLAS settings a benchmark makes before NumPy loads: import this module, call one of its
functions, then import NumPy (OpenBLAS reads its settings only when it loads).

one_thread_record_kernel: one OpenBLAS thread per process (the runs go to worker processes, one
per core) and, on x86-64 with AVX2, OpenBLAS's Haswell kernel. The records of data/ were made with
it, which a CPU with AVX2 but not AVX-512 picks; an AVX-512 CPU picks another, whose rounding
training amplifies (the curves part about 160 steps in). Forcing it keeps reruns bit for bit the
record's on any x86-64 CPU with AVX2 (with the same NumPy and OpenBLAS build).

threads_from_command_line: the script's `--threads N` (or `--threads=N`) as OPENBLAS_NUM_THREADS;
when that changes the environment, the script starts again with it.
"""

import os
import platform
import sys
from pathlib import Path


def has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def one_thread_record_kernel() -> None:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if platform.machine() in ("x86_64", "AMD64") and has_avx2():
        os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")


def threads_from_command_line(default: str) -> None:
    threads = default
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            threads = sys.argv[i + 1]
        elif arg.startswith("--threads="):
            threads = arg.split("=", 1)[1]
    if os.environ.get("OPENBLAS_NUM_THREADS") != threads:
        os.environ["OPENBLAS_NUM_THREADS"] = threads
        os.execv(sys.executable, [sys.executable, *sys.argv])
