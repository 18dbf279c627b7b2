"""Issue 57: one audio reader, with one policy, behind every entry point that reads audio.

A stereo file and a NIST SPHERE file (AN4's format) cut to half its bytes are refused alike by the raw and shard
data lists, training, recognize, the CMVN tool, make_shard_list, sherpa_decode, the Python API (a file, an array)
and streaming: skipped with a warning and counted as ``bad_audio`` where a list is read, a one-line UserError where
one recording is. With ``dataset_conf.channel: 1`` each reads channel 1 of the stereo file, and gets exactly what
it gets from the mono file of that channel; the cut file stays refused.
"""
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import wenet_udps
from tests.tools.load import run_tool
from tests.train.train_helpers import ROOT, make_model_dir, run_env
from wenet_udps.bin import export, recognize, sherpa_decode
from wenet_udps.config import load_config
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.dataset.dataset import DataTally
from wenet_udps.decode.data_list import eval_dataset
from wenet_udps.text import init_tokenizer
from wenet_udps.utils.cli import UserError

SR = 8000
WORDS = {"good": "ONE", "stereo": "TWO", "cut": "THREE"}
CHANNELS = "has 2 channels: set dataset_conf.channel to the one to read (0 to 1)"
CUT = "truncated audio"


def _exp(path: Path, channel, **kwargs) -> Path:
    """A model dir whose train.yaml has ``dataset_conf.channel: channel``; every pass runs with what it could use
    (max_bad_fraction 1), so that the refusals are seen per utterance, not as a failed pass."""
    path.mkdir()
    make_model_dir(path, **kwargs)
    config = load_config(str(path / "train.yaml"))
    config["dataset_conf"].update({"max_bad_fraction": 1.0, "channel": channel})
    config["max_epoch"] = 1
    save_yaml(config, str(path / "train.yaml"))
    return path


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """Audio; per channel policy (unset, channel 1) a full-context model dir and a streaming one; a sherpa-onnx
    export of the full-context model (sherpa_decode reads the audio by its --config, so one export serves both)."""
    tmp = tmp_path_factory.mktemp("walk")
    rng = np.random.default_rng(0)
    t = np.arange(int(1.6 * SR)) / SR
    speech, other = ((0.1 * rng.standard_normal(t.size) + 0.3 * np.sin(2 * np.pi * f * t)) * 32767
                     for f in (300, 900))
    speech, other = speech.astype(np.int16), other.astype(np.int16)
    sf.write(str(tmp / "good.wav"), speech, SR, subtype="PCM_16")
    sf.write(str(tmp / "stereo.wav"), np.stack([other, speech], axis=1), SR, subtype="PCM_16")
    sf.write(str(tmp / "whole.sph"), speech, SR, format="NIST", subtype="PCM_16")
    whole = (tmp / "whole.sph").read_bytes()
    (tmp / "cut.sph").write_bytes(whole[:len(whole) // 2])
    assert sf.info(str(tmp / "cut.sph")).frames < len(speech)  # what libsndfile reads without a word
    exps = {name: _exp(tmp / name, channel) for name, channel in (("unset", None), ("channel1", 1))}
    streaming = {name: _exp(tmp / f"{name}_streaming", channel, chunks={"use_dynamic_chunk": True})
                 for name, channel in (("unset", None), ("channel1", 1))}
    export.main(["--format", "sherpa-onnx", "--config", str(exps["unset"] / "train.yaml"), "--checkpoint",
                 str(exps["unset"] / "avg.pt"), "--output_dir", str(tmp / "sherpa")])
    return {"dir": tmp, "audio": {"good": tmp / "good.wav", "stereo": tmp / "stereo.wav", "cut": tmp / "cut.sph"},
            "exps": exps, "streaming": streaming}


def _digest(array) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _outcomes(keys, used, messages):
    """key -> ("used", value) or ("refused", the warnings naming its file)."""
    out = {}
    for key in keys:
        if key in used:
            out[key] = ("used", used[key])
        else:
            out[key] = ("refused", " | ".join(m for m in messages if f"{key} (" in m))
    return out


class Log:
    """The warnings logged since ``clear``: through pytest's handler, or printed on stderr by the handler a program
    sets up itself (``logging.basicConfig(force=True)`` replaces pytest's)."""

    def __init__(self, caplog, capfd):
        self.caplog, self.capfd = caplog, capfd

    def clear(self) -> None:
        self.caplog.clear()
        self.capfd.readouterr()

    def warnings(self):
        printed = [line for line in self.capfd.readouterr().err.splitlines() if " WARNING " in line]
        return [r.getMessage() for r in self.caplog.records if r.levelname == "WARNING"] + printed


def _scp(walk, keys, name):
    path = walk["dir"] / f"{name}.scp"
    path.write_text("".join(f"{k} {walk['audio'][k]}\n" for k in keys))
    return path


def _data_list(walk, keys, name):
    path = walk["dir"] / f"{name}.list"
    path.write_text("".join(json.dumps({"key": k, "wav": str(walk["audio"][k]), "txt": WORDS[k]}) + "\n"
                            for k in keys))
    return path


def _features(walk, exp, data, data_type, log):
    config = load_config(str(exp / "train.yaml"))
    used = {}
    log.clear()
    for batch in DataTally().batches(eval_dataset(config, init_tokenizer(config), str(data), 1, data_type)):
        used[batch["keys"][0]] = _digest(batch["feats"][0, :int(batch["feats_lengths"][0])].numpy())
    return used, log.warnings()


def raw_list(walk, exp, keys, log):
    return _outcomes(keys, *_features(walk, exp, _data_list(walk, keys, f"raw_{exp.name}"), "raw", log))


def shard_list(walk, exp, keys, log):
    """make_shard_list packs the stereo file whole (the reader chooses the channel) and leaves the cut file out
    (20 more copies of the good file keep its share of bad audio under the default max_bad_fraction); a shard
    holding the cut file anyway (packed by another tool) has it refused by the reader."""
    pad = [f"pad{i}" for i in range(20)]
    scp = walk["dir"] / f"shard_{exp.name}.scp"
    scp.write_text("".join(f"{k} {walk['audio'][k]}\n" for k in keys) + "".join(f"{k} {walk['audio']['good']}\n"
                                                                                  for k in pad))
    text = walk["dir"] / f"text_{exp.name}"
    text.write_text("".join(f"{k} {WORDS[k]}\n" for k in keys) + "".join(f"{k} ONE\n" for k in pad))
    shards = walk["dir"] / f"shards_{exp.name}"
    log.clear()
    run_tool("make_shard_list", ["--num_utts_per_shard", "100", str(scp), str(text), str(shards),
                                 str(shards) + ".list"])
    packed = log.warnings()
    with tarfile.open(shards / "shards_000000000.tar") as tar:
        assert {m.name.split(".")[0] for m in tar} == set(keys + pad) - {"cut"}
    by_hand = walk["dir"] / f"by_hand_{exp.name}.tar"
    with tarfile.open(by_hand, "w") as tar:
        for key in keys:
            tar.add(str(walk["audio"][key]), f"{key}{walk['audio'][key].suffix}")
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = len(WORDS[key])
            tar.addfile(info, fileobj=io.BytesIO(WORDS[key].encode()))
    lst = walk["dir"] / f"by_hand_{exp.name}.list"
    lst.write_text(f"{shards / 'shards_000000000.tar'}\n{by_hand}\n")
    used, read = _features(walk, exp, lst, "shard", log)
    assert any("cut (" in m and CUT in m for m in read) or "cut" not in keys  # the shard reader refuses it too
    return _outcomes(keys, used, packed + read)


def training(walk, exp, keys, log):
    data = _data_list(walk, keys, f"train_{exp.name}")
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.train", "--config", str(exp / "train.yaml"),
                           "--train_data", str(data), "--cv_data", str(data), "--model_dir",
                           str(walk["dir"] / f"train_{exp.name}"), "--seed", "7"], cwd=ROOT, env=run_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    summary = next(line for line in lines if "epoch 0 train" in line and "utterances used" in line)
    used = {k: "trained on" for k in keys if not any(f"skipping utterance {k}:" in line for line in lines)}
    assert f"{len(used)} utterances used" in summary, summary
    return _outcomes(keys, used, lines)


def recognize_(walk, exp, keys, log):
    res = walk["dir"] / f"rec_{exp.name}"
    log.clear()
    recognize.main(["--config", str(exp / "train.yaml"), "--checkpoint", str(exp / "avg.pt"), "--test_data",
                    str(_data_list(walk, keys, f"rec_{exp.name}")), "--result_dir", str(res), "--modes",
                    "ctc_greedy_search", "--batch_size", "1"])
    text = dict((line + " ").split(" ", 1) for line in (res / "ctc_greedy_search" / "text").read_text().splitlines())
    return _outcomes(keys, text, log.warnings())


def cmvn(walk, exp, keys, log):
    """The stats (a sum) of the one file each run may use; a refused file is named in a warning (a subprocess: the
    tool's workers are forked, and their log lines go to its stderr)."""
    out = walk["dir"] / f"cmvn_{exp.name}.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute_cmvn_stats.py"), "--train_config",
                           str(exp / "train.yaml"), "--in_scp", str(_scp(walk, keys, f"cmvn_{exp.name}")),
                           "--out_cmvn", str(out)], cwd=ROOT, env=run_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    messages = proc.stderr.splitlines()
    used = [k for k in keys if not any(f"{k} (" in m and "WARNING" in m for m in messages)]
    assert len(used) == 1 and f"1 utterances used, {len(keys) - 1} skipped (bad_audio {len(keys) - 1})" in proc.stderr
    return _outcomes(keys, {used[0]: out.read_text()}, messages)


def sherpa(walk, exp, keys, log):
    res = walk["dir"] / f"sherpa_{exp.name}"
    log.clear()
    sherpa_decode.main(["--config", str(exp / "train.yaml"), "--export_dir", str(walk["dir"] / "sherpa"),
                        "--wav_scp", str(_scp(walk, keys, f"sherpa_{exp.name}")), "--result_dir", str(res)])
    text = dict((line + " ").split(" ", 1) for line in (res / "text").read_text().splitlines())
    return _outcomes(keys, text, log.warnings())


def _one_by_one(keys, read):
    out = {}
    for key in keys:
        try:
            out[key] = ("used", read(key))
        except UserError as e:
            out[key] = ("refused", str(e))
    return out


def transcribe_file(walk, exp, keys, log):
    model = wenet_udps.load_model(str(exp), checkpoint="avg.pt")
    return _one_by_one(keys, lambda k: _digest(model.features(str(walk["audio"][k]))[1].numpy()))


def transcribe_array(walk, exp, keys, log):
    """An array has no header to be cut: the stereo file as a (samples, 2) array, read like the file."""
    model = wenet_udps.load_model(str(exp), checkpoint="avg.pt")
    return _one_by_one([k for k in keys if k != "cut"], lambda k: _digest(model.features(
        (sf.read(str(walk["audio"][k]), dtype="int16")[0], SR))[1].numpy()))


def stream(walk, exp, keys, log):
    model = wenet_udps.load_model(str(walk["streaming"][exp.name]), checkpoint="avg.pt")

    def decode(key):
        wav = sf.read(str(walk["audio"][key]), dtype="float32")[0]
        s = model.stream(chunk_size=4, mode="ctc_greedy_search")
        for i in range(0, len(wav), 1000):
            s.accept_waveform(wav[i:i + 1000], SR)
        return s.finish(), len(s.outputs)
    return _one_by_one([k for k in keys if k != "cut"], decode)


ENTRY_POINTS = {"raw list": raw_list, "shard list": shard_list, "training": training, "recognize": recognize_,
                "compute_cmvn_stats": cmvn, "sherpa_decode": sherpa, "transcribe a file": transcribe_file,
                "transcribe an array": transcribe_array, "stream": stream}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_reads_audio_by_the_one_policy(walk, entry, caplog, capfd):
    run = ENTRY_POINTS[entry]
    log = Log(caplog, capfd)
    unset = run(walk, walk["exps"]["unset"], ["good", "stereo", "cut"], log)
    assert unset["good"][0] == "used", unset
    assert unset["stereo"][0] == "refused" and CHANNELS in unset["stereo"][1], unset["stereo"]
    if "cut" in unset:
        assert unset["cut"][0] == "refused", unset["cut"]
        assert CUT in unset["cut"][1] and "cut.sph" in unset["cut"][1], unset["cut"]
        assert "the NIST header's sample_count 12800 (x 1 channel x 2 bytes) needs 25600 bytes" in unset["cut"][1]
    chosen = run(walk, walk["exps"]["channel1"], ["stereo", "cut"], log)
    assert chosen["stereo"] == ("used", unset["good"][1])  # channel 1 of the stereo file is the mono file
    if "cut" in chosen:
        assert chosen["cut"][0] == "refused" and CUT in chosen["cut"][1], chosen["cut"]
