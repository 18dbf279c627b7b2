from pathlib import Path

import pytest

from tests.tools.load import run_tool
from wenet_udps.text import init_tokenizer

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def make_kaldi_dir(fsdd_dir, out_dir, n=12):
    """wav.scp + text for n FSDD files (spread over digits and speakers)."""
    files = sorted(Path(fsdd_dir).glob("*.wav"))[::97][:n]
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "wav.scp", "w") as scp, open(out_dir / "text", "w") as text:
        for f in files:
            scp.write(f"{f.stem} {f}\n")
            text.write(f"{f.stem} {DIGITS[int(f.stem.split('_')[0])]} {DIGITS[int(f.stem.split('_')[2]) % 10]}\n")
    return out_dir


@pytest.fixture
def kaldi_dir(fsdd_dir, tmp_path):
    return make_kaldi_dir(fsdd_dir, tmp_path / "data")


@pytest.fixture
def raw_list(kaldi_dir):
    out = kaldi_dir / "data.list"
    run_tool("make_raw_list", [str(kaldi_dir / "wav.scp"), str(kaldi_dir / "text"), str(out)])
    return out


@pytest.fixture
def tokenizer(kaldi_dir):
    units = kaldi_dir / "units.txt"
    run_tool("make_char_units", [str(kaldi_dir / "text"), str(units)])
    return init_tokenizer({"tokenizer": "char", "tokenizer_conf": {"symbol_table_path": str(units)}})
