"""Joining a multi-process run: `jax.distributed` from the environment.

`join(config.distributed)` runs in the main command before any JAX computation:

- `"auto"` (default): join when the environment describes a cluster, else run as one
  process. Clusters, in the order checked:
  - `launcher`: jaxsvr's launchers (`launch/local.py`) set `JAXSVR_COORDINATOR`
    (host:port of process 0), `JAXSVR_NUM_PROCESSES` and `JAXSVR_PROCESS_ID`;
  - `slurm`: an `srun` step of more than one task (`SLURM_JOB_ID`, `SLURM_NTASKS` > 1,
    `SLURM_PROCID`); JAX reads the coordinator, process count and index from SLURM;
  - `tpu`: a Cloud TPU VM (a `/dev/accel*` or `/dev/vfio/*` device and libtpu installed);
    JAX finds the slice's workers through the TPU metadata server (one worker: one
    process).
- `"off"`: one process, whatever the environment says.

On CPU the processes exchange through gloo (`jax_cpu_collectives_implementation`); each
process sees only its own devices (`XLA_FLAGS=--xla_force_host_platform_device_count=K`
gives it K), and `jax.devices()` lists those of every process. A process that cannot
reach the coordinator within `JAXSVR_INIT_TIMEOUT` seconds (default 300) stops with one
error line.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from jaxsvr.errors import InputError

MODES = ("auto", "off")
LAUNCHER_VARS = ("JAXSVR_COORDINATOR", "JAXSVR_NUM_PROCESSES", "JAXSVR_PROCESS_ID")


@dataclass(frozen=True)
class Joined:
    """How this process joined: `cluster` is None for a single process."""

    cluster: str | None
    process: int = 0
    processes: int = 1


def cluster(env: Mapping[str, str] = os.environ) -> str | None:
    """The cluster the environment describes ("launcher", "slurm", "tpu") or None."""
    if any(v in env for v in LAUNCHER_VARS):
        return "launcher"
    if "SLURM_JOB_ID" in env and "SLURM_PROCID" in env and _int(env, "SLURM_NTASKS", 1) > 1:
        return "slurm"
    if _tpu_vm():
        return "tpu"
    return None


def join(mode: str = "auto", env: Mapping[str, str] = os.environ) -> Joined:
    """Initialises `jax.distributed` as `mode` and the environment say (module docstring)."""
    if mode not in MODES:
        raise InputError(f"config.distributed = {mode!r}: use one of {', '.join(MODES)}")
    kind = cluster(env) if mode == "auto" else None
    if kind is None:
        return Joined(None)
    import jax

    if jax.distributed.is_initialized():
        return Joined(kind, jax.process_index(), jax.process_count())
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeout = _int(env, "JAXSVR_INIT_TIMEOUT", 300)
    if kind == "launcher":
        missing = [v for v in LAUNCHER_VARS if v not in env]
        if missing:
            raise InputError(
                f"the environment sets {', '.join(v for v in LAUNCHER_VARS if v in env)} but "
                f"not {', '.join(missing)}: set all three (launch/local.py does) or none"
            )
        processes = _int(env, "JAXSVR_NUM_PROCESSES", 1)
        process = _int(env, "JAXSVR_PROCESS_ID", 0)
        if not 0 <= process < processes:
            raise InputError(
                f"JAXSVR_PROCESS_ID = {process} is outside 0 .. JAXSVR_NUM_PROCESSES - 1 = "
                f"{processes - 1}"
            )
        args = dict(
            coordinator_address=env["JAXSVR_COORDINATOR"],
            num_processes=processes,
            process_id=process,
        )
    else:
        args = {}
    try:
        jax.distributed.initialize(**args, initialization_timeout=timeout)
    except (RuntimeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(
            f"cannot join the {kind} cluster (jax.distributed.initialize, timeout {timeout} "
            f"s): {first}; check that every process started and can reach the coordinator, "
            "or run one process with --config.distributed=off"
        ) from e
    joined = Joined(kind, jax.process_index(), jax.process_count())
    logging.info(
        "distributed: joined the %s cluster as process %d of %d",
        kind,
        joined.process,
        joined.processes,
    )
    return joined


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise InputError(f"environment variable {name} = {value!r} is not an integer") from None


def _tpu_vm() -> bool:
    devices = glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
    return bool(devices) and importlib.util.find_spec("libtpu") is not None
