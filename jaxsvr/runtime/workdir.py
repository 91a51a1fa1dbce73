"""The run folder (`--workdir`): checked before a run starts, locked while it writes, and
files written into it whole with the usual permissions.

- `check(path)`: a pure check, before data is loaded: the path is not empty, is a folder
  or can become one (not a file, not under a file), and accepts new files. Nothing is
  created; a failing check is one `InputError` line, so a rejected run leaves the
  filesystem as it found it. In an existing folder, the entries a run keeps there
  (`checkpoints/`, `best/`, `metrics.jsonl`, ...: `ENTRIES`) must be of their kind.
- `Workdir.open()`: called once every check passed, just before the first write: creates
  the folder and takes an exclusive `flock` on `WORKDIR/.lock`, which holds the pid and host
  of the run. A second run on the same folder stops with an `InputError` naming that pid.
  The kernel drops the lock when the process ends in any way (SIGKILL included), so a
  killed run can be resumed at once; the `.lock` file itself stays (removing it would let
  a third run lock a fresh file while the second holds the old one). Only process 0 of a
  multi-host run creates and locks the folder; the other processes join it (they write
  only their parts of the checkpoints, which orbax coordinates).
- `atomic_write(path, write)`: a temporary file in the same folder, renamed into place,
  with mode 0666 minus the umask as `open()` gives (not the 0600 of `tempfile.mkstemp`).

A URL workdir (`gs://bucket/run`, `file:///...`: `jaxsvr.files.locations`) takes the same
checks through its filesystem, except that nothing probes whether it accepts files (the
first write says so) and nothing locks it: object stores have no locks, so one run per
URL workdir is the user's promise (logged when the run opens it). Its files are written
under a temporary name and renamed into place too.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from jaxsvr.errors import InputError
from jaxsvr.files import locations

LOCK_NAME = ".lock"


def check(path: str | os.PathLike | None) -> locations.Location:
    """Returns `path` as a Path (an epath for a URL) if a run can write there; else raises
    InputError.

    Nothing is created: the nearest existing folder on the path is asked to take an
    unnamed temporary file (O_TMPFILE where the filesystem has it), which leaves no entry
    behind.
    """
    if path is None or str(path).strip() == "":
        raise InputError("--workdir is empty: name a folder for the run's outputs")
    path = locations.locate(path)
    if locations.local_file(path) is None:
        return _check_url(path)
    existing = path
    while True:
        try:
            is_dir = existing.is_dir()
            found = is_dir or os.path.lexists(existing)
        except OSError as e:  # e.g. a parent folder without search permission
            raise InputError(f"workdir {path}: cannot look at {existing} ({e.strerror})") from None
        if found:
            break
        existing = existing.parent
    if not is_dir:
        if existing == path:
            what = "a broken symbolic link" if not existing.exists() else "a file"
            raise InputError(f"workdir {path} is {what}, not a folder: pick another --workdir")
        raise InputError(
            f"workdir {path} lies under {existing}, which is a file: pick another --workdir"
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        where = "" if existing == path else f" (its nearest existing folder {existing})"
        raise InputError(
            f"workdir {path} is not writable{where}: {e.strerror or e}; fix its permissions "
            "or pick another --workdir"
        ) from None
    if existing == path:
        _check_entries(path)
    return path


# What a run keeps in its folder, and whether each is a folder (True) or a file (False).
ENTRIES = {
    "checkpoints": True,
    "best": True,
    "unusable": True,
    "tensorboard": True,
    "metrics.jsonl": False,
    "metrics.json": False,
    "config.json": False,
    "vocab.json": False,
    ".lock": False,
}


def _check_url(path):
    """`check` for a URL workdir (see the module docstring)."""
    try:
        if path.exists() and not path.is_dir():
            raise InputError(f"workdir {path} is a file, not a folder: pick another --workdir")
        if path.is_dir():
            _check_entries(path)
    except OSError as e:
        raise InputError(f"workdir {path}: cannot look at it ({e.strerror or e})") from None
    return path


def _check_entries(path) -> None:
    """A run's own entries in an existing workdir must be of their kind (a `checkpoints`
    file or a `metrics.jsonl` folder would fail the run midway, after it wrote)."""
    local = locations.local_file(path) is not None
    for name, folder in ENTRIES.items():
        entry = path / name
        found = os.path.lexists(entry) if local else entry.exists()
        if found and entry.is_dir() != folder:
            want, got = ("folder", "file") if folder else ("file", "folder")
            if not entry.exists():
                got = "broken symbolic link"
            raise InputError(
                f"workdir {path}: {name} is a {got}, where a run keeps a {want}: move it "
                "away or pick another --workdir"
            )


class Workdir:
    """The run folder, opened (created and locked) by process 0 once the run starts.

    Args:
      path: the folder; checked at once with `check`.
      lead: False on processes other than 0: `open` creates and locks nothing.
    """

    def __init__(self, path: str | os.PathLike | None, *, lead: bool = True) -> None:
        self.path = check(path)
        self.lead = lead
        self._fd: int | None = None

    def open(self) -> Path:
        """Creates the folder and takes its lock; returns the folder.

        Raises:
          InputError: another live process holds the lock (its pid is named), or the
            folder cannot be created.
        """
        if not self.lead or self._fd is not None:
            return self.path
        if locations.local_file(self.path) is None:
            return self._open_url()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise InputError(
                f"cannot create workdir {self.path}: {e.strerror or e}; pick another --workdir"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise InputError(f"cannot lock workdir {self.path}: {e.strerror}") from None
            who = f"pid {' on '.join(holder[:2])}" if holder else "pid not yet written"
            raise InputError(
                f"workdir {self.path} is in use by another run ({who}): wait for it to "
                "finish or stop it, or pick another --workdir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self.path

    def _open_url(self):
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(
                f"cannot create workdir {self.path}: {e.strerror or e}; pick another --workdir"
            ) from None
        logging.warning(
            "workdir %s is a URL: it is not locked (object stores have no locks), so run one "
            "job at a time in it",
            self.path,
        )
        return self.path

    def close(self) -> None:
        """Releases the lock (the `.lock` file stays)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Workdir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def file_mode() -> int:
    """0666 minus the process umask: the mode `open()` gives a new file."""
    return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask sets it, for every thread)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Writes `path` whole: `write(f)` fills a temporary file in the same folder, which
    then replaces `path` with mode `file_mode()`. On any failure the temporary is removed
    and `path` is left as it was."""
    path = locations.locate(path)
    if locations.local_file(path) is None:
        return _atomic_write_url(path, write)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _atomic_write_url(path, write: Callable[[BinaryIO], object]) -> None:
    """`atomic_write` through a URL's filesystem (a bucket makes an object whole when its
    upload ends; the rename makes a `file://` file appear whole too)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with tmp.open("wb") as f:
            write(f)
        tmp.replace(path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """`atomic_write` of `data`."""
    atomic_write(path, lambda f: f.write(data))


def write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write` of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))
