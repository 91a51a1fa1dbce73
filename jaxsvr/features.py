"""Command line: convert the TBN per-segment feature pickles into memory-mapped stores.

  python -m jaxsvr.features convert train.pkl test.pkl --out DIR --allow-pickle

Each `{split}.pkl` of the EK-100 retrieval release (a dict of RGB / Flow / Audio, each
(n, 25, 1024)) becomes `DIR/{split}.npy` (n, 25, 3072) and `DIR/{split}_mean.npy`
(n, 3072), the stores `--config.data.features=DIR` reads memory-mapped
(`jaxsvr.inputs.tbn`). A run pointed at the pickles' own folder does the same on first use,
into `config.data.feature_cache`. Unpickling runs code from the file: `--allow-pickle` is
required. Bad input is one `error:` line and exit code 2; stores are written whole or not
at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxsvr.errors import InputError
from jaxsvr.inputs import tbn
from jaxsvr.runtime import cli


def _parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.features", description=__doc__.split("\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="TBN pickles -> memory-mapped .npy stores")
    convert.add_argument("pickles", nargs="+", metavar="SPLIT.pkl", help="e.g. train.pkl")
    convert.add_argument("--out", required=True, help="folder of the stores")
    convert.add_argument(
        "--allow-pickle",
        action="store_true",
        help="unpickle the files although loading a pickle runs code (only files you trust)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.allow_pickle:
        raise InputError(
            "refusing to unpickle: loading a pickle runs code from the file; if the files are "
            "trusted pass --allow-pickle"
        )
    for source in map(Path, args.pickles):
        if not source.is_file():
            raise InputError(f"{source} not found: give the release's train.pkl / test.pkl")
        segments, mean = tbn.convert(source, args.out)
        print(f"wrote {segments} and {mean}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
