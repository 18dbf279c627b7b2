"""wenet_udps.corpora.fsdd: connected digits from the FSDD recordings."""
import re

import numpy as np
import pytest
import soundfile as sf

from wenet_udps.corpora import fsdd
from wenet_udps.dataset.audio import BadAudioError

COUNTS = {"train": 12, "dev": 4, "test": 8}


def read_table(path):
    return dict(line.rstrip("\n").split(" ", 1) for line in open(path, encoding="utf-8"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, fsdd_dir):
    out = tmp_path_factory.mktemp("fsdd")
    fsdd.build(fsdd_dir, out, seed=3, counts=COUNTS, rate=16000)
    return out


def test_test_recordings_never_in_train(corpus):
    used = {}
    for split in fsdd.SPLITS:
        sources = read_table(corpus / split / "sources")
        used[split] = {name for files in sources.values() for name in files.split(",")}
        indices = {int(re.match(r"\d_\w+?_(\d+)\.wav$", n).group(1)) for n in used[split]}
        if split == "test":
            assert indices <= set(range(0, 5))
        else:
            assert indices <= set(range(5, 50))
    assert not used["test"] & (used["train"] | used["dev"])


def test_transcripts_match_sources_and_durations_plausible(corpus, fsdd_dir):
    for split, n in COUNTS.items():
        scp = read_table(corpus / split / "wav.scp")
        text = read_table(corpus / split / "text")
        sources = read_table(corpus / split / "sources")
        assert len(scp) == n and scp.keys() == text.keys() == sources.keys()
        for key, path in scp.items():
            files = sources[key].split(",")
            words = text[key].split()
            assert 2 <= len(words) <= 7
            assert words == [fsdd.DIGIT_WORDS[int(f[0])] for f in files]
            speakers = {f.split("_")[1] for f in files}
            assert len(speakers) == 1 and key.startswith(speakers.pop() + "_")
            info = sf.info(path)
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
            speech = sum(sf.info(fsdd_dir / f).duration for f in files)
            # Digits plus pauses of 50-300 ms between them and 50-200 ms at each end.
            lo = speech + 0.05 * (len(files) - 1) + 0.1
            hi = speech + 0.3 * (len(files) - 1) + 0.4
            assert lo - 0.01 <= info.duration <= hi + 0.01


def test_deterministic_and_rate(fsdd_dir, tmp_path):
    counts = {"train": 3, "dev": 1, "test": 2}
    fsdd.build(fsdd_dir, tmp_path / "a", seed=5, counts=counts, noise=False)
    fsdd.build(fsdd_dir, tmp_path / "b", seed=5, counts=counts, noise=False)
    for split in fsdd.SPLITS:
        assert read_table(tmp_path / "a" / split / "text") == read_table(tmp_path / "b" / split / "text")
    path = next(iter(read_table(tmp_path / "a" / "test" / "wav.scp").values()))
    assert sf.info(path).samplerate == 8000


def test_overlapping_index_ranges_rejected(fsdd_dir, tmp_path):
    with pytest.raises(ValueError, match="overlap"):
        fsdd.build(fsdd_dir, tmp_path, seed=1, counts=COUNTS, test_indices=range(0, 10), train_indices=range(5, 50))


def test_missing_dir_message(tmp_path):
    rc = fsdd.main(["--fsdd_dir", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert rc == 1



@pytest.mark.parametrize("damage, match", [("cut", "truncated audio"), ("stereo", "has 2 channels")])
def test_a_cut_or_multichannel_recording_is_refused_naming_it(fsdd_dir, tmp_path, damage, match):
    """Recordings are read through the package's audio reader: a cut WAV was read as the part that is there, and a
    stereo one was averaged into one channel."""
    src = sorted(fsdd_dir.glob("3_*_7.wav"))[0]
    bad = tmp_path / src.name
    if damage == "cut":
        data = src.read_bytes()
        bad.write_bytes(data[:44 + (len(data) - 44) // 2])
    else:
        x, rate = sf.read(src, dtype="int16")
        sf.write(bad, np.stack([x, x], axis=1), rate, subtype="PCM_16")
    assert fsdd.RecordingCache().get(src).dtype == np.float64
    with pytest.raises(BadAudioError) as e:
        fsdd.RecordingCache().get(bad)
    assert match in str(e.value) and str(bad) in str(e.value)

def _speakers(corpus, split):
    return {f.split("_")[1] for files in read_table(corpus / split / "sources").values() for f in files.split(",")}


def test_unseen_speaker_is_held_out_of_train_dev_and_test(tmp_path, fsdd_dir):
    counts = dict(COUNTS, test_unseen=6)
    fsdd.build(fsdd_dir, tmp_path, seed=3, counts=counts, unseen_speaker="theo")
    assert _speakers(tmp_path, "test_unseen") == {"theo"}
    for split in fsdd.SPLITS:
        assert "theo" not in _speakers(tmp_path, split)
    assert len(read_table(tmp_path / "test_unseen" / "text")) == 6
    # The held-out speaker's test uses every recording index (nobody trained on any of them).
    indices = {int(f.rsplit("_", 1)[1][:-4]) for files in read_table(tmp_path / "test_unseen" / "sources").values()
               for f in files.split(",")}
    assert max(indices) >= 5


def test_without_unseen_speaker_every_speaker_trains(tmp_path, fsdd_dir):
    fsdd.build(fsdd_dir, tmp_path, seed=3, counts=dict(COUNTS, train=40))
    assert not (tmp_path / "test_unseen").exists()
    assert len(_speakers(tmp_path, "train")) == 5


def test_unknown_unseen_speaker_lists_the_valid_ones(tmp_path, fsdd_dir):
    with pytest.raises(ValueError, match="unknown unseen speaker 'nobody'; valid: george, jackson"):
        fsdd.build(fsdd_dir, tmp_path, seed=3, counts=dict(COUNTS, test_unseen=2), unseen_speaker="nobody")


def test_dev_speaker_makes_a_speaker_disjoint_dev_set(tmp_path, fsdd_dir):
    counts = dict(COUNTS, test_unseen=4)
    fsdd.build(fsdd_dir, tmp_path, seed=3, counts=counts, unseen_speaker="yweweler", dev_speaker="theo")
    assert _speakers(tmp_path, "dev") == {"theo"}
    for split in ("train", "test", "test_unseen"):
        assert "theo" not in _speakers(tmp_path, split)
    # dev uses the training index range only: test recordings stay unheard by every set but test
    indices = {int(f.rsplit("_", 1)[1][:-4]) for files in read_table(tmp_path / "dev" / "sources").values()
               for f in files.split(",")}
    assert min(indices) >= 5


@pytest.mark.parametrize("unseen, dev, match", [
    ("theo", "theo", "cannot be both"),
    ("yweweler", "nobody", "unknown dev speaker 'nobody'; valid: george"),
])
def test_bad_dev_speaker(tmp_path, fsdd_dir, unseen, dev, match):
    with pytest.raises(ValueError, match=match):
        fsdd.build(fsdd_dir, tmp_path, seed=3, counts=dict(COUNTS, test_unseen=2), unseen_speaker=unseen,
                   dev_speaker=dev)


def test_split_streams_are_independent(tmp_path, fsdd_dir):
    """A bigger train set leaves dev, test and test_unseen as they were (two confs' tests stay paired)."""
    counts = dict(COUNTS, test_unseen=4)
    fsdd.build(fsdd_dir, tmp_path / "a", seed=3, counts=counts, unseen_speaker="theo")
    fsdd.build(fsdd_dir, tmp_path / "b", seed=3, counts=dict(counts, train=30), unseen_speaker="theo")
    for split in ("dev", "test", "test_unseen"):
        assert read_table(tmp_path / "a" / split / "sources") == read_table(tmp_path / "b" / split / "sources")
    assert len(read_table(tmp_path / "b" / "train" / "text")) == 30
