"""Chunk-by-chunk decoding of one utterance with a state, as WeNet's runtime and sherpa decode a live stream.

    stream = model.stream(chunk_size=4, left_chunks=-1, mode="attention_rescoring")
    for piece in pieces:                       # arrays as transcribe takes them: float in [-1, 1], int16, ...
        stream.accept_waveform(piece, 8000)
        print(stream.partial())                # CTC greedy text of the chunks encoded so far
    text = stream.finish()

The encoder runs a chunk as soon as the features of its whole window are in (``forward_chunk`` with its attention
and convolution caches); ``finish`` encodes the rest and runs ``mode``'s search on the whole encoder output. At the
model's sample rate this is exactly what ``recognize --simulate_streaming`` computes (tests/decode/test_stream.py):
features are recomputed from the samples received so far, and a feature frame depends only on its own window.
Audio at another rate is resampled; the frames of the last 50 ms wait for more audio, since resampling near the end
of the buffer depends on what follows.
"""
import functools
import threading
from typing import Any, Callable, List, Optional

import numpy as np
import torch

from wenet_udps.dataset.audio import UnusableUtterance, array_frames, array_wav_bytes
from wenet_udps.transformer.search import ctc_greedy_search
from wenet_udps.utils.cli import UserError

RESAMPLE_MARGIN_SECONDS = 0.05
SEARCH_OPTIONS = ("ctc_weight", "reverse_weight", "length_penalty", "blank_penalty", "max_len_ratio", "length_bonus",
                  "lm_search", "context", "context_weight")


def _one_caller(method: Callable) -> Callable:
    """A stream is one utterance fed in order: a call of ``method`` while another thread is inside one of the
    stream's methods is refused (its audio would interleave with the other's; or ``finish`` would end an utterance
    still being fed); the stream goes on as if it had not come. One stream per thread decodes in parallel."""
    @functools.wraps(method)
    def one_caller(self, *args: Any, **kwargs: Any) -> Any:
        if not self._busy.acquire(blocking=False):
            raise UserError(f"stream.{method.__name__}(): another thread is in this stream (a stream decodes one "
                            f"utterance, fed in order by one thread); start one model.stream(...) per thread")
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy.release()
    return one_caller


class StreamingDecoder:
    """The state of one utterance: samples so far, the next chunk's first feature frame, the encoder caches."""

    def __init__(self, model: Any, chunk_size: int, left_chunks: int = -1, mode: str = "attention_rescoring",
                 **options: Any):
        # recognize's check: a model not trained for streaming, or a chunk size it cannot decode at, is refused.
        modes, self.beam_size, _, kwargs = model.decode_options(
            "stream", mode, options, {"decoding_chunk_size": chunk_size, "num_decoding_left_chunks": left_chunks,
                                      "simulate_streaming": True, "batch_size": 1})
        self.model, self.mode = model, modes[0]
        self.search_options = {k: v for k, v in kwargs.items() if k in SEARCH_OPTIONS}
        encoder = model.model.encoder
        self.encoder = encoder
        subsampling = encoder.embed.subsampling_rate
        self.context = encoder.embed.right_context + 1
        self.stride = subsampling * chunk_size
        self.window = (chunk_size - 1) * subsampling + self.context
        self.required_cache_size = chunk_size * left_chunks
        self.samples: List[np.ndarray] = []
        self.sample_rate: Optional[int] = None
        self.cur = 0          # first feature frame of the next chunk
        self.offset = 0       # encoder frames produced so far
        self.att_cache = torch.zeros((0, 0, 0, 0), device=model.device)
        self.cnn_cache = torch.zeros((0, 0, 0, 0), device=model.device)
        self.outputs: List[torch.Tensor] = []
        self.finished = False
        self._busy = threading.Lock()  # held by the thread inside accept_waveform, partial or finish

    @_one_caller
    def accept_waveform(self, samples: Any, sample_rate: int) -> None:
        """Append samples (an array as transcribe takes it: ``audio.array_frames``'s dtype policy, the channel
        policy of ``dataset_conf.channel``) and encode every chunk whose window is complete.

        A chunk that is refused (a UserError: NaN samples, a dtype, another rate or channel count) leaves the
        stream as it was: the next good chunk goes on from the samples before it."""
        if self.finished:
            raise UserError("this stream is finished; start a new one with model.stream(...)")
        if self.sample_rate is not None and sample_rate != self.sample_rate:
            raise UserError(f"sample rate {sample_rate} Hz differs from the stream's {self.sample_rate} Hz")
        frames = array_frames(samples, "the chunk")
        if frames.size == 0:
            return
        if self.samples and frames.shape[1] != self.samples[0].shape[1]:
            raise UserError(f"the chunk has {frames.shape[1]} channels, the stream {self.samples[0].shape[1]}")
        feats = self._features(self.samples + [frames], sample_rate)  # the checks of a file, before it is kept
        self.samples.append(frames)
        self.sample_rate = sample_rate
        if feats is None:
            return
        settled = feats.size(0)
        if sample_rate != self.model.sample_rate:
            settled -= int(np.ceil(RESAMPLE_MARGIN_SECONDS / self._frame_shift_seconds()))
        while self.cur + self.window <= settled:
            self._chunk(feats[self.cur:self.cur + self.window])

    def partial(self) -> str:
        """CTC greedy text of the chunks encoded so far (a thread may ask while another feeds the stream: it
        waits for the accept_waveform under way)."""
        with self._busy:
            if not self.outputs:
                return ""
            out = torch.cat(self.outputs, dim=1)
        with torch.no_grad():
            logp = self.model.model.ctc_logprobs(out, self.search_options.get("blank_penalty", 0.0))
        tokens = ctc_greedy_search(logp, torch.tensor([out.size(1)]), self.model.model.ctc.blank_id)[0].tokens
        return self.model.tokenizer.detokenize(tokens)[0]

    @_one_caller
    def finish(self) -> str:
        """Encode what is left (the last chunk may be short) and return the text of ``mode``."""
        if not self.finished:
            feats = self._features(self.samples, self.sample_rate)
            self.finished = True
            if feats is None:
                name = "the stream" if not self.samples else f"the stream ({sum(map(len, self.samples))} samples)"
                raise UserError(f"{name}: too short to decode")
            while self.cur <= feats.size(0) - self.context:
                self._chunk(feats[self.cur:min(self.cur + self.window, feats.size(0))])
        out = torch.cat(self.outputs, dim=1) if self.outputs else torch.zeros(1, 0, self.encoder.output_size())
        mask = torch.ones(1, 1, out.size(1), dtype=torch.bool, device=out.device)
        result = self.model.model.search([self.mode], out, mask, self.beam_size, **self.search_options)
        return self.model.tokenizer.detokenize(result[self.mode][0].tokens)[0]

    def _frame_shift_seconds(self) -> float:
        return self.model.frame_seconds / self.encoder.embed.subsampling_rate

    def _features(self, samples: List[np.ndarray], sample_rate: Optional[int]) -> Optional[torch.Tensor]:
        """(T, F) features of ``samples`` (frames (n, C) in full scale, in order) on the model's device; None while
        too few for one frame. UserError for audio the reader refuses (the rate, the channel policy)."""
        if not samples:
            return None
        sample = {"key": "stream", "audio": array_wav_bytes(np.concatenate(samples), sample_rate), "txt": ""}
        try:
            out = self.model.processor(sample, np.random.default_rng(0))
        except UnusableUtterance as e:
            raise UserError(f"the stream: {e}") from None
        if isinstance(out, str):
            return None
        return torch.from_numpy(out["feat"]).to(self.model.device)

    def _chunk(self, xs: torch.Tensor) -> None:
        with torch.no_grad():
            y, self.att_cache, self.cnn_cache = self.encoder.forward_chunk(
                xs.unsqueeze(0), self.offset, self.required_cache_size, self.att_cache, self.cnn_cache)
        self.outputs.append(y)
        self.offset += y.size(1)
        self.cur += self.stride
