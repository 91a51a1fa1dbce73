"""Helpers for trainer tests: configs by path, CLI runs in subprocesses, metric files."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from jaxsvr import configs

ROOT = Path(__file__).resolve().parents[1]


def config(name: str = "epic_jpose", arg: str = "runlocal", **overrides):
    """configs/<name>.py:<arg> with dotted overrides, e.g. train__num_epochs=2."""
    spec = f"configs/{name}.py" + (f":{arg}" if arg else "")
    return configs.from_file(spec, **overrides)


def main_command(workdir, *flags, config_arg="configs/epic_jpose.py:runlocal"):
    return [
        sys.executable,
        "-m",
        "jaxsvr.main",
        f"--config={config_arg}",
        f"--workdir={workdir}",
        *flags,
    ]


def cpu_env(devices: int | None = None) -> dict:
    """The environment of a training subprocess: CPU only, also on a machine with a GPU
    (the tests compare runs to float32 and bit for bit, which only CPUs guarantee), with
    `devices` fake CPU devices if given."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if devices:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
        env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    return env


def run_main(workdir, *flags, devices: int | None = None, timeout=300, environ=None, **kw):
    """`python -m jaxsvr.main` on the CPU (`cpu_env`), `environ` added to its environment."""
    env = {**cpu_env(devices), **(environ or {})}
    return subprocess.run(
        main_command(workdir, *flags, **kw),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def run_retrieve(*args, timeout=300):
    """`python -m jaxsvr.retrieve ARGS` in a subprocess (CPU only), output as text."""
    return subprocess.run(
        [sys.executable, "-m", "jaxsvr.retrieve", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=cpu_env(),
    )


def jsonl(workdir) -> list[dict]:
    return [json.loads(line) for line in (Path(workdir) / "metrics.jsonl").read_text().splitlines()]


def train_losses(workdir) -> dict[int, float]:
    return {r["step"]: r["train/loss"] for r in jsonl(workdir) if "train/loss" in r}


def final(workdir) -> dict:
    return json.loads((Path(workdir) / "metrics.json").read_text())


def wait_until(proc: subprocess.Popen, ready) -> None:
    """Returns once `ready()`, or `proc` ended, or 240 s passed (polling every 5 ms)."""
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.005)


def wait_for_checkpoint(proc: subprocess.Popen, workdir) -> None:
    """`wait_until` `workdir/checkpoints` holds a step folder (the first periodic save)."""
    ckpts = Path(workdir) / "checkpoints"
    wait_until(proc, lambda: ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir()))
