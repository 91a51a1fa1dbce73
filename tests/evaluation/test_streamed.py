"""Streamed evaluation from embeddings and class sets equals the dense path exactly."""

import json
import re

import numpy as np
import pytest
from kitchen_files import write_epic_folder

from jaxsvr import evaluate as evaluate_cli
from jaxsvr.annotations import epic100
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.evaluation import blocks, metrics, numpy_engine, streamed
from jaxsvr.relevance import class_relevance
from jaxsvr.runtime import cli, process_tuning


def _dense(video, text, terms, **kw):
    """The dense path: the materialised similarity and class relevance."""
    (_, cv, sv), (_, cn, sn) = terms
    return metrics.evaluate(video @ text.T, class_relevance(cv, cn, sv, sn), backend="numpy", **kw)


@pytest.fixture(scope="module")
def ek100_embeddings(epic_test):
    """Random 64-d unit embeddings of the EK-100 test clips and sentences, with every
    fifth row a copy of its neighbour's: equal similarities between items of any
    relevance, in both directions."""
    clips, sents = epic_test
    rng = np.random.default_rng(0)
    out = []
    for n in (len(clips), len(sents)):
        e = rng.standard_normal((n, 64)).astype(np.float32)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        e[1::5] = e[0::5][: len(e[1::5])]
        out.append(e)
    return out


def test_ek100_size_equals_the_dense_path_exactly(epic_test, epic_test_relevance, ek100_embeddings):
    clips, sents = epic_test
    video, text = ek100_embeddings
    terms = streamed.class_terms(
        clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
    )
    # Blocks of the engine's size, which divides neither query count (9668 / 136, 3842 / 54).
    assert len(clips) % numpy_engine.block_rows(len(sents)) != 0
    assert len(sents) % numpy_engine.block_rows(len(clips)) != 0
    got = streamed.evaluate_embeddings(video, text, terms, bounds=True, workers=2)
    want = metrics.evaluate(video @ text.T, epic_test_relevance, bounds=True, backend="numpy")
    assert got.keys() == want.keys()
    assert {k: got[k] for k in want if got[k] != want[k]} == {}  # every key, exactly
    assert got["tied_v2t"] > 1000 and got["tied_t2v"] > 1000
    # The relevance blocks are the dense relevance bit for bit, in both directions.
    relevance = streamed.BlockRelevance(terms)
    np.testing.assert_array_equal(relevance.block(0, 130, 270), epic_test_relevance[130:270])
    np.testing.assert_array_equal(relevance.block(1, 50, 59), epic_test_relevance[:, 50:59].T)


def _small(n_videos=23, n_texts=17, d=6, seed=0, quantised=False):
    """Small embeddings and class sets of one verb and one noun each: relevance 0, 1/2 or 1,
    whose sums are exact, so any blocks give the dense numbers to the last bit."""
    rng = np.random.default_rng(seed)
    video, text = (rng.standard_normal((n, d)).astype(np.float32) for n in (n_videos, n_texts))
    if quantised:  # few distinct similarities: ties in every query
        video, text = np.round(video), np.round(text)
    sets = [ClassSets.from_labels(rng.integers(0, 3, n)) for n in (n_videos, n_videos)]
    sets += [ClassSets.from_labels(rng.integers(0, 3, n)) for n in (n_texts, n_texts)]
    return video, text, streamed.class_terms(*sets)


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("block_queries", [1, 2, 5, None])
def test_any_block_size_gives_the_dense_numbers(quantised, block_queries):
    video, text, terms = _small(quantised=quantised)
    want = _dense(video, text, terms, threshold=0.5, bounds=True)
    got = streamed.evaluate_embeddings(
        video, text, terms, threshold=0.5, bounds=True, block_queries=block_queries, workers=3
    )
    assert got == want
    if quantised:
        assert want["tied_v2t"] == 23 and want["tied_t2v"] == 17


def test_process_shares_sum_to_the_whole_bit_for_bit():
    """Round-robin shares of the jobs (what each of N processes computes) hold zeros for
    the other queries, so their sum, as the evaluator all-reduces it, is the whole."""
    video, text, terms = _small(quantised=True)
    scores, relevance = blocks.Embeddings(video, text), blocks.BlockRelevance(terms)
    kw = dict(threshold=0.5, block_queries=2, workers=2)
    whole = streamed.stream_stats(scores, relevance, **kw)
    for count in (2, 3):
        parts = [
            streamed.stream_stats(scores, relevance, share=(i, count), **kw) for i in range(count)
        ]
        for d in (0, 1):
            for field, want in vars(whole[d]).items():
                got = sum(getattr(p[d], field) for p in parts)
                np.testing.assert_array_equal(got.astype(want.dtype), want, err_msg=field)
    with pytest.raises(ValueError, match="share"):
        streamed.stream_stats(scores, relevance, share=(2, 2))


def test_matrix_sources_give_the_dense_numbers():
    """Similarity and relevance from materialised matrices (models scored by their own
    `similarity`, a split's relevance), in blocks, equal the dense path."""
    video, text, terms = _small(quantised=True)
    sim = video @ text.T
    rel = np.round(np.random.default_rng(1).uniform(size=sim.shape) * 3).astype(np.float32) / 3
    want = metrics.evaluate(sim, rel, threshold=0.5, bounds=True, backend="numpy")
    got = streamed.stream_stats(
        blocks.Matrix(sim), blocks.MatrixRelevance(rel), threshold=0.5, block_queries=3
    )
    assert metrics.summarize(*got, bounds=True) == want
    with pytest.raises(InputError, match="23 videos x 17 texts scored, but relevance of 17"):
        streamed.stream_stats(blocks.Matrix(sim), blocks.MatrixRelevance(rel.T))


@pytest.mark.parametrize("block_elements", [None, 68])
def test_jax_engine_blocks_equal_its_dense_path_and_share_exactly(monkeypatch, block_elements):
    """The accelerator path (jitted blocks, each block's product and relevance gather on
    the device), run on the CPU: integer embeddings make every product exact, so the
    statistics equal the JAX engine's on the dense matrices bit for bit, and shares sum to
    the whole; 68 elements give blocks of 4 clips / 2 sentences, the last one padded."""
    from jaxsvr.evaluation import jax_engine

    if block_elements:
        monkeypatch.setattr(jax_engine, "_BLOCK_ELEMENTS", block_elements)
    video, text, terms = _small(quantised=True)
    scores, relevance = blocks.Embeddings(video, text), blocks.BlockRelevance(terms)
    (_, cv, sv), (_, cn, sn) = terms
    want = jax_engine.query_stats(video @ text.T, class_relevance(cv, cn, sv, sn), threshold=0.5)
    whole = jax_engine.stream_stats(scores, relevance, threshold=0.5)
    parts = [
        jax_engine.stream_stats(scores, relevance, threshold=0.5, share=(i, 2)) for i in (0, 1)
    ]
    for d in (0, 1):
        for field, value in vars(want[d]).items():
            np.testing.assert_array_equal(getattr(whole[d], field), value, err_msg=field)
            summed = sum(getattr(p[d], field) for p in parts).astype(value.dtype)
            np.testing.assert_array_equal(summed, value, err_msg=field)
    assert metrics.summarize(*whole) == metrics.evaluate(
        video @ text.T, class_relevance(cv, cn, sv, sn), threshold=0.5, backend="jax"
    )
    with pytest.raises(InputError, match="non-finite"):
        jax_engine.stream_stats(blocks.Embeddings(video * 1e30, text * 1e30), relevance)


def test_jax_engine_gathers_class_relevance_blocks_bit_for_bit():
    """The device's gather of a block's IoU tables gives `BlockRelevance.block`'s entries
    bit for bit (weights, padding of the last block, both directions)."""
    import jax

    from jaxsvr.evaluation import jax_engine

    _, _, terms = _small(quantised=True)
    terms = [(0.3, a, b) for _, a, b in terms[:1]] + list(terms[1:])
    relevance = blocks.BlockRelevance(terms)
    for d, rows in ((0, 5), (1, 4)):
        gathered = jax_engine._relevance_rows(relevance, d, rows)
        n = relevance.shape[d]
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            got = np.asarray(jax.device_get(gathered(start, stop)))
            assert got.shape == (rows, relevance.shape[1 - d])
            np.testing.assert_array_equal(got[: stop - start], relevance.block(d, start, stop))


def test_hand_worked_case():
    # Clip 0 (verb 0, noun 1) and clip 1 (verb 1, noun 1); sentence 0 describes clip 0,
    # sentence 1 shares only clip 1's noun. Clip 1 scores sentence 1 above sentence 0.
    video = np.array([[1, 0], [0, 1]], np.float32)
    text = np.array([[1, 0.5], [0, 1]], np.float32)
    verbs = ClassSets.from_labels([0, 1]), ClassSets.from_labels([0, 2])
    nouns = ClassSets.from_lists([[1], [1]]), ClassSets.from_lists([[1], [1, 3]])
    terms = streamed.class_terms(verbs[0], nouns[0], verbs[1], nouns[1])
    got = streamed.evaluate_embeddings(video, text, terms)
    assert got == _dense(video, text, terms)
    # R = [[1, 1/4], [1/2, 1/4]], S = [[1, 0], [1/2, 1]]: clip 0 and sentence 0 rank their
    # R = 1 item first; clip 1 and sentence 1 have no R = 1 item (left out of recall).
    assert got["r1_v2t"] == 100.0 and got["excluded_recall_v2t"] == 1
    assert got["r1_t2v"] == 100.0 and got["excluded_recall_t2v"] == 1
    ndcg_clip1 = (0.5 / np.log2(3) + 0.25) / (0.5 + 0.25 / np.log2(3))  # 1/4 ranked first
    assert got["ndcg_v2t"] == pytest.approx((1.0 + ndcg_clip1) / 2)


def test_one_query_block_similarity_is_the_dense_row():
    # NumPy's matrix-vector product (one row) sums in another order than its matrix product.
    rng = np.random.default_rng(1)
    video, text = (
        rng.standard_normal((5, 64), np.float32),
        rng.standard_normal((3000, 64), np.float32),
    )
    assert not np.array_equal(video[0] @ text.T, (video @ text.T)[0])
    dense = video @ text.T
    for i in range(5):
        np.testing.assert_array_equal(
            blocks.block_similarity(video[i : i + 1], text), dense[i : i + 1]
        )


def test_blas_threads_are_limited_and_restored():
    found = process_tuning._openblas_threads()
    if found is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS")
    get, _ = found
    before = get()
    with process_tuning.blas_threads(1) as limited:
        assert limited and get() == 1
    assert get() == before


def test_memory_budget_sets_blocks_and_threads_or_says_what_a_block_needs(caplog):
    video, text, terms = _small()
    want = _dense(video, text, terms)
    one_query = streamed.BYTES_PER_PAIR * len(video)  # a text query against every video
    with caplog.at_level("INFO", logger=streamed.__name__):
        got = streamed.evaluate_embeddings(video, text, terms, memory=3 * one_query)
    assert got == want
    assert "blocks of [4, 3] queries (v2t, t2v)" in caplog.text
    with pytest.raises(InputError, match=r"holds no block: one query against 23 items needs"):
        streamed.evaluate_embeddings(video, text, terms, memory=one_query - 1)


def test_progress_is_logged_with_an_eta(caplog):
    video, text, terms = _small()
    with caplog.at_level("INFO", logger=streamed.__name__):
        streamed.evaluate_embeddings(video, text, terms, block_queries=5, progress_s=0.0)
    lines = [r.getMessage() for r in caplog.records]
    # 5 + 4 blocks; every block but the last is logged
    assert len(lines) == 1 + 8 and re.fullmatch(
        r".*: 1/9 blocks \(11%\), \d+ s, ETA \d+ s", lines[1]
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda v, t, s: (v[:, :5], t, s), "same width d"),
        (lambda v, t, s: (v[:-1], t, s), "22 videos x 17 texts scored, but relevance of 23 clips"),
        (lambda v, t, s: (v[0], t, s), "must be"),
        (lambda v, t, s: (np.where(v > 1, np.inf, v), t, s), "video embeddings have non-finite"),
        (lambda v, t, s: (v * 1e30, t * 1e30, s), "overflow float32"),
        (lambda v, t, s: (v, t, []), "no relevance terms"),
    ],
)
def test_bad_inputs_are_one_line(change, match):
    video, text, terms = change(*_small())
    with pytest.raises(InputError, match=match):
        streamed.evaluate_embeddings(video, text, terms, threshold=1.0)


@pytest.fixture(scope="module")
def kitchen(tmp_path_factory):
    """Built-in kitchen test tables as EPIC CSVs (60 clips, their sentences) with random
    embeddings, and the dense path's inputs for them."""
    folder = tmp_path_factory.mktemp("kitchen")
    write_epic_folder(folder)
    clips = epic100.read_clips(folder / epic100.TEST_CLIPS)
    sents = epic100.read_sentences(folder / epic100.TEST_SENTENCES, clips)
    rng = np.random.default_rng(2)
    # small integers: every product is exact, on the host and on a device, and many tie
    video, text = (
        np.round(2 * rng.standard_normal((n, 8))).astype(np.float32)
        for n in (len(clips), len(sents))
    )
    files = {
        "clips": folder / epic100.TEST_CLIPS,
        "sentences": folder / epic100.TEST_SENTENCES,
        "video": folder / "video.npy",
        "text": folder / "text.npy",
        "sim": folder / "sim.npy",
        "rel": folder / "rel.npy",
    }
    np.save(files["video"], video)
    np.save(files["text"], text)
    np.save(files["sim"], video @ text.T)
    rel = class_relevance(
        clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
    )
    np.save(files["rel"], rel)
    return {k: str(v) for k, v in files.items()}


def _embeddings_argv(f, video=None, text=None):
    return [
        "--embeddings",
        video or f["video"],
        text or f["text"],
        "--clips",
        f["clips"],
        "--sentences",
        f["sentences"],
    ]


def test_cli_prints_the_dense_paths_metrics(kitchen, capsys):
    dense = ["--similarity", kitchen["sim"], "--relevance", kitchen["rel"], "--backend", "numpy"]
    outputs = []
    for argv in (dense, _embeddings_argv(kitchen)):
        assert cli.run(evaluate_cli.main, [*argv, "--bounds", "--threshold", "0.5"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    assert outputs[0]["tied_v2t"] > 0


def test_cli_with_the_jax_engine_prints_its_dense_metrics(kitchen, capsys):
    """`--backend jax`: the accelerators' engine streams the same blocks (here on the CPU)."""
    dense = ["--similarity", kitchen["sim"], "--relevance", kitchen["rel"]]
    outputs = []
    for argv in (dense, _embeddings_argv(kitchen)):
        assert cli.run(evaluate_cli.main, [*argv, "--backend", "jax", "--threshold", "0.5"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]


def _bad_file(tmp_path, name, array):
    np.save(tmp_path / name, array)
    return str(tmp_path / name)


@pytest.mark.parametrize(
    "make_argv, match",
    [
        (
            lambda f, p: _embeddings_argv(f, video=_bad_file(p, "v.npy", np.zeros((60, 3)))),
            "same d",
        ),
        (
            lambda f, p: _embeddings_argv(f, text=_bad_file(p, "t.npy", np.zeros((5, 8)))),
            "text embeddings .* have 5 rows, .* has 58",
        ),
        (
            lambda f, p: _embeddings_argv(f, video=_bad_file(p, "v.npy", np.zeros(8))),
            "expected a 2-D array",
        ),
        (lambda f, p: _embeddings_argv(f)[:5], "needs --clips and --sentences"),
        (lambda f, p: [*_embeddings_argv(f), "--relevance", f["rel"]], "--relevance"),
        (lambda f, p: [*_embeddings_argv(f), "--memory", "0"], "--memory"),
        (
            lambda f, p: (
                ["--embeddings", f["video"], f["text"], "--clips", _clips_without_verbs(f, p)]
                + ["--sentences", f["sentences"]]
            ),
            "verb_class",
        ),
        (lambda f, p: [*_embeddings_argv(f, video=str(p / "none.npy"))], "not found"),
    ],
)
def test_cli_bad_inputs_are_one_line(kitchen, tmp_path, capsys, make_argv, match):
    try:
        code = cli.run(evaluate_cli.main, make_argv(kitchen, tmp_path))
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert re.search(match, err), err


def _clips_without_verbs(f, tmp_path):
    lines = open(f["clips"]).read().splitlines()
    header = lines[0].split(",")
    col = header.index("verb_class")
    out = tmp_path / "clips.csv"
    out.write_text("\n".join(_drop(line, col) for line in lines) + "\n")
    return str(out)


def _drop(line, col):
    # the columns before all_nouns hold no quoted commas
    head, _, tail = line.partition(',"')
    cells = head.split(",")
    del cells[col]
    return ",".join(cells) + (',"' + tail if tail else "")
