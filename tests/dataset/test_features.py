import kaldi_native_fbank as knf
import numpy as np
import pytest

from wenet_udps.dataset.audio import load_audio, resample
from wenet_udps.dataset.features import compute_fbank, compute_features, compute_mfcc, spec_aug, spec_sub, spec_trim


@pytest.fixture
def wav16k(fsdd_dir):
    wav, sr = load_audio(str(sorted(fsdd_dir.glob("*.wav"))[3]))
    return resample(wav, sr, 16000)


def test_fbank_equals_kaldi_native_fbank(wav16k):
    feats = compute_fbank(wav16k, 16000, {"num_mel_bins": 80, "frame_shift": 10, "frame_length": 25, "dither": 0.0})
    opts = knf.FbankOptions()
    opts.frame_opts.dither = 0.0
    opts.frame_opts.samp_freq = 16000
    opts.mel_opts.num_bins = 80
    opts.energy_floor = 0.0
    fb = knf.OnlineFbank(opts)
    fb.accept_waveform(16000, wav16k.tolist())
    fb.input_finished()
    ref = np.stack([fb.get_frame(i) for i in range(fb.num_frames_ready)])
    assert feats.shape == (1 + (len(wav16k) - 400) // 160, 80)
    np.testing.assert_allclose(feats, ref, rtol=1e-5, atol=1e-5)


def test_frame_shift_and_mfcc(wav16k):
    fb = compute_fbank(wav16k, 16000, {"num_mel_bins": 40, "frame_shift": 20, "frame_length": 25})
    assert fb.shape == (1 + (len(wav16k) - 400) // 320, 40)
    mfcc = compute_features(wav16k, 16000, {"feats_type": "mfcc", "mfcc_conf": {"num_ceps": 13}})
    assert mfcc.shape[1] == 13
    assert np.isfinite(mfcc).all()
    np.testing.assert_array_equal(mfcc, compute_mfcc(wav16k, 16000, {"num_ceps": 13}))
    with pytest.raises(ValueError, match="feats_type"):
        compute_features(wav16k, 16000, {"feats_type": "spectrogram"})
    with pytest.raises(ValueError, match="num_mel"):
        compute_fbank(wav16k, 16000, {"num_mel": 40})


def test_dither_changes_features(wav16k):
    a = compute_fbank(wav16k, 16000, {"dither": 1.0})
    b = compute_fbank(wav16k, 16000, {"dither": 0.0})
    assert a.shape == b.shape and not np.allclose(a, b)


def test_spec_aug_zeroes_bands():
    feats = np.random.default_rng(0).normal(size=(200, 40)).astype(np.float32) + 10.0
    out = spec_aug(feats, np.random.default_rng(1), num_t_mask=2, num_f_mask=2, max_t=30, max_f=8)
    zero_rows = np.where((out == 0).all(axis=1))[0]
    zero_cols = np.where((out == 0).all(axis=0))[0]
    assert 1 <= len(zero_rows) <= 60 and 1 <= len(zero_cols) <= 16
    kept = (out != 0)
    np.testing.assert_array_equal(out[kept], feats[kept])
    assert (feats != 0).all()  # the input is not modified


def test_spec_aug_mean_fills_bands_with_the_utterance_mean_of_each_bin():
    feats = np.random.default_rng(0).normal(size=(200, 40)).astype(np.float32) + np.arange(40, dtype=np.float32)
    mean = feats.mean(axis=0)
    rng_zero, rng_mean = np.random.default_rng(1), np.random.default_rng(1)
    zero = spec_aug(feats, rng_zero, max_t=30, max_f=8)
    out = spec_aug(feats, rng_mean, max_t=30, max_f=8, mask_value="mean")
    masked = zero == 0  # the same rng draws the same bands in both
    assert masked.any() and not masked.all()
    np.testing.assert_array_equal(out[~masked], feats[~masked])
    np.testing.assert_allclose(out[masked], np.broadcast_to(mean, feats.shape)[masked], rtol=1e-6)


def test_spec_aug_unknown_mask_value_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"mask_value.*'median'.*\['zero', 'mean'\]"):
        spec_aug(np.ones((10, 4), dtype=np.float32), np.random.default_rng(0), mask_value="median")


def test_spec_sub_copies_earlier_frames():
    feats = np.arange(100, dtype=np.float32)[:, None].repeat(4, axis=1)
    out = spec_sub(feats, np.random.default_rng(3), max_t=10, num_t_sub=3)
    assert out.shape == feats.shape and not np.array_equal(out, feats)
    assert (out[:, 0] <= feats[:, 0]).all()  # every frame is itself or an earlier one


def test_spec_trim_shortens():
    feats = np.ones((100, 4), dtype=np.float32)
    out = spec_trim(feats, np.random.default_rng(0), max_t=20)
    assert 80 <= out.shape[0] < 100
    short = np.ones((10, 4), dtype=np.float32)
    assert spec_trim(short, np.random.default_rng(0), max_t=20).shape[0] >= 5


def test_dither_is_seeded(wav16k):
    a = compute_fbank(wav16k, 16000, {"dither": 1.0}, np.random.default_rng(5))
    b = compute_fbank(wav16k, 16000, {"dither": 1.0}, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


def test_bad_spec_aug_value_fails_when_the_pipeline_is_built():
    from wenet_udps.dataset.transforms import UtteranceProcessor
    with pytest.raises(ValueError, match=r"spec_aug_conf.mask_value.*'median'"):
        UtteranceProcessor({"spec_aug": True, "spec_aug_conf": {"mask_value": "median"}})
