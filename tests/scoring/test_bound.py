"""Issue 66, C: a ``wer`` file is read whole and bound to the files it scored (wenet_udps.scoring.bound), or refused
naming it: empty, cut at any line, without its binding, or bound to other contents than its files have now."""
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.scoring.bound import ScoreError, check_scored, read_score

ROOT = Path(__file__).resolve().parents[2]


def score_files(tmp_path: Path, *opts: str) -> Path:
    (tmp_path / "ref").write_text("u1 A B C\nu2 D E\n", encoding="utf-8")
    (tmp_path / "text").write_text("u1 A X C\nu2 D E F\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-wer.py"), *opts, str(tmp_path / "ref"),
                           str(tmp_path / "text")], capture_output=True, text=True, check=True)
    (tmp_path / "wer").write_text(proc.stdout, encoding="utf-8")
    return tmp_path / "wer"


@pytest.mark.parametrize("verbose", ["--v=1", "--v=0"])
def test_a_whole_bound_score_reads(tmp_path, verbose):
    score = read_score(str(score_files(tmp_path, verbose)))
    assert score.rate == 40.0 and score.counts == {"N": 5, "C": 4, "S": 1, "D": 0, "I": 1}
    assert (score.hyp, score.ref) == (str(tmp_path / "text"), str(tmp_path / "ref"))
    check_scored(score, str(tmp_path / "text"), str(tmp_path / "ref"))


@pytest.mark.parametrize("verbose", ["--v=1", "--v=0"])
def test_an_empty_or_cut_score_is_refused_wherever_it_was_cut(tmp_path, verbose):
    """``compute-wer > wer`` leaves an empty file when compute-wer fails, a part of one when it is stopped or the
    disk fills: no cut (at a line end or inside a line) reads as a score."""
    wer = score_files(tmp_path, verbose)
    whole = wer.read_text(encoding="utf-8")
    ends = [i + 1 for i, c in enumerate(whole) if c == "\n"]
    cuts = sorted(set(ends[:-1]) | {len(whole) - 5, 0, 30}) if verbose == "--v=1" else [0, 30, len(whole) - 10]
    for cut in cuts:
        if not whole[cut:].strip():
            continue   # only blank lines were cut off
        wer.write_text(whole[:cut], encoding="utf-8")
        with pytest.raises(ScoreError, match=f"{wer} is (empty|partial)") as e:
            read_score(str(wer))
        assert "score it again" in str(e.value) and "\n" not in str(e.value), cut


def test_a_report_without_its_binding_or_of_two_reports_is_refused(tmp_path):
    wer = score_files(tmp_path, "--v=0")
    lines = wer.read_text(encoding="utf-8").splitlines(keepends=True)
    wer.write_text("".join(lines[2:]), encoding="utf-8")   # WeNet's own compute-wer, or an older one
    with pytest.raises(ScoreError, match="records no SHA-256 of the text it scored"):
        read_score(str(wer))
    wer.write_text("".join(lines) + "".join(lines[2:]), encoding="utf-8")   # `>>` appended a second report
    with pytest.raises(ScoreError, match="2 'Overall' lines"):
        read_score(str(wer))
    wer.write_text("".join(lines).replace("N=5 C=4", "N=5 C=3"), encoding="utf-8")
    with pytest.raises(ScoreError, match="counts do not add up"):
        read_score(str(wer))


def test_a_score_of_other_text_names_both_files(tmp_path):
    score = read_score(str(score_files(tmp_path)))
    (tmp_path / "text").write_text("u1 A B C\nu2 D E\n", encoding="utf-8")   # decoded again, not rescored
    with pytest.raises(ScoreError, match=f"{tmp_path / 'wer'} is the score of other text: it scored the hypotheses "
                                         f"{tmp_path / 'text'} with SHA-256 .* but {tmp_path / 'text'} has SHA-256"):
        check_scored(score, str(tmp_path / "text"))
    score = read_score(str(score_files(tmp_path)))
    other_refs = tmp_path / "other_ref"
    other_refs.write_text("u1 A B C\nu2 D E G\n", encoding="utf-8")
    with pytest.raises(ScoreError, match=f"scored the references {tmp_path / 'ref'} .* but {other_refs} has"):
        check_scored(score, str(tmp_path / "text"), str(other_refs))
    (tmp_path / "text").unlink()
    with pytest.raises(ScoreError, match=f"{tmp_path / 'text'} does not exist"):
        check_scored(score, str(tmp_path / "text"))


@pytest.mark.parametrize("verbose", ["--v=1", "--v=0"])
def test_a_score_whose_numbers_were_edited_is_refused(tmp_path, verbose):
    """Issue 80 round 7, G: `sed` on the Overall line (the counts still add up) is not the score of the text."""
    wer = score_files(tmp_path, verbose)
    check_scored(read_score(str(wer)), str(tmp_path / "text"))   # the real score passes the rescoring check
    wer.write_text(wer.read_text(encoding="utf-8").replace("Overall -> 40.00 % N=5 C=4 S=1 D=0 I=1",
                                                           "Overall -> 0.00 % N=5 C=5 S=0 D=0 I=0"), encoding="utf-8")
    score = read_score(str(wer))
    assert score.rate == 0.0
    with pytest.raises(ScoreError, match=f"{wer} records N=5 C=5 S=0 D=0 I=0, but {tmp_path / 'text'} scored "
                                         f"against {tmp_path / 'ref'} under its options gives N=5 C=4 S=1 D=0 I=1"):
        check_scored(score, str(tmp_path / "text"))


def test_a_hypothesis_edited_by_hand_and_rescored_is_refused(tmp_path):
    """Issue 80 round 7, G: decode.info records the SHA-256 of the text that was decoded (write_results)."""
    from wenet_udps.decode.data_list import write_results
    from wenet_udps.scoring.references import reference_record
    from wenet_udps.utils.source_info import read_source

    (tmp_path / "data.list").write_text("{}\n", encoding="utf-8")
    source = {"checkpoint": "/x/final.pt", "sha256": "0" * 64, "config": "/x/train.yaml",
              **reference_record(str(tmp_path / "data.list"),
                                                              {"u1": "A B C", "u2": "D E"}, 0)}
    paths = write_results({"attention": {"u1": "A X C", "u2": "D E F"}}, str(tmp_path / "res"), source=source)
    text = Path(paths[0])
    assert read_source(str(text.parent / "decode.info"))["text_sha256"]
    (tmp_path / "ref").write_text("u1 A B C\nu2 D E\n", encoding="utf-8")

    def rescore() -> Path:
        proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-wer.py"), str(tmp_path / "ref"),
                               str(text)], capture_output=True, text=True, check=True)
        (text.parent / "wer").write_text(proc.stdout, encoding="utf-8")
        return text.parent / "wer"

    check_scored(read_score(str(rescore())), str(text))
    text.write_text("u1 A B C\nu2 D E\n", encoding="utf-8")   # the hypotheses made perfect by hand
    with pytest.raises(ScoreError, match=f"{text} is not the text that was decoded: {text.parent / 'decode.info'} "
                                         f"records SHA-256"):
        check_scored(read_score(str(rescore())), str(text))
