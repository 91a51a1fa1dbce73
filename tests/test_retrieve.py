"""`python -m jaxsvr.retrieve` and `jaxsvr.runs.gallery` on finished runlocal runs.

A test sentence typed as a query scores the test clips exactly as the run's own
evaluation scored that sentence (its exported `test_similarity.npy` column), for models
reading token ids (MME) and verbs and nouns (JPoSE); `--clip` ranks sentences by the
clip's similarity row for every model family (HGR's matching, ConTra's clip windows,
heads over frozen caption features); the cache is used, and rebuilt when the checkpoint
changes; bad queries, flags and workdirs are one `error:` line and exit code 2. Damaged
caches and run files: tests/test_run_artefacts.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from train_runs import config, run_retrieve

from jaxsvr import retrieve
from jaxsvr.checkpoints.layout import find_checkpoint
from jaxsvr.errors import InputError
from jaxsvr.inputs import queries, text
from jaxsvr.runs.gallery import Gallery, Retriever, TrainedRun
from jaxsvr.train import loop

MODELS = {
    "mme": "epic_mme",
    "jpose": "epic_jpose",
    "hgr": "epic_hgr",
    "contra": "epic_contra",
    "heads": "epic_sms",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{model: workdir} of finished runlocal runs that exported their test similarity."""
    out = {}
    for model, name in MODELS.items():
        work = tmp_path_factory.mktemp(model)
        arg = "sms,runlocal" if name == "epic_sms" else "runlocal"
        loop.train_and_evaluate(config(name, arg, eval__export_similarity=True), work)
        out[model] = work
    return out


def _searcher(work, checkpoint="latest"):
    run = TrainedRun.load(work, checkpoint)
    return Retriever(run, Gallery.of(run))


@pytest.mark.parametrize("model", ["mme", "jpose"])
def test_a_test_sentence_as_a_query_scores_clips_as_the_evaluation_did(runs, model):
    """MME reads token ids; JPoSE also the verbs and nouns, which its run took from the
    annotation columns and a query takes from the training columns' words."""
    work = runs[model]
    searcher = _searcher(work)
    similarity = np.load(work / "test_similarity.npy")
    sentences = searcher.gallery.sentences["narration"]
    checked = 0
    for j in range(len(sentences)):
        try:  # test words may be <unk>; a sentence of only those is refused as a query
            hits, _ = searcher.clips(sentences[j], top=len(similarity))
        except InputError:
            continue
        checked += 1
        scores = np.empty(len(similarity), np.float32)
        scores[[h.row for h in hits]] = [h.score for h in hits]
        np.testing.assert_allclose(scores, similarity[:, j], rtol=1e-5, atol=1e-6)
        assert [h.rank for h in hits] == list(range(1, len(similarity) + 1))
        assert np.all(np.diff([h.score for h in hits]) <= 0)
    assert checked > 0.8 * len(sentences)


@pytest.mark.parametrize("model", list(MODELS))
def test_clip_ranks_sentences_by_its_similarity_row(runs, model):
    work = runs[model]
    searcher = _searcher(work)
    similarity = np.load(work / "test_similarity.npy")
    row = 5
    narration_id = searcher.gallery.clips["narration_id"][row]
    hits = searcher.sentences(narration_id, top=4)
    want = np.sort(similarity[row])[::-1][:4]
    np.testing.assert_allclose([h.score for h in hits], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", ["hgr", "contra"])
def test_free_queries_work_for_models_with_role_graphs_and_windows(runs, model):
    hits, unknown = _searcher(runs[model]).clips("cut the onion", top=3)
    assert [h.rank for h in hits] == [1, 2, 3] and unknown == ("the",)


def test_models_without_a_text_encoder_refuse_free_queries(runs):
    with pytest.raises(InputError, match="frozen text features"):
        _searcher(runs["heads"]).clips("cut the onion")


def test_the_cache_is_reused_until_the_checkpoint_changes(runs, monkeypatch):
    work = runs["mme"]
    built = []
    real = Gallery._build.__func__
    monkeypatch.setattr(
        Gallery, "_build", classmethod(lambda cls, run: built.append(1) or real(cls, run))
    )
    run = TrainedRun.load(work, "best")
    first = Gallery.of(run)
    again = Gallery.of(TrainedRun.load(work, "best"))
    np.testing.assert_array_equal(first.video, again.video)
    meta = run.checkpoint.path / "_CHECKPOINT_METADATA"
    stamp = json.loads(meta.read_text())
    stamp["commit_timestamp_nsecs"] += 1  # the step was saved again
    meta.write_text(json.dumps(stamp))
    Gallery.of(TrainedRun.load(work, "best"))
    assert len(built) == 2  # the first call (or an earlier test's) and the changed checkpoint


def test_checkpoint_choice(runs):
    work = runs["mme"]
    steps = sorted(int(p.name) for p in (work / "checkpoints").iterdir())
    assert find_checkpoint(work, "latest").step == steps[-1]
    assert find_checkpoint(work, "auto").kind == "best"
    assert find_checkpoint(work, str(steps[0])).step == steps[0]
    for which, says in (("3", "no checkpoint of step 3"), ("newest", "use best, latest")):
        with pytest.raises(InputError, match=says):
            find_checkpoint(work, which)


def test_query_encoding_matches_training_tokens():
    vocab = text.Vocabulary(("<pad>", "<unk>", "cut", "onion"))
    data = config().data
    q = queries.encode("Cut the ONION", vocab, data, ("caption",), caption_window=1)
    assert q.unknown == ("the",)
    assert q.inputs["caption"].shape == (1, 3, data.max_caption_len)
    np.testing.assert_array_equal(q.inputs["caption"][0, :, :3], [[2, 1, 3]] * 3)
    for query, says in (
        ("the a", "query 'the a': no word of the query is in the run's vocabulary: the, a ("),
        ("?! ... --", "query '?! ... --' has no words"),
    ):
        with pytest.raises(InputError) as e:
            queries.encode(query, vocab, data, ("caption",))
        assert str(e.value).startswith(says), str(e.value)


def _run_in_process(capsys, args) -> tuple[int, str, list[str]]:
    """`retrieve.cli.run`, the command's edge, in this process: (exit code, stdout, the
    lines of stderr)."""
    try:
        code = retrieve.cli.run(retrieve.main, [str(a) for a in args])
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def test_cli_prints_a_table_or_json_and_errors_in_one_line(runs, tmp_path, capsys):
    """The command in a subprocess: its output, and one bad query for the contract (exit
    code 2, one `error:` line, nothing on stdout); the other bad inputs through the same
    edge in this process."""
    work = runs["mme"]
    done = run_retrieve("--workdir", work, "--query", "take the plate", "--top", "3", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert {"rank", "score", "narration_id", "video_id", "narration"} <= rows[0].keys()
    assert "unknown words (read as <unk>): the" in done.stderr
    table = run_retrieve("--workdir", work, "--clip", rows[0]["narration_id"], "--top", "2")
    assert table.returncode == 0, table.stderr
    assert table.stdout.split("\n")[0].split() == ["rank", "score", "narration_id", "narration"]
    assert len(table.stdout.strip().split("\n")) == 3
    bad = run_retrieve("--workdir", work, "--query", "zzz")
    assert bad.returncode == 2 and bad.stdout == ""
    lines = bad.stderr.strip().splitlines()
    says = "no word of the query is in the run's vocabulary"
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], lines
    for args, says in (
        (("--workdir", tmp_path, "--query", "cut"), "has no config.json"),
        (("--workdir", work, "--clip", "nope"), "is not a test clip"),
        (("--workdir", runs["heads"], "--query", "cut"), "frozen text features"),
    ):
        code, out, lines = _run_in_process(capsys, args)
        assert code == 2 and out == ""
        assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0], lines


@pytest.mark.parametrize(
    "args, says",
    [
        (["--top", "0"], "argument --top: give a whole number at least 1, not '0'"),
        (["--top", "-3"], "argument --top: give a whole number at least 1, not '-3'"),
        (["--top", "inf"], "argument --top: give a whole number at least 1, not 'inf'"),
        (["--top", "1e3"], "argument --top: give a whole number at least 1, not '1e3'"),
        (["--checkpoint", "newest"], "--checkpoint 'newest': use best, latest, auto or a step"),
        (["--checkpoint", "nan"], "--checkpoint 'nan': use best, latest, auto or a step"),
        (["--checkpoint", "99"], "--checkpoint '99': {work} has no checkpoint of step 99"),
    ],
)
def test_bad_flags_are_one_error_line(runs, capsys, args, says):
    """In process: the same `cli.run` edge as the command (`test_cli_prints_...`)."""
    work = runs["mme"]
    code, out, lines = _run_in_process(capsys, ["--workdir", work, "--query", "cut", *args])
    assert code == 2 and out == "" and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and says.format(work=work) in lines[0], lines
