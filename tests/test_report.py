"""helpers/report.py: a comparison is asserted exactly and printed the same on every machine."""

import pytest

from helpers.report import check, fmt_bound, verdict


@pytest.mark.parametrize("x, text", [(1e-12, "1e-12"), (5e-7, "5e-7"), (0.001, "1e-3"),
                                     (2.5e-3, "2.5e-3"), (1e-6, "1e-6"), (0.05, "5e-2")])
def test_bounds_are_written_as_in_the_paper(x, text):
    assert fmt_bound(x) == text


@pytest.mark.parametrize("bad", [0, -1e-3, float("inf"), float("nan")])
def test_a_bound_is_positive_and_finite(bad):
    with pytest.raises(ValueError, match="positive finite"):
        fmt_bound(bad)


def test_rounding_noise_never_reaches_the_printed_line():
    """Two machines that round differently (1.7e-16 here, 5.6e-17 there) print the same line."""
    lines = {verdict(e, 1e-12, below=1e-14) for e in (1.7e-16, 5.6e-17, 0.0, 9.9e-15)}
    assert lines == {"< 1e-14, within the tolerance 1e-12"}
    assert {verdict(e, 1e-6) for e in (5.3e-10, 5.2e-10)} == {"within the tolerance 1e-6"}


def test_a_value_between_the_bound_and_the_tolerance_passes_and_says_so():
    text = verdict(3e-13, 1e-12, below=1e-14)
    assert text.startswith("within the tolerance 1e-12") and "not below 1e-14" in text


def test_above_the_tolerance_fails_with_the_value_in_full():
    with pytest.raises(AssertionError, match=r"1\.234e-09 exceeds the tolerance 1e-10"):
        verdict(1.234e-9, 1e-10)
    with pytest.raises(AssertionError, match=r"1\.00001e-12 exceeds the tolerance 1e-12"):
        verdict(1.00001e-12, 1e-12)  # not rounded to look like the tolerance itself
    with pytest.raises(AssertionError, match=r"^loop vs matrix: max \|difference\|: 2e-12 exceeds"):
        check("loop vs matrix", 2e-12, 1e-12)


def test_exact_equality_is_tolerance_zero():
    assert verdict(0.0, 0) == "= 0 exactly"
    with pytest.raises(AssertionError, match="expected exactly 0"):
        verdict(1e-300, 0)


@pytest.mark.parametrize("error, tol, below, match", [
    (-1.0, 1e-6, None, "non-negative"), (float("nan"), 1e-6, None, "non-negative"),
    (0.0, -1.0, None, "tol must be"), (0.0, 1e-6, 1e-5, "below must lie"),
    (0.0, 1e-6, 0.0, "below must lie"),
])
def test_misuse_is_refused(error, tol, below, match):
    with pytest.raises(ValueError, match=match):
        verdict(error, tol, below=below)


def test_check_prints_what_measure_and_verdict(capsys):
    check("rows of the weights", 2.2e-16, 1e-12, below=1e-14, measure="max |row sum - 1|")
    assert capsys.readouterr().out == ("rows of the weights: max |row sum - 1| < 1e-14, within the "
                                       "tolerance 1e-12\n")
