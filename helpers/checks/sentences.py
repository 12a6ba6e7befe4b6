"""The sentences of a verdict that are built from the cases: which cases pass and which fail, the
header of a message, the pointer to a notebook section. In the language `use_language` chose."""

from __future__ import annotations

import inspect
import re

import numpy as np

from helpers.language import language, tr

_ABSENT = object()  # a parameter a case leaves at its default
STATES = ("left at its default", "None", "given")  # of an argument; words passes them through tr
_SAID: list[str] = []  # the texts a probe returns as data (see `said`)


def probe_text(text: str) -> str:
    """Note `text`, a text a probe returns as its result (with {fields}, a template it fills
    with str.format), so that a message shows it in the chosen language (`said`). The result
    itself stays English: the learner's and the reference's are compared as data, the learner's
    computed in the grading child, which knows no language."""
    _SAID.append(text)
    return text


def said(text: str) -> str:
    """A probe's text in the chosen language (`probe_text`); any other text as it is (a token
    such as "add" is data, not a word to translate)."""
    for template in _SAID:
        if "{" not in template:
            if text == template:
                return tr(template)
            continue
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>.+?)", re.escape(template))
        match = re.fullmatch(pattern, text)
        if match:
            return tr(template, **match.groupdict())
    return text


def _named_arguments(ex, case):
    """{parameter: value} of one case's call, named as the reference names its parameters
    ("argument k" where it cannot tell); _ABSENT for a parameter left at its default."""
    args, kwargs = case.arguments()
    try:
        params = [p for p in inspect.signature(ex.reference).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    named = {(params[k].name if k < len(params) else f"argument {k + 1}"): value
             for k, value in enumerate(args)}
    named.update(kwargs)
    return {**{p.name: _ABSENT for p in params}, **named}


def _traits(ex):
    """[(what, [its value on each case])]: traits of the cases' arguments that a message can
    name, in the order a message prefers them: an argument None or given, its number of axes,
    its dtype; then whether the case is done by hand."""
    named = [_named_arguments(ex, case) for case in ex.cases]
    names = list(dict.fromkeys(name for each in named for name in each))
    found = []
    for name in names:
        values = [each.get(name, _ABSENT) for each in named]
        found.append(((name, "state"), [STATES[0] if v is _ABSENT else
                                        STATES[1] if v is None else STATES[2] for v in values]))
    for kind in ("axes", "dtype"):
        for name in names:
            values = [each.get(name, _ABSENT) for each in named]
            if all(isinstance(v, np.ndarray) for v in values):
                found.append(((name, kind), [v.ndim if kind == "axes" else str(v.dtype)
                                             for v in values]))
    found.append((("", "hand"), ["by hand" in case.label for case in ex.cases]))
    return found


def _either(values):
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else tr("{some} or {last}", some=", ".join(values[:-1]),
                                                 last=values[-1])


def _which_pass(ex, passed):
    """One sentence naming a trait of the arguments that the passing cases have and the failing
    ones do not ("The cases where x has 2 axes pass; those where it has 3 fail."), or ""."""
    def words(kind, values):
        values = sorted(set(values), key=str)
        if kind == "axes":
            if values == [1]:
                return tr("has 1 axis")
            return tr("has {values} axes", values=_either(values))
        if kind == "dtype":
            return tr("is {values}", values=_either(values))
        return _either([tr("is {value}", value=tr(v)) for v in values])

    n_pass, n_fail = sum(passed), len(passed) - sum(passed)
    for (name, kind), values in _traits(ex):
        good = {v for v, ok in zip(values, passed) if ok}
        bad = {v for v, ok in zip(values, passed) if not ok}
        if good & bad or not good or not bad:
            continue
        if language() != "en":  # no singular and plural to choose between
            if kind == "hand":
                return tr("The cases done by hand pass; the others fail." if True in good else
                          "The cases not done by hand pass; the others fail.")
            return tr("The cases where {name} {good} pass; those where it {bad} fail.",
                      name=name, good=words(kind, good), bad=words(kind, bad))
        these = "The case" if n_pass == 1 else "The cases"
        those = "the one" if n_fail == 1 else "those"
        passes, fails = ("passes" if n_pass == 1 else "pass"), ("fails" if n_fail == 1 else "fail")
        if kind == "hand":
            hand = "done by hand" if True in good else "not done by hand"
            return f"{these} {hand} {passes}; the other{'' if n_fail == 1 else 's'} {fails}."
        return (f"{these} where {name} {words(kind, good)} {passes}; {those} where it "
                f"{words(kind, bad)} {fails}.")
    return ""


def short(text, width=76):
    """text cut at a word before `width` characters, with an ellipsis (Chinese, which has no
    spaces between words, at `width` // 2 characters)."""
    if language() != "en":
        width //= 2
        return text if len(text) <= width else text[:width - 1] + "…"
    if len(text) <= width:
        return text
    return text[:text.rfind(" ", 0, width - 1)].rstrip(",;:") + " …"


def which_cases(ex, wrong):
    """The lines that say which cases pass and which fail (none when every case fails)."""
    passed = [i not in wrong for i in range(len(ex.cases))]
    if all(passed) or not any(passed):
        return ""
    sentence = _which_pass(ex, passed) or tr("It passes {n} of the {total} cases:",
                                             n=sum(passed), total=len(passed))
    end = ("." if language() == "en" else "。")
    lines = [f"  {sentence[:-1] + tr(':') if sentence.endswith(end) else sentence}"]
    lines += [f"    {'✓' if ok else '✗'} {k}. {short(tr(case.label))}"
              for k, (case, ok) in enumerate(zip(ex.cases, passed), 1)]
    return "\n".join(lines) + "\n"


def header(ex, mark):
    return f"{mark} {ex.key} {ex.name}"


def see(section, lower=False):
    """"See 01 §4 · Why divide by √d_k." (lower: "see ...", inside a sentence)."""
    section = tr(section)
    text = tr("See {section}", section=section)
    if lower and language() == "en":
        text = text[0].lower() + text[1:]
    return text + ("" if section[-1] in ".?!。" else tr("."))
