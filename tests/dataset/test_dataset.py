import json
import logging
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from tests.dataset.data_helpers import plain_conf, read_list
from tests.tools.load import run_tool
from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.lists import partition


def _batches(ds, **part):
    if part:
        return list(ds.iterate(**part))
    return list(ds)


def _samples(batches):
    out = {}
    for b in batches:
        for i, key in enumerate(b["keys"]):
            n, l = int(b["feats_lengths"][i]), int(b["target_lengths"][i])
            out[key] = (b["feats"][i, :n].numpy(), b["target"][i, :l].tolist())
    return out


@pytest.fixture
def shard_list(kaldi_dir):
    out = kaldi_dir / "shards.list"
    run_tool("make_shard_list", ["--num_utts_per_shard", "3", "--num_threads", "2", str(kaldi_dir / "wav.scp"),
                                 str(kaldi_dir / "text"), str(kaldi_dir / "shards"), str(out)])
    return out


def test_raw_and_shard_give_identical_samples(raw_list, shard_list, tokenizer):
    raw = _samples(_batches(init_dataset("raw", str(raw_list), tokenizer, plain_conf())))
    shard = _samples(_batches(init_dataset("shard", str(shard_list), tokenizer, plain_conf())))
    assert len(raw) == 12 and raw.keys() == shard.keys()
    for key in raw:
        np.testing.assert_array_equal(raw[key][0], shard[key][0])
        assert raw[key][1] == shard[key][1] and len(raw[key][1]) >= 2


def test_batch_layout(raw_list, tokenizer):
    batches = _batches(init_dataset("raw", str(raw_list), tokenizer, plain_conf()))
    assert [len(b["keys"]) for b in batches] == [3, 3, 3, 3]
    b = batches[0]
    assert b["feats"].dtype == torch.float32 and b["feats"].shape[2] == 40
    assert b["feats"].shape[:2] == (3, int(b["feats_lengths"].max()))
    assert (b["feats_lengths"][:-1] >= b["feats_lengths"][1:]).all()  # longest first
    for i in range(3):
        n, l = int(b["feats_lengths"][i]), int(b["target_lengths"][i])
        assert (b["feats"][i, n:] == 0).all() and (b["target"][i, l:] == -1).all() and (b["target"][i, :l] >= 0).all()
    assert all(batch["stats"]["bad_audio"] == 0 for batch in batches)
    assert sum(batch["stats"]["used"] for batch in batches) == 12
    # 8 kHz input is resampled to 16 kHz: 10 ms frames count the same either way.
    entry = read_list(raw_list)[0]
    import soundfile as sf
    info = sf.info(entry["wav"])
    assert info.samplerate == 8000
    lengths = {k: int(n) for bb in batches for k, n in zip(bb["keys"], bb["feats_lengths"])}
    assert lengths[entry["key"]] == 1 + (info.frames * 2 - 400) // 160


@pytest.mark.parametrize("data_type", ["raw", "shard"])
@pytest.mark.parametrize("world_size,num_workers", [(1, 1), (2, 1), (3, 2), (4, 3)])
def test_partition_uses_every_utterance_once(raw_list, shard_list, tokenizer, data_type, world_size, num_workers):
    path = raw_list if data_type == "raw" else shard_list
    conf = plain_conf(shuffle=True, shuffle_conf={"shuffle_size": 5}, sort=True, sort_conf={"sort_size": 3})
    ds = init_dataset(data_type, str(path), tokenizer, conf)
    ds.set_epoch(3)
    seen = Counter()
    for rank in range(world_size):
        for worker in range(num_workers):
            for b in ds.iterate(rank=rank, world_size=world_size, worker_id=worker, num_workers=num_workers):
                seen.update(b["keys"])
    assert set(seen) == {e["key"] for e in read_list(raw_list)}
    assert set(seen.values()) == {1}


def test_partition_function_exact():
    for n in (0, 1, 7, 50):
        for world, workers in ((1, 1), (2, 3), (5, 2), (8, 4)):
            got = [i for r in range(world) for w in range(workers)
                   for i in partition(n, rank=r, world_size=world, worker_id=w, num_workers=workers,
                                      shuffle=True, seed=1, epoch=2)]
            assert sorted(got) == list(range(n))
    with pytest.raises(ValueError):
        partition(5, rank=2, world_size=2, worker_id=0, num_workers=1, shuffle=False, seed=0, epoch=0)


def test_dataloader_workers_exact(raw_list, tokenizer):
    ds = init_dataset("raw", str(raw_list), tokenizer, plain_conf(shuffle=True))
    keys = [k for b in DataLoader(ds, batch_size=None, num_workers=2) for k in b["keys"]]
    assert sorted(keys) == sorted(e["key"] for e in read_list(raw_list))


def test_set_epoch_reshuffles(raw_list, tokenizer):
    ds = init_dataset("raw", str(raw_list), tokenizer, plain_conf(shuffle=True))
    order = lambda: [k for b in ds for k in b["keys"]]  # noqa: E731
    ds.set_epoch(0)
    first, again = order(), order()
    ds.set_epoch(1)
    second = order()
    assert first == again and first != second and sorted(first) == sorted(second)


def test_cv_mode_and_partition_false(raw_list, tokenizer, monkeypatch):
    monkeypatch.setattr("wenet_udps.dataset.dataset._dist_rank_world", lambda: (1, 4))
    conf = plain_conf(speed_perturb=False, spec_aug=False, batch_conf={"batch_type": "static", "batch_size": 5})
    part = [k for b in init_dataset("raw", str(raw_list), tokenizer, conf) for k in b["keys"]]
    full = [set(b["keys"]) for b in init_dataset("raw", str(raw_list), tokenizer, conf, partition=False)]
    listed = [e["key"] for e in read_list(raw_list)]
    # No shuffle, no sort: batches follow the list order (pad_batch orders each batch longest first).
    assert full == [set(listed[i:i + 5]) for i in range(0, len(listed), 5)]
    assert sorted(part) == sorted(listed[1::4])


def test_batch_types(raw_list, tokenizer):
    dyn = _batches(init_dataset("raw", str(raw_list), tokenizer, plain_conf(
        sort=True, batch_conf={"batch_type": "dynamic", "max_frames_in_batch": 300})))
    assert sum(len(b["keys"]) for b in dyn) == 12
    for b in dyn:
        assert len(b["keys"]) == 1 or b["feats"].shape[0] * b["feats"].shape[1] <= 300
    bucket = _batches(init_dataset("raw", str(raw_list), tokenizer, plain_conf(
        batch_conf={"batch_type": "bucket", "bucket_boundaries": [50], "bucket_batch_sizes": [2, 4]})))
    assert sum(len(b["keys"]) for b in bucket) == 12
    for b in bucket:
        lens = b["feats_lengths"]
        assert (lens < 50).all() or (lens >= 50).all()
        assert len(lens) <= (2 if lens[0] < 50 else 4)
    with pytest.raises(ValueError, match="batch_type"):
        init_dataset("raw", str(raw_list), tokenizer, plain_conf(batch_conf={"batch_type": "huge"})).__iter__().__next__()
    with pytest.raises(ValueError, match="data_type"):
        init_dataset("tar", str(raw_list), tokenizer, plain_conf())
    with pytest.raises(ValueError, match="dataset_conf"):
        init_dataset("raw", str(raw_list), tokenizer, plain_conf(shufle=True))


def test_filter_conf(raw_list, tokenizer):
    import soundfile as sf
    # Durations in 10 ms frames, as filter_conf counts them.
    frames = {e["key"]: sf.info(e["wav"]).frames / 80 for e in read_list(raw_list)}
    cut = sorted(frames.values())[6]
    kept = [k for b in init_dataset("raw", str(raw_list), tokenizer, plain_conf(
        filter_conf={"max_length": cut, "min_length": 0, "max_output_input_ratio": 10})) for k in b["keys"]]
    assert sorted(kept) == sorted(k for k, n in frames.items() if n <= cut) and 0 < len(kept) < 12
    none = list(init_dataset("raw", str(raw_list), tokenizer, plain_conf(
        filter_conf={"token_max_length": 1, "min_length": 0})))
    assert [set(item) for item in none] == [{"stats"}] and none[0]["stats"]["token_max_length"] == 12


def test_speed_perturb_and_augment_in_pipeline(raw_list, tokenizer):
    import soundfile as sf
    samples16k = {e["key"]: 2 * sf.info(e["wav"]).frames for e in read_list(raw_list)}
    conf = plain_conf(speed_perturb=True, speed_perturb_conf={"speeds": [0.5, 2.0]}, spec_aug=True,
                      spec_aug_conf={"num_t_mask": 1, "num_f_mask": 1, "max_t": 5, "max_f": 5})
    used = Counter()
    zero_cols = 0
    for b in init_dataset("raw", str(raw_list), tokenizer, conf):
        for i, k in enumerate(b["keys"]):
            n = int(b["feats_lengths"][i])
            # Speed s changes the sample count by 1/s; frames = 1 + (samples - 400) // 160.
            match = [s for s in (0.5, 2.0) if abs(n - (1 + (samples16k[k] / s - 400) // 160)) <= 1]
            assert len(match) == 1, (k, n)
            used[match[0]] += 1
            zero_cols += int((b["feats"][i, :n] == 0).all(dim=0).any())
    assert set(used) == {0.5, 2.0} and sum(used.values()) == 12
    assert zero_cols == 12  # every utterance got a frequency band zeroed


def test_bad_audio_skipped_and_counted(kaldi_dir, tokenizer, tmp_path, caplog):
    good = open(next(iter(l.split()[1] for l in open(kaldi_dir / "wav.scp"))), "rb").read()
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "trunc.wav").write_bytes(good[:1001])
    (tmp_path / "junk.wav").write_text("junk")
    bad = {"missing": str(tmp_path / "nope.wav"), "empty": str(tmp_path / "empty.wav"),
           "trunc": str(tmp_path / "trunc.wav"), "junk": str(tmp_path / "junk.wav")}
    lines = [json.dumps({"key": k, "wav": v, "txt": "one"}) for k, v in bad.items()]
    for l in open(kaldi_dir / "wav.scp"):
        key, path = l.split()
        lines.append(json.dumps({"key": key, "wav": path, "txt": "two one"}))
    lst = tmp_path / "data.list"
    lst.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.INFO):
        batches = list(init_dataset("raw", str(lst), tokenizer, plain_conf(batch_conf={"batch_size": 4})))
    assert sum(b["stats"]["bad_audio"] for b in batches) == 4
    assert sum(len(b["keys"]) for b in batches) == 12
    for key, path in bad.items():
        assert any(key in r.message and path in r.message for r in caplog.records)
    # Bad files at the end of the list still reach the caller through the last batch.
    lst.write_text("\n".join(lines[4:] + lines[:4]) + "\n")
    batches = list(init_dataset("raw", str(lst), tokenizer, plain_conf(batch_conf={"batch_size": 4})))
    assert sum(b["stats"]["bad_audio"] for b in batches) == 4


def test_bad_audio_in_shard(kaldi_dir, tokenizer, tmp_path):
    import io
    import tarfile
    good = open(next(iter(l.split()[1] for l in open(kaldi_dir / "wav.scp"))), "rb").read()
    tar_path = tmp_path / "s.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, data in [("a.txt", b"one"), ("a.wav", good), ("b.txt", b"two"), ("b.wav", good[:900]),
                           ("c.txt", b"three")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "shards.list").write_text(f"{tar_path}\n{tmp_path / 'missing.tar'}\n")
    batches = list(init_dataset("shard", str(tmp_path / "shards.list"), tokenizer, plain_conf()))
    assert [k for b in batches for k in b["keys"]] == ["a"]
    counts = Counter()
    for b in batches:
        counts.update(b["stats"])
    # b truncated, c without audio, missing.tar unreadable
    assert (counts["bad_audio"], counts["missing_member"], counts["shard_error"], counts["used"]) == (1, 1, 1, 1)


@pytest.mark.parametrize("line,msg", [("not json", "not a JSON object"), ('{"key": "a", "wav": "x"}', "'txt'"),
                                      ('[1, 2]', "expected a JSON object"),
                                      ('{"key": "a", "wav": "x", "txt": "t", "start": "0"}', "start")])
def test_malformed_list_line(raw_list, tokenizer, tmp_path, line, msg):
    bad = tmp_path / "bad.list"
    good = open(raw_list).read().splitlines()
    bad.write_text("\n".join(good[:2] + [line] + good[2:]) + "\n")
    with pytest.raises(ValueError, match=rf"bad.list:3: .*{msg}"):
        init_dataset("raw", str(bad), tokenizer, plain_conf())


def test_segments_in_raw_list(raw_list, tokenizer, tmp_path):
    entry = read_list(raw_list)[0]
    seg = tmp_path / "seg.list"
    seg.write_text(json.dumps({**entry, "key": "seg", "start": 0.05, "end": 0.25}) + "\n")
    b = next(iter(init_dataset("raw", str(seg), tokenizer, plain_conf())))
    assert int(b["feats_lengths"][0]) == 1 + (3200 - 400) // 160
