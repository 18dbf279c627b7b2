"""wenet_udps.results.peers: the file of other toolkits' published results, and its table in RESULTS.md."""
import re
from pathlib import Path

import pytest

from wenet_udps.results.peers import COLUMNS, read_peer_results, section
from wenet_udps.utils.kaldi_files import ListError

ROOT = Path(__file__).resolve().parents[2]
HEADER = "\t".join(COLUMNS)
ROW = "\t".join(["Kit", "transformer (t1)", "beam 10", "dev", "train_dev", "none", "12.9", "7.3",
                 "characters, word spaces included", "Kit's README (v1, 2021-12-25)"])


def write(path: Path, lines) -> Path:
    path.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    return path


def test_rows_are_read_in_order_with_comments_and_blank_lines_skipped(tmp_path):
    no_cer = (ROW.replace("\t7.3\tcharacters, word spaces included\t", "\t-\t-\t")
              .replace("\tdev\ttrain_dev", "\ttest\ttest"))
    rows = read_peer_results(str(write(tmp_path / "p.tsv", ["# published", "", HEADER, ROW, "  # more", no_cer])))
    assert [(r.set, r.published_set, r.wer, r.cer, r.cer_counts) for r in rows] == [
        ("dev", "train_dev", 12.9, 7.3, "characters, word spaces included"), ("test", "test", 12.9, None, "-")]
    assert rows[0].source == "Kit's README (v1, 2021-12-25)" and rows[0].model == "transformer (t1)"


@pytest.mark.parametrize("lines, line, says", [
    (["# c", "toolkit\tmodel\tset\twer"], 2, "expected the tab-separated header"),
    ([HEADER, ROW, ROW.replace("\tbeam 10", "")], 3, "expected 10 tab-separated fields"),
    ([HEADER, ROW.replace("\t", "  ")], 2, "got 1"),   # spaces, not tabs
    ([HEADER, ROW.replace("\t12.9\t", "\t12,9\t")], 2, "wer must be a percentage >= 0 or '-', got '12,9'"),
    ([HEADER, ROW.replace("\t7.3\t", "\t-1\t")], 2, "cer must be a percentage"),
    ([HEADER, ROW.replace("\t12.9\t", "\tnan\t")], 2, "wer must be a percentage"),
    ([HEADER, ROW.replace("\tnone\t", "\t\t")], 2, "empty lm"),
    ([HEADER, ROW.replace("\t12.9\t7.3\tcharacters, word spaces included\t", "\t-\t-\t-\t")], 2, "neither a wer"),
    ([HEADER, ROW.replace("characters, word spaces included", "-")], 2, "cer_counts says what the cer counts"),
])
def test_a_malformed_line_is_one_error_naming_file_and_line(tmp_path, lines, line, says):
    path = write(tmp_path / "peers.tsv", lines)
    with pytest.raises(ListError) as e:
        read_peer_results(str(path))
    assert str(e.value).startswith(f"{path}:{line}: ") and says in str(e.value) and "\n" not in str(e.value)


def test_a_file_without_header_is_an_error_naming_it(tmp_path):
    path = write(tmp_path / "peers.tsv", ["# only comments"])
    with pytest.raises(ListError, match=re.escape(f"{path}: no header line")):
        read_peer_results(str(path))


def test_section_lists_every_row_with_its_source_and_says_what_compares(tmp_path):
    rows = read_peer_results(str(write(tmp_path / "p.tsv", [HEADER, ROW])))
    text = section(rows, "recipes/x/peer_results.tsv", wer_char=False)
    assert text.startswith("\n## Published results on the same split\n")
    assert "`recipes/x/peer_results.tsv`" in text and "letters, without word spaces" in text
    assert "only the WER compares directly" in text
    assert ("| Kit | transformer (t1) | beam 10 | dev (their train_dev) | none | 12.9 | 7.3 | "
            "characters, word spaces included | Kit's README (v1, 2021-12-25) |") in text
    assert "compute-wer.py --char 1" in section(rows, "p.tsv", wer_char=True)
    assert section([], "p.tsv", wer_char=False) == ""


def test_an4_file_holds_espnets_numbers_as_docs_an4_states_them():
    rows = read_peer_results(str(ROOT / "recipes" / "an4" / "peer_results.tsv"))
    doc = (ROOT / "docs" / "an4.md").read_text(encoding="utf-8")
    for r in rows:
        assert r.toolkit == "ESPnet" and "asr_train_asr_transformer_raw_en_bpe30_sp" in r.model
        assert r.source == "ESPnet egs2/an4/asr1/README.md (espnet 0.10.5a1, 2021-12-25)"
        assert r.cer_counts == "characters, word spaces included"
        assert f"{r.wer:g} %" in doc and f"{r.cer:g} %" in doc
    assert {(r.set, r.lm == "none"): r.wer for r in rows} == {
        ("test", True): 7.6, ("test", False): 7.4, ("dev", True): 12.9, ("dev", False): 12.7}
