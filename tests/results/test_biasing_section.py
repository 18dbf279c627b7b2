"""RESULTS.md's biasing section (wenet_udps/results/biasing.py): the reports compute-biased-wer.py writes become rows
without and with the list, in set, list and mode order; a report missing, cut short, or whose hypotheses changed is
a problem naming it."""
import os
import subprocess
import sys
from pathlib import Path

from wenet_udps.results.biasing import collect_biasing, section

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def report(out, ref, hyp, biasing):
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-biased-wer.py"), "--biasing_list",
                           str(biasing), str(ref), str(hyp)], capture_output=True, text=True, env=ENV, check=True)
    out.write_text(proc.stdout)


def test_rows_and_problems(tmp_path):
    ref = tmp_path / "text"
    ref.write_text("u1 THE ZEBRA ATE\nu2 A MARMALADE\n")
    biasing = tmp_path / "list"
    biasing.write_text("ZEBRA\nMARMALADE\n")
    exp = tmp_path / "exp" / "m_udps"
    for name in ("100", "2000"):
        for mode in ("attention_rescoring", "ctc_prefix_beam_search"):
            plain, hot = exp / "test" / mode, exp / "test" / f"hot_{name}" / mode
            plain.mkdir(parents=True, exist_ok=True)
            hot.mkdir(parents=True)
            (plain / "text").write_text("u1 THE SEBRA ATE\nu2 A MARMALADE\n")
            (hot / "text").write_text("u1 THE ZEBRA ATE\nu2 A MARMALADE\n")
            report(hot / "baseline_biased_wer", ref, plain / "text", biasing)
            report(hot / "biased_wer", ref, hot / "text", biasing)
    rows, problems = collect_biasing(tmp_path / "exp")
    assert problems == [] and len(rows) == 8
    text = section(rows, "WER")
    lines = [line for line in text.splitlines() if line.startswith("| m_udps")]
    head = "| m_udps | test | 100 | ctc_prefix_beam_search"
    assert lines[0] == f"{head} | no list | 20.00 | 0.00 | 50.00 | 2 | 0.500 | 1.000 | 0.667 |"
    assert lines[1] == f"{head} | the list | 0.00 | 0.00 | 0.00 | 2 | 1.000 | 1.000 | 1.000 |"
    assert [line.split(" | ")[2:4] for line in lines[::2]] == [
        ["100", "ctc_prefix_beam_search"], ["100", "attention_rescoring"], ["2000", "ctc_prefix_beam_search"],
        ["2000", "attention_rescoring"]]
    assert section([], "WER") == ""
    hot = exp / "test" / "hot_100" / "attention_rescoring"
    (hot / "text").write_text("u1 THE ZEBRA\nu2 A MARMALADE\n")                  # edited after scoring
    cut = exp / "test" / "hot_2000" / "attention_rescoring" / "biased_wer"
    cut.write_text("".join(cut.read_text().splitlines(True)[:4]))                 # cut short
    (exp / "test" / "hot_2000" / "ctc_prefix_beam_search" / "baseline_biased_wer").unlink()
    _, problems = collect_biasing(tmp_path / "exp")
    assert problems == [
        f"{hot / 'biased_wer'}: {hot / 'text'} changed since it was scored (another SHA-256); rescore (run.sh "
        f"--stage 5)",
        f"{cut}: not whole (its WER, U-WER, B-WER and Phrases lines); rescore (run.sh --stage 5)",
        f"{exp / 'test' / 'hot_2000' / 'ctc_prefix_beam_search' / 'baseline_biased_wer'} missing: stage 5 stopped "
        f"before scoring it? (run.sh --stage 5)"]


def test_undefined_rates_are_dashes_not_zeros(tmp_path):
    """A list none of whose phrases the references hold, decoded without writing one: its B-WER, recall and F1 are
    undefined and the row says '-' (0.00 would read as a perfect B-WER, 0.000 as a failed recall)."""
    ref = tmp_path / "text"
    ref.write_text("u1 THE CAT ATE\n")
    biasing = tmp_path / "list"
    biasing.write_text("ZEBRA\n")
    hot = tmp_path / "exp" / "m" / "test" / "hot_1" / "ctc_prefix_beam_search"
    plain = hot.parent.parent / "ctc_prefix_beam_search"
    for folder in (hot, plain):
        folder.mkdir(parents=True)
        (folder / "text").write_text("u1 THE CAT ATE\n")
    report(hot / "baseline_biased_wer", ref, plain / "text", biasing)
    report(hot / "biased_wer", ref, hot / "text", biasing)
    rows, problems = collect_biasing(tmp_path / "exp")
    assert problems == [] and rows[0].rates["B-WER"] is None and rows[0].recall is None
    assert [line for line in section(rows, "WER").splitlines() if line.startswith("| m ")][0] == \
        "| m | test | 1 | ctc_prefix_beam_search | no list | 0.00 | 0.00 | - | 0 | - | - | - |"
