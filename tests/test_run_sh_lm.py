"""run.sh --lm true: stage 2 builds the word LM from the training transcripts (and --lm_text) and refuses text that
holds a dev or test sentence, in one line; without the LM tools it stops before any work, saying how to install."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lm.lm_helpers import need_flashlight, need_lmplz

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").upper().split()


def make_texts(data: Path) -> None:
    """Kaldi texts of an4's sets (train, dev, test) with distinct sentences."""
    for split, start, num in (("train", 0, 40), ("dev", 40, 4), ("test", 44, 4)):
        (data / split).mkdir(parents=True)
        lines = [f"{split}{i:03d} {' '.join(WORDS[(i * 7 + k) % 26] for k in range(3 + i % 4))}"
                 for i in range(start, start + num)]
        (data / split / "text").write_text("\n".join(lines) + "\n")


def run_lm_stage(data: Path, *extra: str, env=None):
    return subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", "2", "--stop_stage", "2",
                           "--data", str(data), "--lm", "true", *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def test_stage2_builds_the_lm_then_skips_it(tmp_path):
    need_lmplz()
    need_flashlight()
    data = tmp_path / "data"
    make_texts(data)
    proc = run_lm_stage(data, "--lm_order", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    arpa = data / "lm" / "lm.arpa"
    assert arpa.is_file() and "ngram 2=" in arpa.read_text()
    again = run_lm_stage(data, "--lm_order", "2")
    assert again.returncode == 0 and "lm.arpa is up to date, skipping" in again.stderr + again.stdout


def test_stage2_refuses_lm_text_with_a_test_sentence(tmp_path):
    need_lmplz()
    data = tmp_path / "data"
    make_texts(data)
    extra = tmp_path / "books.txt"
    test_sentence = (data / "test" / "text").read_text().splitlines()[1].split(" ", 1)[1]
    extra.write_text(f"SOME OTHER WORDS\n{test_sentence.lower()}\n")
    proc = run_lm_stage(data, "--lm_text", str(extra))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "held-out sentence" in lines[-1]
    assert f"{extra}:2" in lines[-1] and "test/text:2" in lines[-1]
    assert not (data / "lm" / "lm.arpa").exists()


def test_lm_without_the_tools_stops_first(tmp_path):
    # python3 linked from a folder without lmplz (its site-packages passed on PYTHONPATH, as a link leaves the venv)
    # and a PATH of system folders: the one-line install hint, before stage 2 does any work.
    if any((Path(d) / "lmplz").exists() for d in ("/usr/bin", "/bin", "/usr/local/bin")):
        pytest.skip("lmplz is installed system-wide: it cannot be hidden")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
    data = tmp_path / "data"
    make_texts(data)
    proc = run_lm_stage(data, env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "tools/install.sh --lm true" in lines[-1], proc.stderr[-2000:]
    assert "lmplz" in lines[-1] and not (data / "lm").exists()
