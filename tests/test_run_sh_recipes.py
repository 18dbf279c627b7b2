"""The AISHELL-1 and LibriSpeech recipes through run.sh, as a user runs them, on fake corpora in the real folder
layouts (tests/recipe_trees.py): noise audio, real file naming and transcript formats, a tiny model, one epoch."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recipe_trees import make_aishell, make_an4, make_librispeech

ROOT = Path(__file__).resolve().parents[1]
TINY = ("max_epoch=1 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=32 "
        "decoder_conf.linear_units=32 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=2 accum_grad=1")
MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]
LIBRI_SETS = ["dev_clean", "dev_other", "test_clean", "test_other"]
# Eager UDPS tiles: compiling them costs ~30 s on a cold cache, and the numbers are the same.
ENV = dict(os.environ, WENET_UDPS_COMPILE="0")
PARTIAL = ["--prepare_opts", "--allow_partial true"]   # the fake trees hold a few utterances of each part


def run_sh(*args):
    proc = subprocess.run(["bash", str(ROOT / "run.sh"), "--num_workers", "0", "--beam_size", "2", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=ENV)
    return proc


def ok(proc):
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stderr + proc.stdout


@pytest.mark.slow
def test_aishell_recipe(tmp_path):
    make_aishell(tmp_path / "dl")
    prefix = tmp_path / "exp" / "ai"
    # --config without --families trains what the conf says; a site-set override makes only the encoder UDPS,
    # and the exp dir and table row say so.
    common = ["--corpus", "aishell", "--download_dir", tmp_path / "dl", "--data", tmp_path / "data",
              "--dir", prefix, "--config", "conf/aishell/train_conformer.yaml", *PARTIAL]
    overrides = TINY + " save_interval=1 att_udps=enc_self"
    log = ok(run_sh(*common, "--stage", 0, "--stop_stage", 7, "--train_override", overrides))
    exp = Path(f"{prefix}_udps_enc_self")
    assert (exp / "final.pt").is_file() and not Path(f"{prefix}_scaled_dot").exists()
    for s in ("dev", "test"):
        for mode in MODES:
            assert re.search(r"^Overall -> [0-9.]+ %", (exp / s / mode / "wer").read_text(), re.M)
    assert "avg_1.pt" in log and (exp / "avg_1.pt").is_file() and not (exp / "avg_5.pt").exists()
    assert "parity checked on test" in log and "parity OK on 2 utterances" in log   # real test utterances
    results = (tmp_path / "exp" / "RESULTS.md").read_text()
    assert "| attention_rescoring CER |" in results
    assert re.search(r"^\| conformer \| udps \(enc-self\) \| dev \|", results, re.M)
    assert re.search(r"^\| conformer \| udps \(enc-self\) \| test \|", results, re.M)
    # Shorter than log_interval: no per-step scalars, yet loss and alpha/beta plots from the per-epoch ones.
    plots = {p.name for p in (tmp_path / "exp" / "plots").iterdir()}
    assert plots == {"loss.png", "cer.png", "udps_ai_udps_enc_self_epochs.png", "attention_ai_udps_enc_self.png",
                     "attention_entropy.png", "attention_entropy.tsv"}

    # Same command again: every stage's stamp matches, nothing is redone.
    again = ok(run_sh(*common, "--stage", 0, "--stop_stage", 6, "--train_override", overrides))
    assert "stage 4: train" not in again and "final.pt exists, skipping" in again
    assert "skipping averaging" in again and "skipping decoding" in again and "export is up to date" in again
    assert "stage 0: " in again and "already prepared" in again

    # Interrupted after step 4: the epoch's checkpoint never came, and step_4.pt was cut short by the crash.
    for name in ("final.pt", "epoch_0.pt", "epoch_0.yaml"):
        (exp / name).unlink()
    step4 = exp / "step_4.pt"
    step4.write_bytes(step4.read_bytes()[:1000])
    # A second training on a busy exp dir is refused naming the holder's pid, before bin.train starts
    # (tools/run_lib.sh lock_exp, the same words as bin.train's lock).
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from wenet_udps.train.run_dir import RunLock; RunLock(sys.argv[1]); "
         "print('locked', flush=True); time.sleep(600)", str(exp)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = run_sh(*common, "--stage", 4, "--stop_stage", 4, "--train_override", overrides)
        assert busy.returncode != 0 and f"is in use by a training run (pid {holder.pid})" in busy.stderr
        assert not (exp / "final.pt").exists()
    finally:
        holder.kill()
        holder.wait()
    # The run resumes from its newest checkpoint that verifies, passing over the damaged one; on the CPU the
    # training's own lines go to its train.log (--cpu_jobs), after the interrupted run's.
    resumed = ok(run_sh(*common, "--stage", 4, "--stop_stage", 4, "--train_override", overrides))
    log = (exp / "train.log").read_text()
    assert f"log: {exp}/train.log" in resumed and log.count("model: conformer encoder") == 2
    assert "step_4.pt" in log and f"resuming from {exp}/step_3.pt" in log
    assert (exp / "final.pt").is_file() and (exp / "epoch_0.pt").is_file()

    # Changed settings never reuse or overwrite a finished run silently (issue 57, M10: one rule, bin.train's resume
    # check, asked by stage 4 before it trains): another batch setting is refused before anything is written, naming
    # it and the ways on ...
    stamp = (exp / ".train.stamp").read_text()
    more = overrides.replace("max_epoch=1", "max_epoch=2")
    refused = run_sh(*common, "--stage", 4, "--stop_stage", 4, "--train_override", more + " accum_grad=2")
    line = refused.stderr.splitlines()[-1]
    assert refused.returncode == 1 and f"stage 4: {exp} holds a run trained with other settings: --checkpoint " \
        f"{exp}/epoch_0.pt: this resume changes what the run trains on: accum_grad: 1 -> 2" in line
    assert "--force true" in line and (exp / ".train.stamp").read_text() == stamp
    # ... and so are CMVN stats recomputed under the same name (another normalisation) ...
    cmvn = tmp_path / "data" / "train" / "global_cmvn"
    stats = cmvn.read_text()
    cmvn.write_text(json.dumps({**json.loads(stats), "frame_num": json.loads(stats)["frame_num"] * 2}))
    refused = run_sh(*common, "--stage", 4, "--stop_stage", 4, "--train_override", more)
    assert refused.returncode == 1 and f"--cmvn: {cmvn} changed since (another SHA-256)" in refused.stderr
    assert not (exp / "epoch_1.pt").exists()
    cmvn.write_text(stats)
    # ... but more epochs (as bin.train allows) train on from the newest checkpoint; averaging follows the new
    # checkpoints and mode.
    cont = ok(run_sh(*common, "--stage", 4, "--stop_stage", 5, "--train_override", more, "--average_mode", "latest"))
    log = (exp / "train.log").read_text()
    assert (exp / "final.pt").samefile(exp / "epoch_1.pt") and f"resuming from {exp}/epoch_0.pt" in log
    assert log.count("auto: resuming from") == 2
    assert "average 2 checkpoints (latest)" in cont and "skipping decoding" not in cont


def libri_common(tmp_path, *extra):
    return ["--corpus", "librispeech", "--download_dir", tmp_path / "dl", "--data", tmp_path / "data",
            "--dir", tmp_path / "exp" / "ls", "--nbpe", 40, "--train_override", TINY, *PARTIAL, *extra]


@pytest.mark.slow
def test_librispeech_960_recipe(tmp_path):
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100",
                                       "train-clean-360", "train-other-500"])
    # Stages 6 (export) and 7's sherpa-onnx decodes are the same for every corpus (the tiny corpus' test and the
    # AISHELL test above run them): left out here, as in the AN4 test.
    log = ok(run_sh(*libri_common(tmp_path, "--families", "scaled_dot", "--stage", 0, "--stop_stage", 5)))
    ok(run_sh(*libri_common(tmp_path, "--families", "scaled_dot", "--stage", 7, "--stop_stage", 7)))
    data = tmp_path / "data"
    assert (data / "lang_bpe" / "train_960_unigram40.model").is_file()
    assert "training on train_100" not in log
    exp = tmp_path / "exp" / "ls_scaled_dot"
    for s in LIBRI_SETS:
        for mode in MODES:
            assert re.search(r"^Overall -> [0-9.]+ %", (exp / s / mode / "wer").read_text(), re.M)
        assert len((exp / s / "attention" / "text").read_text().splitlines()) == 6
    results = (tmp_path / "exp" / "RESULTS.md").read_text()
    assert "| attention_rescoring WER |" in results
    assert [ln.split("|")[3].strip() for ln in results.splitlines() if ln.startswith("| conformer")] == LIBRI_SETS


@pytest.mark.slow
def test_librispeech_100h_only_recipe(tmp_path):
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100"])
    conf = "conf/librispeech/train_conformer.yaml"
    ok(run_sh(*libri_common(tmp_path, "--train_set", "train_100", "--config", conf, "--stage", 0,
                            "--stop_stage", 5)))
    assert (tmp_path / "data" / "lang_bpe" / "train_100_unigram40.model").is_file()
    exp = tmp_path / "exp" / "ls_scaled_dot"       # the conf's att_udps: false
    for s in LIBRI_SETS:
        for mode in MODES:
            assert re.search(r"^Overall -> [0-9.]+ %", (exp / s / mode / "wer").read_text(), re.M)
    # Without --train_set, run.sh sees that only train_100 was prepared, says so and uses it.
    log = ok(run_sh(*libri_common(tmp_path, "--config", conf, "--stage", 1, "--stop_stage", 2)))
    assert "training on train_100" in log and "--train_set train_100" in log
    assert "global_cmvn is up to date" in log and "units.txt is up to date" in log


@pytest.mark.slow
def test_an4_recipe(tmp_path):
    """Stages -1 to 5 from a local AN4 copy (stage -1 writes nothing into it), ESPnet's split, BPE 30, WER and CER;
    then stage 7's RESULTS.md with ESPnet's published rows."""
    train = [(f"{g}{s:03d}", [f"an{100 + 10 * s + u}" for u in range(4)]) for s in range(8) for g in "fm"]
    make_an4(tmp_path / "dl", train=train, test=(("fcaw", ("an409", "cen3", "cen4")),))
    log = ok(run_sh("--corpus", "an4", "--download_dir", tmp_path / "dl", "--data", tmp_path / "data",
                    "--dir", tmp_path / "exp" / "an4", "--families", "scaled_dot", "--prepare_opts",
                    "--num_dev 8 --allow_partial true", "--train_override", TINY, "--stage", -1, "--stop_stage", 5))
    assert "nothing downloaded; stage 0 checks that it is the whole corpus" in log
    assert "a partial copy, used as asked (--allow_partial true): an4 test: 3 of its 130 utterances" in log
    assert (tmp_path / "data" / "lang_bpe" / "train_unigram30.model").is_file()
    dev = [line.split()[0] for line in (tmp_path / "data" / "dev" / "text").read_text().splitlines()]
    assert dev == sorted(dev) and len(dev) == 8 and {k.split("-")[0] for k in dev} == {"f000", "f001"}
    exp = tmp_path / "exp" / "an4_scaled_dot"
    for s in ("dev", "test"):
        for mode in MODES:
            assert re.search(r"^Overall -> [0-9.]+ %", (exp / s / mode / "wer").read_text(), re.M)
    # Issue 57, S15: each result records the references it was decoded with (stage 5's compute-wer and stage 7's
    # collect_results --data_dir check them); a result without the record is decoded again, not skipped.
    info = exp / "test" / "attention" / "decode.info"
    assert f"test_data: {tmp_path / 'data' / 'test' / 'data.list'}\n" in info.read_text()
    assert "refs_sha256: " in info.read_text() and "refs_decoded: 3\n" in info.read_text()
    info.write_text("".join(x for x in info.read_text().splitlines(True) if not x.startswith("refs_")))
    again = ok(run_sh("--corpus", "an4", "--data", tmp_path / "data", "--dir", tmp_path / "exp" / "an4", "--families",
                      "scaled_dot", "--train_override", TINY, "--stage", 5, "--stop_stage", 5))
    assert f"stage 5: decode test with {exp}/avg_1.pt" in again and "refs_sha256: " in info.read_text()
    # Stage 7 (14 s; stage 6's export left out): RESULTS.md has our WER, then ESPnet's published rows with their
    # source (settings.sh's peer_results), then our letter CER.
    ok(run_sh("--corpus", "an4", "--data", tmp_path / "data", "--dir", tmp_path / "exp" / "an4",
              "--families", "scaled_dot",
              "--stage", 7, "--stop_stage", 7))
    results = (tmp_path / "exp" / "RESULTS.md").read_text()
    ours, peers, cer = (results.index(h) for h in ("| attention_rescoring WER |", "## Published results",
                                                    "| attention_rescoring CER |"))
    assert ours < peers < cer and re.search(r"^\| an4_scaled_dot \| test \| [0-9.]+ \|", results, re.M)
    # a partial copy (issue 57, S13): said under the title, and ESPnet's rows marked as not comparable
    assert "**Partial corpus**" in results and "an4 test: 3 of its 130 utterances" in results
    assert "no: our results are of a partial copy |" in results
    assert re.search(r"^\| ESPnet \| .* \| test \| none \| 7\.6 \| 3\.6 \| characters, word spaces included \| "
                     r"ESPnet egs2/an4/asr1/README\.md \(espnet 0\.10\.5a1, 2021-12-25\) \| no: our results are of a "
                     r"partial copy \|$", results, re.M)
