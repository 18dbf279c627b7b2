"""Guard of issue 80 B (a stream at a constant cost per chunk, docs/failure_behaviour.md): every streaming entry
point of the package does, per call, work bounded by the chunk's size, not by the stream's length.

The walk finds the entry points from the code: every public function or method of wenet_udps/ that is named as an
API fed piece by piece (``accept_waveform``, ``partial``, ``forward_chunk`` ...) or that reaches, itself or through
the functions of its own module and class, one of the online primitives (soxr's streaming resampler,
kaldi-native-fbank's online extractors, ``OnlineFeatures``, the encoder's ``forward_chunk``, ``StreamingDecoder``).
Each must be driven below for 500 chunks, or be said to take a whole utterance in one call. A driver counts the
work of each call by wrapping the primitives themselves: the samples read and resampled, the samples and frames of
the feature extractor, the frames run through the encoder's chunk forward, the positions encoded (returned, and
computed by the sinusoid formula past the saved table) and the frames the partial text's CTC path scans; from the
5th to the 500th call each count stays under a bound made of the chunk's size alone (no timing)."""
import ast
import functools
from pathlib import Path
from typing import Dict, Iterator, List, Set

import kaldi_native_fbank as knf
import numpy as np
import pytest
import soxr
import torch

import wenet_udps
from tests.train.train_helpers import make_model_dir
from wenet_udps.dataset import audio
from wenet_udps.dataset.features import OnlineFeatures
from wenet_udps.export.sherpa import SherpaStreaming
from wenet_udps.export.wrappers import ChunkEncoder, chunk_mask, initial_caches
from wenet_udps.transformer.encoder import BaseEncoder

ROOT = Path(__file__).resolve().parents[2]
# What streams: the online primitives (a call of one of these names) ...
PRIMITIVES = {"ResampleStream", "resample_stream", "resample_chunk", "OnlineFbank", "OnlineMfcc", "OnlineFeatures",
              "accept_waveform", "input_finished", "forward_chunk", "StreamingDecoder"}
# ... and the method names of an API fed piece by piece (kaldi's and sherpa's, soxr's, ours).
INCREMENTAL = {"accept_waveform", "accept", "partial", "input_finished", "resample_chunk", "forward_chunk", "feed",
               "push"}

CHUNK, LEFT, CALLS, FIRST = 4, 2, 500, 5
RATE = 16000  # the stream's rate; the tiny model's is 8 kHz, so every piece is resampled

# Every entry point the walk finds: the driver below that feeds it chunk by chunk ...
DRIVEN = {
    "wenet_udps/decode/api.py:RecognitionModel.stream": "stream",
    "wenet_udps/decode/stream.py:StreamingDecoder.accept_waveform": "stream",
    "wenet_udps/decode/stream.py:StreamingDecoder.partial": "stream",
    "wenet_udps/dataset/audio.py:resample_stream": "resampler",
    "wenet_udps/dataset/features.py:OnlineFeatures.accept": "online_features",
    "wenet_udps/transformer/encoder.py:BaseEncoder.forward_chunk": "forward_chunk",
    "wenet_udps/export/wrappers.py:ChunkEncoder.forward": "chunk_encoder",
    "wenet_udps/export/sherpa.py:SherpaStreaming.forward": "sherpa_streaming",
}
# ... or why it is called once per utterance, with all of it.
WHOLE = {
    "wenet_udps/decode/stream.py:StreamingDecoder.finish": "ends the stream: the last chunk, then the mode's search "
                                                           "over the whole utterance, once",
    "wenet_udps/dataset/features.py:compute_fbank": "a whole waveform's features (compute_features'), once",
    "wenet_udps/dataset/features.py:compute_mfcc": "a whole waveform's features (compute_features'), once",
    "wenet_udps/transformer/encoder.py:BaseEncoder.forward_chunk_by_chunk": "a whole utterance's features in one "
                                                                            "call; each chunk is forward_chunk's",
    "wenet_udps/export/sherpa_runtime.py:transcribe_offline": "whole waveforms to sherpa-onnx's offline recognizer",
    "wenet_udps/export/sherpa_runtime.py:transcribe_online": "a whole waveform to sherpa-onnx's own streaming "
                                                             "runtime (its C++, not this package), once",
}


def _called(node: ast.AST) -> Set[str]:
    """The names a function calls: ``f(...)`` and ``x.f(...)`` give ``f``."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def entry_points(source: str, where: str) -> List[str]:
    """``where:function`` and ``where:Class.method`` of every public function and method of ``source`` that streams:
    named in INCREMENTAL, or calling a PRIMITIVE itself or through the module's functions and its class's methods
    (``self._add`` -> ``resample_chunk``). Constructors are not calls per chunk."""
    tree = ast.parse(source)
    functions: Dict[str, ast.AST] = {}  # qualified name -> node
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions[f"{node.name}.{item.name}"] = item
    calls = {name: _called(node) for name, node in functions.items()}
    streams = {name for name, node in functions.items()
               if name.rsplit(".", 1)[-1] in INCREMENTAL or calls[name] & PRIMITIVES}
    grew = True
    while grew:  # through the module's own functions and the class's own methods
        grew = False
        for name in set(functions) - streams:
            cls = name.rsplit(".", 1)[0] + "." if "." in name else ""
            if any(f"{cls}{c}" in streams or c in streams for c in calls[name]):
                streams.add(name)
                grew = True
    return sorted(f"{where}:{name}" for name in streams if not name.rsplit(".", 1)[-1].startswith("_"))


def package_entry_points() -> List[str]:
    out = []
    for path in sorted((ROOT / "wenet_udps").rglob("*.py")):
        out += entry_points(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return out


def test_every_streaming_entry_point_is_driven_or_takes_a_whole_utterance():
    found = set(package_entry_points())
    named = set(DRIVEN) | set(WHOLE)
    assert not found - named, f"streaming entry points with no per-chunk cost driver here: {sorted(found - named)}"
    assert not named - found, f"named here, not found in the code (renamed or gone): {sorted(named - found)}"
    assert set(DRIVEN.values()) == set(DRIVERS)


def test_the_walk_finds_a_new_entry_point():
    """A class fed piece by piece, added to the package, is found by its name or by the primitive it reaches."""
    source = ("from wenet_udps.dataset.features import OnlineFeatures, compute_features\n"
              "class Microphone:\n"
              "    def listen(self, wav):\n        self._frames(wav)\n"
              "    def _frames(self, wav):\n        return self.online.accept_waveform(8000, wav)\n"
              "class Relay:\n"
              "    def partial(self):\n        return ''\n"
              "    def feed(self, wav):\n        self.all.append(wav)\n        return compute_features(self.all)\n"
              "    def join(self, wav):\n        return compute_features(wav)\n"
              "def whole(x):\n    return x\n")
    assert entry_points(source, "m.py") == ["m.py:Microphone.listen", "m.py:Relay.feed",
                                              "m.py:Relay.partial"]


class Work:
    """The work of one call, counted at the primitives: name -> total input size."""

    def __init__(self):
        self.counts: Dict[str, int] = {}

    def add(self, name: str, size: int) -> None:
        self.counts[name] = self.counts.get(name, 0) + int(size)

    def take(self) -> Dict[str, int]:
        counts, self.counts = self.counts, {}
        return counts


class _Resampler:
    def __init__(self, work: Work, kind, *args, **kwargs):
        self.inner, self.work = kind(*args, **kwargs), work

    def resample_chunk(self, wav, last=False):
        self.work.add("resampled", len(wav))
        return self.inner.resample_chunk(wav, last=last)


class _Extractor:
    def __init__(self, work: Work, kind, opts):
        self.inner, self.work = kind(opts), work

    def accept_waveform(self, rate, wav):
        self.work.add("feature_samples", len(wav))
        self.inner.accept_waveform(rate, wav)

    def get_frame(self, i):
        self.work.add("feature_frames", 1)
        return self.inner.get_frame(i)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("conformer")
    make_model_dir(path, encoder="conformer", chunks={"use_dynamic_chunk": True, "causal": True})
    return path


@pytest.fixture
def work(monkeypatch, tiny):
    """A fresh model whose primitives count their work; its saved positions cut to 64 (2.6 s), so that the 500
    chunks (80 s) go past them as a 200 s stream goes past the 5000 of a real one."""
    counts = Work()
    model = wenet_udps.load_model(str(tiny), checkpoint="avg.pt")
    pos = model.model.encoder.embed.pos_enc
    pos.max_len, pos.pe = 64, pos.pe[:, :64]
    formula, at, lookup = pos.table, pos.rows, pos.position_encoding
    pos.table = lambda length, d_model, start=0: counts.add("positions_computed", length - start) or \
        formula(length, d_model, start)
    pos.rows = lambda position, d_model: counts.add("positions_computed", position.numel()) or at(position, d_model)
    pos.position_encoding = lambda offset, size, *a, **k: counts.add("positions", size) or lookup(offset, size, *a, **k)
    monkeypatch.setattr(soxr, "ResampleStream", functools.partial(_Resampler, counts, soxr.ResampleStream))
    monkeypatch.setattr(knf, "OnlineFbank", functools.partial(_Extractor, counts, knf.OnlineFbank))
    monkeypatch.setattr(knf, "OnlineMfcc", functools.partial(_Extractor, counts, knf.OnlineMfcc))
    real_read, real_chunk, real_logprobs = audio.read_frames, BaseEncoder.forward_chunk, model.model.ctc_logprobs
    monkeypatch.setattr(audio, "read_frames", lambda *a, **k: (lambda r: counts.add("read", len(r[0])) or r)(
        real_read(*a, **k)))
    monkeypatch.setattr(BaseEncoder, "forward_chunk", lambda self, xs, *a, **k: counts.add(
        "encoder_frames", xs.size(1)) or real_chunk(self, xs, *a, **k))
    monkeypatch.setattr(model.model, "ctc_logprobs", lambda out, *a: counts.add("scanned", out.size(1)) or
                        real_logprobs(out, *a))
    counts.model = model
    return counts


def _geometry(model):
    embed = model.model.encoder.embed
    stride = embed.subsampling_rate * CHUNK  # feature frames per chunk
    window = (CHUNK - 1) * embed.subsampling_rate + embed.right_context + 1
    return stride, window


def _noise(samples: int, seed: int) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(samples)).astype(np.float32)


def drive_stream(work: Work) -> Iterator[Dict[str, int]]:
    """``model.stream(...)``: a chunk's audio (one stride of frames at 16 kHz) per ``accept_waveform``, then
    ``partial()``."""
    model = work.model
    stride, _ = _geometry(model)
    piece = stride * RATE // 100
    stream = model.stream(chunk_size=CHUNK, left_chunks=LEFT, mode="ctc_greedy_search")
    for i in range(CALLS):
        stream.accept_waveform(_noise(piece, i), RATE)
        stream.partial()
        yield work.take()


def drive_resampler(work: Work) -> Iterator[Dict[str, int]]:
    stride, _ = _geometry(work.model)
    resampler = audio.resample_stream(RATE, work.model.sample_rate)
    for i in range(CALLS):
        work.add("resampled_out", len(resampler.resample_chunk(_noise(stride * RATE // 100, i) * 32768)))
        yield work.take()


def drive_online_features(work: Work) -> Iterator[Dict[str, int]]:
    model = work.model
    stride, _ = _geometry(model)
    online = OnlineFeatures(model.sample_rate, model.processor.conf)
    for i in range(CALLS):
        online.accept(_noise(stride * model.sample_rate // 100, i) * 32768)
        yield work.take()


def drive_forward_chunk(work: Work) -> Iterator[Dict[str, int]]:
    model = work.model
    _, window = _geometry(model)
    encoder, offset = model.model.encoder, 0
    att, cnn = torch.zeros(0, 0, 0, 0), torch.zeros(0, 0, 0, 0)
    for i in range(CALLS):
        with torch.no_grad():
            y, att, cnn = encoder.forward_chunk(torch.randn(1, window, model.processor.feat_dim), offset,
                                                CHUNK * LEFT, att, cnn)
        offset += y.size(1)
        yield work.take()


def _drive_graph(work: Work, sherpa: bool) -> Iterator[Dict[str, int]]:
    """One exported step graph, in eager mode, as its runtime calls it: fixed-size caches, a (1,) offset, past the
    fixture's 64 saved positions as the others (a (1,) offset past them computed the table from position 0;
    tests/export/test_positions_past_the_table.py runs the exported graphs there)."""
    model = work.model
    _, window = _geometry(model)
    att, cnn = initial_caches(model.model, CHUNK, LEFT)
    size, produced = CHUNK * LEFT, 0
    step = SherpaStreaming(model.model, CHUNK, LEFT) if sherpa else ChunkEncoder(model.model, CHUNK, LEFT)
    for i in range(CALLS):
        x, mask = torch.randn(1, window, model.processor.feat_dim), chunk_mask(size, min(produced, size), CHUNK)
        with torch.no_grad():
            if sherpa:
                out, att, cnn = step(x, torch.tensor([size + produced]), torch.tensor([size]), att, cnn, mask)
            else:
                out, _, att, cnn = step(x, torch.tensor([produced]), att, cnn, mask)
        produced += out.size(1)
        yield work.take()


DRIVERS = {"stream": drive_stream, "resampler": drive_resampler, "online_features": drive_online_features,
           "forward_chunk": drive_forward_chunk,
           "chunk_encoder": lambda work: _drive_graph(work, sherpa=False),
           "sherpa_streaming": lambda work: _drive_graph(work, sherpa=True)}


def bounds(model) -> Dict[str, int]:
    """The most work one call may do, from the chunk's size alone. A piece is one chunk's stride of audio; soxr
    gives out what it resamples in blocks, up to a piece's worth late (830 or 1660 samples a call, 16 -> 8 kHz), so
    a call may turn two pieces into frames and complete three chunks; a chunk encodes its window, attends to its
    LEFT chunks before it and itself, and is scanned once."""
    stride, window = _geometry(model)
    chunks, keys = 3, CHUNK * (LEFT + 1)
    piece, resampled = stride * RATE // 100, stride * model.sample_rate // 100
    return {"read": piece, "resampled": piece, "resampled_out": 2 * resampled, "feature_samples": 2 * resampled,
            "feature_frames": 2 * stride + 1, "encoder_frames": chunks * window, "positions": chunks * (CHUNK + keys),
            "positions_computed": chunks * (CHUNK + keys), "scanned": chunks * CHUNK}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_the_work_of_a_call_does_not_grow_with_the_stream(work, driver):
    """Issue 80 B: each call read and computed the features of all the samples so far (179 ms a chunk at the end of
    a 40 s stream, 14 ms at its start), partial() searched every chunk so far, and positions past the saved table
    were computed from position 0. Counted at the primitives, the 5th to the 500th call each do the work of a chunk."""
    limit = bounds(work.model)
    seen: Dict[str, int] = {}
    for i, counts in enumerate(DRIVERS[driver](work), 1):
        assert set(counts) <= set(limit), counts
        for name, size in counts.items():
            seen[name] = seen.get(name, 0) + size
            assert i < FIRST or size <= limit[name], f"{driver}: call {i} did {size} {name}, a chunk's is " \
                                                      f"at most {limit[name]}"
    assert i == CALLS and seen, (driver, seen)  # it ran to the end, and did count its work
    wanted = {"stream": {"read", "resampled", "feature_samples", "feature_frames", "encoder_frames", "positions",
                         "positions_computed", "scanned"},
              "resampler": {"resampled", "resampled_out"}, "online_features": {"feature_samples", "feature_frames"},
              "forward_chunk": {"encoder_frames", "positions", "positions_computed"},
              "chunk_encoder": {"encoder_frames", "positions"}, "sherpa_streaming": {"encoder_frames", "positions"}}
    assert wanted[driver] <= set(seen), (driver, sorted(seen))  # every primitive it goes through was counted
