"""Export for sherpa-onnx's WeNet CTC runtime (``OfflineRecognizer`` / ``OnlineRecognizer.from_wenet_ctc``).

Files written to ``output_dir``:

- ``model.onnx`` / ``model.int8.onnx`` (whole utterance): inputs ``x`` (N, T, F) float, ``x_lens`` (N,) int64;
  outputs by position ``log_probs`` (N, T', V), ``log_probs_lens`` (N,) int64. Metadata ``model_type=wenet_ctc``,
  ``vocab_size``, ``subsampling_factor``.
- ``model-streaming.onnx`` / ``model-streaming.int8.onnx`` (streaming models only: ``use_dynamic_chunk`` or
  ``static_chunk_size > 0``): inputs ``x`` (1, W, F), ``offset`` (1,), ``required_cache_size`` (1,),
  ``attn_cache`` (L, H, C, 2*d_k), ``conv_cache`` (L, 1, D, K-1), ``attn_mask`` (1, 1, C + chunk) with the fixed
  cache size C = chunk_size * left_chunks that the runtime allocates; outputs ``log_probs``, ``next_att_cache``,
  ``next_conv_cache``. Metadata: ``head``, ``num_blocks``, ``output_size``, ``cnn_module_kernel``,
  ``right_context``, ``subsampling_factor``, ``vocab_size``, ``chunk_size``, ``left_chunks``.
- ``tokens.txt``: the model's units (``<blank>`` is the blank the runtime looks for).
- ``export.info``: the checkpoint and config exported (``source``, wenet_udps.utils.source_info; bin.export adds
  ``frontend``, what the sherpa path reads of that config: sherpa_runtime.frontend_record as JSON), and ``files``:
  the SHA-256 of every other file of the export (``name=sha256 ...``), which sherpa_decode checks.

The set is whole or not there: every file is written into a temporary folder beside them in ``output_dir``, and
only when all are written and the parity check given passes are they moved in (``export.info`` removed first and
moved in last, so that a folder without it is an export cut short, which sherpa_decode refuses); a full disk half
way, or a failed parity check, leaves the earlier export as it was. An export holds a lock on ``output_dir``
(``.export.lock``, :func:`export_lock`): a second export into it is refused, and the temporary folders of an
export that was killed are removed when the next one starts. Every file of this list left in ``output_dir``
by an earlier export and not in the new set is deleted then, so a non-streaming export over a streaming one leaves
no stale ``model-streaming*.onnx`` for the runtime to load. Other files are kept.

The int8 files are onnxruntime's dynamic quantisation of the MatMul weights. The graphs are traced, so scaled-dot and
UDPS attention export alike. Features are not part of the model: see :mod:`wenet_udps.export.sherpa_runtime`.
"""
import fcntl
import glob
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Mapping, Optional

import numpy as np
import torch
from torch import nn

from wenet_udps.export.exporter import _onnx
from wenet_udps.export.sherpa_runtime import OWNED_FILES
from wenet_udps.export.wrappers import chunk_window, initial_caches
from wenet_udps.utils.atomic import open_atomic, write_bytes
from wenet_udps.utils.cli import UserError, open_input, regular_file
from wenet_udps.utils.source_info import file_sha256, write_source



class SherpaOffline(nn.Module):
    """forward(x (N, T, F), x_lens (N,) int64) -> log_probs (N, T', V), log_probs_lens (N,) int64."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, x_lens: torch.Tensor):
        out, mask = self.model.encoder(x, x_lens, -1, -1)
        return self.model.ctc_activation(out), mask.squeeze(1).sum(1).to(torch.int64)


class SherpaStreaming(nn.Module):
    """One streaming step in the runtime's layout (batch 1, fixed-size caches).

    The runtime starts ``offset`` at C = chunk_size * left_chunks (its cache is C zeros, masked out until filled)
    and adds each step's output frames; ``forward_chunk`` counts output frames from 0, so C is taken off here and
    the positions equal those of our own chunked decoding. ``required_cache_size`` is fixed at export (the caches'
    size is baked into the graph); the runtime's input is multiplied by 0 only so that the exporter keeps it
    (the runtime feeds six inputs by position). An encoder without convolution modules (a Transformer) leaves
    ``conv_cache`` unused, and the exporter would drop an unused input, which the runtime then refuses ("Invalid
    input name: conv_cache"); its empty (L, 1, D, 0) cache is passed through as ``next_conv_cache`` instead.
    """

    def __init__(self, model: nn.Module, chunk_size: int, left_chunks: int):
        super().__init__()
        if chunk_size <= 0 or left_chunks <= 0:
            raise ValueError(f"sherpa-onnx streaming needs chunk_size > 0 and left_chunks > 0 (fixed-size caches), "
                             f"got chunk_size={chunk_size}, left_chunks={left_chunks}")
        self.model = model
        self.cache_size = chunk_size * left_chunks
        self.conv_unused = initial_caches(model, chunk_size, left_chunks)[1].size(3) == 0

    def forward(self, x, offset, required_cache_size, attn_cache, conv_cache, attn_mask):
        out, att, cnn = self.model.encoder.forward_chunk(x, offset - self.cache_size + 0 * required_cache_size,
                                                         self.cache_size, attn_cache, conv_cache, attn_mask)
        return self.model.ctc_activation(out), att, conv_cache if self.conv_unused else cnn


def is_streaming(model: nn.Module) -> bool:
    enc = model.encoder
    return bool(getattr(enc, "use_dynamic_chunk", False) or getattr(enc, "static_chunk_size", 0) > 0)


def streaming_meta(model: nn.Module, chunk_size: int, left_chunks: int) -> Dict[str, int]:
    enc = model.encoder
    att_cache, cnn_cache = initial_caches(model, chunk_size, left_chunks)
    return {"head": att_cache.size(1), "num_blocks": att_cache.size(0), "output_size": enc.output_size(),
            # the runtime allocates conv_cache (L, 1, D, cnn_module_kernel - 1)
            "cnn_module_kernel": cnn_cache.size(3) + 1, "right_context": enc.embed.right_context,
            "subsampling_factor": enc.embed.subsampling_rate, "chunk_size": chunk_size, "left_chunks": left_chunks}


def add_metadata(path: str, meta: Dict[str, object]) -> None:
    import onnx
    proto = onnx.load(path)
    del proto.metadata_props[:]
    for key, value in meta.items():
        proto.metadata_props.add(key=key, value=str(value))
    with open_atomic(path, "wb") as f:
        onnx.save(proto, f)


# What onnxruntime's quantizer logs (on the root logger) and this export drops: its INFO and DEBUG notes ('Quantization
# parameters for tensor:"X" not specified', ~35 per model: dynamic quantisation computes them at run time; 'Ignore
# MatMul due to non float inputs', the attention's activation x activation products, which stay float by design),
# and its advice to 'consider to run pre-processing before quantization' (symbolic shape inference and graph
# optimisation, which serve static quantisation's calibration; the dynamic MatMul quantisation here gives the fp32
# model's transcripts, docs/deploy.md). Any other warning of the quantizer is kept.
QUANTIZER_PATH = os.path.join("onnxruntime", "quantization", "")
QUANTIZER_ADVICE = ("consider to run pre-processing before quantization", "consider pre-processing before quantization")


class QuantizerNotes(logging.Filter):
    """Drops the quantizer's notes and its pre-processing advice (above); keeps everything logged from elsewhere."""

    def filter(self, record: logging.LogRecord) -> bool:
        if QUANTIZER_PATH not in record.pathname:
            return True
        return record.levelno >= logging.WARNING and not any(a in record.getMessage() for a in QUANTIZER_ADVICE)


def quantize_int8(src: str, dst: str) -> None:
    """``src`` with its MatMul weights quantised to int8 (onnxruntime's dynamic quantisation) -> ``dst``; the
    quantizer's notes are filtered out for the call only (:class:`QuantizerNotes`)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quiet = QuantizerNotes()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        quantize_dynamic(model_input=src, model_output=dst, op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8)
    finally:
        root.removeFilter(quiet)


# In ``output_dir``: the lock an export holds (kept, empty; the kernel drops the flock when the process dies, even by
# kill -9) and the prefix of its temporary folders.
LOCK_NAME = ".export.lock"
STAGING_PREFIX = ".export.partial-"


@contextmanager
def export_lock(output_dir: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<output_dir>/.export.lock`` for the block; UserError when another export
    into ``output_dir`` holds it. Under the lock, every temporary folder left there (``.export.partial-*``: an
    export killed before it could remove its own) is removed: no export that is still running owns one then."""
    path = os.path.join(output_dir, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"--output_dir {output_dir}: another export into it is running (it holds {path}); wait "
                            f"for it or export into another directory") from None
        for stale in glob.glob(os.path.join(glob.escape(output_dir), STAGING_PREFIX + "*")):
            logging.info("removing %s, left by an export that did not finish", stale)
            if os.path.isdir(stale) and not os.path.islink(stale):
                shutil.rmtree(stale)
            else:   # a link is removed, never followed
                os.unlink(stale)
        yield
    finally:
        os.close(fd)   # releases the flock


def export_sherpa(model: nn.Module, input_dim: int, units: str, output_dir: str, *, chunk_size: int = 16,
                  left_chunks: int = 4, source: Optional[Mapping[str, str]] = None,
                  check: Optional[Callable[[str], None]] = None) -> Dict[str, str]:
    """Write the files listed in the module docstring, as one set (``source``: export.info's record of the
    checkpoint, ``source_info.model_source``); returns file name -> path. ``check(folder)`` runs on the new set
    before it is moved in (the parity check): when it raises, the earlier export stays as it was. One export at a
    time into ``output_dir`` (:func:`export_lock`)."""
    model = model.eval()
    os.makedirs(output_dir, exist_ok=True)
    owned = [os.path.join(output_dir, name) for name in OWNED_FILES]
    if any(os.path.isfile(path) and os.path.samefile(path, units) for path in owned):
        raise UserError(f"--output_dir {output_dir}: the units file {units} is one of the files an export replaces; "
                        f"export into another directory")
    with export_lock(output_dir):
        staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=output_dir)   # same file system: renames move it in
        try:
            written = _write_set(model, input_dim, units, staging, chunk_size, left_chunks)
            write_source(os.path.join(staging, "export.info"), {
                **(source or {}), "files": " ".join(f"{n}={file_sha256(p)}" for n, p in sorted(written.items()))})
            if check is not None:
                check(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)   # the earlier export untouched
            raise
        return _move_in(output_dir, staging, written, owned)


def _move_in(output_dir: str, staging: str, written: Dict[str, str], owned: List[str]) -> Dict[str, str]:
    """Replace the export in ``output_dir`` by the set in ``staging`` (export.info removed first, moved in last)."""
    info = os.path.join(output_dir, "export.info")
    if os.path.isfile(info):
        os.unlink(info)   # first: a folder cut short from here on has no export.info, and is refused
    for path in owned:
        if os.path.basename(path) not in written and os.path.basename(path) != "export.info" and os.path.isfile(path):
            os.unlink(path)
    paths = {}
    for name in sorted(written) + ["export.info"]:
        paths[name] = os.path.join(output_dir, name)
        os.replace(os.path.join(staging, name), paths[name])
    os.rmdir(staging)
    del paths["export.info"]
    return paths


def _write_set(model: nn.Module, input_dim: int, units: str, output_dir: str, chunk_size: int,
               left_chunks: int) -> Dict[str, str]:
    """The export's graphs and tokens.txt in ``output_dir`` (a fresh folder); file name -> path."""
    vocab = model.ctc.ctc_lo.out_features
    common = {"model_type": "wenet_ctc", "version": "1", "model_author": "wenet_udps", "vocab_size": vocab}
    paths = {"tokens.txt": os.path.join(output_dir, "tokens.txt")}
    with open_input(units, "rb") as f:
        write_bytes(paths["tokens.txt"], f.read())
    g = torch.Generator().manual_seed(0)
    parts = {"model": (SherpaOffline(model),
                       (torch.randn(2, 67, input_dim, generator=g), torch.tensor([67, 51], dtype=torch.int64)),
                       ["x", "x_lens"], ["log_probs", "log_probs_lens"],
                       {"x": {0: "N", 1: "T"}, "x_lens": {0: "N"}, "log_probs": {0: "N", 1: "T_out"},
                        "log_probs_lens": {0: "N"}},
                       {**common, "comment": "non-streaming",
                        "subsampling_factor": model.encoder.embed.subsampling_rate})}
    if is_streaming(model):
        window, _ = chunk_window(model.encoder, chunk_size)
        att_cache, cnn_cache = initial_caches(model, chunk_size, left_chunks)
        size = chunk_size * left_chunks
        mask = torch.ones(1, 1, size + chunk_size, dtype=torch.bool)
        mask[:, :, :size] = False
        inputs = (torch.randn(1, window, input_dim, generator=g), torch.tensor([size], dtype=torch.int64),
                  torch.tensor([size], dtype=torch.int64), att_cache, cnn_cache, mask)
        parts["model-streaming"] = (SherpaStreaming(model, chunk_size, left_chunks), inputs,
                                    ["x", "offset", "required_cache_size", "attn_cache", "conv_cache", "attn_mask"],
                                    ["log_probs", "next_att_cache", "next_conv_cache"], {"x": {1: "T"}},
                                    {**common, "comment": "streaming",
                                     **streaming_meta(model, chunk_size, left_chunks)})
    with torch.no_grad():
        for name, (module, inputs, in_names, out_names, axes, meta) in parts.items():
            path = os.path.join(output_dir, f"{name}.onnx")
            # The TorchScript-based exporter writes one self-contained file (no external weights).
            _onnx(module.eval(), inputs, path, in_names, out_names, axes)
            add_metadata(path, meta)
            int8 = os.path.join(output_dir, f"{name}.int8.onnx")
            quantize_int8(path, int8)
            paths[f"{name}.onnx"], paths[f"{name}.int8.onnx"] = path, int8
    return paths


def _stream_ort(session, model: nn.Module, feats: torch.Tensor, chunk_size: int, left_chunks: int) -> torch.Tensor:
    """Drive model-streaming.onnx over the full chunks of one utterance (1, T, F) as the runtime does -> (T', V)."""
    window, stride = chunk_window(model.encoder, chunk_size)
    att, cnn = (c.numpy() for c in initial_caches(model, chunk_size, left_chunks))
    size = chunk_size * left_chunks
    offset, outs = size, []
    for cur in range(0, feats.size(1) - window + 1, stride):
        filled = offset - size  # output frames so far; the runtime masks the cache slots not yet filled
        mask = np.ones((1, 1, size + chunk_size), dtype=bool)
        mask[:, :, :max(size - filled, 0)] = False
        logp, att, cnn = session.run(None, {"x": feats[:, cur:cur + window].numpy(),
                                            "offset": np.array([offset], dtype=np.int64),
                                            "required_cache_size": np.array([size], dtype=np.int64),
                                            "attn_cache": att, "conv_cache": cnn, "attn_mask": mask})
        outs.append(torch.from_numpy(logp[0]))
        offset += logp.shape[1]
    return torch.cat(outs)


def sherpa_parity(model: nn.Module, output_dir: str, feats: torch.Tensor, lens: torch.Tensor, chunk_size: int,
                  left_chunks: int) -> Dict[str, float]:
    """Max abs differences of the fp32 graphs' CTC log-probs (and lengths) against eager PyTorch."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = lambda name: ort.InferenceSession(regular_file(os.path.join(output_dir, name)), opts,  # noqa: E731
                                                providers=["CPUExecutionProvider"])
    report = {}
    with torch.no_grad():
        ref, ref_lens = SherpaOffline(model)(feats, lens.to(torch.int64))
        got, got_lens = session("model.onnx").run(None, {"x": feats.numpy(), "x_lens": lens.to(torch.int64).numpy()})
        valid = torch.arange(ref.size(1)).unsqueeze(0) < ref_lens.unsqueeze(1)
        report["model.onnx"] = float((ref - torch.from_numpy(got)).abs()[valid].max())
        report["model.onnx_lens"] = float((ref_lens - torch.from_numpy(got_lens)).abs().max())
        if is_streaming(model):
            longest = int(lens.argmax())
            one = feats[longest:longest + 1, :int(lens[longest])]
            window, stride = chunk_window(model.encoder, chunk_size)
            if one.size(1) < window + stride:
                # Shorter than two chunk windows (a short first utterance, the random input): the runtime would
                # run the graph once or never, so the utterance is repeated to that length. What is compared is
                # the graph against eager PyTorch on one input, which any input serves.
                one = one.repeat(1, -(-(window + stride) // one.size(1)), 1)
            stream = _stream_ort(session("model-streaming.onnx"), model, one, chunk_size, left_chunks)
            eager, _ = model.encoder.forward_chunk_by_chunk(one, chunk_size, left_chunks)
            eager = model.ctc_activation(eager)[0, :stream.size(0)]
            report["model-streaming.onnx"] = float((eager - stream).abs().max())
    return report
