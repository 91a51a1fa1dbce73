"""Training with caption proxies: YouCook2-style data, proxy test relevance, thresholded
semantic triplets (positives S >= T, negatives S < T) and instance triplets."""

import json

import numpy as np
import pytest
from train_runs import config

from jaxsvr.annotations import youcook2
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions
from jaxsvr.relevance import proxies, split_relevance
from jaxsvr.sampling import triplets
from jaxsvr.train import loop, pipeline


def test_threshold_pairs_against_dense():
    rng = np.random.default_rng(0)
    dense = rng.random((23, 23)).astype(np.float32)
    indptr, indices = proxies.threshold_pairs(lambda idx: dense[idx], 23, 0.7, chunk=5)
    for i in range(23):
        want = sorted(set(np.flatnonzero(dense[i] >= 0.7)) | {i})
        assert indices[indptr[i] : indptr[i + 1]].tolist() == want


def test_semantic_sampler_draws_inside_and_outside_the_threshold():
    rng = np.random.default_rng(1)
    n = 40
    s = rng.random((n, n))
    s = (s + s.T) / 2
    indptr, indices = proxies.threshold_pairs(lambda idx: s[idx], n, 0.6)
    verbs = rng.integers(0, 3, n)
    nouns = ClassSets.from_lists([[int(x)] for x in rng.integers(0, 4, n)])
    sampler = triplets.TripletSampler(
        verbs, nouns, levels=("action",), num_triplets=5, semantic=(indptr, indices)
    )
    t = sampler.triplets(0)
    anchors = np.arange(n)[:, None]
    pos, neg = t.positive[:, 0], t.negative[:, 0]
    assert np.all((s[anchors, pos] >= 0.6) | (pos == anchors))
    assert np.all((s[anchors, neg] < 0.6) & (neg != anchors))
    inst = triplets.TripletSampler(
        verbs,
        nouns,
        levels=("action",),
        num_triplets=3,
        semantic=(np.arange(n + 1), np.arange(n, dtype=np.int32)),
    )
    ti = inst.triplets(0)
    assert np.all(ti.positive[:, 0] == anchors) and np.all(ti.negative[:, 0] != anchors)
    with pytest.raises(InputError, match="fixed margin"):
        triplets.TripletSampler(verbs, nouns, margin="relevance", semantic=(indptr, indices))


def test_builtin_youcook2_form_and_proxy_relevance():
    c = config("youcook2_mme", "proxy=bow,runlocal")
    data = pipeline.load_splits(c.data)
    test = data.test
    assert test.relevance.shape == (len(test.clips), len(test.sentence_rows))
    own = test.relevance[test.sentence_rows, np.arange(len(test.sentence_rows))]
    np.testing.assert_array_equal(own, 1.0)
    # off the own pairs the relevance is BoW between the clip's caption and the sentence
    rows = captions.parse(test.clips.narration)
    cols = captions.parse([test.clips.narration[r] for r in test.sentence_rows])
    bow = proxies.bow(rows, cols)
    other = test.relevance != 1.0
    np.testing.assert_allclose(test.relevance[other], bow[other])
    assert data.train.clips.narration_id[0].startswith("training-")


def test_youcook2_file_multi_caption_and_errors(tmp_path):
    obj = {
        "database": {
            "a": {
                "subset": "training",
                "annotations": [
                    {"id": 0, "segment": [0, 2], "sentence": "cut the onion"},
                    {"id": 1, "segment": [2, 4], "sentence": "wash the pan"},
                    {"id": 2, "segment": [4, 6], "sentence": "stir the soup"},
                ],
            },
            "b": {
                "subset": "validation",
                "annotations": [
                    {"id": 0, "segment": [0, 2], "sentence": "chop an onion"},
                    {"id": 1, "segment": [2, 3], "sentence": "rinse the pan"},
                ],
            },
        }
    }
    path = tmp_path / "yc2.json"
    youcook2.write(obj, path)
    c = config("youcook2_mme", "proxy=pos,runlocal")
    c.data.annotations = str(path)
    data = pipeline.load_splits(c.data)
    assert len(data.train.clips) == 3 and len(data.test.clips) == 2
    np.testing.assert_allclose(data.test.relevance, [[1.0, 0.0], [0.0, 1.0]])
    obj["database"]["b"]["subset"] = "training"
    youcook2.write(obj, path)
    with pytest.raises(InputError, match="no test or validation captions"):
        pipeline.load_splits(c.data)
    c.data.format = "msrvtt"
    c.data.annotations = ""  # built-in MSR-VTT-style videos, 20 captions each
    data = pipeline.load_splits(c.data)
    assert len(data.test.text["caption"]) == 20 * len(data.test.clips)
    c.data.format = "youtube"
    with pytest.raises(InputError, match="unknown config.data.format 'youtube'"):
        pipeline.load_splits(c.data)


@pytest.mark.parametrize("arg", ["proxy=syn,t=0.4,runlocal", "instance,runlocal"])
def test_youcook2_mme_trains(arg, tmp_path):
    m = loop.train_and_evaluate(config("youcook2_mme", arg, train__num_epochs=2), tmp_path)
    assert np.isfinite(m["ndcg_avg"]) and 0 < m["ndcg_avg"] <= 1
    assert json.loads((tmp_path / "metrics.json").read_text())["ndcg_avg"] == m["ndcg_avg"]


def test_semantic_positives_follow_the_threshold(tmp_path):
    c = config("youcook2_mme", "proxy=bow,runlocal")
    clips = pipeline.load_splits(c.data).train.clips
    parsed = captions.parse(clips.narration)
    bow = proxies.bow(parsed)
    indptr, indices = split_relevance.semantic_positives(
        pipeline.relevance_spec(c.data), clips, 0.5
    )
    for i in range(len(clips)):
        want = sorted(set(np.flatnonzero(bow[i] >= 0.5)) | {i})
        assert indices[indptr[i] : indptr[i + 1]].tolist() == want
    with pytest.raises(InputError, match="sampler.positives 'maybe'"):
        loop.train_and_evaluate(
            config("youcook2_mme", "runlocal", sampler__positives="maybe"), tmp_path
        )


def test_youcook2_contra_windows_over_recipe_steps(tmp_path):
    c = config("youcook2_contra", "m=1,runlocal", train__num_epochs=1)
    assert c.data.format == "youcook2"
    data = pipeline.load_splits(c.data)
    order = [r.tolist() for r in data.train.clips.video_clips().values()]
    assert order[0] == list(range(len(order[0])))  # segments in time order, as stored
    m = loop.train_and_evaluate(c, tmp_path)
    assert np.isfinite(m["rsum"]) and np.isfinite(m["ndcg_avg"])


def test_jpose_with_proxy_positives(tmp_path):
    """JPoSE keeps class-sampled verb/noun levels; its action level takes proxy positives."""
    c = config(
        "epic_jpose",
        "runlocal",
        data__format="youcook2",
        data__relevance__proxy="pos",
        sampler__positives="proxy",
        sampler__threshold=0.5,
        train__num_epochs=1,
    )
    m = loop.train_and_evaluate(c, tmp_path)
    assert np.isfinite(m["ndcg_avg"])


def test_youcook2_relevance_margin_trains_on_caption_classes(tmp_path, epic_dir):
    """configs/youcook2_mme.py:margin=relevance: class triplets over classes derived from
    the captions with EPIC's class CSVs (the relevance-margin paper's YouCook2 setting),
    margins 1 - R below 1 for related negatives, evaluated on that relevance."""
    from jaxsvr.analysis import margin

    c = config("youcook2_mme", "margin=relevance,runlocal")
    assert c.data.syn_classes == str(epic_dir)  # the default: EPIC's classes, not words
    margins = margin.triplet_margins(c)["action"]
    assert 0.0 <= margins.min() < 1.0 and margins.max() <= 1.0
    out = loop.train_and_evaluate(c, tmp_path)
    assert np.isfinite(out["ndcg_avg"]) and np.isfinite(out["map_avg"])
