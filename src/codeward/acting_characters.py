"""The characters a reader's terminal or text layout acts on rather than shows.

One rule for every place that takes text from elsewhere: `terminal_text` writes these out as
escapes before the terminal sees them, and `wall_events` blanks them in the details a sandbox
reports. Standard library only, because the local worker imports `wall_events` and the worker
does not import rich.
"""

from __future__ import annotations

__all__ = ["ACTING_CATEGORIES"]

#: Unicode categories acted on rather than shown: controls (C0, C1 and DEL), format characters
#: (bidi overrides, isolates and marks, zero-width characters, the soft hyphen), line and paragraph
#: separators, and lone surrogates (which would fail the terminal's encoding instead of printing).
#: Each user looks up ``unicodedata.category(char)`` in it inline: a call per character of a large
#: output costs a fifth more.
ACTING_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
