"""Caption CSVs as a `CaptionTable`: the captions in file order and their video ids.

The proxy command line (`python -m jaxsvr.relevance`) reads captions from any CSV with a
`narration` (EPIC) or `caption` column; rows of one `video_id` are one video's captions.
An empty or whitespace-only caption is an `InputError` naming the file, line and column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate

TEXT_COLUMNS = ("caption", "narration", "sentence")


@dataclasses.dataclass(frozen=True)
class CaptionTable:
    """A caption CSV: the captions in file order and, if the file has one, the
    `video_id` of each (several rows per video for multi-caption datasets)."""

    texts: list[str]
    video_ids: list[str] | None

    def video_groups(self) -> tuple[list[str], list[int]]:
        """Distinct video ids (first-occurrence order) and each row's index among them."""
        if self.video_ids is None:
            raise InputError("the caption file has no video_id column to group rows by")
        return first_occurrence_groups(self.video_ids)


def first_occurrence_groups(keys: Sequence) -> tuple[list, list[int]]:
    """Distinct keys in first-occurrence order, and each key's index among them."""
    index: dict = {}
    groups = [index.setdefault(k, len(index)) for k in keys]
    return list(index), groups


def read_csv(path: str | Path) -> CaptionTable:
    """Reads captions from a CSV with a `caption`, `narration` or `sentence` column (EPIC
    sentence files have `narration`) and an optional `video_id` column."""
    path = locate(path)
    texts: list[str] = []
    videos: list[str] = []
    column = None
    for row in epic100.csv_rows(path, ()):
        if column is None:
            column = next((c for c in TEXT_COLUMNS if c in row.columns), None)
            if column is None:
                raise row.error(TEXT_COLUMNS[0], f"is missing: add one of {TEXT_COLUMNS}")
        if not row[column].strip():
            raise row.error(
                column, "is empty: every row needs its caption; write it or remove the row"
            )
        texts.append(row[column])
        if "video_id" in row.columns:
            videos.append(row["video_id"])
    if not texts:
        raise InputError(f"{path}: no caption rows")
    return CaptionTable(texts, videos if len(videos) == len(texts) else None)
