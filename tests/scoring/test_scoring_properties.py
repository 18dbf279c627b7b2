"""Property-based tests of the scorer and compute-wer (issue 80 J): normalise-then-score equals score (the scorer
compares texts in the one normaliser's read form, and a declaration normalises once for all), through the files
that stage 0 writes too; and compute-wer refuses any bad file with the project's UserError only."""
import contextlib
import io
import os
import tempfile

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

from tests.text_strategies import key, line_end, line_text  # noqa: E402
from tests.tools.load import load_tool  # noqa: E402
from wenet_udps.scoring import read_ignore_words, score  # noqa: E402
from wenet_udps.utils.cli import UserError  # noqa: E402
from wenet_udps.utils.kaldi_files import read_map  # noqa: E402
from wenet_udps.utils.text_norm import CASES, TextNorm, read_form  # noqa: E402

COMPUTE_WER = load_tool("compute-wer")
NORMALISE_TEXT = load_tool("normalise_text")
pairs = st.dictionaries(key, st.tuples(line_text, line_text), min_size=1, max_size=6)


def _report(refs, hyps, char):
    report = score(refs, hyps, char=char)
    return report.total, [(k, a.pairs) for k, a in report.utterances], report.clusters


@given(rows=pairs, char=st.booleans())
def test_scoring_the_read_form_is_scoring_the_text(rows, char):
    refs, hyps = {k: r for k, (r, _) in rows.items()}, {k: h for k, (_, h) in rows.items()}
    assert _report(refs, hyps, char) == _report({k: read_form(t) for k, t in refs.items()},
                                                {k: read_form(t) for k, t in hyps.items()}, char)


def _write(path, rows, end):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.writelines(f"{k} {t}{end}" for k, t in rows.items())


def _compute_wer(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = COMPUTE_WER.main([str(a) for a in argv])
    return rc, out.getvalue().split("\n", 2)[-1]  # after the two lines naming the files


def _scores(result):
    """compute-wer's (status, report) without its options line (``Scored with: ...``)."""
    rc, out = result
    return rc, "".join(line for line in out.splitlines(True) if not line.startswith("Scored with: "))


@given(rows=pairs, end=line_end, case=st.sampled_from(CASES), char=st.sampled_from(["0", "1"]))
def test_normalise_then_score_equals_score_normalising(rows, end, case, char):
    # stage 0 rewrites the texts (normalise_text), stage 5 scores them; compute-wer told the declaration scores
    # the raw texts alike
    with tempfile.TemporaryDirectory() as tmp:
        ref, hyp = os.path.join(tmp, "ref"), os.path.join(tmp, "hyp")
        _write(ref, {k: r for k, (r, _) in rows.items()}, end)
        _write(hyp, {k: h for k, (_, h) in rows.items()}, end)
        declared = _compute_wer(f"--char={char}", "--case", case, "--punctuation", "remove", ref, hyp)
        NORMALISE_TEXT.main(["--case", case, "--punctuation", "remove", ref, hyp])
        # the same scores; the options line says what each call was told (the declaration, or none)
        assert _scores(_compute_wer(f"--char={char}", ref, hyp)) == _scores(declared)
        # what stage 0 wrote is read back (by the one reader) as the declaration's form of what it read
        assert read_map(ref, allow_empty_value=True) == {k: TextNorm(case, "remove")(r.strip()).strip()
                                                         for k, (r, _) in rows.items()}


@given(ref=st.one_of(st.binary(max_size=120), line_text.map(str.encode)),
       hyp=st.one_of(st.binary(max_size=120), line_text.map(str.encode)))
def test_compute_wer_on_any_bytes_scores_or_refuses_with_a_user_error(ref, hyp):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, "ref"), os.path.join(tmp, "hyp")]
        for path, data in zip(paths, (ref, hyp)):
            with open(path, "wb") as f:
                f.write(data)
        try:
            rc, _ = _compute_wer("--char=1", *paths)
        except UserError as e:
            assert "\n" not in str(e)
        else:
            assert rc in (0, 1)


@given(data=st.one_of(st.binary(max_size=120), st.lists(line_text, max_size=4).map(lambda ls: "\n".join(ls).encode())),
       case_sensitive=st.booleans())
def test_ignored_words_are_read_or_refused_with_a_user_error(data, case_sensitive):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ignore")
        with open(path, "wb") as f:
            f.write(data)
        try:
            words = read_ignore_words(path, case_sensitive)
        except UserError as e:  # was a bare ValueError for a line of two words
            assert path in str(e) and "\n" not in str(e)
        else:
            assert all(w == read_form(w) and len(w.split()) == 1 for w in words)
