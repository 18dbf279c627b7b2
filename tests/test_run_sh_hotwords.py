"""run.sh --hotwords true on fake AISHELL-1 and LibriSpeech trees with fake biasing downloads laid out as the real
ones (tests/recipe_trees.py: SeACo-Paraformer's hotword subsets, Le et al.'s per-utterance lists): stage 0
prepares the biasing sets and lists, stage 5 decodes each set with each list and scores it and the decode without
a list on that list, stage 7's RESULTS.md has the B-WER/U-WER/recall/precision/F1 rows; a rerun skips, and a
damaged list is refused naming its file and line."""
import re

import pytest

from tests.recipe_trees import make_aishell, make_le_lists, make_librispeech, make_seaco_lists
from tests.test_run_sh_recipes import PARTIAL, TINY, ok, run_sh

MODES = "ctc_greedy_search ctc_prefix_beam_search attention_rescoring"
BIASED = ["ctc_prefix_beam_search", "attention_rescoring"]   # the modes that take hotwords


def rows(results, section="## Biasing lists"):
    body = results[results.index(section):].split("\n## ")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()
            if line.startswith("| ") and not line.startswith("| experiment")]


@pytest.mark.slow
def test_librispeech_biasing_lists(tmp_path):
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100"])
    make_le_lists(tmp_path / "dl", tmp_path / "dl")
    common = ["--corpus", "librispeech", "--download_dir", tmp_path / "dl", "--data", tmp_path / "data",
              "--dir", tmp_path / "exp" / "ls", "--nbpe", 40, "--train_override", TINY, *PARTIAL,
              "--families", "scaled_dot", "--train_set", "train_100", "--test_sets", "test_clean",
              "--decode_modes", MODES, "--hotwords", "true"]
    log = ok(run_sh(*common, "--stage", 0, "--stop_stage", 5))
    data, exp = tmp_path / "data", tmp_path / "exp" / "ls_scaled_dot"
    assert (data / "test_other" / "biasing" / "list_2000").is_file() and (data / "test_other" / "data.list").is_file()
    for s in ("test_clean", "test_other"):
        assert (exp / s / "ctc_greedy_search" / "wer").is_file()   # decoded without a list too
        for n in (100, 500, 1000, 2000):
            for mode in BIASED:
                d = exp / s / f"hot_{n}" / mode
                info = (d / "decode.info").read_text()
                assert f"context_list: {data / s / 'biasing' / f'list_{n}'}\n" in info
                for report in ("biased_wer", "baseline_biased_wer"):
                    text = (d / report).read_text()
                    assert re.search(r"^B-WER -> [0-9.]+ % N=6 ", text, re.M), text   # a rare word per utterance
            assert not (exp / s / f"hot_{n}" / "ctc_greedy_search").exists()
    assert "list 2000: B-WER -> " in log
    again = ok(run_sh(*common, "--stage", 0, "--stop_stage", 5))
    assert "biasing lists in" in again and "up to date, skipping" in again
    assert again.count("list and options, skipping decoding") == 8 and "and the list" not in again
    ok(run_sh(*common, "--stage", 7, "--stop_stage", 7))
    table = rows((tmp_path / "exp" / "RESULTS.md").read_text())
    assert len(table) == 2 * 4 * 2 * 2   # sets x lists x modes x (without, with)
    assert {(r[1], r[2], r[4]) for r in table} >= {("test_other", "2000", "no list"), ("test_clean", "100", "the list")}
    assert all(r[8] == "6" for r in table)
    # a damaged list: stage 0 refuses it naming the line, and stage 5 keeps the lists it was given
    tsv = tmp_path / "dl" / "biasing" / "test-other.biasing_500.tsv"
    tsv.write_text(tsv.read_text().replace("\t[", " [", 1))
    refused = run_sh(*common, "--stage", 0, "--stop_stage", 0)
    assert refused.returncode != 0 and f"{tsv}:1: 3 tab-separated columns, expected 4" in refused.stderr


@pytest.mark.slow
def test_aishell_hotword_subsets(tmp_path):
    make_aishell(tmp_path / "dl")
    make_seaco_lists(tmp_path / "dl", tmp_path / "dl")
    common = ["--corpus", "aishell", "--download_dir", tmp_path / "dl", "--data", tmp_path / "data",
              "--dir", tmp_path / "exp" / "ai", "--families", "scaled_dot", "--train_override", TINY, *PARTIAL,
              "--decode_modes", MODES, "--hotwords", "true", "--context_score", "4"]
    log = ok(run_sh(*common, "--stage", 0, "--stop_stage", 5))
    assert "1 of its 2 utterances are not in" in log   # the id the fake AISHELL lacks, left out (partial copy)
    exp = tmp_path / "exp" / "ai_scaled_dot"
    for s in ("hotword_dev", "hotword_test"):
        assert (exp / s / "attention_rescoring" / "wer").is_file()
        for name in ("all", "r1"):
            d = exp / s / f"hot_{name}" / "attention_rescoring"
            info = (d / "decode.info").read_text(encoding="utf-8")
            assert "context_file: " in info and "context_score: 4\n" in info and "context_dropped: 0\n" in info
            assert re.search(r"^B-WER -> [0-9.]+ % N=2 ", (d / "biased_wer").read_text(encoding="utf-8"), re.M)
    ok(run_sh(*common, "--stage", 7, "--stop_stage", 7))
    results = (tmp_path / "exp" / "RESULTS.md").read_text(encoding="utf-8")
    assert "| decoded with | CER | U-CER | B-CER | biased N | recall | precision | F1 |" in results
    assert len(rows(results)) == 2 * 2 * 2 * 2
    # a hypothesis edited after scoring: stage 7 names the report and writes no table
    text = exp / "hotword_test" / "hot_r1" / "attention_rescoring" / "text"
    text.write_text("BAC009S0764W0121 的\n", encoding="utf-8")
    stale = run_sh(*common, "--stage", 7, "--stop_stage", 7)
    assert stale.returncode != 0 and f"{text.parent / 'biased_wer'}: {text} changed since it was scored" in stale.stderr
    # options that cannot go with it, before any work
    refused = run_sh("--corpus", "an4", "--hotwords", "true", "--stage", 0, "--stop_stage", 0)
    assert refused.returncode != 0 and "public biasing test sets exist for aishell" in refused.stderr
    refused = run_sh("--corpus", "aishell", "--context_score", "2", "--stage", 0, "--stop_stage", 0)
    assert refused.returncode != 0 and "--context_score weighs the lists of --hotwords true" in refused.stderr
