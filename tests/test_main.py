"""Smoke test of the main job on the built-in synthetic data (runlocal) and config errors."""

import json
import subprocess
import sys


def test_main_runlocal(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxsvr.main",
            "--config=configs/epic_jpose.py:runlocal",
            f"--workdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "built-in synthetic kitchen annotations" in r.stderr
    assert "nothing is downloaded" in r.stderr
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics) == {"random", "oracle_0.1", "oracle_0.3", "oracle_1", "perfect"}
    assert metrics["perfect"]["ndcg_avg"] == 1.0 and metrics["perfect"]["map_avg"] == 1.0
    assert metrics["random"]["ndcg_avg"] < metrics["oracle_1"]["ndcg_avg"] < 1.0
    assert json.loads((tmp_path / "config.json").read_text())["data"]["num_videos"] == 4


def test_main_rejects_unknown_config_key(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxsvr.main",
            "--config=configs/epic_jpose.py",
            "--config.data.anotations=x",
            f"--workdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0 and "anotations" in r.stderr
