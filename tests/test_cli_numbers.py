"""Every numeric flag of every command line (issue 28, class E): NaN, infinities, values
out of range and non-numbers are one `error:` line naming the flag, exit code 2, before
anything is read or written (`jaxsvr.runtime.cli.number`). `launch/local.py`'s flags:
`test_launchers.py`."""

from __future__ import annotations

import pytest

from jaxsvr import evaluate, retrieve
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.runtime import cli

# command, the other arguments (files that need not exist: nothing is read), flag, bad values
FLAGS = [
    (evaluate, ["--similarity", "s.npy", "--relevance", "r.npy"], "--threshold", ["0", "1.5"]),
    (retrieve, ["--workdir", "w", "--query", "cut"], "--top", ["0", "-3", "2.5", "1e3"]),
    (relevance_cli, ["proxy", "--proxy", "bow", "--captions", "c", "--out", "o"], "--rho", ["0"]),
    (
        relevance_cli,
        ["proxy", "--proxy", "met", "--captions", "c", "--out", "o"],
        "--workers",
        ["0", "65", "1.5"],
    ),
]
NOT_NUMBERS = ["nan", "NaN", "inf", "-inf", "1e400", "abc", ""]
CASES = [
    pytest.param(command, args, flag, value, id=f"{command.__name__.split('.')[-1]}{flag}={value}")
    for command, args, flag, values in FLAGS
    for value in values + NOT_NUMBERS
] + [
    pytest.param(
        relevance_cli,
        ["proxy", "--proxy", "pos", "--captions", "c", "--out", "o", "--weights", "0.5"],
        "--weights",
        value,
        id=f"relevance--weights=0.5,{value}",
    )
    for value in ["-0.5", *NOT_NUMBERS]
    if value != "-inf"  # argparse reads it as an option there: "expected 2 arguments"
]


@pytest.mark.parametrize("command, args, flag, value", CASES)
def test_bad_number_is_one_error_line(command, args, flag, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [*args, f"{flag}={value}"] if flag != "--weights" else [*args, value]
    with pytest.raises(SystemExit) as exit_info:
        cli.run(command.main, argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exit_info.value.code == 2 and captured.out == "", lines
    assert len(lines) == 1 and lines[0].startswith(f"error: argument {flag}: give "), lines
    assert repr(value) in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written
