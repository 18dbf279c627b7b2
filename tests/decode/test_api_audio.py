"""The Python API's arrays and streams hold to the reader's policies: one dtype policy for arrays (issue 57 S10),
the channel policy of files (S4), and a refused stream chunk leaves the stream usable (T2)."""
import numpy as np
import pytest
import soundfile as sf
import torch

import wenet_udps
from tests.decode.decode_helpers import write_clips
from tests.train.train_helpers import make_model_dir
from wenet_udps.config import load_config
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.utils.cli import UserError


@pytest.fixture
def model(tmp_path):
    make_model_dir(tmp_path, chunks={"use_dynamic_chunk": True})
    return wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")


def _clip(tmp_path):
    path = write_clips(tmp_path, 2)[1]
    return path, sf.read(str(path), dtype="int16")[0]


def test_arrays_of_every_accepted_dtype_give_the_files_features(model, tmp_path):
    """S10: an int32 array was read 65536 times too loud (90 % error); float64 and int16 were right by chance."""
    path, pcm = _clip(tmp_path)
    _, want = model.features(str(path))
    for wav in (pcm, pcm.astype(np.int32) << 16, pcm / 32768.0, (pcm / 32768.0).astype(np.float32)):
        _, got = model.features((wav, 8000))
        torch.testing.assert_close(got, want, msg=str(wav.dtype))


@pytest.mark.parametrize("dtype, words", [
    (np.uint8, "dtype uint8"), (np.int8, "dtype int8"), (np.int64, "dtype int64"), (bool, "dtype bool"),
    (np.complex64, "dtype complex64"), (np.float16, "dtype float16"), (str, "dtype <U")])
def test_arrays_of_other_dtypes_are_refused_naming_the_dtype(model, tmp_path, dtype, words):
    """S10: uint8, bool and complex arrays were decoded (complex cast to its real part, bool as 0/1 samples)."""
    _, pcm = _clip(tmp_path)
    wav = (pcm // 256 + 128).astype(dtype) if dtype is not str else pcm.astype(str)
    # a string array is no audio at all: refused where the API sorts what it was given (wenet_udps.decode.inputs)
    refusal = (f"an array of {words}.* is not audio samples" if dtype is str
               else f"the array has {words}.*arrays are float32, float64, int16, int32")
    with pytest.raises(UserError, match=refusal):
        model.transcribe((wav, 8000), mode="ctc_greedy_search")
    with pytest.raises(UserError, match=f"the chunk has {words}"):
        model.stream(chunk_size=4).accept_waveform(wav, 8000)


def test_floats_outside_full_scale_and_non_finite_samples_are_refused(model, tmp_path):
    """S10: int16 values given as floats were read 32768 times too loud (features off by up to 43)."""
    _, pcm = _clip(tmp_path)
    with pytest.raises(UserError, match=r"float32 with a peak of \d+: float samples are full scale \[-1, 1\]"):
        model.transcribe((pcm.astype(np.float32), 8000), mode="ctc_greedy_search")
    loud = pcm / 32768.0 * 1.5  # an overshoot of full scale, as after filtering: read as it is
    assert model.features((loud, 8000))[1].shape[0] > 0
    nan = pcm / 32768.0
    nan[5] = np.nan
    with pytest.raises(UserError, match="the array has 1 NaN/Inf samples"):
        model.transcribe((nan, 8000), mode="ctc_greedy_search")
    with pytest.raises(UserError, match=r"the array is empty \(shape \(0,\)\)"):
        model.transcribe((np.zeros(0), 8000), mode="ctc_greedy_search")


def test_a_stereo_array_is_read_as_the_same_stereo_file(tmp_path):
    """S4: a stereo file decoded its channel 0 silently, while the same audio as a 2-D array was refused. Both now
    follow dataset_conf.channel: refused unset, that channel when set; mono audio is read as it is."""
    make_model_dir(tmp_path, chunks={"use_dynamic_chunk": True})
    path, pcm = _clip(tmp_path)
    stereo = np.stack([np.flip(pcm), pcm], axis=1)
    sf.write(str(tmp_path / "stereo.wav"), stereo, 8000, subtype="PCM_16")
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    _, want = model.features((pcm, 8000))
    for audio in (str(tmp_path / "stereo.wav"), (stereo, 8000)):
        with pytest.raises(UserError, match=r"has 2 channels: set dataset_conf.channel to the one to read"):
            model.transcribe(audio, mode="ctc_greedy_search")
    with pytest.raises(UserError, match=r"shape \(2, \d+\): a 2-D array is \(samples, channels\); pass its transpose"):
        model.transcribe((stereo.T, 8000), mode="ctc_greedy_search")
    config = load_config(str(tmp_path / "train.yaml"))
    config["dataset_conf"]["channel"] = 1
    save_yaml(config, str(tmp_path / "train.yaml"))
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    for audio in (str(tmp_path / "stereo.wav"), (stereo, 8000)):
        torch.testing.assert_close(model.features(audio)[1], want)
    # a mono file is read as it is, whatever the channel (issue 66 G: mono and stereo in one list)
    torch.testing.assert_close(model.features(str(path))[1], want)


def test_a_refused_stream_chunk_leaves_the_stream_usable(model, tmp_path):
    """T2: a NaN chunk raised a BadAudioError (not the documented UserError), and stayed in the stream, so every
    later chunk failed too. Now a UserError, and the stream goes on as if the chunk had not come."""
    _, pcm = _clip(tmp_path)
    wav = pcm / 32768.0
    pieces = [wav[i:i + 700] for i in range(0, len(wav), 700)]
    clean = model.stream(chunk_size=4, mode="ctc_greedy_search")
    for piece in pieces:
        clean.accept_waveform(piece, 8000)
    want = clean.finish()
    stream = model.stream(chunk_size=4, mode="ctc_greedy_search")
    for i, piece in enumerate(pieces):
        stream.accept_waveform(np.zeros(0, dtype=np.float32), 8000)  # a microphone may deliver nothing
        if i == 2:
            with pytest.raises(UserError, match="the chunk has 700 NaN/Inf samples"):
                stream.accept_waveform(np.full(700, np.nan), 8000)
            with pytest.raises(UserError, match="the chunk has 2 channels, the stream 1"):
                stream.accept_waveform(np.stack([piece, piece], axis=1), 8000)
        stream.accept_waveform(piece, 8000)
    assert stream.finish() == want
    assert len(stream.outputs) == len(clean.outputs) > 2
    stream = model.stream(chunk_size=4, mode="ctc_greedy_search")  # the channel policy of a file, from the start
    with pytest.raises(UserError, match=r"the stream: audio stream \(in memory\) has 2 channels: set dataset_conf"):
        stream.accept_waveform(np.stack([pieces[0], pieces[0]], axis=1), 8000)
    for piece in pieces:
        stream.accept_waveform(piece, 8000)
    assert stream.finish() == want


def test_a_refused_finish_is_refused_again_not_an_empty_text(model, tmp_path):
    """Issue 80 round 7, F3: a finish() refused (too short) marked the stream finished first, so the next finish()
    returned '' as if it had decoded. A finish refused before any audio leaves the stream to be fed; one refused
    after the audio ended is refused again, and the stream takes no more audio."""
    _, pcm = _clip(tmp_path)
    wav = pcm / 32768.0
    clean = model.stream(chunk_size=4, mode="ctc_greedy_search")
    clean.accept_waveform(wav, 8000)
    want = clean.finish()
    stream = model.stream(chunk_size=4, mode="ctc_greedy_search")
    with pytest.raises(UserError, match="the stream: too short to decode"):
        stream.finish()
    stream.accept_waveform(wav, 8000)   # nothing had come: the stream goes on
    assert stream.finish() == want
    short = model.stream(chunk_size=4, mode="ctc_greedy_search")
    short.accept_waveform(wav[:100], 8000)
    for _ in range(2):
        with pytest.raises(UserError, match=r"the stream \(100 samples\): too short to decode"):
            short.finish()
    with pytest.raises(UserError, match="this stream's audio has ended"):
        short.accept_waveform(wav, 8000)


@pytest.mark.parametrize("rate", [2 ** 31, 10 ** 20, 192_001])
def test_a_sample_rate_above_the_ceiling_is_one_line(model, rate):
    """Issue 80 round 7, F4: a sample rate of 2**31 Hz or more was an OverflowError from soundfile. An array's rate
    has the ceiling of every rate (schema.RATE_MAX)."""
    words = rf"sample rate must be <= 192000 Hz, got {rate} \(Hz; 192 kHz is the highest audio rate in use"
    with pytest.raises(UserError, match=words):
        model.transcribe((np.zeros(8000, dtype=np.float32), rate), mode="ctc_greedy_search")
    stream = model.stream(chunk_size=4, mode="ctc_greedy_search")
    with pytest.raises(UserError, match=words):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), rate)
    stream.accept_waveform(np.zeros(800, dtype=np.float32), 8000)   # the stream was left as it was


def test_a_list_of_floats_is_read_as_the_array(model, tmp_path):
    """Issue 80 round 7, F8: a stream's chunk may be a list of floats (a microphone callback's samples), read as the
    array np.asarray makes of it; so may the samples of transcribe's (samples, sample_rate) pair (they were refused
    as 'audio of type list')."""
    _, pcm = _clip(tmp_path)
    wav = pcm / 32768.0
    assert (model.transcribe((wav.tolist(), 8000), mode="ctc_greedy_search")
            == model.transcribe((wav, 8000), mode="ctc_greedy_search"))
    torch.testing.assert_close(model.features((wav.tolist(), 8000))[1], model.features((wav, 8000))[1])
    texts = []
    for pieces in ([wav[i:i + 700] for i in range(0, len(wav), 700)],
                   [wav[i:i + 700].tolist() for i in range(0, len(wav), 700)]):
        stream = model.stream(chunk_size=4, mode="ctc_greedy_search")
        for piece in pieces:
            stream.accept_waveform(piece, 8000)
        texts.append((stream.finish(), len(stream.outputs)))
    assert texts[0] == texts[1] and texts[0][1] > 2
