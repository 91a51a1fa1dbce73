"""Runs one jaxsvr command as N processes on this machine, joined through jax.distributed.

    python launch/local.py --processes 2 --cpu-devices 2 -- \\
        --config=configs/epic_jpose.py:runlocal --workdir=/tmp/two

starts `python -m jaxsvr.main <arguments>` N times, each with K fake CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=K`, `JAX_PLATFORMS=cpu`) and the
variables `jaxsvr.runtime.distributed` joins by (`JAXSVR_COORDINATOR` = 127.0.0.1 and a free port,
`JAXSVR_NUM_PROCESSES`, `JAXSVR_PROCESS_ID`, `JAXSVR_INIT_TIMEOUT`). It is the multi-host
code path on one machine: the processes split every batch, all-reduce gradients through
gloo, and write one checkpoint together.

Output: each process's lines, prefixed with `[i] ` (stdout to stdout, stderr to stderr;
gloo's connection chatter dropped). Exit code 0 only if every process exits 0. When one
process fails (any non-zero exit, or killed), the others are stopped (SIGTERM to their
process groups, SIGKILL after `--grace` seconds, default 10), and the launcher prints that
process's last error line and exits with its code (128 + signal if it was killed).
`--timeout S` stops everything after S seconds (exit 124); Ctrl-C or SIGTERM to the
launcher stops everything (exit 130).

Nothing is left running in any case, the launcher's own death included (SIGKILL, OOM
killer): each process's group holds a watchdog (`WATCHDOG`) that SIGKILLs the group, the
process and whatever it started, as soon as the launcher is gone, however it went. Every
number is checked before anything starts: `--processes` 1 to 64, `--cpu-devices` 1 to
256, `--timeout` and `--grace` finite and at least 0; a bad one is one `error:` line, exit 2.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOISE = ("[Gloo] ",)  # lines dropped from the processes' output
MAX_PROCESSES = 64  # each is a whole JAX process: more on one machine is a typo
MAX_CPU_DEVICES = 256  # a 16 x 16 mesh in one process; XLA makes each one up front

# What each process runs first, as `python -S -c WATCHDOG FD -m jaxsvr.main ARGS...`: it
# forks a watchdog, then execs jaxsvr.main in its own place (same pid, so the launcher's
# Popen, exit codes and signals are jaxsvr.main's). FD is the read end of a pipe whose only
# write end the launcher holds: the watchdog's read returns only once that end is closed,
# which the kernel does when the launcher exits in any way, SIGKILL included; the watchdog
# then SIGKILLs its process group (the process's session, made by start_new_session): the
# process, anything it started (e.g. the METEOR worker pool of `data.relevance.proxy=met`)
# and itself. If the launcher dies before the fork, the read returns at once: no window in
# which a process can outlive it. The watchdog ignores the signals a graceful stop sends,
# so after a stop it stays until the launcher exits and then kills what the process left
# behind. Not PR_SET_PDEATHSIG: Linux only, kills the process but not what it started,
# fires when the forking *thread* ends, and leaves a race between fork and prctl.
# (-S: the watchdog needs nothing from site-packages; the exec'd jaxsvr.main gets them.)
WATCHDOG = """\
import os, signal, sys
fd = int(sys.argv[1])
if os.fork() == 0:
    try:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for i in (0, 1, 2):  # not holding the process's output pipes open
            os.dup2(null, i)
        while os.read(fd, 1):
            pass
    finally:  # the launcher is gone (or the watchdog failed: then loudly, as a -9)
        os.killpg(0, signal.SIGKILL)
os.close(fd)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(index: int, processes: int, cpu_devices: int, port: int) -> dict[str, str]:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "").split()
    flags = [f for f in flags if not f.startswith("--xla_force_host_platform_device_count")]
    flags.append(f"--xla_force_host_platform_device_count={cpu_devices}")
    env.update(
        XLA_FLAGS=" ".join(flags),
        JAX_PLATFORMS="cpu",
        JAXSVR_COORDINATOR=f"127.0.0.1:{port}",
        JAXSVR_NUM_PROCESSES=str(processes),
        JAXSVR_PROCESS_ID=str(index),
        JAXSVR_INIT_TIMEOUT=env.get("JAXSVR_INIT_TIMEOUT", "60"),
    )
    return env


class Process:
    """One child: its Popen, and threads that copy its output with a prefix."""

    def __init__(self, index: int, main_args: list[str], env: dict[str, str], watch_fd: int):
        self.index = index
        self.last_error = ""
        self.last_line = ""
        self.popen = subprocess.Popen(
            [sys.executable, "-S", "-c", WATCHDOG, str(watch_fd), "-m", "jaxsvr.main", *main_args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: stopped as a whole
            pass_fds=(watch_fd,),
        )
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.popen.stdout, sys.stdout), daemon=True),
            threading.Thread(target=self._pump, args=(self.popen.stderr, sys.stderr), daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    def _pump(self, stream, out) -> None:
        for line in stream:
            if line.startswith(NOISE):
                continue
            text = line.rstrip("\n")
            if text.strip():
                self.last_line = text
            if text.startswith("error: ") or text.startswith("E") and "] " in text[:60]:
                self.last_error = text
            out.write(f"[{self.index}] {text}\n")
            out.flush()

    def stop(self, sig: int) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def reason(self) -> str:
        return self.last_error or self.last_line or "(no output)"


def exit_code(returncode: int) -> int:
    return returncode if returncode > 0 else 128 + -returncode


def run(args: argparse.Namespace, main_args: list[str]) -> int:
    port = free_port()
    procs: list[Process] = []
    deadline = time.monotonic() + args.timeout if args.timeout else None
    code, failed = 0, None
    # watch_w stays open, in this process only (os.pipe's ends are not inherited), until
    # the processes are stopped: its closing is what the watchdogs wait for (WATCHDOG)
    watch_r, watch_w = os.pipe()
    try:
        for i in range(args.processes):
            env = child_env(i, args.processes, args.cpu_devices, port)
            procs.append(Process(i, main_args, env, watch_r))
        while True:
            codes = [p.popen.poll() for p in procs]
            ended = [p for p, c in zip(procs, codes) if c not in (None, 0)]
            if ended:
                # the first to end is the cause; among those seen in the same poll, an
                # abort (what a process does when a peer left the coordination service)
                # is the consequence of another's failure
                aborted = -signal.SIGABRT
                failed = min(ended, key=lambda p: (p.popen.returncode == aborted, p.index))
                code = exit_code(failed.popen.returncode)
                break
            if all(c == 0 for c in codes):
                break
            if deadline is not None and time.monotonic() > deadline:
                code = 124
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        code = 130
    finally:
        os.close(watch_r)
        _stop_all(procs, args.grace, watch_w)
    # the summary comes after every process's last line
    if failed is not None:
        print(
            f"launch: process {failed.index} exited with code {failed.popen.returncode}: "
            f"{failed.reason()}; stopped the others",
            file=sys.stderr,
        )
    elif code == 124:
        print(f"launch: --timeout {args.timeout} s reached; stopped every process", file=sys.stderr)
    elif code == 130:
        print("launch: interrupted; stopped every process", file=sys.stderr)
    return code


def _stop_all(procs: list[Process], grace: float, watch_w: int) -> None:
    """SIGTERM to every live process group, SIGKILL to those alive `grace` s later; then
    closes `watch_w`, so the watchdogs kill whatever is left in each group (a process
    ended, its helpers not), and waits for the last output lines."""
    for p in procs:
        p.stop(signal.SIGTERM)
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.popen.wait(timeout=max(end - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            p.stop(signal.SIGKILL)
            p.popen.wait()
    os.close(watch_w)
    for p in procs:
        for pump in p.pumps:
            pump.join(timeout=5)


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one `error: ...` line and exit code 2 (as jaxsvr.runtime.cli's:
    this script imports nothing of jaxsvr)."""

    def error(self, message: str):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _whole(lo: int, hi: int):
    """An argparse type: an int from lo to hi."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"give a whole number at least {lo} and at most {hi}, not {text!r}"
            )
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a finite float >= 0 (NaN would pass `< 0` and never fire)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"give a finite number of seconds at least 0, not {text!r}"
        )
    return value


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = _Parser(
        description=__doc__.split("\n\n")[0],
        usage="python launch/local.py --processes N --cpu-devices K -- <jaxsvr.main arguments>",
    )
    parser.add_argument(
        "--processes",
        metavar="N",
        type=_whole(1, MAX_PROCESSES),
        default=2,
        help=f"processes to start, 1 to {MAX_PROCESSES} (2)",
    )
    parser.add_argument(
        "--cpu-devices",
        metavar="K",
        type=_whole(1, MAX_CPU_DEVICES),
        default=1,
        help=f"fake CPU devices per process, 1 to {MAX_CPU_DEVICES} (1)",
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=_seconds,
        default=0,
        help="stop everything after this many s (0: never)",
    )
    parser.add_argument(
        "--grace", metavar="S", type=_seconds, default=10, help="s between SIGTERM and SIGKILL (10)"
    )
    if "--" in argv:
        cut = argv.index("--")
        ours, main_args = argv[:cut], argv[cut + 1 :]
    else:
        ours, main_args = argv, []
    args = parser.parse_args(ours)
    if not main_args:
        parser.error("give the jaxsvr.main arguments after --, e.g. -- --config=... --workdir=...")
    return args, main_args


def main(argv: list[str] | None = None) -> int:
    args, main_args = parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler stopping the launcher
    return run(args, main_args)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
