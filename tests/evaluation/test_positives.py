"""Single-instance positives ranked from the class pass's similarity blocks
(`blocks.Positives`, `query_stats.positive_ranks`) equal a second ranking against them."""

import numpy as np
import pytest
from distributed_evaluation import seeded_evaluator

from jaxsvr.errors import InputError
from jaxsvr.evaluation import blocks, jax_engine
from jaxsvr.evaluation.evaluator import RECALL_KEYS
from jaxsvr.evaluation.streamed import stream_stats

RANK_FIELDS = ("n_pos", "first_pos", "last_pos")


def _tied_case(rng, trial, shape=None):
    """Similarities with many ties (few levels, -0.0 beside 0.0) or none, graded class
    relevance and binary positives: some queries have none, some several."""
    nv, nt = shape or rng.integers(1, 30, 2)
    levels = rng.integers(1, 5)
    sim = (rng.integers(-levels, levels + 1, (nv, nt)) / levels).astype(np.float32)
    sim[(sim == 0) & (rng.uniform(size=sim.shape) < 0.5)] = -0.0
    if trial % 4 == 0:
        sim = rng.standard_normal((nv, nt)).astype(np.float32)
    pos = (rng.uniform(size=(nv, nt)) < rng.uniform(0, 0.4)).astype(np.float32)
    rel = np.round(rng.uniform(size=(nv, nt)) * 4).astype(np.float32) / 4
    return sim, pos, rel


@pytest.mark.parametrize("block_queries", [1, 3, None])
def test_positive_ranks_equal_a_ranking_against_the_positives(block_queries):
    rng = np.random.default_rng(0)
    for trial in range(60):
        sim, pos, rel = _tied_case(rng, trial)
        scores, kw = blocks.Matrix(sim), dict(block_queries=block_queries, workers=2)
        fused = stream_stats(
            scores, blocks.MatrixRelevance(rel), positives=blocks.Positives(pos), **kw
        )
        ranked = stream_stats(scores, blocks.MatrixRelevance(pos), **kw)  # the second pass
        alone = stream_stats(scores, blocks.MatrixRelevance(rel), **kw)
        assert len(fused) == 4 and len(alone) == 2
        for d in (0, 1):
            for field in RANK_FIELDS:
                np.testing.assert_array_equal(
                    getattr(fused[2 + d], field), getattr(ranked[d], field), err_msg=field
                )
            for field, want in vars(alone[d]).items():  # the class statistics unchanged
                np.testing.assert_array_equal(getattr(fused[d], field), want, err_msg=field)


def test_hand_worked_ranks():
    # One query: similarities 0.5, 0.9, 0.5, -0.0, 0.0, positives items 0 and 3.
    # Ranked: 0.9 (item 1), then 0.5 with the non-positive first (item 2, item 0), then
    # 0.0 / -0.0 (equal) with the non-positive first (item 4, item 3).
    sim = np.array([[0.5, 0.9, 0.5, -0.0, 0.0]], np.float32)
    pos = blocks.Positives(np.array([[1, 0, 0, 1, 0]], np.float32))
    got = stream_stats(blocks.Matrix(sim), blocks.MatrixRelevance(np.ones_like(sim)), positives=pos)
    assert (got[2].n_pos[0], got[2].first_pos[0], got[2].last_pos[0]) == (2, 3, 5)
    # Text-to-video: each item is a query of one clip; only items 0 and 3 have positives.
    np.testing.assert_array_equal(got[3].first_pos, [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(got[3].n_pos, [1, 0, 0, 1, 0])


@pytest.mark.parametrize(
    "matrix, match",
    [
        (np.full((3, 4), 0.5, np.float32), "must be a 2-D matrix of 0 and 1"),
        (np.array([[np.nan, 1.0]], np.float32), "must be a 2-D matrix of 0 and 1"),
        (np.ones(4, np.float32), r"positives \(4,\) must be"),
    ],
)
def test_positives_that_are_not_binary_are_refused(matrix, match):
    with pytest.raises(InputError, match=match):
        blocks.Positives(matrix)


@pytest.mark.parametrize("engine", [stream_stats, jax_engine.stream_stats])
def test_positives_of_another_shape_are_refused(engine):
    sim = np.zeros((3, 4), np.float32)
    with pytest.raises(InputError, match="3 videos x 4 texts scored, but positives of 4 clips"):
        engine(
            blocks.Matrix(sim),
            blocks.MatrixRelevance(sim),
            positives=blocks.Positives(np.zeros((4, 3), np.float32)),
        )


@pytest.mark.parametrize("block_elements", [None, 17 * 5])
def test_jax_engine_positive_ranks_equal_its_ranking_against_them(monkeypatch, block_elements):
    """The JAX engine's jitted twin gives its own second ranking's integers, and the NumPy
    engine's (one shape, so the blocks compile once; 85 elements: padded blocks of 5 and 3
    queries)."""
    if block_elements:
        monkeypatch.setattr(jax_engine, "_BLOCK_ELEMENTS", block_elements)
    rng = np.random.default_rng(1)
    for trial in range(8):
        sim, pos, rel = _tied_case(rng, trial, shape=(23, 17))
        scores, positives = blocks.Matrix(sim), blocks.Positives(pos)
        fused = jax_engine.stream_stats(scores, blocks.MatrixRelevance(rel), positives=positives)
        ranked = jax_engine.stream_stats(scores, blocks.MatrixRelevance(pos))
        numpy_fused = stream_stats(scores, blocks.MatrixRelevance(rel), positives=positives)
        assert len(fused) == 4
        for d in (0, 1):
            for field in RANK_FIELDS:
                want = getattr(ranked[d], field)
                np.testing.assert_array_equal(getattr(fused[2 + d], field), want, err_msg=field)
                np.testing.assert_array_equal(getattr(numpy_fused[2 + d], field), want)


def test_evaluator_recalls_are_the_same_with_either_engine():
    """The evaluator's single-instance recall keys and `class_*` keys through the NumPy
    engine equal the JAX engine's; tied similarities (repeated clips and sentences)
    included."""
    got = {}
    for backend in ("numpy", "jax"):
        params, evaluator = seeded_evaluator(backend, nv=40, nt=30)
        got[backend] = evaluator(params)
    keys = [k for k in got["numpy"] if k.startswith(RECALL_KEYS) or "class_" in k]
    assert any(k.startswith("medr") for k in keys) and "class_rsum" in keys
    assert got["numpy"]["tied_v2t"] > 0 and got["numpy"]["excluded_recall_v2t"] > 0
    for key in keys:
        assert got["numpy"][key] == pytest.approx(got["jax"][key], abs=1e-9), key


@pytest.mark.slow
def test_ek100_size_single_instance_ranks(epic_test):
    """EK-100 test size, the clips narrated with each sentence as positives, random
    embeddings with every fifth clip a copy of its neighbour (ties)."""
    clips, sents = epic_test
    row = {n: i for i, n in enumerate(sents.narration)}
    instance = np.zeros((len(clips), len(sents)), np.float32)
    instance[np.arange(len(clips)), [row[n] for n in clips.narration]] = 1
    rng = np.random.default_rng(0)
    video, text = (rng.standard_normal((n, 64)).astype(np.float32) for n in instance.shape)
    video[1::5] = video[0::5][: len(video[1::5])]
    scores, rel = blocks.Embeddings(video, text), blocks.MatrixRelevance(instance * 0.5)
    fused = stream_stats(scores, rel, positives=blocks.Positives(instance))
    ranked = stream_stats(scores, blocks.MatrixRelevance(instance))
    for d in (0, 1):
        for field in RANK_FIELDS:
            np.testing.assert_array_equal(getattr(fused[2 + d], field), getattr(ranked[d], field))
    assert ranked[0].tied.sum() > 100
