"""Command line: relevance matrices written as float32 .npy.

  python -m jaxsvr.relevance epic100 --clips CLIPS.csv --sentences SENTENCES.csv --out REL.npy

Rows follow the clip CSV, columns the sentence CSV; on the official EPIC-KITCHENS-100 test
files the matrix is 9668 x 3842. Sentences without class columns take the classes of the
clip with the same narration_id. Bad input: one line on stderr, exit code 2, no output file.
"""

from __future__ import annotations

import argparse
import logging
import time

from jaxsvr import cli
from jaxsvr.data import epic100
from jaxsvr.relevance.classes import class_relevance


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jaxsvr.relevance", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("epic100", help="EPIC class relevance: 1/2 IoU(verbs) + 1/2 IoU(nouns)")
    e.add_argument(
        "--clips", required=True, help="clip CSV (rows), e.g. EPIC_100_retrieval_test.csv"
    )
    e.add_argument("--sentences", help="sentence CSV (columns); default: the clips themselves")
    e.add_argument("--out", required=True, help="output .npy (float32 [clips, sentences])")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    start = time.perf_counter()
    clips = epic100.read_clips(args.clips)
    if args.sentences:
        sents = epic100.read_sentences(args.sentences, clips)
        cols_v, cols_n = sents.verb_classes, sents.noun_classes
    else:
        cols_v, cols_n = clips.verb_classes, clips.noun_classes
    rel = class_relevance(clips.verb_classes, clips.noun_classes, cols_v, cols_n)
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
