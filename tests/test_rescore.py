"""The `rescore` job (`jaxsvr.runs.rescore`): a trained run's test similarity under the class
relevance and every caption proxy, with recall bounds and the random baseline; its numbers
equal those of the relevance and evaluation command lines on the same files."""

import json

import numpy as np
import pytest
from kitchen_files import write_epic_folder
from train_runs import config, final, run_main

from jaxsvr.errors import InputError
from jaxsvr.evaluate import main as evaluate_main
from jaxsvr.evaluation import evaluate
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.runs import rescore
from jaxsvr.train import loop

THRESHOLD = 0.5


@pytest.fixture(scope="module")
def trained(tmp_path_factory, wordnet_reader):
    """A runlocal JPoSE run (exported similarity), re-scored from its best checkpoint."""
    workdir = tmp_path_factory.mktemp("run")
    loop.train_and_evaluate(config(eval__export_similarity=True), workdir)
    c = config(job="rescore", data__syn_classes="wordnet", eval__rescore__write_matrices=True)
    return workdir, c, rescore.run(c, workdir)


def test_rescore_json_holds_every_relevance_with_bounds_and_the_random_baseline(trained):
    workdir, c, out = trained
    assert json.loads((workdir / rescore.RESULTS).read_text()) == out
    assert out["threshold"] == THRESHOLD and out["source"].endswith("best/28")
    assert list(out["relevances"]) == list(rescore.RELEVANCES)
    sim = np.load(workdir / "rescore" / "similarity.npy")
    # the best checkpoint is the final state: the similarity training exported at its end
    np.testing.assert_array_equal(sim, np.load(workdir / "test_similarity.npy"))
    noise = np.random.default_rng(c.seed).standard_normal(sim.shape, np.float32)
    for name, parts in out["relevances"].items():
        rel = np.load(workdir / "rescore" / f"relevance_{name}.npy")
        assert parts["model"] == evaluate(sim, rel, threshold=THRESHOLD, bounds=True), name
        assert parts["random"] == evaluate(noise, rel, threshold=THRESHOLD, bounds=True), name
        assert parts["model"]["rsum_lower"] <= parts["model"]["rsum"]
        if name != "class":  # S = 1 on own captions: every sentence has a positive
            assert np.all((rel == 1).any(axis=0)) and parts["model"]["excluded_map_t2v"] == 0
    # under the class relevance, the trainer's own final metrics
    assert out["relevances"]["class"]["model"]["ndcg_avg"] == final(workdir)["ndcg_avg"]
    assert out["relevances"]["class"]["model"]["map_avg"] == final(workdir)["map_avg"]


def test_an_exported_similarity_gives_the_same_numbers(trained, tmp_path):
    workdir, c, out = trained
    c = c.copy_and_resolve_references()
    c.eval.rescore.similarity = str(workdir / "test_similarity.npy")
    c.eval.rescore.relevances = "class,bow"
    c.eval.rescore.write_matrices = False
    got = rescore.run(c, tmp_path / "elsewhere")
    assert got["relevances"] == {k: out["relevances"][k] for k in ("class", "bow")}
    assert (tmp_path / "elsewhere" / rescore.RESULTS).is_file()
    assert not (tmp_path / "elsewhere" / "rescore").exists()


def test_the_command_lines_give_the_same_matrices_and_numbers(trained, tmp_path, capsys):
    """The relevance CLI rebuilds each matrix from the annotation files (S = 1 on own
    narrations with --own), and `python -m jaxsvr.evaluate --bounds` scores the exported
    similarity under it to the job's numbers."""
    workdir, _, out = trained
    write_epic_folder(tmp_path / "epic")
    clips, sents = tmp_path / "epic" / "EPIC_100_retrieval_test.csv", tmp_path / "epic"
    sents = sents / "EPIC_100_retrieval_test_sentence.csv"
    for name in rescore.RELEVANCES:
        rel = tmp_path / f"{name}.npy"
        if name == "class":
            argv = ["epic100", "--clips", clips, "--sentences", sents, "--out", rel]
        else:  # syn without class files: WordNet + Lesk, as data.syn_classes = "wordnet"
            argv = ["proxy", "--proxy", name, "--captions", clips, "--columns", sents]
            argv += ["--own", "--out", rel, "--workers", "1"]
        assert relevance_cli.main([str(a) for a in argv]) == 0
        np.testing.assert_array_equal(
            np.load(rel), np.load(workdir / "rescore" / f"relevance_{name}.npy"), err_msg=name
        )
        argv = ["--similarity", workdir / "test_similarity.npy", "--relevance", rel]
        argv += ["--threshold", THRESHOLD, "--bounds", "--backend", "numpy"]
        assert evaluate_main([str(a) for a in argv]) == 0
        assert json.loads(capsys.readouterr().out) == out["relevances"][name]["model"], name


def test_report_map_false_leaves_map_out(trained, tmp_path):
    workdir, c, _ = trained
    c = c.copy_and_resolve_references()
    c.eval.update(report_map=False)
    c.eval.rescore.update(similarity=str(workdir / "test_similarity.npy"), relevances="bow")
    got = rescore.run(c, tmp_path)["relevances"]["bow"]
    assert "ndcg_avg" in got["model"] and not any(k.startswith("map") for k in got["model"])


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("relevances", "class,words", "relevances = 'class,words'"),
        ("relevances", "bow,bow", "distinct names"),
        ("threshold", 0.0, "threshold = 0.0"),
        ("checkpoint", "7", "no checkpoint of step 7"),
        ("similarity", "missing.npy", "missing.npy"),
    ],
)
def test_bad_settings_are_one_error(trained, tmp_path, key, value, says):
    workdir, c, _ = trained
    c = c.copy_and_resolve_references()
    c.eval.rescore[key] = value
    with pytest.raises(InputError, match=says):
        rescore.run(c, workdir if key == "checkpoint" else tmp_path)


def test_a_similarity_of_another_shape_is_refused(trained, tmp_path):
    workdir, c, _ = trained
    np.save(tmp_path / "s.npy", np.zeros((5, 4), np.float32))
    c = c.copy_and_resolve_references()
    c.eval.rescore.similarity = str(tmp_path / "s.npy")
    with pytest.raises(InputError, match="5 x 4, the data's test clips x sentences are 60 x 58"):
        rescore.run(c, tmp_path)


def test_the_job_through_main(trained, tmp_path):
    workdir, _, out = trained
    r = run_main(
        tmp_path,
        "--config.job=rescore",
        f"--config.eval.rescore.similarity={workdir / 'test_similarity.npy'}",
        "--config.eval.rescore.relevances=class,pos",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads((tmp_path / rescore.RESULTS).read_text())["relevances"]
    assert got == {k: out["relevances"][k] for k in ("class", "pos")}
    assert "pos        model" in r.stderr  # the logged table
    # the job's former name still runs it, and says so
    r = run_main(tmp_path, "--config.job=eval", "--config.eval.rescore.relevances=nope")
    assert "config.job=eval is now called rescore" in r.stderr
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: ")
