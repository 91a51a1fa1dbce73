"""Edges shared by the command-line tools: one-line errors, atomic output files.

Every CLI body runs inside `run`: an `InputError` (or a missing file) becomes a single
`error: ...` line on stderr and exit code 2, and output files are written through
`save_npy_atomic`, so a failed run never leaves a half-written file behind.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from jaxsvr.errors import InputError

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


def save_npy_atomic(path: str | os.PathLike, array: np.ndarray) -> None:
    """Writes `array` to `path` as .npy via a temporary file in the same folder + rename."""
    path = Path(path)
    if path.parent and not path.parent.is_dir():
        raise InputError(f"output folder {path.parent} does not exist: create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_npy(path: str | os.PathLike, what: str) -> np.ndarray:
    """Loads a .npy file without pickle; a missing or unreadable file is an InputError."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{what} file {path} not found") from None
    except ValueError as e:
        raise InputError(f"{what} file {path} is not a plain numeric .npy array ({e})") from None
