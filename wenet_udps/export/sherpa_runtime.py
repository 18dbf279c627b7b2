"""sherpa-onnx recognizers whose features match training's fbank, built from train.yaml.

Our fbank (kaldi-native-fbank) uses ``snip_edges=True`` and ``high_freq=0`` (Kaldi's defaults, as WeNet);
sherpa-onnx's defaults are ``snip_edges=False`` and ``high_freq=-400``, which change the features of every
utterance (one extra frame, other mel edges). ``from_wenet_ctc`` cannot set them, so these helpers build the
recognizer config themselves (``FeatureExtractorConfig`` takes both keys), as ``from_wenet_ctc`` does inside::

    import sherpa_onnx
    from sherpa_onnx.lib._sherpa_onnx import OfflineRecognizer as _Recognizer
    feat = sherpa_onnx.FeatureExtractorConfig(sampling_rate=16000, feature_dim=80, low_freq=20, high_freq=0,
                                              snip_edges=True)
    model = sherpa_onnx.OfflineModelConfig(wenet_ctc=sherpa_onnx.OfflineWenetCtcModelConfig(model="model.onnx"),
                                           tokens="tokens.txt", model_type="wenet_ctc")
    rec = sherpa_onnx.OfflineRecognizer.__new__(sherpa_onnx.OfflineRecognizer)
    rec.config = sherpa_onnx.OfflineRecognizerConfig(feat_config=feat, model_config=model)
    rec.recognizer = _Recognizer(rec.config)

The offline runtime forces ``dither=1`` (int16 scale) for WeNet models whatever the config says; tests bound what
that changes. The streaming runtime keeps the config's dither (0 here).
"""
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from wenet_udps.dataset.features import FbankConf, feature_dim
from wenet_udps.text.base_tokenizer import UnitsError, read_symbol_table
from wenet_udps.utils.cli import UserError, one_line, regular_file
from wenet_udps.utils.source_info import file_sha256, read_source

# sherpa's feature config has no frame length/shift keys: it always uses Kaldi's 25 ms / 10 ms.
SHERPA_FRAME = {"frame_length": 25.0, "frame_shift": 10.0}


def result_name(*, streaming: bool, int8: bool) -> str:
    """The result folder (and the ``mode`` its decode.info records) of a sherpa-onnx decode: run.sh stage 7's
    ``sherpa_fp32``, ``sherpa_int8``, ``sherpa-streaming_fp32``, ``sherpa-streaming_int8``."""
    return f"sherpa{'-streaming' if streaming else ''}_{'int8' if int8 else 'fp32'}"


RESULT_NAMES = tuple(result_name(streaming=s, int8=q) for s in (False, True) for q in (False, True))


def frontend(config: Mapping[str, Any]) -> Dict[str, Any]:
    """What the sherpa-onnx path reads of a train.yaml, by dotted key, defaults filled in: the features
    (:func:`feature_kwargs`: the feature type, frame length and shift, dimension, and the rate every utterance is
    resampled to), the channel policy (sherpa_decode's audio reader), the units (:func:`check_tokens`) and the
    CMVN (inside the graphs, from the config exported). Files (:data:`FRONTEND_FILES`) are given by path and
    compared by contents (:func:`frontend_changes`). The one place these are read from the config."""
    conf = config.get("dataset_conf") or {}
    kind = conf.get("feats_type", "fbank")
    feats = {**{k: getattr(FbankConf, k) for k in ("frame_length", "frame_shift")}, **(conf.get(f"{kind}_conf") or {})}
    cmvn = config.get("cmvn_conf") or {}
    return {"dataset_conf.feats_type": kind,
            **{f"dataset_conf.{kind}_conf.{k}": float(feats[k]) for k in ("frame_length", "frame_shift")},
            f"dataset_conf.{kind}_conf.{'num_ceps' if kind == 'mfcc' else 'num_mel_bins'}": feature_dim(conf),
            "dataset_conf.resample_conf.resample_rate": int((conf.get("resample_conf") or {}).get("resample_rate",
                                                                                                  16000)),
            "dataset_conf.channel": conf.get("channel"),
            "tokenizer_conf.symbol_table_path": (config.get("tokenizer_conf") or {}).get("symbol_table_path"),
            "cmvn": config.get("cmvn"),
            "cmvn_conf.cmvn_file": cmvn.get("cmvn_file") if config.get("cmvn") else None,
            "cmvn_conf.is_json_cmvn": cmvn.get("is_json_cmvn") if config.get("cmvn") else None}


# The keys of :func:`frontend` that name a file: recorded and compared by the file's contents.
FRONTEND_FILES = ("tokenizer_conf.symbol_table_path", "cmvn_conf.cmvn_file")


def frontend_record(config: Mapping[str, Any]) -> Dict[str, Any]:
    """:func:`frontend` with each file (:data:`FRONTEND_FILES`) given by its SHA-256 (None when it cannot be read):
    what export.info records as ``frontend`` (JSON, wenet_udps.bin.export), and what a config is compared by."""
    front = frontend(config)
    for key in FRONTEND_FILES:
        front[key] = file_sha256(front[key]) if front[key] and os.path.isfile(front[key]) else None
    return front


def frontend_changes(recorded: Mapping[str, Any], config: Mapping[str, Any]) -> List[str]:
    """The keys on which the :func:`frontend_record` of ``config`` differs from ``recorded`` (one made before)."""
    now = frontend_record(config)
    return [key for key in [*now, *(k for k in recorded if k not in now)] if now.get(key) != recorded.get(key)]


def feature_kwargs(config: Mapping[str, Any]) -> dict:
    """FeatureExtractorConfig keyword arguments that reproduce training's features (train.yaml ``config``)."""
    front = frontend(config)
    if front["dataset_conf.feats_type"] != "fbank":
        raise ValueError(f"dataset_conf.feats_type {front['dataset_conf.feats_type']!r}: sherpa-onnx's WeNet models "
                         f"take fbank")
    for key, value in SHERPA_FRAME.items():
        if front[f"dataset_conf.fbank_conf.{key}"] != value:
            raise ValueError(f"dataset_conf.fbank_conf.{key} is {front[f'dataset_conf.fbank_conf.{key}']:g}: "
                             f"sherpa-onnx always uses {value:g} ms")
    return {"sampling_rate": front["dataset_conf.resample_conf.resample_rate"],
            "feature_dim": front["dataset_conf.fbank_conf.num_mel_bins"], "low_freq": 20.0, "high_freq": 0.0,
            "snip_edges": True, "dither": 0.0}


def check_tokens(export_dir: str, config: Mapping[str, Any]) -> str:
    """The export's tokens.txt, after checking that it is the units table of ``config`` (its
    ``tokenizer_conf.symbol_table_path``): the runtime maps ids to the tokens of tokens.txt as they stand, so any
    other table (edited, rotated, truncated, of another model) would turn every transcript into other characters.
    UnitsError naming both files otherwise."""
    tokens = os.path.join(export_dir, "tokens.txt")
    units = frontend(config)["tokenizer_conf.symbol_table_path"]
    if not units or not os.path.isfile(units):
        raise UnitsError(f"cannot check {tokens}: the config names no readable units file "
                         f"(tokenizer_conf.symbol_table_path: {units})")
    if not os.path.isfile(tokens):
        raise UnitsError(f"{tokens} not found: export with python -m wenet_udps.bin.export --format sherpa-onnx")
    if read_symbol_table(tokens) != read_symbol_table(units):
        raise UnitsError(f"{tokens} is not the units file {units} of the config (tokenizer_conf.symbol_table_path): "
                         f"transcripts would use other tokens; export again or pass the matching --config")
    return tokens


class ExportError(UserError):
    """A folder that is not one whole export (:func:`export_problem`); the message starts with the folder."""


def check_export_set(export_dir: str) -> None:
    """:func:`export_problem` of ``export_dir`` as an :class:`ExportError` ``<export_dir>: <why>``. The recognizers
    call it after their own checks of the files (a changed tokens.txt gets check_tokens' message first)."""
    problem = export_problem(export_dir)
    if problem:
        raise ExportError(f"{export_dir}: {problem}")


def offline_recognizer(export_dir: str, config: Mapping[str, Any], *, int8: bool = False, num_threads: int = 1,
                       features: Mapping[str, Any] = None):
    """``sherpa_onnx.OfflineRecognizer`` on ``model[.int8].onnx`` with training's features (or ``features``);
    :class:`ExportError` when ``export_dir`` is not one whole export (cut short, or files of two exports)."""
    import sherpa_onnx
    from sherpa_onnx.lib._sherpa_onnx import OfflineRecognizer as _Recognizer
    model = sherpa_onnx.OfflineModelConfig(
        wenet_ctc=sherpa_onnx.OfflineWenetCtcModelConfig(model=_model(export_dir, "model", int8)),
        tokens=check_tokens(export_dir, config), num_threads=num_threads, model_type="wenet_ctc")
    check_export_set(export_dir)
    rec = sherpa_onnx.OfflineRecognizer.__new__(sherpa_onnx.OfflineRecognizer)
    rec.config = sherpa_onnx.OfflineRecognizerConfig(
        feat_config=sherpa_onnx.FeatureExtractorConfig(**(features or feature_kwargs(config))), model_config=model)
    rec.recognizer = _Recognizer(rec.config)
    return rec


def online_recognizer(export_dir: str, config: Mapping[str, Any], *, chunk_size: int, left_chunks: int,
                      int8: bool = False, num_threads: int = 1, features: Mapping[str, Any] = None):
    """``sherpa_onnx.OnlineRecognizer`` on ``model-streaming[.int8].onnx`` with training's features;
    :class:`ExportError` as :func:`offline_recognizer`."""
    import sherpa_onnx
    from sherpa_onnx.lib import _sherpa_onnx as lib  # the online config classes are not re-exported
    model = lib.OnlineModelConfig(
        wenet_ctc=lib.OnlineWenetCtcModelConfig(model=_model(export_dir, "model-streaming", int8),
                                                chunk_size=chunk_size, num_left_chunks=left_chunks),
        tokens=check_tokens(export_dir, config), num_threads=num_threads)
    check_export_set(export_dir)
    rec = sherpa_onnx.OnlineRecognizer.__new__(sherpa_onnx.OnlineRecognizer)
    rec.config = lib.OnlineRecognizerConfig(
        feat_config=sherpa_onnx.FeatureExtractorConfig(**(features or feature_kwargs(config))), model_config=model,
        enable_endpoint=False, decoding_method="greedy_search")
    rec.recognizer = lib.OnlineRecognizer(rec.config)
    return rec


def _model(export_dir: str, name: str, int8: bool) -> str:
    path = os.path.join(export_dir, f"{name}{'.int8' if int8 else ''}.onnx")
    if not os.path.isfile(regular_file(path)):
        raise FileNotFoundError(f"{path} not found: export with python -m wenet_udps.bin.export --format sherpa-onnx")
    return path


def onnx_session(path: str):
    """An onnxruntime session (CPU) of the graph ``path``; UserError naming it when it is not a regular file or
    onnxruntime cannot load it (a cut copy: ``INVALID_PROTOBUF``), instead of onnxruntime's traceback."""
    import onnxruntime as ort
    try:
        return ort.InferenceSession(regular_file(path), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own exceptions derive from Exception only
        if not type(e).__module__.startswith("onnxruntime"):
            raise
        raise UserError(f"{path} cannot be loaded ({one_line(e)}): cut short or not an ONNX graph; export "
                        f"again (python -m wenet_udps.bin.export --format sherpa-onnx)") from None


def transcribe_offline(rec, wavs: Sequence[np.ndarray], sample_rate: int) -> list:
    """Transcripts of int16-scale waveforms (the runtime scales [-1, 1] samples by 32768 for WeNet models)."""
    streams = []
    for wav in wavs:
        s = rec.create_stream()
        s.accept_waveform(sample_rate, np.asarray(wav, dtype=np.float32) / 32768.0)
        streams.append(s)
    rec.decode_streams(streams)
    return [s.result.text for s in streams]


def chunk_frames(export_dir: str, chunk_size: int) -> tuple[int, int]:
    """(window, shift) of a streaming chunk in 10 ms feature frames: a chunk of ``chunk_size`` outputs reads
    ``window`` frames (its outputs and the subsampling's right context), and the next chunk starts ``shift`` frames
    later (``chunk_size`` times the subsampling factor)."""
    meta = onnx_session(_model(export_dir, "model-streaming", False)).get_modelmeta().custom_metadata_map
    factor = int(meta["subsampling_factor"])
    return (chunk_size - 1) * factor + int(meta["right_context"]) + 1, chunk_size * factor


def tail_seconds(export_dir: str, chunk_size: int) -> float:
    """Silence to append so that the streaming runtime, which decodes whole chunks only, also decodes the frames
    of the last, partial chunk: one chunk window of 10 ms frames. In that chunk they are decoded beside the
    silence, where our chunked decoding takes them alone, so its tokens may differ (docs/deploy.md)."""
    return chunk_frames(export_dir, chunk_size)[0] * SHERPA_FRAME["frame_shift"] / 1000.0


def transcribe_online(rec, wav: np.ndarray, sample_rate: int, tail_seconds: float = 0.0) -> str:
    """One utterance through the streaming recognizer; ``tail_seconds`` of silence flush the last chunk."""
    s = rec.create_stream()
    s.accept_waveform(sample_rate, np.asarray(wav, dtype=np.float32) / 32768.0)
    if tail_seconds > 0:
        s.accept_waveform(sample_rate, np.zeros(int(tail_seconds * sample_rate), dtype=np.float32))
    s.input_finished()
    while rec.is_ready(s):
        rec.decode_stream(s)
    return rec.get_result(s)


# The files an export writes (wenet_udps.export.sherpa): an export replaces them as a set, and a folder holding one
# that its export.info does not list holds two exports' files.
OWNED_FILES = ("tokens.txt", "model.onnx", "model.int8.onnx", "model-streaming.onnx", "model-streaming.int8.onnx",
               "export.info")


def export_problem(export_dir: str) -> Optional[str]:
    """Why ``export_dir`` is not one whole export, or None: no ``export.info`` (an export cut short: it is moved in
    last, wenet_udps.export.sherpa), a file whose SHA-256 is not the one export.info records, or a file of an
    export's set (:data:`OWNED_FILES`) that export.info does not list (another export's, copied in)."""
    info = os.path.join(export_dir, "export.info")
    if not os.path.isfile(info):
        return ("it has no export.info, which an export moves in last: an export cut short (a full disk?) or not "
                "made by wenet_udps.bin.export; export again (run.sh --stage 6)")
    items = read_source(info).get("files", "").split()
    listed = {item.partition("=")[0] for item in items}
    for name in OWNED_FILES:
        if name != "export.info" and name not in listed and os.path.isfile(os.path.join(export_dir, name)):
            return (f"{os.path.join(export_dir, name)} is not one of the files {info} records "
                    f"({', '.join(sorted(listed))}): another export's file copied in; remove it or export again "
                    "(run.sh --stage 6)")
    for item in items:
        name, _, digest = item.partition("=")
        path = os.path.join(export_dir, name)
        if not os.path.isfile(path) or file_sha256(path) != digest:
            what = "is missing" if not os.path.isfile(path) else "has other contents"
            return (f"{info} records {name} with SHA-256 {digest[:12]}, but {path} {what} (files of two exports "
                    f"mixed, or changed since); export again (run.sh --stage 6)")
    return None
