"""The public biasing test sets prepared from fake downloads laid out as the real ones (tests/recipe_trees.py):
Le et al.'s LibriSpeech lists become per-utterance context lists and rare-word lists in the corpus' case, the
SeACo-Paraformer AISHELL-1 subsets become sets with their lists; every refusal names the file and line. And the
download scripts fetch the files of the pinned commits and refuse one whose Git blob id is not the published one."""
import http.server
import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.recipe_trees import make_aishell, make_le_lists, make_librispeech, make_seaco_lists
from wenet_udps.corpora.biasing_sets import prepare_aishell, prepare_librispeech
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def libri(tmp_path):
    make_librispeech(tmp_path / "dl", ["test-clean", "test-other"], utts=2)
    make_le_lists(tmp_path / "dl", tmp_path / "dl")
    for part, name in (("test-clean", "test_clean"), ("test-other", "test_other")):
        lines = []
        for trans in sorted((tmp_path / "dl" / "LibriSpeech" / part).rglob("*.trans.txt")):
            lines += trans.read_text().splitlines(True)
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / "text").write_text("".join(sorted(lines)))
    return tmp_path


def test_le_lists_become_context_and_rare_word_lists(libri):
    data = libri / "data"
    written = prepare_librispeech(libri / "dl" / "biasing", data, "upper", allow_partial=False)
    assert len(written) == 16
    rows = {}
    for line in (libri / "dl" / "biasing" / "test-other.biasing_500.tsv").read_text().splitlines():
        key, _, rare, biasing = line.split("\t")
        rows[key] = (json.loads(rare), json.loads(biasing))
    listed = [line.split("\t") for line in (data / "test_other" / "biasing" / "list_500").read_text().splitlines()]
    rare = [line.split("\t") for line in (data / "test_other" / "biasing" / "rare_500").read_text().splitlines()]
    assert [k for k, *_ in listed] == list(rows) and len(listed) == 4   # the file's order, every utterance
    for (key, *words), (key2, *rare_words) in zip(listed, rare):
        assert key == key2 and words == [w.upper() for w in rows[key][1]] and len(words) == 3
        assert rare_words == [w.upper() for w in rows[key][0]]


def test_le_list_refusals_name_file_and_line(libri):
    src, data = libri / "dl" / "biasing", libri / "data"
    path = src / "test-clean.biasing_1000.tsv"
    good = path.read_text()
    lines = good.splitlines(True)

    def refused(text, words, allow_partial=False):
        path.write_text(text)
        with pytest.raises(UserError, match=words):
            prepare_librispeech(src, data, "upper", allow_partial)

    refused(lines[0] + lines[1].replace("\t[", " [", 1), rf"^{path}:2: 3 tab-separated columns, expected 4")
    key, ref, rare, biasing = lines[1].rstrip("\n").split("\t")
    refused(lines[0] + f"{key}\t{ref}\t[\"zzz\"]\t{biasing}\n", rf"^{path}:2: rare word 'zzz' of {key} is not among")
    refused(lines[0] + f"{key}\t{ref}\t{rare}\tnot json\n", rf"^{path}:2: column 4 \(biasing words\) is not a JSON")
    refused(lines[0] + f"{key}\tsomething else\t{rare}\t{biasing}\n" + "".join(lines[2:]),
            rf"^{path}:2: the reference of {key} is not its transcript in {data / 'test_clean' / 'text'}")
    refused("".join(lines[1:]), rf"^{path}: no line for {lines[0].split()[0]} of ")
    extra = good + "999-1-0001\tx\t[]\t[\"y\"]\n"
    refused(extra, rf"^{path}:5: 999-1-0001 is not in {data / 'test_clean' / 'text'} \(1 of the list's 5 .*"
                   "--allow_partial true")
    path.write_text(extra)
    prepare_librispeech(src, data, "upper", allow_partial=True)   # a partial copy: the line is left out
    assert "999-1-0001" not in (data / "test_clean" / "biasing" / "list_1000").read_text()


def test_seaco_subsets_become_sets_with_their_lists(tmp_path):
    make_aishell(tmp_path / "dl")
    make_seaco_lists(tmp_path / "dl", tmp_path / "dl")
    transcript = (tmp_path / "dl" / "data_aishell" / "transcript" / "aishell_transcript_v0.8.txt").read_text(
        encoding="utf-8").splitlines()
    data = tmp_path / "data"
    for split, spk in (("dev", "S0724"), ("test", "S0764")):
        (data / split).mkdir(parents=True)
        rows = [line.split(" ", 1) for line in transcript if spk in line]
        (data / split / "text").write_text("".join(f"{k} {t.replace(' ', '')}\n" for k, t in rows), encoding="utf-8")
        (data / split / "wav.scp").write_text("".join(f"{k} /x/{k}.wav\n" for k, _ in rows), encoding="utf-8")
    src = tmp_path / "dl" / "biasing"
    with pytest.raises(UserError, match=rf"^{src / 'dev' / 'text'}:2: BAC009S0724W9999 is not in "
                                        rf"{data / 'dev' / 'text'} \(1 of the list's 2"):
        prepare_aishell(src, data, allow_partial=False)
    prepare_aishell(src, data, allow_partial=True)
    for name, split in (("hotword_dev", "dev"), ("hotword_test", "test")):
        ours = (data / split / "text").read_text(encoding="utf-8").splitlines()
        assert (data / name / "text").read_text(encoding="utf-8").splitlines() == ours[:1]
        assert (data / name / "wav.scp").read_text().split()[0] == ours[0].split()[0]
        assert (data / name / "biasing" / "list_all").read_text(encoding="utf-8") == \
            (src / split / "hotword.txt").read_text(encoding="utf-8")
        assert (data / name / "biasing" / "list_r1").read_text(encoding="utf-8") == ours[0].split()[1][:2] + "\n"
    (src / "test" / "r1-hotword.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{src / 'test' / 'r1-hotword.txt'}: no phrase"):
        prepare_aishell(src, data, allow_partial=True)


@pytest.mark.parametrize("corpus, first", [("librispeech", "test-clean.biasing_100.tsv"),
                                           ("aishell", "dev/text")])
def test_download_checks_the_git_blob_id(tmp_path, corpus, first):
    served = tmp_path / "served"
    (served / Path(first)).parent.mkdir(parents=True)
    (served / first).write_text("not the published file\n")
    asked = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(served), **k)

        def log_message(self, fmt, *args):
            asked.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = subprocess.run(["bash", str(ROOT / "recipes" / corpus / "download_hotwords.sh"), "--base_url",
                               f"http://127.0.0.1:{server.server_port}", str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    got = subprocess.run(["git", "hash-object", str(served / first)], capture_output=True, text=True).stdout.strip()
    assert asked == [f"/{first}"] and proc.returncode == 1
    assert f"Git blob mismatch for {tmp_path / 'out' / first}" in proc.stderr and f"got {got}, expected " in \
        proc.stderr
