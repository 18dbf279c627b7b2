"""The chunk-by-chunk state gives recognize --simulate_streaming's text, piece by piece of audio."""
import kaldi_native_fbank as knf
import numpy as np
import pytest
import soundfile as sf
import torch

import wenet_udps
from tests.decode.decode_helpers import read_hyps, write_clips, write_list
from tests.train.train_helpers import make_model_dir
from wenet_udps.bin import recognize
from wenet_udps.transformer.search import ctc_greedy_search
from wenet_udps.utils.cli import UserError

MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]


@pytest.mark.parametrize("encoder, chunk, left", [("transformer", 4, -1), ("conformer", 2, 1)])
def test_stream_gives_the_simulate_streaming_text(tmp_path, encoder, chunk, left):
    conf, ckpt = make_model_dir(tmp_path, encoder=encoder, chunks={"use_dynamic_chunk": True, "causal": True}
                                if encoder == "conformer" else {"use_dynamic_chunk": True})
    clips = write_clips(tmp_path, 3)
    recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data",
                    str(write_list(clips, tmp_path / "test.list")), "--result_dir", str(tmp_path / "res"),
                    "--modes", *MODES, "--beam_size", "4", "--ctc_weight", "0.5", "--batch_size", "1",
                    "--simulate_streaming", "--decoding_chunk_size", str(chunk),
                    "--num_decoding_left_chunks", str(left)])
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    rng = np.random.default_rng(1)
    for mode in MODES:
        want = read_hyps(tmp_path / "res" / mode / "text")
        weight = {"ctc_weight": 0.5} if mode == "attention_rescoring" else {}
        for clip in clips:
            wav, sr = sf.read(str(clip), dtype="float32")
            stream = model.stream(chunk_size=chunk, left_chunks=left, mode=mode, beam_size=4, **weight)
            start, partials = 0, []
            while start < len(wav):  # pieces of uneven size, as a microphone delivers them
                size = int(rng.integers(50, 1500))
                stream.accept_waveform(wav[start:start + size], sr)
                partials.append(stream.partial())
                start += size
            assert stream.finish() == want[clip.stem], (mode, clip.name)
            assert len(stream.outputs) > 2 and any(partials)  # it did run chunk by chunk, with partial texts


def test_stream_mistakes_are_user_errors(tmp_path):
    make_model_dir(tmp_path, chunks={"use_dynamic_chunk": True})
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    stream = model.stream(chunk_size=4)
    stream.accept_waveform(np.zeros(800, dtype=np.float32), 8000)
    with pytest.raises(UserError, match="sample rate 16000 Hz differs from the stream's 8000 Hz"):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), 16000)
    with pytest.raises(UserError, match="the chunk's sample rate is missing"):   # (was Python's TypeError)
        stream.accept_waveform(np.zeros(800, dtype=np.float32))
    with pytest.raises(UserError, match="too short to decode"):
        model.stream(chunk_size=4).finish()
    with pytest.raises(UserError, match="chunk"):
        model.stream(chunk_size=0)


def _signal(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """A tone stepping every 0.25 s, switched on and off 1.5 times a second, and light noise, at ``rate``: float32
    in [-1, 1] on which an untrained model emits changing tokens."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    tone = np.sin(2 * np.pi * (300 + 300 * np.floor(t * 4) % 900) * t) * (np.sin(2 * np.pi * 1.5 * t) > 0)
    return (0.3 * tone + 0.001 * rng.standard_normal(t.size)).astype(np.float32)


def _feed(stream, wav, rate, rng, low=1, high=2000):
    """Pieces of random odd sizes, as a microphone or a network delivers them."""
    start = 0
    while start < len(wav):
        size = int(rng.integers(low, high)) | 1
        stream.accept_waveform(wav[start:start + size], rate)
        start += size


@pytest.fixture(scope="module")
def causal_conformer(tmp_path_factory):
    path = tmp_path_factory.mktemp("conformer")
    make_model_dir(path, encoder="conformer", chunks={"use_dynamic_chunk": True, "causal": True})
    return wenet_udps.load_model(str(path), checkpoint="avg.pt")


@pytest.mark.parametrize("rate", [8000, 16000, 44100, 11025])
@pytest.mark.parametrize("chunk, left", [(1, -1), (3, 2), (4, -1)])
def test_stream_equals_transcribe_at_the_same_chunk_size(causal_conformer, rate, chunk, left):
    """At the model's rate (8 kHz) and resampled from others: the features (bitwise), the encoder output (bitwise)
    and the text of every mode are transcribe's with the same chunking. Before issue 80 a resampled stream dropped
    the frames of its last 50 ms each time, but a prefix resampled alone differs from the whole up to 66 ms from its
    end (8 -> 16 kHz), so its features were not the whole file's."""
    model = causal_conformer
    wav = _signal(2.3, rate, seed=rate)
    rng = np.random.default_rng(chunk)
    _, feats = model.features((wav, rate))
    want, _ = model.model.encoder.forward_chunk_by_chunk(feats.unsqueeze(0), chunk, left)
    for mode in ("ctc_prefix_beam_search", "attention_rescoring"):
        stream = model.stream(chunk_size=chunk, left_chunks=left, mode=mode, beam_size=3)
        _feed(stream, wav, rate, rng)
        text = stream.finish()
        assert torch.equal(torch.cat(stream.outputs, dim=1), want), (mode, rate)
        assert text == model.transcribe((wav, rate), mode=mode, beam_size=3, decoding_chunk_size=chunk,
                                        num_decoding_left_chunks=left, simulate_streaming=True), (mode, rate)


class _Counting:
    """kaldi-native-fbank's OnlineFbank, counting the samples each call hands it."""
    calls: list = []

    def __init__(self, opts):
        self.inner = knf.OnlineFbank(opts)

    def accept_waveform(self, rate, wav):
        _Counting.calls.append(len(wav))
        self.inner.accept_waveform(rate, wav)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("rate", [8000, 16000])
def test_a_piece_costs_its_own_samples_not_the_streams(causal_conformer, monkeypatch, rate):
    """Issue 80: accept_waveform read and computed the features of every sample so far on every call (14 ms a
    chunk at the start of a 40 s stream, 179 ms at its end). Now each call reads its own piece only, each sample
    reaches the feature extractor once, the features kept are bounded by one window, and partial() scans only the
    chunks encoded since its last call; the text is unchanged."""
    from wenet_udps.dataset import audio, features
    model = causal_conformer
    monkeypatch.setattr(features, "knf", type("knf", (), {"FbankOptions": knf.FbankOptions,
                                                          "OnlineFbank": _Counting}))
    read = []
    real_read = audio.read_frames
    monkeypatch.setattr(audio, "read_frames", lambda *a, **k: read.append(len(real_read(*a, **k)[0])) or
                        real_read(*a, **k))
    scanned = []
    real_logprobs = model.model.ctc_logprobs
    monkeypatch.setattr(model.model, "ctc_logprobs", lambda out, *a: scanned.append(out.size(1)) or
                        real_logprobs(out, *a))
    _Counting.calls = []
    piece = rate // 10  # 0.1 s
    wav = _signal(20.0, rate)
    stream = model.stream(chunk_size=4, mode="ctc_greedy_search")
    for start in range(0, len(wav), piece):
        stream.accept_waveform(wav[start:start + piece], rate)
        assert read[-1] == len(wav[start:start + piece]), start  # the reader saw this piece alone
        stream.partial()
        assert sum(scanned) == stream.offset  # each output frame scanned once, not once per call
    text = stream.finish()
    assert sum(read) == len(wav)
    resampled = len(audio.resample(wav, rate, model.sample_rate))
    assert sum(_Counting.calls) == resampled  # each sample reached the extractor once
    assert max(_Counting.calls) <= piece * model.sample_rate // rate + 64  # (soxr releases a piece's samples late)
    bounded = model.stream(chunk_size=4, mode="ctc_greedy_search")
    for start in range(0, len(wav) // 4, piece):  # the features kept: one window, not the stream's
        bounded.accept_waveform(wav[start:start + piece], rate)
        assert bounded.pending.size(0) < bounded.window + bounded.stride
    monkeypatch.undo()
    assert text == model.transcribe((wav, rate), mode="ctc_greedy_search", decoding_chunk_size=4,
                                    simulate_streaming=True)


def test_partial_is_the_ctc_greedy_text_of_the_chunks_so_far(causal_conformer):
    """partial() carries its CTC path across chunks: at every call it is the greedy text of all outputs so far."""
    model = causal_conformer
    wav = _signal(3.0, 8000, seed=3)
    stream = model.stream(chunk_size=2, mode="ctc_greedy_search", blank_penalty=3.0)  # many tokens, blank lowered
    texts = []
    for start in range(0, len(wav), 333):
        stream.accept_waveform(wav[start:start + 333], 8000)
        if start % 999 == 0 or not stream.outputs:  # not after every piece: a call scans what came since the last
            continue
        out = torch.cat(stream.outputs, dim=1)
        with torch.no_grad():
            logp = model.model.ctc_logprobs(out, 3.0)
        tokens = ctc_greedy_search(logp, torch.tensor([out.size(1)]), model.model.ctc.blank_id)[0].tokens
        assert stream.partial() == model.tokenizer.detokenize(tokens)[0]
        texts.append(stream.partial())
    assert len(set(texts)) > 2  # the text grew as the chunks came


def test_partial_maps_each_token_to_its_string_once(causal_conformer, monkeypatch):
    """Issue 80 round 7, F11: every partial() detokenised all the tokens so far, a cost that grew with the stream
    (1.16 ms a call at 10 minutes, 15000 tokens; 0.02 ms at 10 s). Each token is now mapped once, and the text is
    made again only when a token came; it is detokenize's text of all the tokens."""
    model = causal_conformer
    tokenizer = model.tokenizer
    mapped = []
    ids2tokens = type(tokenizer).ids2tokens
    monkeypatch.setattr(tokenizer, "ids2tokens", lambda ids: mapped.append(len(ids)) or ids2tokens(tokenizer, ids))
    wav = _signal(3.0, 8000, seed=3)
    stream = model.stream(chunk_size=2, mode="ctc_greedy_search", blank_penalty=3.0)  # many tokens, blank lowered
    for start in range(0, len(wav), 333):
        stream.accept_waveform(wav[start:start + 333], 8000)
        for _ in range(2):
            text = stream.partial()
    assert sum(mapped) == len(stream.tokens) > 5 and len(mapped) > 1
    monkeypatch.undo()
    assert text == tokenizer.detokenize(stream.tokens)[0] != ""
