"""Every English text the helpers can show a learner, and whether helpers/zh.json has its Chinese.

    python tests/zh_texts.py             # the texts without Chinese, as JSON {English: ""}
    python tests/zh_texts.py --stale     # entries of zh.json that no helper shows any more
    python tests/zh_texts.py --sees      # the checkers' "see NN §k · heading", from notebooks/zh

The texts: the first argument of every ``tr(...)`` and ``probe_text(...)`` call in helpers/ (a
literal, or the literals of an ``a if c else b``); the catalogue's data, which the checkers pass through ``tr``: every
mistake's ``says`` and ``see``, every case's ``label``, every exercise's ``see``; and the texts
that reach ``tr`` only at run time, listed in tests/zh_runtime_texts.json with where they are
written (an explorer's title and note, its controls' descriptions, option labels), collected by
building every explorer in Chinese; a new one missing from the list shows in English.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZH_JSON = ROOT / "helpers" / "zh.json"


def _literals(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return []


def tr_texts() -> dict[str, list[str]]:
    """{text: [where]} for the literal first arguments of tr() and probe_text() in helpers/."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                    "tr", "probe_text") and node.args:
                for text in _literals(node.args[0]):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(text, []).append(where)
    return found


def catalogue_texts() -> dict[str, list[str]]:
    """{text: [where]} for the mistakes' says and see, the cases' labels, the exercises' see."""
    from helpers.checks import CATALOGUE
    from helpers.checks.sentences import STATES

    found: dict[str, list[str]] = {}
    for key, ex in CATALOGUE.items():
        found.setdefault(ex.see, []).append(f"{key} see")
        for case in ex.cases:
            found.setdefault(case.label, []).append(f"{key} case")
        for m in ex.mistakes:
            found.setdefault(m.says, []).append(f"{key} {m.name} says")
            found.setdefault(m.see, []).append(f"{key} {m.name} see")
    for state in STATES:
        found.setdefault(state, []).append("helpers/checks/sentences.py _traits")
    return found


RUNTIME = ROOT / "tests" / "zh_runtime_texts.json"


def english_texts() -> dict[str, list[str]]:
    found = tr_texts()
    for text, where in catalogue_texts().items():
        found.setdefault(text, []).extend(where)
    for text, where in json.loads(RUNTIME.read_text(encoding="utf-8")).items():
        found.setdefault(text, []).append(where)
    return found


def chinese() -> dict[str, str]:
    return json.loads(ZH_JSON.read_text(encoding="utf-8")) if ZH_JSON.exists() else {}


def sees_in_chinese() -> dict[str, str]:
    """{a checker's `see`: the same section named by its heading in the Chinese notebook}; a
    see's remark in parentheses, "(swapaxes, not .T)", is left to translate ("（...）")."""
    from tests.test_checks import all_sees
    from tests.test_checks import headings as sections

    found = {}
    for _, see in all_sees():
        number, section, title, remark = re.fullmatch(r"(\d\d) §(\d+) · (.+?)( \(.*\))?",
                                                      see).groups()
        english, chinese_ = sections(number), sections(number, "notebooks/zh")
        k = english.index(next(h for h in english if h == (section, title)))
        zh_section, zh_title = chinese_[k]
        found[see] = f"{number} §{zh_section} · {zh_title}" + (f"（{remark[2:-1]}）"
                                                                 if remark else "")
    return found


def main(argv: list[str]) -> int:
    texts, zh = english_texts(), chinese()
    if "--sees" in argv:
        print(json.dumps(sees_in_chinese(), indent=1, ensure_ascii=False))
        return 0
    if "--stale" in argv:
        result = {text: value for text, value in zh.items() if text not in texts}
    else:
        result = {text: "" for text in texts if text not in zh}
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
