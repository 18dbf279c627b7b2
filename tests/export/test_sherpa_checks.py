"""Issue 80, a hostile tester on the sherpa-onnx path: the seconds of resampled audio, a --config other than the
exported one, the temporary folders of a killed export, and the Python runtime on a mixed folder. On the tiny
model of tests/export/test_sherpa.py (its ``exported`` fixture; one non-streaming variant is enough)."""
import fcntl
import json
import os
import shutil

import numpy as np
import pytest
import soundfile as sf

from wenet_udps.dataset.audio import resample
from wenet_udps.export import sherpa_runtime as rt
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.source_info import read_source
from tests.export.test_sherpa import SR, VARIANTS, _usage_error, _wavs, exported  # noqa: F401 (a fixture)


def _one_variant(exported):  # noqa: F811 (the fixture)
    name, tmp, config, out, data = exported
    if VARIANTS[name]["streaming"]:
        pytest.skip("one variant is enough")
    return tmp, config, out, data


def _decode(tmp, out, wav_scp, result_dir, config=None):
    from wenet_udps.bin import sherpa_decode
    return sherpa_decode.main(["--config", str(config or tmp / "train.yaml"), "--export_dir", str(out), "--wav_scp",
                               str(wav_scp), "--result_dir", str(result_dir)])


def test_an_8_khz_and_a_16_khz_copy_count_the_same_seconds(exported, tmp_path):  # noqa: F811
    """F1: the seconds were counted after resampling, over the file's own rate: a 16 kHz copy of 8 kHz audio into
    this 8 kHz model counted half its seconds (an 8 kHz file into a 16 kHz model, double), and its RTF doubled."""
    tmp, _, out, data = _one_variant(exported)
    wavs = dict(list(_wavs(data).items())[:3])
    seconds = {}
    for rate in (SR, 2 * SR):
        lines = []
        for key, wav in wavs.items():
            path = tmp_path / f"{key}_{rate}.wav"
            sf.write(str(path), np.round(resample(wav, SR, rate)).astype(np.int16), rate)
            lines.append(f"{key} {path}\n")
        (tmp_path / f"wav_{rate}.scp").write_text("".join(lines))
        seconds[rate] = _decode(tmp, out, tmp_path / f"wav_{rate}.scp", tmp_path / f"res_{rate}")["audio_seconds"]
    assert seconds[SR] == pytest.approx(sum(len(w) for w in wavs.values()) / SR, rel=1e-12)
    assert seconds[2 * SR] == pytest.approx(seconds[SR], abs=len(wavs) / SR)   # soxr's length: within a sample


def test_a_config_other_than_the_exported_one_is_refused_naming_both(exported, tmp_path, capsys):  # noqa: F811
    """F2: sherpa_decode took the features, rate, channel and units from --config unchecked, and decode.info named
    the export's config. A --config whose frontend (sherpa_runtime.frontend) differs is refused in one line naming
    both files and the keys; one that differs elsewhere decodes, and decode.info names it."""
    tmp, config, out, data = _one_variant(exported)
    item = json.loads(data.read_text().splitlines()[0])
    (tmp_path / "wav.scp").write_text(f"{item['key']} {item['wav']}\n")
    units = (tmp / "units.txt").read_text().splitlines(keepends=True)
    (tmp_path / "units.txt").write_text("".join(units[:2] + units[3:4] + units[2:3] + units[4:]))   # two swapped
    (tmp_path / "cmvn.json").write_text(json.dumps({"mean_stat": [0.0] * 20, "var_stat": [1.0] * 20,
                                                    "frame_num": 1}))
    changes = {"dataset_conf.resample_conf.resample_rate":
               lambda c: c["dataset_conf"].setdefault("resample_conf", {}).update(resample_rate=16000),
               "dataset_conf.channel": lambda c: c["dataset_conf"].update(channel=1),
               "tokenizer_conf.symbol_table_path":
               lambda c: c["tokenizer_conf"].update(symbol_table_path=str(tmp_path / "units.txt")),
               "cmvn": lambda c: c.update(cmvn="global_cmvn", cmvn_conf={"cmvn_file": str(tmp_path / "cmvn.json"),
                                                                         "is_json_cmvn": True})}
    for key, change in changes.items():
        other = json.loads(json.dumps(config))
        change(other)
        save_yaml(other, str(tmp_path / "other.yaml"))
        err = _usage_error(capsys, ["--config", str(tmp_path / "other.yaml"), "--export_dir", str(out),
                                    "--wav_scp", str(tmp_path / "wav.scp"), "--result_dir", str(tmp_path / "res")])
        assert f"--config {tmp_path / 'other.yaml'} is not the config {tmp / 'train.yaml'}" in err, err
        assert f"they differ in {key}" in err, err
    assert not (tmp_path / "res").exists()
    # Another batch size and dither, the units at another path with the same contents: the same frontend.
    other = json.loads(json.dumps(config))
    other["dataset_conf"]["fbank_conf"]["dither"] = 0.5
    other["dataset_conf"].setdefault("batch_conf", {})["batch_size"] = 3
    shutil.copy(tmp / "units.txt", tmp_path / "same_units.txt")
    other["tokenizer_conf"]["symbol_table_path"] = str(tmp_path / "same_units.txt")
    save_yaml(other, str(tmp_path / "decode.yaml"))
    _decode(tmp, out, tmp_path / "wav.scp", tmp_path / "res", config=tmp_path / "decode.yaml")
    assert read_source(str(tmp_path / "res" / "decode.info"))["config"] == str(tmp_path / "decode.yaml")


def test_a_config_changed_since_the_export_is_refused(exported, tmp_path, capsys):  # noqa: F811
    """F2 again: export.info named the config by path only, so the train.yaml edited after the export (a channel
    chosen for a stereo test set) decoded as the exported config. export.info records the frontend itself."""
    from wenet_udps.bin import export
    tmp, config, _, data = _one_variant(exported)
    save_yaml(config, str(tmp_path / "train.yaml"))
    export.main(["--format", "sherpa-onnx", "--config", str(tmp_path / "train.yaml"), "--checkpoint",
                 str(tmp / "avg.pt"), "--output_dir", str(tmp_path / "sherpa")])
    item = json.loads(data.read_text().splitlines()[0])
    (tmp_path / "wav.scp").write_text(f"{item['key']} {item['wav']}\n")
    changed = json.loads(json.dumps(config))   # a copy: the fixture's is shared
    changed["dataset_conf"]["channel"] = 1
    save_yaml(changed, str(tmp_path / "train.yaml"))
    capsys.readouterr()   # the export's own lines
    err = _usage_error(capsys, ["--config", str(tmp_path / "train.yaml"), "--export_dir", str(tmp_path / "sherpa"),
                                "--wav_scp", str(tmp_path / "wav.scp"), "--result_dir", str(tmp_path / "res")])
    assert f"--config {tmp_path / 'train.yaml'} has changed since {tmp_path / 'sherpa'} was exported from" in err
    assert "they differ in dataset_conf.channel," in err, err
    (tmp_path / "train.yaml").unlink()   # the exported config gone: the record still compares
    save_yaml(changed, str(tmp_path / "moved.yaml"))
    err = _usage_error(capsys, ["--config", str(tmp_path / "moved.yaml"), "--export_dir", str(tmp_path / "sherpa"),
                                "--wav_scp", str(tmp_path / "wav.scp"), "--result_dir", str(tmp_path / "res")])
    assert "they differ in dataset_conf.channel," in err, err


def test_a_killed_exports_folder_is_swept_and_a_concurrent_export_refused(exported, tmp_path):  # noqa: F811
    """F3: an export killed while writing left <out>/.export.partial-* (megabytes of graphs) for ever. An export
    holds an flock on <out>/.export.lock; a second one is refused in one line and removes nothing; the next export
    removes every temporary folder left."""
    from wenet_udps.decode.data_list import model_from_checkpoint
    from wenet_udps.export.sherpa import export_sherpa
    tmp, config, out, _ = _one_variant(exported)
    target = tmp_path / "sherpa"
    shutil.copytree(out, target)
    for left in (".export.partial-k1llED", ".export.partial-0ther"):
        (target / left).mkdir()
        (target / left / "model.onnx").write_bytes(b"half a graph")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep.txt").write_text("not the export's")
    (target / ".export.partial-link").symlink_to(tmp_path / "elsewhere")   # removed, never followed
    model = model_from_checkpoint(config, str(tmp / "avg.pt"))
    fd = os.open(target / ".export.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)   # a running export's lock
        with pytest.raises(UserError, match=f"--output_dir {target}: another export into it is running"):
            export_sherpa(model, config["input_dim"], str(tmp / "units.txt"), str(target))
        assert (target / ".export.partial-k1llED" / "model.onnx").exists()   # it may be the running export's
    finally:
        os.close(fd)
    export_sherpa(model, config["input_dim"], str(tmp / "units.txt"), str(target), source={"checkpoint": "x"})
    assert not [p.name for p in target.iterdir() if p.name.startswith(".export.partial-")]
    assert (tmp_path / "elsewhere" / "keep.txt").read_text() == "not the export's"
    assert rt.export_problem(str(target)) is None


def test_the_python_runtime_refuses_a_folder_of_two_exports(exported, tmp_path):  # noqa: F811
    """F4: offline_recognizer / online_recognizer (docs/deploy.md's Python lines) never read export.info: a
    streaming graph copied beside a non-streaming export, or another model.int8.onnx, loaded and decoded."""
    tmp, config, out, _ = _one_variant(exported)
    added, mixed = tmp_path / "added", tmp_path / "mixed"
    shutil.copytree(out, added)
    (added / "model-streaming.onnx").write_bytes((out / "model.onnx").read_bytes())
    shutil.copytree(out, mixed)
    (mixed / "model.int8.onnx").write_bytes((out / "model.onnx").read_bytes())
    with pytest.raises(UserError, match=f"^{added}: {added / 'model-streaming.onnx'} is not one of the files"):
        rt.offline_recognizer(str(added), config)
    with pytest.raises(UserError, match=f"^{added}: .*another export's file copied in"):
        rt.online_recognizer(str(added), config, chunk_size=4, left_chunks=2)
    with pytest.raises(UserError, match=f"^{mixed}: .*records model.int8.onnx with SHA-256 .* has other contents"):
        rt.offline_recognizer(str(mixed), config, int8=True)
    assert rt.offline_recognizer(str(out), config) is not None   # a whole export loads
