"""What it costs this machine to fault memory in again after freeing it: the cost behind
the CPU training step's page faults (docs/benchmarks.md#why-contras-steps-alternate).

  python benchmarks/page_reuse.py [--size-mb 1536] [--delays 0.05 0.5 1 2 3] [--repeats 3]

XLA's CPU client mallocs each step's temporaries afresh (850 MB for the EPIC ConTra
step) and glibc maps blocks that large anew, so every step faults its temporaries in.
This script does the same without XLA: for each delay (interleaved, `--repeats` times)
it unmaps the previous block, sleeps for the delay, maps a fresh anonymous block of
`--size-mb` and writes one byte per 4 KiB page, in 4 KiB pages and in transparent huge
pages (`MADV_HUGEPAGE`, what `glibc.malloc.hugetlb=1` asks for), timing the writes and
the process's system time.

On bare metal the cost should be the kernel zeroing the pages, whatever the delay. In a
virtual machine whose balloon device reports free pages to the host (virtio-balloon
`VIRTIO_BALLOON_F_REPORTING`: Linux hands free blocks of 2^page_reporting_order pages
back to the host in passes at most 2 s apart), memory left free that long must be
faulted in again by the host as well, and the cost grows with the delay. The script
prints whether this machine's balloon reports, one markdown table (median ms per GB
and system ms per GB) and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import mmap
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from evaluation_speed import cpu_model  # beside this script

REPORTING_BIT = 5  # VIRTIO_BALLOON_F_REPORTING
BALLOON_DEVICE = "0x0005"


def free_page_reporting() -> str:
    """'on', 'off' or 'no balloon', from the virtio balloon device's feature bits."""
    for dev in Path("/sys/bus/virtio/devices").glob("*"):
        try:
            if (dev / "device").read_text().strip() != BALLOON_DEVICE:
                continue
            bits = (dev / "features").read_text().strip()
        except OSError:
            continue
        return "on" if len(bits) > REPORTING_BIT and bits[REPORTING_BIT] == "1" else "off"
    return "no balloon"


def read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"


def touch(size: int, huge: bool) -> tuple[float, float]:
    """Seconds and system seconds to write one byte per 4 KiB page of a fresh mapping in
    huge or in 4 KiB pages (asked for either way, as THP `always` would give huge pages
    unasked); the mapping is released on return."""
    block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    pages = None
    try:
        try:
            block.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
        except OSError as e:
            sys.exit(
                f"error: madvise({'MADV_HUGEPAGE' if huge else 'MADV_NOHUGEPAGE'}): {e} "
                "(a kernel without transparent huge pages has nothing to measure here)"
            )
        pages = np.frombuffer(block, np.uint8)
        before, start = resource.getrusage(resource.RUSAGE_SELF).ru_stime, time.perf_counter()
        pages[::4096] = 1
        seconds = time.perf_counter() - start
        system = resource.getrusage(resource.RUSAGE_SELF).ru_stime - before
    finally:
        pages = None  # a view of the mapping keeps it from closing
        block.close()
    return seconds, system


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, default=1536)
    p.add_argument("--delays", type=float, nargs="+", default=[0.05, 0.5, 1.0, 2.0, 3.0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    size = args.size_mb << 20
    runs: dict[str, list] = {}
    touch(size, True)  # not timed: the process's first large mapping pays its own setup
    for _ in range(args.repeats):
        for delay in args.delays:
            for huge in (False, True):
                time.sleep(delay)
                runs.setdefault(f"{delay}/{huge}", []).append(touch(size, huge))
    gb = size / 1e9
    print(
        f"{cpu_model()}, Linux {platform.release()}; "
        f"THP {read('/sys/kernel/mm/transparent_hugepage/enabled')}, defrag "
        f"{read('/sys/kernel/mm/transparent_hugepage/defrag')}; free page reporting: "
        f"{free_page_reporting()} (order "
        f"{read('/sys/module/page_reporting/parameters/page_reporting_order')})"
    )
    print("| freed, then idle (s) | 4 KiB pages: ms/GB (system) | huge pages: ms/GB (system) |")
    print("|---|---|---|")
    report = []
    for delay in args.delays:
        cells = []
        for huge in (False, True):
            times = runs[f"{delay}/{huge}"]
            wall = statistics.median(t for t, _ in times) * 1e3 / gb
            system = statistics.median(s for _, s in times) * 1e3 / gb
            cells.append(f"{wall:.0f} ({system:.0f})")
            report.append(
                {"delay_s": delay, "huge": huge, "ms_per_gb": wall, "sys_ms_per_gb": system}
            )
        print(f"| {delay:g} | {cells[0]} | {cells[1]} |")
    print(json.dumps({"cpu": cpu_model(), "reporting": free_page_reporting(), "runs": report}))


if __name__ == "__main__":
    main()
