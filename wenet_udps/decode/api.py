"""The Python API: a trained experiment dir in one call, then text from audio.

    import wenet_udps
    model = wenet_udps.load_model("exp/x", checkpoint="avg_5.pt", device="cpu")
    print(model.transcribe("test.wav", mode="attention_rescoring", beam_size=10, ctc_weight=0.5))
    report = model.decode_list("data/test/data.list")   # texts per mode, counts, RTF (as recognize prints)
    texts = model.transcribe(["a.wav", "b.wav"])   # a Transcripts: a text per input, None + .failures where none

Everything goes through what recognize runs: the experiment's train.yaml, the checkpoint checked as every load
checks it (SHA-256 against its YAML, the units file it was trained with), the evaluation features of its
dataset_conf (a file at another sample rate is resampled as in training), ``ASRModel.decode``.
"""
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from wenet_udps.config import load_config
from wenet_udps.dataset.audio import UnusableUtterance, array_wav_bytes
from wenet_udps.dataset.dataset import DATA_TYPES, DataError, eval_dataset_conf
from wenet_udps.dataset.kaldi_data import scp_utterances
from wenet_udps.dataset.lists import list_kind
from wenet_udps.dataset.transforms import UtteranceProcessor
from wenet_udps.decode.align import ctc_forced_align, token_times
from wenet_udps.decode.data_list import decode_dataset, frame_shift_ms, model_from_checkpoint, rtf_line
from wenet_udps.decode.hotwords import context_graph
from wenet_udps.decode.inputs import InputError, audio_input, audio_list, check_keywords, keyword
from wenet_udps.decode.outcome import decode_each
from wenet_udps.decode.recipe import RecipeDecoding
from wenet_udps.lm.binary import lm_content
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.model_builder import min_input_frames
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.decode_options import DECODE_OPTIONS, check_decode_options, chunk_size_for, \
    resolve_decode_options
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.counts import max_bad_fraction as conf_bad_fraction
from wenet_udps.utils.source_info import content_sha256

Audio = Union[str, "os.PathLike[str]", bytes, Tuple[np.ndarray, int]]
LM_CACHE = 4  # LM searches a model keeps loaded (by content, weights and beam)
GRAPH_CACHE = 4  # hotword graphs a model keeps built (by content and score)
# The decoding options each method takes as keywords (DECODE_OPTIONS); transcribe and stream decode one utterance,
# and stream sets the chunking from its own arguments.
STREAM_SET = ("batch_size", "decoding_chunk_size", "num_decoding_left_chunks", "simulate_streaming")
KEYWORDS = {"transcribe": ("mode", "timestamps", "sample_rate", "max_bad_fraction")
                          + tuple(o for o in DECODE_OPTIONS if o != "batch_size"),
            "decode_list": ("modes", "data_type", "progress", "max_bad_fraction") + tuple(DECODE_OPTIONS),
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
    whose SHA-256 does not match its YAML (``verify=False`` loads it anyway) or trained with another units file,
    and for an argument of another type."""
    exp_dir = keyword("load_model", "exp_dir", exp_dir, "path")
    checkpoint = keyword("load_model", "checkpoint", checkpoint, "path")
    verify = keyword("load_model", "verify", verify, "flag")
    if not os.path.isdir(exp_dir):
        raise UserError(f"experiment dir {exp_dir} does not exist (the dir run.sh or train wrote, with train.yaml)")
    conf = os.path.join(exp_dir, "train.yaml")
    if not os.path.isfile(conf):
        raise UserError(f"{exp_dir} has no train.yaml: not an experiment dir")
    path = os.path.join(exp_dir, checkpoint)
    if not os.path.isfile(path):
        have = sorted(f for f in os.listdir(exp_dir) if f.endswith(".pt"))
        raise UserError(f"no checkpoint {path}; {exp_dir} has {', '.join(have) or 'no .pt file'}")
    if not isinstance(device, str) or (device not in ("cpu", "cuda") and not device.startswith("cuda:")):
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
        # by the SHA-256 of the LM file and of its words file (lm.binary.lm_content), weights and beam
        self._lm: Dict[Tuple[Tuple[str, str], float, float, int], LmSearch] = {}
        self._lm_lock = threading.Lock()  # see _lm_search (and _hotword_graph)
        self._graphs: Dict[Any, ContextGraph] = {}

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
            raise InputError(f"{name}: {e}", e.reason) from None
        if isinstance(out, str):  # the decoding filter keeps everything the encoder can take; too few frames
            raise InputError(f"{name}: too short to decode ({out}: fewer than {self.processor.min_frames} frames)",
                             out)
        return name, torch.from_numpy(out["feat"])

    def decode_options(self, where: str, modes: Any, given: Dict[str, Any], fixed: Optional[Dict[str, Any]] = None
                       ) -> Tuple[List[str], int, int, Dict[str, Any]]:
        """(modes, beam size, batch size, ``ASRModel.decode``'s other keyword options) of the keywords ``given`` to
        the method ``where`` (and the options ``fixed`` by the method itself), through recognize's one check
        (``decode_options.resolve_decode_options``: values, the modes that use them, the LM; then what the model
        decodes at): a one-line UserError, or a TypeError for an unknown keyword. Options not given are the
        recipe's decoding of this checkpoint (``decode/recipe.py``)."""
        check_keywords(where, given, KEYWORDS[where])
        asked = [name for name, value in {**given, **(fixed or {})}.items() if value is not None]
        recipe = None if self.recipe is None else (lambda ms: self.recipe.defaults(ms, given.get("lm"), asked))
        modes, values = resolve_decode_options(modes, {**given, **(fixed or {})}, defaults=recipe)
        beam_size, batch_size, lm = values.pop("beam_size"), values.pop("batch_size"), values.pop("lm")
        lm_weight, word_score = values.pop("lm_weight"), values.pop("word_score")
        hotwords, context_score = values.pop("hotwords"), values.pop("context_score")
        check_decode_options(self.model.encoder, modes, batch_size=batch_size, **values)
        values["context"] = self._hotword_graph(hotwords, context_score)
        if lm is not None:
            values["lm_search"] = self._lm_search(lm, lm_weight, word_score, beam_size, modes)
        return modes, beam_size, batch_size, values

    def _hotword_graph(self, hotwords: Any, context_score: float) -> Optional[ContextGraph]:
        """The context graph of ``hotwords`` at ``context_score``, built on first use and kept (by content: a
        list's phrases, a file's SHA-256, so a file rewritten is another list) for the next calls, which then cost
        no reading and no building (``transcribe`` one file at a time with 1,000 phrases rebuilt them every call).
        A graph is only read by the searches (its step memo aside: a cache, safe to fill from several threads),
        so calls may share it at once; a bad list is refused at every call, as it is never kept."""
        if hotwords is None or (isinstance(hotwords, (list, tuple)) and not hotwords):
            return None
        listed = isinstance(hotwords, (list, tuple))
        try:
            key = (tuple(hotwords) if listed else content_sha256(os.fspath(hotwords)), listed, context_score)
        except OSError:  # (the reader names the missing or unreadable file)
            key = None
        with self._lm_lock:
            graph = self._graphs.get(key)
        if graph is None:
            graph = context_graph(hotwords, self.tokenizer, context_score, self.reserved_units())
            if key is not None:
                with self._lm_lock:
                    self._graphs[key] = graph
                    while len(self._graphs) > GRAPH_CACHE:
                        self._graphs.pop(next(iter(self._graphs)))
        return graph

    def _lm_search(self, lm: str, lm_weight: float, word_score: float, beam_size: int, modes: Sequence[str]
                   ) -> LmSearch:
        """The loaded search of the LM ``lm`` at these weights, loaded on first use. An LM is its content, words
        file included, as a result is (a file replaced or rewritten at the same path is another LM, loaded and
        checked anew; the one loaded before sits in memory, untouched: lm.binary.load_kenlm). The cache is shared by
        every thread decoding with this model: it is read and changed under its lock (else two threads filling it at
        once may load one LM twice, evict one key twice, a KeyError, or iterate it while the other adds), and a
        search, once made, holds no state of a call (lm.lexicon_search)."""
        with self._lm_lock:
            search = self._lm.get((lm_content(lm), lm_weight, word_score, beam_size))
            if search is None:
                search = LmSearch(lm, self.tokenizer, self.model.ctc.blank_id,
                                  LmSearchConfig(lm_weight=lm_weight, word_score=word_score, beam_size=beam_size))
                read = (search.info.sha256, search.info.words_sha256)  # the content it read and checked
                self._lm[(read, lm_weight, word_score, beam_size)] = search
                while len(self._lm) > LM_CACHE:  # LMs replaced since are not asked for again: let them go
                    self._lm.pop(next(iter(self._lm)))
        if "joint_ctc_attention_lm" in modes:  # its word rule, before any decoding (units without word ends)
            search.word_scorer()
        return search

    def reserved_units(self) -> List[int]:
        """The units no hotword may hold: the blank, sos and eos."""
        return [self.model.ctc.blank_id, self.model.sos, self.model.eos]

    def transcribe(self, audio: Union[Audio, Sequence[Audio]], mode: str = "attention_rescoring", *,
                   timestamps: bool = False, sample_rate: Optional[int] = None,
                   max_bad_fraction: Optional[float] = None, **options: Any) -> Any:
        """Text of a file path, the bytes of an audio file, an (array, sample_rate) pair (or an array with
        ``sample_rate=``), or a list of them (``inputs.audio_input``).

        ``mode`` is one of ``DECODING_METHODS`` (the ``*_lm`` ones with ``lm=`` an ARPA file or KenLM binary); the
        options are recognize's (``beam_size``, ``ctc_weight``, ``decoding_chunk_size``, ``blank_penalty``,
        ``hotwords`` (a list of phrases or a hotword file's path: docs/hotwords.md), ...,
        ``decode_options.DECODE_OPTIONS``) with its checks; one not given is what the recipe decoded this
        checkpoint with (``decode/recipe.py``). Returns the text; with ``timestamps=True`` a dict ``{"text",
        "tokens": [{"token", "start", "end"}]}`` instead, the times in seconds from the CTC alignment of the text
        (in the ``*_lm`` modes a space unit between two words that CTC did not emit has ``start == end``).
        For a list, a :class:`~wenet_udps.decode.outcome.Transcripts`: a list of those in input order, ``None``
        for an input that could not be decoded, named with its position in ``.failures``; more unusable inputs
        than ``max_bad_fraction`` (default: the experiment's ``dataset_conf.max_bad_fraction``, else 0.05) is a
        ``DataError`` that holds them (``wenet_udps.decode.outcome``).
        """
        keyword("transcribe", "timestamps", timestamps, "flag")
        modes, beam_size, _, kwargs = self.decode_options("transcribe", mode, options, {"batch_size": 1})
        if len(modes) != 1:
            raise UserError(f"mode={mode!r}: transcribe decodes in one mode; decode_list takes several")
        items = audio_list(audio)
        if items is None:
            if max_bad_fraction is not None:
                raise UserError(f"transcribe(max_bad_fraction={max_bad_fraction!r}) applies to a list of inputs; "
                                f"one input is decoded or refused")
            return self._transcribe_one(audio, modes[0], beam_size, kwargs, timestamps, sample_rate)
        fraction = self._bad_fraction("transcribe", max_bad_fraction)
        for i, item in enumerate(items):  # what is not audio at all is a mistake in the list, as a malformed line
            try:
                audio_input(item, sample_rate)
            except UserError as e:
                raise UserError(f"audio[{i}]: {e}") from None
        return decode_each(items, lambda a: self._transcribe_one(a, modes[0], beam_size, kwargs, timestamps,
                                                                 sample_rate), fraction)

    def _bad_fraction(self, where: str, given: Optional[float]) -> float:
        """``max_bad_fraction`` as given to ``where``, else the experiment's (``utils.counts``)."""
        if given is None:
            return conf_bad_fraction(self.config)
        return float(keyword(where, "max_bad_fraction", given, "fraction"))

    def _transcribe_one(self, audio: Audio, mode: str, beam_size: int, kwargs: Dict[str, Any], timestamps: bool,
                        sample_rate: Optional[int]) -> Any:
        name, feats = self.features(audio, sample_rate)
        feats = feats.unsqueeze(0).to(self.device)
        lens = torch.tensor([feats.size(1)], device=self.device)
        tokens = self.model.decode([mode], feats, lens, beam_size, **kwargs)[mode][0].tokens
        text = self.tokenizer.detokenize(tokens)[0]
        if not timestamps:
            return text
        return {"text": text, "tokens": self._times(feats, lens, tokens, kwargs, name, mode)}

    def _times(self, feats: torch.Tensor, lens: torch.Tensor, tokens: List[int], kwargs: Dict[str, Any],
               name: str, mode: str) -> List[Dict[str, Any]]:
        """The CTC alignment of ``tokens`` (feats (1, T, F)): a unit's times are its frames on the best CTC path
        that spells the text. The space unit an LM search puts between words (``LmSearch.inserted``) may take no
        frame: the search emitted the words on consecutive frames, and the space is then at their boundary."""
        chunk = chunk_size_for(self.model.encoder, kwargs.get("decoding_chunk_size"), "decoding_chunk_size")
        with torch.no_grad():
            out, mask = self.model.encode(feats, lens, chunk, kwargs.get("num_decoding_left_chunks", -1),
                                          kwargs.get("simulate_streaming", False))
            logp = self.model.ctc_logprobs(out, kwargs.get("blank_penalty", 0.0))[0, :int(mask.sum())]
        search = kwargs.get("lm_search")
        try:
            spans = ctc_forced_align(logp.cpu(), tokens, self.model.ctc.blank_id,
                                     () if search is None else search.inserted())
        except ValueError as e:   # an attention decoder may emit more units than CTC has frames
            raise UserError(f"{name}: timestamps=True in mode {mode}: its text's {e} (the times are the CTC "
                            f"alignment of the text, a frame per unit and a blank between two equal ones); "
                            f"decode it without timestamps, or in a CTC mode") from None
        pieces = self.tokenizer.ids2tokens(tokens)
        return [{"token": p, "start": a, "end": b} for p, (a, b) in zip(pieces, token_times(spans,
                                                                                           self.frame_seconds))]

    def decode_list(self, data_list: str, modes: Union[str, Sequence[str]] = ("attention_rescoring",), *,
                    data_type: str = "raw", progress: bool = False, max_bad_fraction: Optional[float] = None,
                    **options: Any) -> DecodeReport:
        """Decode a data.list (raw, or with ``data_type="shard"`` a shard list) or a Kaldi wav.scp (``key path``
        lines, read as sherpa_decode reads it: a ``segments`` file beside it is cut, ``kaldi_data.scp_utterances``)
        with every mode in ``modes`` (one name, or several) in one pass, as recognize does; the options
        (``batch_size`` too, default 16) as for :meth:`transcribe`. Unusable audio is skipped and counted, and
        more of it than ``max_bad_fraction`` (default: the experiment's ``dataset_conf.max_bad_fraction``, else
        0.05) is a DataError, as in recognize."""
        data_list = keyword("decode_list", "data_list", data_list, "path")
        data_type = keyword("decode_list", "data_type", data_type, "choice", DATA_TYPES)
        progress = keyword("decode_list", "progress", progress, "flag")
        if not os.path.isfile(data_list):
            raise UserError(f"no data list {data_list}")
        config = {**self.config, "dataset_conf": {**(self.config.get("dataset_conf") or {}),
                                                  "max_bad_fraction": self._bad_fraction("decode_list",
                                                                                         max_bad_fraction)}}
        modes, beam_size, batch_size, kwargs = self.decode_options("decode_list", modes, options)
        kind, lineno, line = list_kind(data_list) if data_type == "raw" else (data_type, 0, "")
        if data_type == "raw" and kind == "shard":
            raise UserError(f"{data_list}:{lineno}: one path a line ({line[:80]!r}): a shard list? pass "
                            f"data_type='shard' (a raw data.list holds JSON lines, a wav.scp 'key path' lines)")
        # a wav.scp is read by the one Kaldi reader, its segments cut; every message names it
        items = [{"key": key, "wav": wav, "txt": "", **({} if start is None else {"start": start, "end": end})}
                 for key, wav, start, end in scp_utterances(data_list)] if kind == "scp" else None
        try:
            texts, stats = decode_dataset(self.model, self.tokenizer, config, data_list, modes=list(modes),
                                          data_type=data_type, batch_size=batch_size, beam_size=beam_size,
                                          device=self.device, decode_kwargs=kwargs, progress=progress,
                                          items=items)
        except DataError as e:
            raise DataError(f"{e} (decode_list's max_bad_fraction= sets that share)") from None
        return DecodeReport(texts=texts, utterances=stats["utterances"], skipped=stats["skipped"],
                            counts=stats["counts"], rtf=stats["rtf"], decode_seconds=stats["decode_seconds"],
                            audio_seconds=stats["audio_seconds"], summary=rtf_line(stats, list(modes), self.device))

    def stream(self, chunk_size: int, left_chunks: int = -1, mode: str = "attention_rescoring", **options: Any):
        """A chunk-by-chunk decoder of one utterance (``wenet_udps.decode.stream.StreamingDecoder``); the options as
        for :meth:`transcribe`, the chunking from ``chunk_size`` and ``left_chunks``."""
        from wenet_udps.decode.stream import StreamingDecoder
        return StreamingDecoder(self, keyword("stream", "chunk_size", chunk_size, "int"),
                                keyword("stream", "left_chunks", left_chunks, "int"), mode, **options)
