"""Chunk-by-chunk decoding of one utterance with a state, as WeNet's runtime and sherpa decode a live stream.

    stream = model.stream(chunk_size=4, left_chunks=-1, mode="attention_rescoring")
    for piece in pieces:                       # arrays as transcribe takes them: float in [-1, 1], int16, ...
        stream.accept_waveform(piece, 8000)
        print(stream.partial())                # CTC greedy text of the chunks encoded so far
    text = stream.finish()

The encoder runs a chunk as soon as the features of its whole window are in (``forward_chunk`` with its attention
and convolution caches); ``finish`` encodes the rest and runs ``mode``'s search on the whole encoder output. This is
exactly what ``recognize --simulate_streaming`` and ``transcribe(..., decoding_chunk_size=...)`` compute
(tests/decode/test_stream.py), at a cost per piece that does not grow with the stream: each piece is read by the one
audio reader on its own (``load_audio``: rate, channel policy), resampled by a streaming resampler and turned into
feature frames by an online extractor (``audio.resample_stream``, ``features.OnlineFeatures``: bitwise the
whole-utterance samples and frames), and only the frames of the next chunk's window are kept. What still grows is
the model's own: with ``left_chunks=-1`` every chunk attends to all the chunks before it (bound it with
``left_chunks``, docs/benchmarks.md), and ``finish`` searches the whole utterance once.
"""
import functools
import threading
from typing import Any, Callable, List, Optional

import numpy as np
import torch

from wenet_udps.dataset.audio import UnusableUtterance, array_frames, array_wav_bytes, load_audio, resample_stream
from wenet_udps.dataset.features import OnlineFeatures
from wenet_udps.utils.cli import UserError

SEARCH_OPTIONS = ("ctc_weight", "reverse_weight", "length_penalty", "blank_penalty", "max_len_ratio", "length_bonus",
                  "lm_search", "context", "context_weight")


def _one_caller(method: Callable) -> Callable:
    """A stream is one utterance fed in order by one thread: a call of ``method`` while another thread is inside one
    of the stream's methods is refused (its audio would interleave with the other's; or ``finish`` would end an
    utterance still being fed), and so is one from any thread but the one that fed the stream first (fed in turn
    from two threads, the audio interleaves as well); the stream goes on as if it had not come. A call refused
    for what it brought (a bad chunk, a finish before any audio) binds the stream to no thread: the first call it
    accepts does. One stream per thread decodes in parallel; ``partial`` (reading) may be called from any thread."""
    @functools.wraps(method)
    def one_caller(self, *args: Any, **kwargs: Any) -> Any:
        if not self._busy.acquire(blocking=False):
            raise UserError(f"stream.{method.__name__}(): another thread is in this stream (a stream decodes one "
                            f"utterance, fed in order by one thread); start one model.stream(...) per thread")
        try:
            caller = threading.current_thread()
            if self._feeder is not None and self._feeder is not caller:
                raise UserError(f"stream.{method.__name__}(): this stream is fed by the thread {self._feeder.name!r}, "
                                f"not {caller.name!r} (a stream decodes one utterance, fed in order by one thread); "
                                f"start one model.stream(...) per thread")
            result = method(self, *args, **kwargs)
            self._feeder = caller   # bound to the first thread whose call it accepted
            return result
        finally:
            self._busy.release()
    return one_caller


class StreamingDecoder:
    """The state of one utterance: the resampler and feature extractor, the features of the next chunk's window,
    the encoder caches and outputs, the partial text's CTC path."""

    def __init__(self, model: Any, chunk_size: int, left_chunks: int = -1, mode: str = "attention_rescoring",
                 **options: Any):
        # recognize's check: a model not trained for streaming, or a chunk size it cannot decode at, is refused.
        modes, self.beam_size, _, kwargs = model.decode_options(
            "stream", mode, options, {"decoding_chunk_size": chunk_size, "num_decoding_left_chunks": left_chunks,
                                      "simulate_streaming": True, "batch_size": 1})
        self.model, self.mode = model, modes[0]
        processor = model.processor
        if processor.speeds != [1.0] or processor.wave_augmentations or processor.augmentations:
            # eval_dataset_conf turns them all off; a whole-utterance transform has no piece-by-piece twin
            raise ValueError("a stream decodes with evaluation features: no speed perturbation or augmentation")
        self.processor = processor
        self.search_options = {k: v for k, v in kwargs.items() if k in SEARCH_OPTIONS}
        encoder = model.model.encoder
        self.encoder = encoder
        subsampling = encoder.embed.subsampling_rate
        self.context = encoder.embed.right_context + 1
        self.stride = subsampling * chunk_size
        self.window = (chunk_size - 1) * subsampling + self.context
        self.required_cache_size = chunk_size * left_chunks
        self.sample_rate: Optional[int] = None
        self.channels: Optional[int] = None
        self.num_samples = 0  # received, at the stream's rate
        self.resampler: Any = None
        self.online: Optional[OnlineFeatures] = None
        # (T, F) features from the next chunk's first frame on: at most a window and a piece's frames
        self.pending = torch.zeros(0, processor.feat_dim, device=model.device)
        self.offset = 0       # encoder frames produced so far
        self.att_cache = torch.zeros((0, 0, 0, 0), device=model.device)
        self.cnn_cache = torch.zeros((0, 0, 0, 0), device=model.device)
        self.outputs: List[torch.Tensor] = []
        self.scanned = 0      # outputs the partial text's CTC path has read
        self.last_id: Optional[int] = None
        self.tokens: List[int] = []
        self.pieces: List[str] = []   # the tokens' strings (tokenizer.ids2tokens), each mapped once
        self.text = ""                # partial()'s text of them
        self.ended = False        # finish() flushed the audio's tail: no chunk may follow
        self.refused: Optional[str] = None   # why the audio, once ended, cannot be decoded
        self.finished = False     # every chunk is encoded: finish() searches the whole output
        self._busy = threading.Lock()  # held by the thread inside accept_waveform, partial or finish
        self._feeder: Optional[threading.Thread] = None   # the first feeder: it alone feeds or finishes it

    @_one_caller
    def accept_waveform(self, samples: Any, sample_rate: Optional[int] = None) -> None:
        """Append samples (an array as transcribe takes it: ``audio.array_frames``'s dtype policy, the channel
        policy of ``dataset_conf.channel``) and encode every chunk whose window is complete.

        A chunk that is refused (a UserError: NaN samples, a dtype, another rate or channel count) leaves the
        stream as it was: the next good chunk goes on from the samples before it."""
        if self.ended:
            raise UserError("this stream's audio has ended (finish() was called); start a new one with "
                            "model.stream(...)")
        if sample_rate is None:   # (a default, so that leaving it out is this line, not Python's TypeError)
            raise UserError("stream.accept_waveform(samples, sample_rate): the chunk's sample rate is missing; give "
                            "it in Hz, e.g. accept_waveform(samples, 16000)")
        if self.sample_rate is not None and sample_rate != self.sample_rate:
            raise UserError(f"sample rate {sample_rate} Hz differs from the stream's {self.sample_rate} Hz")
        frames = array_frames(samples, "the chunk")
        if frames.size == 0:
            return
        if self.channels is not None and frames.shape[1] != self.channels:
            raise UserError(f"the chunk has {frames.shape[1]} channels, the stream {self.channels}")
        try:  # the checks of a file (rate, channel policy), on this piece alone, before anything is kept
            wav, _ = load_audio(array_wav_bytes(frames, sample_rate), name="stream", channel=self.processor.channel)
        except UnusableUtterance as e:
            raise UserError(f"the stream: {e}") from None
        if self.online is None:
            self.sample_rate, self.channels = sample_rate, frames.shape[1]
            self.resampler = resample_stream(sample_rate, self.model.sample_rate)
            self.online = OnlineFeatures(self.model.sample_rate, self.processor.conf)
        self.num_samples += len(wav)
        self._add(wav, last=False)
        while self.pending.size(0) >= self.window:
            self._chunk()

    def partial(self) -> str:
        """CTC greedy text of the chunks encoded so far (the path of the new chunks only is searched, and only its
        new tokens are mapped to their strings; a thread may ask while another feeds the stream: it waits for the
        accept_waveform under way). The text is the tokenizer's ``detokenize`` of the tokens (``tokens2text`` of
        their strings), made again only when a token was added."""
        with self._busy:
            if self.scanned < len(self.outputs):
                out = torch.cat(self.outputs[self.scanned:], dim=1)
                self.scanned = len(self.outputs)
                with torch.no_grad():
                    logp = self.model.model.ctc_logprobs(out, self.search_options.get("blank_penalty", 0.0))
                blank = self.model.model.ctc.blank_id
                for token in logp[0].argmax(dim=1).tolist():  # ctc_greedy_search's collapse, carried across chunks
                    if token != self.last_id and token != blank:
                        self.tokens.append(token)
                    self.last_id = token
            if len(self.pieces) < len(self.tokens):
                self.pieces += self.model.tokenizer.ids2tokens(self.tokens[len(self.pieces):])
                self.text = self.model.tokenizer.tokens2text(self.pieces)
            return self.text

    @_one_caller
    def finish(self) -> str:
        """Encode what is left (the last chunk may be short) and return the text of ``mode``."""
        if self.refused is not None:   # the audio ended and was refused: refused again, never ''
            raise UserError(self.refused)
        if not self.finished:
            if self.online is None:   # nothing came: the stream may still be fed
                raise UserError("the stream: too short to decode")
            self.ended = True   # the resampler's and extractor's tails are flushed: no audio may follow
            try:
                self._add(np.zeros(0, dtype=np.float32), last=True)
                if self.online.frames < self.processor.min_frames:
                    raise UserError(f"the stream ({self.num_samples} samples): too short to decode")
            except UserError as e:
                self.refused = str(e)
                raise
            while self.pending.size(0) >= self.context:  # full windows, then a short last one
                self._chunk()
            self.finished = True   # only once every check has passed and the last chunk is encoded
        out = torch.cat(self.outputs, dim=1) if self.outputs else torch.zeros(1, 0, self.encoder.output_size())
        mask = torch.ones(1, 1, out.size(1), dtype=torch.bool, device=out.device)
        result = self.model.model.search([self.mode], out, mask, self.beam_size, **self.search_options)
        return self.model.tokenizer.detokenize(result[self.mode][0].tokens)[0]

    def _add(self, wav: np.ndarray, last: bool) -> None:
        """Resample ``wav`` (N,) (int16 scale, the stream's rate) and append the feature frames it completes."""
        if self.resampler is not None:
            wav = self.resampler.resample_chunk(wav, last=last)
        feats = self.online.accept(wav, last=last)
        if not np.isfinite(feats).all():  # the processor's check of a whole file
            raise UserError("the stream: non-finite features")
        if len(feats):
            self.pending = torch.cat([self.pending, torch.from_numpy(feats).to(self.pending.device)])

    def _chunk(self) -> None:
        """Encode the window at the head of ``pending`` (the last one may be short) and move on by one stride."""
        with torch.no_grad():
            y, self.att_cache, self.cnn_cache = self.encoder.forward_chunk(
                self.pending[:self.window].unsqueeze(0), self.offset, self.required_cache_size, self.att_cache,
                self.cnn_cache)
        self.outputs.append(y)
        self.offset += y.size(1)
        self.pending = self.pending[self.stride:]
