"""What the model reads when the local executor refuses its code: the syntax error, or each
breach of the policy (`policy`), with its line and a caret under its place."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CodeRefused", "Problem", "policy_report", "syntax_report", "unencodable"]


class CodeRefused(Exception):
    """The code does not compile or breaks the policy; `report` is what the model reads."""

    def __init__(self, report: str, error_type: str, problems: list[Problem] | None = None) -> None:
        super().__init__(report)
        self.report = report
        self.error_type = error_type
        #: Each breach of the policy, where the policy refused the code (none for a syntax error).
        self.problems = problems or []


@dataclass
class Problem:
    """One breach of the policy, and where it is in the code."""

    line: int
    col: int
    end_col: int | None
    message: str


def _source_line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _caret(text: str, col: int, end_col: int | None) -> str:
    width = max(1, (end_col - col) if end_col and end_col > col else 1)
    return f"    {text}\n    {' ' * col}{'^' * width}"


def syntax_report(source: str, error: SyntaxError) -> str:
    line = error.lineno or 1
    col = max(0, (error.offset or 1) - 1)
    end = (error.end_offset - 1) if error.end_offset and error.end_lineno == error.lineno else None
    text = error.text.rstrip("\n") if error.text else _source_line(source, line)
    return f"SyntaxError on line {line}: {error.msg}\n{_caret(text, col, end)}"


def policy_report(source: str, problems: list[Problem]) -> str:
    parts = ["The code was not run; fix these and send it again:"]
    for problem in sorted(problems, key=lambda p: (p.line, p.col)):
        text = _source_line(source, problem.line)
        parts.append(f"Line {problem.line}: {problem.message}\n{_caret(text, problem.col, problem.end_col)}")
    return "\n".join(parts)


def unencodable(source: str, filename: str, error: UnicodeEncodeError) -> SyntaxError:
    """The SyntaxError a block with a character UTF-8 cannot encode (a lone surrogate) is reported as,
    at that character: CPython's own parser raises an encoding error that names no line."""
    line_start = source.rfind("\n", 0, error.start) + 1
    line = source.count("\n", 0, error.start) + 1
    text = source[line_start:].partition("\n")[0]
    character = source[error.start]
    message = f"a lone surrogate {character!r} (U+{ord(character):04X}), which Python source cannot hold"
    return SyntaxError(message, (filename, line, error.start - line_start + 1, text))
