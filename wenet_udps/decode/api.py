"""The Python API: a trained experiment dir in one call, then text from audio.

    import wenet_udps
    model = wenet_udps.load_model("exp/x", checkpoint="avg_5.pt", device="cpu")
    print(model.transcribe("test.wav", mode="attention_rescoring", beam_size=10, ctc_weight=0.5))
    report = model.decode_list("data/test/data.list")   # texts per mode, counts, RTF (as recognize prints)

Everything goes through what recognize runs: the experiment's train.yaml, the checkpoint checked as every load
checks it (SHA-256 against its YAML, the units file it was trained with), the evaluation features of its
dataset_conf (a file at another sample rate is resampled as in training), ``ASRModel.decode``.
"""
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from wenet_udps.config import load_config
from wenet_udps.dataset.audio import UnusableUtterance, array_wav_bytes
from wenet_udps.dataset.dataset import eval_dataset_conf
from wenet_udps.dataset.transforms import UtteranceProcessor
from wenet_udps.decode.align import ctc_forced_align, token_times
from wenet_udps.decode.data_list import decode_dataset, frame_shift_ms, model_from_checkpoint, rtf_line
from wenet_udps.decode.inputs import audio_input, audio_list, check_keywords
from wenet_udps.decode.recipe import RecipeDecoding
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.model_builder import min_input_frames
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.decode_options import DECODE_OPTIONS, check_decode_options, chunk_size_for, \
    resolve_decode_options
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.kaldi_files import read_map, utf8_lines

Audio = Union[str, "os.PathLike[str]", bytes, Tuple[np.ndarray, int]]
# The decoding options each method takes as keywords (DECODE_OPTIONS); transcribe and stream decode one utterance,
# and stream sets the chunking from its own arguments.
STREAM_SET = ("batch_size", "decoding_chunk_size", "num_decoding_left_chunks", "simulate_streaming")
KEYWORDS = {"transcribe": ("mode", "timestamps", "sample_rate") + tuple(o for o in DECODE_OPTIONS if o != "batch_size"),
            "decode_list": ("modes", "data_type", "progress") + tuple(DECODE_OPTIONS),
            "stream": ("chunk_size", "left_chunks", "mode") + tuple(o for o in DECODE_OPTIONS if o not in STREAM_SET)}


@dataclass
class DecodeReport:
    """What :meth:`RecognitionModel.decode_list` decoded: mode -> {key: text}, and the numbers recognize prints."""
    texts: Dict[str, Dict[str, str]]
    utterances: int
    skipped: int
    counts: str          # "N utterances used, M skipped (reasons)"
    rtf: float
    decode_seconds: float
    audio_seconds: float
    summary: str         # recognize's "RTF ..." line


def load_model(exp_dir: str, checkpoint: str = "final.pt", device: str = "cpu", *,
               verify: bool = True) -> "RecognitionModel":
    """The model of ``exp_dir`` (its ``train.yaml``) with the weights ``<exp_dir>/<checkpoint>``, in eval mode on
    ``device`` (``cpu`` or ``cuda``). UserError (one line) for a missing dir, train.yaml or checkpoint, a checkpoint
    whose SHA-256 does not match its YAML (``verify=False`` loads it anyway) or trained with another units file."""
    if not os.path.isdir(exp_dir):
        raise UserError(f"experiment dir {exp_dir} does not exist (the dir run.sh or train wrote, with train.yaml)")
    conf = os.path.join(exp_dir, "train.yaml")
    if not os.path.isfile(conf):
        raise UserError(f"{exp_dir} has no train.yaml: not an experiment dir")
    path = os.path.join(exp_dir, checkpoint)
    if not os.path.isfile(path):
        have = sorted(f for f in os.listdir(exp_dir) if f.endswith(".pt"))
        raise UserError(f"no checkpoint {path}; {exp_dir} has {', '.join(have) or 'no .pt file'}")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UserError(f"device {device!r}: use cpu or cuda")
    if device != "cpu" and not torch.cuda.is_available():
        raise UserError(f"device {device}: this torch sees no CUDA device; use cpu")
    config = load_config(conf)
    return RecognitionModel(config, model_from_checkpoint(config, path, device, verify=verify), device,
                            RecipeDecoding(exp_dir, path))


class RecognitionModel:
    """A loaded model with its tokenizer and evaluation features (see the module docstring)."""

    def __init__(self, config: Dict[str, Any], model: torch.nn.Module, device: str = "cpu",
                 recipe: Optional[RecipeDecoding] = None):
        self.config, self.model, self.device = config, model, device
        self.recipe = recipe  # the options stage 5 decoded this checkpoint with: the defaults (decode/recipe.py)
        self.tokenizer = init_tokenizer(config)
        self.processor = UtteranceProcessor(eval_dataset_conf(dict(config.get("dataset_conf") or {}), 1), None,
                                            min_input_frames(config))
        self.sample_rate = self.processor.sample_rate
        # One encoder frame in seconds: the CTC alignment's time unit.
        self.frame_seconds = (model.encoder.embed.subsampling_rate
                              * frame_shift_ms(config.get("dataset_conf") or {}) / 1000.0)
        self._lm: Dict[Tuple[str, float, float, int], LmSearch] = {}

    def features(self, audio: Audio, sample_rate: Optional[int] = None) -> Tuple[str, torch.Tensor]:
        """(name, (T, F) features) of one input (a path, audio file bytes, an (array, sample_rate) pair:
        ``inputs.audio_input``), as recognize computes them."""
        kind, audio, sample_rate = audio_input(audio, sample_rate)
        if kind == "path":
            name, sample = audio, {"key": audio, "wav": audio, "txt": ""}
        elif kind == "bytes":
            name, sample = f"the audio bytes ({len(audio)} bytes)", {"key": "bytes", "audio": audio, "txt": ""}
        else:
            # the one dtype policy of arrays, then read as a file: rate, channel policy and length alike
            name, sample = "the array", {"key": "array", "audio": array_wav_bytes(audio, sample_rate), "txt": ""}
        try:
            out = self.processor(sample, np.random.default_rng(0))
        except UnusableUtterance as e:
            raise UserError(f"{name}: {e}") from None
        if isinstance(out, str):  # the decoding filter keeps everything the encoder can take; too few frames
            raise UserError(f"{name}: too short to decode ({out}: fewer than {self.processor.min_frames} frames)")
        return name, torch.from_numpy(out["feat"])

    def decode_options(self, where: str, modes: Any, given: Dict[str, Any], fixed: Optional[Dict[str, Any]] = None
                       ) -> Tuple[List[str], int, int, Dict[str, Any]]:
        """(modes, beam size, batch size, ``ASRModel.decode``'s other keyword options) of the keywords ``given`` to
        the method ``where`` (and the options ``fixed`` by the method itself), through recognize's one check
        (``decode_options.resolve_decode_options``: values, the modes that use them, the LM; then what the model
        decodes at): a one-line UserError, or a TypeError for an unknown keyword. Options not given are the
        recipe's decoding of this checkpoint (``decode/recipe.py``)."""
        check_keywords(where, given, KEYWORDS[where])
        recipe = None if self.recipe is None else (lambda ms: self.recipe.defaults(ms, given.get("lm")))
        modes, values = resolve_decode_options(modes, {**given, **(fixed or {})}, defaults=recipe)
        beam_size, batch_size, lm = values.pop("beam_size"), values.pop("batch_size"), values.pop("lm")
        lm_weight, word_score = values.pop("lm_weight"), values.pop("word_score")
        check_decode_options(self.model.encoder, modes, batch_size=batch_size, **values)
        if lm is not None:
            key = (lm, lm_weight, word_score, beam_size)
            if key not in self._lm:
                self._lm[key] = LmSearch(lm, self.tokenizer, self.model.ctc.blank_id,
                                         LmSearchConfig(lm_weight=lm_weight, word_score=word_score,
                                                        beam_size=beam_size))
            values["lm_search"] = self._lm[key]
            if "joint_ctc_attention_lm" in modes:  # its word rule, before any decoding (units without word ends)
                self._lm[key].word_scorer()
        return modes, beam_size, batch_size, values

    def transcribe(self, audio: Union[Audio, Sequence[Audio]], mode: str = "attention_rescoring", *,
                   timestamps: bool = False, sample_rate: Optional[int] = None, **options: Any) -> Any:
        """Text of a file path, the bytes of an audio file, an (array, sample_rate) pair (or an array with
        ``sample_rate=``), or a list of them (``inputs.audio_input``).

        ``mode`` is one of ``DECODING_METHODS`` (the ``*_lm`` ones with ``lm=`` an ARPA file or KenLM binary); the
        options are recognize's (``beam_size``, ``ctc_weight``, ``decoding_chunk_size``, ``blank_penalty``, ...,
        ``decode_options.DECODE_OPTIONS``) with its checks; one not given is what the recipe decoded this
        checkpoint with (``decode/recipe.py``). Returns the text (a list of texts for a list); with
        ``timestamps=True`` a dict ``{"text", "tokens": [{"token", "start", "end"}]}`` instead, the times in seconds
        from the CTC alignment of the text.
        """
        modes, beam_size, _, kwargs = self.decode_options("transcribe", mode, options, {"batch_size": 1})
        if len(modes) != 1:
            raise UserError(f"mode={mode!r}: transcribe decodes in one mode; decode_list takes several")
        items = audio_list(audio)
        if items is not None:
            return [self._transcribe_one(a, modes[0], beam_size, kwargs, timestamps, sample_rate) for a in items]
        return self._transcribe_one(audio, modes[0], beam_size, kwargs, timestamps, sample_rate)

    def _transcribe_one(self, audio: Audio, mode: str, beam_size: int, kwargs: Dict[str, Any], timestamps: bool,
                        sample_rate: Optional[int]) -> Any:
        _, feats = self.features(audio, sample_rate)
        feats = feats.unsqueeze(0).to(self.device)
        lens = torch.tensor([feats.size(1)], device=self.device)
        tokens = self.model.decode([mode], feats, lens, beam_size, **kwargs)[mode][0].tokens
        text = self.tokenizer.detokenize(tokens)[0]
        if not timestamps:
            return text
        return {"text": text, "tokens": self._times(feats, lens, tokens, kwargs)}

    def _times(self, feats: torch.Tensor, lens: torch.Tensor, tokens: List[int],
               kwargs: Dict[str, Any]) -> List[Dict[str, Any]]:
        chunk = chunk_size_for(self.model.encoder, kwargs.get("decoding_chunk_size"), "decoding_chunk_size")
        with torch.no_grad():
            out, mask = self.model.encode(feats, lens, chunk, kwargs.get("num_decoding_left_chunks", -1),
                                          kwargs.get("simulate_streaming", False))
            logp = self.model.ctc_logprobs(out, kwargs.get("blank_penalty", 0.0))[0, :int(mask.sum())]
        spans = ctc_forced_align(logp.cpu(), tokens, self.model.ctc.blank_id)
        pieces = self.tokenizer.ids2tokens(tokens)
        return [{"token": p, "start": a, "end": b} for p, (a, b) in zip(pieces, token_times(spans,
                                                                                           self.frame_seconds))]

    def decode_list(self, data_list: str, modes: Union[str, Sequence[str]] = ("attention_rescoring",), *,
                    data_type: str = "raw", progress: bool = False, **options: Any) -> DecodeReport:
        """Decode a data.list (raw or shard list; a Kaldi wav.scp is read as a raw list: ``key path`` lines) with
        every mode in ``modes`` (one name, or several) in one pass, as recognize does; the options (``batch_size``
        too, default 16) as for :meth:`transcribe`."""
        if not os.path.isfile(data_list):
            raise UserError(f"no data list {data_list}")
        modes, beam_size, batch_size, kwargs = self.decode_options("decode_list", modes, options)
        with tempfile.TemporaryDirectory() as tmp:
            if data_type == "raw" and not _is_json_list(data_list):  # a wav.scp: "key path" lines
                scp, data_list = data_list, os.path.join(tmp, "data.list")
                with open(data_list, "w", encoding="utf-8") as f:
                    for key, wav in read_map(scp, what="<key> <audio path>").items():
                        f.write(json.dumps({"key": key, "wav": wav, "txt": ""}, ensure_ascii=False) + "\n")
            texts, stats = decode_dataset(self.model, self.tokenizer, self.config, data_list, modes=list(modes),
                                          data_type=data_type, batch_size=batch_size, beam_size=beam_size,
                                          device=self.device, decode_kwargs=kwargs, progress=progress)
        return DecodeReport(texts=texts, utterances=stats["utterances"], skipped=stats["skipped"],
                            counts=stats["counts"], rtf=stats["rtf"], decode_seconds=stats["decode_seconds"],
                            audio_seconds=stats["audio_seconds"], summary=rtf_line(stats, list(modes), self.device))

    def stream(self, chunk_size: int, left_chunks: int = -1, mode: str = "attention_rescoring", **options: Any):
        """A chunk-by-chunk decoder of one utterance (``wenet_udps.decode.stream.StreamingDecoder``); the options as
        for :meth:`transcribe`, the chunking from ``chunk_size`` and ``left_chunks``."""
        from wenet_udps.decode.stream import StreamingDecoder
        return StreamingDecoder(self, chunk_size, left_chunks, mode, **options)


def _is_json_list(path: str) -> bool:
    """Whether ``path``'s first non-empty line is a JSON object (a data.list) rather than a ``key path`` line."""
    for _, line in utf8_lines(path):
        if line.strip():
            return line.lstrip().startswith("{")
    return True
