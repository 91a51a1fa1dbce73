"""Caption proxies of caption tables: what both command lines read before scoring.

`python -m jaxsvr.relevance proxy` writes a proxy's matrix and `python -m jaxsvr.evaluate
--embeddings ... --proxy` streams its blocks; both read their caption CSVs, class CSVs,
WordNet and spaCy pipeline here, with the same flags (`add_arguments`), checks and
one-line errors:

  p = cli.ArgumentParser(...)
  proxy_tables.add_arguments(p, rows_flag="--captions")
  opts = proxy_tables.options(args)  # the flags as read()'s keyword arguments
  t = proxy_tables.read(args.proxy, args.captions, args.columns, **opts)
  rel = proxies.compute(args.proxy, t.rows, t.cols, classes=t.classes, ...)
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from jaxsvr.annotations import caption_table, epic100
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions, wordnet
from jaxsvr.nlp.captions import Parsed
from jaxsvr.relevance import proxies
from jaxsvr.runtime import cli

# the flags `add_arguments` adds, as argparse destinations (what `options` passes on)
READ_FLAGS = ("per_video", "verb_classes", "noun_classes", "pipeline", "wordnet")


@dataclasses.dataclass(frozen=True)
class Tables:
    """Parsed row and column captions and what the proxy needs besides them.

    Attributes:
      rows: the row captions, parsed (`captions.parse`), in file order.
      cols: the column captions, parsed, or None (the columns are the rows).
      row_texts, col_texts: the captions as written (col_texts None with cols).
      groups: with per_video, [row captions] the video index of each (first-occurrence
        order of `video_id`), else None.
      classes: syn's class map (class CSVs, or WordNet + Lesk), else None.
      wordnet: met's (and Lesk's) WordNet reader, else None.
    """

    rows: Parsed
    cols: Parsed | None
    row_texts: list[str]
    col_texts: list[str] | None
    groups: list[int] | None
    classes: proxies.ClassMap | None
    wordnet: Any


def add_arguments(p: argparse.ArgumentParser, rows_flag: str) -> None:
    """The flags both proxy command lines share: per-video rows, rho, weights, SYN's
    classes, the spaCy pipeline and WordNet (`rows_flag` names the row caption table)."""
    p.add_argument("--per-video", action="store_true", help=f"one row per video_id of {rows_flag}")
    p.add_argument(
        "--rho",
        type=cli.number(float, 0, 1, above=True),
        default=proxies.DEFAULT_RHO,
        help="with --per-video: a video holds what at least this share of its captions hold",
    )
    p.add_argument(
        "--weights",
        type=cli.number(float, 0),
        nargs=2,
        default=proxies.DEFAULT_WEIGHTS,
        metavar=("VERB", "NOUN"),
        help="pos/syn: alpha per part of speech: finite, >= 0, not both 0, sum <= 1",
    )
    p.add_argument("--verb-classes", help="syn: EPIC_100_verb_classes.csv-style vocabulary")
    p.add_argument("--noun-classes", help="syn: EPIC_100_noun_classes.csv-style vocabulary")
    p.add_argument("--pipeline", default=captions.DEFAULT_PIPELINE, help="spaCy pipeline")
    p.add_argument("--wordnet", help="folder of WordNet 3.0 files (default: see wordnet.py)")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `read` from a namespace of `add_arguments`' flags."""
    out = {name: getattr(args, name) for name in READ_FLAGS}
    out["wordnet_dir"] = out.pop("wordnet")
    return out


def check_class_flags(verb_classes: str | None, noun_classes: str | None) -> None:
    if (verb_classes is None) != (noun_classes is None):
        raise InputError("--verb-classes and --noun-classes go together: give both or neither")


def read(
    proxy: str,
    rows_csv: str,
    cols_csv: str | None = None,
    *,
    per_video: bool = False,
    verb_classes: str | None = None,
    noun_classes: str | None = None,
    pipeline: str = captions.DEFAULT_PIPELINE,
    wordnet_dir: str | None = None,
    check: Callable[[int, int], None] | None = None,
) -> Tables:
    """Reads and parses the caption tables of the proxy `proxy` (one of `proxies.NAMES`).

    Class CSVs are read (and checked) before any caption is parsed; SYN without them takes
    WordNet + Lesk, METEOR WordNet.

    Args:
      proxy: the proxy's name.
      rows_csv, cols_csv: caption CSVs (`caption_table.read_csv`) of the rows and of the
        columns (None: the rows).
      per_video: group the rows by their `video_id` (multi-caption videos).
      verb_classes, noun_classes: SYN's EPIC-style class CSVs (both or neither).
      pipeline: the spaCy pipeline.
      wordnet_dir: a folder of WordNet files (`wordnet.load`).
      check: called with the numbers of rows (videos with per_video) and columns once the
        tables are read, before the slower parse: raises on tables that do not fit.

    Raises:
      InputError: a missing or malformed file, one class CSV without the other, no
        `video_id` with per_video, a missing spaCy pipeline or WordNet.
    """
    check_class_flags(verb_classes, noun_classes)
    classes = None
    if proxy == "syn" and verb_classes:  # read (and check) before parsing
        classes = proxies.ClassMap.from_vocabs(
            epic100.read_classes(verb_classes), epic100.read_classes(noun_classes)
        )
    table = caption_table.read_csv(rows_csv)
    cols_table = caption_table.read_csv(cols_csv) if cols_csv else None
    groups = table.video_groups()[1] if per_video else None
    if check is not None:
        n_rows = max(groups) + 1 if groups else len(table.texts)
        check(n_rows, len(cols_table.texts) if cols_table else len(table.texts))
    wn = None
    if proxy == "met" or (proxy == "syn" and classes is None):
        wn = wordnet.load(wordnet_dir)
        if classes is None and proxy == "syn":
            classes = proxies.ClassMap.lesk(wn)
    start = time.perf_counter()
    rows = captions.parse(table.texts, pipeline)
    cols = captions.parse(cols_table.texts, pipeline) if cols_table else None
    logging.info("parsed captions with %s in %.2fs", pipeline, time.perf_counter() - start)
    col_texts = cols_table.texts if cols_table else None
    return Tables(rows, cols, table.texts, col_texts, groups, classes, wn)
