"""ConTra on ActivityNet Clip-Sentence: the paper's settings, no input projection, runs on
the built-in data and on files in the public format with feature files beside them."""

import json

import jax
import numpy as np
import pytest
from train_runs import config, jsonl

from jaxsvr import models
from jaxsvr.annotations import activitynet, load
from jaxsvr.errors import InputError
from jaxsvr.train import loop, pipeline


def test_paper_settings():
    c = config("activitynet_contra", None)
    assert c.data.format == "activitynet" and c.model.name == "contra"
    assert (c.model.embed_dim, c.model.video_projection) == (384, False)
    assert 3 * c.data.synthetic.block_dim == 384  # synthetic features as wide as COOT's
    assert (c.model.video_layers, c.model.video_heads, c.model.ff_dim) == (2, 8, 2048)
    assert (c.model.dropout, c.model.m_video, c.model.m_text) == (0.3, 3, 0)
    assert c.optimizer.name == "adam" and c.optimizer.lr == 1e-4
    assert c.optimizer.schedule == "warmup_linear"
    assert (c.optimizer.warmup_steps, c.optimizer.warmup_fraction) == (1300, 0.0)
    assert c.train.batch_size == 512 and c.loss.cross_modal_nce.temperature == 0.07
    c = config("activitynet_contra", "context=both,m=1")
    assert (c.model.m_video, c.model.m_text) == (1, 1)
    # the paper's best m per context on ActivityNet CS (the public code's commands use 5)
    assert config("activitynet_contra", "context=text").model.m_text == 4
    c = config("activitynet_contra", "context=both")
    assert (c.model.m_video, c.model.m_text) == (4, 4)


def test_without_projection_the_features_must_fit_the_embedding():
    c = config("activitynet_contra", "runlocal")
    assert c.model.embed_dim == 3 * c.data.synthetic.block_dim
    model = models.build(c, vocab_size=10, video_dim=c.model.embed_dim)
    video = np.zeros((2, 2 * c.model.m_video + 1, c.model.embed_dim), np.float32)
    params = model.init(jax.random.PRNGKey(0), {"video": video}, method="embed_video")
    assert "video_proj" not in params["params"]
    with pytest.raises(InputError, match="video_projection is False.*have 40 dims"):
        models.build(c, vocab_size=10, video_dim=40).init(
            jax.random.PRNGKey(0),
            {"video": video[..., :40]},
            method="embed_video",
        )


def test_runs_on_the_built_in_data(tmp_path):
    c = config("activitynet_contra", "m=1,runlocal", train__num_epochs=1)
    data = pipeline.load_splits(c.data)
    order = [r.tolist() for r in data.train.clips.video_clips().values()]
    assert order[0] == list(range(len(order[0])))  # clips in time order, as stored
    assert data.video_dim == c.model.embed_dim
    m = loop.train_and_evaluate(c, tmp_path)
    assert np.isfinite(m["rsum"]) and np.isfinite(m["ndcg_avg"])


def _public_files(folder):
    """The built-in kitchen clips written as ActivityNet Captions' loop.json / val_1.json
    (each video's clips reversed in the file, so the reader's time order differs from it)."""
    ann = load.builtin(6, 3, 20, seed=0)
    for name, clips in (("train.json", ann.train), ("val_1.json", ann.test)):
        videos = {}
        for vid, rows in clips.video_clips().items():
            rows = rows[::-1].tolist()
            videos[f"v_{vid}"] = {
                "duration": float(clips.stop_s[rows].max()) + 1.0,
                "timestamps": [[float(clips.start_s[r]), float(clips.stop_s[r])] for r in rows],
                "sentences": [clips.narration[r] for r in rows],
            }
        (folder / name).write_text(json.dumps(videos))


def test_runs_on_public_files_with_feature_files(tmp_path):
    annotations, feats = tmp_path / "anet", tmp_path / "feats"
    annotations.mkdir()
    feats.mkdir()
    _public_files(annotations)
    rows = activitynet.read(annotations)
    assert rows.clip_id[:2] == ["v_TR00_19", "v_TR00_18"]  # time order: the file's last first
    c = config(
        "activitynet_contra",
        "m=1,runlocal",
        train__num_epochs=1,
        data__annotations=str(annotations),
        data__features=str(feats),
    )
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        n = rows.split.count(split)
        np.save(feats / f"{split}.npy", rng.normal(size=(n, 48)).astype(np.float32))
    m = loop.train_and_evaluate(c, tmp_path / "work")
    assert np.isfinite(m["rsum"])
    assert any("train/loss" in r for r in jsonl(tmp_path / "work"))
    np.save(feats / "test.npy", np.zeros((5, 48), np.float32))  # not one row per test clip
    with pytest.raises(InputError, match="test.npy"):
        pipeline.load_splits(c.data)


def test_captions_without_nouns_cannot_draw_synthetic_features(tmp_path):
    """Well-formed files whose captions ("a") give no noun class: synthetic features are
    drawn around class prototypes, so this is one error line, before training."""
    entry = '{"v_%s": {"duration": 9, "timestamps": [[1, 2]], "sentences": ["a"]}}'
    for name, video in (("train.json", "a"), ("val_1.json", "b")):
        (tmp_path / name).write_text(entry % video)
    c = config("activitynet_contra", "runlocal", data__annotations=str(tmp_path))
    with pytest.raises(InputError) as e:
        pipeline.load_splits(c.data, ("caption",))
    message = str(e.value)
    assert message.startswith("synthetic features need verb and noun classes")
    assert "0 noun classes" in message and "config.data.features" in message
