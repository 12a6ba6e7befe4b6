"""Independent references and helpers that several test files share, written once.

The references compute what the model computes in the most obvious way (loops, the math module,
one head at a time), so that a test comparing the two can catch a mistake in either.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def loop_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V with plain loops and the math module, for any batch axes.

    A query whose keys are all blocked gets zero weights and a zero output (the documented
    choice). Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    *batch, T_q, d_k = Q.shape
    T_k = K.shape[-2]
    if mask is not None:
        mask = np.broadcast_to(mask, (*batch, T_q, T_k))
    out = np.zeros((*batch, T_q, V.shape[-1]))
    w = np.zeros((*batch, T_q, T_k))
    for idx in itertools.product(*(range(n) for n in batch)):
        for i in range(T_q):
            s = [float(Q[idx][i] @ K[idx][j]) / math.sqrt(d_k) for j in range(T_k)]
            allowed = [mask is None or not mask[idx][i][j] for j in range(T_k)]
            if not any(allowed):
                continue
            m = max(x for x, a in zip(s, allowed) if a)
            e = [math.exp(x - m) if a else 0.0 for x, a in zip(s, allowed)]
            total = sum(e)
            for j in range(T_k):
                w[idx][i, j] = e[j] / total
                out[idx][i] += w[idx][i, j] * V[idx][j]
    return out, w


def loop_mha(layer, query, key, value, mask=None):
    """Multi-head attention as a loop of single-head loop_attentions on column slices of the
    weights: nothing of the model's own attention is used."""
    outs = []
    for i in range(layer.n_heads):
        c = slice(i * layer.d_k, (i + 1) * layer.d_k)
        outs.append(loop_attention(
            query @ layer.W_q[:, c] + layer.b_q[c], key @ layer.W_k[:, c] + layer.b_k[c],
            value @ layer.W_v[:, c] + layer.b_v[c], mask)[0])  # the loops above, per head
    return np.concatenate(outs, axis=-1) @ layer.W_o + layer.b_o


def randomise(module, rng, scale=0.3):
    """Move every parameter of `module` off its initial value (in place) and return the module:
    biases, gamma and beta too, so that no term is trivially 0 or 1 and "output = b_o" or a zero
    gradient cannot pass by accident."""
    for p in module.parameters().values():
        p += rng.normal(0.0, scale, p.shape).astype(p.dtype)
    return module


def input_gradient_error(forward, backward, x, rng):
    """max |analytic - central difference| of d(sum(forward(x) * R))/dx over every entry of x,
    for a random R; backward(R) returns the analytic gradient."""
    weights = rng.standard_normal(forward(x).shape)
    analytic = backward(weights)
    numeric, eps = np.zeros_like(x), 1e-6
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = float((forward(x) * weights).sum())
        x[idx] = old - eps
        down = float((forward(x) * weights).sum())
        x[idx] = old
        numeric[idx] = (up - down) / (2 * eps)
    return float(np.abs(analytic - numeric).max())


def rotated(a, d):
    """a (T, d): position t's pairs (a[2i], a[2i+1]) turned by t / 10000^(2i/d), with explicit
    2 x 2 rotations, math.cos and math.sin."""
    out = np.empty_like(a)
    for t in range(a.shape[0]):
        for i in range(d // 2):
            angle = t / 10000.0 ** (2 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            out[t, 2 * i] = c * a[t, 2 * i] - s * a[t, 2 * i + 1]
            out[t, 2 * i + 1] = s * a[t, 2 * i] + c * a[t, 2 * i + 1]
    return out


def loop_gqa(layer, x, mask=None):
    """Grouped-query self-attention with RoPE as loops: query head i reads key/value head
    i // (h / g), each head computed by loop_attention; the rotation by explicit 2 x 2 matrices
    on each pair (x[2i], x[2i+1]) at each position (rotated)."""
    h, g, d_k = layer.n_heads, layer.n_kv_heads, layer.d_k

    def turned(a):  # a (T, d_k)
        return rotated(a, d_k) if layer.rotary else a

    heads = []
    for i in range(h):
        q_cols = slice(i * d_k, (i + 1) * d_k)
        j = i // (h // g)  # the key/value head this query head shares
        kv_cols = slice(j * d_k, (j + 1) * d_k)
        per_sequence = []
        for b in range(x.shape[0]):
            q = turned(x[b] @ layer.W_q[:, q_cols] + layer.b_q[q_cols])
            k = turned(x[b] @ layer.W_k[:, kv_cols] + layer.b_k[kv_cols])
            v = x[b] @ layer.W_v[:, kv_cols] + layer.b_v[kv_cols]
            per_sequence.append(loop_attention(q, k, v, mask)[0])
        heads.append(np.stack(per_sequence))
    return np.concatenate(heads, axis=-1) @ layer.W_o + layer.b_o
