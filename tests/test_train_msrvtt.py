"""HGR on MSR-VTT-form data: the config's variants, the built-in videos with 20 captions
that disagree, their reading through the public release's folder, which split is
evaluated (said in the log), and a RANP run."""

import json
import logging

import numpy as np
import pytest
from train_runs import config, jsonl

from jaxsvr.annotations import kitchen, msrvtt
from jaxsvr.annotations.captioned import CaptionedVideos
from jaxsvr.errors import InputError
from jaxsvr.train import checks, loop, pipeline


@pytest.mark.parametrize(
    "arg, loss, tau",
    [
        (None, "max_margin", None),
        ("ran", "ran", 0.10),  # the RANP paper's MSR-VTT tau
        ("ranp", "ranp", 0.10),
        ("ranp,tau=0.15", "ranp", 0.15),
    ],
)
def test_variants(arg, loss, tau):
    c = config("msrvtt_hgr", arg)
    assert c.data.format == "msrvtt" and c.model.name == "hgr" and c.loss.name == loss
    assert c.train.batch_size == 64 and c.train.num_epochs == 50
    assert c.checkpoint.best_metric == "ndcg_avg"
    if tau is not None:
        assert c.loss[loss].tau == tau
    with pytest.raises(InputError, match="tau variant needs ran or ranp"):
        config("msrvtt_hgr", "hard,tau=0.4")


def test_built_in_videos_have_twenty_disagreeing_captions():
    rows = kitchen.captioned(30, seed=0, split="train")
    names, groups = rows.clip_groups()
    assert len(names) == 30 and np.all(np.bincount(groups) == kitchen.CAPTIONS_PER_VIDEO)
    per_video = [set(rows.caption[i] for i in np.flatnonzero(groups == g)) for g in range(30)]
    assert np.mean([len(s) for s in per_video]) > 5  # annotators word it differently
    again = kitchen.captioned(30, seed=0, split="train")
    assert again.caption == rows.caption and set(rows.split) == {"train"}


def test_built_in_videos_through_the_public_folder_format(tmp_path):
    """The built-in videos written as the two videodatainfo files read back as loaded."""
    rows = CaptionedVideos.concat(
        [kitchen.captioned(12, 0, "train"), kitchen.captioned(6, 0, "test")]
    )
    for name, split in zip(msrvtt.FILES, ("train", "test")):
        keep = [i for i, s in enumerate(rows.split) if s == split]
        videos = sorted({rows.video_id[i] for i in keep})
        obj = {
            "videos": [{"video_id": v, "split": split} for v in videos],
            "sentences": [
                {"video_id": rows.video_id[i], "caption": rows.caption[i], "sen_id": i}
                for i in keep
            ],
        }
        (tmp_path / name).write_text(json.dumps(obj))
    c = config("msrvtt_hgr", "ran,runlocal", data__annotations=str(tmp_path))
    data = pipeline.load_splits(c.data, ("caption",))
    assert len(data.train.video) == 12 and len(data.test.clips) == 6
    assert len(data.test.text["caption"]) == 6 * 20
    # every train caption is a training pair: its own text, its video's features and classes
    train = data.train
    assert (
        len(train.clips) == 12 * 20
        and train.video_rows.tolist() == np.repeat(np.arange(12), 20).tolist()
    )
    assert train.clips.narration == rows.select("train").caption
    for i in (0, 25, 239):
        first = 20 * train.video_rows[i]
        assert list(train.clips.noun_classes[i]) == list(train.clips.noun_classes[first])
    one = pipeline.load_splits(
        config(
            "msrvtt_hgr", "runlocal", data__annotations=str(tmp_path), data__train_captions="first"
        ).data
    )
    assert len(one.train.clips) == len(one.train.video) == 12 and one.train.video_rows is None


def _videodatainfo(*videos: tuple[str, str]) -> dict:
    """A videodatainfo object of (video id, split) videos with two captions each."""
    return {
        "videos": [{"video_id": v, "split": split} for v, split in videos],
        "sentences": [
            {"video_id": v, "caption": text, "sen_id": f"{v}-{k}"}
            for v, _ in videos
            for k, text in enumerate(("a man cuts an onion", "a person slices a tomato"))
        ],
    }


TRAIN_VAL = _videodatainfo(("v0", "train"), ("v1", "train"), ("v2", "validate"))
TEST = _videodatainfo(("v8", "test"), ("v9", "test"))
# Each row: the files in data.annotations (a name alone: that file is the annotations),
# the videos evaluated, and the log line saying so (level, words), or None for no line.
EVALUATED = [
    (
        "one-train-val-file",
        {msrvtt.FILES[0]: TRAIN_VAL},
        ["v2"],
        (logging.WARNING, "has no test videos: its 1 validate videos (2 captions) are the test"),
    ),
    (
        "release-folder",
        {msrvtt.FILES[0]: TRAIN_VAL, msrvtt.FILES[1]: TEST},
        ["v8", "v9"],
        (logging.INFO, "1 validate videos (2 captions) are not used"),
    ),
    (
        "train-and-test-file",
        {"a.json": _videodatainfo(("v0", "train"), ("v8", "test"))},
        ["v8"],
        None,
    ),
]


@pytest.mark.parametrize(
    "files, evaluated, says", [e[1:] for e in EVALUATED], ids=[e[0] for e in EVALUATED]
)
def test_the_evaluated_split_is_said_in_the_log(tmp_path, caplog, files, evaluated, says):
    for name, obj in files.items():
        (tmp_path / name).write_text(json.dumps(obj))
    path = tmp_path / next(iter(files)) if len(files) == 1 else tmp_path
    with caplog.at_level(logging.INFO):
        ann = pipeline.load_annotations(
            config("msrvtt_hgr", "runlocal", data__annotations=str(path)).data
        )
    assert sorted(set(ann.test.video_id)) == evaluated
    lines = [r for r in caplog.records if "validate videos" in r.getMessage()]
    if says is None:
        assert not lines, [r.getMessage() for r in lines]
        return
    assert len(lines) == 1 and lines[0].levelno == says[0]
    assert says[1] in lines[0].getMessage() and str(path) in lines[0].getMessage()


def _ranp(gather: str):
    """RANP on the built-in videos for one epoch, one checkpoint in the latest/ folder (the
    last step's) beside best/ by nDCG."""
    return config(
        "msrvtt_hgr",
        "ranp,runlocal",
        train__num_epochs=1,
        train__gather=gather,
        checkpoint__every_steps=1000,
    )


@pytest.fixture(scope="module")
def ranp_run(tmp_path_factory):
    """One RANP run on the built-in MSR-VTT videos (one epoch, features gathered on the
    devices), shared by the tests that read its metrics or compare another run with it:
    (workdir, final metrics)."""
    workdir = tmp_path_factory.mktemp("ranp_device")
    return workdir, loop.train_and_evaluate(_ranp("device"), workdir)


def test_ranp_trains_on_built_in_msrvtt_videos_and_reports_ndcg_only(ranp_run, tmp_path):
    workdir, m = ranp_run
    assert np.isfinite(m["ndcg_avg"]) and 0 < m["ndcg_avg"] <= 1
    saved = json.loads((workdir / "metrics.json").read_text())
    logged = {k for r in jsonl(workdir) for k in r}
    for keys in (m, saved, logged):
        assert not [k for k in keys if "map_" in k], sorted(keys)
    assert "test/ndcg_avg" in logged
    with pytest.raises(InputError, match="report_map is False"):
        loop.train_and_evaluate(
            config("msrvtt_hgr", "runlocal", checkpoint__best_metric="map_avg"), tmp_path / "b"
        )


def test_host_and_device_gathers_agree_through_the_video_map(ranp_run, tmp_path):
    """Caption rows reach their video's features the same way on the host and the devices
    (the shared RANP run gathered on the devices, the same config on the host)."""
    losses = {"device": [r["train/loss"] for r in jsonl(ranp_run[0]) if "train/loss" in r]}
    loop.train_and_evaluate(_ranp("host"), tmp_path / "host")
    losses["host"] = [r["train/loss"] for r in jsonl(tmp_path / "host") if "train/loss" in r]
    np.testing.assert_allclose(losses["host"], losses["device"], rtol=1e-5)


def test_batch_relevance_scores_videos_against_their_captions():
    c = config("msrvtt_hgr", "ran,runlocal")
    assert c.data.train_relevance == "caption"
    run = pipeline.build(c)
    rel = np.concatenate(
        [run.objective.host_batch(0, s, 16)["rel"][:, 0, :] for s in range(4)]
    )  # [64, 16] rows of 4 batches
    diagonal = np.concatenate(
        [np.diagonal(run.objective.host_batch(0, s, 16)["rel"][:, 0, :]) for s in range(4)]
    )
    assert np.all((0 <= rel) & (rel <= 1)) and np.any(diagonal < 1)  # own captions too
    same = pipeline.build(config("msrvtt_hgr", "ran,runlocal", data__train_relevance="video"))
    assert np.all(np.diagonal(same.objective.host_batch(0, 0, 16)["rel"][:, 0, :]) == 1)
    with pytest.raises(InputError, match="needs train rows that are captions"):
        pipeline.build(config("epic_hgr", "ran,runlocal", data__train_relevance="caption"))
    with pytest.raises(InputError, match="unknown config.data.train_relevance 'both'"):
        checks.check_train(config("msrvtt_hgr", "runlocal", data__train_relevance="both"))
