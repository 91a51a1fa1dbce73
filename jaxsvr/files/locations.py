"""Where a run's files live: local paths, or URLs every host of a pod can reach.

`locate(text)` turns a config value or flag into a path object with the pathlib API:

- a plain path -> `pathlib.Path`, the **local route**: `.npy` feature stores are
  memory-mapped, the workdir is locked with `flock`, files are renamed into place;
- a URL (`gs://bucket/run`, `s3://`, `az://`, `hf://`: the schemes of `etils.epath`,
  which orbax uses too; and `file://`) -> an `etils.epath.Path`, the **URL route**: every
  read and write goes through the scheme's filesystem (epath's fsspec backend: gcsfs for
  `gs://`, or tf.io.gfile where TensorFlow is installed), never through `os` calls. Files
  are streamed, not copied to local disk first: annotations are read into memory as
  text, a `.npy` store is read into host memory (no memory map over a bucket; a store
  larger than host RAM belongs on a shared filesystem, a local path), and the workdir
  keeps no lock (an object store has none; one run per workdir is the user's promise).

`file://` URLs: epath has no `file://` scheme, so this module registers one
(`FileURL`), served by fsspec's local filesystem through the same epath backend that
serves `gs://` without TensorFlow. A `file://` URL thus takes the URL route on a local
disk, which is how the tests prove that route on one machine (tests/test_locations.py).

`for_orbax(path)` is what orbax is given: a URL of an epath scheme as it is (its
tensorstore drivers read `gs://` natively) and a `file://` URL as the local path it names
(tensorstore's file driver takes paths, not URLs).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import posixpath
import sys

from etils import epath
from etils.epath import backend as epath_backend
from etils.epath import gpath

from jaxsvr.errors import InputError

FILE_SCHEME = "file://"

Location = pathlib.Path | epath.Path  # what `locate` returns


def is_url(path: str | os.PathLike) -> bool:
    """True for `scheme://...` (the URL route), False for a plain path."""
    return "://" in os.fspath(path)


def locate(path: str | os.PathLike) -> Location:
    """A plain path as `pathlib.Path`; a URL as an `etils.epath.Path` of its scheme.

    Raises:
      InputError: a URL whose scheme epath does not know, or whose filesystem package is
        not installed (the message says which to install).
    """
    if isinstance(path, epath.Path) and not isinstance(path, pathlib.Path):
        return path
    text = os.fspath(path)
    if not is_url(text):
        return pathlib.Path(text)
    scheme = text.split("://", 1)[0]
    try:
        located = epath.Path(text)
    except ValueError as e:  # a relative file:// URL
        raise InputError(str(e)) from None
    except KeyError:
        raise InputError(
            f"{text}: unknown URL scheme {scheme}:// (known: file:///abs/path, gs://, s3://, "
            "az://, hf://; or give a local path)"
        ) from None
    package = FILESYSTEMS.get(scheme)
    if package and not _installed(package) and not _installed("tensorflow"):
        extra = " (or pip install 'jaxsvr[gcs]')" if scheme == "gs" else ""
        raise InputError(
            f"{text}: reading {scheme}:// URLs needs the {package} package: pip install "
            f"{package}{extra}"
        )
    return located


# The fsspec filesystem package each scheme needs (tf.io.gfile serves them all where
# TensorFlow is installed, and epath then prefers it).
FILESYSTEMS = {"gs": "gcsfs", "s3": "s3fs", "az": "adlfs", "hf": "huggingface_hub"}


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def for_orbax(path: Location) -> Location:
    """The path to give orbax: an absolute local path, or a URL its tensorstore drivers
    read (`gs://`...)."""
    if isinstance(path, FileURL):
        return pathlib.Path(path.local)
    return path.absolute() if isinstance(path, pathlib.Path) else path


def local_file(path: Location) -> str | None:
    """The local file system path of a local path, else None (memory maps need one)."""
    return os.fspath(path) if isinstance(path, pathlib.Path) else None


@epath.register_path_cls(FILE_SCHEME)
class FileURL(gpath.PosixGPath):
    """`file:///abs/path` as an epath path served by fsspec's local filesystem.

    Its parts are those of the local path; it prints, and is given to the filesystem,
    as the URL.
    """

    if sys.version_info < (3, 12):

        def __new__(cls, *parts):
            return super().__new__(cls, *_strip(parts))

    else:

        def __init__(self, *parts):
            super().__init__(*_strip(parts))

    @property
    def local(self) -> str:
        """The local path this URL names."""
        return posixpath.join(*self.parts) if self.parts else "/"

    @property
    def _uri_scheme(self) -> str:
        return "file"

    @property
    def _backend(self):
        return epath_backend.fsspec_backend

    @property
    def _path_str(self) -> str:
        return FILE_SCHEME + self.local


def _strip(parts) -> tuple:
    """The parts of the local path a `file://` URL names (`file:///a/b` -> `/a/b`)."""
    if parts and isinstance(parts[0], str) and parts[0].startswith(FILE_SCHEME):
        local = parts[0][len(FILE_SCHEME) :]
        if not local.startswith("/"):  # `locate` makes it an InputError
            raise ValueError(
                f"{parts[0]}: a file:// URL names an absolute path (file:///abs/path); "
                "for a relative path drop the file:// prefix"
            )
        return (local, *parts[1:])
    return parts
