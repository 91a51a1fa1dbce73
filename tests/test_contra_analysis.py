"""ConTra's analyses on finished runlocal runs: window attention per layer (shapes, rows
that sum to 1, layer 0 recomputed by hand from the parameters) and rank changes by clip
length (hand-worked ranks and bins; two trained runs with and without context)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from train_runs import config

from jaxsvr.analysis import contra
from jaxsvr.analysis.contra import RankChanges, WindowAttention
from jaxsvr.errors import InputError
from jaxsvr.inputs import model_inputs
from jaxsvr.runs.gallery import Gallery, TrainedRun, rebuild
from jaxsvr.train import loop

matplotlib.use("Agg")


def _contra(m: int):
    """The runlocal ConTra config with clip context m, trained one epoch (what is checked
    holds after any number of steps; the programs, compiled once per run, cost), saving
    one checkpoint: the last step's, which the analyses read. Notebook 05 trains the same
    three runs (m = 2 with and without NEI, m = 0): the session compiles them once."""
    return config(
        "epic_contra",
        f"m={m},runlocal",
        train__num_epochs=1,
        checkpoint__every_steps=1000,
        checkpoint__best_metric="",
    )


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """{m: workdir} of finished ConTra runs with clip context m = 2 (2 layers) and m = 0,
    both trained with NEI (the default weight, 1)."""
    out = {}
    for m in (2, 0):
        work = tmp_path_factory.mktemp(f"contra_m{m}")
        loop.train_and_evaluate(_contra(m), work)
        out[m] = work
    return out


@pytest.fixture(scope="module")
def runs(workdirs):
    """{m: TrainedRun} of the runs of `workdirs`, at their latest checkpoints."""
    return {m: TrainedRun.load(work, "latest") for m, work in workdirs.items()}


def _layer0_by_hand(run: TrainedRun) -> np.ndarray:
    """Mean attention of the first layer, from its parameters in NumPy (no dropout)."""
    splits, model = rebuild(run)
    video, _, windows = model_inputs.test_inputs(model, splits.test)
    params = run.params["params"]
    p = params["video_context"]
    x = np.asarray(video)[windows] @ params["video_proj"]["kernel"]
    x = x + params["video_proj"]["bias"] + p["position"]  # [n, W, d]
    att = p["layer0"]["attention"]
    q = np.einsum("nwd,dhk->nwhk", x, att["query"]["kernel"]) + att["query"]["bias"]
    k = np.einsum("nwd,dhk->nwhk", x, att["key"]["kernel"]) + att["key"]["bias"]
    logits = np.einsum("nqhk,nshk->nhqs", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights.mean(axis=(0, 1))


def test_window_attention(runs):
    got = contra.window_attention(runs[2], chunk=7)  # several chunks
    assert isinstance(got, WindowAttention) and got.m == 2
    assert got.matrix.shape == (2, 5, 5) and got.centre.shape == (2, 5)
    np.testing.assert_allclose(got.matrix.sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(got.matrix[0], _layer0_by_hand(runs[2]), atol=2e-5)
    np.testing.assert_array_equal(got.centre, got.matrix[:, 2])
    ax = contra.plot_window_attention(got)
    assert len(ax.get_lines()) == 2
    with pytest.raises(InputError, match="no clip context"):
        contra.window_attention(runs[0])


def test_ranks_and_rank_changes_by_hand():
    # 3 clips x 4 sentences; sentence j describes clip paired[j]
    sim_m0 = np.array([[0.9, 0.1, 0.5, 0.2], [0.8, 0.7, 0.5, 0.3], [0.1, 0.6, 0.1, 0.9]])
    sim_m = np.array([[0.9, 0.1, 0.2, 0.2], [0.1, 0.7, 0.5, 0.3], [0.1, 0.8, 0.1, 0.1]])
    paired = np.array([0, 1, 1, 2])
    # t2v ranks (column j, rank of clip paired[j]; ties count as above):
    # m0: s0 -> 1, s1 -> 1 (0.7 vs 0.6), s2 -> 2 (0.5 ties 0.5), s3 -> 1
    # m:  s0 -> 1, s1 -> 2 (0.8 above), s2 -> 1, s3 -> 3 (0.2, 0.3 above, itself 0.1)
    np.testing.assert_array_equal(contra.ranks(sim_m0, paired), [1, 1, 2, 1])
    np.testing.assert_array_equal(contra.ranks(sim_m, paired), [1, 2, 1, 3])
    seconds = np.array([2.0, 10.0, 4.0])  # clip lengths; sentences' clips: 2, 10, 10, 4
    got = contra.rank_changes(sim_m0, sim_m, paired, seconds, bins=[0, 3, 5, 20])
    assert isinstance(got, RankChanges) and got.direction == "t2v"
    np.testing.assert_array_equal(got.count, [1, 1, 2])
    # changes 0, -1, +1, -2; bins [0, 3): s0; [3, 5): s3; [5, 20]: s1, s2 -> (-1 + 1) / 2
    np.testing.assert_allclose(got.mean_change, [0.0, -2.0, 0.0])
    # v2t: each clip's sentence (clip 0 -> s0, clip 1 -> s1, clip 2 -> s3)
    v2t = contra.rank_changes(
        sim_m0, sim_m, np.array([0, 1, 3]), seconds, direction="v2t", bins=[0, 3, 5, 20, 30]
    )
    # m0 rows: clip0 s0 0.9 -> 1; clip1 s1 0.7 vs 0.8 -> 2; clip2 s3 0.9 -> 1
    # m rows: clip0 -> 1; clip1 s1 0.7 -> 1; clip2 s3 0.1 vs 0.8 and ties 0.1 (x3) -> 4
    np.testing.assert_array_equal(v2t.count, [1, 1, 1, 0])
    np.testing.assert_allclose(v2t.mean_change[:3], [0.0, -3.0, 1.0])
    assert np.isnan(v2t.mean_change[3])
    assert len(contra.plot_rank_changes(v2t).patches) == 4
    with pytest.raises(InputError, match="increasing"):
        contra.rank_changes(sim_m0, sim_m, paired, seconds, bins=[3, 1])
    with pytest.raises(InputError, match="same test split"):
        contra.rank_changes(sim_m0, sim_m[:2], paired, seconds)


def test_rank_changes_between_runs(runs):
    got = contra.rank_changes_between(runs[0], runs[2], bins=[0, 1, 2, 3])
    sentences = len(Gallery.of(runs[0]).sentences["narration_id"])
    np.testing.assert_array_equal(got.count, [0, sentences, 0])  # built-in clips: 1.5 s
    assert np.isfinite(got.mean_change[1])
    v2t = contra.rank_changes_between(runs[0], runs[2], direction="v2t", bins=2)
    own = set(Gallery.of(runs[0]).sentences["narration_id"])  # clips with a sentence
    assert v2t.count.sum() == len(own) and np.all(np.isfinite(v2t.mean_change[v2t.count > 0]))


def test_rank_changes_by_word_by_hand():
    # 3 clips x 3 sentences; sentence j describes clip j
    sentences = ["cut the onion", "wash the onion", "cut bread"]
    paired = np.array([0, 1, 2])
    sim_a = np.array([[0.1, 0.9, 0.2], [0.9, 0.1, 0.1], [0.5, 0.5, 0.9]], np.float32)
    sim_b = np.eye(3, dtype=np.float32)  # every own clip first
    # t2v ranks under A: sentence 0: clips score 0.1, 0.9, 0.5 -> own (0.1) rank 3;
    # sentence 1: 0.9, 0.1, 0.5 -> own rank 3; sentence 2: 0.2, 0.1, 0.9 -> rank 1
    changes = contra.rank_changes_by_word(sim_a, sim_b, paired, sentences, min_count=1)
    got = dict(zip(changes.words, changes.mean_change))
    assert got == {"cut": 1.0, "the": 2.0, "onion": 2.0, "wash": 2.0, "bread": 0.0}
    assert changes.words[:3] == ["onion", "the", "wash"] and changes.words[-1] == "bread"
    assert dict(zip(changes.words, changes.count))["cut"] == 2
    kept = contra.rank_changes_by_word(sim_a, sim_b, paired, sentences, min_count=2)
    assert sorted(kept.words) == ["cut", "onion", "the"]
    ax = contra.plot_word_rank_changes(changes, top=2)
    assert len(ax.patches) == 4
    with pytest.raises(InputError, match="same test sentences"):
        contra.rank_changes_by_word(sim_a, sim_b[:, :2], paired, sentences)


def test_neighbour_similarity_by_hand():
    # 4 clips of one video; clips 0 and 1 share a narration; sentence j describes clip j
    narrations = ["cut onion", "cut onion", "wash pan", "stir"]
    windows = np.array([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 3]])  # m = 1, edges repeated
    sim = np.array(
        [
            [0.9, 0.8, 0.1, 0.0],
            [0.7, 0.6, 0.3, 0.2],
            [0.2, 0.5, 0.4, 0.1],
            [0.1, 0.0, 0.6, 0.5],
        ]
    )
    got = contra.neighbour_similarity(sim, np.arange(4), windows, narrations)
    np.testing.assert_allclose(got.own, [0.9, 0.6, 0.4, 0.5])
    # sentence j against clip r is sim[r, j]. Clip 0: window 0, 0, 1, all "cut onion": no
    # neighbour; clip 1: clip 2 (0.5); clip 2: clips 1 and 3 (0.3, 0.6); clip 3: clip 2 (0.1)
    np.testing.assert_allclose(got.neighbour, [np.nan, 0.5, 0.45, 0.1])
    assert got.gap == pytest.approx(((0.6 - 0.5) + (0.4 - 0.45) + (0.5 - 0.1)) / 3)


def test_neighbour_similarity_of_runs_with_and_without_nei(tmp_path, workdirs):
    """The m = 2 run of `workdirs` (NEI weight 1) against the same config without NEI."""
    c = _contra(2)
    assert c.loss.contra.nei_weight == 1.0  # the shared run is the run with NEI
    c.loss.contra.nei_weight = 0.0
    loop.train_and_evaluate(c, tmp_path / "nei0.0")
    out = {}
    for weight, work in ((0.0, tmp_path / "nei0.0"), (1.0, workdirs[2])):
        out[weight] = contra.neighbour_similarity_of(TrainedRun.load(work), m=1)
    for result in out.values():
        assert result.own.shape == result.neighbour.shape == (58,)
        assert np.isfinite(result.gap)
    assert out[0.0].gap != out[1.0].gap
