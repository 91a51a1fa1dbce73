"""Process-wide settings for the command lines that own their process
(`python -m jaxsvr.evaluate`, `python -m jaxsvr.main`).

They act on the whole process, so only a command line calls them; a library user can
apply the same settings to their own process.

- `prefer_avx2_sort()`: on an AMD Zen 4 CPU (AuthenticAMD, family 25, AVX-512) sets
  `NPY_DISABLE_CPU_FEATURES` to NumPy's AVX-512 feature names, so NumPy sorts with its
  AVX2 code: x86-simd-sort's AVX-512 partitioning uses compress stores that Zen 4 runs as
  slow microcode (numpy/x86-simd-sort#6). It must run before NumPy is imported (NumPy
  reads the variable once), and does nothing when the variable is set already, NumPy is
  imported, or `JAXSVR_NUMPY_AVX512=1` asks to keep AVX-512. Zen 5 (family 26) and Intel
  CPUs keep AVX-512, their faster sort. It reads /proc/cpuinfo only;
  `avx2_sort_features()` is its choice for a given environment and CPU (benchmarks use it).
- `keep_freed_memory()`: raises glibc's mmap and trim thresholds (`mallopt`; a no-op
  elsewhere), so the megabytes of temporaries the NumPy engine frees per block of queries
  stay in the process instead of being faulted in again for the next block.
- `blas_threads(n)`: a context manager that limits the OpenBLAS NumPy loaded to n
  threads and restores its count on exit (the streamed evaluation runs one block per
  thread: BLAS threads on top of those oversubscribe the cores). It finds the library
  among the process's mapped files, as threadpoolctl does; with another BLAS (or none
  found) it changes nothing.
- `reexec_with_huge_pages()` (the training command, first thing): restarts the command
  in place (`os.execve`: same pid, arguments and standard streams) with glibc's
  `glibc.malloc.hugetlb=1` tunable, which glibc reads only at start-up. XLA's CPU client
  mallocs each step's temporaries afresh (one 669 MB block for the EPIC ConTra step) and
  glibc maps blocks that large anew each time, so with 4 KiB pages every step faults in
  some 160 k pages (about 0.3 s of system time of a 2 s step); with the tunable glibc asks for
  transparent huge pages (`madvise`), 2 MiB each. (Keeping freed memory in the process
  instead is left to the user: it can double the memory; docs/training.md.) It restarts
  only where that changes something: Linux, glibc 2.35 or later, the kernel's THP mode
  `madvise` (`always` backs large blocks with huge pages already, `never` cannot), the
  tunable not yet set, `JAXSVR_HUGE_PAGES` not set (`0` keeps the default; the restart
  sets `1`, so a process restarts at most once, even where glibc drops the tunable), and
  no debugger or tracer attached.
  `JAXSVR_HUGE_PAGES=reserved` restarts with `glibc.malloc.hugetlb=2` instead, whatever
  the THP mode: glibc then maps its large blocks from the huge pages the administrator
  reserved (`sysctl vm.nr_hugepages=N`; HugeTLB, not transparent huge pages) while they
  last, and from 4 KiB pages after. Freed reserved pages go back to the pool, never to
  the kernel's free lists, so a virtual machine whose balloon reports free memory to its
  host (docs/benchmarks.md#why-contras-steps-alternate) never hands them back: ConTra's
  steps stop alternating between fast and slow. Opt-in, as the pool may be meant for
  other programs; the restart sets `2`. `huge_page_note()` says in the command's log
  how many of the pool's pages are available (from /proc/meminfo,
  `reserved_huge_pages()`), with a warning when none is, or when what
  `JAXSVR_HUGE_PAGES` asked for did not happen. Pools of 8, 40 and 700 pages that ran
  out during a run (ConTra, EPIC and runlocal) fell back to 4 KiB pages, and the runs
  finished.
  `huge_page_environment()` is the environment it restarts with (None when it would
  not), for launchers and benchmarks that start such processes.

What each saves, measured: docs/benchmarks.md#evaluation and
docs/benchmarks.md#training-speed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import re
import sys
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path

VARIABLE = "NPY_DISABLE_CPU_FEATURES"
KEEP = "JAXSVR_NUMPY_AVX512"
# NumPy's names of its AVX-512 code paths: grouped from 2.4 on, per extension before.
AVX512_FEATURES = "X86_V4 AVX512_ICL AVX512_SPR"
AVX512_FEATURES_BEFORE_2_4 = (
    "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
)


def is_zen4(cpuinfo: str) -> bool:
    """Whether /proc/cpuinfo text describes an AMD Zen 4 CPU with AVX-512."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # first processor only
            continue
        fields.setdefault(key.strip(), value.strip())
    return (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == "25"
        and "avx512f" in fields.get("flags", "").split()
    )


def prefer_avx2_sort(cpuinfo: str | None = None) -> bool:
    """Sets NPY_DISABLE_CPU_FEATURES on Zen 4 (see the module docstring); True if it did."""
    if "numpy" in sys.modules:
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    value = avx2_sort_features(os.environ, cpuinfo)
    if value is None:
        return False
    os.environ[VARIABLE] = value
    return True


def avx2_sort_features(environ: Mapping[str, str], cpuinfo: str) -> str | None:
    """The NPY_DISABLE_CPU_FEATURES value `prefer_avx2_sort` sets in a process with
    `environ` on the CPU `cpuinfo` describes; None where it leaves the environment alone
    (the variable set already, the opt-out, not Zen 4)."""
    if environ.get(VARIABLE) or environ.get(KEEP) == "1" or not is_zen4(cpuinfo):
        return None
    return _feature_names()


def _feature_names() -> str:
    """The AVX-512 feature names of the installed NumPy (read from its metadata, without
    importing it; a name NumPy does not dispatch only costs an ImportWarning)."""
    try:
        major, minor = (int(x) for x in metadata.version("numpy").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return AVX512_FEATURES
    return AVX512_FEATURES if (major, minor) >= (2, 4) else AVX512_FEATURES_BEFORE_2_4


HUGE_PAGES = "JAXSVR_HUGE_PAGES"  # "0": keep glibc's default pages
RESERVED = "reserved"  # JAXSVR_HUGE_PAGES=reserved: the pool of reserved huge pages
HUGETLB = "glibc.malloc.hugetlb"
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
HUGETLB_SINCE = (2, 35)  # the first glibc with the tunable


def thp_mode(text: str) -> str:
    """The selected mode ("always", "madvise", "never") of the kernel's THP setting, as
    /sys/kernel/mm/transparent_hugepage/enabled shows it ("always [madvise] never"); ""
    when none is marked."""
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else ""


def huge_page_environment(
    environ: Mapping[str, str],
    mode: str | None = None,
    libc: tuple[str, str] | None = None,
) -> dict[str, str] | None:
    """`environ` with glibc's hugetlb tunable added, or None where it would change nothing
    (see the module docstring). `mode` (the kernel's THP mode) and `libc` (as
    `platform.libc_ver()` gives it) default to this machine's."""
    reserved = environ.get(HUGE_PAGES) == RESERVED
    if (HUGE_PAGES in environ and not reserved) or HUGETLB in environ.get("GLIBC_TUNABLES", ""):
        return None  # the opt-out, a restarted process, or the user's own choice
    name, version = libc if libc is not None else platform.libc_ver()
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    if name != "glibc" or (major, minor) < HUGETLB_SINCE:
        return None
    if not reserved:
        if mode is None:
            try:
                mode = thp_mode(THP_ENABLED.read_text())
            except OSError:
                return None
        if mode != "madvise":
            return None
    value = "2" if reserved else "1"  # also what the restart leaves in JAXSVR_HUGE_PAGES
    tunables = ":".join(filter(None, (environ.get("GLIBC_TUNABLES", ""), f"{HUGETLB}={value}")))
    return {**environ, "GLIBC_TUNABLES": tunables, HUGE_PAGES: value}  # restarted once


def huge_page_note(
    environ: Mapping[str, str], meminfo: str | None = None
) -> tuple[str, str | None]:
    """For the command's log, from the process's `environ` after the restart: a note on
    the reserved pool to append to the process line where glibc is asked for it
    (`glibc.malloc.hugetlb=2` in GLIBC_TUNABLES: "; reserved huge pages: A of T
    available"), and a one-line warning or None. It warns when no reserved page is
    available, and when `JAXSVR_HUGE_PAGES` asked for something that did not happen: a
    value it does not know (any value but `reserved` turns the restart off), `reserved`
    still there (no restart was made), or the restart's `2` without its tunable (glibc
    dropped it)."""
    value = environ.get(HUGE_PAGES)
    asked = f"{HUGETLB}=2" in environ.get("GLIBC_TUNABLES", "").split(":")
    if value not in (None, "0", "1", "2", RESERVED):
        return "", (
            f"{HUGE_PAGES}={value!r} is not one of 0 (glibc's default pages) or {RESERVED} "
            "(the reserved pool): no huge-page restart was made"
        )
    if not asked:
        if value == RESERVED:  # still as the user set it: no restart
            why = "it needs Linux, glibc 2.35 or later, no other glibc.malloc.hugetlb in "
            why += "GLIBC_TUNABLES and no debugger, and the restart must succeed"
            return "", f"{HUGE_PAGES}={RESERVED} is not applied: {why}"
        if value == "2":
            return "", (
                f"{HUGE_PAGES}=2 (restarted for the reserved pool), but glibc.malloc.hugetlb=2 "
                "is not in GLIBC_TUNABLES: the C library dropped it; glibc's default pages"
            )
        return "", None
    pool = reserved_huge_pages(meminfo)
    if pool is None:
        return "", "glibc.malloc.hugetlb=2, but /proc/meminfo shows no huge page pool here"
    total, available = pool
    note = f"; reserved huge pages: {available} of {total} available"
    if available:
        return note, None
    return note, (
        "glibc.malloc.hugetlb=2, but no reserved huge page is available (HugePages_Free "
        "less HugePages_Rsvd in /proc/meminfo): glibc maps large blocks with 4 KiB pages; "
        "reserve some with `sysctl vm.nr_hugepages=N` (ConTra's EPIC step holds about "
        "1070 pages of 2 MiB)"
    )


def reserved_huge_pages(meminfo: str | None = None) -> tuple[int, int] | None:
    """(total, available) reserved huge pages of the default size, from /proc/meminfo
    (or `meminfo`, its text): HugePages_Total, and HugePages_Free less HugePages_Rsvd
    (free pages other mappings have already claimed); None where it is not there (not
    Linux, a kernel without HugeTLB)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    found = dict(re.findall(r"^HugePages_(Total|Free|Rsvd):\s+(\d+)", meminfo, re.MULTILINE))
    if len(found) < 3:
        return None
    return int(found["Total"]), max(0, int(found["Free"]) - int(found["Rsvd"]))


def reexec_with_huge_pages() -> None:
    """Restarts this command with `huge_page_environment()` where that is not None (see
    the module docstring); returns where it is None or the restart fails. Call it first
    thing in a command's `__main__` block: whatever ran before runs again. Not under a
    debugger or tracer (`sys.gettrace()`), which the restart would leave behind."""
    env = huge_page_environment(os.environ)
    argv = getattr(sys, "orig_argv", None)
    if env is None or not argv or sys.gettrace() is not None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    except OSError:
        return


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD = 512 << 20


def keep_freed_memory() -> bool:
    """Keeps freed malloc blocks in the process (see the module docstring); True if the
    C library took both settings (glibc), False elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


# OpenBLAS's thread-count functions under the names its builds export (NumPy's wheels:
# scipy-openblas64 with a prefix and a 64 suffix).
_OPENBLAS_PREFIXES = ("scipy_openblas", "openblas")
_OPENBLAS_SUFFIXES = ("64_", "")


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[bool]:
    """Limits OpenBLAS to `n` threads inside the block (see the module docstring); yields
    whether an OpenBLAS was found. The limit is process-wide while it lasts."""
    functions = _openblas_threads()
    if functions is None:
        yield False
        return
    get, set_ = functions
    before = get()
    set_(n)
    try:
        yield True
    finally:
        set_(before)


@functools.lru_cache(maxsize=1)
def _openblas_threads():
    """(get, set) thread-count functions of the OpenBLAS NumPy loaded, or None."""
    import numpy  # noqa: F401  (loads its BLAS)

    try:
        maps = Path("/proc/self/maps").read_text(errors="replace")
    except OSError:
        return None
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _OPENBLAS_PREFIXES:
            for suffix in _OPENBLAS_SUFFIXES:
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    get.restype, set_.argtypes = ctypes.c_int, (ctypes.c_int,)
                    return get, set_
    return None
