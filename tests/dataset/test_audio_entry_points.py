"""Issues 57 and 66: one audio reader, with one policy, behind every entry point that reads audio.

A stereo file and a NIST SPHERE file (AN4's format) cut to half its bytes are refused alike by the raw and shard
data lists, training, recognize, the CMVN tool, make_shard_list, sherpa_decode, the Python API (a file, an array)
and streaming: skipped with a warning and counted as ``bad_audio`` where a list is read, a one-line UserError where
one recording is. With ``dataset_conf.channel: 1`` each reads channel 1 of the stereo file, and gets exactly what
it gets from the mono file of that channel, and reads the mono file as it is (issue 66: one list may mix them);
with ``channel: mean`` each reads the stereo file as the mono file of its channels' mean; the cut file stays
refused.

Issue 66 B: every format ``soundfile.available_formats()`` lists, written with a subtype it can write, cut to half
its bytes under its own extension and under ``.wav`` (libsndfile detects the format from the content), is refused
by every entry point that reads files, and counted; a whole copy is read where its format is one whose length is
checked (``audio_length.FORMATS``), and refused naming the format where it is not.
"""
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import wenet_udps
from tests.tools.load import run_tool
from tests.train.train_helpers import ROOT, make_model_dir, run_env
from wenet_udps.bin import export, recognize, sherpa_decode
from wenet_udps.config import load_config
from wenet_udps.dataset.audio import AUDIO_EXTENSIONS
from wenet_udps.dataset.audio_length import FORMATS
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.dataset.dataset import DataTally
from wenet_udps.decode.data_list import eval_dataset
from wenet_udps.text import init_tokenizer
from wenet_udps.utils.cli import UserError

SR = 8000
WORDS = {"good": "ONE", "stereo": "TWO", "cut": "THREE", "mean": "TWO"}
CHANNELS = "has 2 channels: set dataset_conf.channel to the one to read (0 to 1)"
CUT = "truncated audio"
REFUSED = ("truncated audio", "is not read", "cannot read audio", "cannot decode audio")
# Keys whose audio is also given as an array (an array has no header to be cut or of a format).
ARRAY_KEYS = ("good", "stereo", "mean")
CHANNEL_POLICIES = (("unset", None), ("channel1", 1), ("mean", "mean"))


def _format_copies(tmp: Path, speech: np.ndarray) -> dict:
    """key -> path: for every format soundfile lists and some subtype of it writes (PCM_16 where it can), a whole
    copy of ``speech`` under the format's own extension (``whole_<FMT>``) and copies cut to half their bytes under
    that extension (``cut_<FMT>``) and under ``.wav`` (``cut_<FMT>_as_wav``)."""
    files = {}
    for fmt in sf.available_formats():
        ext = FORMATS[fmt].extensions[0] if fmt in FORMATS else {"IRCAM": "sf"}.get(fmt, fmt.lower())
        whole = tmp / f"whole_{fmt}.{ext}"
        for subtype in sorted(sf.available_subtypes(fmt), key=lambda s: s != "PCM_16"):
            try:
                sf.write(str(whole), speech, SR, format=fmt, subtype=subtype)
                break
            except (sf.SoundFileError, RuntimeError, ValueError, TypeError):
                continue
        else:
            continue
        data = whole.read_bytes()
        files[f"whole_{fmt}"] = whole
        for key, name in ((f"cut_{fmt}", f"cut_{fmt}.{ext}"), (f"cut_{fmt}_as_wav", f"cut_{fmt}.wav")):
            (tmp / name).write_bytes(data[:len(data) // 2])
            files[key] = tmp / name
    return files


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
    """Audio; per channel policy (unset, channel 1, mean) a full-context model dir, a streaming one, and a
    sherpa-onnx export of the full-context model (sherpa_decode refuses a --config whose channel policy is not
    the exported config's)."""
    tmp = tmp_path_factory.mktemp("walk")
    rng = np.random.default_rng(0)
    t = np.arange(int(1.6 * SR)) / SR
    speech, other = ((0.1 * rng.standard_normal(t.size) + 0.3 * np.sin(2 * np.pi * f * t)) * 32767
                     for f in (300, 900))
    speech, other = speech.astype(np.int16), other.astype(np.int16)
    sf.write(str(tmp / "good.wav"), speech, SR, subtype="PCM_16")
    sf.write(str(tmp / "stereo.wav"), np.stack([other, speech], axis=1), SR, subtype="PCM_16")
    # the channels' mean, exact as float samples (each int16 sample pair's mean is a multiple of 1/65536)
    sf.write(str(tmp / "mean.wav"), (other.astype(np.float32) + speech) / 65536, SR, subtype="FLOAT")
    sf.write(str(tmp / "whole.sph"), speech, SR, format="NIST", subtype="PCM_16")
    whole = (tmp / "whole.sph").read_bytes()
    (tmp / "cut.sph").write_bytes(whole[:len(whole) // 2])
    assert sf.info(str(tmp / "cut.sph")).frames < len(speech)  # what libsndfile reads without a word
    (tmp / "formats").mkdir()
    formats = _format_copies(tmp / "formats", speech)
    exps = {name: _exp(tmp / name, channel) for name, channel in CHANNEL_POLICIES}
    streaming = {name: _exp(tmp / f"{name}_streaming", channel, chunks={"use_dynamic_chunk": True})
                 for name, channel in CHANNEL_POLICIES}
    for name, exp in exps.items():
        export.main(["--format", "sherpa-onnx", "--config", str(exp / "train.yaml"), "--checkpoint",
                     str(exp / "avg.pt"), "--output_dir", str(tmp / f"export_{name}")])
    return {"dir": tmp, "audio": {"good": tmp / "good.wav", "stereo": tmp / "stereo.wav", "cut": tmp / "cut.sph",
                                  "mean": tmp / "mean.wav", **formats},
            "formats": sorted(formats), "exps": exps, "streaming": streaming}


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


def _fresh(walk, name: str) -> Path:
    """A new output path in the walk's folder (each entry point runs several times per model dir)."""
    return Path(tempfile.mkdtemp(prefix=f"{name}_", dir=walk["dir"])) / "out"


def _words(key: str) -> str:
    return WORDS.get(key, "ONE")


def _scp(walk, keys, name):
    path = walk["dir"] / f"{name}.scp"
    path.write_text("".join(f"{k} {walk['audio'][k]}\n" for k in keys))
    return path


def _data_list(walk, keys, name):
    path = walk["dir"] / f"{name}.list"
    path.write_text("".join(json.dumps({"key": k, "wav": str(walk["audio"][k]), "txt": _words(k)}) + "\n"
                            for k in keys))
    return path


def _features(walk, exp, data, data_type, log):
    """The features of each utterance used; every one not used is counted as bad_audio."""
    config = load_config(str(exp / "train.yaml"))
    used = {}
    log.clear()
    tally, batches = DataTally(), 0
    for batch in tally.batches(eval_dataset(config, init_tokenizer(config), str(data), 1, data_type)):
        used[batch["keys"][0]] = _digest(batch["feats"][0, :int(batch["feats_lengths"][0])].numpy())
        batches += 1
    assert tally.counts["used"] == batches and set(tally.skipped()) <= {"bad_audio"}, tally.summary()
    return used, log.warnings()


def raw_list(walk, exp, keys, log):
    return _outcomes(keys, *_features(walk, exp, _data_list(walk, keys, f"raw_{exp.name}"), "raw", log))


def shard_list(walk, exp, keys, log):
    """make_shard_list packs the stereo file whole (the reader chooses the channel) and leaves the files the reader
    refuses out, counted (the pass runs with --max_bad_fraction 1, as the lists do); a shard holding them anyway
    (packed by another tool, a format the shard reader does not take by its extension as .wav) has them refused
    by the reader."""
    scp = walk["dir"] / f"shard_{exp.name}.scp"
    scp.write_text("".join(f"{k} {walk['audio'][k]}\n" for k in keys))
    text = walk["dir"] / f"text_{exp.name}"
    text.write_text("".join(f"{k} {_words(k)}\n" for k in keys))
    shards = _fresh(walk, f"shards_{exp.name}")
    log.clear()
    run_tool("make_shard_list", ["--num_utts_per_shard", "1000", "--max_bad_fraction", "1", str(scp), str(text),
                                 str(shards), str(shards) + ".list"])
    packed = log.warnings()
    with tarfile.open(shards / "shards_000000000.tar") as tar:
        members = {m.name.split(".")[0] for m in tar}
    left_out = [k for k in keys if k not in members]
    assert all(any(f"leaving out {k}:" in m for m in packed) for k in left_out), packed
    by_hand = walk["dir"] / f"by_hand_{exp.name}.tar"
    with tarfile.open(by_hand, "w") as tar:
        for key in keys:
            suffix = walk["audio"][key].suffix
            tar.add(str(walk["audio"][key]), key + (suffix if suffix[1:] in AUDIO_EXTENSIONS else ".wav"))
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = len(_words(key))
            tar.addfile(info, fileobj=io.BytesIO(_words(key).encode()))
    lst = walk["dir"] / f"by_hand_{exp.name}.list"
    lst.write_text(f"{shards / 'shards_000000000.tar'}\n{by_hand}\n")
    used, read = _features(walk, exp, lst, "shard", log)
    assert all(any(f"{k} (" in m for m in read) for k in left_out), read  # the shard reader refuses them too
    assert set(left_out).isdisjoint(used)
    return _outcomes(keys, used, packed + read)


def training(walk, exp, keys, log):
    data = _data_list(walk, keys, f"train_{exp.name}")
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.train", "--config", str(exp / "train.yaml"),
                           "--train_data", str(data), "--cv_data", str(data), "--model_dir",
                           str(_fresh(walk, f"train_{exp.name}")), "--seed", "7"], cwd=ROOT, env=run_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    summary = next(line for line in lines if "epoch 0 train" in line and "utterances used" in line)
    used = {k: "trained on" for k in keys if not any(f"skipping utterance {k}:" in line for line in lines)}
    assert f"{len(used)} utterances used" in summary, summary
    return _outcomes(keys, used, lines)


def recognize_(walk, exp, keys, log):
    res = _fresh(walk, f"rec_{exp.name}")
    log.clear()
    recognize.main(["--config", str(exp / "train.yaml"), "--checkpoint", str(exp / "avg.pt"), "--test_data",
                    str(_data_list(walk, keys, f"rec_{exp.name}")), "--result_dir", str(res), "--modes",
                    "ctc_greedy_search", "--batch_size", "1"])
    text = dict((line + " ").split(" ", 1) for line in (res / "ctc_greedy_search" / "text").read_text().splitlines())
    return _outcomes(keys, text, log.warnings())


def cmvn(walk, exp, keys, log):
    """The stats (a sum) of the files each run may use (compared where one is); a refused file is named in a
    warning and counted (a subprocess: the tool's workers are forked, and their log lines go to its stderr)."""
    out = walk["dir"] / f"cmvn_{exp.name}.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute_cmvn_stats.py"), "--train_config",
                           str(exp / "train.yaml"), "--in_scp", str(_scp(walk, keys, f"cmvn_{exp.name}")),
                           "--out_cmvn", str(out)], cwd=ROOT, env=run_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    messages = proc.stderr.splitlines()
    used = [k for k in keys if not any(f"{k} (" in m and "WARNING" in m for m in messages)]
    bad = len(keys) - len(used)
    counts = f"{bad} skipped (bad_audio {bad})" if bad else "0 skipped (none)"
    assert f"{len(used)} utterances used, {counts}" in proc.stderr, proc.stderr[-3000:]
    return _outcomes(keys, dict.fromkeys(used, out.read_text()), messages)


def sherpa(walk, exp, keys, log):
    res = _fresh(walk, f"sherpa_{exp.name}")
    log.clear()
    sherpa_decode.main(["--config", str(exp / "train.yaml"), "--export_dir", str(walk["dir"] / f"export_{exp.name}"),
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
    return _one_by_one([k for k in keys if k in ARRAY_KEYS], lambda k: _digest(model.features(
        (sf.read(str(walk["audio"][k]), dtype="float32")[0], SR))[1].numpy()))


def stream(walk, exp, keys, log):
    model = wenet_udps.load_model(str(walk["streaming"][exp.name]), checkpoint="avg.pt")

    def decode(key):
        wav = sf.read(str(walk["audio"][key]), dtype="float32")[0]
        s = model.stream(chunk_size=4, mode="ctc_greedy_search")
        for i in range(0, len(wav), 1000):
            s.accept_waveform(wav[i:i + 1000], SR)
        return s.finish(), len(s.outputs)
    return _one_by_one([k for k in keys if k in ARRAY_KEYS], decode)


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
    # Issue 66 G: one list mixing mono and stereo files is read whole, the mono file as it is; with channel:
    # mean, the stereo file as the mono file of its channels' mean. (Training and compute_cmvn_stats give no value
    # per file, the stats being the whole list's: they are compared above, where one file is used.)
    mixed = run(walk, walk["exps"]["channel1"], ["good", "stereo"], log)
    mean = run(walk, walk["exps"]["mean"], ["stereo", "mean"], log)
    assert all(outcome[0] == "used" for outcome in [*mixed.values(), *mean.values()]), (mixed, mean)
    if entry not in ("training", "compute_cmvn_stats"):
        assert mixed["good"] == unset["good"] and mixed["stereo"] == unset["good"], mixed
        assert mean["stereo"] == mean["mean"], mean


@pytest.mark.parametrize("entry", [e for e in ENTRY_POINTS if e not in ("transcribe an array", "stream")])
def test_every_entry_point_reads_every_format_whole_or_refuses_it(walk, entry, caplog, capfd):
    """Issue 66 B: half the bytes of a VOC or IRCAM file (and of the other formats libsndfile reads without
    checking their length) decoded from half its samples without a warning, also when named .wav."""
    keys = walk["formats"]
    assert len(keys) >= 3 * 20, keys  # libsndfile 1.2.2 writes 25 of its 26 formats (not SD2)
    got = ENTRY_POINTS[entry](walk, walk["exps"]["unset"], keys, Log(caplog, capfd))
    for key in keys:
        fmt = key.split("_")[1]
        path = walk["audio"][key]
        if key.startswith("whole_") and fmt in FORMATS:
            assert got[key][0] == "used", (key, got[key])  # no false refusal
            continue
        assert got[key][0] == "refused" and path.name in got[key][1], (key, got[key])
        assert any(r in got[key][1] for r in REFUSED), (key, got[key])
        if key.startswith("whole_"):  # refused by name, whatever libsndfile could make of it
            assert "is not read" in got[key][1] or "cannot read audio" in got[key][1], (key, got[key])
