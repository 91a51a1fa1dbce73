"""Command line: evaluate similarity matrices against a relevance matrix.

  python -m jaxsvr.evaluate --similarity S.npy [--similarity S2.npy ...] --relevance R.npy
  python -m jaxsvr.evaluate --submission FILE.pkl --allow-pickle --clips TEST.csv \
      --sentences TEST_SENTENCE.csv [--relevance R.npy]
  python -m jaxsvr.evaluate --embeddings VIDEO.npy TEXT.npy --clips CLIPS.csv \
      --sentences SENTENCES.csv [--memory MB] [--proxy bow|pos|syn [--no-own] ...]

Prints one JSON object on stdout with every key of `jaxsvr.evaluation.metrics` (ndcg_v2t,
ndcg_t2v, ndcg_avg, map_v2t, map_t2v, map_avg, ...; with `--bounds` also the lower-bound
recalls at `--threshold`). Several similarity files (model
ensembles: `--similarity A.npy B.npy`, e.g. the `test_similarity.npy` files training
runs write with `--config.eval.export_similarity=True`) are averaged into one matrix.
Arrays are [n_videos, n_texts] .npy files of a real dtype, loaded without pickle and read
as float32. Bad input (missing, empty or corrupt file, an .npz or a complex / string /
structured array, shape mismatch, NaN or inf, values beyond the float32 range, relevance
outside [0, 1]): one line on stderr and exit code 2.

`--submission` scores an EK-100 challenge file (`jaxsvr.evaluation.submission`; written by
`python -m jaxsvr.submit`, or the public JPoSE script): its rows and columns are matched
to the test tables by id, so a file in another order scores the same; a missing, repeated
or foreign id, a wrong shape, a non-finite entry or another `challenge` is one line. The
relevance is `--relevance` in the tables' order, else their EPIC class relevance (the
official relevancy matrix; `--relevance` may be that matrix's public pickle,
`EPIC_100_retrieval_test_relevancy_mat.pkl`). A pickle runs code when loaded:
`--allow-pickle` is required, and the challenge file is read with a whitelist.

`--embeddings` scores [n_videos, d] clip and [n_texts, d] sentence embeddings (rows in
the order of --clips / --sentences, EPIC-style class columns read as `--submission` reads
them) by streamed evaluation (`jaxsvr.evaluation.streamed`): the similarity (dot products)
and the EPIC class relevance are computed block by block and never held whole, in
`--memory` MB of blocks; the numbers are those of `--similarity` on `video @ text.T`
with `--relevance` the tables' class relevance. It runs the NumPy engine and logs its
progress on stderr; with the JAX engine (`--backend`, below) each block's product and
ranking run on the device instead (`jax_engine.stream_stats`; `--memory` does not apply).
A width or row count that does not match is one line.

`--proxy bow|pos|syn` with `--embeddings` takes the relevance from a caption proxy of the
tables' captions (`caption`, `narration` or `sentence` column: any caption CSV) instead
of their classes, streamed too (`jaxsvr.evaluation.streamed_proxies`), with S = 1 where a
sentence has the text of the clip's caption (`--no-own`: the proxy there too). The
numbers are those of `--similarity` with `--relevance` the matrix of
`python -m jaxsvr.relevance proxy --captions CLIPS.csv --columns SENTENCES.csv --own`
(without `--own` for `--no-own`), and the proxy flags are that command's: `--per-video`
(a video row per `video_id` of --clips, items of >= `--rho` of its captions; the video
embeddings then have one row per video, in first-occurrence order), `--weights`,
`--verb-classes` / `--noun-classes` (SYN; without them WordNet + Lesk, `--wordnet`),
`--pipeline`. METEOR (`met`) is no weighted IoU of sets: it needs that dense matrix.

`--backend auto` (default) imports JAX only when a JAX accelerator plugin is installed (a
CUDA/ROCm plugin, libtpu), and uses it when JAX then finds that accelerator; otherwise the
NumPy engine runs and JAX is never imported. Inputs are memory-mapped. The process keeps
freed memory for reuse and, on AMD Zen 4 CPUs, uses NumPy's AVX2 sort
(`jaxsvr.runtime.process_tuning`; what each saves: docs/benchmarks.md#evaluation).
"""

from __future__ import annotations

import argparse
import sys
import time

from jaxsvr.runtime import process_tuning

if __name__ == "__main__":  # the command line owns its process: jaxsvr.runtime.process_tuning
    process_tuning.prefer_avx2_sort()  # on AMD Zen 4; before NumPy is first imported (below)

import numpy as np  # noqa: E402

from jaxsvr.errors import InputError  # noqa: E402
from jaxsvr.evaluation import blocks, metrics, streamed, streamed_proxies  # noqa: E402
from jaxsvr.files import json_text  # noqa: E402
from jaxsvr.relevance import proxies, proxy_tables  # noqa: E402
from jaxsvr.runtime import cli  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.evaluate", description=__doc__.split("\n")[0])
    scored = p.add_mutually_exclusive_group(required=True)
    scored.add_argument(
        "--similarity",
        action="extend",
        nargs="+",
        metavar="S.npy",
        help="[n_videos, n_texts] similarities; several (--similarity A.npy B.npy, or the flag "
        "repeated) are averaged into one ensemble matrix",
    )
    scored.add_argument(
        "--submission",
        metavar="FILE.pkl",
        help="an EK-100 challenge file (python -m jaxsvr.submit), its rows and columns "
        "matched by id to --clips / --sentences; needs --allow-pickle",
    )
    scored.add_argument(
        "--embeddings",
        nargs=2,
        metavar=("VIDEO.npy", "TEXT.npy"),
        help="[n_videos, d] clip and [n_texts, d] sentence embeddings, rows in the order of "
        "--clips / --sentences: streamed evaluation against their class relevance, "
        "similarity = dot product (docs/metrics.md#streamed-evaluation)",
    )
    p.add_argument(
        "--relevance",
        metavar="R.npy",
        help="[n_videos, n_texts] relevance in [0, 1] (python -m jaxsvr.relevance); with "
        "--submission in the order of --clips / --sentences (also the official "
        "EPIC_100_retrieval_test_relevancy_mat.pkl), default their class relevance",
    )
    p.add_argument(
        "--clips",
        help="with --submission / --embeddings: the clip CSV (row ids, classes; with --proxy "
        "captions)",
    )
    p.add_argument(
        "--sentences",
        help="with --submission / --embeddings: the sentence CSV (column ids, classes; with "
        "--proxy captions)",
    )
    p.add_argument(
        "--allow-pickle",
        action="store_true",
        help="load --submission although it is a pickle (loading a pickle runs code: only "
        "files you trust; read with a whitelist of NumPy and pandas' Index)",
    )
    p.add_argument(
        "--threshold",
        type=cli.number(float, 0, 1, above=True),
        default=1.0,
        help="relevance from which an item is a positive for R@K and ranks",
    )
    p.add_argument(
        "--bounds",
        action="store_true",
        help="add the lower-bound recalls (r1_lower_*, ..., geomean_lower_*, rsum_lower: "
        "the worst-ranked positive within K) to the upper-bound ones (r1_*: the best)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "numpy", "jax"),
        help="auto: jitted JAX on a GPU/TPU, NumPy on CPU",
    )
    p.add_argument(
        "--memory",
        type=cli.number(int, 1),
        default=streamed.DEFAULT_MEMORY >> 20,
        metavar="MB",
        help="with --embeddings: MB of blocks in flight (the embeddings come on top)",
    )
    p.add_argument(
        "--proxy",
        choices=proxies.NAMES,
        help="with --embeddings: relevance from a caption proxy of --clips / --sentences "
        "(their caption column) instead of their classes; bow, pos or syn (met: the dense "
        "path)",
    )
    p.add_argument(
        "--own",
        action=argparse.BooleanOptionalAction,
        help="with --proxy: S = 1 where a sentence has the text of the clip's (video's) "
        "caption, the paper's relevance (default); --no-own keeps the proxy there",
    )
    proxy_tables.add_arguments(p, rows_flag="--clips")
    p.add_argument("--timing", action="store_true", help="add the seconds spent to the JSON")
    return p


# the flags that only a caption proxy reads (argparse destinations)
PROXY_FLAGS = ("own", "rho", "weights", *proxy_tables.READ_FLAGS)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    start = time.perf_counter()
    _check_proxy_flags(args, parser)
    if args.embeddings is not None:
        result = _embeddings(args)
    else:
        result = _matrices(args)
    if args.timing:
        result["seconds"] = time.perf_counter() - start
    sys.stdout.write(json_text.dumps(result, indent=1) + "\n")
    return 0


def _check_proxy_flags(args, parser: argparse.ArgumentParser) -> None:
    """A caption proxy's flags without --proxy would be ignored: one line instead."""
    given = [f for f in PROXY_FLAGS if getattr(args, f) != parser.get_default(f)]
    if given and args.proxy is None:
        names = [f"--{f.replace('_', '-')}" for f in given]
        names = ["--no-own" if n == "--own" and not args.own else n for n in names]
        raise InputError(f"flags of a caption proxy given without --proxy: {', '.join(names)}")


def _matrices(args) -> dict:
    """Metrics of --similarity / --submission: the dense path."""
    if args.proxy is not None:
        raise InputError(
            "--proxy goes with --embeddings; for the dense path write the proxy's matrix "
            "(python -m jaxsvr.relevance proxy ... --out R.npy) and give it as --relevance"
        )
    if args.submission is not None:
        sim, rel = _submission(args)
    else:
        sim, rel = _similarities(args)
    backend = metrics.choose_backend(args.backend, import_jax=True)
    return metrics.evaluate(sim, rel, threshold=args.threshold, backend=backend, bounds=args.bounds)


def _embeddings(args) -> dict:
    """Metrics of --embeddings against the class relevance (or the --proxy relevance) of
    --clips / --sentences, streamed."""
    if args.proxy == "met":
        raise InputError(
            "--proxy met is METEOR, not a set proxy, and needs the dense path: python -m "
            "jaxsvr.relevance proxy --proxy met --captions CLIPS --columns SENTENCES --own "
            "--out R.npy, then --similarity S.npy --relevance R.npy"
        )
    if args.relevance or args.allow_pickle:
        raise InputError(
            "--embeddings scores the relevance of --clips / --sentences: --relevance "
            "and --allow-pickle go with --similarity / --submission"
        )
    if not (args.clips and args.sentences):
        raise InputError(
            "--embeddings needs --clips and --sentences: the tables whose rows the "
            "embeddings' rows are, in order (their class columns, or with --proxy their "
            "captions, give the relevance)"
        )
    paths = dict(zip(("video", "text"), args.embeddings))
    emb = {
        name: cli.load_npy(path, f"{name} embeddings", float32=True, mmap=True, ndim=2)
        for name, path in paths.items()
    }
    if emb["video"].shape[1] != emb["text"].shape[1]:
        raise InputError(
            f"video embeddings {paths['video']} are {emb['video'].shape[1]} wide, text "
            f"embeddings {paths['text']} {emb['text'].shape[1]}: both must have the same d"
        )

    def check_rows(n_rows: int, n_cols: int) -> None:
        for name, table, n, per_video in (
            ("video", args.clips, n_rows, args.per_video),  # a row per video_id of --clips
            ("text", args.sentences, n_cols, False),
        ):
            if len(emb[name]) != n:
                unit = "video_id (first-occurrence order)" if per_video else "table row"
                raise InputError(
                    f"{name} embeddings {paths[name]} have {len(emb[name])} rows, {table} "
                    f"has {n}{' videos' if per_video else ''}: one row per {unit}, in its order"
                )

    if args.proxy is None:
        relevance = _class_relevance(args, check_rows)
    else:
        proxies.check_weights(args.weights, "--weights")
        opts = proxy_tables.options(args)
        tables = proxy_tables.read(args.proxy, args.clips, args.sentences, **opts, check=check_rows)
        relevance = streamed_proxies.proxy_relevance(
            args.proxy, tables, weights=tuple(args.weights), rho=args.rho, own=args.own is not False
        )
    cli.log_to_stderr(verbose=True)  # progress of long evaluations
    if metrics.choose_backend(args.backend, import_jax=True) == "jax":
        # the accelerator's engine: each block's product and ranking on the device
        from jaxsvr.evaluation import jax_engine

        scores = blocks.Embeddings(emb["video"], emb["text"])
        stats = jax_engine.stream_stats(scores, relevance, threshold=args.threshold)
        return metrics.summarize(*stats, bounds=args.bounds)
    return streamed.evaluate_embeddings(
        emb["video"],
        emb["text"],
        relevance,
        threshold=args.threshold,
        bounds=args.bounds,
        memory=args.memory << 20,
    )


def _class_relevance(args, check_rows):
    """The EPIC class relevance of --clips / --sentences, as blocks."""
    from jaxsvr.annotations import epic100

    clips = epic100.read_clips(args.clips)
    sents = epic100.read_sentences(args.sentences, clips)
    check_rows(len(clips), len(sents))
    return blocks.BlockRelevance(
        streamed.class_terms(
            clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
        )
    )


def _similarities(args) -> tuple[np.ndarray, np.ndarray]:
    """--similarity (the average of the files) and --relevance."""
    if args.clips or args.sentences or args.allow_pickle:
        raise InputError(
            "--clips, --sentences and --allow-pickle go with --submission or --embeddings"
        )
    if args.relevance is None:
        raise InputError("--similarity needs --relevance (python -m jaxsvr.relevance)")
    # float32 on load: what the metrics compute in, checked finite after the cast.
    rel = cli.load_npy(args.relevance, "relevance", float32=True, mmap=True, ndim=2)
    sim = None
    for path in args.similarity:
        s = cli.load_npy(path, "similarity", float32=True, mmap=True, ndim=2)
        if s.shape != rel.shape:
            raise InputError(
                f"similarity {path} has shape {s.shape}, relevance {args.relevance} "
                f"has {rel.shape}: both must be [n_videos, n_texts]"
            )
        # One file is used as loaded (no copy); an ensemble is summed, then averaged.
        sim = s if sim is None else sim + s
    if len(args.similarity) > 1:
        sim = sim / np.float32(len(args.similarity))
    return sim, rel


def _submission(args) -> tuple[np.ndarray, np.ndarray]:
    """The challenge file's similarity in the order of --clips / --sentences (matched by
    id), and --relevance or the tables' class relevance."""
    from jaxsvr.annotations import epic100
    from jaxsvr.evaluation import submission
    from jaxsvr.relevance import class_relevance

    if not (args.clips and args.sentences):
        raise InputError(
            "--submission needs --clips and --sentences: the test tables whose ids its rows "
            "and columns are matched to (e.g. EPIC_100_retrieval_test.csv and "
            "EPIC_100_retrieval_test_sentence.csv)"
        )
    entry = submission.read(args.submission, allow_pickle=args.allow_pickle)
    clips = epic100.read_clips(args.clips)
    sents = epic100.read_sentences(args.sentences, clips)
    sim = submission.align(
        entry, clips.narration_id, sents.narration_id, f"--submission {args.submission}"
    )
    if args.relevance is None:
        rel = class_relevance(
            clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
        )
    elif args.relevance.lower().endswith(".pkl"):  # the official relevancy pickle
        from pathlib import Path

        from jaxsvr.inputs import jpose_folder

        rel = jpose_folder.read_relevancy(Path(args.relevance))
    else:
        rel = cli.load_npy(args.relevance, "relevance", float32=True, mmap=True, ndim=2)
    if rel.shape != sim.shape:
        raise InputError(
            f"relevance {args.relevance} is {rel.shape[0]} x {rel.shape[1]}, the tables "
            f"are {sim.shape[0]} clips x {sim.shape[1]} sentences: give the relevance "
            "of these tables, in their order"
        )
    return sim, rel


if __name__ == "__main__":
    process_tuning.keep_freed_memory()
    raise SystemExit(cli.run(main))
