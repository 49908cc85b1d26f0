"""Top-level because every surface that shows text from elsewhere needs it: the agent's log, the command, batch, view.

Text from elsewhere (a sandbox, a model, a run file, a container's labels), as the terminal shows it.

What a sandbox prints is data, and a terminal obeys the control sequences in what it is given:
an OSC 52 write to the user's clipboard, a cursor moved up to overwrite the real answer, a link
whose text lies about its target, a bidi override that reorders what is read. Every piece of such
text codeward shows goes through `visible` (and, for rich, `visible_text`), so the terminal
receives each control character as the escaped text that names it, and rich reads none of it as
markup.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

__all__ = ["visible", "visible_text"]

#: Unicode categories acted on rather than shown: controls (C0, C1 and DEL), format characters
#: (bidi overrides, isolates and marks, zero-width characters, the soft hyphen), line and paragraph
#: separators, and lone surrogates (which would fail the terminal's encoding instead of printing).
#: Looked up inline, as a call per character of a large output costs a fifth more.
ACTING_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def visible(text: str, *, keep_lines: bool = True) -> str:
    """`text` with control and format characters written out (ESC as ``\\x1b``, U+202E as ``\\u202e``),
    so it cannot drive the terminal; newlines and tabs stay layout unless `keep_lines` is false."""
    kept = "\n\t" if keep_lines else ""
    return "".join(
        char
        if char in kept or unicodedata.category(char) not in ACTING_CATEGORIES
        else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


def visible_text(text: str, style: str = "") -> Text:
    """`text` made visible, as a rich `Text`: printed as it reads, its brackets never taken as markup."""
    return Text(visible(text), style=style)
