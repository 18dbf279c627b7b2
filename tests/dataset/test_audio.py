import hashlib

import numpy as np
import pytest
import soundfile as sf

from wenet_udps.dataset.audio import BadAudioError, load_audio, resample, speed_perturb


def _wav(fsdd_dir):
    return str(sorted(fsdd_dir.glob("*.wav"))[0])


def test_load_scales_to_int16_range(fsdd_dir):
    path = _wav(fsdd_dir)
    wav, sr = load_audio(path)
    ref, ref_sr = sf.read(path, dtype="int16")
    assert sr == ref_sr == 8000
    np.testing.assert_array_equal(wav, ref.astype(np.float32))


def test_segment_reads_only_those_frames(fsdd_dir):
    path = _wav(fsdd_dir)
    full, sr = load_audio(path)
    seg, _ = load_audio(path, start=0.05, end=0.2)
    np.testing.assert_array_equal(seg, full[400:1600])


def test_resample_and_speed_change_length(fsdd_dir):
    wav, sr = load_audio(_wav(fsdd_dir))
    up = resample(wav, sr, 16000)
    assert len(up) == 2 * len(wav)
    for speed in (0.9, 1.1):
        out = speed_perturb(up, 16000, speed)
        assert abs(len(out) - len(up) / speed) <= 1
    assert speed_perturb(up, 16000, 1.0) is up


def test_speed_shifts_pitch(tmp_path):
    # sox 'speed' semantics: a 1 kHz tone played at speed 1.1 becomes 1.1 kHz.
    sr = 16000
    tone = (np.sin(2 * np.pi * 1000 * np.arange(sr) / sr) * 1000).astype(np.float32)
    out = speed_perturb(tone, sr, 1.1)
    peak = np.argmax(np.abs(np.fft.rfft(out))) * sr / len(out)
    assert abs(peak - 1100) < 5


def _digest(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("case", ["missing", "empty", "header_only", "truncated", "not_audio", "no_samples"])
def test_bad_audio_raises_with_key_and_path(fsdd_dir, tmp_path, case):
    good = open(_wav(fsdd_dir), "rb").read()
    path = tmp_path / f"{case}.wav"
    if case == "empty":
        path.write_bytes(b"")
    elif case == "header_only":
        path.write_bytes(good[:44])
    elif case == "truncated":
        path.write_bytes(good[:1001])
    elif case == "not_audio":
        path.write_text("this is not audio\n" * 10)
    elif case == "no_samples":
        sf.write(path, np.zeros(0, dtype=np.int16), 8000, subtype="PCM_16")
    before = _digest(path) if path.exists() else None
    with pytest.raises(BadAudioError) as err:
        load_audio(str(path), name="utt-x")
    assert "utt-x" in str(err.value) and str(path) in str(err.value)
    if before is not None:
        assert _digest(path) == before


def test_bad_audio_bytes(fsdd_dir):
    good = open(_wav(fsdd_dir), "rb").read()
    wav, sr = load_audio(good, name="k")
    assert sr == 8000 and len(wav) > 0
    with pytest.raises(BadAudioError, match="truncated"):
        load_audio(good[:2000], name="k")


def test_segment_past_end_is_empty(fsdd_dir):
    with pytest.raises(BadAudioError, match="ends at 101 s, past the recording's end"):
        load_audio(_wav(fsdd_dir), start=100.0, end=101.0, name="k")
    with pytest.raises(BadAudioError, match="empty"):  # to the end (-1), from past the end
        load_audio(_wav(fsdd_dir), start=100.0, end=-1, name="k")


def test_multichannel_keeps_first_channel(tmp_path):
    stereo = np.stack([np.arange(800), -np.arange(800)], axis=1).astype(np.int16)
    sf.write(tmp_path / "s.wav", stereo, 8000, subtype="PCM_16")
    wav, _ = load_audio(str(tmp_path / "s.wav"))
    np.testing.assert_array_equal(wav, np.arange(800, dtype=np.float32))


def test_a_segment_end_past_the_recording_is_cut_within_the_overshoot_and_bad_beyond(tmp_path):
    """Issue 47 case 18: the end of a segment past its recording's end was silently clipped, however far."""
    from wenet_udps.dataset.audio import MAX_SEGMENT_OVERSHOOT
    path = tmp_path / "r.wav"
    sf.write(str(path), np.zeros(8000, dtype=np.float32), 8000)  # 1 s
    assert len(load_audio(str(path), 0.5, 1.0 + MAX_SEGMENT_OVERSHOOT)[0]) == 4000
    assert len(load_audio(str(path), 0.5, -1)[0]) == 4000
    with pytest.raises(BadAudioError, match="ends at 1.6 s, past the recording's end") as err:
        load_audio(str(path), 0.5, 1.6)
    assert err.value.reason == "bad_audio"
