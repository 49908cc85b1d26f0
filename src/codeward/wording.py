"""Top-level because every layer words messages: a count with its noun, a word with its article,
so that users and models read '1 step' and 'an int', never '1 steps' or 'a int'."""

from __future__ import annotations

__all__ = ["a", "counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 step', '2 steps', '1,500 steps': the noun agrees with the count (`plural` if not noun + 's')."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def a(word: str) -> str:
    """'an int', 'a str', "an 'int'": the article a word takes, judged by its first letter."""
    first = next((character for character in word if character.isalnum()), "")
    return f"{'an' if first.lower() in 'aeiou' else 'a'} {word}"
