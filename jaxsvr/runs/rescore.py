"""Re-scoring a trained run under every relevance: the protocol of "On Semantic Similarity
in Video Retrieval" (Wray et al., CVPR 2021, Table 3 and the recall bounds of Fig. 5).

  python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=DIR --config.job=rescore
  python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=DIR --config.job=rescore \
      --config.eval.rescore.similarity=DIR/test_similarity.npy

One similarity matrix [test clips, sentences] is scored under each relevance of
`config.eval.rescore.relevances` (default `class,bow,pos,syn,met`): the class relevance
of the run's data and each caption proxy, with S = 1 on own captions (EPIC: every clip
narrated with the sentence), built by `jaxsvr.relevance.split_relevance.test_relevance`
as the trainer builds its own. Under each: every metric of `jaxsvr.evaluation` (nDCG with
both gains, mAP, ...) with the recall bounds at `config.eval.rescore.threshold` (the plain
R@K from each query's best-ranked positive, `*_lower` from its worst; positives R >=
threshold, default 0.5 under every relevance; the paper's Fig. 5 takes SYN > 0.8, i.e.
`relevances=syn` with a threshold just above 0.8, e.g. 0.8001), and the same for the
random baseline (a seeded N(0, 1) similarity, `config.seed`). The matrix is:

- a checkpoint of the run in WORKDIR (`config.eval.rescore.checkpoint`: best, latest, auto
  or a step; `jaxsvr.runs.gallery.TrainedRun`): model and data come from WORKDIR/config.json,
  the run's own, so the parameters fit; from the command line come `eval.rescore`, `seed`,
  `eval.backend` and how relevance is scored (`SCORING_KEYS`: `data.relevance` (rho,
  weights), `data.syn_classes` (e.g. the EK-100 class CSVs' folder for SYN) and
  `data.spacy_pipeline`);
- or an exported similarity (`config.eval.rescore.similarity`, e.g. the
  `test_similarity.npy` of `--config.eval.export_similarity=True`, or an ensemble's
  average): then no checkpoint is read and the data is the command line config's.

Writes WORKDIR/rescore.json: {"source": ..., "threshold": ..., "relevances": {name:
{"model": metrics, "random": metrics}}} and logs one table. With
`config.eval.rescore.write_matrices` it also writes WORKDIR/rescore/similarity.npy and
relevance_<name>.npy, the matrices `python -m jaxsvr.evaluate` scores to the same numbers
(the relevance command line rebuilds them from the annotation files: docs/proxies.md).
With `config.eval.report_map` False the mAP keys are left out, as in training.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import ml_collections
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluate
from jaxsvr.evaluation.evaluator import MAP_KEYS
from jaxsvr.files import json_text, locations
from jaxsvr.relevance import split_relevance
from jaxsvr.runtime import cli
from jaxsvr.runtime.workdir import atomic_write, write_text
from jaxsvr.train import pipeline

RESULTS = "rescore.json"
MATRICES = "rescore"
RELEVANCES = ("class", "bow", "pos", "syn", "met")
# config.data keys that say how relevance is scored, not which data: from the command line
SCORING_KEYS = ("relevance", "syn_classes", "spacy_pipeline")


def run(config: ml_collections.ConfigDict, workdir) -> dict:
    """The `rescore` job: scores the run's (or an exported) similarity under every relevance
    of `config.eval.rescore` and writes WORKDIR/rescore.json (module docstring)."""
    r = config.eval.rescore
    names = relevance_names(r.relevances)
    if not 0.0 < r.threshold <= 1.0:
        raise InputError(
            f"config.eval.rescore.threshold = {r.threshold}: use a relevance in (0, 1]"
        )
    workdir = locations.locate(workdir)
    start = time.perf_counter()
    if r.similarity:
        sim = cli.load_npy(r.similarity, "config.eval.rescore.similarity", float32=True, ndim=2)
        data, source = config.data, f"similarity {r.similarity}"
        report_map = config.eval.report_map
    else:
        sim, trained = _run_similarity(workdir, str(r.checkpoint))
        data, source = (
            _scored_as(trained.config.data, config.data),
            f"checkpoint {trained.checkpoint.path}",
        )
        report_map = trained.config.eval.report_map
    logging.info("eval: %d x %d similarity from %s", *sim.shape, source)
    rels = relevances(data, names)
    shape = next(iter(rels.values())).shape
    if sim.shape != shape:
        raise InputError(
            f"the similarity from {source} is {sim.shape[0]} x {sim.shape[1]}, the data's "
            f"test clips x sentences are {shape[0]} x {shape[1]}: export it from a run on "
            "this data"
        )
    results = rescore(
        sim, rels, threshold=r.threshold, seed=config.seed, backend=config.eval.backend
    )
    if not report_map:
        results = {
            name: {k: _without_map(m) for k, m in parts.items()} for name, parts in results.items()
        }
    _log_table(results, r.threshold)
    out = {"source": source, "threshold": r.threshold, "relevances": results}
    workdir.mkdir(parents=True, exist_ok=True)
    write_text(workdir / RESULTS, json_text.dumps(out, indent=1) + "\n")
    if r.write_matrices:
        folder = workdir / MATRICES
        folder.mkdir(exist_ok=True)
        for name, array in {
            "similarity": sim,
            **{f"relevance_{k}": v for k, v in rels.items()},
        }.items():
            atomic_write(folder / f"{name}.npy", lambda f, a=array: np.save(f, a))
    logging.info("eval: wrote %s (%.1fs)", workdir / RESULTS, time.perf_counter() - start)
    return out


def relevance_names(text: str) -> tuple[str, ...]:
    """The relevances of a comma-separated list, checked ("class" and the proxies)."""
    names = tuple(n.strip() for n in str(text).split(",") if n.strip())
    bad = [n for n in names if n not in RELEVANCES]
    if not names or bad or len(set(names)) != len(names):
        raise InputError(
            f"config.eval.rescore.relevances = {text!r}: use distinct names among "
            f"{','.join(RELEVANCES)}, comma-separated"
        )
    return names


def relevances(data: ml_collections.ConfigDict, names) -> dict[str, np.ndarray]:
    """{name: [test clips, sentences] float32} for the data of `data` (`config.data`):
    the class relevance and the proxies with S = 1 on own captions, as a run builds its
    test relevance (`split_relevance.test_relevance`) under each."""
    ann = pipeline.load_annotations(data)
    spec = pipeline.relevance_spec(data)
    out = {}
    for name in names:
        t = time.perf_counter()
        out[name] = split_relevance.test_relevance(
            dataclasses.replace(spec, proxy=name),
            ann.test,
            ann.sentences,
            ann.sentence_rows(),
            ann.clip_texts,
        )
        logging.info(
            "eval: %s relevance, mean %.4f (%.1fs)",
            name,
            out[name].mean(dtype=np.float64),
            time.perf_counter() - t,
        )
    return out


def rescore(
    sim: np.ndarray,
    rels: dict[str, np.ndarray],
    *,
    threshold: float = 0.5,
    seed: int = 0,
    backend: str = "auto",
) -> dict[str, dict[str, dict]]:
    """{relevance name: {"model": metrics, "random": metrics}}: `sim` and a seeded N(0, 1)
    similarity of its shape, each scored under every relevance with the recall bounds at
    `threshold`."""
    noise = np.random.default_rng(seed).standard_normal(sim.shape, np.float32)
    return {
        name: {
            which: evaluate(s, rel, threshold=threshold, backend=backend, bounds=True)
            for which, s in (("model", sim), ("random", noise))
        }
        for name, rel in rels.items()
    }


def _run_similarity(workdir, checkpoint: str):
    """The test similarity of a checkpoint of the run in `workdir`, and the run."""
    from jaxsvr.runs.gallery import TrainedRun, test_similarity

    trained = TrainedRun.load(workdir, checkpoint, flag="config.eval.rescore.checkpoint")
    return test_similarity(trained)[0], trained


def _scored_as(run_data: ml_collections.ConfigDict, data: ml_collections.ConfigDict):
    """The run's data section with the relevance settings (`SCORING_KEYS`) of `data`."""
    out = ml_collections.ConfigDict(run_data.to_dict())
    for key in SCORING_KEYS:
        out[key] = data[key]
    return out


def _without_map(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(MAP_KEYS)}


def _log_table(results: dict, threshold: float) -> None:
    """One line per relevance and similarity: nDCG (both gains), mAP and the averaged
    geometric-mean recall bounds."""
    logging.info(
        "%-10s %-7s %7s %8s %7s %12s %12s",
        "relevance",
        "S",
        "nDCG",
        "nDCG-exp",
        "mAP",
        f"GM>={threshold:g} up",
        "GM low",
    )
    for name, parts in results.items():
        for which, m in parts.items():
            logging.info(
                "%-10s %-7s %7s %8s %7s %12s %12s",
                name,
                which,
                *(_fmt(m[k]) if k in m else "-" for k in ("ndcg_avg", "ndcg_exp_avg", "map_avg")),
                _fmt(_mean_of(m, "geomean"), 2),
                _fmt(_mean_of(m, "geomean_lower"), 2),
            )


def _mean_of(m: dict, key: str) -> float | None:
    values = [m.get(f"{key}_{d}") for d in ("v2t", "t2v")]
    return None if None in values else sum(values) / 2


def _fmt(value, digits: int = 4) -> str:
    """A metric of the table: "n/a" when undefined ("-" marks one not reported)."""
    return "n/a" if value is None else f"{value:.{digits}f}"
