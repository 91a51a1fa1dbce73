"""Trusted pickles, read behind the user's opt-in: any failure is one `InputError` line.

Unpickling runs code from the file, so every reader that calls `load` has been given
`config.data.allow_pickle` (or `--allow-pickle`) by the user first. The public EK-100
retrieval files (the JPoSE data folder, the TBN feature release) are plain pickles of
NumPy arrays and dicts; pandas is not needed to read them.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from jaxsvr.errors import InputError


def load(path: Path) -> object:
    """The unpickled object of `path`; a corrupt or foreign pickle is an InputError."""
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except Exception as e:  # any failure inside a foreign pickle is bad input
        text = str(e).strip().splitlines()
        raise InputError(
            f"{path}: cannot unpickle ({type(e).__name__}: {text[0] if text else ''})"
        ) from None


def real_array(obj: object, path: Path, what: str, ndim: int) -> np.ndarray:
    """`obj` (from a pickle) as an `ndim`-D array of real numbers, else an InputError
    naming `what` in `path`."""
    try:
        array = np.asarray(obj)
    except ValueError:  # ragged lists of rows
        raise InputError(f"{path}: {what} is not a rectangular array") from None
    if array.ndim != ndim or array.dtype.kind not in "biuf":
        raise InputError(
            f"{path}: {what} is a {array.dtype} array of shape {array.shape}; expected a "
            f"{ndim}-D array of real numbers"
        )
    return array
