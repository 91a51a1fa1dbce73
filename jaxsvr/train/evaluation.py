"""The trainer's evaluations: an evaluator per test-like split, and one evaluation logged,
written as scalars and (at the end, when asked) exported.

`evaluator(config, model, split, mesh)` builds the `RetrievalEvaluator` of the test split
or of the validation split (`config.eval`: chunks, positives, threshold, backend, mAP);
`evaluate(...)` runs it on a state and writes `<split>/` scalars to the run's writer;
`evaluate_splits(...)` does so for the validation split, if any, then the test split.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from jaxsvr.evaluation.evaluator import RetrievalEvaluator
from jaxsvr.inputs.model_inputs import test_inputs
from jaxsvr.runtime.workdir import atomic_write
from jaxsvr.train.metric_writers import MetricWriter


def evaluator(config, model, split, mesh, name: str = "test") -> RetrievalEvaluator:
    """The evaluator of a test-like split (the test split, or the validation split
    `name`d "val"), as `config.eval` asks. Metrics this split leaves undefined whatever
    the model (no query with a positive) are logged now, once: they are n/a in every
    evaluation's log line and null in metrics.json."""
    e = config.eval
    built = split_evaluator(
        model,
        split,
        mesh,
        instance=split.instance_relevance() if e.positives == "narration" else None,
        chunk=e.chunk,
        text_chunk=e.text_chunk,
        threshold=e.threshold,
        backend=e.backend,
        report_map=e.report_map,
    )
    warn_undefined(built.undefined, name)
    return built


def warn_undefined(undefined: dict[str, str], split: str) -> None:
    """One warning per reason for the metrics `undefined` (key -> why) of `split`."""
    by_reason: dict[str, list[str]] = {}
    for key, why in undefined.items():
        by_reason.setdefault(why, []).append(key)
    for why, keys in by_reason.items():
        logging.warning(
            "eval: on the %s split %s will be n/a (null in metrics.json): %s "
            "(positives: config.eval.threshold and config.eval.positives)",
            split,
            ", ".join(keys),
            why,
        )


def check_best_metric(metric: str, picks: RetrievalEvaluator, split: str) -> None:
    """Warns when `metric` (config.checkpoint.best_metric), which picks best/ on `split`
    (evaluated by `picks`), is undefined there: no best/ checkpoint will be saved."""
    if metric in picks.undefined:
        logging.warning(
            "checkpoint: no best/ checkpoint will be saved: config.checkpoint.best_metric = "
            "%r is n/a on the %s split",
            metric,
            split,
        )


def split_evaluator(model, split, mesh, **options) -> RetrievalEvaluator:
    """A `RetrievalEvaluator` over a test-like split's inputs (context windows included);
    `options` are its keyword arguments."""
    video, text, windows = test_inputs(model, split)
    return RetrievalEvaluator(
        model, video, text, split.relevance, mesh, video_windows=windows, **options
    )


def evaluate(
    evaluator, state, step: int, writer: MetricWriter, split: str = "test", export=None
) -> dict:
    """Metrics of `state` on `split` ("test" or "val"), written as `<split>/` scalars and
    logged; with `export` (a workdir) also writes the test similarity
    and relevance there (`test_similarity.npy`, `test_relevance.npy`, float32
    [videos, sentences]) for `python -m jaxsvr.evaluate` ensembles, and with
    `eval.positives=narration` the single-instance positives (`test_instance.npy`: its
    R@K / RSum are those evaluated against it)."""
    metrics = evaluator(state.params, with_similarity=export is not None)
    if export is not None:
        write_export(evaluator, metrics.pop("similarity"), export)
    scalars = {
        f"{split}/{k}": v
        for k, v in metrics.items()
        if isinstance(v, (int, float))
        and v is not None
        and not k.removeprefix("class_").startswith(("n_", "excl"))
    }
    writer.write_scalars(step, scalars)
    writer.flush()
    logging.info(
        "%s step %d: nDCG %s  mAP %s  R@1/5/10 t2v %s/%s/%s  RSum %s  (%.1fs)",
        "eval" if split == "test" else split,
        step,
        fmt(metrics["ndcg_avg"], ".4f"),
        fmt(metrics["map_avg"], ".4f") if "map_avg" in metrics else "(not reported)",
        fmt(metrics["r1_t2v"], ".1f"),
        fmt(metrics["r5_t2v"], ".1f"),
        fmt(metrics["r10_t2v"], ".1f"),
        fmt(metrics["rsum"], ".1f"),
        metrics["eval_seconds"],
    )
    return {"step": step, **metrics}


def evaluate_splits(
    test: RetrievalEvaluator,
    val: RetrievalEvaluator | None,
    state,
    step: int,
    writer: MetricWriter,
    export=None,
) -> tuple[dict, dict | None]:
    """`evaluate` on the validation split (None without one), then on the test split (with
    `export`); returns (test metrics, validation metrics)."""
    val_metrics = None
    if val is not None:
        val_metrics = evaluate(val, state, step, writer, "val")
    return evaluate(test, state, step, writer, export=export), val_metrics


def fmt(value: float | None, spec: str) -> str:
    """A metric for a log line: "n/a" when it is undefined (None)."""
    return "n/a" if value is None else format(value, spec)


def write_export(evaluator, similarity: np.ndarray, folder) -> None:
    """`test_similarity.npy` (`similarity`), `test_relevance.npy` and, with single-instance
    positives, `test_instance.npy` of the test evaluator, in `folder`."""
    _write_npy(folder / "test_similarity.npy", similarity)
    _write_npy(folder / "test_relevance.npy", evaluator.relevance)
    if evaluator.instance is not None:  # the positives of the single-instance recalls
        _write_npy(folder / "test_instance.npy", evaluator.instance)
    logging.info("wrote %s and test_relevance.npy", folder / "test_similarity.npy")


def _write_npy(path: Path, array: np.ndarray) -> None:
    """Writes float32 .npy whole (`workdir.atomic_write`)."""
    atomic_write(path, lambda f: np.save(f, np.asarray(array, np.float32)))
