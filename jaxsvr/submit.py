"""Command line: an EPIC-KITCHENS-100 multi-instance retrieval challenge file.

  python -m jaxsvr.submit --workdir DIR [--checkpoint auto|best|latest|STEP] --out FILE.pkl
  python -m jaxsvr.submit --similarity A.npy [B.npy ...] --clips TEST.csv \\
      --sentences TEST_SENTENCE.csv --out FILE.pkl

Writes the challenge pickle (`jaxsvr.evaluation.submission`: the JPoSE script's dict, protocol 4,
readable by `pd.read_pickle`) of a trained run's test similarity, or of exported
similarity matrices (one, or the average of several: an ensemble) whose rows and columns
follow the test clip and sentence tables given (e.g. the official
`EPIC_100_retrieval_test.csv` and `EPIC_100_retrieval_test_sentence.csv`). With
`--workdir`, the run's checkpoint (`--checkpoint`, default best if the run has one, else
its latest) scores its own test split, rebuilt from its config.json as the evaluation
does, and the ids are that split's clip and sentence ids. `--sls-pt`, `--sls-tl`,
`--sls-td` override the declared supervision levels (default 2, 3, 3, as the JPoSE script
declares for a method trained on frozen features).

Check it with `python -m jaxsvr.evaluate --submission FILE.pkl --allow-pickle --clips ...
--sentences ...` (the metrics of the file, matched to the tables by id). Bad input is one
`error:` line and exit code 2; the file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.evaluation import submission
from jaxsvr.runtime import cli


def _parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.submit", description=__doc__.split("\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--workdir", help="a training run's folder: its test similarity")
    source.add_argument(
        "--similarity",
        action="extend",
        nargs="+",
        metavar="S.npy",
        help="[clips, sentences] similarities in the order of --clips / --sentences; "
        "several are averaged (an ensemble)",
    )
    p.add_argument(
        "--checkpoint", default="auto", help="with --workdir: best, latest, auto or a step"
    )
    p.add_argument("--clips", help="with --similarity: the test clip CSV (rows)")
    p.add_argument("--sentences", help="with --similarity: the test sentence CSV (columns)")
    p.add_argument("--out", required=True, help="the challenge file to write (.pkl)")
    for key, level in submission.SUPERVISION.items():
        p.add_argument(
            f"--{key.replace('_', '-')}",
            type=cli.number(int, submission.SLS_RANGE.start, submission.SLS_RANGE.stop - 1),
            default=level,
            help=f"supervision level {key} declared in the file (default {level})",
        )
    p.add_argument("--verbose", action="store_true", help="log what is loaded")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cli.log_to_stderr(args.verbose)
    if args.workdir is not None and (args.clips or args.sentences):
        raise InputError("--clips and --sentences go with --similarity: a run has its own tables")
    supervision = {key: getattr(args, key) for key in submission.SUPERVISION}
    if args.workdir is not None:
        sim, vis_ids, txt_ids = run_similarity(args.workdir, args.checkpoint)
    else:
        if not (args.clips and args.sentences):
            raise InputError(
                "--similarity needs --clips and --sentences: the ids of its rows and columns"
            )
        clips = epic100.read_clips(args.clips)
        sents = epic100.read_sentences(args.sentences, clips)
        vis_ids, txt_ids = list(clips.narration_id), list(sents.narration_id)
        sim = average(args.similarity, (len(vis_ids), len(txt_ids)))
    entry = submission.Submission(sim, vis_ids, txt_ids, supervision)
    submission.write(args.out, entry)
    print(
        f"wrote {args.out}: {sim.shape[0]} clips x {sim.shape[1]} sentences, "
        + ", ".join(f"{k} {v}" for k, v in supervision.items()),
        file=sys.stderr,
    )
    return 0


def average(paths: list[str], shape: tuple[int, int]) -> np.ndarray:
    """The mean of the similarity files `paths`, each [clips, sentences] of `shape`."""
    total = None
    for path in paths:
        s = cli.load_npy(path, "similarity", float32=True, ndim=2)
        if s.shape != shape:
            raise InputError(
                f"similarity {path} is {s.shape[0]} x {s.shape[1]}, the tables are "
                f"{shape[0]} clips x {shape[1]} sentences: export it for these tables"
            )
        total = s.astype(np.float32) if total is None else total + s
    return total / np.float32(len(paths))


def run_similarity(workdir, checkpoint: str) -> tuple[np.ndarray, list[str], list[str]]:
    """The test similarity [clips, sentences] of a checkpoint of the run in `workdir`, with
    the ids of the test clips and sentences."""
    from jaxsvr.runs.gallery import TrainedRun, test_similarity

    sim, splits = test_similarity(TrainedRun.load(workdir, checkpoint))
    test = splits.test
    vis_ids = list(test.clips.narration_id)
    txt_ids = [test.clips.narration_id[r] for r in test.sentence_rows]
    return sim, vis_ids, txt_ids


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
