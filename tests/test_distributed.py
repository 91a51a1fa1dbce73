"""Multi-process runs on one machine: `launch/local.py` starts `jaxsvr.main` as processes
joined by `jax.distributed` (coordinator on 127.0.0.1, gloo collectives, fake CPU devices).

2 processes x 2 devices follow 1 process x 4 devices (losses 1e-5, final metrics 1e-6) for
JPoSE triplets and a batch loss (SMS); a checkpoint written by 2 processes resumes in 1 and
the other way round; SIGKILL of one process ends the launcher non-zero at once, SIGTERM
to the rerun's launcher makes every process save the same step and exit, and the next
rerun resumes to the uninterrupted run's metrics; a failing process ends the launcher
with its error line. Then the environment detection of
`jaxsvr.runtime.distributed` and the launcher's argument errors, without processes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from train_runs import (
    ROOT,
    final,
    jsonl,
    run_main,
    train_losses,
    wait_for_checkpoint,
    wait_until,
)

from jaxsvr.errors import InputError
from jaxsvr.runtime import distributed

LAUNCH = ROOT / "launch" / "local.py"
JPOSE = "configs/epic_jpose.py:runlocal"  # 28 steps, checkpoints every 5 (kept: 2)
SMS = "configs/epic_sms.py:sms,runlocal"
# The flags of each config's pair of runs. SMS's is only compared: one epoch (7 steps), every
# step's loss logged, the last step's checkpoint alone.
FLAGS = {
    JPOSE: (),
    SMS: (
        "--config.train.num_epochs=1",
        "--config.train.log_every_steps=1",
        "--config.checkpoint.every_steps=1000",
        "--config.checkpoint.best_metric=",
    ),
}
TIMINGS = {"eval_seconds", "train_seconds", "train_steps", "steps_per_sec", "host_wait"}


def launch_command(workdir, config=JPOSE, *flags, processes=2, devices=2, grace=1):
    return [
        sys.executable,
        str(LAUNCH),
        f"--processes={processes}",
        f"--cpu-devices={devices}",
        "--timeout=240",
        # when one process dies, the other waits in a collective (or for its peer at the
        # preemption sync point) and ends only by the SIGKILL that follows the grace (10 s)
        f"--grace={grace}",
        "--",
        f"--config={config}",
        f"--workdir={workdir}",
        *flags,
    ]


def launch(workdir, config=JPOSE, *flags, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run(
        launch_command(workdir, config, *flags, **kw),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def assert_same_run(got: Path, want: Path) -> None:
    """Equal loss curves (1e-5) and final metrics (1e-6)."""
    a, b = train_losses(got), train_losses(want)
    assert a.keys() == b.keys()
    np.testing.assert_allclose([a[s] for s in b], [b[s] for s in b], rtol=0, atol=1e-5)
    fa, fb = final(got), final(want)
    keys = sorted(set(fb) - TIMINGS)
    assert sorted(set(fa) - TIMINGS) == keys
    np.testing.assert_allclose([fa[k] for k in keys], [fb[k] for k in keys], rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{(config, processes): workdir} of finished runs: 2 x 2 devices and 1 x 4 devices."""
    out = {}
    for config in (JPOSE, SMS):
        two = tmp_path_factory.mktemp("two")
        r = launch(two, config, *FLAGS[config])
        assert r.returncode == 0, r.stderr[-3000:]
        out[config, 2] = two, r
        one = tmp_path_factory.mktemp("one")
        r = run_main(one, *FLAGS[config], config_arg=config, devices=4)
        assert r.returncode == 0, r.stderr[-3000:]
        out[config, 1] = one, r
    return out


@pytest.mark.parametrize("config", [JPOSE, SMS], ids=["jpose-triplets", "sms-batch"])
def test_two_processes_follow_one_process_with_as_many_devices(runs, config):
    two, log = runs[config, 2]
    assert_same_run(two, runs[config, 1][0])
    lines = log.stderr.splitlines()
    for i in (0, 1):
        ours = [line for line in lines if line.startswith(f"[{i}] ")]
        joined = f"joined the launcher cluster as process {i} of 2"
        devices = f"devices: 4 cpu (cpu), 2 on this process; process {i} of 2"
        assert any(joined in x for x in ours) and any(devices in x for x in ours)
    assert not any("[Gloo]" in line for line in lines)
    # process 0 alone wrote the outputs: one line per step, one events file
    steps = [r["step"] for r in jsonl(two) if "train/loss" in r]
    assert steps == sorted(set(steps))
    assert len(list((two / "tensorboard").glob("events.out.tfevents.*"))) == 1


def _resume_from_25(src: Path, dest: Path) -> Path:
    """A copy of finished run `src` without its step-28 checkpoint and final metrics."""
    shutil.copytree(src, dest)
    shutil.rmtree(dest / "checkpoints" / "28")
    (dest / "metrics.json").unlink()
    return dest


def test_checkpoints_move_between_process_counts(runs, tmp_path):
    """Written by 2 processes, resumed by 1 (4 devices), and the other way round (the 2
    processes resuming through a file:// URL workdir)."""
    two, one = runs[JPOSE, 2][0], runs[JPOSE, 1][0]
    work = _resume_from_25(two, tmp_path / "two_then_one")
    r = run_main(work, config_arg=JPOSE, devices=4)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "at step 25" in r.stderr
    assert_same_run(work, one)

    work = _resume_from_25(one, tmp_path / "one_then_two")
    r = launch(f"file://{work}")  # both processes on the URL route (jaxsvr.files.locations)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "at step 25" in r.stderr and "is a URL: it is not locked" in r.stderr
    assert_same_run(work, two)


def test_sigkill_of_one_process_then_sigterm_to_the_launcher_and_a_rerun_resumes(runs, tmp_path):
    """SIGKILL of one process ends the launcher at once. The rerun, stopped by a SIGTERM to
    its launcher while it restores, stops every process at the step JAX's preemption
    service agrees on (the service counts the rerun's own steps), saves it and exits 143
    long before the grace's SIGKILL; the next rerun ends as the uninterrupted 2-process
    run (28 steps)."""
    proc = _start_launcher(tmp_path)
    try:
        wait_for_checkpoint(proc, tmp_path)
        children = _children(proc.pid)
        assert len(children) == 2, children
        os.kill(_process(children, 1), signal.SIGKILL)
        killed = time.time()
        _, err = proc.communicate(timeout=90)
        assert time.time() - killed < 60
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode not in (0, None), err[-3000:]
    assert "launch: process 1 exited with code -9" in err, err[-3000:]
    assert not (tmp_path / "metrics.json").exists(), "the run ended before it was killed"
    assert not any(_alive(pid) for pid in children)
    killed_at = max(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())

    again = _sigterm_while_setting_up(tmp_path, lambda lines: "resumed from" in "".join(lines))
    saved = _stopped_at(again, tmp_path, after=killed_at)
    r = launch(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"at step {saved}" in r.stderr
    assert_same_run(tmp_path, runs[JPOSE, 2][0])


def _sigterm_while_setting_up(workdir: Path, ready) -> str:
    """Runs the launcher, sends it SIGTERM once `ready(stderr lines so far)`, and returns its
    stderr; fails if it is not over well within the 100 s grace."""
    proc = _start_launcher(workdir, grace=100)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        wait_until(proc, lambda: ready(lines))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=150)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = "".join(lines)
    assert proc.returncode == 130, err[-3000:]  # not SIGKILLed at the grace's end
    assert "launch: interrupted; stopped every process" in err
    return err


def _start_launcher(workdir: Path, **kw) -> subprocess.Popen:
    """The launcher of a 2-process JPoSE run in its own session, stderr piped."""
    return subprocess.Popen(
        launch_command(workdir, **kw),
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _stopped_at(err: str, workdir: Path, after: int) -> int:
    """The step both processes saved and stopped at, after step `after` and before the end."""
    assert not (workdir / "metrics.json").exists(), err[-3000:]
    step = max(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    assert after < step < 28, err[-3000:]
    for i in (0, 1):
        line = f"[{i}] stopped: stopped on SIGTERM after step {step}, saved as checkpoint {step}"
        assert line in err, err[-3000:]
    return step


def _children(pid: int) -> list[int]:
    """The direct children of `pid` (from /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return sorted(out)


def _process(pids: list[int], index: int) -> int:
    """The pid among `pids` whose JAXSVR_PROCESS_ID is `index`."""
    for pid in pids:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"JAXSVR_PROCESS_ID={index}".encode() in env:
            return pid
    raise AssertionError(f"no process {index} among {pids}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


def test_streamed_evaluation_in_two_processes_equals_one_process(tmp_path):
    """Each of 2 processes (1 device each) ranks its share of the query blocks and the
    statistics are summed over processes: every metric key equals 1 process x 2 devices
    (the same per-device programs) exactly, ties and single-instance positives included."""
    spec = importlib.util.spec_from_file_location("local_launcher", LAUNCH)
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    script = [sys.executable, str(ROOT / "tests" / "distributed_evaluation.py")]
    port = local.free_port()
    procs = []
    try:
        for i in range(2):
            env = local.child_env(i, 2, 1, port)
            procs.append(subprocess.Popen([*script, str(tmp_path / "two.json")], env=env))
        one = local.child_env(0, 1, 2, port)
        for name in distributed.LAUNCHER_VARS:  # one process, 2 devices
            del one[name]
        subprocess.run([*script, str(tmp_path / "one.json")], env=one, check=True, timeout=120)
        for p in procs:
            assert p.wait(timeout=120) == 0
    finally:
        for p in procs:  # ours to stop, whatever happened
            if p.poll() is None:
                p.kill()
                p.wait()
    two, one = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("two", "one"))
    assert (two["processes"], one["processes"]) == (2, 1)
    assert two["metrics"] == one["metrics"]
    assert one["metrics"]["tied_v2t"] > 0 and "class_r1_v2t" in one["metrics"]


def test_a_failing_process_ends_the_launcher_with_its_error_line(tmp_path):
    r = launch(tmp_path, JPOSE, "--config.train.batch_size=6")  # 6 rows on 4 devices
    assert r.returncode == 2, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("launch: process ") and "exited with code 2: error: " in last
    assert "batch_size" in last


@pytest.mark.parametrize(
    "env, want",
    [
        ({}, None),
        ({"JAXSVR_COORDINATOR": "127.0.0.1:1", "JAXSVR_NUM_PROCESSES": "2"}, "launcher"),
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, "slurm"),
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None),
        ({"SLURM_JOB_ID": "7"}, None),  # an allocation, not an srun step
    ],
)
def test_cluster_from_the_environment(env, want):
    assert distributed.cluster(env) == want


@pytest.mark.parametrize(
    "mode, env, match",
    [
        ("on", {}, "config.distributed = 'on'"),
        ("auto", {"JAXSVR_COORDINATOR": "127.0.0.1:1"}, "not JAXSVR_NUM_PROCESSES"),
        (
            "auto",
            {"JAXSVR_COORDINATOR": "h:1", "JAXSVR_NUM_PROCESSES": "2", "JAXSVR_PROCESS_ID": "x"},
            "JAXSVR_PROCESS_ID = 'x' is not an integer",
        ),
        (
            "auto",
            {"JAXSVR_COORDINATOR": "h:1", "JAXSVR_NUM_PROCESSES": "2", "JAXSVR_PROCESS_ID": "2"},
            "outside 0 .. JAXSVR_NUM_PROCESSES - 1 = 1",
        ),
    ],
)
def test_join_errors_are_one_line(mode, env, match):
    with pytest.raises(InputError, match=match):
        distributed.join(mode, env)


def test_off_and_no_cluster_run_as_one_process():
    assert distributed.join("off", {"JAXSVR_COORDINATOR": "x"}).cluster is None
    assert distributed.join("auto", {}) == distributed.Joined(None, 0, 1)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--processes=2"], "give the jaxsvr.main arguments after --"),
        (["--processes=0", "--", "--workdir=x"], "at least 1"),
        (["--timeout=-1", "--", "--workdir=x"], "at least 0"),
    ],
)
def test_launcher_argument_errors(args, match):
    r = subprocess.run(
        [sys.executable, str(LAUNCH), *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and match in r.stderr, r.stderr
