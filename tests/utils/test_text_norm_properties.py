"""Property-based tests of the one normaliser (wenet_udps.utils.text_norm, issue 80 J): its read form and every
declaration are stable (normalising twice is normalising once), their output is in the read form, and a
declaration's only error is the project's UserError (TextNormError)."""
import unicodedata

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

from tests.text_strategies import line_text  # noqa: E402
from wenet_udps.utils.text_norm import CASES, NormCounts, TextNorm, TextNormError, match_form, read_form  # noqa: E402

DECLARED = st.builds(TextNorm, st.sampled_from(CASES), st.sampled_from(["keep", "remove"]))


def in_read_form(text: str) -> bool:
    return unicodedata.is_normalized("NFKC", text) and not any(unicodedata.category(c) == "Cf" for c in text)


@given(text=line_text)
def test_read_form_is_stable_and_holds_no_format_character(text):
    form = read_form(text)
    assert in_read_form(form) and read_form(form) == form


@given(text=line_text, norm=DECLARED)
def test_a_declaration_normalises_once_for_all(text, norm):
    once = norm(text)
    assert in_read_form(once) and norm(once) == once


@given(text=line_text)
def test_match_form_is_stable(text):
    assert match_form(match_form(text)) == match_form(text)


@given(texts=st.lists(line_text, max_size=5), case=st.sampled_from(CASES))
def test_refuse_raises_only_its_user_error(texts, case):
    norm = TextNorm(case, "refuse")
    try:
        rows, counts = norm.lines(enumerate(texts, 1), "text")
    except TextNormError as e:
        assert str(e).startswith("text: ") and "\n" not in str(e)
    else:
        assert isinstance(counts, NormCounts) and [t for _, t in rows] == [norm(t) for t in texts]
