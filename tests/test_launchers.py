"""The cluster launchers that cannot run here (`launch/tpu_pod.sh`, `launch/slurm.sbatch`):
their --dry-run commands, their argument errors, and bash -n / shellcheck."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TPU = ROOT / "launch" / "tpu_pod.sh"
SLURM = ROOT / "launch" / "slurm.sbatch"
MAIN = ["--config=configs/epic_jpose.py", "--workdir=gs://bucket/runs/a b"]


def bash(script: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_tpu_pod_dry_run_prints_every_step():
    r = bash(
        TPU,
        "--name",
        "svr",
        "--zone",
        "us-central2-b",
        "--data",
        "data/feats",
        "--dry-run",
        "--",
        *MAIN,
    )
    assert r.returncode == 0, r.stderr
    lines = [shlex.split(line) for line in r.stdout.splitlines()]
    tpu = ["gcloud", "compute", "tpus", "tpu-vm"]
    where = ["--zone", "us-central2-b"]
    assert lines[0] == [
        *tpu,
        "create",
        "svr",
        *where,
        "--accelerator-type",
        "v4-32",
        "--version",
        "tpu-ubuntu2204-base",
    ]
    archive = "/tmp/jaxsvr-svr.tar.gz"
    assert lines[1] == [
        "git",
        "-C",
        str(ROOT),
        "archive",
        "--format=tar.gz",
        "--prefix=jaxsvr/",
        "-o",
        archive,
        "HEAD",
    ]
    assert lines[2] == [*tpu, "scp", archive, "svr:jaxsvr.tar.gz", *where, "--worker=all"]
    install = lines[3]
    assert install[:7] == [*tpu, "ssh", "svr", *where][:7] and "--worker=all" in install
    assert "pip install -q -e '.[gcs]' 'jax[tpu]'" in install[-1]
    assert lines[4] == [
        *tpu,
        "scp",
        "--recurse",
        "data/feats",
        "svr:jaxsvr/data/",
        *where,
        "--worker=all",
    ]
    run = lines[5]
    assert run[:-1] == [*tpu, "ssh", "svr", *where, "--worker=all", "--command"]
    remote = run[-1]
    assert remote.startswith("cd ~/jaxsvr && . .venv/bin/activate && python -m jaxsvr.main ")
    # the remote shell gets the main arguments back exactly, spaces included
    assert shlex.split(remote.split("python -m jaxsvr.main ", 1)[1]) == MAIN
    assert len(lines) == 6


@pytest.mark.parametrize(
    "args, match",
    [
        (["--zone", "z", "--", *MAIN], "give --name and --zone"),
        (["--name", "n", "--zone", "z"], "give the jaxsvr.main arguments after --"),
        (["--name", "n", "--zone", "z", "--bogus", "--", *MAIN], "unknown option --bogus"),
    ],
)
def test_tpu_pod_argument_errors(args, match):
    r = bash(TPU, *args)
    assert r.returncode == 2 and match in r.stderr, r.stderr


def test_slurm_dry_run_prints_the_srun_step(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SLURM_SUBMIT_DIR": str(tmp_path)}
    r = bash(SLURM, "--dry-run", *MAIN, env=env)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert shlex.split(line) == [
        "srun",
        "--kill-on-bad-exit=1",
        "--chdir",
        str(tmp_path),
        f"{tmp_path}/.venv/bin/python",
        "-m",
        "jaxsvr.main",
        *MAIN,
    ]
    r = bash(SLURM, "--dry-run", *MAIN, env={**env, "JAXSVR_PYTHON": sys.executable})
    assert shlex.split(r.stdout)[4] == sys.executable


def test_slurm_without_arguments_is_one_line_exit_2():
    r = bash(SLURM)
    assert r.returncode == 2 and r.stderr.startswith("error: give the jaxsvr.main arguments")


@pytest.mark.parametrize("script", [TPU, SLURM], ids=lambda p: p.name)
def test_scripts_pass_bash_n_and_shellcheck(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    r = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
