"""run.sh --lm true: stage 2 builds the word LM from the training transcripts (and --lm_text), a character LM for
AISHELL-1, and refuses text that holds a dev or test sentence, in one line; LibriSpeech decodes with OpenSLR 11's
published LM, fetched in stage -1 (from a local mirror here); every LM gets its KenLM binary; without the LM tools
run.sh stops before any work, saying how to install."""
import gzip
import hashlib
import os
import site as sitelib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpora.test_librispeech import serve_file_urls
from tests.lm.lm_helpers import need_build_binary, need_flashlight, need_lmplz
from tests.recipe_trees import make_aishell, make_librispeech
from wenet_udps.lm.arpa import read_arpa
from wenet_udps.lm.binary import read_lm
from wenet_udps.lm.build import build_arpa

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
    need_build_binary()
    need_flashlight()
    data = tmp_path / "data"
    make_texts(data)
    proc = run_lm_stage(data, "--lm_order", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    arpa = data / "lm" / "lm.arpa"
    assert arpa.is_file() and "ngram 2=" in arpa.read_text()
    binary = read_lm(str(data / "lm" / "lm.bin"))
    assert binary.kind == "KenLM binary" and binary.counts == read_arpa(str(arpa)).counts
    again = run_lm_stage(data, "--lm_order", "2")
    log = again.stderr + again.stdout
    assert again.returncode == 0 and "lm.arpa is up to date, skipping" in log and "lm.bin is up to date" in log


def test_stage2_rewrites_a_words_file_an_older_version_wrote(tmp_path):
    """A pair written before the words were bound to their binary (no '#binary' first line, a stamp of the ARPA
    alone) is written again by stage 2, not skipped: stage 5 would refuse it."""
    need_lmplz()
    need_build_binary()
    data = tmp_path / "data"
    make_texts(data)
    assert run_lm_stage(data, "--lm_order", "2").returncode == 0
    lm = data / "lm"
    words = (lm / "lm.bin.words").read_text().splitlines()
    assert words[0].startswith("#binary sha256=")
    (lm / "lm.bin.words").write_text("".join(w + "\n" for w in words[1:]))  # as the older version wrote it
    arpa_md5 = hashlib.md5((lm / "lm.arpa").read_bytes()).hexdigest()
    (lm / "lm.bin.stamp").write_text(f"arpa={arpa_md5}\n")
    proc = run_lm_stage(data, "--lm_order", "2")
    assert proc.returncode == 0 and "KenLM binary" in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert (lm / "lm.bin.words").read_text().splitlines() == words
    assert read_lm(str(lm / "lm.bin")).words == words[1:]


def test_aishell_builds_a_character_lm(tmp_path):
    """The AISHELL-1 recipe (CER-scored) as a user runs it: stage 0 from the corpus tree, stage 2 with --lm true
    learns each transcript character as a word."""
    need_lmplz()
    need_build_binary()
    make_aishell(tmp_path / "dl")
    common = ["bash", str(ROOT / "run.sh"), "--corpus", "aishell", "--download_dir", str(tmp_path / "dl"),
              "--data", str(tmp_path / "data"), "--lm", "true", "--prepare_opts", "--allow_partial true"]
    for stage in ("0", "2"):
        proc = subprocess.run([*common, "--stage", stage, "--stop_stage", stage], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    train = {c for line in (tmp_path / "data" / "train" / "text").read_text(encoding="utf-8").splitlines()
             for c in line.split(" ", 1)[1]}
    words = read_lm(str(tmp_path / "data" / "lm" / "lm.bin")).words
    assert set(words) - {"<unk>", "<s>", "</s>"} == train and all(len(c) == 1 for c in train)


def test_librispeech_decodes_with_the_published_lm(tmp_path):
    """Stage -1 fetches OpenSLR 11's LM named by --lm_name from --lm_mirror; stage 2 decompresses it (with no
    sentence check: its text is not here to check) and converts it to a KenLM binary."""
    need_lmplz()
    need_build_binary()
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100"])
    test_text = sorted((tmp_path / "dl" / "LibriSpeech" / "test-clean").rglob("*.trans.txt"))[0].read_text()
    published = build_arpa([line.split(" ", 1)[1] for line in test_text.splitlines()] + ["ALPHA BRAVO"] * 3,
                           str(tmp_path / "published.arpa"), order=2)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "3-gram.pruned.3e-7.arpa.gz").write_bytes(gzip.compress(Path(published.path).read_bytes()))
    env = {**serve_file_urls(tmp_path), "WENET_UDPS_COMPILE": "0"}
    common = ["bash", str(ROOT / "run.sh"), "--corpus", "librispeech", "--download_dir", str(tmp_path / "dl"),
              "--data", str(tmp_path / "data"), "--download_opts", "--subset 100", "--nbpe", "40", "--lm", "true",
              "--lm_name", "3-gram.pruned.3e-7", "--lm_mirror", f"file://{mirror}", "--prepare_opts",
              "--allow_partial true"]

    def run(first, last):
        proc = subprocess.run([*common, "--stage", first, "--stop_stage", last], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stderr + proc.stdout

    run("-1", "0")
    assert (tmp_path / "wget.log").read_text() == f"file://{mirror}/3-gram.pruned.3e-7.arpa.gz\n"
    run("2", "2")
    lm = tmp_path / "data" / "lm"
    assert (lm / "lm.arpa").read_bytes() == Path(published.path).read_bytes()
    assert read_lm(str(lm / "lm.bin")).counts == published.counts
    again = run("-1", "2")
    assert "already downloaded" in again and "(3-gram.pruned.3e-7) is up to date" in again
    assert "lm.bin is up to date" in again and len((tmp_path / "wget.log").read_text().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["--corpus", "an4", "--lm_name", "4-gram"], "--lm_name/--lm_mirror pick a published LM, and an4 has none"),
    (["--corpus", "librispeech", "--lm_name", "5-gram"], "--lm_name takes one of: 3-gram.pruned.1e-7"),
    (["--corpus", "librispeech", "--lm_order", "4"], "librispeech decodes with its published LM 3-gram.pruned.1e-7"),
])
def test_lm_options_that_would_do_nothing_are_refused(tmp_path, args, message):
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--stage", "2", "--stop_stage", "2", "--data",
                           str(tmp_path / "data"), "--lm", "true", *args], cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and message in lines[-1], proc.stderr[-2000:]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("args,message", [
    (["--lm_text", "README.md"], "--lm_text sets up the word LM of --lm true, and --lm is false"),
    (["--lm_tag", "books"], "--lm_tag sets up the word LM of --lm true, and --lm is false"),
    (["--lm", "true", "--lm_tag", "my_books"], "--lm_tag names folders: letters, digits, '.' and '-'"),
    (["--lm", "true", "--lm_tag", "../x"], "--lm_tag names folders"),
    # issue 68: run.sh checks the LM values only with --lm true; a value given without it is refused all the same
    (["--lm_weights", "0.3 -1"], "--lm_weights tunes the word LM of --lm true, and --lm is false"),
    (["--word-scores=0 1"], "--word_scores tunes the word LM of --lm true, and --lm is false"),
])
def test_lm_options_without_the_lm_or_badly_named_are_refused(tmp_path, args, message):
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", "2", "--stop_stage", "2",
                           "--data", str(tmp_path / "data"), *args], cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and message in lines[-1], proc.stderr[-2000:]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("args,message", [
    (["--lm_weights", ""], "--lm_weights is empty"),
    (["--word_scores", " "], "--word_scores is empty"),
    (["--lm_weights", "0.3 -1"],
     "--lm_weights '0.3 -1': -1 is not a recognize --lm_weight (must be in [0, 5], got -1)"),
    (["--lm_weights", "0.5 nan"], "nan is not a recognize --lm_weight (expected a finite number"),
    (["--word_scores", "0 x"], "--word_scores '0 x': x is not a recognize --word_score (expected a number"),
    (["--lm_prune", "0 x"], "--lm_prune takes integers (lmplz --prune counts, e.g. '0 1 1'), got 'x'"),
    (["--lm_prune", "0 2 1"], "--lm_prune (with --lm_order 3): LM prune '0 2 1': the counts must not decrease"),
    (["--lm_prune", "0 1 1 1"], "LM prune '0 1 1 1': give 1 to 3 counts"),
    (["--lm_order", "2", "--lm_prune", "0 1 1"], "LM prune '0 1 1': give 1 to 2 counts"),
    (["--lm_prune", "1 1 1"], "the first 0 (unigrams are never pruned)"),
    (["--lm_order", "1"], "--lm_order takes an integer >= 2, got '1'"),
    (["--lm_order", "3.5"], "--lm_order takes an integer >= 2, got '3.5'"),
])
def test_lm_values_that_would_stop_a_stage_half_way_are_refused_first(tmp_path, args, message):
    """issue 57 M12: an empty or negative --lm_weights stopped stage 5 after training and decoding without the LM,
    --lm_prune '0 x' stopped stage 2; each is one line naming the option before any stage (the rules of recognize's
    --lm_weight / --word_score and of build_lm, wenet_udps/lm/options.py)."""
    data = tmp_path / "data"
    make_texts(data)
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", "2", "--stop_stage", "5",
                           "--data", str(data), "--lm", "true", *args], cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and message in lines[-1], proc.stderr[-2000:]
    assert "stage 2" not in proc.stderr and not (data / "lm").exists() and not (data / "dict").exists()


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


def test_stage5_refuses_a_set_the_lm_was_not_checked_against(tmp_path):
    """The attack on issue 80's H: an LM built (stage 2) with --test_sets dev, from --lm_text holding test
    sentences, was then used by stage 5 on test, which stage 2 never checked. Stage 5 refuses before any decoding,
    naming the text, and the rebuild it asks for (stage 2 with test among the sets) refuses the leak."""
    need_lmplz()
    need_build_binary()
    need_flashlight()
    data = tmp_path / "data"
    make_texts(data)
    leak = tmp_path / "books.txt"
    leak.write_text("SOME OTHER WORDS\n" + (data / "test" / "text").read_text().splitlines()[1].split(" ", 1)[1] + "\n")
    proc = run_lm_stage(data, "--lm_text", str(leak), "--test_sets", "dev")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", "5", "--stop_stage", "5",
                           "--data", str(data), "--dir", str(tmp_path / "exp" / "an4"), "--lm", "true",
                           "--lm_text", str(leak), "--families", "scaled_dot"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and f"without checking {data / 'test' / 'text'} for held-out sentences" in lines[-1]
    assert "stage 5: decode" not in proc.stderr
    rebuilt = run_lm_stage(data, "--lm_text", str(leak))
    assert rebuilt.returncode != 0 and "held-out sentence" in rebuilt.stderr


def test_lm_without_the_tools_stops_first(tmp_path):
    # python3 linked from a folder without lmplz (its site-packages passed on PYTHONPATH, as a link leaves the venv)
    # and a PATH of system folders: the one-line install hint, before stage 2 does any work.
    if any((Path(d) / "lmplz").exists() for d in ("/usr/bin", "/bin", "/usr/local/bin")):
        pytest.skip("lmplz is installed system-wide: it cannot be hidden")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    site = sitelib.getsitepackages()
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
    data = tmp_path / "data"
    make_texts(data)
    proc = run_lm_stage(data, env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "tools/install.sh --lm true" in lines[-1], proc.stderr[-2000:]
    assert "lmplz" in lines[-1] and not (data / "lm").exists()


TINY_MODEL = ("max_epoch=1 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=64 "
              "decoder_conf.linear_units=64 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=4")


@pytest.mark.slow
def test_stage5_tunes_on_dev_and_decodes_every_set_with_the_lm(tmp_path):
    need_lmplz()
    need_flashlight()
    import numpy as np
    import soundfile as sf
    data, exp = tmp_path / "data", tmp_path / "exp" / "an4"
    make_texts(data)
    rng = np.random.default_rng(0)
    for split in ("train", "dev", "test"):
        lines = []
        for line in (data / split / "text").read_text().splitlines():
            key = line.split()[0]
            sf.write(str(data / split / f"{key}.wav"), (0.05 * rng.standard_normal(48000)).astype(np.float32), 16000)
            lines.append(f"{key} {data / split / key}.wav")
        (data / split / "wav.scp").write_text("\n".join(lines) + "\n")
    def run(stage, *lm_args, grid=("--lm_weights", "0.5 1", "--word_scores", "0 2")):
        return subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "an4", "--stage", stage, "--stop_stage", "5",
                               "--data", str(data), "--dir", str(exp), "--families", "scaled_dot", "--lm", "true",
                               *lm_args, *grid,
                               "--decode_modes", "ctc_greedy_search attention_rescoring joint_ctc_attention",
                               "--joint_ctc_weight", "0.4",
                               "--train_override", TINY_MODEL, "--average_num", "1", "--beam_size", "2",
                               "--num_workers", "1", "--decode_batch_size", "4"],
                              cwd=ROOT, capture_output=True, text=True, timeout=1800)
    proc = run("1", "--lm_order", "2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    d = Path(f"{exp}_scaled_dot")
    tried = sorted(p.name for p in (d / "lm_tune" / "dev").iterdir() if p.is_dir())
    assert tried == ["w0.5_b0", "w0.5_b2", "w1_b0", "w1_b2"]
    rate, weight, score = (d / "lm_tune" / "dev" / "best").read_text().split()
    assert f"w{weight}_b{score}" in tried
    for x in ("dev", "test"):
        for mode in ("ctc_prefix_beam_search_lm", "attention_rescoring_lm"):
            assert len((d / x / mode / "text").read_text().splitlines()) == 4
            assert "Overall -> " in (d / x / mode / "wer").read_text()
            info = (d / x / mode / "decode.info").read_text()
            assert f"lm: {data / 'lm' / 'lm.bin'}" in info and "lm_sha256: " in info
            assert f"lm_weight: {weight}" in info and f"word_score: {score}" in info
        assert (d / x / "attention_rescoring" / "text").is_file()  # the modes without the LM are still there
    # Issue 67: the joint modes, in a recognize of their own with --joint_ctc_weight; with the LM, weights tuned on
    # the joint mode's own dev WER.
    joint = (d / "lm_tune" / "dev_joint" / "best").read_text().split()
    assert sorted(p.name for p in (d / "lm_tune" / "dev_joint").iterdir() if p.is_dir()) == tried
    for x in ("dev", "test"):
        assert "ctc_weight: 0.4" in (d / x / "joint_ctc_attention" / "decode.info").read_text()
        assert "ctc_weight: 0.5" in (d / x / "attention_rescoring" / "decode.info").read_text()
        info = (d / x / "joint_ctc_attention_lm" / "decode.info").read_text()
        assert f"lm_weight: {joint[1]}" in info and f"word_score: {joint[2]}" in info and "ctc_weight: 0.4" in info
        assert "Overall -> " in (d / x / "joint_ctc_attention_lm" / "wer").read_text()
    first = {x: (d / x / "attention_rescoring_lm" / "text").read_text() for x in ("dev", "test")}

    # A second LM (--lm_tag) sits beside the first: its own folder, tuning and result columns; the first stays. (A
    # grid of one point: the grid itself is checked above.)
    proc = run("2", "--lm_order", "3", "--lm_tag", "tri", grid=("--lm_weights", "1", "--word_scores", "0"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ngram 3=" in (data / "lm_tri" / "lm.arpa").read_text()
    assert "ngram 3=" not in (data / "lm" / "lm.arpa").read_text()
    assert (d / "lm_tune_tri" / "dev" / "best").is_file()
    for x in ("dev", "test"):
        assert (d / x / "attention_rescoring_lm" / "text").read_text() == first[x]
        assert f"lm: {data / 'lm' / 'lm.bin'}" in (d / x / "attention_rescoring_lm" / "decode.info").read_text()
        for mode in ("ctc_prefix_beam_search_lm_tri", "attention_rescoring_lm_tri"):
            assert "Overall -> " in (d / x / mode / "wer").read_text()
            assert f"lm: {data / 'lm_tri' / 'lm.bin'}" in (d / x / mode / "decode.info").read_text()
        assert not (d / x / ".decode_lm_tri.partial").exists() and (d / x / "joint_ctc_attention_lm_tri").is_dir()
