"""tools/collect_results.py's published results beside ours (--peer_results)."""
import sys
from pathlib import Path

import pytest

from tests.tools.load import load_tool
from tests.tools.results_helpers import write_wer


def word_scored_exp(tmp_path: Path) -> Path:
    """A word-scored result: "ABC DEX" for "ABC DEF", WER 50 % (one word of two), letter CER 1/6."""
    (tmp_path / "data" / "test").mkdir(parents=True)
    (tmp_path / "data" / "test" / "text").write_text("u0 ABC DEF\n", encoding="utf-8")
    mode_dir = tmp_path / "exp" / "m_scaled_dot" / "test" / "attention"
    mode_dir.mkdir(parents=True)
    (mode_dir / "text").write_text("u0 ABC DEX\n", encoding="utf-8")
    write_wer(mode_dir / "wer", 50.0)
    return tmp_path / "exp"


def test_published_results_print_beside_ours_with_their_source(tmp_path, capsys):
    """A peer-results file: its rows in a table of their own, with the source and what their CER counts, after our
    WER table; our letter CER still in its section. Without the file, no such table."""
    exp = word_scored_exp(tmp_path)
    peers = tmp_path / "peers.tsv"
    peers.write_text("# published\n" + "\t".join(["toolkit", "model", "decoding", "set", "published_set", "lm", "wer",
                                                  "cer", "cer_counts", "source"]) + "\n"
                     + "\t".join(["Kit", "t1", "beam 10", "test", "test", "none", "7.6", "3.6",
                                  "characters, word spaces included", "Kit README (v1, 2021-12-25)"]) + "\n",
                     encoding="utf-8")
    tool = load_tool("collect_results")
    common = ["--exp_dir", str(exp), "--allow_unrecorded", "--plots_dir", str(tmp_path / "plots"), "--data_dir",
              str(tmp_path / "data"), "--metric", "WER"]
    assert tool.main(common + ["--peer_results", str(peers)]) == 0
    text = (exp / "RESULTS.md").read_text(encoding="utf-8")
    ours, published = text.index("| attention WER |"), text.index("## Published results on the same split")
    assert ours < published < text.index("## CER")
    assert ("| Kit | t1 | beam 10 | test | none | 7.6 | 3.6 | characters, word spaces included | "
            "Kit README (v1, 2021-12-25) |") in text and f"`{peers}`" in text
    assert "only the WER compares directly" in text
    assert "| m_scaled_dot | test | 16.67 |" in text   # the letter CER: F->X, one letter in six
    assert "## Published results" in capsys.readouterr().out   # and in the log, beside our table
    assert tool.main(common) == 0
    assert "Published results" not in (exp / "RESULTS.md").read_text(encoding="utf-8")
    assert "Partial corpus" not in text and "comparable" not in text
    # Issue 57, S13: data prepared from a partial copy (--allow_partial true) says so, and the published rows are
    # marked as not comparable
    (tmp_path / "data" / "test" / "partial_corpus").write_text("an4 test: 65 of its 130 utterances\n")
    assert tool.main(common + ["--peer_results", str(peers)]) == 0
    text = (exp / "RESULTS.md").read_text(encoding="utf-8")
    assert text.startswith("# Results\n\n**Partial corpus**: these results come from a copy of the corpus with fewer "
                           "utterances than published (prepared with --allow_partial true): an4 test: 65 of its 130 "
                           "utterances. They do not compare with results on the whole corpus.")
    assert "| Kit README (v1, 2021-12-25) | no: our results are of a partial copy |" in text
    assert "**Not comparable**: this project's results come from a partial copy of the corpus (an4 test: 65 of its " \
        "130 utterances)" in text


def test_a_malformed_peer_results_line_is_one_usage_error_naming_it(tmp_path, capsys, monkeypatch):
    exp = word_scored_exp(tmp_path)
    peers = tmp_path / "peers.tsv"
    peers.write_text("toolkit\tmodel\tdecoding\tset\tpublished_set\tlm\twer\tcer\tcer_counts\tsource\n"
                     "Kit\tt1\tbeam 10\ttest\ttest\tnone\tseven\t-\t-\tKit README\n", encoding="utf-8")
    tool = load_tool("collect_results")
    monkeypatch.setattr(sys, "argv", ["collect_results.py", "--exp_dir", str(exp), "--allow_unrecorded",
                                      "--peer_results", str(peers)])
    with pytest.raises(SystemExit) as e:
        tool.cli.run_cli(tool.main, "collect_results.py")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"collect_results.py: error: {peers}:2: wer must be a percentage >= 0 or '-', got 'seven'\n")
    assert not (exp / "RESULTS.md").exists()
