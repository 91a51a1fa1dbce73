"""Safe loading of `.npy` / `.npz` arrays: every problem is one `InputError` line.

Every reader of array files (`jaxsvr.runtime.cli.load_npy` for the evaluation CLI, the feature
store `jaxsvr.inputs.features`) goes through `load_npy` / `NpzArchive` here, which read the
.npy header (`np.lib.format`) and check it before any data is allocated:

- the file is a .npy file at all: an empty file or /dev/null, a zip archive (an .npz
  saved under a .npy name) and anything else without the NumPy magic are named as such;
- the dtype is a real number type (bool, signed / unsigned int, float); complex, string,
  bytes, object (pickle), structured, datetime and timedelta dtypes are refused (complex
  would otherwise be cast silently to its real part);
- shape x itemsize equals the bytes that follow the header, so a header claiming an
  enormous shape (or a truncated file) is refused before it can exhaust memory.

A path may be a URL (`jaxsvr.files.locations`): it is read through its filesystem,
never memory-mapped. Arrays are never unpickled. `to_float32` casts to float32 and checks
finiteness chunk by chunk, naming the first bad row and telling values beyond the float32
range (finite float64 that became inf in the cast) apart from NaN / inf in the file.
"""

from __future__ import annotations

import math
import os
import stat
import zipfile

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import locations

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with members, an empty zip
ACCEPTED_KINDS = "biuf"
ACCEPTED = "bool, int, uint or float"
CHECK_CHUNK_BYTES = 4 << 20  # finiteness is checked about 4 MB of rows at a time
_KIND_NAMES = {
    "c": "complex",
    "U": "a string",
    "S": "a bytes",
    "O": "an object (pickled Python objects)",
    "V": "a structured or void",
    "M": "a datetime",
    "m": "a timedelta",
}


def load_npy(
    path: str | os.PathLike,
    *,
    what: str = "array",
    mmap: bool = False,
    float32: bool = False,
    ndim: int | None = None,
) -> np.ndarray:
    """Loads one .npy file, checked before it is read (see the module docstring).

    Args:
      path: the .npy file.
      what: what the file holds ("similarity", "features"), the first word of errors.
      mmap: memory-map the file read-only instead of reading it (a float32 file then
        costs no RAM until used).
      float32: return float32, checked finite after the cast (`to_float32`).
      ndim: the number of dimensions the array must have (checked on the header).

    Returns:
      The array (a read-only `np.memmap` with `mmap` when no cast was needed).

    Raises:
      InputError: a missing, empty, non-.npy or corrupt file, or a refused dtype.
    """
    path = locations.locate(path)
    size, f = _open(path, what)
    with f:
        head = f.read(len(NPY_MAGIC))
        f.seek(0)
        _check_magic(head, path, what, archive_hint=True)
        dtype, shape, fortran = _read_header(f, path, what)
        if ndim is not None and len(shape) != ndim:
            raise InputError(
                f"{what} {path} is {len(shape)}-D {list(shape)}: expected a {ndim}-D array"
            )
        offset = f.tell()
        _check_size(dtype, shape, size - offset, path, what)
        local = locations.local_file(path)  # a URL is read, not memory-mapped
        if mmap and local is not None and math.prod(shape) > 0:
            order = "F" if fortran else "C"
            array = np.memmap(local, dtype, mode="r", offset=offset, shape=shape, order=order)
        else:
            array = _read_data(f, dtype, shape, fortran, path, what)
    return to_float32(array, path, what) if float32 else array


class NpzArchive:
    """An .npz archive whose members load with the same checks as `load_npy`.

    Use as a context manager: `with NpzArchive(path) as npz: npz.load(npz.names[0])`.
    """

    def __init__(self, path: str | os.PathLike, *, what: str = "array"):
        self.path, self.what = locations.locate(path), what
        _, f = _open(self.path, what)
        with f:
            head = f.read(len(NPY_MAGIC))
        if head.startswith(NPY_MAGIC):
            raise InputError(
                f"{self.path}: holds a single .npy array, not an .npz archive: rename it to .npy"
            )
        if not head.startswith(ZIP_MAGICS[0][:2]):
            raise InputError(
                f"{what} file {self.path} is {_empty_or_not(head)} .npz archive "
                "(no zip header): save it with np.savez"
            )
        self._file = self.path.open("rb")  # zipfile seeks in it: local file or URL alike
        try:
            self._zip = zipfile.ZipFile(self._file)
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            self._file.close()
            raise InputError(
                f"{what} file {self.path} is not a readable .npz archive ({_first_line(e)}): "
                "save it again with np.savez"
            ) from None
        # np.savez stores array `name` as member `name.npy`.
        self.names = [n[: -len(".npy")] for n in self._zip.namelist() if n.endswith(".npy")]

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc) -> None:
        self._zip.close()
        self._file.close()

    def load(self, name: str, *, float32: bool = False) -> np.ndarray:
        """The member array `name`, checked like `load_npy` (dtype, header vs size)."""
        if name not in self.names:
            raise InputError(f"{self.path}: no array '{name}' (arrays: {', '.join(self.names)})")
        where = f"{self.path} (array '{name}')"
        info = self._zip.getinfo(f"{name}.npy")
        try:
            with self._zip.open(info) as f:
                _check_magic(f.read(len(NPY_MAGIC)), where, self.what, archive_hint=False)
                f.seek(0)
                dtype, shape, fortran = _read_header(f, where, self.what)
                _check_size(dtype, shape, info.file_size - f.tell(), where, self.what)
                array = _read_data(f, dtype, shape, fortran, where, self.what)
        except (zipfile.BadZipFile, OSError, EOFError) as e:  # bad CRC, truncated member
            raise InputError(
                f"{self.what} file {where} is unreadable ({_first_line(e)}): save it again "
                "with np.savez"
            ) from None
        return to_float32(array, where, self.what) if float32 else array


def to_float32(
    array: np.ndarray, where: str | os.PathLike, what: str, *, chunk_bytes: int | None = None
) -> np.ndarray:
    """`array` as float32 (no copy when it already is), raising on the first row with NaN
    or inf; values that were finite but beyond the float32 range are reported as such.

    Args:
      array: a real-valued array (after `load_npy`, or any loaded array).
      where: the file (and member) it came from, named in errors.
      what: what it holds, the first word of errors.
      chunk_bytes: bytes of rows checked at a time (default `CHECK_CHUNK_BYTES`).
    """
    if array.dtype.kind not in ACCEPTED_KINDS:
        raise InputError(_dtype_message(array.dtype, where, what))
    out = array
    if array.dtype != np.float32:
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(array, dtype=np.float32)
    # Rows of a 0-d array: itself.
    rows, source = (out.reshape(1), array.reshape(1)) if out.ndim == 0 else (out, array)
    chunk = max(1, (chunk_bytes or CHECK_CHUNK_BYTES) // max(1, rows[:1].nbytes))
    for start in range(0, len(rows), chunk):
        block = np.asarray(rows[start : start + chunk])
        ok = np.isfinite(block).reshape(len(block), -1).all(axis=1)
        if not ok.all():
            row = start + int(np.argmin(ok))
            if out is not array and np.isfinite(np.asarray(source[row])).all():
                raise InputError(
                    f"{what} file {where}: row {row} (0-based) has values that exceed the "
                    f"float32 range (|x| > {float(np.finfo(np.float32).max):.3g}) and would "
                    "become inf: rescale them"
                )
            raise InputError(
                f"{what} file {where}: row {row} (0-based) holds non-finite values (NaN or "
                "inf): fix or drop that row"
            )
    return out


def _open(path: locations.Location, what: str):
    """(size, the file opened for reading); a missing, non-regular or unreadable file is
    one line."""
    if locations.local_file(path) is None:
        return _open_url(path, what)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} file {path} not found") from None
    except OSError as e:
        raise InputError(f"cannot read {what} file {path}: {e.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{what} file {path} is a folder, not a file: name the file")
    if not stat.S_ISREG(info.st_mode):  # /dev/null, a pipe: nothing with a size to check against
        raise InputError(
            f"{what} file {path} is empty or not a regular file: expected a .npy array "
            "saved with np.save"
        )
    try:
        return info.st_size, path.open("rb")
    except OSError as e:
        raise InputError(f"cannot read {what} file {path}: {e.strerror}") from None


def _open_url(path, what: str):
    """`_open` through the URL's filesystem (`jaxsvr.files.locations`)."""
    try:
        if path.is_dir():
            raise InputError(f"{what} file {path} is a folder, not a file: name the file")
        if not path.exists():
            raise InputError(f"{what} file {path} not found")
        return path.stat().length, path.open("rb")
    except OSError as e:
        raise InputError(f"cannot read {what} file {path}: {e.strerror or e}") from None


def _check_magic(head: bytes, where, what: str, *, archive_hint: bool) -> None:
    if head.startswith(NPY_MAGIC):
        return
    if archive_hint and any(head.startswith(m) for m in ZIP_MAGICS):
        raise InputError(
            f"{what} file {where} is an .npz archive (zip) under a .npy name: save the "
            "array with np.save, or rename the file to .npz where .npz is accepted"
        )
    raise InputError(
        f"{what} file {where} is {_empty_or_not(head)} .npy file (no NumPy header): "
        "save the array with np.save"
    )


def _empty_or_not(head: bytes) -> str:
    return "empty, not a" if not head else "not a"


def _read_header(f, where, what: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    """(dtype, shape, fortran_order) from the header; leaves `f` at the first data byte."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:  # 3.0 only differs for utf-8 field names of structured dtypes, refused anyway
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, EOFError, TypeError, SyntaxError) as e:
        raise InputError(
            f"{what} file {where} has a corrupt .npy header ({_first_line(e)}): save the "
            "array again with np.save"
        ) from None
    if dtype.kind not in ACCEPTED_KINDS or dtype.fields is not None or dtype.subdtype:
        raise InputError(_dtype_message(dtype, where, what))
    return dtype, tuple(int(n) for n in shape), bool(fortran)


def _dtype_message(dtype: np.dtype, where, what: str) -> str:
    kind = "a structured" if dtype.fields is not None else _KIND_NAMES.get(dtype.kind, "a")
    return (
        f"{what} file {where} is not a plain numeric array: it has {kind} dtype ({dtype}), "
        f"only real numbers ({ACCEPTED}) are accepted; save the array as float32"
    )


def _check_size(dtype: np.dtype, shape: tuple[int, ...], left: int, where, what: str) -> None:
    """The data the header promises must be exactly the bytes left (checked before any
    allocation, so a forged enormous shape fails here, not with a MemoryError)."""
    need = math.prod(shape) * dtype.itemsize
    if need != left:
        raise InputError(
            f"{what} file {where}: header says shape {shape} of {dtype} ({need} bytes) but "
            f"{left} bytes follow it: the file is truncated or corrupt; save it again"
        )


def _read_data(f, dtype: np.dtype, shape: tuple[int, ...], fortran: bool, where, what: str):
    array = np.empty(shape, dtype, order="F" if fortran else "C")
    view = memoryview(array.reshape(-1, order="A").view(np.uint8))
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])
        if not n:
            raise InputError(
                f"{what} file {where} ends after {done} of {len(view)} data bytes: the file "
                "is truncated; save it again"
            )
        done += n
    return array


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
