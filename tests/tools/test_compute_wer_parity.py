"""tools/compute-wer.py against the outputs of WeNet's own compute-wer.py (fixtures/wer, see make_wenet_fixtures.py).

WeNet's outputs are facts: on every input where each reference has a hypothesis, our report must be identical
byte for byte (per-utterance blocks, Overall, cluster lines), in word and character mode and with its options,
after its first two lines, which bind it to the files it scored (wenet_udps.scoring.bound).
The random case (400 pairs from a fixed seed over a small vocabulary) exercises the alignment's tie order.

One difference is by design: we score texts in the one normaliser's read form (NFKC, format characters removed;
wenet_udps.utils.text_norm.read_form), WeNet as they are. An utterance whose scoring tokens that form changes
(fullwidth ``ＡＢＣ`` against ``ABC``, ``℃`` against ``°C``) is left out of the comparison, and counted: every
other utterance's block is WeNet's byte for byte, and the Overall counts less those utterances' are WeNet's less
theirs.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.scoring.tokens import char_tokens, read_text
from wenet_udps.utils.text_norm import read_form

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "compute-wer.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "wer"
CASES = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))["cases"]
WER_LINE = re.compile(r"^utt: (\S+)\nWER: (.*)$", re.M)
NOTE = re.compile(r"^(Missing hypotheses|Hypotheses without reference): .*\n", re.M)
BLOCK = re.compile(r"^utt: (\S+)\n((?:.+\n)*)", re.M)
OVERALL = re.compile(r"^Overall -> .* N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)$", re.M)
COUNTS = re.compile(r"N=(\d+) C=(\d+) S=(\d+) D=(\d+) I=(\d+)")


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


def form_changed(case):
    """The reference keys whose scoring tokens (reference or hypothesis) the read form changes."""
    char, cs = "--char=1" in case["args"], "--cs=1" in case["args"]

    def tokens(text):
        out = char_tokens(text) if char else text.split()
        return out if cs else [t.upper() for t in out]

    refs, hyps = read_text(str(FIXTURES / case["ref"])), read_text(str(FIXTURES / case["hyp"]))
    return {key for key, ref in refs.items()
            if any(tokens(t) != tokens(read_form(t)) for t in (ref, hyps.get(key, "")))}


def assert_parity(case, got, expected):
    """``got`` is WeNet's ``expected`` but for the utterances the read form changes (see the module docstring)."""
    changed = form_changed(case)
    if not changed:
        assert got == expected
        return
    ours_blocks, wenet_blocks = dict(BLOCK.findall(got)), dict(BLOCK.findall(expected))
    assert set(ours_blocks) >= set(wenet_blocks) - changed
    for key in set(wenet_blocks) - changed:  # per utterance first, for a readable failure
        assert (key, ours_blocks[key]) == (key, wenet_blocks[key])

    def overall_less_changed(report, blocks):
        total = [int(n) for n in OVERALL.search(report).groups()]
        for key in changed & set(blocks):
            total = [t - int(n) for t, n in zip(total, COUNTS.search(blocks[key]).groups())]
        return total

    assert overall_less_changed(got, ours_blocks) == overall_less_changed(expected, wenet_blocks)


def test_read_form_leaves_most_utterances_comparable():
    # the comparison above is a test of WeNet parity only while most utterances are in it
    for case in CASES:
        assert len(form_changed(case)) <= 0.4 * len(read_text(str(FIXTURES / case["ref"]))), case["name"]


@pytest.mark.parametrize("case", [c for c in CASES if c["name"].startswith(("tricky", "random"))],
                         ids=lambda c: c["name"])
def test_identical_to_wenet(case):
    got, expected = ours(case["args"], case["ref"], case["hyp"]), wenet(case)
    if "--v=0" in case["args"]:  # no blocks to leave the changed utterances out of: the Overall of the verbose run
        verbose = ours([a for a in case["args"] if a != "--v=0"], case["ref"], case["hyp"])
        assert OVERALL.search(got).group(0) == OVERALL.search(verbose).group(0)
        return
    assert_parity(case, got, expected)


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
    assert_parity(case, NOTE.sub("", got), wenet(case))
    default = ours(case["args"], case["ref"], case["hyp"])
    assert "utt: u04" in default and "utt: u04" not in wenet(case)


@pytest.mark.parametrize("char", [0, 1])
def test_byte_order_mark(char):
    # WeNet reads the mark into the first key, so u01 silently goes unscored; we drop it and score all 24.
    case = by_name(f"bom_char{char}")
    assert "utt: u01\n" not in wenet(case) and len(WER_LINE.findall(wenet(case))) == 23
    tricky = by_name(f"tricky_char{char}")
    assert ours(case["args"], case["ref"], case["hyp"]) == ours(tricky["args"], tricky["ref"], tricky["hyp"])
    assert_parity(case, ours(case["args"], case["ref"], case["hyp"]), wenet(tricky))
