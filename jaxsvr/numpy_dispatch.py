"""NumPy's sort on AMD Zen 4: let jaxsvr's own processes use its AVX2 code path.

NumPy sorts with x86-simd-sort. Its AVX-512 path partitions with memory-destination
compress stores (`vpcompressd`/`vpcompressq`), which Zen 4 runs as slow microcode
(numpy/x86-simd-sort#6): on our 2-core AMD EPYC (Zen 4) an int64 row sort takes 2.5x,
and the whole 9668 x 3842 evaluation ~2x, as long as with NumPy's AVX2 path. NumPy picks
its code paths once, when it is imported, from `NPY_DISABLE_CPU_FEATURES`.

`prefer_avx2_sort()` is called by `python -m jaxsvr.evaluate` before anything imports
NumPy. On a Zen 4 CPU (AuthenticAMD, family 25, AVX-512) it sets that variable to NumPy's
AVX-512 feature names, unless the variable is set already, NumPy is already imported, or
`JAXSVR_NUMPY_AVX512=1` asks to keep AVX-512. Zen 5 (family 26) and Intel CPUs are left
alone: their AVX-512 sort is the faster one. In your own process, set the variable in the
environment before starting Python (docs/benchmarks.md). It reads /proc/cpuinfo only.
"""

from __future__ import annotations

import os
import sys
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
    if "numpy" in sys.modules or os.environ.get(VARIABLE) or os.environ.get(KEEP) == "1":
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    if not is_zen4(cpuinfo):
        return False
    os.environ[VARIABLE] = _feature_names()
    return True


def _feature_names() -> str:
    """The AVX-512 feature names of the installed NumPy (read from its metadata, without
    importing it; a name NumPy does not dispatch only costs an ImportWarning)."""
    try:
        major, minor = (int(x) for x in metadata.version("numpy").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return AVX512_FEATURES
    return AVX512_FEATURES if (major, minor) >= (2, 4) else AVX512_FEATURES_BEFORE_2_4
