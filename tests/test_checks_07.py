"""Notebook 07's exercises got wrong the way learners get them wrong: one function per mistake.

Written independently of helpers/checks/training.py (its models of the same mistakes): loops,
explicit Jacobians, other spellings, another order of operations. tests/test_checks.py asserts
that the checker names exactly the mistake each one makes.
"""

import copy

import numpy as np

from helpers import checks

# ── 07.1 · softmax backward ───────────────────────────────────────────────────────────────────


def _rows(p):  # every row index of an array whose last axis is the softmax's
    return list(np.ndindex(p.shape[:-1]))


def softmax_backward_no_correction_term(p, d_p):
    return np.multiply(d_p, p)  # "the derivative of exp is exp"


def softmax_backward_diagonal_only(p, d_p):
    d_x = np.empty_like(p)
    for r in _rows(p):
        jacobian_diagonal = p[r] - p[r] ** 2  # dp_i/dx_i, and nothing else
        d_x[r] = jacobian_diagonal * d_p[r]
    return d_x


def softmax_backward_sum_over_axis_0(p, d_p):
    total = np.add.reduce(d_p * p, axis=0)  # "sum over the keys": the first axis, wrongly
    return p * d_p - p * total


def softmax_backward_axis_1_hard_coded(p, d_p):
    row_sums = np.expand_dims((d_p * p).sum(axis=1), 1)  # "axis 1 is the keys"
    return p * (d_p - row_sums)


def softmax_backward_no_keepdims(p, d_p):
    dot = np.einsum("...j,...j->...", d_p, p)  # one number per row, shape (...,)
    return p * d_p - p * dot


def softmax_backward_sum_over_everything(p, d_p):
    return p * (d_p - (d_p * p).sum())


def softmax_backward_outer_p_missing(p, d_p):
    d_x = np.empty_like(p)
    for r in _rows(p):
        d_x[r] = d_p[r] - np.dot(d_p[r], p[r])
    return d_x


# ── 07.2 · LayerNorm backward ─────────────────────────────────────────────────────────────────


def _params(d_out, x_hat):
    axes = tuple(range(d_out.ndim - 1))
    return np.sum(d_out * x_hat, axis=axes), np.sum(d_out, axis=axes)


def ln_backward_no_mean_terms(d_out, x_hat, std, gamma):
    return (gamma * d_out / std, *_params(d_out, x_hat))  # "d x_hat / d x = 1 / std"


def ln_backward_no_mean_g_term(d_out, x_hat, std, gamma):
    n = x_hat.shape[-1]
    g = gamma * d_out
    proj = np.sum(g * x_hat, axis=-1, keepdims=True) / n
    return ((g - proj * x_hat) / std, *_params(d_out, x_hat))


def ln_backward_no_x_hat_term(d_out, x_hat, std, gamma):
    g = gamma * d_out
    centred = g - np.mean(g, axis=-1)[..., None]
    return (centred / std, *_params(d_out, x_hat))


def ln_backward_gamma_forgotten(d_out, x_hat, std, gamma):
    n = d_out.shape[-1]
    a = d_out.sum(-1, keepdims=True)
    b = (d_out * x_hat).sum(-1, keepdims=True)
    return ((n * d_out - a - x_hat * b) / (n * std), *_params(d_out, x_hat))


def ln_backward_sum_not_mean(d_out, x_hat, std, gamma):
    g = d_out * gamma
    d_x = (g - g.sum(-1, keepdims=True) - x_hat * (g * x_hat).sum(-1, keepdims=True)) / std
    return (d_x, *_params(d_out, x_hat))


def ln_backward_means_over_axis_0(d_out, x_hat, std, gamma):
    g = gamma * d_out
    n = g.shape[0]  # "the mean over the rows"
    mean_g = g.sum(axis=0, keepdims=True) / n
    mean_gx = (g * x_hat).sum(axis=0, keepdims=True) / n
    return ((g - mean_g - x_hat * mean_gx) / std, *_params(d_out, x_hat))


def ln_backward_means_axis_1_hard_coded(d_out, x_hat, std, gamma):
    g = d_out * gamma
    d_x = g - np.average(g, axis=1)[:, None] - x_hat * np.average(g * x_hat, axis=1)[:, None]
    return (d_x / std, *_params(d_out, x_hat))


def _good_d_x(d_out, x_hat, std, gamma):  # a right d_x, written as the Jacobian, row by row
    n = x_hat.shape[-1]
    d_x = np.empty_like(d_out)
    for r in np.ndindex(d_out.shape[:-1]):
        jac = (np.eye(n) - 1 / n - np.outer(x_hat[r], x_hat[r]) / n) / std[r]  # dx_hat / dx
        d_x[r] = jac.T @ (gamma * d_out[r])
    return d_x


def ln_backward_d_gamma_without_x_hat(d_out, x_hat, std, gamma):
    d_beta = d_out.reshape(-1, d_out.shape[-1]).sum(0)
    return _good_d_x(d_out, x_hat, std, gamma), d_beta.copy(), d_beta


def ln_backward_params_summed_over_axis_0(d_out, x_hat, std, gamma):
    d_gamma = np.sum(x_hat * d_out, axis=0)
    d_beta = np.sum(d_out, axis=0)
    return _good_d_x(d_out, x_hat, std, gamma), d_gamma, d_beta


# ── 07.3 · the warm-up schedule ───────────────────────────────────────────────────────────────


def lrate_warmup_power_1(step, d_model, warmup):
    step = np.asarray(step, dtype=float)
    return np.minimum(1 / np.sqrt(step), step / warmup) / np.sqrt(d_model)


def lrate_no_d_model_factor(step, d_model, warmup):
    step = np.asarray(step, dtype=float)
    return np.minimum(step ** -0.5, step * warmup ** -1.5)


def lrate_max_not_min(step, d_model, warmup):
    step = np.asarray(step, dtype=float)
    return np.fmax(step ** -0.5, step / warmup ** 1.5) / np.sqrt(d_model)


def lrate_one_step_ahead(step, d_model, warmup):
    s = np.asarray(step, dtype=float) + 1  # "step 0 is the first step"
    return d_model ** -0.5 * np.minimum(s ** -0.5, s * warmup ** -1.5)


def lrate_power_precedence(step, d_model, warmup):
    step = np.asarray(step, dtype=float)
    return d_model ** -1/2 * np.minimum(step ** -1/2, step * warmup ** -3/2)


def lrate_python_min_on_arrays(step, d_model, warmup):
    decay, rise = 1 / np.sqrt(step), step / warmup ** 1.5
    return max(0.0, min(decay, rise)) / np.sqrt(d_model)  # Python's min and max: one number


# ── 07.4 · one Adam step ──────────────────────────────────────────────────────────────────────


def adam_no_bias_correction(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g ** 2
    return p - lr * m / (np.sqrt(v) + eps), m, v


def adam_eps_inside_sqrt(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = m * beta1 + g * (1 - beta1)
    v = v * beta2 + np.square(g) * (1 - beta2)
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return p - lr * m_hat / np.sqrt(v_hat + eps), m, v


def adam_v_from_g(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m_new = beta1 * m + (1 - beta1) * g
    v_new = beta2 * v + (1 - beta2) * g
    step = (m_new / (1 - beta1 ** t)) / (np.sqrt(v_new / (1 - beta2 ** t)) + eps)
    return p - lr * step, m_new, v_new


def adam_bias_correction_t_minus_1(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    k = t - 1
    return p - lr * (m / (1 - beta1 ** k)) / (np.sqrt(v / (1 - beta2 ** k)) + eps), m, v


def adam_bias_correction_t_plus_1(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - np.power(beta1, t + 1))  # "t counts from 0"
    v_hat = v / (1 - np.power(beta2, t + 1))
    return p - lr * m_hat / (v_hat ** 0.5 + eps), m, v


def adam_betas_swapped(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = (1 - beta1) * m + beta1 * g
    v = (1 - beta2) * v + beta2 * g * g
    return p - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps), m, v


def adam_efficient_form(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    step_size = lr * (1 - beta2 ** t) ** 0.5 / (1 - beta1 ** t)  # Kingma & Ba's last line
    return p - step_size * m / (v ** 0.5 + eps), m, v


def adam_no_eps(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * np.square(g)
    return p - lr * (m / (1 - beta1 ** t)) / np.sqrt(v / (1 - beta2 ** t)), m, v


def adam_no_sqrt(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return p - lr * (m / (1 - beta1 ** t)) / (v / (1 - beta2 ** t) + eps), m, v


def adam_old_state_returned(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m_t = beta1 * m + (1 - beta1) * g
    v_t = beta2 * v + (1 - beta2) * g * g
    p_t = p - lr * (m_t / (1 - beta1 ** t)) / (np.sqrt(v_t / (1 - beta2 ** t)) + eps)
    return p_t, m, v


def adam_stores_corrected_averages(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    m = (beta1 * m + (1 - beta1) * g) / (1 - beta1**t)  # "corrected once, kept corrected"
    v = (beta2 * v + (1 - beta2) * g**2) / (1 - beta2**t)
    return p - lr * m / (np.sqrt(v) + eps), m, v


def adam_ignores_beta_arguments(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    b1, b2, e = 0.9, 0.98, 1e-9  # the paper's values, always
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + e), m, v


# ── 07.5 · gradient_error ─────────────────────────────────────────────────────────────────────


def _central(f, x, eps=1e-6):  # on a copy of x each time, with a one-hot step
    n = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = eps
        n[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return n


def _norm(a):
    return float(np.sqrt(np.sum(np.square(a))))


def gradient_check_one_sided(f, x, g):
    n = np.zeros(x.shape)
    base = f(x)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = 1e-6
        n[i] = (f(x + step) - base) / 1e-6  # "the definition of the derivative"
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_not_restored(f, x, g):
    n, flat = np.zeros(x.size), x.reshape(-1)  # a view: x changes too
    for j in range(x.size):
        flat[j] += 1e-6
        plus = f(x)
        flat[j] -= 2e-6  # and never put back
        n[j] = (plus - f(x)) / 2e-6
    n = n.reshape(x.shape)
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_over_analytic_norm(f, x, g):
    n = _central(f, x)
    return np.linalg.norm(g - n) / np.linalg.norm(g)  # "relative to the gradient checked"


def gradient_check_not_relative(f, x, g):
    return _norm(g - _central(f, x))


def gradient_check_step_too_large(f, x, g):
    n = _central(f, x, eps=0.01)  # "a bigger step is more accurate"
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_step_too_small(f, x, g):
    n = _central(f, x, eps=1e-12)  # "the smaller the step, the closer to the limit"
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_all_entries_at_once(f, x, g, eps=1e-6):
    n = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        n[i] = (f(x + eps) - f(x - eps)) / (2 * eps)  # x + eps: every entry moves, not x[i]
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_first_axis_only(f, x, g, eps=1e-6):
    n = np.zeros_like(x)
    for i in range(len(x)):  # fine for a vector
        x_plus, x_minus = x.copy(), x.copy()
        x_plus[i] += eps
        x_minus[i] -= eps
        n[i] = (f(x_plus) - f(x_minus)) / (2 * eps)
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_no_factor_2(f, x, g):
    n = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = 1e-6
        n[i] = (f(x + step) - f(x - step)) / 1e-6  # "divide by the step"
    return _norm(g - n) / (_norm(g) + _norm(n))


def gradient_check_max_denominator(f, x, g):
    n = _central(f, x)
    return _norm(g - n) / max(_norm(g), _norm(n))  # "relative to the larger of the two"


# ── 07.6 · RMSNorm backward ───────────────────────────────────────────────────────────────────


def _rms(x, eps):
    return np.sqrt(np.square(x).mean(axis=-1, keepdims=True) + eps)


def _d_gamma(d_out, x_hat):
    return (d_out * x_hat).reshape(-1, x_hat.shape[-1]).sum(axis=0)


def rms_backward_layer_norm_mean_term(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    x_hat, g = x / r, gamma * d_out  # "LayerNorm's rule, with x_hat = x / rms"
    d_x = (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)) / r
    return d_x, _d_gamma(d_out, x_hat)


def rms_backward_rms_held_constant(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    return gamma * d_out / r, _d_gamma(d_out, x / r)  # "y = gamma * x / rms: divide by rms"


def rms_backward_not_divided_by_rms(d_out, x, gamma, eps=1e-5):
    x_hat = x / _rms(x, eps)
    g = d_out * gamma
    return g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True), _d_gamma(d_out, x_hat)


def rms_backward_eps_outside_root(d_out, x, gamma, eps=1e-5):
    n = x.shape[-1]
    r = np.linalg.norm(x, axis=-1, keepdims=True) / np.sqrt(n) + eps
    g = gamma * d_out
    d_x = g / r - x * np.sum(g * x, axis=-1, keepdims=True) / (n * r**3)
    return d_x, _d_gamma(d_out, x / r)


def rms_backward_no_eps(d_out, x, gamma, eps=1e-5):
    n = x.shape[-1]
    d_x, d_gamma = np.empty_like(x), np.zeros(n)
    for i in np.ndindex(x.shape[:-1]):
        r = np.sqrt(x[i] @ x[i] / n)  # "eps only guards against 0"
        jac = (np.eye(n) - np.outer(x[i], x[i]) / (n * r**2)) / r
        d_x[i] = jac.T @ (gamma * d_out[i])
        d_gamma += d_out[i] * x[i] / r
    return d_x, d_gamma


def rms_backward_eps_argument_ignored(d_out, x, gamma, eps=1e-5):
    r = _rms(x, 1e-5)  # "Llama's eps"
    x_hat, g = x / r, d_out * gamma
    return (g - x_hat * (g * x_hat).mean(-1, keepdims=True)) / r, _d_gamma(d_out, x_hat)


def rms_backward_gamma_forgotten(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    x_hat = x / r
    return (d_out - x_hat * (d_out * x_hat).mean(-1, keepdims=True)) / r, _d_gamma(d_out, x_hat)


def rms_backward_sum_not_mean(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    x_hat, g = x / r, d_out * gamma
    return (g - x_hat * np.sum(g * x_hat, axis=-1, keepdims=True)) / r, _d_gamma(d_out, x_hat)


def rms_backward_x_not_x_hat_in_correction(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    g = d_out * gamma
    return (g - x * (g * x).mean(-1, keepdims=True)) / r, _d_gamma(d_out, x / r)


def rms_backward_d_gamma_from_x(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    x_hat, g = x / r, d_out * gamma
    d_x = (g - x_hat * (g * x_hat).mean(-1, keepdims=True)) / r
    return d_x, np.sum(d_out * x, axis=tuple(range(x.ndim - 1)))  # "dy/dgamma = x"


def rms_backward_d_gamma_summed_over_axis_0(d_out, x, gamma, eps=1e-5):
    r = _rms(x, eps)
    x_hat, g = x / r, d_out * gamma
    d_x = (g - x_hat * (g * x_hat).mean(-1, keepdims=True)) / r
    return d_x, (d_out * x_hat).sum(axis=0)  # "sum over the positions"


# ── 07.7 · label-smoothed cross-entropy ───────────────────────────────────────────────────────


def _log_p(x):  # a right log-softmax, spelled with np.logaddexp
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def _one_hot(targets, n):
    return (np.arange(n) == np.asarray(targets)[..., None]).astype(float)


def smoothed_ce_log_of_softmax(logits, targets, epsilon, ignore_id):
    from helpers.transformer import softmax

    log_p = np.log(softmax(logits))  # "log of the probabilities"
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    keep = targets != ignore_id
    return float(-(q * log_p).sum(-1)[keep].mean())


def smoothed_ce_log_of_softmax_plus_1e_12(logits, targets, epsilon, ignore_id):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    log_p = np.log(e / e.sum(axis=-1, keepdims=True) + 1e-12)  # "+ 1e-12 so that log never sees 0"
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    keep = targets != ignore_id
    return float(-(q * log_p).sum(-1)[keep].mean())


def smoothed_ce_no_max_shift(logits, targets, epsilon, ignore_id):
    log_p = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    keep = targets != ignore_id
    return float(np.sum(-(q * log_p).sum(-1) * keep) / np.sum(keep))


def smoothed_ce_spread_over_other_tokens(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    hot = _one_hot(targets, n)
    q = (1 - epsilon) * hot + epsilon / (n - 1) * (1 - hot)  # "the rest share epsilon"
    keep = targets != ignore_id
    return float(-(q * _log_p(logits)).sum(-1)[keep].mean())


def smoothed_ce_annotated_transformer_convention(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    losses = []
    for r in np.ndindex(targets.shape):
        if targets[r] == ignore_id:
            continue
        q = np.full(n, epsilon / (n - 2))  # true_dist.fill_(smoothing / (size - 2))
        q[targets[r]] = 1 - epsilon  # scatter_(confidence)
        q[ignore_id] = 0.0  # true_dist[:, padding_idx] = 0
        losses.append(-np.dot(q, _log_p(logits[r])))
    return float(np.mean(losses))


def smoothed_ce_target_overwritten(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    q = np.full(logits.shape, epsilon / n)
    rows = list(np.ndindex(targets.shape))
    for r in rows:
        q[r][targets[r]] = 1 - epsilon  # = where += was meant
    keep = targets != ignore_id
    return float(-(q * _log_p(logits)).sum(-1)[keep].mean())


def smoothed_ce_target_only(logits, targets, epsilon, ignore_id):
    log_p_target = np.take_along_axis(_log_p(logits), targets[..., None], axis=-1)[..., 0]
    keep = targets != ignore_id
    return float(np.mean(-(1 - epsilon) * log_p_target[keep]))  # "smooth the target's weight"


def smoothed_ce_no_smoothing(logits, targets, epsilon, ignore_id):
    log_p_target = np.take_along_axis(_log_p(logits), targets[..., None], axis=-1)[..., 0]
    return float(-log_p_target[targets != ignore_id].mean())


def smoothed_ce_ignored_rows_counted(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    return float(-(q * _log_p(logits)).sum(-1).mean())  # ignore_id never read


def smoothed_ce_mean_over_all_rows(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    per_position = -(q * _log_p(logits)).sum(-1)
    return float(np.where(targets == ignore_id, 0.0, per_position).mean())  # zeros still counted


def smoothed_ce_sum_not_mean(logits, targets, epsilon, ignore_id):
    n = logits.shape[-1]
    q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
    return float(-(q * _log_p(logits)).sum(-1)[targets != ignore_id].sum())


# ── 07.8 · attention's backward ───────────────────────────────────────────────────────────────


def _t(a):  # the last two axes swapped, whatever the leading ones
    return np.swapaxes(a, -1, -2)


def attention_backward_scale_forgotten(Q, K, V, weights, d_out):
    d_P = d_out @ _t(V)
    d_S = weights * (d_P - np.sum(weights * d_P, axis=-1, keepdims=True))
    return d_S @ K, _t(d_S) @ Q, _t(weights) @ d_out  # "the scale is a constant"


def attention_backward_scale_multiplied(Q, K, V, weights, d_out):
    scale = np.sqrt(Q.shape[-1])
    d_P = np.einsum("...qv,...kv->...qk", d_out, V)
    d_S = weights * (d_P - np.einsum("...qk,...qk->...q", d_P, weights)[..., None])
    d_S = d_S * scale  # "the forward divided, so the backward multiplies"
    return d_S @ K, _t(d_S) @ Q, np.einsum("...qk,...qv->...kv", weights, d_out)


def attention_backward_divided_by_d_k(Q, K, V, weights, d_out):
    d_k = Q.shape[-1]
    d_P = d_out @ _t(V)
    row = (d_P * weights).sum(-1)[..., None]
    d_S = weights * (d_P - row) / d_k  # "divide by d_k"
    return d_S @ K, _t(d_S) @ Q, _t(weights) @ d_out


def attention_backward_key_gradient_not_scaled(Q, K, V, weights, d_out):
    d_P = d_out @ _t(V)
    d_S = weights * (d_P - (d_P * weights).sum(-1, keepdims=True))
    d_Q = d_S @ K / np.sqrt(Q.shape[-1])
    d_K = _t(d_S) @ Q  # the scale only where Q was
    return d_Q, d_K, _t(weights) @ d_out


def attention_backward_softmax_no_correction(Q, K, V, weights, d_out):
    d_S = weights * (d_out @ _t(V)) / np.sqrt(Q.shape[-1])  # "the derivative of exp is exp"
    return d_S @ K, _t(d_S) @ Q, _t(weights) @ d_out


def attention_backward_softmax_skipped(Q, K, V, weights, d_out):
    d_S = np.matmul(d_out, _t(V)) / np.sqrt(Q.shape[-1])  # "the weights are the scores"
    return np.matmul(d_S, K), np.matmul(_t(d_S), Q), np.matmul(_t(weights), d_out)


def attention_backward_softmax_sum_over_queries(Q, K, V, weights, d_out):
    d_P = d_out @ _t(V)
    column = (d_P * weights).sum(axis=-2, keepdims=True)  # "sum over the rows"
    d_S = weights * (d_P - column) / np.sqrt(Q.shape[-1])
    return d_S @ K, _t(d_S) @ Q, _t(weights) @ d_out


WRONG = {
    "softmax-backward-no-correction-term": softmax_backward_no_correction_term,
    "softmax-backward-diagonal-only": softmax_backward_diagonal_only,
    "softmax-backward-sum-over-axis-0": softmax_backward_sum_over_axis_0,
    "softmax-backward-axis-1-hard-coded": softmax_backward_axis_1_hard_coded,
    "softmax-backward-no-keepdims": softmax_backward_no_keepdims,
    "softmax-backward-sum-over-everything": softmax_backward_sum_over_everything,
    "softmax-backward-outer-p-missing": softmax_backward_outer_p_missing,
    "ln-backward-no-mean-terms": ln_backward_no_mean_terms,
    "ln-backward-no-mean-g-term": ln_backward_no_mean_g_term,
    "ln-backward-no-x_hat-term": ln_backward_no_x_hat_term,
    "ln-backward-gamma-forgotten": ln_backward_gamma_forgotten,
    "ln-backward-sum-not-mean": ln_backward_sum_not_mean,
    "ln-backward-means-over-axis-0": ln_backward_means_over_axis_0,
    "ln-backward-means-axis-1-hard-coded": ln_backward_means_axis_1_hard_coded,
    "ln-backward-d_gamma-without-x_hat": ln_backward_d_gamma_without_x_hat,
    "ln-backward-params-summed-over-axis-0": ln_backward_params_summed_over_axis_0,
    "lrate-warmup-power-1": lrate_warmup_power_1,
    "lrate-no-d_model-factor": lrate_no_d_model_factor,
    "lrate-max-not-min": lrate_max_not_min,
    "lrate-one-step-ahead": lrate_one_step_ahead,
    "lrate-power-precedence": lrate_power_precedence,
    "lrate-python-min-on-arrays": lrate_python_min_on_arrays,
    "adam-no-bias-correction": adam_no_bias_correction,
    "adam-eps-inside-sqrt": adam_eps_inside_sqrt,
    "adam-v-from-g": adam_v_from_g,
    "adam-bias-correction-t-minus-1": adam_bias_correction_t_minus_1,
    "adam-bias-correction-t-plus-1": adam_bias_correction_t_plus_1,
    "adam-betas-swapped": adam_betas_swapped,
    "adam-efficient-form": adam_efficient_form,
    "adam-no-eps": adam_no_eps,
    "adam-no-sqrt": adam_no_sqrt,
    "adam-old-state-returned": adam_old_state_returned,
    "adam-ignores-beta-arguments": adam_ignores_beta_arguments,
    "adam-stores-corrected-averages": adam_stores_corrected_averages,
    "gradient-check-one-sided": gradient_check_one_sided,
    "gradient-check-not-restored": gradient_check_not_restored,
    "gradient-check-over-analytic-norm": gradient_check_over_analytic_norm,
    "gradient-check-not-relative": gradient_check_not_relative,
    "gradient-check-step-too-large": gradient_check_step_too_large,
    "gradient-check-step-too-small": gradient_check_step_too_small,
    "gradient-check-all-entries-at-once": gradient_check_all_entries_at_once,
    "gradient-check-first-axis-only": gradient_check_first_axis_only,
    "gradient-check-no-factor-2": gradient_check_no_factor_2,
    "gradient-check-max-denominator": gradient_check_max_denominator,
    "rms-backward-layer-norm-mean-term": rms_backward_layer_norm_mean_term,
    "rms-backward-rms-held-constant": rms_backward_rms_held_constant,
    "rms-backward-not-divided-by-rms": rms_backward_not_divided_by_rms,
    "rms-backward-eps-outside-root": rms_backward_eps_outside_root,
    "rms-backward-no-eps": rms_backward_no_eps,
    "rms-backward-eps-argument-ignored": rms_backward_eps_argument_ignored,
    "rms-backward-gamma-forgotten": rms_backward_gamma_forgotten,
    "rms-backward-sum-not-mean": rms_backward_sum_not_mean,
    "rms-backward-x-not-x_hat-in-correction": rms_backward_x_not_x_hat_in_correction,
    "rms-backward-d_gamma-from-x": rms_backward_d_gamma_from_x,
    "rms-backward-d_gamma-summed-over-axis-0": rms_backward_d_gamma_summed_over_axis_0,
    "smoothed-ce-log-of-softmax": smoothed_ce_log_of_softmax,
    "smoothed-ce-log-of-softmax-plus-1e-12": smoothed_ce_log_of_softmax_plus_1e_12,
    "smoothed-ce-no-max-shift": smoothed_ce_no_max_shift,
    "smoothed-ce-spread-over-other-tokens": smoothed_ce_spread_over_other_tokens,
    "smoothed-ce-annotated-transformer-convention": smoothed_ce_annotated_transformer_convention,
    "smoothed-ce-target-overwritten": smoothed_ce_target_overwritten,
    "smoothed-ce-target-only": smoothed_ce_target_only,
    "smoothed-ce-no-smoothing": smoothed_ce_no_smoothing,
    "smoothed-ce-ignored-rows-counted": smoothed_ce_ignored_rows_counted,
    "smoothed-ce-mean-over-all-rows": smoothed_ce_mean_over_all_rows,
    "smoothed-ce-sum-not-mean": smoothed_ce_sum_not_mean,
    "attention-backward-scale-forgotten": attention_backward_scale_forgotten,
    "attention-backward-scale-multiplied": attention_backward_scale_multiplied,
    "attention-backward-divided-by-d_k": attention_backward_divided_by_d_k,
    "attention-backward-key-gradient-not-scaled": attention_backward_key_gradient_not_scaled,
    "attention-backward-softmax-no-correction": attention_backward_softmax_no_correction,
    "attention-backward-softmax-skipped": attention_backward_softmax_skipped,
    "attention-backward-softmax-sum-over-queries": attention_backward_softmax_sum_over_queries,
}


# ── what is special about 07 ──────────────────────────────────────────────────────────────────


def test_the_hand_cases_are_what_the_tasks_say():
    ex = checks.CATALOGUE
    args = ex["07.1"].cases[0].arguments()[0]
    np.testing.assert_allclose(ex["07.1"].reference(*args), [[0.25, -0.125, -0.125]])
    d_x, d_gamma, d_beta = ex["07.2"].reference(*ex["07.2"].cases[0].arguments()[0])
    np.testing.assert_allclose(d_x, [[0.5, -0.5, 0.0, 0.0]], atol=1e-15)
    np.testing.assert_allclose(d_gamma, [-1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(d_beta, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(ex["07.3"].reference(*ex["07.3"].cases[0].arguments()[0]),
                               [1 / 32, 1 / 8, 1 / 16], rtol=1e-15)
    p, m, v = ex["07.4"].reference(*ex["07.4"].cases[0].arguments()[0])
    np.testing.assert_allclose(p, [0.9, -1.9], rtol=1e-8)
    np.testing.assert_allclose(m, [0.05, -0.1], rtol=1e-12)
    np.testing.assert_allclose(v, [0.005, 0.02], rtol=1e-12)
    case = ex["07.6"].cases[0]
    d_x, d_gamma = ex["07.6"].reference(*case.args, **case.kwargs)
    np.testing.assert_allclose(d_x, [[0.75, 0.25, -0.25, 0.25]], rtol=1e-15)
    np.testing.assert_allclose(d_gamma, [1.0, 0.0, 0.0, 0.0])


def test_the_layer_norm_reference_is_the_gradient_of_layer_norm():
    from helpers.training import gradient_check
    from helpers.transformer import LayerNorm

    rng = np.random.default_rng(0)
    norm = LayerNorm(5)
    norm.gamma += rng.normal(0, 0.5, 5)
    x, G = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    norm.forward(x)
    d_x, d_gamma, d_beta = checks.exercise("layer_norm_backward").reference(
        G, *norm.cache, norm.gamma)
    params = {"x": x, "gamma": norm.gamma, "beta": norm.beta}
    _, errors = gradient_check(lambda: float(np.sum(G * norm.forward(x))), params,
                               {"x": d_x, "gamma": d_gamma, "beta": d_beta})
    assert max(errors.values()) < 1e-7, errors


def test_an_adam_step_that_changes_its_arrays_in_place_passes():
    def adam_step(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):  # in place, like Adam
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * g * g
        p -= lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
        return p, m, v

    assert checks.check(adam_step), checks.check(adam_step).message
    assert checks.check(adam_step)  # a second run sees the same, unmodified cases


def test_the_no_keepdims_diagnosis_reads_like_this():
    result = checks.check(softmax_backward_no_keepdims, "07.1")
    assert result.message.startswith(
        "✗ 07.1 softmax_backward: the row sums are taken without keepdims=True, so row i's sum "
        "is subtracted in column i (it broadcasts along the wrong axis)\n"
        "  case: self-attention weights (4, 4), d_p random\n")
    assert result.message.endswith("[softmax-backward-no-keepdims]. See 07 §2 · Softmax and "
                                   "attention.")


def test_axis_1_hard_coded_is_caught_by_the_batch_case_only():
    # right on every 2-D case: only the (3, 3, 3) batch tells axis=1 from axis=-1
    result = checks.check(softmax_backward_axis_1_hard_coded, "07.1")
    assert result.mistakes == ("softmax-backward-axis-1-hard-coded",)
    assert "  case: a batch of 3, weights (3, 3, 3)\n" in result.message


def test_the_efficient_form_of_adam_differs_only_where_eps_matters():
    from helpers.checks.core import same

    ex = checks.CATALOGUE["07.4"]
    for case in ex.cases:
        (args, kwargs), (args2, kwargs2) = case.arguments(), case.arguments()
        agree = same(ex.reference(*args, **kwargs), adam_efficient_form(*args2, **kwargs2))
        assert agree == ("tiny gradients" not in case.label), case.label


def test_the_gradient_check_cases_say_what_they_give():
    ex = checks.CATALOGUE["07.5"]
    values = [ex.reference(*case.args) for case in ex.cases]
    assert abs(values[0] - 1 / 3) < 1e-9 and "= 1/3" in ex.cases[0].label  # by hand
    assert values[1] < 1e-8 and "right gradient" in ex.cases[1].label
    assert values[2] > 0.1 and "wrong gradient" in ex.cases[2].label
    assert values[3] == 1.0 and "g = 0" in ex.cases[3].label
    # what the mistakes do to the right gradient: each lands near or past the bar 1e-6 (each on
    # its own copy of the case: gradient_check_not_restored moves x in place)
    right = ex.cases[1].arguments
    assert 1e-8 < gradient_check_one_sided(*copy.deepcopy(right()[0])) < 1e-6
    assert 1e-8 < gradient_check_not_restored(*copy.deepcopy(right()[0])) < 1e-6
    assert gradient_check_step_too_large(*copy.deepcopy(right()[0])) > 1e-6
    assert gradient_check_step_too_small(*copy.deepcopy(right()[0])) > 1e-6


def test_a_learner_who_copies_x_for_every_entry_passes():
    def gradient_error(f, x, g):
        n = _central(f, x)
        return np.linalg.norm(g - n) / (np.linalg.norm(g) + np.linalg.norm(n))

    assert checks.check(gradient_error), checks.check(gradient_error).message


def test_the_rms_norm_reference_is_the_gradient_of_rms_norm():
    from helpers.modern import RMSNorm
    from helpers.training import gradient_check

    rng = np.random.default_rng(0)
    norm = RMSNorm(5, eps=0.01)
    norm.gamma += rng.normal(0, 0.5, 5)
    x, G = rng.normal(size=(2, 3, 5)) * 0.3, rng.normal(size=(2, 3, 5))
    d_x, d_gamma = checks.exercise("rms_norm_backward").reference(G, x, norm.gamma, eps=0.01)
    _, errors = gradient_check(lambda: float(np.sum(G * norm.forward(x))),
                               {"x": x, "gamma": norm.gamma}, {"x": d_x, "gamma": d_gamma})
    assert max(errors.values()) < 1e-7, errors


def test_the_smoothed_cross_entropy_cases_say_what_they_give():
    ex = checks.CATALOGUE["07.7"]
    values = [ex.reference(*case.args) for case in ex.cases]
    assert abs(values[0] - 1.2 * np.log(2)) < 1e-12 and "1.2 ln 2 ≈ 0.8318" in ex.cases[0].label
    assert all(np.isfinite(values))  # -1000 and +1000 logits: finite
    logits, targets = ex.cases[1].args[:2]
    assert (logits == -1000).sum() == 3 and (targets == 0).sum() == 1  # confident, one padded
    with np.errstate(all="ignore"):  # where the naive forms break: one case each
        assert np.isinf(smoothed_ce_log_of_softmax(*ex.cases[1].args))
        assert np.isfinite(smoothed_ce_log_of_softmax(*ex.cases[2].args))
        assert not np.isfinite(smoothed_ce_no_max_shift(*ex.cases[2].args))
        assert np.isfinite(smoothed_ce_no_max_shift(*ex.cases[1].args))


def test_a_right_smoothed_cross_entropy_written_row_by_row_passes():
    def label_smoothed_cross_entropy(logits, targets, epsilon, ignore_id):
        losses = []
        for r in np.ndindex(targets.shape):
            if targets[r] == ignore_id:
                continue
            log_p = _log_p(logits[r])  # (1 - eps) on the target, eps spread evenly over all
            losses.append(-(1 - epsilon) * log_p[targets[r]] - epsilon * log_p.mean())
        return sum(losses) / len(losses)

    assert checks.check(label_smoothed_cross_entropy), \
        checks.check(label_smoothed_cross_entropy).message


def test_a_smoothed_cross_entropy_averaged_over_the_vocabulary_is_wrong_and_not_named():
    def label_smoothed_cross_entropy(logits, targets, epsilon, ignore_id):
        n = logits.shape[-1]
        q = (1 - epsilon) * _one_hot(targets, n) + epsilon / n
        per_position = -(q * _log_p(logits)).mean(-1)  # mean over the tokens, not the sum
        return float(per_position[targets != ignore_id].mean())

    result = checks.check(label_smoothed_cross_entropy)
    assert result.status == "wrong" and result.mistakes == (), result.message


def test_the_other_smoothing_convention_is_named_kindly():
    result = checks.check(smoothed_ce_spread_over_other_tokens, "07.7")
    assert result.mistakes == ("smoothed-ce-spread-over-other-tokens",)
    assert "another common convention" in result.message and "not a slip" in result.message
    adam = checks.check(adam_efficient_form, "07.4")
    assert "another convention, not a slip" in adam.message, adam.message


def test_the_library_cross_entropy_is_not_credited():
    from helpers.training import cross_entropy

    def label_smoothed_cross_entropy(logits, targets, epsilon, ignore_id):
        return cross_entropy(logits, targets, label_smoothing=epsilon, ignore_id=ignore_id)[0]

    assert checks.check(label_smoothed_cross_entropy).status == "not credited"


def test_a_log_of_softmax_plus_a_tiny_number_is_finite_but_named():
    ex = checks.CATALOGUE["07.7"]
    assert np.isfinite(smoothed_ce_log_of_softmax_plus_1e_12(*ex.cases[1].args))
    result = checks.check(smoothed_ce_log_of_softmax_plus_1e_12, "07.7")
    assert result.mistakes == ("smoothed-ce-log-of-softmax-plus-1e-12",), result.message
    assert "  case: a confident model" in result.message  # the only case where it differs


def test_the_annotated_transformer_convention_is_named_kindly():
    result = checks.check(smoothed_ce_annotated_transformer_convention, "07.7")
    assert result.mistakes == ("smoothed-ce-annotated-transformer-convention",), result.message
    assert "another convention" in result.message and "not a slip" in result.message


def test_python_min_on_an_array_of_steps_points_to_np_minimum():
    result = checks.check(lrate_python_min_on_arrays, "07.3")
    assert result.mistakes == ("lrate-python-min-on-arrays",), result.message
    assert "truth value" in result.message and "np.minimum" in result.message

    def lrate(step, d_model, warmup):  # the same slip, Python's max this time
        return d_model ** -0.5 / max(np.sqrt(step), warmup ** 1.5 / step)

    assert checks.check(lrate).mistakes == ("lrate-python-min-on-arrays",)


def test_the_attention_hand_case_is_what_the_task_says():
    ex = checks.CATALOGUE["07.8"]
    Q, K, V, weights, d_out = ex.cases[0].args
    d_P = d_out @ V.T  # by hand: [[1, 3]]; its mean under the weights is 2
    np.testing.assert_allclose(weights * (d_P - 2), [[-0.5, 0.5]])
    d_Q, d_K, d_V = ex.reference(*ex.cases[0].args)
    np.testing.assert_allclose(d_Q, [[-1.0]])
    np.testing.assert_allclose(d_K, [[0.0], [0.0]])
    np.testing.assert_allclose(d_V, [[0.5], [0.5]])
    Q, K, V, weights, d_out = ex.cases[3].args
    assert Q.shape == (2, 2, 3, 4) and K.shape == (2, 2, 5, 4) and V.shape == (2, 2, 5, 6)
    assert not weights[..., 3:].any()  # the two padded keys
    _, d_K, d_V = ex.reference(*ex.cases[3].args)
    assert not d_K[..., 3:, :].any() and not d_V[..., 3:, :].any()  # ... get no gradient


def _softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_a_right_attention_backward_passes_and_matches_central_differences():
    def attention_backward(Q, K, V, weights, d_out):
        scale = np.sqrt(Q.shape[-1])
        d_V = np.einsum("...qk,...qv->...kv", weights, d_out)
        d_P = np.einsum("...qv,...kv->...qk", d_out, V)
        d_S = weights * (d_P - (d_P * weights).sum(-1, keepdims=True)) / scale
        return (np.einsum("...qk,...kd->...qd", d_S, K), np.einsum("...qk,...qd->...kd", d_S, Q),
                d_V)

    assert checks.check(attention_backward), checks.check(attention_backward).message
    rng = np.random.default_rng(0)  # and the three gradients of sum(G * attention(Q, K, V))
    Q, K, V, G = (rng.normal(size=s) for s in ((3, 2), (4, 2), (4, 3), (3, 3)))
    def f():
        return float(np.sum(G * (_softmax_rows(Q @ K.T / np.sqrt(2)) @ V)))
    grads = attention_backward(Q, K, V, _softmax_rows(Q @ K.T / np.sqrt(2)), G)
    for x, g in zip((Q, K, V), grads):
        numeric = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            old = x[i]
            x[i] = old + 1e-6
            up = f()
            x[i] = old - 1e-6
            numeric[i] = (up - f()) / 2e-6
            x[i] = old
        np.testing.assert_allclose(g, numeric, atol=1e-8)


def test_a_right_attention_backward_with_its_own_softmax_backward_passes():
    def softmax_backward(p, d_p):  # the learner's 07.1
        return p * (d_p - np.sum(d_p * p, axis=-1, keepdims=True))

    def attention_backward(Q, K, V, weights, d_out):
        d_V = weights.swapaxes(-1, -2) @ d_out
        d_S = softmax_backward(weights, d_out @ V.swapaxes(-1, -2)) / np.sqrt(Q.shape[-1])
        return d_S @ K, d_S.swapaxes(-1, -2) @ Q, d_V

    assert checks.check(attention_backward), checks.check(attention_backward).message


def test_an_attention_backward_with_d_V_from_the_wrong_side_is_wrong_and_not_named():
    def attention_backward(Q, K, V, weights, d_out):
        d_P = d_out @ np.swapaxes(V, -1, -2)
        d_S = weights * (d_P - (d_P * weights).sum(-1, keepdims=True)) / np.sqrt(Q.shape[-1])
        d_V = np.swapaxes(weights, -1, -2) @ d_out * 2  # twice what it should be
        return d_S @ K, np.swapaxes(d_S, -1, -2) @ Q, d_V

    result = checks.check(attention_backward)
    assert result.status == "wrong" and result.mistakes == (), result.message


def test_the_library_attention_backward_is_not_credited():
    from helpers.training import attention_backward as library

    def attention_backward(Q, K, V, weights, d_out):
        return library(Q, K, V, weights, d_out)

    assert checks.check(attention_backward).status == "not credited"
