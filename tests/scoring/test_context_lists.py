"""Per-utterance biasing lists (scoring/context_lists.py): the reader's refusals name the file and line; scoring
with a list per utterance is Le et al.'s (each reference's own rare words, insertions by the hypothesis word) and
is the sum of scoring each utterance alone with its own list; compute-biased-wer.py --biasing_lists."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from wenet_udps.scoring.biasing import score_biased
from wenet_udps.scoring.context_lists import check_keys, read_context_lists
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_format_and_refusals(tmp_path):
    path = tmp_path / "lists"
    path.write_text("u1\tZEBRA\tMARMALADE CROSSING :4\nu2\n\nu3\tQUIZ\n", encoding="utf-8")
    lists = read_context_lists(str(path))
    assert lists == {"u1": (1, ["ZEBRA", "MARMALADE CROSSING :4"]), "u2": (2, []), "u3": (4, ["QUIZ"])}
    check_keys(lists, str(path), ["u3", "u2", "u1"], "set")
    with pytest.raises(UserError, match=rf"^{path}:4: u3 is not an utterance of test/text \(1 key"):
        check_keys(lists, str(path), ["u1", "u2"], "test/text")
    with pytest.raises(UserError, match=rf"^{path}: no line for u4 of set \(1 of its 4 utterances"):
        check_keys(lists, str(path), ["u1", "u2", "u3", "u4"], "set")
    for text, words in (("u1\tA\nu1\tB\n", ":2: u1 was given at line 1 already"),
                        ("u1\tA\t\tB\n", ":1: phrase 2 of u1 is empty"),
                        ("u1\tA\t\n", ":1: phrase 2 of u1 is empty"),
                        ("\tA\n", ":1: '' is not a key"),
                        ("u 1\tA\n", ":1: 'u 1' is not a key"),
                        ("\n", ": no line")):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(UserError, match=f"^{path}{words}"):
            read_context_lists(str(path))


def test_le_et_al_s_counts_by_hand():
    # u1: ref THE CALMED SEA, rare CALMED; hyp THE CALM SEA CALMED: CALMED substituted (B), CALMED inserted (B:
    # the inserted word is one of the reference's rare words, as their score.py counts it).
    # u2: ref A MATED PAIR, rare MATED PAIR (two words); hyp A MATED PAIR PAIR: PAIR inserted (B).
    # u3: ref NO RARE WORD, no list; hyp NO RARE WORDS: a substitution (U).
    refs = {"u1": "THE CALMED SEA", "u2": "A MATED PAIR", "u3": "NO RARE WORD"}
    hyps = {"u1": "THE CALM SEA CALMED", "u2": "A MATED PAIR PAIR", "u3": "NO RARE WORDS"}
    out = score_biased(refs, hyps, {"u1": ["CALMED"], "u2": ["MATED", "PAIR"], "u3": []}, char=False)
    b, u = out.biased, out.unbiased
    assert (b.N, b.S, b.D, b.I) == (3, 1, 0, 2) and (u.N, u.S, u.D, u.I) == (6, 1, 0, 0)
    # CALMED's occurrence in u1's reference is recalled by its (misplaced) hypothesis CALMED
    assert (out.ref_phrases, out.hyp_phrases, out.matched) == (3, 4, 3)
    # the same lists for one set would bias CALMED in u2 too: the per-utterance lists are not a set-wide list
    shared = score_biased(refs, hyps, ["CALMED", "MATED", "PAIR"], char=False)
    assert (shared.biased.N, shared.biased.I) == (3, 2)


WORDS = st.sampled_from("A B C D E".split())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(WORDS, min_size=1, max_size=6), st.lists(WORDS, max_size=6),
                          st.lists(WORDS, max_size=3)), min_size=1, max_size=5))
def test_a_list_per_utterance_is_each_utterance_scored_alone(utts):
    refs = {f"u{i}": " ".join(r) for i, (r, _, _) in enumerate(utts)}
    hyps = {f"u{i}": " ".join(h) for i, (_, h, _) in enumerate(utts)}
    lists = {f"u{i}": words for i, (_, _, words) in enumerate(utts)}
    whole = score_biased(refs, hyps, lists, char=False)
    alone = [score_biased({k: refs[k]}, {k: hyps[k]}, lists[k], char=False) for k in refs]
    for part in ("biased", "unbiased"):
        got = getattr(whole, part)
        assert (got.N, got.S, got.D, got.I) == tuple(sum(getattr(getattr(a, part), f) for a in alone)
                                                     for f in "NSDI")
    assert whole.matched == sum(a.matched for a in alone)
    assert whole.ref_phrases == sum(a.ref_phrases for a in alone)


def test_command_scores_each_utterance_on_its_own_list(tmp_path):
    (tmp_path / "ref").write_text("u1 THE CALMED SEA\nu2 A MATED PAIR\n", encoding="utf-8")
    (tmp_path / "hyp").write_text("u1 THE CALM SEA\nu2 A MATED PAIR\n", encoding="utf-8")
    lists = tmp_path / "rare"
    lists.write_text("u1\tcalmed\nu2\tmated\n", encoding="utf-8")
    script = str(ROOT / "tools" / "compute-biased-wer.py")

    def run(*extra):
        return subprocess.run([sys.executable, script, "--case", "upper", *extra, str(tmp_path / "ref"),
                               str(tmp_path / "hyp")], capture_output=True, text=True, cwd=ROOT, env=ENV)
    proc = run("--biasing_lists", str(lists))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[3:5] == ["U-WER -> 0.00 % N=4 S=0 D=0 I=0", "B-WER -> 50.00 % N=2 S=1 D=0 I=0"]
    lists.write_text("u1\tcalmed\nu2\tmated\nu9\tpair\n", encoding="utf-8")
    proc = run("--biasing_lists", str(lists))
    assert proc.returncode == 2 and f"{lists}:3: u9 is not an utterance of {tmp_path / 'ref'}" in proc.stderr
    proc = run("--biasing_lists", str(lists), "--biasing_list", str(lists))
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
