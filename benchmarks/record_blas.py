"""The BLAS settings of the recorded training runs; a benchmark imports this before NumPy loads.

One OpenBLAS thread per process (the runs go to worker processes, one per core). On x86-64 with
AVX2, OpenBLAS's Haswell kernel: the records of data/ were made with it, which a CPU with AVX2 but
not AVX-512 picks; an AVX-512 CPU picks another, whose rounding training amplifies (the curves
part about 160 steps in). Forcing it keeps reruns bit for bit the record's on any x86-64 CPU with
AVX2 (with the same NumPy and OpenBLAS build).
"""

import os
import platform
from pathlib import Path


def has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


os.environ["OPENBLAS_NUM_THREADS"] = "1"
if platform.machine() in ("x86_64", "AMD64") and has_avx2():
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
