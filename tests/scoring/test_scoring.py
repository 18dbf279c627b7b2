"""wenet_udps.scoring: the tokenisation, cluster and alignment rules, unit by unit (whole reports are compared
with WeNet's own script in tests/tools/test_compute_wer_parity.py)."""
import pytest

from wenet_udps.scoring import align, char_tokens, cluster_of, confusions, error_rate, read_text, score, tokenize


@pytest.mark.parametrize("text, tokens", [
    ("我们用wenet训练", ["我", "们", "用", "wenet", "训", "练"]),
    ("it's e-mail 3.5 hello, .", ["it's", "e-mail", "3.5", "hello,", "."]),  # ASCII runs stay whole
    ("你好，世界！", ["你", "好", "世", "界"]),                              # listed CJK punctuation dropped
    ("（括号）", ["（", "括", "号", "）"]),                                  # unlisted full-width marks stay
    ("café", ["caf", "é"]),                                                # a non-ASCII letter starts a token
    ("<unk><noise>x", ["<unk>", "<noise>", "x"]),
    ("a\u3000b\tc", ["a", "b", "c"]),
])
def test_char_tokens(text, tokens):
    assert char_tokens(text) == tokens


def test_tokenize_case_ignore_and_tags():
    assert tokenize("Hello <unk>World abc<x>def uh", char=False, ignore={"UH"}) == ["HELLO", "WORLD", "ABCDEF"]
    assert tokenize("Hello <unk>", char=False, case_sensitive=True, remove_tags=False) == ["Hello", "<unk>"]
    # Upper-casing comes after splitting: "ß" -> "SS" must not join "stra" and "ße" into one ASCII run.
    assert tokenize("straße", char=True) == ["STRA", "SSE"]


@pytest.mark.parametrize("token, cluster", [
    ("中", "Mandarin"), ("HELLO", "English"), ("IT'S", "English"), ("É", "English"), ("3.5", "Number"),
    ("ひ", "Japanese"), ("カ", "Other"), ("A1", "Other"), ("...", "Other"), ("Ａ", "Other"), ("\x07", "Other"),
])
def test_cluster_of(token, cluster):
    assert cluster_of(token) == cluster


def test_alignment_prefers_deletion_then_insertion_on_ties():
    result = align(["A", "B"], ["B", "C"])
    assert result.pairs == [("A", ""), ("B", "B"), ("", "C")]
    assert (result.counts.C, result.counts.S, result.counts.D, result.counts.I) == (1, 0, 1, 1)
    # Equal cost as 2 substitutions: the deletion-first order still takes the match.
    result = align(["X", "A"], ["A", "Y"])
    assert (result.counts.C, result.counts.S, result.counts.D, result.counts.I) == (1, 0, 1, 1)


def test_alignment_minimum_edits_on_random_pairs():
    import random
    rng = random.Random(0)
    for _ in range(200):
        ref = [rng.choice("ABC") for _ in range(rng.randint(0, 8))]
        hyp = [rng.choice("ABC") for _ in range(rng.randint(0, 8))]
        c = align(ref, hyp).counts
        # Plain Levenshtein distance, computed independently.
        d = list(range(len(hyp) + 1))
        for i, r in enumerate(ref, 1):
            prev, d[0] = d[0], i
            for j, h in enumerate(hyp, 1):
                prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
        assert c.S + c.D + c.I == d[-1] and c.C + c.S + c.D == len(ref) and c.C + c.S + c.I == len(hyp)


def test_score_clusters_and_missing_policy():
    refs = {"u1": "我 爱 AI", "u2": "a b"}
    hyps = {"u1": "我 AI 2"}
    report = score(refs, hyps, char=True)
    assert list(report.clusters) == ["Mandarin", "English", "Number"]  # first appearance, hypothesis first
    assert str(report.clusters["Mandarin"]) == "50.00 % N=2 C=1 S=0 D=1 I=0"
    assert str(report.clusters["Number"]) == "0.00 % N=0 C=0 S=0 D=0 I=1"
    assert str(report.total) == "80.00 % N=5 C=2 S=0 D=3 I=1" and report.missing == ["u2"]
    assert str(score(refs, hyps, char=True, missing="skip").total) == "66.67 % N=3 C=2 S=0 D=1 I=1"
    assert error_rate(refs, hyps, char=True) == pytest.approx(80.0)
    with pytest.raises(ValueError, match="deletions, skip"):
        score(refs, hyps, char=True, missing="drop")


def test_read_text(tmp_path):
    path = tmp_path / "text"
    path.write_bytes("\ufeffu1 a  b\r\nu2\n\nu3 中 文 \n".encode("utf-8"))
    # inner spaces kept (character mode), the line's ends stripped as every reader of Kaldi files strips them
    assert read_text(str(path)) == {"u1": "a  b", "u2": "", "u3": "中 文"}


def test_confusions_count_substitutions_insertions_and_deletions():
    report = score({"a": "ONE TWO THREE", "b": "FOUR FIVE"}, {"a": "ONE THREE THREE", "b": "FOUR FIVE SIX"},
                       char=False)
    assert confusions(report) == {("TWO", "THREE"): 1, ("", "SIX"): 1}
    report = score({"a": "ONE TWO"}, {"a": "ONE"}, char=False)
    assert confusions(report) == {("TWO", ""): 1}
