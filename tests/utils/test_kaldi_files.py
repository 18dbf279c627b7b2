"""The one reader of Kaldi-style files: BOM, duplicate keys, malformed lines, decided once for every tool."""
import pytest

from wenet_udps.utils.kaldi_files import ListError, read_map, read_table, sentences, utf8_lines


def test_a_bom_at_the_start_is_dropped_and_elsewhere_in_a_key_refused(tmp_path):
    path = tmp_path / "text"
    path.write_bytes("\ufeffu1 a  b\nu2 c\n".encode("utf-8"))
    assert read_map(str(path)) == {"u1": "a  b", "u2": "c"}
    assert [line for _, line in utf8_lines(str(path))][0] == "u1 a  b\n"
    path.write_bytes("u1 a\n\ufeffu2 c\n".encode("utf-8"))  # e.g. two files with BOMs concatenated
    with pytest.raises(ListError, match=r"text:2: key '\\ufeffu2' holds a byte-order mark"):
        read_map(str(path))


def test_a_duplicate_key_names_the_file_and_both_lines(tmp_path):
    path = tmp_path / "utt2spk"
    path.write_text("a s1\nb s2\n\na s3\n")
    with pytest.raises(ListError, match=r"utt2spk:4: duplicate key 'a' \(also on line 1\)"):
        read_table(str(path))


def test_fields_and_empty_values(tmp_path):
    path = tmp_path / "segments"
    path.write_text("u1 rec 0 1\nu2 rec 0\n")
    with pytest.raises(ListError, match=r"segments:2: expected 'utt rec start end', got 'u2 rec 0'"):
        read_table(str(path), what="utt rec start end", fields=4)
    text = tmp_path / "text"
    text.write_text("u1\nu2 hi there\n")
    with pytest.raises(ListError, match="text:1: expected"):
        read_map(str(text))
    assert read_map(str(text), allow_empty_value=True) == {"u1": "", "u2": "hi there"}
    assert sentences(str(text)) == ["", "hi there"]
    assert sentences(str(text), keys=False) == ["u1", "u2 hi there"]


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "wav.scp"
    path.write_bytes(b"a /a.wav\nb /\xff.wav\n")
    with pytest.raises(ListError, match=r"wav.scp:2: not UTF-8"):
        read_map(str(path))
