"""A validation split carved from the training videos (`jaxsvr.inputs.validation`) and the
model selection on it (`jaxsvr.train.selection`): which rows move, their relevance, best/ on
validation, the selected state's test metrics, early stopping and its resume."""

import json

import numpy as np
import pytest
from train_runs import config, final, jsonl

from jaxsvr.errors import InputError
from jaxsvr.inputs import validation
from jaxsvr.relevance import class_relevance
from jaxsvr.train import loop, pipeline
from jaxsvr.train.selection import Selection

TIMINGS = {"eval_seconds", "train_seconds", "train_steps", "steps_per_sec", "host_wait"}


@pytest.fixture(scope="module")
def epic_splits():
    c = config()
    return c, pipeline.load_splits(c.data)


def _carve(c, splits, **kw):
    return validation.carve(splits, spec=pipeline.relevance_spec(c.data), **kw)


def test_whole_videos_move_to_validation_with_their_inputs(epic_splits):
    c, splits = epic_splits
    out = _carve(c, splits, videos=2, seed=3)
    train, val = splits.train, out.val
    held = set(val.clips.video_id)
    assert len(held) == 2 and not held & set(out.train.clips.video_id)
    keep = [i for i, v in enumerate(train.clips.video_id) if v not in held]
    rows = [i for i, v in enumerate(train.clips.video_id) if v in held]
    assert out.train.clips.narration_id == [train.clips.narration_id[i] for i in keep]
    np.testing.assert_array_equal(out.train.video, train.video[keep])
    for field, values in train.text.items():
        np.testing.assert_array_equal(out.train.text[field], values[keep])
    # validation clips: the held rows, in order, with their features
    assert val.clips.narration_id == [train.clips.narration_id[i] for i in rows]
    np.testing.assert_array_equal(val.video, train.video[rows])
    # sentences: each distinct narration once (EK-100's test sentence file), from its first
    # clip, with that clip's token ids; relevance: class IoU of clips x sentences
    narrations = [train.clips.narration[i] for i in rows]
    firsts = sorted({n: narrations.index(n) for n in narrations}.values())
    np.testing.assert_array_equal(val.sentence_rows, firsts)
    np.testing.assert_array_equal(val.text["caption"], train.text["caption"][np.take(rows, firsts)])
    clips = train.clips.take(rows)
    want = class_relevance(
        clips.verb_classes,
        clips.noun_classes,
        clips.verb_classes.take(firsts),
        clips.noun_classes.take(firsts),
    )
    np.testing.assert_array_equal(val.relevance, want)
    assert out.vocab is splits.vocab and out.test is splits.test


def test_the_draw_is_seeded_and_sized():
    ids = [f"v{i // 3}" for i in range(30)]  # 10 videos of 3 rows
    a = validation.choose_videos(ids, fraction=0.2, seed=1)
    assert len(a) == 2 and a == validation.choose_videos(ids, fraction=0.2, seed=1)
    assert len(validation.choose_videos(ids, fraction=0.01)) == 1  # at least one video
    assert len(validation.choose_videos(ids, videos=4, seed=1)) == 4
    draws = {frozenset(validation.choose_videos(ids, videos=3, seed=s)) for s in range(5)}
    assert len(draws) > 1
    with pytest.raises(InputError, match="leaves no training video of 10"):
        validation.choose_videos(ids, videos=10)
    # both val_videos and val_fraction: check_train (tests/test_train_config_errors.py)


def test_nothing_is_carved_by_default(epic_splits):
    c, splits = epic_splits
    assert _carve(c, splits) is splits and splits.val is None


def test_multi_caption_videos_move_with_every_caption():
    """MSR-VTT trained on every caption: a held video takes all its caption rows; the
    remaining rows still read their own video's features (re-indexed row map)."""
    c = config("msrvtt_hgr")
    splits = pipeline.load_splits(c.data, ("caption", "verb", "noun"))
    train = splits.train
    out = _carve(c, splits, videos=3, seed=0)
    kept, val = out.train, out.val
    held = set(val.clips.video_id)
    rows = [i for i, v in enumerate(train.clips.video_id) if v in held]
    keep = [i for i, v in enumerate(train.clips.video_id) if v not in held]
    assert len(val.clips) == 3 and val.relevance.shape == (3, len(rows))
    np.testing.assert_array_equal(kept.video[kept.video_rows], train.video[train.video_rows[keep]])
    np.testing.assert_array_equal(val.video[val.sentence_rows], train.video[train.video_rows[rows]])
    # relevance of a video to its own captions can be below 1 (classes aggregated with rho),
    # but the proxies' S = 1 on own captions holds under a proxy
    spec = pipeline.relevance_spec(c.data)
    import dataclasses

    bow = validation.carve(
        splits, videos=3, seed=0, spec=dataclasses.replace(spec, proxy="bow")
    ).val.relevance
    np.testing.assert_array_equal(bow[val.sentence_rows, np.arange(len(rows))], 1.0)


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("val_run")
    c = config(
        data__val_videos=2,
        eval__every_epochs=1,
        train__num_epochs=12,
        train__early_stop_evals=2,
        eval__export_similarity=True,
    )
    return c, workdir, loop.train_and_evaluate(c, workdir)


def test_best_is_chosen_on_validation_and_its_test_metrics_are_reported(stopped_run):
    c, workdir, out = stopped_run
    merged = {}  # metrics.jsonl holds one line per write: train, val and test of a step
    for record in jsonl(workdir):
        merged.setdefault(record["step"], {}).update(record)
    evals = [r for _, r in sorted(merged.items()) if "val/ndcg_avg" in r]
    assert evals and all("test/ndcg_avg" in r for r in evals)
    val = [r["val/ndcg_avg"] for r in evals]
    best = evals[int(np.argmax(val))]  # the first of equal values
    assert [p.name for p in (workdir / "best").iterdir()] == [str(best["step"])]
    selected = out["selected"]
    assert selected["step"] == best["step"] and selected["val_ndcg_avg"] == max(val)
    for key in ("ndcg_avg", "map_avg", "rsum"):
        assert selected["test"][key] == best[f"test/{key}"], key
    # the final state's test metrics stay at the top level, its validation ones in "val"
    assert out["ndcg_avg"] == evals[-1]["test/ndcg_avg"]
    assert out["val"]["ndcg_avg"] == evals[-1]["val/ndcg_avg"]
    assert json.loads((workdir / "metrics.json").read_text())["selected"] == selected


def test_early_stop_and_a_rerun_resumes_into_the_stop(stopped_run):
    c, workdir, out = stopped_run
    steps_per_epoch = 5  # 80 training clips left, 16 anchors per batch
    stop, best = out["early_stop_step"], out["selected"]["step"]
    assert stop == best + 2 * steps_per_epoch < 12 * steps_per_epoch
    assert max(int(p.name) for p in (workdir / "checkpoints").iterdir()) == stop
    assert (workdir / "test_similarity.npy").is_file()  # exported at the stop
    again = loop.train_and_evaluate(c, workdir)

    def strip(d):
        return {k: strip(v) if isinstance(v, dict) else v for k, v in d.items() if k not in TIMINGS}

    assert strip(again) == strip(out)
    assert max(r["step"] for r in jsonl(workdir)) == stop  # nothing trained past the stop
    assert strip(final(workdir)) == strip(out)


class _Best:
    """A checkpointer's best/ side: keeps the first of the highest `metric`."""

    metric = "ndcg_avg"

    def __init__(self):
        self.best_step, self.best_record = None, {}

    def save_best(self, step, state, metrics, extra=None):
        if self.best_record and metrics[self.metric] <= self.best_record[self.metric]:
            return
        self.best_step = step
        self.best_record = {self.metric: metrics[self.metric], **(extra or {})}


def test_selection_is_configured_when_built():
    ckpt = _Best()
    s = Selection(ckpt, metric="ndcg_avg", early_stop_evals=2, eval_every=5, has_val=True)
    for step, value in [(5, 0.3), (10, 0.5), (15, 0.4), (20, 0.4)]:
        s.see(step, None, {"step": step, "ndcg_avg": 1.0}, {"step": step, "ndcg_avg": value})
        assert s.stopped(step) == (step == 20), step  # two evaluations after the best
    assert not s.stopped(21)  # not an evaluation step
    out = s.report()
    assert out["selected"] == {"step": 10, "val_ndcg_avg": 0.5, "test": {"ndcg_avg": 1.0}}
    assert out["early_stop_step"] == 20 and out["val"] == {"ndcg_avg": 0.4}
    s.seen_again({"step": 20, "ndcg_avg": 0.45})  # a rerun re-evaluates the final state
    assert s.report()["val"] == {"ndcg_avg": 0.45}
    never = Selection(ckpt, metric="ndcg_avg", early_stop_evals=0, eval_every=5, has_val=True)
    assert not never.stopped(20)


def test_itstime_every_and_at_the_last_step():
    assert [s for s in range(1, 13) if loop.itstime(s, 5, 12)] == [5, 10, 12]
    assert [s for s in range(1, 4) if loop.itstime(s, 1, 3)] == [1, 2, 3]


@pytest.mark.parametrize(
    "name, arg",
    [
        ("epic_contra", "runlocal"),  # context windows over the held clips
        ("youcook2_mme", "runlocal,proxy=bow"),  # a proxy relevance, one sentence per row
        pytest.param(  # multi-caption videos, HGR's matching (carving tested above)
            "msrvtt_hgr", "runlocal", marks=pytest.mark.slow
        ),
    ],
)
def test_every_kind_of_run_selects_on_validation(tmp_path, name, arg):
    c = config(name, arg, data__val_fraction=0.25, train__max_steps=6, eval__every_epochs=1)
    out = loop.train_and_evaluate(c, tmp_path)
    assert np.isfinite(out["val"]["ndcg_avg"]) and np.isfinite(out["ndcg_avg"])
    assert out["selected"]["step"] in [int(p.name) for p in (tmp_path / "best").iterdir()]
