"""run.sh --loso true end to end: two speakers' FSDD recordings, one tiny model per fold, family and seed."""
import re
import subprocess

import pytest

from tests.run_sh_helpers import ROOT, TINY_MODEL


@pytest.mark.slow
def test_loso_over_two_speakers(tmp_path, fsdd_dir):
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    for wav in fsdd_dir.glob("*.wav"):
        if wav.name.split("_")[1] in ("george", "theo"):
            (recordings / wav.name).symlink_to(wav)
    exp, data = tmp_path / "exp" / "loso", tmp_path / "data"
    args = ["--corpus", "fsdd", "--loso", "true", "--fsdd_dir", str(recordings), "--seeds", "1",
            "--download_dir", str(tmp_path / "dl"), "--data", str(data), "--dir", str(exp),
            "--prepare_opts", "--num_train 12 --num_dev 2 --num_test 2 --num_test_unseen 4",
            "--train_override", TINY_MODEL, "--average_num", "1", "--beam_size", "2", "--num_workers", "1",
            "--decode_batch_size", "4", "--families", "scaled_dot udps cosine"]
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "LOSO over 2 speakers: george theo" in proc.stderr
    for spk in ("george", "theo"):
        # The fold's model never heard its speaker: not in train, not in dev.
        for split in ("train", "dev"):
            keys = (data / spk / split / "text").read_text().split("\n")
            assert not any(k.startswith(spk + "_") for k in keys)
        unseen = (data / spk / "test_unseen" / "text").read_text().splitlines()
        assert {line.split("_")[0] for line in unseen} == {spk}
        for variant in ("scaled_dot", "udps", "cosine"):
            assert (exp / f"{spk}_{variant}_seed1" / "test_unseen" / "attention_rescoring" / "text").is_file()
    results = (exp / "RESULTS.md").read_text()
    assert re.search(r"^\| attention_rescoring \| udps \|", results, re.M)
    assert "pooled over folds and seeds" in results and "over 8 utterances x 1 seeds" in results
    # issue 81 item 5: each family against scaled-dot, and UDPS against cosine
    for pair in ("cosine - scaled_dot", "udps - scaled_dot", "udps - cosine"):
        assert f"- {pair}, attention_rescoring: " in results
    assert (exp / "loso.png").stat().st_size > 0
    # Rerun: every fold is done, nothing is retrained.
    again = subprocess.run(["bash", str(ROOT / "run.sh"), *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    log = (exp / "george_seed1.log").read_text()
    assert log.count("final.pt exists, skipping") == 3 and log.count("stage 4: train ") == 3
    # --stage 7 alone (the report, e.g. with --loso_compare) starts no fold job.
    (exp / "RESULTS.md").unlink()
    report = subprocess.run(["bash", str(ROOT / "run.sh"), *args, "--stage", "7"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "fold george" not in report.stderr and (exp / "RESULTS.md").is_file()


def test_loso_names_every_failed_job(tmp_path, fsdd_dir):
    """A fold that fails does not stop the others; the error names each failed job's log."""
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    for wav in fsdd_dir.glob("*.wav"):
        if wav.name.split("_")[1] in ("george", "theo") and wav.name.startswith("0_"):
            (recordings / wav.name).symlink_to(wav)
    exp = tmp_path / "exp"
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "fsdd", "--loso", "true", "--fsdd_dir",
                           str(recordings), "--download_dir", str(tmp_path / "dl"), "--data", str(tmp_path / "data"),
                           "--dir", str(exp), "--prepare_opts", "--no_such_option 1", "--stop_stage", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "LOSO job(s) failed: " in proc.stderr
    named = proc.stderr.split("LOSO job(s) failed: ")[1].split(" (logs in")[0].split()
    assert sorted(named) == ["george.log", "theo.log"]
    for spk in ("george", "theo"):
        assert "no_such_option" in (exp / f"{spk}.log").read_text()


def test_loso_needs_fsdd():
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--corpus", "tiny_zh", "--loso", "true"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--loso true needs speakers to hold out: only --corpus fsdd has them" in proc.stderr.splitlines()[-1]
