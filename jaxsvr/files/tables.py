"""Opening annotation tables (CSV) and JSON files: every problem is one `InputError` line.

The annotation readers (`jaxsvr.annotations.epic100`, caption CSVs in
`jaxsvr.nlp.captions`, `jaxsvr.annotations.youcook2`, `jaxsvr.annotations.msrvtt`) read their
files through here, so one set of rules holds for all of them:

- text is UTF-8 (a leading byte-order mark is allowed) without NUL bytes; other bytes
  name the file, line, column and byte offset of the first bad byte;
- CSV is parsed strictly (`csv.reader(strict=True)`): a quote that is never closed (it
  would swallow the rest of the file into one field) and a field longer than the csv
  module's limit name the row where the field starts; annotation fields never hold a
  line break, so a field spanning lines is reported as an unclosed quote too;
- a CSV needs a header with distinct column names and at least one data row, and every
  row as many fields as the header;
- JSON must parse (line and column of the first error); the non-standard constants
  NaN / Infinity are refused.

`Row` gives readers typed access that names file, line and column on failure, including
class ids checked against the size of the class table.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate

MAX_CLASS_ID = 999_999  # without a class table: ids beyond this are typos, not classes
_INT = re.compile(r"\s*[-+]?\d{1,18}\s*\Z")


def read_text(path: str | Path, what: str = "annotation file") -> str:
    """The UTF-8 text of a file; a missing, unreadable or non-UTF-8 file is one line."""
    path = locate(path)
    if path.is_dir():
        raise InputError(f"{what} {path} is a folder, not a file: name the file")
    if not path.exists():
        raise InputError(f"{what} {path} not found")
    if not path.is_file():  # /dev/null, a pipe
        raise InputError(f"{what} {path} is empty or not a regular file: name the text file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line, column = _line_column(data, e.start)
        raise InputError(
            f"{path}:{line}: byte 0x{data[e.start]:02x} at column {column} (file offset "
            f"{e.start}) is not UTF-8 text: save the file as UTF-8"
        ) from None
    if "\x00" in text:  # valid UTF-8 but binary: an array or archive given as a table
        line, column = _line_column(data, data.index(b"\x00"))
        raise InputError(
            f"{path}:{line}: NUL byte at column {column}: a binary file, not UTF-8 text; "
            "name the text file"
        )
    return text


def _line_column(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and byte column of `offset` in `data`."""
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


class Row(dict):
    """One CSV row (column -> text) that knows its file and line, for error messages."""

    def __init__(self, values, path: Path, line: int, columns: frozenset[str]):
        super().__init__(values)
        self.path, self.line, self.columns = path, line, columns

    def error(self, column: str, why: str) -> InputError:
        return InputError(f"{self.path}:{self.line}: column '{column}' {why}")

    def parse(self, column: str, parser: Callable[[str], list]):
        try:
            return parser(self[column])
        except ValueError as e:
            raise self.error(column, f"is malformed: {e}") from None

    def int(self, column: str) -> int:
        """The column as an integer (digits with an optional sign; no 1e3, no 1_000)."""
        text = self[column]
        if not _INT.match(text):
            raise self.error(column, f"is {_clip(text)!r}, expected an integer")
        return int(text)

    def class_id(self, column: str, num_classes: int | None = None) -> int:
        """The column as one class id in 0..num_classes-1 (or 0..MAX_CLASS_ID)."""
        return self._check_ids(column, [self.int(column)], num_classes)[0]

    def class_ids(
        self, column: str, parser: Callable[[str], list[int]], num_classes: int | None = None
    ) -> list[int]:
        """A list column (e.g. `[2, 35]`) of class ids, each checked like `class_id`."""
        return self._check_ids(column, self.parse(column, parser), num_classes)

    def _check_ids(self, column: str, ids: list[int], num_classes: int | None) -> list[int]:
        top = MAX_CLASS_ID if num_classes is None else num_classes - 1
        for cid in ids:
            if not 0 <= cid <= top:
                table = (
                    f"the class table has {num_classes} classes"
                    if num_classes is not None
                    else f"class ids go up to {MAX_CLASS_ID}"
                )
                raise self.error(
                    column, f"has class id {cid}, outside 0..{top} ({table}): fix the id"
                )
        return ids

    def seconds(self, column: str) -> float:
        """'00:01:02.50' -> 62.5; an absent column gives 0."""
        text = self.get(column)
        if text is None:
            return 0.0
        try:
            h, m, s = text.split(":")
            value = int(h) * 3600 + int(m) * 60 + float(s)
        except ValueError:
            value = -1.0
        if not 0.0 <= value < float("inf"):  # also NaN, negative fields
            raise self.error(column, f"is {_clip(text)!r}, expected HH:MM:SS.ss")
        return value


def csv_rows(path: str | Path, required: tuple[str, ...]) -> Iterator[Row]:
    """The data rows of a CSV file that has the `required` columns (see the module
    docstring for the checks). Blank lines are skipped; a file without data rows is an
    error. Each row knows its file and line (`row.error`)."""
    path = locate(path)
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = _next_row(reader, path)
    if header is None:
        raise InputError(f"{path}: empty file, expected a CSV header")
    header, _ = header
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"{path}:1: missing column(s) {', '.join(missing)} (header has: {', '.join(header)})"
        )
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise InputError(f"{path}:1: column(s) {', '.join(repeated)} appear twice in the header")
    columns = frozenset(header)
    n_rows = 0
    while (item := _next_row(reader, path)) is not None:
        values, line = item
        if not values:
            continue
        if len(values) != len(header):
            raise InputError(
                f"{path}:{line}: {len(values)} fields, header has "
                f"{len(header)} (check quoting of list columns)"
            )
        for column, value in zip(header, values):
            if "\n" in value or "\r" in value:
                raise InputError(
                    f"{path}:{line}: column '{column}' spans lines {line}-{reader.line_num}: "
                    "a quote opened there is never closed; close it (fields hold no line "
                    "breaks)"
                )
        n_rows += 1
        yield Row(zip(header, values), path, line, columns)
    if not n_rows:
        raise InputError(f"{path}: only a header, no data rows: add at least one row")


def _next_row(reader, path: Path) -> tuple[list[str], int] | None:
    """(fields, line where the row starts) of the next row, or None at the end."""
    line = reader.line_num + 1
    try:
        return next(reader), line
    except StopIteration:
        return None
    except csv.Error as e:
        if "field larger than field limit" in str(e):
            why = (
                f"a field is longer than {csv.field_size_limit()} characters (an unclosed "
                "quote reads the rest of the file into one field): close the quote"
            )
        elif "unexpected end of data" in str(e):
            why = "a quote opened in this row is never closed: close it"
        else:
            why = f"malformed CSV ({e}): check the quoting of this row"
        raise InputError(f"{path}:{line}: {why}") from None


def load_json(path: str | Path):
    """A JSON file; a missing, non-UTF-8 or invalid file is one line, and so is an object
    that repeats a key.

    Python's `json` keeps the last of repeated keys, so a video id written twice in
    ActivityNet's `train.json` or YouCook2's `database` (or two "sentences" in one entry)
    would make data vanish without a word; the error names the file, the key and the
    object holding it (its path from the top, e.g. `["database"]["vid"]`).
    """
    path = locate(path)
    text = read_text(path)
    repeats: list[str] = []

    def unique_keys(pairs: list[tuple[str, object]]) -> dict:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        obj = _Repeated(obj)
        obj.key = next(k for k, _ in pairs if k in seen or seen.add(k))
        repeats.append(obj.key)
        return obj

    try:
        data = json.loads(text, object_pairs_hook=unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})"
        ) from None
    except (ValueError, RecursionError) as e:  # NaN/Infinity, 5000-digit ints, deep nesting
        raise InputError(f"{path}: not valid JSON ({_clip(str(e) or type(e).__name__)})") from None
    if repeats:
        where, key = _first_repeat(data)
        more = f" ({len(repeats) - 1} more objects repeat a key)" if len(repeats) > 1 else ""
        raise InputError(
            f"{path}: {where} has the key {json.dumps(key)} twice{more}: JSON keeps only the "
            "last, so the first would vanish; remove or rename one"
        )
    return data


class _Repeated(dict):
    """A JSON object that repeated `key` (parsed with the last value, as json does)."""

    key: str


def _first_repeat(data) -> tuple[str, str]:
    """("the object at [...]" or "the top-level object", key) of the first `_Repeated`
    object in file order, an object before those it holds (iterative: any depth)."""
    stack = [(data, "")]
    while stack:
        obj, at = stack.pop()
        if isinstance(obj, _Repeated):
            return (f"the object at {at}" if at else "the top-level object"), obj.key
        if isinstance(obj, dict | list):
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            stack.extend(reversed([(v, f"{at}[{json.dumps(k)}]") for k, v in items]))
    raise AssertionError("a repeated key was recorded but not found")


def _reject_constant(name: str):
    raise ValueError(f"non-standard constant {name}: use a number or null")


def _clip(text: str, limit: int = 40) -> str:
    text = text.splitlines()[0] if text.strip() else text
    return text if len(text) <= limit else text[: limit - 3] + "..."
