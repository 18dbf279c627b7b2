#!/usr/bin/env python3
"""Copy CMU AN4 with its NIST SPHERE recordings as FLAC: the same samples (each file read back and compared), the
same tree, 41 MiB instead of 90 (what travels to a GPU machine, docs/gpu_report.md).

Usage: python tools/an4_to_flac.py AN4_DIR OUT_DIR
AN4_DIR is the unpacked an4/ folder or the folder holding it (recipes/an4/download.sh's DIR); OUT_DIR/an4 is
written (so OUT_DIR is a --download_dir for run.sh --corpus an4, whose recipe reads either copy alike).
"""
import argparse
from pathlib import Path

from wenet_udps.corpora.an4 import to_flac
from wenet_udps.utils import cli


def main(argv=None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("an4_dir", type=cli.existing_dir, help="an4/ (SPHERE) or the folder holding it")
    parser.add_argument("out_dir", type=cli.output_dir, help="where an4/ (FLAC) is written")
    args = parser.parse_args(argv)
    an4 = Path(args.an4_dir)
    if (an4 / "an4").is_dir():
        an4 = an4 / "an4"
    try:
        n = to_flac(an4, Path(args.out_dir) / "an4")
    except ValueError as e:
        raise cli.UserError(str(e)) from None
    size = sum(p.stat().st_size for p in (Path(args.out_dir) / "an4").rglob("*.flac"))
    print(f"{Path(args.out_dir) / 'an4'}: {n} recordings as FLAC, {size / 2 ** 20:.1f} MiB, samples identical")


if __name__ == "__main__":
    cli.run_cli(main, "an4_to_flac.py")
