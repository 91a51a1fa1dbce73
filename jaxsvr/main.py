"""Entry point: python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=DIR.

The config (a Python file with `get_config(arg)`, locked so a mistyped key fails at once)
names the job; overrides like `--config.data.annotations=../shared/data/epic100` change it.
Jobs: `train` (`jaxsvr.train.loop.train_and_evaluate`: train, evaluate, checkpoint; rerunning
the command resumes from WORKDIR), `rescore` (`jaxsvr.runs.rescore`: a trained run's test
similarity under the class relevance and every caption proxy, with the random baseline;
`eval`, its former name, still runs it and says so once) and `eval_demo` (evaluation on
reference similarities).

Run as the command, the process first restarts itself once with glibc's huge-page tunable
where the machine's transparent huge pages need it (`JAXSVR_HUGE_PAGES=0` keeps glibc's
default, `JAXSVR_HUGE_PAGES=reserved` takes the huge pages reserved with `sysctl
vm.nr_hugepages`; `jaxsvr.runtime.process_tuning`), and lowers JAX's threefry hash unrolled on the
CPU (`jaxsvr.runtime.threefry`; `JAXSVR_THREEFRY=loop` keeps JAX's lowering): both are
about speed, neither changes a number.

Exit codes (docs/failures.md): 0 done; 1 the training diverged (non-finite loss; the
step is named); 2 bad input, found before anything was written (one line: missing or
broken config file, unknown config key or variant, a value out of range, an unusable or
busy workdir, missing file, features that disagree with the annotations or each other,
non-finite features); 143 training stopped on SIGTERM after saving the step it reached
(`jaxsvr.train.preemption`; rerun to resume). In a run of several processes
(`jaxsvr.runtime.distributed`) a failing process exits at once with its code (1 for an
unexpected error, its traceback logged) instead of waiting for the others in the
shutdown barrier; its launcher stops them.
"""

if __name__ == "__main__":  # first: a restart runs whatever came before it again
    from jaxsvr.runtime import process_tuning

    process_tuning.reexec_with_huge_pages()

import ast  # noqa: E402 (after the restart above)
import logging  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

from absl import app, flags  # noqa: E402
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for metrics, config.json, checkpoints.")
flags.mark_flags_as_required(["config", "workdir"])

JOBS = ("train", "rescore", "eval_demo")
JOB_ALIASES = {"eval": "rescore"}  # former names, still accepted
EXIT_DIVERGED, EXIT_BAD_INPUT = 1, 2
EXIT_FAILED = 1  # an unexpected error in a multi-process run (its traceback is logged)


def main(argv: list[str]) -> None:
    logging.getLogger().setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_quiet_libraries)
    from jaxsvr.errors import InputError
    from jaxsvr.runtime import distributed, process_tuning, threefry
    from jaxsvr.train.loop import TrainingDiverged
    from jaxsvr.train.preemption import EXIT_PREEMPTED, Preempted

    config = _CONFIG.value
    logging.info(
        "jaxsvr %s: config %s, workdir %s", config.job, _config_arg(sys.argv), _WORKDIR.value
    )
    # process-wide, the same numbers: random bits drawn by the unrolled hash on the CPU,
    # and (set before start-up by the restart above) huge pages for XLA's temporaries
    hashing = "unrolled" if threefry.lower_unrolled_on_cpu() else "as JAX lowers it"
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    pool, warning = process_tuning.huge_page_note(os.environ)
    logging.info(
        "process: threefry %s on the CPU; malloc tunables %s%s", hashing, tunables or "none", pool
    )
    if warning:
        logging.warning("%s", warning)
    joined = None
    try:
        joined = distributed.join(config.distributed)
        run_job(config, _WORKDIR.value)
    except (InputError, FileNotFoundError) as e:
        _fail(EXIT_BAD_INPUT, str(e), joined)
    except TrainingDiverged as e:
        _fail(EXIT_DIVERGED, str(e), joined)
    except Preempted as e:  # every process of a run stops at the same step: a normal exit
        print(f"stopped: {e}", file=sys.stderr)
        sys.exit(EXIT_PREEMPTED)
    except Exception:
        if joined is None or joined.cluster is None:
            raise
        logging.exception("process %d of %d failed", joined.process, joined.processes)
        _exit_now(EXIT_FAILED)


def run_job(config, where: str) -> None:
    """Runs `config.job` in the run folder `where`: the workdir check, then the job.

    Raises:
      InputError, FileNotFoundError: bad input; `main` prints the first line after
        `error: ` and exits with code 2.
    """
    from jaxsvr.errors import InputError
    from jaxsvr.runtime import workdir

    job = JOB_ALIASES.get(config.job, config.job)
    if job != config.job:
        logging.warning("config.job=%s is now called %s: runs it", config.job, job)
    workdir.check(where)
    if job == "train":
        from jaxsvr.train import loop

        loop.train_and_evaluate(config, where)
    elif job == "rescore":
        from jaxsvr.runs import rescore

        rescore.run(config, where)
    elif job == "eval_demo":
        from jaxsvr.evaluation import demo

        demo.run(config, where)
    else:
        raise InputError(f"unknown job {config.job!r} in config.job: use one of {JOBS}")


def _quiet_libraries(record: logging.LogRecord) -> bool:
    """Drops INFO chatter a user cannot act on: orbax's per-save lines, and JAX's backend
    probes ("Unable to initialize backend 'tpu': ... libtpu.so", which reads like a failure
    on every machine without that backend). Warnings and errors still show."""
    if record.levelno > logging.INFO:
        return True
    if "orbax" in record.pathname:
        return False
    return not record.getMessage().startswith("Unable to initialize backend")


def _fail(code: int, message: str, joined=None) -> None:
    logging.error("%s", message.splitlines()[0])
    print(f"error: {message.splitlines()[0]}", file=sys.stderr)
    if joined is not None and joined.cluster is not None:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """Ends a process of a multi-process run at once. A normal exit would wait in
    jax.distributed's shutdown barrier for the other processes, which may be blocked in a
    collective this process will never join: the launcher stops them when this one ends."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing, with config errors (missing file, unknown key, bad variant) as one
    line, exit 2."""
    try:
        rest = flags.FLAGS(argv)
        _CONFIG.value.job  # noqa: B018 (a config file that failed to load raises OSError here)
    except SystemExit:
        raise
    except OSError as e:  # ml_collections defers this error until the config is read
        reason = str(e).strip().splitlines()[-1].split("failure to load: ")[-1].strip()
        reason = re.sub(r"^\[Errno \d+\] (.*?)(: '.*')?$", r"\1", reason)
        reason = reason.rstrip(".")
        print(
            f"error: cannot load the --config file {_config_path(argv)!r}: {reason}; give "
            "the path of a Python file with get_config(), e.g. configs/epic_jpose.py",
            file=sys.stderr,
        )
        sys.exit(EXIT_BAD_INPUT)
    except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as e:
        message = str(e)
        if message[:1] in "'\"":  # ml_collections wraps the key error message in a repr
            try:
                message = ast.literal_eval(message)
            except (ValueError, SyntaxError):
                pass
        if "Traceback" in message:  # an error raised inside the config file: its last line
            last = message.strip().splitlines()[-1]
            message = f"in the config file: {last.split(': ', 1)[-1]}"
        elif isinstance(e, (AttributeError, KeyError)):
            message = f"unknown config key {message}"
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as e:  # anything else the config file raised: SyntaxError, its own
        last = (str(e).strip().splitlines() or [""])[-1]
        print(
            f"error: the --config file {_config_path(argv)!r} failed: {type(e).__name__}: "
            f"{last}; fix the file (it must define get_config(arg) returning a ConfigDict)",
            file=sys.stderr,
        )
        sys.exit(EXIT_BAD_INPUT)
    if len(rest) > 1:
        print(
            f"error: unexpected arguments {' '.join(rest[1:])!r}: give flags only, as "
            "--config=FILE --workdir=DIR [--config.KEY=VALUE ...]",
            file=sys.stderr,
        )
        sys.exit(EXIT_BAD_INPUT)
    return rest


def _config_arg(argv: list[str]) -> str:
    """The value of `--config=PATH[:ARG]` (or `--config PATH[:ARG]`) in `argv`."""
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            return arg.removeprefix("--config=")
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
    return ""


def _config_path(argv: list[str]) -> str:
    """The file of `--config=PATH[:ARG]` or `--config PATH[:ARG]` in `argv`."""
    return _config_arg(argv).split(":", 1)[0]


if __name__ == "__main__":
    app.run(main, flags_parser=_parse_flags)
