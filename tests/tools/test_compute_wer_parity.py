"""tools/compute-wer.py against the outputs of WeNet's own compute-wer.py (fixtures/wer, see make_wenet_fixtures.py).

WeNet's outputs are facts: on every input where each reference has a hypothesis, our report must be identical
byte for byte (per-utterance blocks, Overall, cluster lines), in word and character mode and with its options,
after its first two lines, which bind it to the files it scored (wenet_udps.scoring.bound).
The random case (400 pairs from a fixed seed over a small vocabulary) exercises the alignment's tie order.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "compute-wer.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "wer"
CASES = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))["cases"]
WER_LINE = re.compile(r"^utt: (\S+)\nWER: (.*)$", re.M)
NOTE = re.compile(r"^(Missing hypotheses|Hypotheses without reference): .*\n", re.M)


def ours(args, ref, hyp):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, ref, hyp], cwd=FIXTURES, capture_output=True,
                          text=True, encoding="utf-8")
    assert proc.returncode == 0, proc.stderr
    bound = proc.stdout.split("\n", 3)
    assert [line.split(":")[0] for line in bound[:3]] == ["Scored hypotheses", "Scored references",
                                                          "Scored with"], proc.stdout
    return bound[3]


def wenet(case):
    return (FIXTURES / case["out"]).read_text(encoding="utf-8")


def by_name(name):
    return next(c for c in CASES if c["name"] == name)


@pytest.mark.parametrize("case", [c for c in CASES if c["name"].startswith(("tricky", "random"))],
                         ids=lambda c: c["name"])
def test_identical_to_wenet(case):
    got, expected = ours(case["args"], case["ref"], case["hyp"]), wenet(case)
    # Per-utterance counts first, for a readable failure; then the whole report.
    assert WER_LINE.findall(got) == WER_LINE.findall(expected)
    assert got == expected


def test_random_pairs_cover_ties_and_both_modes():
    # The random fixture is only a test of the tie order if it holds utterances with several errors of each kind.
    for name in ("random_char0", "random_char1"):
        lines = WER_LINE.findall(wenet(by_name(name)))
        assert len(lines) == 400
        mixed = [w for _, w in lines if all(f"{k}=0" not in w for k in "SDI")]
        assert len(mixed) > 30


@pytest.mark.parametrize("char", [0, 1])
def test_missing_hypotheses_skip_flag_matches_wenet(char):
    case = by_name(f"missing_char{char}")
    got = ours(case["args"] + ["--missing=skip"], case["ref"], case["hyp"])
    assert "Missing hypotheses: 2 of 24 reference utterances (skipped" in got
    assert NOTE.sub("", got) == wenet(case)
    default = ours(case["args"], case["ref"], case["hyp"])
    assert "utt: u04" in default and "utt: u04" not in wenet(case)


@pytest.mark.parametrize("char", [0, 1])
def test_byte_order_mark(char):
    # WeNet reads the mark into the first key, so u01 silently goes unscored; we drop it and score all 24.
    case = by_name(f"bom_char{char}")
    assert "utt: u01\n" not in wenet(case) and len(WER_LINE.findall(wenet(case))) == 23
    assert ours(case["args"], case["ref"], case["hyp"]) == wenet(by_name(f"tricky_char{char}"))
