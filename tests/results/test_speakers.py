"""wenet_udps.results.speakers: per-speaker error rates of seed groups, and rescoring at character level."""
from pathlib import Path

import pytest

from wenet_udps.results.speakers import (by_speaker, groups_of, letter_cer, letters, read_utt2spk, sections,
                                         speaker_table)

MODES = ["ctc_greedy_search", "attention"]


def write(path: Path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")


def test_by_speaker_scores_each_speakers_utterances():
    refs = {"1-a": "A B C D", "1-b": "E F", "2-a": "G H"}
    hyps = {"1-a": "A B C D", "1-b": "E X", "2-a": ""}
    rates = by_speaker(refs, hyps, {"1-a": "1", "1-b": "1", "2-a": "2"}, char=False)
    assert rates == pytest.approx({"1": 100 / 6, "2": 100.0})
    assert by_speaker(refs, hyps, {}, char=False) == pytest.approx({"?": 300 / 8})


def test_read_utt2spk_names_a_bad_line(tmp_path):
    write(tmp_path / "utt2spk", ["1-a 1", "1-b"])
    with pytest.raises(ValueError, match=r"utt2spk:2: expected '<key> <speaker>'"):
        read_utt2spk(tmp_path / "utt2spk")


def test_letters_drop_spaces_and_keep_apostrophes():
    assert letters({"k": "IT'S  OK"}) == {"k": "I T ' S O K"}


def test_groups_of_puts_seeds_together():
    names = ["x_udps_seed2", "x_udps_seed1", "x_scaled_dot", "y_udps"]
    assert groups_of(names) == {"x_scaled_dot": ["x_scaled_dot"], "x_udps": ["x_udps_seed1", "x_udps_seed2"],
                                "y_udps": ["y_udps"]}


def test_speaker_table_and_cer_rescoring(tmp_path):
    data, exp = tmp_path / "data", tmp_path / "exp"
    write(data / "test" / "text", ["1-a AB CD", "2-a EF"])
    write(data / "test" / "utt2spk", ["1-a 1", "2-a 2"])
    write(data / "dev" / "text", ["1-a AB"])          # no utt2spk: no per-speaker rows
    for seed, hyp in ((1, ["1-a AB CD", "2-a EX"]), (2, ["1-a AB CX", "2-a EF"])):
        for mode in MODES:
            write(exp / f"m_udps_seed{seed}" / "test" / mode / "text", hyp)
            write(exp / f"m_udps_seed{seed}" / "dev" / mode / "text", ["1-a AB"])
    names = {n: [(s, m) for s in ("dev", "test") for m in MODES] for n in ["m_udps_seed1", "m_udps_seed2"]}
    table = speaker_table(exp, data, names, ["dev", "test"], MODES, char=False, metric="WER")
    rows = [ln for ln in table.splitlines() if ln.startswith("| m_udps")]
    assert rows == ["| m_udps | test | 1 | 25.00 ± 35.36 | 25.00 ± 35.36 |",
                    "| m_udps | test | 2 | 50.00 ± 70.71 | 50.00 ± 70.71 |"]
    cer = letter_cer(exp, data, names, ["test"], MODES)
    assert cer["m_udps_seed1"][("test", "attention")] == pytest.approx(100 / 6)
    assert speaker_table(exp, data, names, ["dev"], MODES, char=False, metric="WER") == ""
    # A result collect_results left out (its checkpoint replaced) is in no table.
    current = {"m_udps_seed1": [("test", "attention")], "m_udps_seed2": []}
    assert list(letter_cer(exp, data, current, ["test"], MODES)) == ["m_udps_seed1"]


def test_sections_add_cer_for_word_scored_sets_only(tmp_path):
    data, exp = tmp_path / "data", tmp_path / "exp"
    write(data / "test" / "text", ["1-a AB CD"])
    write(data / "test" / "utt2spk", ["1-a 1"])
    for seed in (1, 2):
        write(exp / f"m_udps_seed{seed}" / "test" / "attention" / "text", ["1-a AB CX"])
    names = {"m_udps_seed1": [("test", "attention")], "m_udps_seed2": [("test", "attention")]}
    words = sections(exp, data, names, ["test"], ["attention"], char=False, metric="WER")
    assert "## CER" in words and "| m_udps_seed1 | test | 25.00 |" in words
    assert "| m_udps | test | 25.00 ± 0.00 (seeds 1: 25.00, 2: 25.00) |" in words
    assert "## Per speaker" in words and "| m_udps | test | 1 | 50.00 ± 0.00 |" in words
    # Per speaker also by letters: "A B C X" against "A B C D", one letter in four.
    by_letters = words.split("Letter CER (%) of each speaker's utterances")[1]
    assert "| exp | set | speaker | attention CER |" in by_letters
    assert "| m_udps | test | 1 | 25.00 ± 0.00 |" in by_letters
    chars = sections(exp, data, names, ["test"], ["attention"], char=True, metric="CER")
    assert "## CER" not in chars and "## Per speaker" in chars and "Letter CER (%) of each speaker" not in chars
