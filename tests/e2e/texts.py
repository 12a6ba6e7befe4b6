"""What the browser suite types into the text boxes of the series' explorers.

The suite moves every slider, dropdown and toggle by itself; what to type into a text box is
specific to its explorer, so it is listed here, per notebook: (explorer title, text control,
text), typed in this order once the explorer's other controls were moved (driver.py,
``NotebookCheck.type_and_record``). The report records what the explorer showed after each
(``Report.typed``); the notebook's own browser test says what that must be.
"""

from __future__ import annotations

from pathlib import Path

TRANSLATION_TITLE = "Translation explorer"  # helpers.widgets.translation_explorer's title
# What tests/e2e/test_translation.py expects of each, in this order.
TYPED_SENTENCE = "Ein Hund rennt über die Xylophonwiese."  # a word the vocabulary lacks
BLANK = "   "  # only spaces: the sentence picked from the list, with a note
TOO_LONG = "Ein Mann mit einem orangefarbenen Hut. " * 40  # 281 pieces: more than its positions
CLEARED = ""  # back to the sentence picked from the list
TRANSLATION_TEXTS = (TYPED_SENTENCE, BLANK, TOO_LONG, CLEARED)

TEXTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "11_translation.ipynb": tuple((TRANSLATION_TITLE, "text", text)
                                  for text in TRANSLATION_TEXTS),
}


def texts_for(notebook) -> tuple[tuple[str, str, str], ...]:
    """What to type into the explorers of ``notebook`` (a path; matched by its file name)."""
    return TEXTS.get(Path(notebook).name, ())
