"""The public EK-100 files as they are (issue 29, parts 2 and 3), on small files written in
their structures by `public_formats` (from the public scripts, not jaxsvr's writers):
the JPoSE data folder (mean video features, frozen caption / verb / noun features,
relational dicts, the official relevancy matrix) and the TBN per-segment pickles
(converted once into memory-mapped stores). End to end: JPoSE and MME trained on frozen
text features, `submit` -> `evaluate --submission` with the official relevancy pickle
equal to the run's metrics, a TBN-pickle run."""

from __future__ import annotations

import ast
import json
import logging
import pickle
import shutil

import numpy as np
import pandas as pd
import public_formats as pf
import pytest
from test_submission import _cli
from train_runs import config

from jaxsvr import evaluate, models, retrieve, submit
from jaxsvr import features as features_cli
from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.evaluation import submission
from jaxsvr.inputs import features, tbn
from jaxsvr.relevance import class_relevance
from jaxsvr.train import loop, pipeline


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """(root, frames): EPIC tables, a JPoSE data folder and TBN pickles under root."""
    root = tmp_path_factory.mktemp("public")
    frames = pf.write_tables(root / "epic")
    pf.write_jpose_folder(root / "JPoSE_data", frames)
    pf.write_tbn_pickles(root / "tbn", frames)
    return root, frames


def _config(root, name="epic_jpose", folder="JPoSE_data", **overrides):
    keys = dict(
        data__annotations=str(root / "epic"),
        data__features=str(root / folder),
        data__allow_pickle=True,
        data__feature_cache=str(root / "cache"),
    )
    return config(name, "runlocal", **{**keys, **overrides})


def test_tbn_pickles_become_memory_mapped_stores(public, tmp_path, caplog):
    root, frames = public
    blocks = pickle.loads((root / "tbn/train.pkl").read_bytes())
    whole = np.concatenate([blocks[m] for m in tbn.MODALITIES], axis=-1)
    segments, mean = tbn.convert(root / "tbn/train.pkl", tmp_path / "out")
    assert np.array_equal(np.load(segments), whole)
    np.testing.assert_allclose(np.load(mean), whole.mean(axis=1), rtol=1e-6, atol=1e-6)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["train.npy", "train_mean.npy"]

    # first use converts into the cache and says so; the second run reads it
    cache = tmp_path / "cache"
    find = dict(rows=len(frames["train"]), allow_pickle=True, cache=str(cache))
    with caplog.at_level(logging.INFO):
        first = features.find_split_features(root / "tbn", "train", temporal="segments", **find)
    assert "converting" in caplog.text and isinstance(first, np.memmap)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = features.find_split_features(root / "tbn", "train", temporal="mean", **find)
    assert "converting" not in caplog.text and "converted stores" in caplog.text
    assert np.array_equal(first, whole) and again.shape == (len(frames["train"]), 3 * pf.BLOCK)
    np.testing.assert_allclose(again, whole.mean(axis=1), rtol=1e-6, atol=1e-6)
    # a converted folder: the mean store when the model reads clip vectors, else segments
    out = tmp_path / "out"
    assert np.array_equal(
        features.find_split_features(out, "train", temporal="mean", **find), np.load(mean)
    )
    assert features.find_split_features(out, "train", **find).ndim == 3

    # without consent nothing is unpickled, and a bad pickle leaves no store behind
    with pytest.raises(InputError, match="allow_pickle=True"):
        features.find_split_features(root / "tbn", "test", rows=len(frames["test"]))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.pkl").write_bytes(pickle.dumps({"RGB": whole[..., :8], "Audio": whole}))
    with pytest.raises(InputError, match=r"no Flow in the pickled dict \(keys: RGB, Audio\)"):
        features.find_split_features(bad, "train", temporal="mean", **find)
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def test_features_cli_converts_with_consent(public, tmp_path, capsys):
    root, _ = public
    args = ["convert", root / "tbn/test.pkl", "--out", tmp_path]
    code, _, err = _cli(features_cli, args, capsys)
    assert code == 2 and err.count("\n") == 1 and "--allow-pickle" in err
    assert list(tmp_path.iterdir()) == []
    code, _, err = _cli(features_cli, [*args, "--allow-pickle"], capsys)
    assert code == 0 and sorted(p.name for p in tmp_path.iterdir()) == [
        "test.npy",
        "test_mean.npy",
    ]


def test_the_jpose_folder_as_inputs(public, caplog):
    root, frames = public
    c = _config(root, model__text_input="features")
    assert models.text_fields(c) == ("verb_feature", "noun_feature")
    with caplog.at_level(logging.INFO):
        splits = pipeline.load_splits(c.data, models.text_fields(c), models.video_input(c))
    # each train clip reads the folder's row of its narration's sentence (first of it)
    sentences = list(frames["train_sentences"].sentence)
    table = pickle.loads(
        (
            root / "JPoSE_data/text_features/EPIC_100_retrieval_noun_text_features_train.pkl"
        ).read_bytes()
    )
    rows = [sentences.index(n) for n in frames["train"].narration]
    np.testing.assert_array_equal(splits.train.text["noun_feature"], table[rows].astype(np.float32))
    assert splits.test.text["verb_feature"].shape == (len(frames["test_sentences"]), pf.WORD_DIM)
    official = pickle.loads(
        (root / "JPoSE_data/relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl").read_bytes()
    )
    np.testing.assert_array_equal(splits.test.relevance, official.astype(np.float32))
    assert "largest |difference| to jaxsvr's class relevance 0, 0 entries differ" in caplog.text
    assert "classes of all 120 train clips equal the train table's" in caplog.text
    video = pickle.loads(
        (root / "JPoSE_data/video_features/EPIC_100_retrieval_test_features_mean.pkl").read_bytes()
    )["features"]
    np.testing.assert_array_equal(splits.test.video, video)


def test_the_folder_s_own_classes_and_relevance_win_and_are_reported(public, tmp_path, caplog):
    root, frames = public
    folder = tmp_path / "JPoSE_data"
    pf.write_jpose_folder(folder, frames)
    path = folder / "relational/EPIC_100_retrieval_verb_relational_dict_train.pkl"
    rel = pickle.loads(path.read_bytes())
    first = next(iter(rel["vid2class"]))
    rel["vid2class"][first] = 95
    path.write_bytes(pickle.dumps(rel))
    path = folder / "relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl"
    official = pickle.loads(path.read_bytes())
    official[3, 2] = 0.75 if official[3, 2] != 0.75 else 0.25
    path.write_bytes(pickle.dumps(official))
    c = _config(root, data__features=str(folder))
    with caplog.at_level(logging.INFO):
        splits = pipeline.load_splits(c.data)
    assert splits.train.verbs[0] == 95
    assert splits.test.relevance[3, 2] == np.float32(official[3, 2])
    says = f"differ from the train table's for 1 verb (first: clip {first}, table verb"
    assert says in caplog.text
    assert "(clip 3, sentence 2), 1 entries differ by more than 1e-6" in caplog.text


@pytest.mark.parametrize(
    "change, says",
    [
        ({"data__allow_pickle": False}, "is a JPoSE data folder of pickles"),
        ({"data__features": ""}, "reads the frozen text features of a public JPoSE data folder"),
    ],  # an unknown model.text_input: check_train (tests/test_train_config_errors.py)
)
def test_jpose_folder_bad_settings_are_one_line(public, change, says):
    root, _ = public
    c = _config(root, **{"model__text_input": "features", **change})
    with pytest.raises(InputError, match=says):
        pipeline.load_splits(c.data, models.text_fields(c), models.video_input(c))


def _repickle(folder, name, change):
    path = folder / name
    path.write_bytes(pickle.dumps(change(pickle.loads(path.read_bytes()))))


TEXT = "text_features/EPIC_100_retrieval_verb_text_features_{}.pkl"


@pytest.mark.parametrize(
    "name, change, says",
    [
        (TEXT.format("train"), lambda x: x[:-1], "rows but the train sentence table has"),
        (TEXT.format("test"), lambda x: x[:-1], "rows but the test sentence table has"),
        (TEXT.format("test"), lambda x: x[:, 0], "expected a 2-D array of real numbers"),
        (
            "relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl",
            lambda x: x[:, :-1],
            "60 clips x 58 sentences: use the folder's tables",
        ),
        (
            "relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl",
            lambda x: x * 2,
            r"relevance must lie in \[0, 1\]",
        ),
        (
            "relational/EPIC_100_retrieval_noun_relational_dict_train.pkl",
            lambda x: {**x, "vid2class": dict(list(x["vid2class"].items())[1:])},
            "vid2class has 119 clips but the train table has 120",
        ),
    ],
)
def test_public_files_of_other_tables_are_one_line(public, tmp_path, name, change, says):
    root, frames = public
    folder = pf.write_jpose_folder(tmp_path / "JPoSE_data", frames)
    _repickle(folder, name, change)
    c = _config(root, data__features=str(folder), model__text_input="features")
    with pytest.raises(InputError, match=says) as e:
        pipeline.load_splits(c.data, models.text_fields(c), models.video_input(c))
    assert "\n" not in str(e.value) and str(folder) in str(e.value)


@pytest.fixture(scope="module")
def jpose_run(public):
    """JPoSE trained on the folder's frozen verb / noun features, similarity exported."""
    root, _ = public
    c = _config(root, model__text_input="features")
    c.eval.export_similarity = True
    loop.train_and_evaluate(c, root / "jpose_run")
    return root, root / "jpose_run"


def test_jpose_on_frozen_features_submits_its_own_metrics(jpose_run, tmp_path, capsys):
    root, workdir = jpose_run
    own = json.loads((workdir / "metrics.json").read_text())
    assert own["ndcg_avg"] > 0.3  # well above chance on class-structured features
    out = tmp_path / "sub.pkl"
    code, _, err = _cli(submit, ["--workdir", workdir, "--out", out], capsys)
    assert code == 0, err
    relevancy = root / "JPoSE_data/relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl"
    tables = [
        "--clips",
        root / "epic" / epic100.TEST_CLIPS,
        "--sentences",
        root / "epic" / epic100.TEST_SENTENCES,
        "--relevance",
        relevancy,
        "--allow-pickle",
    ]
    code, text, err = _cli(evaluate, ["--submission", out, *tables], capsys)
    assert code == 0 and err == "", err
    scored = json.loads(text)
    shared = [k for k in scored if k in own]
    assert len(shared) >= 30 and {k: scored[k] for k in shared} == {k: own[k] for k in shared}
    entry = submission.read(out, allow_pickle=True)
    rng = np.random.default_rng(1)
    rows, cols = rng.permutation(len(entry.vis_ids)), rng.permutation(len(entry.txt_ids))
    submission.write(
        tmp_path / "shuffled.pkl",
        submission.Submission(
            entry.sim[np.ix_(rows, cols)],
            [entry.vis_ids[i] for i in rows],
            [entry.txt_ids[j] for j in cols],
        ),
    )
    code, again, _ = _cli(evaluate, ["--submission", tmp_path / "shuffled.pkl", *tables], capsys)
    assert code == 0 and json.loads(again) == scored


@pytest.mark.parametrize(
    "name, folder, text_input, video",
    [
        ("epic_mme", "JPoSE_data", "features", (3 * pf.BLOCK,)),
        ("epic_mme", "tbn", "words", (3 * pf.BLOCK,)),  # the temporal mean, as published
        ("epic_contra", "tbn", None, (5, 3 * pf.BLOCK)),  # ConTra reads segments
        ("epic_sms", "JPoSE_data", None, (3 * pf.BLOCK,)),  # heads: the caption features
    ],
)
def test_public_features_train_end_to_end(public, tmp_path, name, folder, text_input, video):
    root, _ = public
    extra = {} if text_input is None else {"model__text_input": text_input}
    c = _config(root, name, folder, **extra)
    c.train.num_epochs = 2
    run = pipeline.build(c)
    assert run.splits.train.video.shape[1:] == video
    loop.train_and_evaluate(c, tmp_path / "run")
    metrics = json.loads((tmp_path / "run/metrics.json").read_text())
    assert np.isfinite(metrics["ndcg_avg"]) and metrics["ndcg_avg"] > 0.2


def test_a_clip_without_its_sentence_is_one_line(public, tmp_path):
    root, _ = public
    shutil.copytree(root / "epic", tmp_path / "epic")
    path = tmp_path / "epic" / epic100.TRAIN_SENTENCES
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:1] + lines[2:]))  # the first sentence gone
    c = _config(root, data__annotations=str(tmp_path / "epic"), model__text_input="features")
    with pytest.raises(InputError, match=r"train clip TR00_0 \(.*\) has no sentence in"):
        pipeline.load_splits(c.data, models.text_fields(c), models.video_input(c))


def test_the_public_relevancy_of_the_real_tables_is_jaxsvr_s(epic_dir):
    """On the real EK-100 test tables, the public script's relevancy matrix (its sentence
    table rebuilt from the clip CSV and matched to the official sentence file by id) is
    jaxsvr's class relevance: the difference the log reports is float32 rounding there."""
    clips_df = pd.read_csv(epic_dir / epic100.TEST_CLIPS, index_col="narration_id")
    clips_df["all_noun_classes"] = clips_df.all_noun_classes.apply(ast.literal_eval)
    sents = pf.sentence_df(clips_df).set_index("index")
    official = pd.read_csv(epic_dir / epic100.TEST_SENTENCES)
    # the same sentences: the public set's extra rows are in hash order, so match by id
    assert sorted(sents.index) == sorted(official.narration_id)
    public = pf.relevancy(clips_df, sents.loc[official.narration_id])
    clips = epic100.read_clips(epic_dir / epic100.TEST_CLIPS)
    ours = class_relevance(
        clips.verb_classes,
        clips.noun_classes,
        *(lambda s: (s.verb_classes, s.noun_classes))(
            epic100.read_sentences(epic_dir / epic100.TEST_SENTENCES, clips)
        ),
    )
    assert public.shape == ours.shape == (9668, 3842)
    # equal up to float32 rounding (the script computes in float64): at most one ulp (the
    # largest difference, as assert_allclose(rtol=0, atol=1e-7) checks each, in 1/10 of
    # its time on 37M entries; NaN fails it)
    gap = float(np.max(np.abs(public - ours)))
    assert gap <= 1e-7, gap


def test_a_frozen_feature_run_answers_clips_not_free_text(jpose_run, capsys):
    _, workdir = jpose_run
    code, _, err = _cli(retrieve, ["--workdir", workdir, "--query", "wash the pan"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "reads frozen text features (verb_feature, noun_feature)" in err
    code, out, err = _cli(
        retrieve, ["--workdir", workdir, "--clip", "TE00_3", "--top", "3"], capsys
    )
    assert code == 0 and len(out.strip().splitlines()) == 4, err
