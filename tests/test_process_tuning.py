"""NumPy's AVX2 sort on AMD Zen 4 (`jaxsvr.runtime.process_tuning`): which CPUs, and the rules."""

import os
import subprocess
import sys

import pytest

from jaxsvr.runtime import process_tuning

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse2 avx2 avx512f avx512dq avx512bw

processor\t: 1
vendor_id\t: AuthenticAMD
"""


@pytest.mark.parametrize(
    "cpuinfo, zen4",
    [
        (ZEN4, True),
        (ZEN4.replace("avx512f avx512dq avx512bw", ""), False),  # Zen 3: family 25, no AVX-512
        (ZEN4.replace("cpu family\t: 25", "cpu family\t: 26"), False),  # Zen 5
        (ZEN4.replace("AuthenticAMD", "GenuineIntel").replace(": 25", ": 6"), False),
        ("", False),
    ],
)
def test_is_zen4(cpuinfo, zen4):
    assert process_tuning.is_zen4(cpuinfo) is zen4


_PROBE = """
import os, sys, warnings
warnings.simplefilter("error")  # an unknown feature name would be an ImportWarning
from jaxsvr.runtime import process_tuning
done = process_tuning.prefer_avx2_sort(sys.argv[1])
import numpy as np
np.sort(np.arange(10))
print(done, os.environ.get("NPY_DISABLE_CPU_FEATURES", ""))
"""


def _probe(cpuinfo: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("NPY_DISABLE_CPU_FEATURES",)}
    environ.pop(process_tuning.KEEP, None)
    environ.update(env)
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, cpuinfo],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_sets_the_variable_on_zen4_only_and_numpy_accepts_the_names():
    # The names match the installed NumPy: importing it raises no ImportWarning.
    assert _probe(ZEN4) == f"True {process_tuning._feature_names()}"
    assert _probe(ZEN4.replace("AuthenticAMD", "GenuineIntel")) == "False"


def test_keeps_a_users_setting_and_the_opt_out():
    assert _probe(ZEN4, NPY_DISABLE_CPU_FEATURES="X86_V4") == "False X86_V4"
    assert _probe(ZEN4, JAXSVR_NUMPY_AVX512="1") == "False"


def test_no_effect_once_numpy_is_imported():
    assert "numpy" in sys.modules  # pytest imported it: too late to choose code paths
    assert process_tuning.prefer_avx2_sort(ZEN4) is False


def test_keep_freed_memory_takes_on_glibc():
    import platform

    took = process_tuning.keep_freed_memory()
    assert took is (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")


_IMPORTED = """
import os
import jaxsvr.evaluate  # imported as a module: the process is not the command's
print(repr(os.environ.get("NPY_DISABLE_CPU_FEATURES", "")))
"""
_COMMAND = """
import os, runpy, sys
sys.argv = ["evaluate", "--help"]
try:
    runpy.run_module("jaxsvr.evaluate", run_name="__main__")
except SystemExit:
    pass
print(repr(os.environ.get("NPY_DISABLE_CPU_FEATURES", "")))
"""


def test_only_the_command_line_changes_its_process():
    """Importing jaxsvr.evaluate leaves the environment alone; running it as the command
    sets NumPy's variable exactly on Zen 4."""
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    env.pop(process_tuning.KEEP, None)
    zen4 = process_tuning.is_zen4(Path("/proc/cpuinfo").read_text())
    for script, want in ((_IMPORTED, ""), (_COMMAND, process_tuning._feature_names() * zen4)):
        r = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == repr(want)


@pytest.mark.parametrize(
    "text, mode",
    [("always [madvise] never", "madvise"), ("[always] madvise never", "always"), ("", "")],
)
def test_thp_mode(text, mode):
    assert process_tuning.thp_mode(text) == mode


GLIBC = ("glibc", "2.36")


@pytest.mark.parametrize(
    "environ, mode, libc, tunables",
    [
        ({}, "madvise", GLIBC, "glibc.malloc.hugetlb=1"),
        (  # a user's tunables are kept, ours appended
            {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"},
            "madvise",
            GLIBC,
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1",
        ),
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "madvise", GLIBC, None),  # the user's
        ({"JAXSVR_HUGE_PAGES": "0"}, "madvise", GLIBC, None),  # the opt-out
        ({"JAXSVR_HUGE_PAGES": "1"}, "madvise", GLIBC, None),  # restarted once already
        ({}, "always", GLIBC, None),  # large blocks get huge pages already
        ({}, "never", GLIBC, None),  # they cannot
        ({}, "madvise", ("glibc", "2.34"), None),  # no such tunable before 2.35
        ({}, "madvise", ("", ""), None),  # musl, macOS: not glibc
        # the reserved pool, asked for: whatever the THP mode
        ({"JAXSVR_HUGE_PAGES": "reserved"}, "madvise", GLIBC, "glibc.malloc.hugetlb=2"),
        ({"JAXSVR_HUGE_PAGES": "reserved"}, "never", GLIBC, "glibc.malloc.hugetlb=2"),
        ({"JAXSVR_HUGE_PAGES": "reserved"}, "always", GLIBC, "glibc.malloc.hugetlb=2"),
        (
            {"JAXSVR_HUGE_PAGES": "reserved", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"},
            "madvise",
            GLIBC,
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2",
        ),
        ({"JAXSVR_HUGE_PAGES": "2"}, "madvise", GLIBC, None),  # restarted once already
        (  # the user's own hugetlb setting wins
            {"JAXSVR_HUGE_PAGES": "reserved", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"},
            "madvise",
            GLIBC,
            None,
        ),
        ({"JAXSVR_HUGE_PAGES": "reserved"}, "madvise", ("glibc", "2.34"), None),
    ],
)
def test_huge_page_environment(environ, mode, libc, tunables):
    env = process_tuning.huge_page_environment({"PATH": "/bin", **environ}, mode, libc)
    if tunables is None:
        assert env is None
    else:
        assert env == {
            "PATH": "/bin",
            **environ,
            "GLIBC_TUNABLES": tunables,
            "JAXSVR_HUGE_PAGES": tunables[-1],  # 1 or 2: what the restart applied
        }


MEMINFO = """MemTotal:       24576000 kB
HugePages_Total:    2500
HugePages_Free:     1435
HugePages_Rsvd:       27
HugePages_Surp:        0
Hugepagesize:       2048 kB
"""


def test_reserved_huge_pages_and_the_log_note():
    # free pages that other mappings have claimed (Rsvd) are not available
    assert process_tuning.reserved_huge_pages(MEMINFO) == (2500, 1408)
    assert process_tuning.reserved_huge_pages(MEMINFO.replace("1435", "20")) == (2500, 0)
    assert process_tuning.reserved_huge_pages("MemTotal: 1 kB\n") is None
    note = process_tuning.huge_page_note
    # nothing to say where the pool was not asked for (the command's default, the opt-out)
    for environ in ({}, {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1", "JAXSVR_HUGE_PAGES": "1"}):
        assert note(environ, MEMINFO) == ("", None)
    assert note({"JAXSVR_HUGE_PAGES": "0"}, MEMINFO) == ("", None)
    restarted = {"GLIBC_TUNABLES": "a=1:glibc.malloc.hugetlb=2", "JAXSVR_HUGE_PAGES": "2"}
    assert note(restarted, MEMINFO) == ("; reserved huge pages: 1408 of 2500 available", None)
    # the user's own hugetlb=2: the pool is in use all the same
    assert note({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}, MEMINFO)[1] is None
    warnings = {}
    text, warnings["empty"] = note(restarted, MEMINFO.replace("1435", "27"))
    assert text == "; reserved huge pages: 0 of 2500 available"
    assert "no reserved huge page is available" in warnings["empty"]
    assert "sysctl vm.nr_hugepages=N" in warnings["empty"]
    _, warnings["no pool"] = note(restarted, "MemTotal: 1 kB\n")
    assert "no huge page pool" in warnings["no pool"]
    # asked for, but no restart happened (an old glibc, the user's own hugetlb tunable)
    for tunables in ("", "glibc.malloc.hugetlb=1"):
        text, warnings[tunables] = note(
            {"JAXSVR_HUGE_PAGES": "reserved", "GLIBC_TUNABLES": tunables}, MEMINFO
        )
        assert text == "" and "JAXSVR_HUGE_PAGES=reserved is not applied" in warnings[tunables]
    _, warnings["dropped"] = note({"JAXSVR_HUGE_PAGES": "2"}, MEMINFO)
    assert "dropped it" in warnings["dropped"]
    _, warnings["typo"] = note({"JAXSVR_HUGE_PAGES": "Reserved"}, MEMINFO)
    assert "'Reserved' is not one of 0" in warnings["typo"]
    assert all(w and "\n" not in w for w in warnings.values())  # one line each


_RESTART = """
import os, sys
from jaxsvr.runtime import process_tuning
print(os.getpid(), os.environ.get("GLIBC_TUNABLES", "-"), sys.argv[1:], flush=True)
if sys.argv[1] == "dropped":  # as glibc drops tunables for a privileged program
    os.environ.pop("GLIBC_TUNABLES", None)
if sys.argv[1] == "traced":  # as under a debugger
    sys.settrace(lambda *args: None)
process_tuning.reexec_with_huge_pages()
"""


@pytest.mark.parametrize("case", ["plain", "opt_out", "reserved", "dropped", "traced"])
def test_restarts_once_in_place_where_it_helps(case):
    """The command restarts itself (same pid, same arguments) with the tunable exactly
    when `huge_page_environment` says so, and at most once: also where the tunable does
    not survive the restart; never under a tracer. (glibc takes `hugetlb=2` whether or
    not huge pages are reserved: without a pool it maps 4 KiB pages.)"""
    drop = ("GLIBC_TUNABLES", "JAXSVR_HUGE_PAGES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if case == "opt_out":
        env["JAXSVR_HUGE_PAGES"] = "0"
    if case == "reserved":
        env["JAXSVR_HUGE_PAGES"] = "reserved"
    r = subprocess.run(
        [sys.executable, "-c", _RESTART, case, "b c"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    runs = [line.split(" ", 2) for line in r.stdout.splitlines()]
    expected = process_tuning.huge_page_environment(env)
    if expected is None or case == "traced":
        assert [tunables for _, tunables, _ in runs] == ["-"]
    else:
        assert [tunables for _, tunables, _ in runs] == ["-", expected["GLIBC_TUNABLES"]]
        assert runs[0][0] == runs[1][0]  # the same process
    assert all(args == f"['{case}', 'b c']" for _, _, args in runs)
