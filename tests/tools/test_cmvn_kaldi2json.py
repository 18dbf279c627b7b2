"""tools/cmvn_kaldi2json.py: Kaldi CMVN stats (text and binary) -> WeNet JSON; the loader points Kaldi files there."""
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from wenet_udps.transformer.cmvn import load_cmvn_json

ROOT = Path(__file__).resolve().parents[2]
SUMS, SQUARES, FRAMES = [2.0, 4.0, 6.0], [8.0, 20.0, 40.0], 2.0


def kaldi_text(path: Path) -> None:
    path.write_text(f" [\n  {' '.join(map(str, SUMS))} {FRAMES}\n  {' '.join(map(str, SQUARES))} 0 ]\n")


def kaldi_binary(path: Path) -> None:
    values = SUMS + [FRAMES] + SQUARES + [0.0]
    path.write_bytes(b"\0BDM \x04" + struct.pack("<i", 2) + b"\x04" + struct.pack("<i", 4)
                     + struct.pack("<8d", *values))


@pytest.mark.parametrize("writer", [kaldi_text, kaldi_binary])
def test_kaldi_stats_are_refused_with_the_converter_named_then_convert(tmp_path, writer):
    kaldi = tmp_path / "cmvn.ark"
    writer(kaldi)
    with pytest.raises(ValueError, match=r"Kaldi-format CMVN stats.*tools/cmvn_kaldi2json.py"):
        load_cmvn_json(kaldi)
    out = tmp_path / "global_cmvn"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cmvn_kaldi2json.py"), str(kaldi), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    mean, istd = load_cmvn_json(out)
    assert torch.allclose(mean, torch.tensor([1.0, 2.0, 3.0]))
    assert torch.allclose(istd, 1 / torch.sqrt(torch.tensor([4.0 - 1, 10.0 - 4, 20.0 - 9])))


def test_not_a_matrix_is_one_line(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("[ 1 2\n 3 ]\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cmvn_kaldi2json.py"), str(bad), str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "expected 2 rows" in proc.stderr and "Traceback" not in proc.stderr
