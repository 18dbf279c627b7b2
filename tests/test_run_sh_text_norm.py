"""run.sh applies the recipe's declared text normalisation (text_case / text_punctuation, recipes/<corpus>/settings.sh)
at stage 0 (the targets) and stage 2 (units); undeclared punctuation stops the run naming the lines (issue 57, A)."""
import re
import subprocess
from pathlib import Path

from tests.recipe_trees import make_an4
from wenet_udps.text.base_tokenizer import read_symbol_table

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--token_type", "char", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def an4_with_punctuation(root: Path) -> Path:
    make_an4(root, audio=False)
    trans = root / "an4" / "etc" / "an4_train.transcription"
    lines = trans.read_text().splitlines()
    lines[0] = re.sub(r"<s> (\S+) (\S+) </s>", r"<s> \1, \2. </s>", lines[0]).replace("<s> ", "<s> \"", 1)
    lines[1] = re.sub(r"<s> (\S+)", lambda m: f"<s> {m.group(1).capitalize()}", lines[1])
    trans.write_text("\n".join(lines) + "\n")
    return root


def test_stage0_normalises_as_declared_and_counts(tmp_path):
    dl, data = an4_with_punctuation(tmp_path / "dl"), tmp_path / "data"
    common = ["--download_dir", str(dl), "--data", str(data), "--prepare_opts", "--num_dev 1 --allow_partial true"]
    refused = run(*common, "--stage", "0", "--stop_stage", "0")
    last = refused.stderr.strip().splitlines()[-1]
    assert refused.returncode != 0 and f"{data}/train/text:" in last and "--text_punctuation" in last
    proc = run(*common, "--stage", "0", "--stop_stage", "0", "--text_punctuation", "remove")
    assert proc.returncode == 0, proc.stderr[-3000:]
    units = run(*common, "--stage", "2", "--stop_stage", "2", "--text_punctuation", "remove")
    assert units.returncode == 0, units.stderr[-3000:]
    text = "".join(line.split(" ", 1)[1] for split in ("train", "dev", "test")
                   for line in (data / split / "text").read_text().splitlines(keepends=True))
    assert not re.search(r"[,.\"]", text) and text == text.upper()
    assert "punctuation marks removed from 1" in proc.stdout and "case changed on 1" in proc.stdout
    units = {line.split()[0] for line in (data / "dict" / "lang_char.txt").read_text().splitlines()}
    assert not any(re.search(r"[,.\"]", u) for u in units) and all(u == u.upper() or u[0] == "<" for u in units)
    again = run(*common, "--stage", "0", "--stop_stage", "0", "--text_punctuation", "remove")
    assert "already prepared" in again.stderr
    # another declaration: prepared again (upper case cannot be undone in place)
    kept = run(*common, "--stage", "0", "--stop_stage", "0", "--text_punctuation", "keep", "--text_case", "keep")
    assert kept.returncode == 0 and "preparing" in kept.stderr and "text_case: 'upper' -> 'keep'" in kept.stderr
    assert any("," in (data / split / "text").read_text() for split in ("train", "dev"))


def test_stage2_reports_undeclared_punctuation_in_a_prepared_text(tmp_path):
    # a data dir prepared by hand (stage 0 skipped): stage 2 names the lines instead of making "ZERO," a unit
    data = tmp_path / "data"
    for split in ("train", "dev", "test"):
        (data / split).mkdir(parents=True)
        (data / split / "text").write_text("u1 ZERO ONE\nu2 ZERO, TWO\nu3 THREE\n")
    proc = run("--data", str(data), "--stage", "2", "--stop_stage", "2")
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and f"{data}/train/text:2 ','" in last
    assert not (data / "dict" / "lang_char.txt").exists()


def test_a_dir_prepared_before_normalisation_is_not_prepared_again(tmp_path):
    dl, data = an4_with_punctuation(tmp_path / "dl"), tmp_path / "data"
    common = ["--download_dir", str(dl), "--data", str(data), "--prepare_opts", "--num_dev 1 --allow_partial true",
              "--stage", "0", "--stop_stage", "0", "--text_punctuation", "keep"]
    assert run(*common).returncode == 0
    (data / ".text_norm.stamp").unlink()   # as a dir of an earlier version has it
    proc = run(*common)
    assert proc.returncode == 0 and "already prepared" in proc.stderr and "normalise the transcripts" in proc.stderr


def test_a_bom_inside_a_transcript_line_reaches_no_stage(tmp_path):
    # issue 80 D: a transcript saved by a Windows tool, its text (after the key) starting with U+FEFF: stage 0 kept
    # it, stage 2 made it a unit, and stage 4 refused the units file stage 2 wrote ("holds a byte-order mark")
    dl, data = tmp_path / "dl", tmp_path / "data"
    make_an4(dl, audio=False)
    trans = dl / "an4" / "etc" / "an4_train.transcription"
    lines = trans.read_text().splitlines()
    lines[0] = lines[0].replace("<s> ", "<s> \ufeff", 1)
    trans.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["--download_dir", str(dl), "--data", str(data), "--prepare_opts", "--num_dev 1 --allow_partial true"]
    for stage in ("0", "2"):
        proc = run(*common, "--stage", stage, "--stop_stage", stage)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\ufeff" not in (data / "train" / "text").read_text(encoding="utf-8")
    assert read_symbol_table(str(data / "dict" / "lang_char.txt"))  # what stage 4's tokenizer reads first
