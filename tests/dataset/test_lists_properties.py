"""Property-based tests of the list readers (wenet_udps.dataset.lists: data.list, shard lists) and of the units file
stage 2 writes for stage 4 (issue 80 J): what is written is read back, whatever the keys, texts and line ends; no
input makes a reader raise anything but the project's UserError."""
import json
import os
import tempfile

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

from tests.text_strategies import key, line_end, line_text  # noqa: E402
from wenet_udps.dataset.lists import list_kind, read_raw_list, read_shard_list  # noqa: E402
from wenet_udps.text.base_tokenizer import read_symbol_table, write_symbol_table  # noqa: E402
from wenet_udps.text.char_tokenizer import char_split  # noqa: E402
from wenet_udps.utils.cli import UserError  # noqa: E402
from wenet_udps.utils.text_norm import TextNorm  # noqa: E402

any_bytes = st.one_of(st.binary(max_size=200), line_text.map(str.encode),
                      st.lists(line_text, max_size=4).map(lambda ls: "\n".join('{"key": %s}' % json.dumps(t)
                                                                               for t in ls).encode()))


def _file(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="lists_prop_")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@given(rows=st.dictionaries(key, st.tuples(line_text, st.text(min_size=1, max_size=10)), min_size=1, max_size=6),
       end=line_end, ascii_only=st.booleans())
def test_a_data_list_written_is_read_back(rows, end, ascii_only):
    lines = [json.dumps({"key": k, "wav": w, "txt": t}, ensure_ascii=ascii_only) for k, (t, w) in rows.items()]
    path = _file(end.join(lines).encode("utf-8"))
    try:
        assert [(s["key"], s["txt"], s["wav"]) for s in read_raw_list(path)] == [
            (k, t, w) for k, (t, w) in rows.items()]
    finally:
        os.unlink(path)


@given(urls=st.lists(key.map(lambda k: f"https://host/{k}.tar"), min_size=1, max_size=5), end=line_end)
def test_a_shard_list_written_is_read_back(urls, end):
    path = _file(end.join(urls).encode("utf-8"))
    try:
        assert read_shard_list(path) == urls and list_kind(path)[0] == "shard"
    finally:
        os.unlink(path)


@given(data=any_bytes)
def test_any_bytes_are_a_list_or_a_user_error(data):
    path = _file(data)
    try:
        for read in (read_raw_list, read_shard_list, list_kind):
            try:
                read(path)
            except UserError as e:
                assert path in str(e) and "\n" not in str(e)
    finally:
        os.unlink(path)


@given(texts=st.lists(line_text, min_size=1, max_size=6), space=st.booleans())
def test_the_units_stage_2_writes_are_read_by_stage_4(texts, space):
    # tools/make_char_units.py's steps: the one normaliser, the char tokenizer's split, the units writer
    tokens = sorted({t for text in texts for t in char_split(TextNorm("keep", "keep")(text),
                                                             split_with_space=space)})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "units.txt")
        written = write_symbol_table(tokens, path)
        assert read_symbol_table(path) == written
