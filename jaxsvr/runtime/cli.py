"""Edges shared by the command-line tools: one-line errors, atomic output files.

Every CLI body runs inside `run`: an `InputError` (or a missing file) becomes a single
`error: ...` line on stderr and exit code 2, and output files are written through
`save_npy_atomic`, so a failed run never leaves a half-written file behind.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import arrays
from jaxsvr.runtime import workdir

EXIT_BAD_INPUT = 2


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Runs a CLI body and maps bad input to one stderr line and exit code 2."""
    try:
        return main(argv) or 0
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename:
            message = f"cannot read {e.filename}: {e.strerror}"
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


def log_to_stderr(verbose: bool = False) -> None:
    """The CLIs' log: warnings (and with `verbose` what is loaded) on stderr, one line each
    as `LEVEL message`."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(message)s",
        stream=sys.stderr,
    )


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors as one `error: ...` line (the usage is left to
    --help) and exit code 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def number(
    kind: type[int] | type[float],
    low: float,
    high: float = math.inf,
    *,
    above: bool = False,
) -> Callable[[str], int | float]:
    """An argparse `type` for a numeric flag: an int (`kind=int`: digits only) or a finite
    float from `low` (excluded with `above`) to `high`; anything else, NaN and infinities
    included (NaN passes every `<` test), is argparse's one-line usage error.

    Example: `p.add_argument("--threshold", type=cli.number(float, 0, 1, above=True))`.
    """
    show = (lambda x: f"{int(x)}") if kind is int else (lambda x: f"{x:g}")
    if high == math.inf:
        span = f"{'above' if above else 'at least'} {show(low)}"
    else:
        span = f"in {'(' if above else '['}{show(low)}, {show(high)}]"
    want = f"{'a whole number' if kind is int else 'a finite number'} {span}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        inside = (value > low if above else value >= low) and value <= high
        if not (math.isfinite(value) and inside):
            raise argparse.ArgumentTypeError(f"give {want}, not {text!r}")
        return value

    return parse


def save_npy_atomic(path: str | os.PathLike, array: np.ndarray) -> None:
    """Writes `array` to `path` as .npy via a temporary file in the same folder + rename,
    with the mode a new file gets from `open()` (`jaxsvr.runtime.workdir.atomic_write`)."""
    path = Path(path)
    if path.parent and not path.parent.is_dir():
        state = "is a file" if path.parent.exists() else "does not exist"
        raise InputError(f"output folder {path.parent} {state}: name an existing folder")
    if path.is_dir():
        raise InputError(f"output {path} is a folder: name a .npy file to write")
    try:  # the usual file mode (0666 minus the umask), not mkstemp's 0600
        workdir.atomic_write(path, lambda f: np.save(f, array))
    except OSError as e:  # no write permission, disk full, quota: one line, nothing left
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


def load_npy(
    path: str | os.PathLike,
    what: str,
    *,
    float32: bool = False,
    mmap: bool = False,
    ndim: int | None = None,
) -> np.ndarray:
    """Loads a .npy file without pickle, checked before it is read (`jaxsvr.files.arrays`):
    a missing, empty, non-.npy or corrupt file or a non-real dtype is an InputError; with
    `float32` the result is float32 and finite (values beyond its range are refused); with
    `mmap` a local float32 file is memory-mapped read-only instead of read (no page faults
    of fresh memory: docs/benchmarks.md#evaluation); with `ndim` an array of another number
    of dimensions is an InputError too."""
    return arrays.load_npy(path, what=what, float32=float32, mmap=mmap, ndim=ndim)
