"""Parsers for the Python-literal list columns of annotation CSVs, by `ast.literal_eval`.

EPIC-KITCHENS CSVs store lists as `[2]`, `[2, 35]`, `['plate']`, `['ring:onion', 'potato']`.
`ast.literal_eval` reads them (literals only: no names, calls or operators run); these
parsers then require a list of integers / of strings and raise `ValueError` with a short
reason otherwise; the reader adds file, line and column. Adjacent string literals
(`['a' 'b']`, which Python would join into 'ab') are refused: in a CSV they are a missing
comma.
"""

from __future__ import annotations

import ast
import io
import tokenize

# what a malformed, deeply nested or huge literal can raise inside literal_eval
_PARSE_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)


def parse_int_list(text: str) -> list[int]:
    """'[2, 35]' -> [2, 35]."""
    value = _list(text)
    if value is None or not all(type(x) is int for x in value):
        raise ValueError(f"{text.strip()!r} is not a list of integers like [2, 35]")
    return value


def parse_str_list(text: str) -> list[str]:
    """ "['ring:onion', 'potato']" -> ['ring:onion', 'potato']."""
    text = text.strip()
    if len(text) < 2 or text[0] != "[" or text[-1] != "]":
        raise ValueError(f"{text!r} is not a list of strings like ['plate', 'knife']")
    value = _list(text)
    if (
        value is None
        or not all(isinstance(x, str) for x in value)
        or (_string_tokens(text) != len(value))
    ):
        raise ValueError(f"{text!r} is not a list of quoted strings like ['plate', 'knife']")
    return value


def _list(text: str) -> list | None:
    """The list literal `text` holds, or None."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        value = ast.literal_eval(text)
    except _PARSE_ERRORS:
        return None
    return value if isinstance(value, list) else None


def _string_tokens(text: str) -> int:
    """How many string literals `text` holds (adjacent ones count separately)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return sum(t.type == tokenize.STRING for t in tokens)
