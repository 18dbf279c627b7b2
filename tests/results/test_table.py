"""wenet_udps.results.table: WeNet's mode order, one row per experiment, set and checkpoint, seed groups as bars."""
from pathlib import Path

import pytest

from wenet_udps.results.table import Experiment, bar_rows, markdown_table, modes_and_sets


def test_columns_wenet_modes_then_each_tagged_lm_then_others_and_dev_sets_first():
    """run.sh --lm_tag T writes <mode>_T beside the untagged LM modes: one LM's two columns stay together."""
    modes = ["attention_rescoring_lm_books", "ctc_prefix_beam_search_lm", "zz_custom", "attention",
             "ctc_prefix_beam_search_lm_books", "attention_rescoring_lm", "ctc_prefix_beam_search_lm_a",
             "attention_rescoring", "ctc_greedy_search", "attention_rescoring_lm_a", "ctc_prefix_beam_search",
             "joint_ctc_attention_lm_books", "joint_ctc_attention", "joint_ctc_attention_lm"]
    e = Experiment("x", Path("exp/x"), wer={(s, m): 1.0 for s in ("test", "dev_clean") for m in modes})
    assert modes_and_sets([e]) == ([
        "attention", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring", "joint_ctc_attention",
        "ctc_prefix_beam_search_lm", "attention_rescoring_lm", "joint_ctc_attention_lm", "ctc_prefix_beam_search_lm_a",
        "attention_rescoring_lm_a", "ctc_prefix_beam_search_lm_books", "attention_rescoring_lm_books",
        "joint_ctc_attention_lm_books", "zz_custom"],
        ["dev_clean", "test"])


def test_two_checkpoints_of_one_set_never_share_a_row():
    e = Experiment("x", Path("exp/x"), model="conformer", attention="udps",
                   wer={("test", "attention"): 12.345, ("test", "ctc_greedy_search"): 6.0},
                   checkpoints={("test", "attention"): "exp/x/avg_5.pt", ("test", "ctc_greedy_search"): "exp/x/a.pt"},
                   rtf={("test", "ctc_greedy_search"): 0.01234})
    rows = markdown_table([e], "WER").splitlines()
    assert rows[0] == ("| model | attention type | set | attention WER | ctc_greedy_search WER | ctc_greedy_search RTF "
                       "| exp | checkpoint |")
    assert rows[2:] == ["| conformer | udps | test | - | 6.00 | 0.0123 | exp/x | exp/x/a.pt |",
                        "| conformer | udps | test | 12.35 | - | - | exp/x | exp/x/avg_5.pt |"]


def test_a_seed_group_is_one_bar_of_mean_and_std_and_other_runs_are_their_own():
    runs = [Experiment(f"a_udps_seed{s}", Path("."), attention="udps", wer={("test", "attention"): w})
            for s, w in ((1, 2.0), (2, 4.0))] + [Experiment("b", Path("."), attention="scaled-dot",
                                                             wer={("test", "attention"): 9.0})]
    rows = bar_rows(runs)
    assert rows[0] == ("b (scaled-dot)", {("test", "attention"): 9.0}, {})
    label, means, stds = rows[1]
    assert label == "a_udps (udps, 2 seeds)" and means == {("test", "attention"): 3.0}
    assert stds[("test", "attention")] == pytest.approx(2 ** 0.5)
