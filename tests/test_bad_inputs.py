"""Bad input, table-driven: every case must end in one `error: ...` line and exit code 2,
with no traceback, no output file, no temporary file and no workdir change left behind.

Cases cover the three classes of issue 14 across the command lines (the readers' own
cases: `test_bad_reader_inputs.py`):

- arrays (`jaxsvr.files.arrays`): empty files, /dev/null, non-real dtypes, forged headers,
  .npz under a .npy name, values beyond the float32 range, truncated or corrupt files;
- tables (`jaxsvr.files.tables`): non-UTF-8 bytes, oversized fields, unclosed quotes,
  class ids out of range, header-only files, repeated ids, bad JSON;
- the proxy CLI: `--weights` that are NaN, negative, all zero or sum above 1;
- usage errors (argparse's, extra arguments), config files that fail to load, and a
  workdir whose own entries (`checkpoints`, `metrics.jsonl`, ...) are of the wrong kind.

Each case names the text its error line must contain (file, row, column where there is
one), so a case cannot pass by failing for another reason.

A few cases of each command (`SUBPROCESS`) run as subprocesses, as a user runs them: exit
code 2, the one line and nothing else on stderr, no traceback. The others run in-process,
where a subprocess would only add its 0.3 s (the trainer's: 2 s) of imports to the same
check: the CLI's `main` under `jaxsvr.runtime.cli.run` (as its `__main__` runs it) with
stdout, stderr and the log captured, or for `jaxsvr.main` its `run_job` (the workdir check
and the job), whose first error line is what the command prints after `error: `. The cases
are in `bad_input_cases.py`.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings

import pytest
from bad_input_cases import CASES, COMMANDS
from bad_input_files import Case, materialise, tree
from test_bad_reader_inputs import READER_CASES
from train_runs import ROOT, cpu_env

from jaxsvr import configs
from jaxsvr import evaluate as evaluate_cli
from jaxsvr import main as jaxsvr_main
from jaxsvr.errors import InputError
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.runtime import cli


def test_enough_cases():
    assert len(CASES) + len(READER_CASES) >= 45
    assert len({c.id for c in CASES} | {c[0] for c in READER_CASES}) == len(CASES) + len(
        READER_CASES
    )


# The cases that keep the whole command-line contract (module docstring): each command's
# first array or table case and its usage error, two trainer cases with nothing written
# (a new workdir, an existing one's entry), and the config files, read by flag parsing.
SUBPROCESS = {
    "eval-empty-file",
    "eval-threshold-not-a-number",
    "epic-non-utf8",
    "epic100-no-clips",
    "proxy-weights-nan",
    "proxy-non-utf8",
    "main-features-empty",
    "main-workdir-checkpoints-file",
    "main-extra-argument",
    "main-config-syntax-error",
    "main-config-raises-on-import",
    "main-config-get-config-raises",
}
CLI_MAINS = {
    "evaluate": evaluate_cli.main,
    "epic100": relevance_cli.main,
    "proxy": relevance_cli.main,
}


def test_every_command_keeps_subprocess_cases():
    by_command = {c.command for c in CASES if c.id in SUBPROCESS}
    assert by_command == set(COMMANDS)
    assert SUBPROCESS <= {c.id for c in CASES}


def _in_process(cases):
    return [c for c in cases if c.id not in SUBPROCESS]


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.id in SUBPROCESS],
    ids=[c.id for c in CASES if c.id in SUBPROCESS],
)
def test_cli_bad_input(case: Case, tmp_path):
    materialise(tmp_path, case.files)
    before = tree(tmp_path)
    args = [a.replace("{d}", str(tmp_path)) for a in case.args]
    r = subprocess.run(
        [sys.executable, *COMMANDS[case.command], *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=cpu_env(),
    )
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(errors) == 1, r.stderr[-3000:]
    for want in case.says:
        assert want.replace("{d}", str(tmp_path)) in errors[0], errors[0]
    if not case.command.startswith("main"):  # absl logs to stderr; the CLIs print nothing else
        assert r.stderr.strip() == errors[0], r.stderr
        assert r.stdout == ""
    assert tree(tmp_path) == before  # no output, no temporary file, no workdir change


def _main_error(args: list[str]) -> str:
    """What `python -m jaxsvr.main --config=configs/epic_jpose.py:runlocal ARGS` prints
    after `error: ` for a bad input found in its job (not by flag parsing): the first line
    of the InputError (or FileNotFoundError) that `jaxsvr.main.run_job` raises."""
    overrides, where = {}, None
    for arg in args:
        key, _, value = arg.removeprefix("--").partition("=")
        if key == "workdir":
            where = value
        else:  # the cases' values are strings (paths, names)
            overrides[key.removeprefix("config.").replace(".", "__")] = value
    config = configs.from_file("configs/epic_jpose.py:runlocal", **overrides)
    with pytest.raises((InputError, FileNotFoundError)) as e:
        jaxsvr_main.run_job(config, where)
    return str(e.value).splitlines()[0]


@pytest.mark.parametrize("case", _in_process(CASES), ids=[c.id for c in _in_process(CASES)])
def test_bad_input_in_process(case: Case, tmp_path, capsys, caplog):
    materialise(tmp_path, case.files)
    before = tree(tmp_path)
    args = [a.replace("{d}", str(tmp_path)) for a in case.args]
    if case.command == "main":
        line = _main_error(args)
    else:
        argv = [*COMMANDS[case.command][2:], *args]  # after `-m jaxsvr.relevance`
        with caplog.at_level(logging.INFO), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                code = cli.run(CLI_MAINS[case.command], argv)
            except SystemExit as e:  # argparse's usage errors (cli.ArgumentParser)
                code = e.code
        out, err = capsys.readouterr()
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2, err
        assert len(errors) == 1 and err.strip() == errors[0], err  # nothing else
        assert out == "" and not caplog.records, (out, caplog.records)
        assert not [w for w in caught if not issubclass(w.category, DeprecationWarning)]
        line = errors[0]
    for want in case.says:
        assert want.replace("{d}", str(tmp_path)) in line, line
    assert tree(tmp_path) == before  # no output, no temporary file, no workdir change
