"""Metrics that no model can define on a split (no query with a positive): found before a
run evaluates (`undefined_metrics`), reported as null / "n/a", and a run that has them
trains to its end (issue 28, class C)."""

import json

import numpy as np
import pytest

from jaxsvr.evaluation import evaluate
from jaxsvr.evaluation.metrics import undefined_metrics
from jaxsvr.train.evaluation import fmt, warn_undefined

ONE, HALF = 1.0, 0.5
# relevance [clips, sentences], threshold, the kinds of keys left undefined
CASES = [
    ("class relevance with own captions", [[ONE, 0], [HALF, ONE]], 1.0, set()),
    ("no relevance 1: no mAP, no R@K at 1", [[HALF, 0], [0, 0.2]], 1.0, {"map", "recall"}),
    ("no relevance 1, R@K at 0.5", [[HALF, 0], [0, 0.2]], 0.5, {"map"}),
    ("nothing relevant", [[0, 0], [0, 0]], 1.0, {"ndcg", "map", "recall"}),
    ("one clip with a positive", [[ONE, 0], [0, 0]], 1.0, set()),
    ("one sentence, no positive", [[HALF], [0.25]], 1.0, {"map", "recall"}),
    ("one clip, all positives", [[ONE, ONE, ONE]], 1.0, set()),
]
KINDS = {
    "ndcg": ("ndcg",),
    "map": ("map",),
    "recall": ("r1_", "r5_", "r10_", "medr", "meanr", "geomean", "rsum"),
}


@pytest.mark.parametrize("bounds", [False, True])
@pytest.mark.parametrize("case, rel, threshold, kinds", CASES, ids=[c[0] for c in CASES])
def test_undefined_are_the_none_keys_of_evaluate(case, rel, threshold, kinds, bounds):
    rel = np.array(rel, np.float32)
    found = undefined_metrics(rel, threshold, bounds=bounds)
    for seed in range(3):  # whatever the similarity
        sim = np.random.default_rng(seed).standard_normal(rel.shape).astype(np.float32)
        metrics = evaluate(sim, rel, threshold=threshold, bounds=bounds)
        assert set(found) == {k for k, v in metrics.items() if v is None}
    prefixes = tuple(p for kind in kinds for p in KINDS[kind])
    assert all(key.startswith(prefixes) for key in found)
    assert all(any(key.startswith(KINDS[kind]) for key in found) for kind in kinds)


def test_reasons_name_the_missing_positives():
    rel = np.array([[HALF, 0], [0, 0.2]], np.float32)
    found = undefined_metrics(rel, 1.0)
    both = "no clip has a sentence of relevance {0}; no sentence has a clip of relevance {0}"
    assert found["map_v2t"] == found["map_avg"] == both.format(1)
    assert found["r1_t2v"] == both.format(">= 1")
    assert found["r1_t2v"] == found["r1_v2t"] == found["rsum"]  # one reason per kind


def test_logged_once_per_reason(caplog):
    caplog.set_level("WARNING")
    rel = np.array([[HALF, 0], [0, 0.2]], np.float32)
    warn_undefined(undefined_metrics(rel, 1.0), "test")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2  # mAP, and R@K / ranks
    assert all(line.startswith("eval: on the test split ") for line in lines)
    assert any("r1_t2v" in line and "rsum" in line and "n/a" in line for line in lines)


@pytest.mark.parametrize(
    "value, spec, shown", [(None, ".4f", "n/a"), (0.25, ".4f", "0.2500"), (12.34, ".1f", "12.3")]
)
def test_fmt(value, spec, shown):
    assert fmt(value, spec) == shown


def test_a_run_without_positives_finishes_and_reports_null(tmp_path, caplog):
    """MSR-VTT-form test videos whose captions disagree (each video's two captions have
    different verbs): no caption reaches relevance 1, so R@K has no query. The run used to
    train and then crash in its evaluation log line."""
    from train_runs import config

    from jaxsvr.train import loop

    folder = tmp_path / "msrvtt"
    folder.mkdir()
    _msrvtt_without_positives(folder)
    caplog.set_level("INFO")
    c = config("msrvtt_hgr", "runlocal", data__annotations=str(folder), train__num_epochs=2)
    final = loop.train_and_evaluate(c, tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    recall = ("r1_v2t", "r5_t2v", "medr_t2v", "geomean_v2t", "rsum")
    assert all(final[k] is None and saved[k] is None for k in recall)
    assert 0 < saved["ndcg_avg"] <= 1
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("eval: on the test split r1_v2t") for line in lines)
    assert any("R@1/5/10 t2v n/a/n/a/n/a  RSum n/a" in line for line in lines)


def _msrvtt_without_positives(folder):
    from jaxsvr.annotations import kitchen, msrvtt

    train = kitchen.captioned(12, 0, "train")
    test_videos = [f"video{100 + i}" for i in range(6)]
    test_captions = [
        (v, ("cut the onion", "wash the pan")[k % 2]) for v in test_videos for k in range(4)
    ]
    parts = {
        "train": (sorted(set(train.video_id)), list(zip(train.video_id, train.caption))),
        "test": (test_videos, test_captions),
    }
    for name, (split, (videos, captions)) in zip(msrvtt.FILES, parts.items()):
        obj = {
            "videos": [{"video_id": v, "split": split} for v in videos],
            "sentences": [
                {"video_id": v, "caption": c, "sen_id": i} for i, (v, c) in enumerate(captions)
            ],
        }
        (folder / name).write_text(json.dumps(obj))
