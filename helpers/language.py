"""The language of what the helpers write for a learner: English (the default) or Chinese.

A notebook chooses once, in its setup cell (the Chinese edition, notebooks/zh/, does)::

    from helpers.language import use_language
    use_language("zh")

From then on the checkers' messages, the explorers' labels and status lines, and the grader's
report (``python -m helpers.checks --lang zh``) are in Chinese, and matplotlib draws Chinese
text with Noto Sans SC. The code, its names and what a notebook's own code prints stay as they
are: the two editions run the same code and print the same outputs.

The helpers write English, as ever, through ``tr``: ``tr(text, **fields)`` returns ``text`` (or,
in Chinese, its entry in helpers/zh.json) with ``fields`` filled in by ``str.format``. A text
without an entry stays English; tests/test_language.py fails on every text that lacks one.
"""

from __future__ import annotations

import json
import os
import warnings
from functools import cache

__all__ = ["LANGUAGES", "language", "tr", "use_language"]

LANGUAGES = ("en", "zh")
CJK_FONT = "Noto Sans SC"  # Google's Noto Sans, Simplified Chinese (SIL OFL 1.1), from PyPI
_chosen = "en"


def use_language(code: str) -> None:
    """Choose the language of the helpers' messages: "en" (English) or "zh" (Chinese)."""
    global _chosen
    if code not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {code!r}")
    if code == "zh" and cjk_font_path() is not None:
        use_cjk_font()
    elif code == "zh":  # the messages still work; only figures with Chinese text would not
        warnings.warn("no Chinese font: figures will draw Chinese text as boxes; install the "
                      "set-up's requirements (pip install -r requirements.txt)", stacklevel=2)
    _chosen = code


def language() -> str:
    """The language chosen by `use_language` ("en" until then)."""
    return _chosen


@cache
def chinese() -> dict[str, str]:
    """English text -> its Chinese, from helpers/zh.json."""
    with open(os.path.join(os.path.dirname(__file__), "zh.json"), encoding="utf-8") as f:
        return json.load(f)


def tr(text: str, /, **fields) -> str:
    """`text` in the chosen language, its {fields} filled in."""
    if _chosen == "zh":
        text = chinese().get(text, text)
    return text.format(**fields) if fields else text


def cjk_font_path() -> str | None:
    """The Noto Sans SC font file that the set-up installs (pylopdf-fonts-zh-cn), or None."""
    try:
        import pylopdf_fonts_zh_cn
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(pylopdf_fonts_zh_cn.__file__), "NotoSansSC-Regular.otf")
    return path if os.path.exists(path) else None


def use_cjk_font() -> None:
    """Let matplotlib draw Chinese: Noto Sans SC after the default font, which still draws every
    Latin letter and digit (a figure without Chinese text is drawn exactly as before)."""
    import matplotlib
    from matplotlib import font_manager

    path = cjk_font_path()
    if path is None:
        raise RuntimeError("Chinese text needs the font package pylopdf-fonts-zh-cn: "
                           "pip install -r requirements.txt (make lab installs it)")
    if CJK_FONT not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(path)
    family = list(matplotlib.rcParams["font.family"])
    if CJK_FONT not in family:
        matplotlib.rcParams["font.family"] = [*family, CJK_FONT]
