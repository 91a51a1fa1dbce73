"""Strict parsers for the Python-literal list columns of annotation CSVs, without `eval`.

EPIC-KITCHENS CSVs store lists as `[2]`, `[2, 35]`, `['plate']`, `['ring:onion', 'potato']`.
These parsers accept exactly that grammar (brackets, comma-separated ints or single/double
quoted strings, optional spaces) and raise `ValueError` with a short reason otherwise; the
reader adds file, line and column.
"""

from __future__ import annotations

import re

_INT_LIST = re.compile(r"\[\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*,?\s*)?\]\Z")
_STR_ITEM = re.compile(r"""\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*(,|\Z)""", re.S)


def parse_int_list(text: str) -> list[int]:
    """'[2, 35]' -> [2, 35]."""
    text = text.strip()
    if not _INT_LIST.match(text):
        raise ValueError(f"{text!r} is not a list of integers like [2, 35]")
    return [int(t) for t in text[1:-1].replace(" ", "").split(",") if t]


def parse_str_list(text: str) -> list[str]:
    """ "['ring:onion', 'potato']" -> ['ring:onion', 'potato']."""
    text = text.strip()
    if len(text) < 2 or text[0] != "[" or text[-1] != "]":
        raise ValueError(f"{text!r} is not a list of strings like ['plate', 'knife']")
    body, items, pos = text[1:-1].strip(), [], 0
    while pos < len(body):
        m = _STR_ITEM.match(body, pos)
        if not m:
            raise ValueError(f"{text!r} is not a list of quoted strings like ['plate', 'knife']")
        items.append(_unescape(m.group(1)[1:-1]))
        pos = m.end()
        if m.group(2) == "," and pos >= len(body.rstrip()):
            break  # trailing comma
    return items


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s) if "\\" in s else s
