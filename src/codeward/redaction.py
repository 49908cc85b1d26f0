"""Top-level because every surface that writes text out (spans, run files, results, audit, the terminal) redacts through it.

Secrets codeward knows of, replaced by value wherever text leaves the process.

A field-by-field rule misses the secret that travels inside another text: a tool that fails
with its URL, ``int(token)``'s message, a model's code that prints the key it was given. So
codeward keeps the values themselves, and every writer replaces them wherever they appear.
Values are known from where codeward took them: MCP headers and URL credentials, ``--mcp-env``
and ``--env`` values, ``--var`` values read from files only their owner may read, the model
keys in the environment (variables whose names say KEY, TOKEN, SECRET, PASSWORD...), and
whatever a program marks with `mark_secret`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "holds_secret",
    "mark_secret",
    "mark_secrets_in",
    "redacted",
    "redacted_data",
    "url_without_secrets",
]

#: What a secret becomes in text codeward writes.
REDACTED = "[redacted]"
#: Shorter values are not kept: replacing "abc" everywhere would garble the text and hide nothing.
MIN_LENGTH = 6
#: Environment variables whose values are secrets: the keys litellm and the SDKs read.
_SECRET_ENVIRONMENT = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)(_|$)", re.IGNORECASE
)
#: URL query parameters that carry credentials (``?api_key=...``).
_SECRET_PARAMETER = re.compile(
    r"(^|[_-])(api[_-]?key|apikey|key|token|secret|password|passwd|auth|signature|sig|code)([_-]|$)", re.IGNORECASE
)

#: Where a sandbox cut a long output (its head, a note, its tail): a secret may straddle it, half on each side.
_CUT = re.compile(r"\n\[\.\.\. [^\]\n]{1,80} cut \.\.\.\]\n")
#: The shortest part of a secret redacted beside a cut.
_PART = 4

_lock = threading.Lock()
_marked: set[str] = set()
_pattern: tuple[frozenset[str], re.Pattern[str] | None] = (frozenset(), None)


def mark_secret(*values: str) -> None:
    """Treat each value as a secret from now on, in this process: it never appears in what codeward writes."""
    # the token alone is the secret of an Authorization header
    texts = [text for value in values if isinstance(value, str) for text in (value, value.removeprefix("Bearer "))]
    with _lock:
        for text in texts:
            if len(text.strip()) >= MIN_LENGTH:
                _marked.update(_forms(text))


def _forms(text: str) -> set[str]:
    """The secret as it may be written: itself, inside a JSON string, and percent-encoded in a URL."""
    return {text, json.dumps(text)[1:-1], urllib.parse.quote(text, safe=""), urllib.parse.quote_plus(text)}


def mark_secrets_in(value: Any) -> None:
    """Mark the texts a value holds (a variable read from a private file: a string, or strings in a dict or list)."""
    for text in _texts(value):
        mark_secret(text)


def _texts(value: Any, depth: int = 0) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif depth < 20 and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(key, depth + 1)
            yield from _texts(item, depth + 1)
    elif depth < 20 and isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _texts(item, depth + 1)


def holds_secret(value: Any) -> bool:
    """Whether any text the value holds contains a known secret."""
    pattern = _secrets_pattern()
    return pattern is not None and any(pattern.search(text) for text in _texts(value))


def redacted(text: str) -> str:
    """`text` with every known secret replaced by `REDACTED`, and the parts of one a cut left on either side of it."""
    pattern = _secrets_pattern()
    if pattern is None or not text:
        return text
    text = pattern.sub(REDACTED, text)
    return _around_cuts(text) if _CUT.search(text) else text


def redacted_data(value: Any) -> Any:
    """A JSON-like value with its secrets replaced in every text value, before it is serialized: replacing
    in the serialized text could take a secret that reads like the structure (``"steps"``) for it.
    Keys are the record's structure (a results line's ``status``, a run's ``steps``) and are kept."""
    if isinstance(value, str):
        return redacted(value)
    if isinstance(value, Mapping):
        return {key: redacted_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted_data(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redacted(str(value))  # what json.dumps(default=str) would have written


def _around_cuts(text: str) -> str:
    """The head of a secret just before a cut, and its tail just after, replaced too."""
    secrets = _known()
    pieces, last = [], 0
    for cut in _CUT.finditer(text):
        before = text[last : cut.start()]
        pieces += [_cut_ending(before, secrets), cut.group()]
        last = cut.end()
    pieces.append(text[last:])
    for index in range(2, len(pieces), 2):  # each text that follows a cut
        pieces[index] = _cut_beginning(pieces[index], secrets)
    return "".join(pieces)


def _cut_ending(text: str, secrets: frozenset[str]) -> str:
    for secret in secrets:
        for size in range(len(secret) - 1, _PART - 1, -1):
            if text.endswith(secret[:size]):
                return text[:-size] + REDACTED
    return text


def _cut_beginning(text: str, secrets: frozenset[str]) -> str:
    for secret in secrets:
        for size in range(len(secret) - 1, _PART - 1, -1):
            if text.startswith(secret[-size:]):
                return REDACTED + text[size:]
    return text


def url_without_secrets(url: str) -> str:
    """A URL as codeward shows and saves it: its user, password and credential parameters marked and hidden."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redacted(url)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user, _, password = (urllib.parse.unquote(part) for part in credentials.partition(":"))
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()  # as an Authorization header sends them
        mark_secret(*credentials.split(":", 1), user, password, f"{user}:{password}", basic)
        netloc = f"{REDACTED}@{host}"
    query = []
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAMETER.search(name):
            mark_secret(value)
            value = REDACTED
        query.append((name, value))
    shown = parts._replace(netloc=netloc, query=urllib.parse.urlencode(query, safe="[]"))
    return redacted(urllib.parse.urlunsplit(shown))


def _known() -> frozenset[str]:
    return frozenset(_marked | _environment_secrets())


def _secrets_pattern() -> re.Pattern[str] | None:
    """One expression for every known secret, longest first, made again only when the secrets change."""
    global _pattern
    secrets = _known()
    known, pattern = _pattern
    if secrets != known:
        ordered = sorted(secrets, key=len, reverse=True)
        pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        _pattern = (secrets, pattern)
    return pattern


def _environment_secrets() -> set[str]:
    found = set()
    for name, value in os.environ.items():
        if _SECRET_ENVIRONMENT.search(name) and len(value.strip()) >= MIN_LENGTH:
            found.update(_forms(value))
    return found
