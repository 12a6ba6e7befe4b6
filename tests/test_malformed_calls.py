"""Malformed calls to the public API of modern.py, lm.py, decoding.py, training.py (tests/malformed.py
lists them): every one raises a ValueError or TypeError that names the argument it gets wrong,
before any work. None returns (silent), none fails deep inside NumPy (unclear)."""

import pytest

from tests.malformed import CALLS, Call, classify, names


def test_there_are_at_least_300_malformed_calls_over_the_four_modules():
    assert len(CALLS) >= 300, len(CALLS)


@pytest.mark.parametrize("call", [pytest.param(c, id=f"{i:03d} {c.label}")
                                  for i, c in enumerate(CALLS)])
def test_a_malformed_call_is_refused_naming_its_argument(call):
    kind, what = classify(call)
    assert kind == "good", what


def test_the_classifier_can_tell_silent_and_unclear_calls():
    assert classify(Call("silent", "x", lambda: 1))[0] == "silent"
    assert classify(Call("unclear", "x", lambda: [][1]))[0] == "unclear"
    assert classify(Call("other name", "x", lambda: int("y")))[0] == "unclear"

    def unexpected(**kwargs):
        raise TypeError("f() got an unexpected keyword argument 'x'")
    assert classify(Call("no such argument", "x", unexpected))[0] == "unclear"
    assert names("x must be a number", "x") and names("got x=3", "x")
    assert not names("the max of y", "x") and not names("mix", "x")


def test_the_readme_gives_the_number_of_calls():
    from tests.exercises import ROOT
    assert f"{len(CALLS)} malformed calls" in (ROOT / "README.md").read_text(encoding="utf-8")
