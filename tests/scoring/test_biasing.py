"""Biased-word error rates (scoring/biasing.py, Le et al.'s definitions) and phrase recall / precision / F1, by hand
counts; the split adds up to compute-wer's Overall on random transcripts; tools/compute-biased-wer.py."""
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.scoring import score
from wenet_udps.scoring.biasing import PhraseIndex, score_biased

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_hand_counted_utterance():
    # ref: THE ZEBRA ATE MARMALADE TODAY   (biased: ZEBRA, MARMALADE)
    # hyp: THE SEBRA ATE MARMALADE ZEBRA   -> ZEBRA->SEBRA (biased S), TODAY->ZEBRA (unbiased S: ref word decides)
    out = score_biased({"u": "THE ZEBRA ATE MARMALADE TODAY"}, {"u": "THE SEBRA ATE MARMALADE ZEBRA"},
                       ["zebra", "marmalade"], char=False)  # (compute-wer's case rule)
    assert (out.biased.N, out.biased.S, out.biased.D, out.biased.I) == (2, 1, 0, 0)
    assert (out.unbiased.N, out.unbiased.S, out.unbiased.D, out.unbiased.I) == (3, 1, 0, 0)
    assert out.biased.error_rate() == 50.0
    # phrases: reference ZEBRA, MARMALADE; hypothesis MARMALADE, ZEBRA: both matched once
    assert (out.ref_phrases, out.hyp_phrases, out.matched) == (2, 2, 2)


def test_insertions_go_by_the_hypothesis_word_and_phrases_count_occurrences():
    out = score_biased({"u": "A B"}, {"u": "A ZEBRA B C ZEBRA"}, ["ZEBRA", "NEVER SAID"], char=False)
    assert out.biased.I == 2 and out.unbiased.I == 1 and out.biased.N == 0 and out.unbiased.N == 2
    assert (out.ref_phrases, out.hyp_phrases, out.matched) == (0, 2, 0)
    # no listed phrase in the references: recall, F1 and B-WER are undefined ('-'), not 0 (issue 80's attack);
    # two written, none right: precision 0
    assert out.recall is None and out.precision == 0.0 and out.f1 is None and out.biased.error_rate() is None
    assert out.lines()[2].startswith("B-WER -> - % N=0") and "recall - precision 0.0000 F1 -" in out.lines()[3]
    # a multi-word phrase marks all its words; a partial one marks none
    out = score_biased({"u": "NEW YORK CITY NEW"}, {"u": "NEW YORK SITY NEW"}, ["NEW YORK"], char=False)
    assert out.biased.N == 2 and out.unbiased.N == 2 and out.unbiased.S == 1
    assert (out.ref_phrases, out.hyp_phrases, out.matched) == (1, 1, 1) and out.f1 == 1.0


def test_characters_mode_marks_the_characters_of_an_entity():
    out = score_biased({"u": "我 在 阿里巴巴 工作"}, {"u": "我在阿里八八工作"}, ["阿里巴巴"], char=True)
    assert out.biased.N == 4 and out.biased.S == 2 and out.unbiased.N == 4 and out.unbiased.S == 0
    assert out.recall == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_the_split_adds_up_to_compute_wer(seed):
    rng = random.Random(seed)
    words = ["A", "B", "C", "D", "E"]
    refs = {f"u{i}": " ".join(rng.choice(words) for _ in range(rng.randint(0, 8))) for i in range(6)}
    hyps = {k: " ".join(rng.choice(words) for _ in range(rng.randint(0, 8))) for k in refs}
    phrases = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 2))) for _ in range(3)]
    out = score_biased(refs, hyps, phrases, char=False)
    total = score(refs, hyps, char=False).total
    assert out.report.total == total
    assert out.biased.N + out.unbiased.N == total.N
    assert out.biased.S + out.unbiased.S == total.S and out.biased.D + out.unbiased.D == total.D
    assert out.biased.I + out.unbiased.I == total.I
    index = PhraseIndex(p.split() for p in phrases)
    for key, ref in refs.items():  # the coverage is brute force's: a token inside some occurrence
        tokens = ref.split()
        brute = [any(tokens[s:s + len(p.split())] == p.split() for p in phrases
                     for s in range(max(0, i - len(p.split()) + 1), i + 1)) for i in range(len(tokens))]
        assert index.covered(tokens) == brute


def test_command(tmp_path):
    (tmp_path / "ref").write_text("u1 THE ZEBRA ATE\nu2 A MARMALADE\n", encoding="utf-8")
    (tmp_path / "hyp").write_text("u1 THE SEBRA ATE\nu2 A MARMALADE\n", encoding="utf-8")
    (tmp_path / "list").write_text("ZEBRA\nMARMALADE :3\n", encoding="utf-8")
    script = str(ROOT / "tools" / "compute-biased-wer.py")
    proc = subprocess.run([sys.executable, script, "--biasing_list", str(tmp_path / "list"), str(tmp_path / "ref"),
                           str(tmp_path / "hyp")], capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2] == "WER -> 20.00 % N=5 C=4 S=1 D=0 I=0"
    assert lines[3] == "U-WER -> 0.00 % N=3 S=0 D=0 I=0"
    assert lines[4] == "B-WER -> 50.00 % N=2 S=1 D=0 I=0"
    assert lines[5].startswith("Phrases -> recall 0.5000 precision 1.0000 F1 0.6667")
    (tmp_path / "list").write_text("", encoding="utf-8")
    proc = subprocess.run([sys.executable, script, "--biasing_list", str(tmp_path / "list"), str(tmp_path / "ref"),
                           str(tmp_path / "hyp")], capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("no phrase (one a line)"), proc.stderr
