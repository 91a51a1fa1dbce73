"""The NumPy engine's compiled kernel: a block's statistics in two C passes around the sort.

`rank_kernel.c` (beside this file) is built by `pip install` as an optional extension,
`jaxsvr.evaluation._rank_kernel`, and loaded here through ctypes (no Python API; ctypes
releases the GIL, so the engine's threads rank blocks side by side). Where it was not
built (no C compiler at install time, a source tree on `PYTHONPATH`), or where
`JAXSVR_COMPILED_KERNEL=0` is set, `load()` gives None and the engine runs its NumPy
passes: the same statistics bit for bit (tested), more slowly
(docs/benchmarks.md#evaluation).

A block goes through the kernel as (text-to-video blocks, transposed views of S and R,
copied into rows first by `jaxsvr_transposed`, `copy_columns`):

1. `jaxsvr_build`: 32-bit keys (the 32-bit path's, `narrow_keys`, offset per row) and the
   rows' relevant entries with a code for each distinct gain;
2. NumPy's row sort of the keys (its SIMD sort);
3. `jaxsvr_stats`: every `QueryStats` field from the flagged positions, summed in NumPy's
   order.

`block_stats` returns None for the blocks the kernel leaves to the NumPy passes: a row
whose keys span 2^31 values or more (similarities of mixed sign beyond about +-1), or more
than 255 distinct gains in the block (caption-proxy relevance); the engine ranks those as
before. Example:

  kernel = compiled_kernel.load()
  if kernel is not None:
      stats = compiled_kernel.block_stats(kernel, s, r, 0.5, compiled_kernel.Scratch(s.size))
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import logging
import os
from pathlib import Path

import numpy as np

from jaxsvr.evaluation.query_stats import cumulative_discounts, discounts

VERSION = 3  # KERNEL_VERSION of rank_kernel.c
_GAIN_SLOTS = 4096
_FLOATS = ("dcg", "dcg_exp", "dcg_nocut", "idcg", "idcg_exp", "ap_graded", "ap_binary")
_INTS = ("n_rel", "n_one", "n_pos", "first_pos", "last_pos")
_P, _I64, _F64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
_log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """The built kernel, or None (not built, not loadable, another version, or turned off
    by JAXSVR_COMPILED_KERNEL=0, read at the first call); the reason is logged once."""
    if os.environ.get("JAXSVR_COMPILED_KERNEL", "1") == "0":
        _log.info("compiled ranking kernel off (JAXSVR_COMPILED_KERNEL=0): NumPy passes")
        return None
    here = Path(__file__).resolve().parent
    built = [here / f"_rank_kernel{s}" for s in importlib.machinery.EXTENSION_SUFFIXES]
    built = [path for path in built if path.is_file()]
    if not built:
        _log.info("compiled ranking kernel not built (pip install -e . builds it): NumPy passes")
        return None
    try:
        lib = ctypes.CDLL(str(built[0]))
        lib.jaxsvr_rank_kernel_version.restype = _I64
    except (OSError, AttributeError) as e:  # not loadable here, or not the kernel
        _log.warning("%s does not load (%s): rebuild it with pip install -e . (NumPy passes)",
                     built[0], e)  # fmt: skip
        return None
    if lib.jaxsvr_rank_kernel_version() != VERSION:
        _log.warning("%s is out of date: rebuild it with pip install -e . (NumPy passes)", built[0])
        return None
    for name in ("jaxsvr_build", "jaxsvr_stats", "jaxsvr_set_simd"):
        getattr(lib, name).restype = _I64
    lib.jaxsvr_set_simd.argtypes = [_I64]
    lib.jaxsvr_transposed.restype = None
    lib.jaxsvr_transposed.argtypes = [_P, _I64, _I64, _I64, _P]
    lib.jaxsvr_build.argtypes = [_P, _P, _I64, _I64] + [_P] * 7
    lib.jaxsvr_stats.argtypes = [_P, _I64, _I64] + [_P] * 6 + [_I64, _I64, _F64] + [_P] * 4
    return lib


def required(compiled: bool | None) -> ctypes.CDLL | None:
    """The kernel an engine call uses: `compiled` None takes it where built, False never,
    True insists (RuntimeError where it is not built)."""
    if compiled is False:
        return None
    lib = load()
    if lib is None and compiled:
        raise RuntimeError(
            "the compiled ranking kernel is not available: reinstall jaxsvr with a C compiler "
            "(pip install -e .) and leave JAXSVR_COMPILED_KERNEL unset"
        )
    return lib


class Scratch:
    """One thread's buffers for blocks of up to `size` items, reused across blocks (fresh
    large temporaries per block would fault in again)."""

    def __init__(self, size: int):
        self.size = size
        self.s, self.r = np.empty(size, np.float32), np.empty(size, np.float32)
        self.keys = np.empty(size, np.uint32)
        self.rk, self.rg = np.empty(size, np.uint32), np.empty(size, np.uint32)
        self.rc = np.empty(size, np.uint8)
        self.table, self.codes = np.empty(_GAIN_SLOTS, np.uint32), np.empty(_GAIN_SLOTS, np.uint8)
        self.per_query(0)
        self.refused = 0  # the last block's build status where it was left (`many_gains`)

    def per_query(self, n: int) -> None:
        """Room for the per-query arrays of n queries (grown as blocks need)."""
        if n and n <= len(self.row_ptr) - 1:
            return
        self.row_ptr = np.empty(n + 1, np.int64)
        self.out_f = np.empty((n, len(_FLOATS)))
        self.out_i = np.empty((n, len(_INTS) + 1), np.int64)

    def rows(self, n: int, n_items: int) -> tuple[np.ndarray, np.ndarray]:
        """[n, n_items] float32 buffers for a block copied from a transposed view."""
        return tuple(a[: n * n_items].reshape(n, n_items) for a in (self.s, self.r))


def float32(s: np.ndarray, r: np.ndarray) -> bool:
    """Whether both are native float32, the only arrays the kernel reads."""
    return s.dtype == np.float32 and r.dtype == np.float32


def in_place(s: np.ndarray, r: np.ndarray) -> bool:
    """Whether the kernel reads a block where it lies: rows contiguous and aligned (other
    blocks are copied into `Scratch.rows` first)."""
    return all(a.flags.c_contiguous and a.flags.aligned for a in (s, r))


def copy_columns(lib: ctypes.CDLL, src: np.ndarray, out: np.ndarray) -> bool:
    """out = src where src [n, m] is a stripe of n columns of a row-major float32 matrix (a
    transposed view: text-to-video blocks), copied by the kernel's register transposes;
    False, and nothing written, for any other layout."""
    step = src.itemsize
    columns = src.strides[0] == step and src.strides[1] % step == 0 and src.strides[1] > 0
    if not (columns and src.dtype == np.float32 and src.flags.aligned):
        return False
    if out.shape != src.shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError("copy_columns writes C-contiguous float32 of the source's shape")
    lib.jaxsvr_transposed(src.ctypes.data, src.strides[1] // step, *src.shape, out.ctypes.data)
    return True


def many_gains(scratch: Scratch) -> bool:
    """Whether the last block `block_stats` left to the NumPy passes held more than 255
    distinct gains (continuous relevance: later blocks are likely to, too)."""
    return scratch.refused == -2


def block_stats(
    lib: ctypes.CDLL, s: np.ndarray, r: np.ndarray, threshold: float, scratch: Scratch
) -> dict | None:
    """The QueryStats fields of a block's rows, or None where the kernel leaves the block to
    the NumPy passes.

    Args:
      lib: `load()`.
      s, r: [n, n_items] float32 similarities (finite) and relevance, `in_place`.
      threshold: relevance of an instance-metric positive, compared in float32 as the
        NumPy passes compare it.
      scratch: the thread's buffers; n * n_items <= scratch.size.
    """
    n, n_items = s.shape
    if not s.size:  # no items (or no queries): the NumPy passes say what they say
        return None
    if not (float32(s, r) and in_place(s, r)) or s.size > scratch.size:
        raise ValueError(
            f"blocks go to the kernel as native float32 in place, within {scratch.size} items"
        )
    scratch.per_query(n)
    keys = scratch.keys[: s.size].reshape(n, n_items)
    n_codes = lib.jaxsvr_build(
        s.ctypes.data, r.ctypes.data, n, n_items, keys.ctypes.data,
        *(a.ctypes.data for a in (scratch.rk, scratch.rg, scratch.rc, scratch.row_ptr)),
        scratch.table.ctypes.data, scratch.codes.ctypes.data,
    )  # fmt: skip
    if n_codes == -3:
        raise MemoryError("the compiled ranking kernel could not allocate a row's positions")
    scratch.refused = n_codes  # -1: keys too wide, -2: too many gains (`many_gains`)
    if n_codes < 0:  # the NumPy passes
        return None
    keys.sort(axis=1)
    used = np.flatnonzero(scratch.table)
    value = np.zeros(n_codes)
    value[scratch.codes[used]] = scratch.table[used].view(np.float32)
    exp_value = np.exp2(value) - 1.0  # as query_stats: one exp2 per distinct gain
    order = np.argsort(-value, kind="stable")
    out_f, out_i = scratch.out_f[:n], scratch.out_i[:n]
    # Every array the call reads is held by a name until it returns: a pointer taken from a
    # temporary (a table another thread has just evicted from its cache) would dangle.
    disc, cum = discounts(n_items), cumulative_discounts(n_items)
    status = lib.jaxsvr_stats(
        keys.ctypes.data, n, n_items,
        *(a.ctypes.data for a in (scratch.rk, scratch.rc, scratch.row_ptr)),
        value.ctypes.data, exp_value.ctypes.data, order.ctypes.data, n_codes,
        int(threshold == 1), float(np.float32(threshold)),
        disc.ctypes.data, cum.ctypes.data, out_f.ctypes.data, out_i.ctypes.data,
    )  # fmt: skip
    if status < 0:
        raise MemoryError("the compiled ranking kernel could not allocate its per-row tables")
    stats = {name: out_f[:, k].copy() for k, name in enumerate(_FLOATS)}
    stats.update({name: out_i[:, k].copy() for k, name in enumerate(_INTS)})
    stats["tied"] = out_i[:, -1].astype(np.bool_)
    return stats
