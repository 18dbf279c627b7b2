#!/usr/bin/env python3
"""Convert Kaldi CMVN stats (compute-cmvn-stats output, text or binary) to WeNet's global_cmvn JSON.

Usage: python tools/cmvn_kaldi2json.py KALDI_CMVN OUT_JSON

Kaldi stats are a 2 x (D+1) matrix: row 0 the per-dimension sums and the frame count, row 1 the sums of squares.
The JSON holds ``mean_stat`` (D sums), ``var_stat`` (D sums of squares) and ``frame_num``, as
tools/compute_cmvn_stats.py writes it.
"""
import argparse
import struct
import sys
from typing import List

from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_json


def read_kaldi_matrix(data: bytes, path: str) -> List[List[float]]:
    """A Kaldi matrix, text (``[ a b ... \\n c d ... ]``) or binary (``\\0B`` + ``DM``/``FM`` + rows, cols, values)."""
    if data.startswith(b"\0B"):
        token, rest = data[2:].split(b" ", 1)
        kind = {b"DM": "d", b"FM": "f"}.get(token)
        if kind is None or len(rest) < 10 or rest[0] != 4 or rest[5] != 4:
            raise ValueError(f"{path}: not a binary Kaldi float/double matrix (token {token!r})")
        rows, cols = struct.unpack("<i", rest[1:5])[0], struct.unpack("<i", rest[6:10])[0]
        size = struct.calcsize(kind)
        values = struct.unpack(f"<{rows * cols}{kind}", rest[10:10 + rows * cols * size])
        return [list(values[r * cols:(r + 1) * cols]) for r in range(rows)]
    text = data.decode("utf-8").strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"{path}: not a Kaldi text matrix ('[ ... ]')")
    try:
        return [[float(v) for v in line.split()] for line in text[1:-1].strip().splitlines() if line.strip()]
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def kaldi_to_json(matrix: List[List[float]], path: str) -> dict:
    if len(matrix) != 2 or len(matrix[0]) != len(matrix[1]) or len(matrix[0]) < 2:
        raise ValueError(f"{path}: expected 2 rows of D+1 values (Kaldi CMVN stats), got "
                         f"{len(matrix)} rows of {[len(r) for r in matrix]}")
    frames = matrix[0][-1]
    if frames <= 0:
        raise ValueError(f"{path}: frame count {frames} is not positive")
    return {"mean_stat": matrix[0][:-1], "var_stat": matrix[1][:-1], "frame_num": frames}


def main(argv=None) -> int:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kaldi_cmvn", type=cli.existing_file)
    p.add_argument("out_json", type=cli.output_file)
    args = p.parse_args(argv)
    try:
        with cli.open_input(args.kaldi_cmvn, "rb") as f:
            stats = kaldi_to_json(read_kaldi_matrix(f.read(), args.kaldi_cmvn), args.kaldi_cmvn)
    except (OSError, ValueError, struct.error) as e:
        print(f"cmvn_kaldi2json.py: {e}", file=sys.stderr)
        return 1
    write_json(args.out_json, stats)
    print(f"cmvn_kaldi2json.py: wrote {args.out_json} ({len(stats['mean_stat'])} dims, "
          f"{stats['frame_num']:g} frames)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "cmvn_kaldi2json.py")
