"""What attention costs on this machine: speed against BLAS, memory of the n x n scores, RNN.

    python benchmarks/attention_cost.py            # full run (a few minutes, ~3.5 GB at n = 16384)
    python benchmarks/attention_cost.py --quick    # small sizes only (seconds)

Runs with ONE BLAS thread (it re-executes itself with OPENBLAS_NUM_THREADS=1 unless that variable
is already set, so `OPENBLAS_NUM_THREADS=2 python benchmarks/attention_cost.py` measures two).
Prints three tables (notebook 08 explains them):

1. attention GFLOP/s as a fraction of this machine's float32 matmul GFLOP/s (target >= 50%);
2. peak memory (tracemalloc, which sees NumPy's allocations) and time of plain attention, plain
   attention with an in-place softmax, and online (blocked) attention, one head, d_k = 64;
3. a tanh RNN (hidden 512, batch 8) against one self-attention layer (d_model 512, 8 heads):
   time, floating-point operations and the length of the chain of dependent steps.

4. against PyTorch's fused torch.nn.functional.scaled_dot_product_attention (one thread), when
   PyTorch is installed (`pip install -r requirements-bench.txt`): the ratio of the times of
   scaled_dot_product_attention, of the in-place version and of the matrix products alone.

Times are the best of --repeats runs. This is a benchmark that prints figures, not a timed test.
"""

from __future__ import annotations

import os
import sys

if "OPENBLAS_NUM_THREADS" not in os.environ:  # must be decided before NumPy is imported
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from helpers.transformer import (  # noqa: E402
    MultiHeadAttention,
    online_attention,
    scaled_dot_product_attention,
)

D_K = 64
ATTENTION_STEPS = 5  # projections, scores, softmax, weighted sum, output projection


def best_time(fn, repeats, *args):
    """Best wall time of `repeats` calls fn(*args), in seconds (the least disturbed run)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def peak_bytes(fn, *args):
    """Peak traced memory while fn(*args) runs, in bytes (NumPy reports arrays to tracemalloc)."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def attention_inplace(Q, K, V):
    """Plain attention whose softmax reuses the scores' memory: one (T_q, T_k) array at a time."""
    scores = Q @ K.swapaxes(-1, -2)  # (..., T_q, T_k), the only big array
    scores /= np.sqrt(Q.shape[-1], dtype=Q.dtype)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores @ V  # (..., T_q, d_v)


def matmuls_only(Q, K, V, S):
    """The two matrix products of attention alone (S: precomputed weights): the ceiling."""
    return Q @ K.swapaxes(-1, -2), S @ V


def online_256(Q, K, V):
    return online_attention(Q, K, V, block_size=256)


def rnn_forward(X, W_x, W_h, b):
    """h_t = tanh(x_t W_x + h_{t-1} W_h + b) over X (B, n, d_in); returns the last h (B, H)."""
    XW = X @ W_x + b  # (B, n, H): the inputs' share has no dependency, one matrix product
    h = np.zeros((X.shape[0], W_h.shape[0]), dtype=X.dtype)
    for t in range(X.shape[1]):  # the chain: step t needs step t - 1
        h = np.tanh(XW[:, t] + h @ W_h)
    return h


def rnn_flops(B, n, d_in, H):
    return 2 * B * n * d_in * H + 2 * B * n * H * H  # x W_x and h W_h (matrix products)


def self_attention_flops(B, n, d_model):
    return 8 * B * n * d_model**2 + 4 * B * n**2 * d_model  # 4 projections + QK^T + AV


def machine_info():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem = float("nan")
    return (f"{datetime.date.today().isoformat()} · {cpu} · {os.cpu_count()} cores · "
            f"{mem:.1f} GiB · Python {platform.python_version()} · NumPy {np.__version__} · "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")


def table_throughput(rng, repeats, lengths):
    n = 1024
    A, Bm = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    matmul = 2 * n**3 / best_time(np.matmul, repeats, A, Bm) / 1e9
    print(f"\n1 · Attention GFLOP/s against this machine's matmul (float32, batch 8 x 8 heads, "
          f"d_k {D_K})")
    print(f"   matmul {n} x {n} @ {n} x {n}: {matmul:.1f} GFLOP/s (= 100%)")
    print(f"   {'T':>5s} {'version':24s} {'ms':>8s} {'GFLOP/s':>8s} {'of matmul':>10s}")
    for T in lengths:
        Q, K, V = (rng.standard_normal((8, 8, T, D_K)).astype(np.float32) for _ in range(3))
        flops = 4 * 64 * T * T * D_K  # Q K^T and weights @ V
        S = Q @ K.swapaxes(-1, -2)  # (8, 8, T, T)
        versions = {
            "its 2 matmuls alone": (matmuls_only, (Q, K, V, S)),
            "scaled_dot_product_att.": (scaled_dot_product_attention, (Q, K, V)),
            "in-place softmax": (attention_inplace, (Q, K, V)),
            "online, blocks of 256": (online_256, (Q, K, V)),
        }
        for name, (fn, fn_args) in versions.items():
            t = best_time(fn, repeats, *fn_args)
            rate = flops / t / 1e9
            print(f"   {T:5d} {name:24s} {t * 1e3:8.2f} {rate:8.1f} {rate / matmul:9.0%}")


def table_memory(rng, repeats, lengths, block):
    print(f"\n2 · Memory: one head, d_k {D_K}, float32; peak traced memory and best time")
    print(f"   {'n':>6s} {'scores MB':>9s} | {'plain MB':>9s} {'s':>6s} | {'in-place MB':>11s} "
          f"{'s':>6s} | {f'online/{block} MB':>14s} {'s':>6s} {'vs plain':>8s}")
    for n in lengths:
        Q, K, V = (rng.standard_normal((n, D_K)).astype(np.float32) for _ in range(3))
        row = []
        for fn, fn_args in ((scaled_dot_product_attention, (Q, K, V)),
                            (attention_inplace, (Q, K, V)),
                            (online_attention, (Q, K, V, None, block))):
            row.append((peak_bytes(fn, *fn_args) / 1e6, best_time(fn, repeats, *fn_args)))
        (mp, tp), (mi, ti), (mo, to) = row
        print(f"   {n:6d} {n * n * 4 / 1e6:9.1f} | {mp:9.1f} {tp:6.2f} | {mi:11.1f} {ti:6.2f} | "
              f"{mo:14.1f} {to:6.2f} {to / tp:7.2f}x")


def table_rnn(rng, repeats, lengths, B=8, H=512, n_heads=8):
    print(f"\n3 · tanh RNN (hidden {H}, batch {B}) vs one self-attention layer (d_model {H}, "
          f"{n_heads} heads), float32")
    print(f"   {'n':>5s} {'RNN ms':>8s} {'attn ms':>8s} {'RNN GFLOP':>9s} {'attn GFLOP':>10s} "
          f"{'flop ratio':>10s} {'RNN chain':>9s} {'attn chain':>10s} {'faster':>7s}")
    W_x, W_h = (rng.normal(0, H**-0.5, (H, H)).astype(np.float32) for _ in range(2))
    b = np.zeros(H, np.float32)
    mha = MultiHeadAttention(H, n_heads, rng, dtype=np.float32)
    for n in lengths:
        X = rng.standard_normal((B, n, H)).astype(np.float32)
        t_rnn = best_time(rnn_forward, repeats, X, W_x, W_h, b)
        t_att = best_time(mha.forward, repeats, X, X, X)
        f_rnn, f_att = rnn_flops(B, n, H, H), self_attention_flops(B, n, H)
        print(f"   {n:5d} {t_rnn * 1e3:8.1f} {t_att * 1e3:8.1f} {f_rnn / 1e9:9.2f} "
              f"{f_att / 1e9:10.2f} {f_att / f_rnn:9.2f}x {n:9d} {ATTENTION_STEPS:10d} "
              f"{'RNN' if t_rnn < t_att else 'attn':>7s}")


def table_torch(rng, repeats, shapes):
    try:
        import torch
    except ImportError:
        print("\n4 · PyTorch is not installed: `.venv/bin/python -m pip install -r "
              "requirements-bench.txt` adds the comparison with its fused attention")
        return
    torch.set_num_threads(1)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(f"\n4 · Against PyTorch {torch.__version__}'s fused scaled_dot_product_attention "
          f"(float32, one thread, {torch.get_num_threads()} torch thread): best times, ratio = "
          "NumPy / PyTorch")
    print(f"   {'shape (B, h, T, d_k)':22s} {'PyTorch ms':>10s} {'ours ms':>8s} {'ratio':>6s} "
          f"{'in-place ms':>11s} {'ratio':>6s} {'2 matmuls ms':>12s} {'ratio':>6s}")
    for shape in shapes:
        Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
        tQ, tK, tV = (torch.from_numpy(a) for a in (Q, K, V))
        ours, theirs = scaled_dot_product_attention(Q, K, V)[0], sdpa(tQ, tK, tV).numpy()
        assert np.allclose(ours, theirs, atol=1e-5), "the two disagree"
        S = np.empty((*shape[:-1], shape[-2]), dtype=np.float32)

        def matmuls(Q, K, V, S=S):  # into a preallocated S: the products alone
            np.matmul(Q, K.swapaxes(-1, -2), out=S)
            return S @ V

        t_torch = best_time(sdpa, repeats, tQ, tK, tV)
        versions = (lambda *a: scaled_dot_product_attention(*a)[0], attention_inplace, matmuls)
        row = [best_time(fn, repeats, Q, K, V) for fn in versions]
        print(f"   {str(shape):22s} {t_torch * 1e3:10.2f} " + " ".join(
            f"{t * 1e3:{w}.2f} {t / t_torch:6.2f}" for t, w in zip(row, (8, 11, 12))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (seconds)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per timing (best kept)")
    parser.add_argument("--block", type=int, default=256, help="key block of online attention")
    args = parser.parse_args()
    repeats = args.repeats or (2 if args.quick else 3)
    rng = np.random.default_rng(0)
    print(machine_info())
    table_throughput(rng, repeats, [128] if args.quick else [128, 1024])
    table_memory(rng, repeats, [1024, 2048, 4096] if args.quick else [4096, 8192, 16384],
                 args.block)
    table_rnn(rng, repeats, [64, 128, 256] if args.quick else [64, 128, 256, 512, 1024, 2048])
    table_torch(rng, max(repeats, 5), [(8, 8, 128, 64), (1, 8, 1024, 64)])


if __name__ == "__main__":
    main()
