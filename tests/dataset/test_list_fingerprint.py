"""Issue 80 round 8, item 4: stage 5 skipped a decode after the audio changed (its key held the md5 of data.list,
paths only). The skip keys hold a fingerprint of every file the list names, by size and mtime_ns
(wenet_udps/dataset/list_fingerprint.py); a rewritten file is a new decode, said in one line."""
import json
import os
import time
from pathlib import Path

from tests.test_run_sh_decode_stamp import DECODE, calls, stage
from wenet_udps.dataset.list_fingerprint import fingerprint


def raw_list(path: Path, wavs: list) -> None:
    path.write_text("".join(json.dumps({"key": f"u{i}", "wav": str(w), "txt": "A"}) + "\n"
                            for i, w in enumerate(wavs)), encoding="utf-8")


def test_a_wav_copied_over_another_is_decoded_again_saying_why(tmp_path):
    stage(tmp_path, "true")   # the folders
    wavs = [tmp_path / f"u{i}.wav" for i in range(2)]
    wavs[0].write_bytes(b"RIFF one")
    wavs[1].write_bytes(b"RIFF two, longer")
    raw_list(tmp_path / "data" / "test" / "data.list", wavs)
    assert stage(tmp_path, DECODE).returncode == 0
    proc = stage(tmp_path, DECODE)
    assert "skipping decoding" in proc.stderr, proc.stderr
    wavs[1].write_bytes(wavs[0].read_bytes())   # cp one wav over the other: the list unchanged
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    assert "skipping decoding" not in proc.stderr and calls(tmp_path)[-1].startswith("recognize ctc_greedy_search")
    line = [x for x in proc.stderr.splitlines() if "decoding again" in x]
    assert len(line) == 1 and "it was decoded with other inputs (audio: '" in line[0], proc.stderr


def test_a_shard_list_is_fingerprinted_by_its_tars(tmp_path):
    tars = [tmp_path / f"s{i}.tar" for i in range(2)]
    for t in tars:
        t.write_bytes(b"tar")
    (tmp_path / "shards.list").write_text("".join(f"{t}\n" for t in tars), encoding="utf-8")
    before = fingerprint(str(tmp_path / "shards.list"))
    assert "(2 files by size and mtime)" in before
    os.utime(tars[1], ns=(1, 2))
    touched = fingerprint(str(tmp_path / "shards.list"))
    assert touched != before
    tars[0].unlink()
    assert fingerprint(str(tmp_path / "shards.list")) != touched


def test_a_10000_line_list_is_fingerprinted_without_reading_audio(tmp_path):
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF")
    lines = [{"key": f"u{i}", "wav": str(tmp_path / f"w{i}.wav"), "txt": "A"} for i in range(10000)]
    for i in range(10000):
        os.link(wav, tmp_path / f"w{i}.wav")
    (tmp_path / "data.list").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    t0 = time.perf_counter()
    assert "(10000 files" in fingerprint(str(tmp_path / "data.list"))
    assert time.perf_counter() - t0 < 5.0   # 0.2-0.35 s measured on a busy 2-core machine (docs/failure_behaviour.md)
