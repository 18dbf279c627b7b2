"""Bad data is rejected or counted, never silently used or lost (issue: "Nothing silently wrong")."""
import json
import logging
import struct

import numpy as np
import pytest
import soundfile as sf

from tests.dataset.data_helpers import plain_conf
from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.audio import BadAudioError, load_audio
from wenet_udps.dataset.dataset import DataError, DataTally
from wenet_udps.dataset.kaldi_data import read_kaldi_map, read_utterances
from wenet_udps.dataset.lists import read_raw_list, read_shard_list


def _float_wav(path, values, sr=8000):
    sf.write(str(path), np.asarray(values, dtype=np.float32), sr, subtype="FLOAT")
    return str(path)


def _list(path, items):
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return str(path)


def test_non_finite_audio_is_bad_audio(tmp_path):
    wav = np.full(4000, 0.1, dtype=np.float32)
    wav[1234] = np.nan
    with pytest.raises(BadAudioError, match="non-finite audio u1") as err:
        load_audio(_float_wav(tmp_path / "nan.wav", wav), name="u1")
    assert err.value.reason == "non_finite"
    wav[1234] = np.inf
    with pytest.raises(BadAudioError, match="1 NaN/Inf samples"):
        load_audio(_float_wav(tmp_path / "inf.wav", wav), name="u2")


def test_truncated_wav_behind_a_large_metadata_chunk_is_detected(fsdd_dir, tmp_path):
    """The data chunk lies past a 10 KB LIST chunk: a header read from the first 4 KB cannot see it."""
    data, sr = sf.read(str(sorted(fsdd_dir.glob("*.wav"))[0]), dtype="int16")
    pcm = data.tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, sr, sr * 2, 2, 16)
    meta = b"INFO" + b"x" * 10240
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"LIST" + struct.pack("<I", len(meta)) + meta
            + b"data" + struct.pack("<I", len(pcm)) + pcm)
    whole = b"RIFF" + struct.pack("<I", len(body)) + body
    (tmp_path / "whole.wav").write_bytes(whole)
    wav, _ = load_audio(str(tmp_path / "whole.wav"))
    assert len(wav) == len(data)
    (tmp_path / "cut.wav").write_bytes(whole[:-1000])
    with pytest.raises(BadAudioError, match="truncated"):
        load_audio(str(tmp_path / "cut.wav"), name="cut")
    with pytest.raises(BadAudioError, match="truncated"):
        load_audio(whole[:-1000], name="cut")


def test_counts_survive_a_worker_that_forms_no_batch(tmp_path, tokenizer):
    lst = _list(tmp_path / "data.list", [{"key": f"bad{i}", "wav": str(tmp_path / "nope.wav"), "txt": "one"}
                                         for i in range(3)])
    ds = init_dataset("raw", lst, tokenizer, plain_conf())
    items = list(ds.iterate(rank=0, world_size=1, worker_id=0, num_workers=1))
    assert items == [{"stats": {**dict.fromkeys(items[0]["stats"], 0), "bad_audio": 3}}]
    tally = DataTally()
    assert list(tally.batches(items)) == []
    with pytest.raises(DataError, match=r"epoch 0 train data .*data.list: 0 utterances used, 3 skipped "
                                        r"\(bad_audio 3\): no usable utterance"):
        ds.check_tally(tally, "epoch 0 train")


def test_too_many_bad_utterances_is_an_error(tmp_path, tokenizer, raw_list):
    items = [json.loads(line) for line in open(raw_list)]
    items.append({"key": "broken", "wav": str(tmp_path / "nope.wav"), "txt": "one"})  # 1 of 13: 7.7 %
    lst = _list(tmp_path / "data.list", items)
    for fraction, fails in ((None, True), (0.1, False)):
        conf = plain_conf() if fraction is None else plain_conf(max_bad_fraction=fraction)
        ds = init_dataset("raw", lst, tokenizer, conf)
        tally = DataTally()
        assert sum(len(b["keys"]) for b in tally.batches(ds)) == 12
        if fails:
            with pytest.raises(DataError, match=r"bad_audio 1.*7.7% .*max_bad_fraction 0.05"):
                ds.check_tally(tally, "cv")
        else:
            assert ds.check_tally(tally, "cv").endswith("12 utterances used, 1 skipped (bad_audio 1)")


def test_length_filter_counts_and_names_the_utterance(raw_list, tokenizer, caplog):
    conf = plain_conf(filter_conf={"min_length": 0, "max_length": 40, "max_output_input_ratio": 10})
    tally = DataTally()
    with caplog.at_level(logging.INFO):
        used = [k for b in tally.batches(init_dataset("raw", str(raw_list), tokenizer, conf)) for k in b["keys"]]
    assert tally.counts["max_length"] == 12 - len(used) > 0
    dropped = {json.loads(line)["key"] for line in open(raw_list)} - set(used)
    assert any(k in r.message and "filter_conf.max_length" in r.message for k in dropped for r in caplog.records)
    assert "max_length" in tally.summary()


def test_bad_batch_size_is_rejected(raw_list, tokenizer):
    for size in (0, -2):
        with pytest.raises(ValueError, match=f"dataset_conf.batch_conf.batch_size: must be >= 1, got {size}"):
            init_dataset("raw", str(raw_list), tokenizer, plain_conf(batch_conf={"batch_size": size}))


@pytest.mark.parametrize("reader", [read_raw_list, read_shard_list, read_kaldi_map])
def test_non_utf8_line_names_file_and_line(tmp_path, reader):
    path = tmp_path / "f.txt"
    path.write_bytes(b'{"key": "a", "wav": "a.wav", "txt": "x"}\n' + b"b \xff\xfe bad\n")
    with pytest.raises(ValueError, match=r"f.txt:2: not UTF-8"):
        reader(str(path))


def test_utterances_without_audio_or_text_are_counted(tmp_path, caplog):
    (tmp_path / "wav.scp").write_text("a a.wav\nb b.wav\nc c.wav\n")
    (tmp_path / "text").write_text("a one\nb\nx nine\n")
    with caplog.at_level(logging.WARNING):
        entries = read_utterances(str(tmp_path / "wav.scp"), str(tmp_path / "text"))
    assert [e[0] for e in entries] == ["a"]
    line = caplog.records[-1].message
    assert "1 utterances kept" in line and "1 without text (e.g. c)" in line
    assert "1 with an empty transcript (e.g. b)" in line and "1 without audio (e.g. x)" in line


def _tar(path, members):
    import io
    import tarfile
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _shard_tally(tokenizer, tmp_path, shards, **conf):
    lst = tmp_path / "shards.list"
    lst.write_text("".join(f"{s}\n" for s in shards))
    ds = init_dataset("shard", str(lst), tokenizer, plain_conf(**conf))
    tally = DataTally()
    used = sum(len(b["keys"]) for b in tally.batches(ds))
    return ds, tally, used


def test_truncated_shard_counts_the_utterances_it_lost(kaldi_dir, tokenizer, tmp_path):
    """A 10-utterance shard plus the first 15 % of another: about 8-9 utterances lost, not "1 skipped"."""
    wav = open(next(iter(l.split()[1] for l in open(kaldi_dir / "wav.scp"))), "rb").read()
    members = lambda p: [m for i in range(10) for m in ((f"{p}{i}.txt", b"one"), (f"{p}{i}.wav", wav))]
    whole = _tar(tmp_path / "a.tar", members("a"))
    full = open(_tar(tmp_path / "b_full.tar", members("b")), "rb").read()
    (tmp_path / "b.tar").write_bytes(full[:int(len(full) * 0.15)])
    ds, tally, used = _shard_tally(tokenizer, tmp_path, [whole, tmp_path / "b.tar"])
    read_from_b = used - 10
    assert tally.counts["shard_error"] == 1 and tally.skipped()["shard_error"] == 10 - read_from_b
    assert read_from_b < 3
    with pytest.raises(DataError, match=r"1 broken shard: about \d+ utterances lost.*max_bad_fraction"):
        ds.check_tally(tally, "epoch 0 train")
    # Only broken shards: the loss is unknowable, so the pass is refused by the share of shards.
    ds, tally, used = _shard_tally(tokenizer, tmp_path, [tmp_path / "b.tar"], max_bad_fraction=0.9)
    assert tally.shard_loss() is None
    with pytest.raises(DataError, match="every shard of the pass is broken"):
        ds.check_tally(tally, "epoch 0 train")


def test_non_utf8_text_member_loses_only_its_utterance(kaldi_dir, tokenizer, tmp_path):
    wav = open(next(iter(l.split()[1] for l in open(kaldi_dir / "wav.scp"))), "rb").read()
    members = [("x.txt", b"\xff\xfeone"), ("x.wav", wav)]
    members += [m for i in range(5) for m in ((f"u{i}.txt", b"one"), (f"u{i}.wav", wav))]
    ds, tally, used = _shard_tally(tokenizer, tmp_path, [_tar(tmp_path / "s.tar", members)],
                                   max_bad_fraction=0.5)
    assert used == 5 and tally.skipped() == {"bad_text": 1}
    assert ds.check_tally(tally, "cv").endswith("5 utterances used, 1 skipped (bad_text 1)")


@pytest.mark.parametrize("extra, msg", [
    ({"start": float("nan")}, r"field 'start' of k must be a finite number of seconds, got nan"),
    ({"end": float("inf")}, r"field 'end' of k must be a finite number of seconds, got inf"),
    ({"key": "a b"}, r"key 'a b' is empty or contains white space"),
    ({"key": "a\nb"}, r"key 'a\\nb' is empty or contains white space"),
    ({"key": "\ufeffa"}, r"key '\\ufeffa' is empty or contains white space or a byte-order mark"),  # issue 47
    # issue 57 M1: a negative start was bad audio "psf_fseek() failed", from libsndfile, in every program
    ({"start": -0.5, "end": 1.0}, r"segment of k from -0.5 s to 1 s: the start must be >= 0 and the end after it"),
    ({"start": -2}, r"segment of k from -2 s to the end: the start must be >= 0"),
    ({"start": 1.0, "end": 0.5}, r"segment of k from 1 s to 0.5 s: the start must be >= 0 and the end after it"),
])
def test_list_line_errors_name_file_line_and_key(tmp_path, extra, msg):
    from wenet_udps.dataset.lists import ListError
    from wenet_udps.utils.cli import UserError
    line = {"key": "k", "wav": "x.wav", "txt": "one", **extra}
    lst = tmp_path / "data.list"
    lst.write_text('{"key": "ok", "wav": "x.wav", "txt": "one"}\n' + json.dumps(line) + "\n")
    with pytest.raises(ListError, match=rf"data.list:2: {msg}") as err:
        read_raw_list(str(lst))
    assert isinstance(err.value, UserError)  # one line, exit 2, no traceback in every program


def test_duplicate_keys_are_an_error_naming_both_lines(tmp_path):
    """Issue 80, I: a key on two lines was warned about and decoded twice, and one hypothesis was lost from
    ``text`` (one line per key); refused as the one reader of Kaldi files refuses a duplicate."""
    from wenet_udps.dataset.lists import ListError
    lst = _list(tmp_path / "data.list", [{"key": k, "wav": "x.wav", "txt": "one"} for k in ("a", "b", "a", "b")])
    with pytest.raises(ListError, match=rf"^{lst}:3: duplicate utterance key 'a' \(also on line 1\)$"):
        read_raw_list(lst)


def test_fifo_and_implausible_sample_rate_are_bad_audio_not_a_hang(tmp_path):
    import os
    fifo = tmp_path / "fifo.wav"
    os.mkfifo(fifo)
    with pytest.raises(BadAudioError, match="not a regular file"):
        load_audio(str(fifo), name="f")
    one_hz = tmp_path / "one_hz.wav"
    sf.write(str(one_hz), np.zeros(16000, dtype=np.int16), 1, subtype="PCM_16")
    with pytest.raises(BadAudioError, match="implausible sample rate 1 Hz"):
        load_audio(str(one_hz), name="h")


def test_length_filter_runs_before_resampling(tmp_path, tokenizer, monkeypatch):
    """A dropped utterance costs no resampling (a header claiming a tiny rate made that take ~1 GB)."""
    from wenet_udps.dataset import transforms
    sf.write(str(tmp_path / "long.wav"), np.zeros(48000 * 3, dtype=np.float32), 48000)
    calls = []
    monkeypatch.setattr(transforms, "resample", lambda wav, sr, target: calls.append(sr) or wav)
    lst = _list(tmp_path / "data.list", [{"key": "long", "wav": str(tmp_path / "long.wav"), "txt": "one"}])
    conf = plain_conf(filter_conf={"min_length": 0, "max_length": 100, "max_output_input_ratio": 10})
    tally = DataTally()
    assert list(tally.batches(init_dataset("raw", lst, tokenizer, conf))) == []
    assert tally.counts["max_length"] == 1 and calls == []
