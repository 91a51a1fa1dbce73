"""The launchers. The cluster ones that cannot run here (`launch/tpu_pod.sh`,
`launch/slurm.sbatch`): their --dry-run commands, their argument errors, and bash -n /
shellcheck. The local one (`launch/local.py`, whose runs are in test_distributed.py): every
number flag checked before anything starts, and no process left behind when the launcher
is SIGKILLed or its processes fail."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TPU = ROOT / "launch" / "tpu_pod.sh"
SLURM = ROOT / "launch" / "slurm.sbatch"
LOCAL = ROOT / "launch" / "local.py"
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


def local_module():
    spec = importlib.util.spec_from_file_location("local_launcher", LOCAL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BAD_NUMBERS = [
    *[("--processes", v) for v in ("nan", "inf", "-1", "0", "65", "1.5", "abc", "")],
    *[("--cpu-devices", v) for v in ("nan", "inf", "-1", "0", "257", "1.5", "abc")],
    *[("--timeout", v) for v in ("nan", "inf", "-inf", "1e999", "-1", "abc", "")],
    *[("--grace", v) for v in ("nan", "inf", "-inf", "-0.5", "abc")],
]


@pytest.mark.parametrize("flag, value", BAD_NUMBERS)
def test_local_refuses_a_bad_number_before_starting_anything(flag, value):
    r = subprocess.run(
        [sys.executable, str(LOCAL), f"{flag}={value}", "--", "--workdir=x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"error: argument {flag}: give a ") and f"not {value!r}" in line
    assert line.endswith("(see local.py --help)")


def test_local_takes_the_edges_of_each_range():
    local = local_module()
    args, main_args = local.parse(
        ["--processes=64", "--cpu-devices=256", "--timeout=0", "--grace=0", "--", "--w=x"]
    )
    assert (args.processes, args.cpu_devices, args.timeout, args.grace) == (64, 256, 0, 0)
    assert main_args == ["--w=x"]
    args, _ = local.parse(["--processes", "1", "--cpu-devices", "1", "--timeout=1e-3", "--", "x"])
    assert (args.processes, args.cpu_devices, args.timeout, args.grace) == (1, 1, 1e-3, 10)


def test_sigkill_of_the_local_launcher_kills_its_processes_and_their_groups(tmp_path):
    """Killed while its two jaxsvr.main processes start, the launcher leaves nothing: not
    the processes, not their watchdogs (children of jaxsvr.main in its process group, as
    anything it starts would be)."""
    mark = f"JAXSVR_TEST_MARK={uuid.uuid4().hex}"
    launcher = _start_local(tmp_path, mark, "--config=configs/epic_jpose.py:runlocal")
    try:
        children = _wait_for_children(launcher, 2)
        groups = {pid: _members(pid) for pid in children}
        assert all(len(m) >= 2 for m in groups.values()), groups  # each with its watchdog
        assert launcher.poll() is None, (tmp_path / "launcher.err").read_text()
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)
        killed = time.monotonic()
        left = _marked(mark)
        while left and time.monotonic() - killed < 10:
            time.sleep(0.02)
            left = _marked(mark)
        assert not left, f"left running 10 s after the launcher was killed: {left}"
    finally:
        _kill_marked(launcher, mark)


def test_the_local_launcher_leaves_nothing_when_its_processes_fail(tmp_path):
    mark = f"JAXSVR_TEST_MARK={uuid.uuid4().hex}"
    launcher = _start_local(tmp_path, mark, "--config=configs/no_such_config.py")
    try:
        assert launcher.wait(timeout=60) == 2
        end = time.monotonic() + 10
        while _marked(mark) and time.monotonic() < end:
            time.sleep(0.02)
        assert not _marked(mark)
        err = (tmp_path / "launcher.err").read_text()
        last = err.splitlines()[-1]  # either process may be the first to fail
        assert last.startswith("launch: process ") and "exited with code 2: error: cannot" in last
    finally:
        _kill_marked(launcher, mark)


def _start_local(tmp_path: Path, mark: str, config: str) -> subprocess.Popen:
    """launch/local.py with 2 processes, every process it starts carrying `mark` in its
    environment (the watchdogs too: they are forked, not exec'd)."""
    name, value = mark.split("=")
    with open(tmp_path / "launcher.err", "w") as err:
        return subprocess.Popen(
            [
                sys.executable,
                str(LOCAL),
                "--processes=2",
                "--timeout=120",
                "--",
                config,
                f"--workdir={tmp_path / 'run'}",
            ],
            cwd=ROOT,
            env=dict(os.environ, JAX_PLATFORMS="cpu", **{name: value}),
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def _wait_for_children(launcher: subprocess.Popen, n: int) -> list[int]:
    """The launcher's `n` children once each has become `python -m jaxsvr.main`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and launcher.poll() is None:
        children = []
        for task in Path(f"/proc/{launcher.pid}/task").iterdir():
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except FileNotFoundError:  # a thread that ended
                pass
        execd = [pid for pid in children if _cmdline(pid)[1:3] == ["-m", "jaxsvr.main"]]
        if len(execd) == n:
            return sorted(execd)
        time.sleep(0.01)
    raise AssertionError(f"no {n} jaxsvr.main processes (launcher exit {launcher.poll()})")


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of `pid`, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[2])


def _members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] != "Z" and stat[1] == pgid:
                out.append(int(entry.name))
    return out


def _marked(mark: str) -> list[int]:
    """The live (not zombie: one nobody reaps is dead all the same) processes whose
    environment holds `mark`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        stat = _stat(int(entry.name))
        if mark.encode() in env and stat is not None and stat[0] != "Z":
            out.append(int(entry.name))
    return out


def _kill_marked(launcher: subprocess.Popen, mark: str) -> None:
    """Cleanup: SIGKILL to the launcher's group, then to each process carrying `mark`."""
    if launcher.poll() is None:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
    for pid in _marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + 5
    while _marked(mark) and time.monotonic() < end:
        time.sleep(0.02)
