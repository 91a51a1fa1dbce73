"""Command line: relevance matrices written as float32 .npy.

  python -m jaxsvr.relevance epic100 --clips CLIPS.csv --sentences SENTENCES.csv --out REL.npy
  python -m jaxsvr.relevance proxy --proxy bow|pos|syn|met --captions A.csv \
      [--columns B.csv] --out REL.npy

`epic100`: rows follow the clip CSV, columns the sentence CSV; on the official
EPIC-KITCHENS-100 test files the matrix is 9668 x 3842. Sentences without class columns
take the classes of the clip with the same narration_id. With `--verb-classes` and
`--noun-classes` every class id must index those tables.

`proxy`: a caption proxy (`jaxsvr.relevance.proxies`) between the captions of A (rows)
and of B (columns; default A). Caption CSVs have a `caption`, `narration` or `sentence`
column; `--per-video` makes one row per `video_id` of A (multi-caption videos, items kept
in >= `--rho` of a video's captions; METEOR takes the max over them). SYN uses EPIC-style
class CSVs (`--verb-classes`, `--noun-classes`) or, without them, WordNet + Lesk. METEOR
rows are references, columns hypotheses. Without `--columns` the output is the paper's
relevance S: 1 where the column caption is the row's own (its video's, with
`--per-video`), the proxy elsewhere; `--no-own` keeps the raw proxy there too. With
`--columns` the output is the proxy, or with `--own` S = 1 where a column caption has the
text of a row's own caption (EPIC-KITCHENS-100 clips x sentences: the sentence file holds
each distinct narration once, so a sentence is every clip's it narrates):

  python -m jaxsvr.relevance proxy --proxy bow --captions EPIC_100_retrieval_test.csv \
      --columns EPIC_100_retrieval_test_sentence.csv --own --out bow.npy

The same relevance without the matrix, to score embeddings: `python -m jaxsvr.evaluate
--embeddings V.npy T.npy --clips A.csv --sentences B.csv --proxy bow|pos|syn` (S = 1 as
`--own` by default), with the flags below (`proxy_tables.add_arguments`).

`--weights` (pos/syn) must be finite, non-negative, not both zero and sum to at most 1.
Every matrix is checked to be non-empty and in [0, 1] before it is written.

Bad input: one line on stderr, exit code 2, no output file.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.relevance import proxies, proxy_tables
from jaxsvr.relevance.classes import class_relevance
from jaxsvr.runtime import cli

MAX_WORKERS = 64  # METEOR processes: each holds WordNet; more is a typo on one machine


def _parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.relevance", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("epic100", help="EPIC class relevance: 1/2 IoU(verbs) + 1/2 IoU(nouns)")
    e.add_argument(
        "--clips", required=True, help="clip CSV (rows), e.g. EPIC_100_retrieval_test.csv"
    )
    e.add_argument("--sentences", help="sentence CSV (columns); default: the clips themselves")
    e.add_argument("--out", required=True, help="output .npy (float32 [clips, sentences])")
    e.add_argument(
        "--verb-classes", help="EPIC_100_verb_classes.csv: class ids must index it (optional)"
    )
    e.add_argument(
        "--noun-classes", help="EPIC_100_noun_classes.csv: class ids must index it (optional)"
    )
    x = sub.add_parser("proxy", help="caption proxy relevance: bow, pos, syn or met")
    x.add_argument("--proxy", required=True, choices=proxies.NAMES)
    x.add_argument("--captions", required=True, help="caption CSV of the rows")
    x.add_argument("--columns", help="caption CSV of the columns (default: --captions)")
    x.add_argument("--out", required=True, help="output .npy (float32 [rows, columns])")
    proxy_tables.add_arguments(x, rows_flag="--captions")
    x.add_argument(
        "--workers", type=cli.number(int, 1, MAX_WORKERS), default=2, help="met: processes"
    )
    x.add_argument(
        "--own",
        action="store_true",
        help="with --columns: S = 1 where a column caption has the text of the row's own "
        "caption (EPIC clips x sentences: every clip narrated with the sentence)",
    )
    x.add_argument(
        "--no-own",
        action="store_true",
        help="without --columns: keep the proxy on own pairs instead of S = 1",
    )
    return p


def proxy_matrix(args: argparse.Namespace) -> np.ndarray:
    """The `proxy` command's matrix (float32 [rows, columns])."""
    proxies.check_weights(args.weights, "--weights")
    if args.own and not args.columns:
        raise InputError(
            "--own goes with --columns (without --columns, S = 1 on own captions already)"
        )
    if args.own and args.no_own:
        raise InputError("--own and --no-own contradict each other: give one")
    t = proxy_tables.read(args.proxy, args.captions, args.columns, **proxy_tables.options(args))
    rel = proxies.compute(
        args.proxy,
        t.rows,
        t.cols,
        classes=t.classes,
        wordnet=t.wordnet,
        weights=tuple(args.weights),
        row_groups=t.groups,
        rho=args.rho,
        workers=args.workers,
    )
    if t.cols is None and not args.no_own:  # S = 1 where the column is the row's own caption
        rel = proxies.relevance(rel, t.groups if t.groups is not None else np.arange(len(t.rows)))
    elif args.own:  # the same, where own captions are known by their text
        rel = proxies.own_by_text(rel, t.row_texts, t.col_texts, t.groups)
    return rel


def _check_relevance(rel: np.ndarray, what: str) -> None:
    """Every matrix written is a non-empty float32 relevance in [0, 1]; anything else is
    refused before writing (it would poison every evaluation that reads it)."""
    if rel.ndim != 2 or rel.size == 0:
        raise InputError(
            f"the {what} matrix has shape {rel.shape}: need at least one row "
            "and one column; not written"
        )
    lo, hi = float(rel.min()), float(rel.max())
    if not (0.0 <= lo and hi <= 1.0):  # also NaN
        raise InputError(
            f"the {what} matrix has values in [{lo:g}, {hi:g}], outside [0, 1]; not written "
            "(check the inputs and flags)"
        )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    start = time.perf_counter()
    if args.command == "proxy":
        rel = proxy_matrix(args)
        _check_relevance(rel, f"{args.proxy} proxy")
        cli.save_npy_atomic(args.out, rel)
        logging.info(
            "wrote %s: %d x %d float32 %s proxy, mean %.5f, %.2fs",
            args.out,
            *rel.shape,
            args.proxy,
            rel.mean(dtype="float64"),
            time.perf_counter() - start,
        )
        return 0
    proxy_tables.check_class_flags(args.verb_classes, args.noun_classes)
    sizes = {}
    if args.verb_classes:
        sizes = {
            "num_verbs": len(epic100.read_classes(args.verb_classes)),
            "num_nouns": len(epic100.read_classes(args.noun_classes)),
        }
    clips = epic100.read_clips(args.clips, **sizes)
    if args.sentences:
        sents = epic100.read_sentences(args.sentences, clips, **sizes)
        cols_v, cols_n = sents.verb_classes, sents.noun_classes
    else:
        cols_v, cols_n = clips.verb_classes, clips.noun_classes
    rel = class_relevance(clips.verb_classes, clips.noun_classes, cols_v, cols_n)
    _check_relevance(rel, "relevance")
    cli.save_npy_atomic(args.out, rel)
    logging.info(
        "wrote %s: %d x %d float32 relevance, mean %.5f, %.6f of entries = 1, %.2fs",
        args.out,
        *rel.shape,
        rel.mean(dtype="float64"),
        (rel == 1).mean(),
        time.perf_counter() - start,
    )
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    raise SystemExit(cli.run(main))
