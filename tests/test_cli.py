"""The command lines: output files, JSON, ensembles, and one-line errors with exit code 2."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxsvr import evaluate as evaluate_cli
from jaxsvr.evaluation import evaluate
from jaxsvr.relevance import __main__ as relevance_cli


def _run(module, *args):
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_relevance_cli_real_files(epic_dir, epic_test_relevance, tmp_path):
    out = tmp_path / "rel.npy"
    clips = epic_dir / "EPIC_100_retrieval_test.csv"
    sents = epic_dir / "EPIC_100_retrieval_test_sentence.csv"
    argv = ["epic100", "--clips", clips, "--sentences", sents, "--out", out]
    assert relevance_cli.main([str(a) for a in argv]) == 0
    rel = np.load(out)
    assert rel.shape == (9668, 3842) and rel.dtype == np.float32
    np.testing.assert_array_equal(rel, epic_test_relevance)


def test_relevance_cli_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("narration_id,video_id\nx,y\n")
    for args in (["--clips", tmp_path / "none.csv"], ["--clips", bad]):
        r = _run("jaxsvr.relevance", "epic100", *args, "--out", tmp_path / "r.npy")
        assert r.returncode == 2 and r.stderr.startswith("error: ")
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.glob("r.npy*"))  # nothing half-written


def test_evaluate_cli_json_and_ensemble(tmp_path):
    rng = np.random.default_rng(0)
    rel = rng.choice(np.array([0, 0.5, 1], np.float32), (12, 7))
    sims = [rng.standard_normal((12, 7)).astype(np.float32) for _ in range(2)]
    for i, s in enumerate(sims):
        np.save(tmp_path / f"s{i}.npy", s)
    np.save(tmp_path / "r.npy", rel)
    r = _run(
        "jaxsvr.evaluate",
        "--similarity",
        tmp_path / "s0.npy",
        "--similarity",
        tmp_path / "s1.npy",
        "--relevance",
        tmp_path / "r.npy",
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = evaluate((sims[0] + sims[1]) / 2, rel)
    for key in ("ndcg_v2t", "ndcg_t2v", "ndcg_avg", "map_v2t", "map_t2v", "map_avg", "rsum"):
        assert got[key] == pytest.approx(want[key], abs=1e-12), key


def test_evaluate_cli_one_flag_several_files(tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "r.npy", rng.choice(np.array([0, 0.5, 1], np.float32), (9, 5)))
    for i in range(3):
        np.save(tmp_path / f"s{i}.npy", rng.standard_normal((9, 5)).astype(np.float32))
    files = [str(tmp_path / f"s{i}.npy") for i in range(3)]
    common = ["--relevance", str(tmp_path / "r.npy"), "--backend", "numpy"]
    outputs = []
    for argv in (
        ["--similarity", *files, *common],
        ["--similarity", files[0], "--similarity", *files[1:], *common],
    ):
        assert evaluate_cli.main(argv) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    mean = sum(np.load(f) for f in files) / 3
    assert outputs[0]["ndcg_avg"] == pytest.approx(
        evaluate(mean, np.load(tmp_path / "r.npy"))["ndcg_avg"], abs=1e-12
    )


def test_evaluate_cli_recall_bounds(tmp_path, capsys):
    rng = np.random.default_rng(2)
    rel = rng.choice(np.array([0, 0.25, 0.5, 0.75, 1], np.float32), (20, 15))
    sim = rng.standard_normal((20, 15)).astype(np.float32)
    np.save(tmp_path / "r.npy", rel)
    np.save(tmp_path / "s.npy", sim)
    argv = ["--similarity", str(tmp_path / "s.npy"), "--relevance", str(tmp_path / "r.npy")]
    assert evaluate_cli.main([*argv, "--threshold", "0.5", "--bounds"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == evaluate(sim, rel, threshold=0.5, bounds=True)
    assert got["rsum_lower"] <= got["rsum"]
    assert evaluate_cli.main(argv) == 0
    assert "rsum_lower" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "sim, rel, match",
    [
        (np.zeros((3, 4), np.float32), np.zeros((4, 3), np.float32), "shape"),
        (np.array([[np.nan, 0]], np.float32), np.zeros((1, 2), np.float32), "non-finite"),
        (np.zeros((1, 2), np.float32), np.array([[0, 2]], np.float32), r"\[0, 1\]"),
        (np.zeros((1, 2), np.float32), None, "not found"),
        (np.array([["a", "b"]], object), np.zeros((1, 2), np.float32), "plain numeric"),
    ],
)
def test_evaluate_cli_errors(tmp_path, capsys, sim, rel, match):
    np.save(tmp_path / "s.npy", sim, allow_pickle=True)
    if rel is not None:
        np.save(tmp_path / "r.npy", rel)
    argv = ["--similarity", str(tmp_path / "s.npy"), "--relevance", str(tmp_path / "r.npy")]
    from jaxsvr.runtime import cli

    assert cli.run(evaluate_cli.main, argv + ["--backend", "numpy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert __import__("re").search(match, err), err


def test_evaluate_cli_exit_code_in_subprocess(tmp_path):
    np.save(tmp_path / "s.npy", np.zeros((2, 2), np.float32))
    np.save(tmp_path / "r.npy", np.zeros((2, 3), np.float32))
    r = _run(
        "jaxsvr.evaluate", "--similarity", tmp_path / "s.npy", "--relevance", tmp_path / "r.npy"
    )
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1


def test_cli_outputs_get_the_usual_file_mode(tmp_path):
    """Files a CLI writes get 0666 minus the umask, as `open()` gives (not mkstemp's 0600)."""
    from jaxsvr.runtime import cli

    script = (
        "import os, numpy as np; from jaxsvr.runtime import cli; os.umask(0o027); "
        f"cli.save_npy_atomic({str(tmp_path / 'a.npy')!r}, np.zeros(3, np.float32))"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert (tmp_path / "a.npy").stat().st_mode & 0o777 == 0o640
    cli.save_npy_atomic(tmp_path / "b.npy", np.zeros(3, np.float32))
    assert (tmp_path / "b.npy").stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "b.npy"]  # no temporaries


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_WITHOUT_JAX = """
import runpy, sys
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
print("imported jax" if "jax" in sys.modules else "no jax", file=sys.stderr)
sys.exit(code)
"""


def test_clis_start_without_importing_jax(epic_dir, tmp_path):
    """evaluate (no accelerator plugin here), relevance epic100 and relevance proxy run
    without importing JAX (~0.5 s of startup)."""
    from jaxsvr.evaluation import metrics

    if metrics.accelerator_plugins():
        pytest.skip("a JAX accelerator plugin is installed: evaluate --backend auto imports JAX")
    np.save(tmp_path / "s.npy", np.eye(3, dtype=np.float32))
    np.save(tmp_path / "r.npy", np.eye(3, dtype=np.float32))
    captions = tmp_path / "c.csv"
    captions.write_text("caption\nwash the pan\ncut the onion\nopen the fridge\n")
    runs = {
        "jaxsvr.evaluate": ["--similarity", tmp_path / "s.npy", "--relevance", tmp_path / "r.npy"],
        "jaxsvr.relevance": [
            "epic100",
            "--clips",
            epic_dir / "EPIC_100_retrieval_test.csv",
            "--sentences",
            epic_dir / "EPIC_100_retrieval_test_sentence.csv",
            "--out",
            tmp_path / "rel.npy",
        ],
        "jaxsvr.relevance proxy": [
            "proxy",
            "--proxy",
            "bow",
            "--captions",
            captions,
            "--out",
            tmp_path / "p.npy",
        ],
    }
    for name, args in runs.items():
        module = name.split()[0]
        cmd = [sys.executable, "-c", _WITHOUT_JAX, module, *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (name, r.stderr)
        assert r.stderr.strip().splitlines()[-1] == "no jax", (name, r.stderr)
    assert np.load(tmp_path / "p.npy").shape == (3, 3)


def test_evaluate_backend_jax_is_honoured(tmp_path):
    np.save(tmp_path / "s.npy", np.eye(3, dtype=np.float32))
    np.save(tmp_path / "r.npy", np.eye(3, dtype=np.float32))
    args = ["--similarity", tmp_path / "s.npy", "--relevance", tmp_path / "r.npy"]
    cmd = [sys.executable, "-c", _WITHOUT_JAX, "jaxsvr.evaluate", *map(str, args)]
    r = subprocess.run([*cmd, "--backend", "jax"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr.strip().splitlines()[-1] == "imported jax", r.stderr
    assert json.loads(r.stdout)["ndcg_avg"] == pytest.approx(1.0)
