"""The characters a reader's terminal or text layout acts on rather than shows.

One rule for every place that takes text from elsewhere: `terminal_text` writes these out as
escapes before the terminal sees them, and `wall_events` blanks them in the details a sandbox
reports. Standard library only, because the local worker imports `wall_events` and the worker
does not import rich.
"""

from __future__ import annotations

__all__ = ["ACTING_CATEGORIES", "UNSEEN_CATEGORIES", "UNSEEN_MARKS"]

#: Unicode categories acted on rather than shown: controls (C0, C1 and DEL), format characters
#: (bidi overrides, isolates and marks, zero-width characters, the soft hyphen), line and paragraph
#: separators, and lone surrogates (which would fail the terminal's encoding instead of printing).
#: Each user looks up ``unicodedata.category(char)`` in it inline: a call per character of a large
#: output costs a fifth more.
ACTING_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})

#: What a short label (a refusal's detail) also blanks, beyond the acting categories: characters
#: that draw nothing, so that two details that look alike are alike. Unassigned code points
#: (which include most of Unicode's default-ignorable reserve)...
UNSEEN_CATEGORIES = ACTING_CATEGORIES | {"Cn"}
#: ...and the assigned default-ignorable characters of other categories (Unicode's
#: Default_Ignorable_Code_Point): the combining grapheme joiner, the Hangul fillers, Khmer's
#: inherent vowels, Mongolian's and the general variation selectors. Output keeps them, where an
#: emoji's variation selector belongs; a label never needs one.
UNSEEN_MARKS = frozenset(
    chr(point)
    for first, last in (
        (0x034F, 0x034F),
        (0x115F, 0x1160),
        (0x17B4, 0x17B5),
        (0x180B, 0x180D),
        (0x180F, 0x180F),
        (0x3164, 0x3164),
        (0xFE00, 0xFE0F),
        (0xFFA0, 0xFFA0),
        (0xE0100, 0xE01EF),
    )
    for point in range(first, last + 1)
)
