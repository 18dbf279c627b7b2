"""Property-based tests of the one reader of line-based text files (wenet_udps.utils.kaldi_files, issue 80 J):
reading what was written gives it back, whatever the line ends, white space, keys and values; and no input makes it
raise anything but the project's UserError (ListError)."""
import os
import tempfile

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

from tests.text_strategies import key, line_end, line_text, space  # noqa: E402
from wenet_udps.utils.cli import UserError  # noqa: E402
from wenet_udps.utils.kaldi_files import read_map, read_table, sentences, utf8_lines  # noqa: E402


def _file(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="kaldi_prop_")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@given(rows=st.dictionaries(key, line_text, max_size=8), ends=st.lists(line_end, min_size=8, max_size=8),
       seps=st.lists(space, min_size=8, max_size=8), bom=st.booleans(), last_end=st.booleans())
def test_a_table_written_is_read_back(rows, ends, seps, bom, last_end):
    text = "".join(f"{k}{seps[i]}{v}{ends[i] if i < len(rows) - 1 or last_end else ''}"
                   for i, (k, v) in enumerate(rows.items()))
    path = _file((("\ufeff" if bom else "") + text).encode("utf-8"))
    try:
        table = read_table(path, allow_empty_value=True)
        assert {k: v for k, (v, _) in table.items()} == {k: v.strip() for k, v in rows.items()}
        assert [lineno for _, lineno in table.values()] == list(range(1, len(rows) + 1))
        assert read_map(path, allow_empty_value=True) == {k: v.strip() for k, v in rows.items()}
        assert sentences(path) == [v.strip() for v in rows.values()]
    finally:
        os.unlink(path)


@given(lines=st.lists(line_text, max_size=8), end=line_end)
def test_lines_written_are_read_back(lines, end):
    path = _file("".join(line + end for line in lines).encode("utf-8"))
    try:
        if lines and lines[0].startswith("\ufeff"):  # a byte-order mark at the file's start is dropped
            lines = [lines[0][1:], *lines[1:]]
        assert list(utf8_lines(path)) == [(i, t + "\n") for i, t in enumerate(lines, 1)]
        assert sentences(path, keys=False) == [s.strip() for s in lines if s.strip()]
    finally:
        os.unlink(path)


@given(data=st.one_of(st.binary(max_size=200), line_text.map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_any_bytes_are_read_or_refused_as_a_user_error(data):
    path = _file(data)
    try:
        for read in (lambda: list(utf8_lines(path)), lambda: read_table(path), lambda: sentences(path),
                     lambda: read_table(path, allow_empty_value=True, fields=2), lambda: sentences(path, keys=False)):
            try:
                read()
            except UserError as e:
                assert path in str(e) and "\n" not in str(e)
    finally:
        os.unlink(path)
