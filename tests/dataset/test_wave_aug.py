"""On-the-fly waveform augmentation: what each one does to the samples, its conf checks, and the pipeline hook."""
import math

import numpy as np
import pytest

from wenet_udps.dataset import wave_aug
from wenet_udps.dataset.transforms import UtteranceProcessor, check_dataset_conf
from wenet_udps.utils.schema import ConfigError

SR = 16000


def tone(seconds=1.0, amp=8000.0):
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * math.pi * 440 * t)).astype(np.float32)


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0])
def test_power_law_noise_slope(exponent):
    x = wave_aug.power_law_noise(1 << 16, exponent, np.random.default_rng(0))
    assert abs(np.mean(x ** 2) - 1.0) < 1e-9
    power = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.arange(power.shape[0])
    band = (freqs > 10) & (freqs < power.shape[0] // 2)
    slope = np.polyfit(np.log(freqs[band]), np.log(power[band]), 1)[0]
    assert abs(slope + exponent) < 0.1


@pytest.mark.parametrize("snr", [0.0, 10.0, 25.0])
def test_noise_at_requested_snr(snr):
    wav = tone()
    out = wave_aug.noise_aug(wav, SR, np.random.default_rng(1), prob=1.0, snr_db=(snr, snr), hum_prob=0.0)
    noise = out.astype(np.float64) - wav
    measured = 10 * math.log10(np.mean(wav.astype(np.float64) ** 2) / np.mean(noise ** 2))
    assert abs(measured - snr) < 0.2


def test_hum_is_mains_frequency():
    wav = np.zeros(SR, np.float32)
    wav[::100] = 1000.0  # a signal with power, so the SNR has a reference
    out = wave_aug.noise_aug(wav, SR, np.random.default_rng(3), prob=1.0, snr_db=(-20.0, -20.0),
                             exponent=(2.0, 2.0), hum_prob=1.0)
    spectrum = np.abs(np.fft.rfft(out - wav))
    assert int(np.argmax(spectrum[20:200])) + 20 in (50, 60)


def test_reverb_keeps_length_and_power_and_smears():
    wav = np.zeros(SR, np.float32)
    wav[1000:1400] = tone(400 / SR)
    out = wave_aug.reverb_aug(wav, SR, np.random.default_rng(2), prob=1.0, rt60=(0.5, 0.5))
    assert out.shape == wav.shape and out.dtype == np.float32
    assert abs(wave_aug._active_power(out) / wave_aug._active_power(wav) - 1.0) < 1e-6
    assert np.abs(out[3000:6000]).max() > 0  # the tail rings on after the burst


def test_rir_decays_60_db_at_rt60():
    rir = wave_aug.synthetic_rir(SR, 0.4, np.random.default_rng(4))
    energy = np.convolve(rir[1:] ** 2, np.ones(400) / 400, mode="same")
    early, late = energy[int(0.05 * SR)], energy[int(0.35 * SR)]
    # 0.3 s of a 60 dB / 0.4 s decay: 45 dB, within the noise of one draw
    assert 35 < 10 * math.log10(early / late) < 55
    assert rir[0] == 1.0


def test_volume_gain_and_clipping():
    wav = tone(amp=1000.0)
    out = wave_aug.volume_aug(wav, SR, np.random.default_rng(5), prob=1.0, gain_db=(6.0, 6.0))
    assert np.allclose(out, wav * 10 ** (6 / 20), rtol=1e-5)
    loud = wave_aug.volume_aug(tone(amp=30000.0), SR, np.random.default_rng(5), prob=1.0, gain_db=(12.0, 12.0))
    assert np.abs(loud).max() <= wave_aug.INT16_PEAK


@pytest.mark.parametrize("name", sorted(wave_aug.WAVE_AUGMENTATIONS))
def test_prob_zero_is_identity_and_draws_are_reproducible(name):
    func = wave_aug.WAVE_AUGMENTATIONS[name]
    wav = tone()
    assert func(wav, SR, np.random.default_rng(0), prob=0.0) is wav
    a = func(wav, SR, np.random.default_rng(7), prob=1.0)
    b = func(wav, SR, np.random.default_rng(7), prob=1.0)
    assert np.array_equal(a, b) and not np.array_equal(a, wav)
    assert func(np.zeros(0, np.float32), SR, np.random.default_rng(0), prob=1.0).size == 0


@pytest.mark.parametrize("conf, key", [
    ({"noise_aug_conf": {"prob": 1.5}}, "noise_aug_conf.prob"),
    ({"noise_aug_conf": {"snr_db": [30, 5]}}, "noise_aug_conf.snr_db"),
    ({"reverb_aug_conf": {"rt60": [0.0, 0.5]}}, "reverb_aug_conf.rt60"),
    ({"volume_aug_conf": {"gain_db": [-6, float("inf")]}}, "volume_aug_conf.gain_db"),
])
def test_bad_ranges_name_the_key(conf, key):
    name = next(iter(conf))[:-len("_conf")]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        UtteranceProcessor({name: True, **conf})


def test_unknown_key_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid keys: exponent, hum_prob, prob, snr_db"):
        check_dataset_conf({"noise_aug_conf": {"snr": [1, 2]}})


def test_pipeline_applies_them_in_order(tmp_path):
    import soundfile as sf
    path = tmp_path / "a.wav"
    sf.write(path, (tone() / 32768.0), SR, subtype="PCM_16")
    sample = {"key": "a", "wav": str(path), "txt": "x"}
    plain = UtteranceProcessor({"fbank_conf": {"dither": 0.0}})(sample, np.random.default_rng(0))
    conf = {"fbank_conf": {"dither": 0.0}, "noise_aug": True, "noise_aug_conf": {"prob": 1.0},
            "reverb_aug": True, "reverb_aug_conf": {"prob": 1.0}, "volume_aug": True, "volume_aug_conf": {"prob": 1.0}}
    proc = UtteranceProcessor(conf)
    assert [f.__name__ for f, _ in proc.wave_augmentations] == ["reverb_aug", "noise_aug", "volume_aug"]
    augmented = proc(sample, np.random.default_rng(0))
    assert augmented["feat"].shape == plain["feat"].shape
    assert not np.allclose(augmented["feat"], plain["feat"])


@pytest.mark.parametrize("batch_size", [None, 1])
def test_evaluation_reads_the_audio_without_wave_augmentation(tmp_path, batch_size):
    """The cv set, recognize, the API and streams (eval_dataset_conf) added conf/fsdd/train_conformer.yaml's noise,
    reverberation and gain to every test utterance: its features are now those of the audio itself."""
    import soundfile as sf
    import yaml
    from wenet_udps.dataset.dataset import eval_dataset_conf
    path = tmp_path / "a.wav"
    sf.write(path, (tone() / 32768.0), SR, subtype="PCM_16")
    sample = {"key": "a", "wav": str(path), "txt": "x"}
    with open("conf/fsdd/train_conformer.yaml", encoding="utf-8") as f:
        conf = yaml.safe_load(f)["dataset_conf"]
    assert all(conf[name] for name in wave_aug.WAVE_AUGMENTATIONS)  # the recipe trains with all three
    conf = {**conf, **{f"{name}_conf": {**conf.get(f"{name}_conf", {}), "prob": 1.0}
                       for name in wave_aug.WAVE_AUGMENTATIONS}, "resample_conf": {"resample_rate": SR}}
    proc = UtteranceProcessor(eval_dataset_conf(conf, batch_size))
    assert proc.wave_augmentations == []
    plain = UtteranceProcessor(eval_dataset_conf({**conf, **{name: False for name in wave_aug.WAVE_AUGMENTATIONS}},
                                                 batch_size))
    np.testing.assert_array_equal(proc(sample, np.random.default_rng(0))["feat"],
                                  plain(sample, np.random.default_rng(0))["feat"])


def test_the_commands_do_not_import_scipy_signal_until_reverberation_runs():
    """scipy.signal takes about 0.8 s to import: paid by every train, recognize or export process when
    wave_aug imported it at the top, though only reverberation uses it."""
    import subprocess
    import sys
    code = ("import sys, wenet_udps.bin.train, wenet_udps.bin.recognize, wenet_udps.bin.export; "
            "print('scipy.signal' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
