"""corpora.common.check_kaldi_dir: the recipes' check of a prepared dir reads it with the one reader."""
import subprocess
from pathlib import Path

import pytest

from wenet_udps.corpora.common import check_kaldi_dir, write_kaldi_dir
from wenet_udps.utils.cli import UserError

ROOT = Path(__file__).resolve().parents[2]


def test_check_kaldi_dir_reads_as_every_tool_reads(tmp_path):
    """The shell check compared `cut -d' ' -f1` columns: a BOM or a tab (valid Kaldi) failed it, and a duplicate
    key passed it (issue 47's sweep of readers of Kaldi files)."""
    d = tmp_path / "set"
    assert write_kaldi_dir(d, [("b", "/b.wav", "two"), ("a", "/a.wav", "one")]) == 2
    assert check_kaldi_dir(d) == 2
    (d / "wav.scp").write_bytes(b"\xef\xbb\xbfa\t/a.wav\nb /b.wav\n")
    assert check_kaldi_dir(d) == 2
    (d / "text").write_text("a one\nc two\n")
    with pytest.raises(UserError, match="wav.scp and text list different utterance keys .*key 2"):
        check_kaldi_dir(d)
    (d / "text").write_text("a one\na two\n")
    with pytest.raises(UserError, match=r"text:2: duplicate key 'a' \(also on line 1\)"):
        check_kaldi_dir(d)
    (d / "text").write_text("")
    with pytest.raises(UserError, match="text is empty"):
        check_kaldi_dir(d)


def test_the_recipes_shell_function_uses_it(tmp_path):
    d = tmp_path / "set"
    write_kaldi_dir(d, [("a", "/a.wav", "one")])
    (d / "wav.scp").write_bytes(b"\xef\xbb\xbf" + (d / "wav.scp").read_bytes())
    script = f'set -euo pipefail; . {ROOT}/tools/log.sh; . {ROOT}/recipes/common.sh; check_kaldi_dir "$1"'
    ok = subprocess.run(["bash", "-c", script, "bash", str(d)], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and f"{d}: 1 utterances" in ok.stdout + ok.stderr
    (d / "text").write_text("b one\n")
    bad = subprocess.run(["bash", "-c", script, "bash", str(d)], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and "wav.scp and text list different utterance keys" in bad.stderr
