"""Exercises of notebook 07: softmax and LayerNorm backward, the warm-up schedule, Adam, a
gradient check by central differences, RMSNorm backward, the label-smoothed cross-entropy of a
padded batch, and attention's backward."""

import numpy as np

from helpers.checks.core import Case, Exercise, Mistake
from helpers.modern import RMSNorm
from helpers.training import (
    Adam,
    attention_backward,
    cross_entropy,
    gradient_check,
    lrate,
    softmax_backward,
)
from helpers.transformer import LayerNorm, NormCache, softmax

_rng = np.random.default_rng(107)  # the cases are the same on every run and every machine

# ── 07.1 · softmax backward ───────────────────────────────────────────────────────────────────

_SM = "07 §2 · Softmax and attention"


def _sm_case(label, shape, blocked=None):
    scores = _rng.normal(size=shape)
    if blocked is not None:
        scores = np.where(blocked, -np.inf, scores)
    return Case(label, (softmax(scores), _rng.normal(size=shape)))


SOFTMAX_BACKWARD = Exercise(
    key="07.1", name="softmax_backward", reference=softmax_backward, see=_SM,
    cases=(
        Case("p = [[0.5, 0.25, 0.25]], d_p = [[1, 0, 0]] (by hand: [[0.25, -0.125, -0.125]])",
             (np.array([[0.5, 0.25, 0.25]]), np.array([[1.0, 0.0, 0.0]]))),
        _sm_case("self-attention weights (4, 4), d_p random", (4, 4)),
        _sm_case("causal weights (4, 4): the blocked keys have p = 0", (4, 4),
                 blocked=np.triu(np.ones((4, 4), dtype=bool), k=1)),
        _sm_case("a batch of 3, weights (3, 3, 3)", (3, 3, 3)),
    ),
    mistakes=(
        Mistake("softmax-backward-no-correction-term",
                "d_x = p * d_p: the term -p·(p·d_p) is missing (each p_i depends on every x_j, "
                "through the sum of the softmax)", _SM,
                lambda p, d_p: p * d_p),
        Mistake("softmax-backward-diagonal-only",
                "only the Jacobian's diagonal is used, d_x = p(1 - p) d_p: the off-diagonal "
                "entries -p_i p_j are missing", _SM,
                lambda p, d_p: p * (1 - p) * d_p),
        Mistake("softmax-backward-sum-over-axis-0",
                "the sum Σ_j d_p_j p_j runs over axis 0 (down the columns of a 2-D array, "
                "across the batch of a 3-D one): it must run along each row, over the last axis "
                "(the keys, along which the softmax ran)", _SM,
                lambda p, d_p: p * (d_p - np.sum(d_p * p, axis=0, keepdims=True))),
        Mistake("softmax-backward-axis-1-hard-coded",
                "the sum runs over axis=1, which is the last axis only of a 2-D array: with a "
                "batch, (batch, queries, keys), it sums over the queries; axis=-1 is the last "
                "axis whatever the shape", _SM,
                lambda p, d_p: p * (d_p - np.sum(d_p * p, axis=1, keepdims=True))),
        Mistake("softmax-backward-no-keepdims",
                "the row sums are taken without keepdims=True, so row i's sum is subtracted "
                "in column i (it broadcasts along the wrong axis)", _SM,
                lambda p, d_p: p * (d_p - np.sum(d_p * p, axis=-1))),
        Mistake("softmax-backward-sum-over-everything",
                "the sum Σ_j d_p_j p_j runs over the whole array, not over each row", _SM,
                lambda p, d_p: p * (d_p - np.sum(d_p * p))),
        Mistake("softmax-backward-outer-p-missing",
                "d_x = d_p - Σ_j d_p_j p_j: the result is not multiplied by p (so a blocked key, "
                "p = 0, gets a gradient)", _SM,
                lambda p, d_p: d_p - np.sum(d_p * p, axis=-1, keepdims=True)),
    ),
)

# ── 07.2 · LayerNorm backward ─────────────────────────────────────────────────────────────────

_LN = "07 §4 · LayerNorm, the feed-forward network, dropout and the residual connections"


def _layer_norm_backward(d_out, x_hat, std, gamma):
    """The library's LayerNorm.backward, on a LayerNorm holding this gamma and this cache."""
    norm = LayerNorm(x_hat.shape[-1])
    norm.gamma[...] = gamma
    norm.cache = NormCache(x_hat, std)
    d_x, grads = norm.backward(d_out)
    return d_x, grads["gamma"], grads["beta"]


def _ln_parts(d_out, x_hat):  # right d_gamma and d_beta, for the mistakes of d_x
    rows = d_out.reshape(-1, d_out.shape[-1])
    return (rows * x_hat.reshape(rows.shape)).sum(axis=0), rows.sum(axis=0)


def _ln_model(mean_g=True, mean_gx=True, use_gamma=True, reduce=np.mean, axis=-1):
    def model(d_out, x_hat, std, gamma):
        g = d_out * gamma if use_gamma else d_out
        d_x = g - (reduce(g, axis=axis, keepdims=True) if mean_g else 0)
        d_x = d_x - (x_hat * reduce(g * x_hat, axis=axis, keepdims=True) if mean_gx else 0)
        return (d_x / std, *_ln_parts(d_out, x_hat))
    return model


def _ln_params(d_gamma, d_beta):
    def model(d_out, x_hat, std, gamma):
        return _layer_norm_backward(d_out, x_hat, std, gamma)[0], d_gamma(d_out, x_hat), \
            d_beta(d_out)
    return model


def _ln_case(label, lead, d_model):
    norm = LayerNorm(d_model)
    norm.gamma += _rng.normal(0, 0.5, d_model)  # gamma far from ones, so forgetting it shows
    norm.forward(_rng.normal(size=(*lead, d_model)) * 2 + 1)
    return Case(label, (_rng.normal(size=(*lead, d_model)), *norm.cache, norm.gamma.copy()))


LAYER_NORM_BACKWARD = Exercise(
    key="07.2", name="layer_norm_backward", reference=_layer_norm_backward, see=_LN,
    outputs=("d_x", "d_gamma", "d_beta"),
    cases=(
        Case("x_hat = [[-1, -1, 1, 1]], std = [[1]], gamma = 1, d_out = [[1, 0, 0, 0]] "
             "(by hand: d_x = [[0.5, -0.5, 0, 0]])",
             (np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([[-1.0, -1.0, 1.0, 1.0]]),
              np.array([[1.0]]), np.ones(4))),
        _ln_case("3 positions, d_model = 8, gamma and std not 1", (3,), 8),
        _ln_case("a batch of 2 sequences of 4 positions, d_model = 6", (2, 4), 6),
    ),
    mistakes=(
        Mistake("ln-backward-no-mean-terms",
                "d_x = d_out * gamma / std: the mean and the standard deviation are treated as "
                "constants, but they move when x moves (both mean terms are missing)", _LN,
                _ln_model(mean_g=False, mean_gx=False)),
        Mistake("ln-backward-no-mean-g-term",
                "the term -mean(g) is missing (the gradient that flows through the mean), "
                "g = d_out * gamma", _LN, _ln_model(mean_g=False)),
        Mistake("ln-backward-no-x_hat-term",
                "the term -x_hat · mean(g · x_hat) is missing (the gradient that flows through "
                "the standard deviation), g = d_out * gamma", _LN, _ln_model(mean_gx=False)),
        Mistake("ln-backward-gamma-forgotten",
                "d_x uses g = d_out, not g = d_out * gamma: the gradient must pass back through "
                "the scale gamma first", _LN, _ln_model(use_gamma=False)),
        Mistake("ln-backward-sum-not-mean",
                "the two correction terms use sums over the features, not means (the 1/d_model "
                "is missing)", _LN, _ln_model(reduce=np.sum)),
        Mistake("ln-backward-means-over-axis-0",
                "the two means run over axis 0, across the positions: they must run over each "
                "position's features (the last axis), where LayerNorm took its mean and "
                "variance", _LN, _ln_model(axis=0)),
        Mistake("ln-backward-means-axis-1-hard-coded",
                "the two means run over axis=1, the features only of a 2-D array: with a batch, "
                "(batch, positions, d_model), they average over the positions; axis=-1 is the "
                "features whatever the shape", _LN, _ln_model(axis=1)),
        Mistake("ln-backward-d_gamma-without-x_hat",
                "d_gamma is the sum of d_out, like d_beta: it must be the sum of d_out * x_hat "
                "(y = gamma * x_hat + beta)", _LN,
                _ln_params(lambda d_out, x_hat: d_out.reshape(-1, d_out.shape[-1]).sum(axis=0),
                           lambda d_out: d_out.reshape(-1, d_out.shape[-1]).sum(axis=0))),
        Mistake("ln-backward-params-summed-over-axis-0",
                "d_gamma and d_beta are summed over axis 0 only: with a batch axis they must "
                "be summed over every position (all axes but the last), shape (d_model,)", _LN,
                _ln_params(lambda d_out, x_hat: (d_out * x_hat).sum(axis=0),
                           lambda d_out: d_out.sum(axis=0))),
    ),
)

# ── 07.3 · the warm-up schedule ───────────────────────────────────────────────────────────────

_LR = "07 §8 · Adam, the warm-up schedule, and two additions"


def _lrate(step, d_model, warmup):  # the library's, with the exercise's signature (no factor)
    return lrate(step, d_model, warmup)


def _lr(step, d_model, warmup, *, p_model=-0.5, p_step=-0.5, p_warmup=-1.5, pick=np.minimum):
    step = np.asarray(step, dtype=float)
    return d_model**p_model * pick(step**p_step, step * warmup**p_warmup)


LRATE = Exercise(
    key="07.3", name="lrate", reference=_lrate, see=_LR,
    cases=(
        Case("step = [1, 4, 16], d_model = 16, warmup = 4 (by hand: [0.03125, 0.125, 0.0625])",
             (np.array([1, 4, 16]), 16, 4)),
        Case("step 1 of the paper's run (a scalar), d_model = 512, warmup = 4000", (1, 512, 4000)),
        Case("the paper's peak, step = warmup = 4000", (4000, 512, 4000)),
        Case("steps 1 to 600, d_model = 32, warmup = 100", (np.arange(1, 601), 32, 100)),
        Case("step 20000, long after the warm-up", (20000, 512, 4000)),
    ),
    mistakes=(
        Mistake("lrate-warmup-power-1",
                "the warm-up branch is step / warmup (warmup^-1), not step · warmup^-1.5: the "
                "two branches no longer meet at step = warmup", _LR,
                lambda step, d_model, warmup: _lr(step, d_model, warmup, p_warmup=-1.0)),
        Mistake("lrate-no-d_model-factor",
                "the factor d_model^-0.5 is missing", _LR,
                lambda step, d_model, warmup: _lr(step, d_model, warmup, p_model=0.0)),
        Mistake("lrate-max-not-min",
                "max instead of min: the rate must follow the smaller branch, rising during the "
                "warm-up and decaying after it", _LR,
                lambda step, d_model, warmup: _lr(step, d_model, warmup, pick=np.maximum)),
        Mistake("lrate-one-step-ahead",
                "the schedule is one step ahead, lrate(step) gives the paper's rate for step + 1 "
                "(step counted from 0); here step counts from 1", _LR,
                lambda step, d_model, warmup: lrate(np.asarray(step) + 1, d_model, warmup)),
        Mistake("lrate-power-precedence",
                "x ** -1/2 is (x ** -1) / 2 in Python, not x ** -0.5 (and x ** -3/2 is "
                "(x ** -3) / 2): write the powers as -0.5 and -1.5", _LR,
                lambda step, d_model, warmup: (d_model**-1 / 2) * np.minimum(
                    np.asarray(step, dtype=float)**-1 / 2, step * warmup**-3 / 2)),
        Mistake("lrate-python-min-on-arrays",
                "Python's min (or max, or an if) compares whole arrays, and an array of several "
                "steps has no single truth value: np.minimum (np.maximum) compares them entry "
                "by entry", _LR,
                lambda step, d_model, warmup: d_model**-0.5 * min(step**-0.5,
                                                                  step * warmup**-1.5)),
    ),
)

# ── 07.4 · one Adam step ──────────────────────────────────────────────────────────────────────

_ADAM = "07 §8 · Adam, the warm-up schedule, and two additions"


def _adam_step(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9):
    """The library's Adam, one step from state (m, v) at step t - 1; returns new (p, m, v)."""
    p = np.array(p, dtype=np.float64)  # a copy: Adam updates it in place
    adam = Adam({"p": p}, beta1=beta1, beta2=beta2, eps=eps)
    adam.m["p"][...], adam.v["p"][...], adam.t = m, v, t - 1
    adam.step({"p": g}, lr)
    return p, adam.m["p"], adam.v["p"]


def _adam(p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9, *, square=True, t1=0, t2=0,
          correct=True, eps_inside=False, root=True, swap=False, new_state=True,
          efficient=False, use_eps=True, store_hat=False):
    m_new = (beta1 * g + (1 - beta1) * m) if swap else (beta1 * m + (1 - beta1) * g)
    g2 = g * g if square else g
    v_new = (beta2 * g2 + (1 - beta2) * v) if swap else (beta2 * v + (1 - beta2) * g2)
    m_hat = m_new / (1 - beta1**(t + t1)) if correct else m_new
    v_hat = v_new / (1 - beta2**(t + t2)) if correct else v_new
    eps = eps if use_eps else 0.0
    denom = np.sqrt(v_hat + eps) if eps_inside else (np.sqrt(v_hat) if root else v_hat) + eps
    if efficient:  # Kingma & Ba, end of §2: the corrections folded into the rate, eps on sqrt(v)
        lr_t = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
        return p - lr_t * m_new / (np.sqrt(v_new) + eps), m_new, v_new
    if store_hat:  # the corrected averages returned as the state
        return p - lr * m_hat / denom, m_hat, v_hat
    return (p - lr * m_hat / denom, m_new, v_new) if new_state else (p - lr * m_hat / denom, m, v)


def _adam_case(label, shape, t, lr, scale=1.0, state=True, **kwargs):
    p, g = _rng.normal(size=shape), _rng.normal(size=shape) * scale
    m = _rng.normal(size=shape) * 0.1 * scale if state else np.zeros(shape)
    v = _rng.normal(size=shape)**2 * 0.1 * scale**2 if state else np.zeros(shape)
    return Case(label, make=lambda: ((p.copy(), g.copy(), m.copy(), v.copy(), t, lr),
                                     dict(kwargs)))


def _adam_mistake(name, says, **how):
    return Mistake(name, says, _ADAM,
                   lambda p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9: _adam(
                       p, g, m, v, t, lr, beta1, beta2, eps, **how))


_HAND = (np.array([1.0, -2.0]), np.array([0.5, -1.0]), np.zeros(2), np.zeros(2), 1, 0.1)

ADAM_STEP = Exercise(
    key="07.4", name="adam_step", reference=_adam_step, see=_ADAM, outputs=("p", "m", "v"),
    cases=(
        Case("the first step (t = 1, m = v = 0): p = [1, -2], g = [0.5, -1], lr = 0.1 "
             "(by hand: p ≈ [0.9, -1.9], m = [0.05, -0.1], v = [0.005, 0.02])",
             make=lambda: (tuple(np.copy(a) if isinstance(a, np.ndarray) else a for a in _HAND),
                           {})),
        _adam_case("step t = 3 from a non-zero state, p of shape (2, 3), lr = 0.001",
                   (2, 3), 3, 1e-3),
        _adam_case("the first step with tiny gradients (about 1e-6), where ε matters",
                   (4,), 1, 1e-2, scale=1e-6, state=False),
        _adam_case("step t = 2 with beta1 = 0.5, beta2 = 0.9, eps = 1e-8", (3,), 2, 0.05,
                   beta1=0.5, beta2=0.9, eps=1e-8),
        _adam_case("step t = 10, p of shape (2, 2), lr = 0.01", (2, 2), 10, 1e-2),
    ),
    mistakes=(
        _adam_mistake("adam-no-bias-correction",
                      "m and v are used without the bias corrections m / (1 - beta1^t) and "
                      "v / (1 - beta2^t), so the first steps are far too small or too large",
                      correct=False),
        _adam_mistake("adam-eps-inside-sqrt",
                      "ε is added inside the square root, sqrt(v_hat + ε); it is added after it, "
                      "sqrt(v_hat) + ε", eps_inside=True),
        _adam_mistake("adam-v-from-g",
                      "v averages g, not g²: v is the running mean of the squared gradient",
                      square=False),
        _adam_mistake("adam-bias-correction-t-minus-1",
                      "the bias corrections use beta^(t - 1): with t counting from 1 they are "
                      "1 - beta1^t and 1 - beta2^t (t - 1 divides by 0 at the first step)",
                      t1=-1, t2=-1),
        _adam_mistake("adam-bias-correction-t-plus-1",
                      "the bias corrections use beta^(t + 1), as if t counted from 0; t counts "
                      "from 1, so they are 1 - beta1^t and 1 - beta2^t", t1=1, t2=1),
        _adam_mistake("adam-betas-swapped",
                      "the averages are weighted the wrong way round, m = beta1·g + (1 - beta1)·m: "
                      "the old average keeps the weight beta1, the new gradient gets 1 - beta1",
                      swap=True),
        _adam_mistake("adam-efficient-form",
                      "this is another convention, not a slip: Kingma & Ba's own 'efficient' "
                      "form (TensorFlow and Keras use it too), lr·√(1 - beta2^t)/(1 - beta1^t) "
                      "times m / (√v + ε). It adds ε to √v before the bias correction; this "
                      "exercise asks for notebook 07's form, which adds ε to √v_hat after it. "
                      "The two differ only when the gradients are tiny", efficient=True),
        _adam_mistake("adam-no-eps",
                      "ε is left out: the step divides by √v_hat alone, not by √v_hat + ε (the ε "
                      "keeps a zero gradient from giving 0 / 0, and it shows when the gradients "
                      "are tiny)", use_eps=False),
        _adam_mistake("adam-no-sqrt",
                      "the step divides by v_hat + ε, not by sqrt(v_hat) + ε", root=False),
        _adam_mistake("adam-old-state-returned",
                      "m and v are returned as they came in: return the updated averages (the "
                      "next step needs them)", new_state=False),
        _adam_mistake("adam-stores-corrected-averages",
                      "the bias-corrected m_hat and v_hat are returned as the new state: return "
                      "the raw averages m and v (the next step corrects them again, with its "
                      "own t)", store_hat=True),
        Mistake("adam-ignores-beta-arguments",
                "beta1, beta2 and eps are fixed at 0.9, 0.98 and 1e-9 inside the function: use "
                "the arguments", _ADAM,
                lambda p, g, m, v, t, lr, beta1=0.9, beta2=0.98, eps=1e-9: _adam(
                    p, g, m, v, t, lr)),
    ),
)

# ── 07.5 · a gradient check ───────────────────────────────────────────────────────────────────

_GRAD = "07 §1 · How to trust a gradient"


def _gradient_error(f, x, g):
    return gradient_check(lambda: f(x), {"x": x}, {"x": g})[0]


def _numeric(f, x, eps=1e-6, one_sided=False, restore=True, divisor=2):
    """Central (or one-sided) differences, perturbing x in place, one entry at a time; the
    central one divided by `divisor`·ε."""
    n = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old if one_sided else old - eps
        n[i] = (up - f(x)) / (eps if one_sided else divisor * eps)
        if restore:
            x[i] = old
    return n


def _numeric_moving(f, x, eps, rows):
    """The slip of moving more than one entry: every entry at once (each entry of n is then
    the sum of all the partial derivatives), or, with `rows`, x[i] for i in range(len(x)): a
    whole row at once when x has 2 axes."""
    n = np.zeros_like(x)
    for i in (range(len(x)) if rows else [Ellipsis]):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        n[i] = (f(up) - f(down)) / (2 * eps)
    return n


def _grad_model(eps=1e-6, one_sided=False, restore=True, over="both", divisor=2, moving=None):
    def model(f, x, g):
        if moving is None:
            n = _numeric(f, x, eps, one_sided, restore, divisor)
        else:
            n = _numeric_moving(f, x, eps, rows=moving == "rows")
        diff = np.linalg.norm(g - n)
        norm = {"both": np.linalg.norm(g) + np.linalg.norm(n), "g": np.linalg.norm(g),
                "max": max(np.linalg.norm(g), np.linalg.norm(n)), "none": 1.0}[over]
        return float(diff / norm)
    return model


def _square_sum(x):  # f(x) = sum x², gradient 2x
    return float(np.sum(x**2))


_G, _W = _rng.normal(size=(3, 5)), _rng.normal(size=(4, 5))


def _tanh_layer(x):  # f(x) = sum G ⊙ tanh(x W), x of shape (3, 4): the entries of x interact
    return float(np.sum(_G * np.tanh(x @ _W)))


def _tanh_layer_grad(x, slip=False):  # G (1 - tanh²) Wᵀ, or the slip G (1 - tanh) Wᵀ
    t = np.tanh(x @ _W)
    return (_G * (1 - (t if slip else t**2))) @ _W.T


_X1 = np.array([1.0, -2.0])
_X2 = _rng.normal(size=(3, 4))

GRADIENT_ERROR = Exercise(
    key="07.5", name="gradient_error", reference=_gradient_error, see=_GRAD, atol=1e-8,
    cases=(
        Case("f(x) = sum(x²) at x = [1, -2], g = x: the factor 2 forgotten (by hand: "
             "‖x - 2x‖ / (‖x‖ + ‖2x‖) = 1/3)", (_square_sum, _X1, _X1.copy())),
        Case("f(x) = sum(G ⊙ tanh(x W)), x of shape (3, 4), the right gradient G (1 - tanh²) Wᵀ: "
             "far below the bar 1e-6",
             (_tanh_layer, _X2, _tanh_layer_grad(_X2))),
        Case("the same f, the wrong gradient G (1 - tanh) Wᵀ",
             (_tanh_layer, _X2, _tanh_layer_grad(_X2, slip=True))),
        Case("the same f, g = 0 (a backward pass that wrote nothing): 1, the largest a relative "
             "error can be", (_tanh_layer, _X2, np.zeros_like(_X2))),
    ),
    mistakes=(
        Mistake("gradient-check-one-sided",
                "the numeric gradient is one-sided, (f(x + ε) - f(x)) / ε: its error shrinks "
                "like ε, not ε², so a right gradient shows a relative error near 1e-7, a "
                "thousand times that of central differences and close to the bar 1e-6",
                _GRAD, _grad_model(one_sided=True)),
        Mistake("gradient-check-not-restored",
                "the perturbed entry is not put back (it stays at x - ε), so every later entry "
                "is differentiated at a moved point: restore x[i] after each pair of calls",
                _GRAD, _grad_model(restore=False)),
        Mistake("gradient-check-over-analytic-norm",
                "the difference is divided by ‖g‖ alone: the relative error is "
                "‖g - n‖ / (‖g‖ + ‖n‖), which stays between 0 and 1 (and is defined when g = 0)",
                _GRAD, _grad_model(over="g")),
        Mistake("gradient-check-not-relative",
                "the error is ‖g - n‖, not divided by ‖g‖ + ‖n‖: it then grows with the scale of "
                "the loss, and no single bar fits every gradient", _GRAD, _grad_model(over="none")),
        Mistake("gradient-check-step-too-large",
                "the step is ε = 1e-2: the central difference's error, about ε², is then about "
                "1e-5 and fails a right gradient; use ε = 1e-6", _GRAD, _grad_model(eps=1e-2)),
        Mistake("gradient-check-step-too-small",
                "the step is ε = 1e-12: f(x + ε) and f(x - ε) then differ in their last digits "
                "only, and rounding, divided by 2ε, swamps the difference; use ε = 1e-6",
                _GRAD, _grad_model(eps=1e-12)),
        Mistake("gradient-check-all-entries-at-once",
                "every entry of x is moved by ε at once (x + ε, not only x[i] + ε): each entry "
                "of the numeric gradient is then the sum of all the partial derivatives; move one "
                "entry at a time", _GRAD, _grad_model(moving="all")),
        Mistake("gradient-check-first-axis-only",
                "the loop runs over range(len(x)), the first axis only: when x has 2 axes, x[i] "
                "is a whole row, moved at once; loop over every entry, np.ndindex(x.shape)",
                _GRAD, _grad_model(moving="rows")),
        Mistake("gradient-check-no-factor-2",
                "the central difference is divided by ε, not 2ε: the numeric gradient is twice "
                "the right one", _GRAD, _grad_model(divisor=1)),
        Mistake("gradient-check-max-denominator",
                "the difference is divided by max(‖g‖, ‖n‖), not by ‖g‖ + ‖n‖ (the notebook's "
                "relative error)", _GRAD, _grad_model(over="max")),
    ),
)


# ── 07.6 · RMSNorm backward (a transfer: 07.2's rule carried to another norm) ─────────────────

_RMS = _LN + " (its derivation and pitfall)"  # the rule 07.6 carries over


def _rms_norm_backward(d_out, x, gamma, eps=1e-5):
    """The library's RMSNorm.backward (notebook 09), after its forward on x."""
    norm = RMSNorm(x.shape[-1], eps)
    norm.gamma[...] = gamma
    norm.forward(x)
    d_x, grads = norm.backward(d_out)
    return d_x, grads["gamma"]


def _rms_model(*, divide=True, root_eps=True, use_eps=True, fixed_eps=False, mean_g=False,
               correction=True, use_gamma=True, reduce=np.mean, corr_with_x=False,
               d_gamma_x=False, d_gamma_axis0=False):
    def model(d_out, x, gamma, eps=1e-5):
        e = 1e-5 if fixed_eps else (eps if use_eps else 0.0)
        ms = np.mean(x * x, axis=-1, keepdims=True)
        rms = np.sqrt(ms + e) if root_eps else np.sqrt(ms) + e
        x_hat = x / rms
        g = d_out * gamma if use_gamma else d_out
        c = x if corr_with_x else x_hat
        d_x = g - (np.mean(g, axis=-1, keepdims=True) if mean_g else 0)
        d_x = (d_x - (c * reduce(g * c, axis=-1, keepdims=True) if correction else 0)) / (
            rms if divide else 1.0)
        d_g = d_out * (x if d_gamma_x else x_hat)
        d_gamma = d_g.sum(axis=0) if d_gamma_axis0 else d_g.reshape(-1, x.shape[-1]).sum(axis=0)
        return d_x, d_gamma
    return model


def _rms_case(label, lead, d_model, scale=2.0, eps=None):
    x = _rng.normal(size=(*lead, d_model)) * scale
    gamma = 1 + _rng.normal(0, 0.5, d_model)  # far from ones, so forgetting it shows
    d_out = _rng.normal(size=(*lead, d_model))
    return Case(label, (d_out, x, gamma), {} if eps is None else {"eps": eps})


RMS_NORM_BACKWARD = Exercise(
    key="07.6", name="rms_norm_backward", reference=_rms_norm_backward, see=_RMS,
    outputs=("d_x", "d_gamma"),
    cases=(
        Case("x = [[1, -1, 1, -1]], gamma = 1, eps = 0, d_out = [[1, 0, 0, 0]] "
             "(by hand: d_x = [[0.75, 0.25, -0.25, 0.25]], d_gamma = [1, 0, 0, 0])",
             (np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([[1.0, -1.0, 1.0, -1.0]]), np.ones(4)),
             {"eps": 0.0}),
        _rms_case("3 positions, d_model = 8, gamma not 1, eps = 1e-5 (the default)", (3,), 8),
        _rms_case("a batch of 2 sequences of 4 positions, d_model = 6", (2, 4), 6),
        _rms_case("small x (about 0.1) with eps = 0.01, where the place of ε matters", (2,), 5,
                  scale=0.1, eps=0.01),
    ),
    mistakes=(
        Mistake("rms-backward-layer-norm-mean-term",
                "the term -mean(g) of LayerNorm's backward is kept: RMSNorm subtracts no mean, "
                "so no gradient flows through one (only the x_hat · mean(g · x_hat) term "
                "remains)", _RMS, _rms_model(mean_g=True)),
        Mistake("rms-backward-rms-held-constant",
                "d_x = g / rms: the root mean square is treated as a constant, but it moves when "
                "x moves (the term -x_hat · mean(g · x_hat), the derivative of 1/rms, is "
                "missing)", _RMS, _rms_model(correction=False)),
        Mistake("rms-backward-not-divided-by-rms",
                "d_x is not divided by rms: both terms, g and -x_hat · mean(g · x_hat), pass "
                "back through x_hat = x / rms, so both are divided by rms", _RMS,
                _rms_model(divide=False)),
        Mistake("rms-backward-eps-outside-root",
                "ε is added outside the root, sqrt(mean(x²)) + ε: RMSNorm divides by "
                "sqrt(mean(x²) + ε), as LayerNorm by sqrt(var + ε)", _RMS,
                _rms_model(root_eps=False)),
        Mistake("rms-backward-no-eps",
                "ε is left out: rms = sqrt(mean(x²)), not sqrt(mean(x²) + ε)", _RMS,
                _rms_model(use_eps=False)),
        Mistake("rms-backward-eps-argument-ignored",
                "ε is fixed at 1e-5 inside the function: use the argument eps", _RMS,
                _rms_model(fixed_eps=True)),
        Mistake("rms-backward-gamma-forgotten",
                "d_x uses g = d_out, not g = d_out * gamma: the gradient passes back through the "
                "scale gamma first", _RMS, _rms_model(use_gamma=False)),
        Mistake("rms-backward-sum-not-mean",
                "the correction term uses a sum over the features, not a mean (the 1/d_model "
                "is missing)", _RMS, _rms_model(reduce=np.sum)),
        Mistake("rms-backward-x-not-x_hat-in-correction",
                "the correction term uses x, not x_hat = x / rms: x · mean(g · x) is rms² times "
                "too large", _RMS, _rms_model(corr_with_x=True)),
        Mistake("rms-backward-d_gamma-from-x",
                "d_gamma sums d_out * x: y = gamma * x_hat, so it sums d_out * x_hat", _RMS,
                _rms_model(d_gamma_x=True)),
        Mistake("rms-backward-d_gamma-summed-over-axis-0",
                "d_gamma is summed over axis 0 only: with a batch axis it must be summed over "
                "every position (all axes but the last), shape (d_model,)", _RMS,
                _rms_model(d_gamma_axis0=True)),
    ),
)

# ── 07.7 · label-smoothed cross-entropy (a transfer: §6's one position to a padded batch) ─────

_CE = "07 §6 · The loss, with label smoothing"


def _smoothed_cross_entropy(logits, targets, epsilon, ignore_id):
    """The library's cross_entropy (notebook 07), its loss only."""
    return cross_entropy(logits, targets, label_smoothing=epsilon, ignore_id=ignore_id)[0]


def _ce_model(*, log_p="stable", q="all", rows="counted"):
    def model(logits, targets, epsilon, ignore_id):
        x, targets = np.asarray(logits, dtype=float), np.asarray(targets)
        n_vocab, counted = x.shape[-1], targets != ignore_id
        if log_p == "log-softmax":  # np.log(softmax(x)): log(0) = -inf
            lp = np.log(softmax(x))
        elif log_p == "log-softmax-plus-tiny":  # finite, but log(1e-12) where p underflows
            lp = np.log(softmax(x) + 1e-12)
        else:  # "no-shift" leaves out the maximum, so exp overflows for large logits
            top = 0.0 if log_p == "no-shift" else x.max(axis=-1, keepdims=True)
            lp = x - top - np.log(np.exp(x - top).sum(axis=-1, keepdims=True))
        one = np.eye(n_vocab)[np.where(counted, targets, 0)]  # (..., n_vocab) one-hot
        not_pad = np.arange(n_vocab) != ignore_id  # the Annotated Transformer's: no mass on pad
        share = {"all": epsilon / n_vocab, "others": epsilon / (n_vocab - 1) * (1 - one),
                 "annotated": epsilon / (n_vocab - 2) * (1 - one) * not_pad,
                 "overwritten": epsilon / n_vocab * (1 - one), "target": 0.0, "none": 0.0}[q]
        per_row = -((share + (1 - (0 if q == "none" else epsilon)) * one) * lp).sum(axis=-1)
        if rows == "all":  # ignore_id not applied: every row's loss, averaged
            return float(per_row.mean())
        total = per_row[counted].sum()
        return float({"counted": total / counted.sum(), "size": total / counted.size,
                      "sum": total}[rows])
    return model


def _ce_case(label, logits, targets, epsilon=0.1, ignore_id=0):
    return Case(label, (logits, np.array(targets), epsilon, ignore_id))


_CONFIDENT = _rng.normal(size=(4, 6)) * 2
_CONFIDENT[0, 2] = _CONFIDENT[2, 0] = _CONFIDENT[2, 4] = -1000.0  # exp(-1000) is 0 in float64

SMOOTHED_CROSS_ENTROPY = Exercise(
    key="07.7", name="label_smoothed_cross_entropy", reference=_smoothed_cross_entropy, see=_CE,
    cases=(
        _ce_case("logits = log([[1, 2, 1], [1, 1, 1]]), targets = [1, 0], ε = 0.3, ignore_id = 0: "
                 "one row counted, p = [0.25, 0.5, 0.25] (by hand: 1.2 ln 2 ≈ 0.8318)",
                 np.log([[1.0, 2.0, 1.0], [1.0, 1.0, 1.0]]), [1, 0], epsilon=0.3),
        _ce_case("a confident model: logits (4, 6) with entries of -1000 (probability 0 in "
                 "floating point), ε = 0.1, the last row padded", _CONFIDENT, [3, 5, 1, 0]),
        _ce_case("large logits (about 1000, a few apart), (3, 5), ε = 0.1, no padding",
                 1000 + _rng.normal(size=(3, 5)) * 3, [2, 4, 1]),
        _ce_case("a padded batch (2, 5, 7), ε = 0.1, ignore_id = 0",
                 _rng.normal(size=(2, 5, 7)) * 2, [[3, 4, 5, 2, 0], [6, 2, 0, 0, 0]]),
    ),
    mistakes=(
        Mistake("smoothed-ce-log-of-softmax",
                "np.log(softmax(logits)): a probability of e^-1000 is 0 in floating point, and "
                "log 0 = -inf; with smoothing every token's log-probability enters the loss, so "
                "it is infinite. Compute log p = x - max - log(sum(exp(x - max))) directly",
                _CE, _ce_model(log_p="log-softmax")),
        Mistake("smoothed-ce-log-of-softmax-plus-1e-12",
                "np.log(softmax(logits) + 1e-12): finite, but wrong wherever a probability is "
                "below about 1e-12 (log p is e.g. -1000 there, not log 1e-12 ≈ -27.6). Compute "
                "log p = x - max - log(sum(exp(x - max))) directly", _CE,
                _ce_model(log_p="log-softmax-plus-tiny")),
        Mistake("smoothed-ce-no-max-shift",
                "log p = x - log(sum(exp(x))) without subtracting the maximum first: exp(1000) "
                "overflows to inf. Subtract each row's maximum before exp", _CE,
                _ce_model(log_p="no-shift")),
        Mistake("smoothed-ce-spread-over-other-tokens",
                "the smoothing is spread over the other tokens, ε/(n_vocab - 1) each, with 1 - ε "
                "on the target: that is another common convention (fairseq's), not a slip, but "
                "not this exercise's: here, as in notebook 07, every token gets ε/n_vocab, the "
                "target included, and the target 1 - ε on top", _CE, _ce_model(q="others")),
        Mistake("smoothed-ce-annotated-transformer-convention",
                "the smoothing is spread over the tokens other than the target and <pad> "
                "(ignore_id), ε/(n_vocab - 2) each, with nothing on <pad>: that is another "
                "convention (the Annotated Transformer's), not a slip, but not this exercise's: "
                "here, as in notebook 07, every token gets ε/n_vocab, <pad> and the target "
                "included, and the target 1 - ε on top", _CE, _ce_model(q="annotated")),
        Mistake("smoothed-ce-target-overwritten",
                "the target's entry is set to 1 - ε, not raised by 1 - ε: it loses its own "
                "share ε/n_vocab, and q no longer sums to 1 (q[t] += 1 - ε, not q[t] = 1 - ε)",
                _CE, _ce_model(q="overwritten")),
        Mistake("smoothed-ce-target-only",
                "ε is applied to the target only, -(1 - ε)·log p_target: the other tokens must "
                "get their share ε/n_vocab, so that their log-probabilities enter the loss",
                _CE, _ce_model(q="target")),
        Mistake("smoothed-ce-no-smoothing",
                "epsilon is not used: this is the plain cross-entropy -log p_target", _CE,
                _ce_model(q="none")),
        Mistake("smoothed-ce-ignored-rows-counted",
                "the rows whose target is ignore_id (padding) are in the mean: their loss must "
                "count for nothing", _CE, _ce_model(rows="all")),
        Mistake("smoothed-ce-mean-over-all-rows",
                "the ignored rows are left out of the sum but not out of the count: divide by "
                "the number of rows that count, not by the number of all rows", _CE,
                _ce_model(rows="size")),
        Mistake("smoothed-ce-sum-not-mean",
                "the losses of the counted rows are summed, not averaged", _CE,
                _ce_model(rows="sum")),
    ),
)

# ── 07.8 · attention's backward (§2: the centre of the backward pass) ────────────────────────

_ATT = "07 §2 · Softmax and attention"


def _attention_case(label, lead, t_q, t_k, d_k, d_v, *, causal=False, keys=None):
    """Q, K, V, the weights softmax(Q Kᵀ / √d_k) they give (keys from `keys` on blocked, or
    a causal mask), and d_out."""
    Q, K = _rng.normal(size=(*lead, t_q, d_k)), _rng.normal(size=(*lead, t_k, d_k))
    V, d_out = _rng.normal(size=(*lead, t_k, d_v)), _rng.normal(size=(*lead, t_q, d_v))
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    if causal:
        scores = np.where(np.triu(np.ones((t_q, t_k), dtype=bool), 1), -np.inf, scores)
    if keys is not None:
        scores[..., keys:] = -np.inf
    return Case(label, (Q, K, V, softmax(scores), d_out))


def _att_model(*, scale=-0.5, scale_d_K=True, through_softmax="right"):
    def model(Q, K, V, weights, d_out):
        d_V = np.swapaxes(weights, -1, -2) @ d_out
        d_P = d_out @ np.swapaxes(V, -1, -2)
        if through_softmax == "right":
            d_S = weights * (d_P - (d_P * weights).sum(axis=-1, keepdims=True))
        elif through_softmax == "no-correction":
            d_S = weights * d_P
        elif through_softmax == "skipped":
            d_S = d_P
        else:  # the sum over the queries, axis -2
            d_S = weights * (d_P - (d_P * weights).sum(axis=-2, keepdims=True))
        factor = Q.shape[-1] ** scale
        d_Q = d_S @ K * factor
        d_K = np.swapaxes(d_S, -1, -2) @ Q * (factor if scale_d_K else 1.0)
        return d_Q, d_K, d_V
    return model


ATTENTION_BACKWARD = Exercise(
    key="07.8", name="attention_backward", reference=attention_backward, see=_ATT,
    outputs=("d_Q", "d_K", "d_V"),
    cases=(
        Case("one query, two keys, d_k = d_v = 1: Q = [[0]], K = [[1], [-1]], V = [[1], [3]], "
             "weights = [[0.5, 0.5]], d_out = [[1]] (by hand: d_Q = [[-1]], d_K = [[0], [0]], "
             "d_V = [[0.5], [0.5]])",
             (np.array([[0.0]]), np.array([[1.0], [-1.0]]), np.array([[1.0], [3.0]]),
              np.array([[0.5, 0.5]]), np.array([[1.0]]))),
        _attention_case("self-attention, T = 4, d_k = 3, d_v = 2", (), 4, 4, 3, 2),
        _attention_case("causal weights, T = 4, d_k = 4, d_v = 3 (a blocked key has weight 0)",
                        (), 4, 4, 4, 3, causal=True),
        _attention_case("a batch of 2 with 2 heads: 3 queries, 5 keys of which the last 2 are "
                        "padding, d_k = 4, d_v = 6, shapes (2, 2, T, d)", (2, 2), 3, 5, 4, 6,
                        keys=3),
    ),
    mistakes=(
        Mistake("attention-backward-scale-forgotten",
                "d_Q and d_K are not divided by √d_k: the scores are Q Kᵀ / √d_k, so their "
                "gradient reaches Q and K divided by √d_k", _ATT, _att_model(scale=0.0)),
        Mistake("attention-backward-scale-multiplied",
                "d_Q and d_K are multiplied by √d_k: the scores divide by √d_k, so the "
                "gradient is divided by it too", _ATT, _att_model(scale=0.5)),
        Mistake("attention-backward-divided-by-d_k",
                "d_Q and d_K are divided by d_k, not by √d_k", _ATT, _att_model(scale=-1.0)),
        Mistake("attention-backward-key-gradient-not-scaled",
                "d_Q is divided by √d_k but d_K is not: both come from the same scores "
                "Q Kᵀ / √d_k", _ATT, _att_model(scale_d_K=False)),
        Mistake("attention-backward-softmax-no-correction",
                "d_S = P ⊙ d_P: softmax's backward lost its correction term, "
                "d_S = P ⊙ (d_P - Σ_j d_P_j P_j) (one sum per row)", _ATT,
                _att_model(through_softmax="no-correction")),
        Mistake("attention-backward-softmax-skipped",
                "d_S = d_P: the gradient of the weights is passed to the scores as if softmax "
                "were the identity; it must go through softmax's backward", _ATT,
                _att_model(through_softmax="skipped")),
        Mistake("attention-backward-softmax-sum-over-queries",
                "softmax's backward sums over the queries (axis -2): each row of weights is one "
                "query's softmax over the keys, so the sum runs over the keys, the last axis",
                _ATT, _att_model(through_softmax="over-queries")),
    ),
)

EXERCISES = (SOFTMAX_BACKWARD, LAYER_NORM_BACKWARD, LRATE, ADAM_STEP, GRADIENT_ERROR,
             RMS_NORM_BACKWARD, SMOOTHED_CROSS_ENTROPY, ATTENTION_BACKWARD)
