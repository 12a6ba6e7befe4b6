"""Report a comparison against a tolerance so that every machine prints the same line.

Another CPU, another BLAS build (another OpenBLAS kernel, MKL, Apple's Accelerate) or another
number of threads adds up the products of a matrix product in another order. A difference at
rounding level (about 1e-16 of the values in float64, 1e-7 in float32) is therefore a different
number on every machine, and a notebook that printed it would fail `pytest --nbval` on a learner's
machine although nothing is wrong. So every comparison in the series goes through `check` (or
`verdict`, its phrase alone): the test is asserted exactly as written, and the printed line holds
the tolerance, the verdict and, if asked, a bound `below` that the value is expected to stay
under with a wide margin on every machine (the line says so if it does not), never the rounding
noise itself.

    check("loop vs matrix", np.abs(loop - scores).max(), 1e-12, below=1e-14)
    # loop vs matrix: max |difference| < 1e-14, within the tolerance 1e-12

A value at rounding level is never printed; a value above the tolerance raises an AssertionError
that gives it in full. Exact equality (tol=0) is for results that are exact by construction
(a blocked key's weight, the same operations on the same numbers), not for two ways of computing.
"""

import math

__all__ = ["check", "fmt_bound", "verdict"]


def fmt_bound(x):
    """A tolerance or bound as the paper writes it: 1e-12, 5e-07 -> '5e-7', 0.001 -> '1e-3'."""
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"a bound must be a positive finite number, got {x!r}")
    mantissa, exponent = f"{x:.0e}".split("e")
    if float(f"{mantissa}e{exponent}") != x:  # 2.5e-3 is not 2e-3: say it in full
        mantissa, exponent = f"{x:.6e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def verdict(error, tol, *, below=None):
    """Assert 0 <= error <= tol and return the phrase that reports it, the same on every machine.

    error: a non-negative measured number (a max |difference|, a relative error); tol: the
    tolerance it must not exceed (0: it must be exactly 0); below: an optional bound under the
    tolerance that the value is expected to stay under on every machine (pick it far above the
    rounding noise). Returns "< below, within the tolerance tol", "within the tolerance tol" (no
    `below`, or a value between `below` and `tol`, said so), or "= 0 exactly".
    """
    error = float(error)
    tol = float(tol)
    if math.isnan(error) or error < 0:
        raise ValueError(f"error must be a non-negative number, got {error!r}")
    if tol < 0 or not math.isfinite(tol):
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    if tol == 0:
        if error != 0:
            raise AssertionError(f"expected exactly 0, got {error!r}")
        return "= 0 exactly"
    if not error <= tol:
        raise AssertionError(f"{error!r} exceeds the tolerance {fmt_bound(tol)}")
    if below is None:
        return f"within the tolerance {fmt_bound(tol)}"
    if not 0 < below < tol:
        raise ValueError(f"below must lie between 0 and tol={tol!r}, got {below!r}")
    if error < below:
        return f"< {fmt_bound(below)}, within the tolerance {fmt_bound(tol)}"
    # Legitimate on a machine that rounds very differently: say so rather than stop Run All.
    return (f"within the tolerance {fmt_bound(tol)} (not below {fmt_bound(below)}, "
            "as it is where this notebook was made)")


def check(what, error, tol, *, below=None, measure="max |difference|"):
    """Assert `error` <= `tol` and print "what: measure <verdict>"; see `verdict`."""
    try:
        phrase = verdict(error, tol, below=below)
    except AssertionError as failure:
        raise AssertionError(f"{what}: {measure}: {failure}") from None
    print(f"{what}: {measure} {phrase}")
