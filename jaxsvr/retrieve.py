"""Command line: query a trained run's test split with free text, or a clip for sentences.

  python -m jaxsvr.retrieve --workdir DIR --query "wash the pan" [--top K] [--json]
      [--checkpoint best|latest|auto|STEP]
  python -m jaxsvr.retrieve --workdir DIR --clip NARRATION_ID [--top K] [--json]

Prints the top K test clips for the query (rank, score, narration_id, video_id, start and
stop in seconds, narration), or with `--clip` the top K test sentences for that clip;
`--json` prints a JSON list of objects instead, best first. The first query of a
checkpoint embeds the run's test split and caches it in DIR/retrieval/ (see
`jaxsvr.runs.gallery`); later ones read the cache. Query words outside the run's vocabulary
are listed on stderr (they read as `<unk>`); a query with no known word, a model without a
text encoder (projection heads over frozen caption features), a missing run or checkpoint,
damaged run files or a config.json of another model than the checkpoint's (see
`jaxsvr.runs.trained_run`, `jaxsvr.runs.gallery.rebuild`), a --top below 1 is one `error:` line and
exit code 2. A damaged cache is rebuilt with one warning. `--json` is strict JSON
(`jaxsvr.files.json_text`; the scores are checked finite before, so none is null).
"""

from __future__ import annotations

import os
import sys

from jaxsvr.files import json_text
from jaxsvr.runtime import cli

CLIP_COLUMNS = ("rank", "score", "narration_id", "video_id", "start_s", "stop_s", "narration")
SENTENCE_COLUMNS = ("rank", "score", "narration_id", "narration")


def _parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.retrieve", description=__doc__.split("\n")[0])
    p.add_argument("--workdir", required=True, help="a training run's folder (or URL)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="free text: rank the test clips for it")
    what.add_argument("--clip", help="a test clip's narration_id: rank the test sentences")
    p.add_argument(
        "--top", type=cli.number(int, 1), default=10, help="how many results (default 10)"
    )
    p.add_argument("--json", action="store_true", help="print a JSON list, best first")
    p.add_argument(
        "--checkpoint",
        default="auto",
        help="best, latest, auto (best if the run has one, else latest) or a step number",
    )
    p.add_argument("--verbose", action="store_true", help="log what is loaded and cached")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cli.log_to_stderr(args.verbose)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from jaxsvr.errors import InputError
    from jaxsvr.runs.gallery import Gallery, Retriever, TrainedRun

    run = TrainedRun.load(args.workdir, args.checkpoint)
    searcher = Retriever(run, Gallery.of(run))
    gallery = searcher.gallery
    if args.query is not None:
        if args.query.strip() == "":
            raise InputError("--query is empty: give some words")
        hits, unknown = searcher.clips(args.query, args.top)
        if unknown:
            print(f"unknown words (read as <unk>): {', '.join(unknown)}", file=sys.stderr)
        table, columns = gallery.clips, CLIP_COLUMNS
    else:
        hits = searcher.sentences(args.clip, args.top)
        table, columns = gallery.sentences, SENTENCE_COLUMNS
    rows = [_row(h, table, columns) for h in hits]
    if args.json:
        print(json_text.dumps(rows, ensure_ascii=False, indent=1))
    else:
        print(_table(rows, columns))
    return 0


def _row(hit, table: dict, columns: tuple[str, ...]) -> dict:
    """One result: its rank and score, and the `columns` of its row of the gallery `table`."""
    values = {c: table[c][hit.row] for c in columns[2:]}
    return {"rank": hit.rank, "score": round(hit.score, 6), **values}


def _table(rows: list[dict], columns: tuple[str, ...]) -> str:
    formats = {"score": "{:.4f}", "start_s": "{:.2f}", "stop_s": "{:.2f}"}
    cells = [[formats.get(c, "{}").format(r[c]) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = [columns, *cells]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


if __name__ == "__main__":
    sys.exit(cli.run(main))
