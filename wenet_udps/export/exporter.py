"""ONNX and TorchScript export of the encoder (full and chunk), CTC head and rescoring decoder, with parity checks.

Files written to ``output_dir``: ``encoder.onnx`` / ``encoder.pt`` (whole utterance), ``encoder_chunk.onnx`` /
``encoder_chunk.pt`` (streaming step), ``decoder.onnx`` / ``decoder.pt`` (rescoring). ONNX is the primary format
(onnxruntime). ``*.pt`` are traced TorchScript modules (``torch.jit.load``), kept because WeNet's C++ runtime loads
them although torch deprecates torch.jit. Inputs/outputs are listed in :mod:`wenet_udps.export.wrappers`.

Every ONNX part goes through torch.onnx's TorchScript-based exporter, as WeNet's own export does. The torch.export-
based one cannot capture two of the parts (the streaming step's positional-encoding range check reads the offset
tensor's value; the rescoring decoder cuts the right-to-left targets per hypothesis length in a Python loop), and on
the whole-utterance encoder, which it did capture, it took 40 s against 6 s for all six files of a 6-block AN4
conformer (2026-11-29): its symbolic shape tracing ran the model twice (the dynamic-length guards it first derived
were refined and the capture redone). The parity check below holds the encoder at a batch and length other than
the traced ones.
"""
import logging
import os
import warnings
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from wenet_udps.export.wrappers import ChunkEncoder, FullEncoder, RescoringDecoder, chunk_mask, chunk_window, \
    initial_caches
from wenet_udps.transformer.search import DecodeResult, attention_rescoring, ctc_greedy_search, \
    ctc_prefix_beam_search
from wenet_udps.utils.cli import regular_file
from wenet_udps.utils.atomic import open_atomic

OPSET = 17


def _trace(module: nn.Module, inputs: Tuple[torch.Tensor, ...]) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        # Python-side shape checks become constants in the trace; they only guard against misuse.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.9+ marks jit deprecated; it still works
        return torch.jit.trace(module, inputs, check_trace=False)


def _load_torchscript(path: str) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # as in _trace: deprecated, kept for WeNet's runtime
        return torch.jit.load(path)


def _onnx(module: nn.Module, inputs: Tuple[torch.Tensor, ...], path: str, input_names: List[str],
          output_names: List[str], dynamic_axes: Dict[str, Dict[int, str]]) -> None:
    """torch.onnx's TorchScript-based exporter, for every part (see the module docstring for why not torch.export's)."""
    with warnings.catch_warnings():
        # Tracer warnings about Python-side shape checks and torch.jit's deprecation notice: see _trace.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        with open_atomic(path, "wb") as f:
            torch.onnx.export(module, inputs, f, dynamo=False, opset_version=OPSET, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic_axes, do_constant_folding=True)


def example_inputs(model: nn.Module, input_dim: int, chunk_size: int, left_chunks: int):
    """Example tensors for tracing each part (shapes only; values random)."""
    g = torch.Generator().manual_seed(0)
    speech = torch.randn(2, 67, input_dim, generator=g)
    speech_lens = torch.tensor([67, 51], dtype=torch.int64)
    window, _ = chunk_window(model.encoder, chunk_size)
    att_cache, cnn_cache = initial_caches(model, chunk_size, left_chunks)
    if left_chunks <= 0:
        # A non-empty cache, so the trace records the cache concatenation (its length stays dynamic).
        att_cache = torch.randn(att_cache.size(0), att_cache.size(1), chunk_size, att_cache.size(3), generator=g)
    chunk = (torch.randn(1, window, input_dim, generator=g), torch.tensor([chunk_size], dtype=torch.int64),
             att_cache, cnn_cache, torch.ones(1, 1, att_cache.size(2) + chunk_size, dtype=torch.bool))
    with torch.no_grad():
        enc, _, _ = FullEncoder(model)(speech[:1], speech_lens[:1])
    hyps = torch.tensor([[model.sos, 2, 3, 4], [model.sos, 3, 0, 0]], dtype=torch.int64)
    decoder = (hyps, torch.tensor([4, 2], dtype=torch.int64), enc)
    return (speech, speech_lens), chunk, decoder


def export_model(model: nn.Module, input_dim: int, output_dir: str, *, chunk_size: int = 16,
                 left_chunks: int = -1, reverse_weight: float = 0.0) -> Dict[str, str]:
    """Write the six files; returns part name -> path."""
    model = model.eval()
    os.makedirs(output_dir, exist_ok=True)
    full, chunk, dec = FullEncoder(model).eval(), ChunkEncoder(model, chunk_size, left_chunks).eval(), \
        RescoringDecoder(model, reverse_weight).eval()
    full_in, chunk_in, dec_in = example_inputs(model, input_dim, chunk_size, left_chunks)
    paths = {}
    with torch.no_grad():
        for name, module, inputs in (("encoder", full, full_in), ("encoder_chunk", chunk, chunk_in),
                                     ("decoder", dec, dec_in)):
            path = os.path.join(output_dir, f"{name}.pt")
            with open_atomic(path, "wb") as f:
                torch.jit.save(_trace(module, inputs), f)
            paths[f"{name}.pt"] = path
        specs = {
            "encoder": (full, full_in, ["speech", "speech_lengths"], ["encoder_out", "encoder_out_lens", "ctc_log_probs"],
                        {"speech": {0: "B", 1: "T"}, "speech_lengths": {0: "B"}, "encoder_out": {0: "B", 1: "T_out"},
                         "encoder_out_lens": {0: "B"}, "ctc_log_probs": {0: "B", 1: "T_out"}}),
            "encoder_chunk": (chunk, chunk_in, ["chunk", "offset", "att_cache", "cnn_cache", "att_mask"],
                              ["output", "ctc_log_probs", "new_att_cache", "new_cnn_cache"],
                              {"chunk": {1: "T"}, "att_cache": {2: "T_cache"}, "att_mask": {2: "T_key"},
                               "output": {1: "T_out"}, "ctc_log_probs": {1: "T_out"},
                               "new_att_cache": {2: "T_cache_out"}}),
            "decoder": (dec, dec_in, ["hyps", "hyps_lens", "encoder_out"], ["l2r_log_probs", "r2l_log_probs"],
                        {"hyps": {0: "N", 1: "L"}, "hyps_lens": {0: "N"}, "encoder_out": {1: "T_out"},
                         "l2r_log_probs": {0: "N", 1: "L"}, "r2l_log_probs": {0: "N", 1: "L"}}),
        }
        for name, (module, inputs, in_names, out_names, axes) in specs.items():
            path = os.path.join(output_dir, f"{name}.onnx")
            _onnx(module, inputs, path, in_names, out_names, axes)
            paths[f"{name}.onnx"] = path
    logging.info("exported %s", ", ".join(sorted(paths)))
    return paths


class OrtPart:
    """An onnxruntime session fed by name (inputs the exporter pruned as unused are left out)."""

    def __init__(self, path: str):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(regular_file(path), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, **feeds: torch.Tensor) -> List[torch.Tensor]:
        feed = {k: v.numpy() for k, v in feeds.items() if k in self.inputs}
        return [torch.from_numpy(np.asarray(o)) for o in self.session.run(None, feed)]


def run_chunks(step, model: nn.Module, feats: torch.Tensor, chunk_size: int, left_chunks: int) -> torch.Tensor:
    """Stream one utterance (1, T, F) through ``step`` (eager wrapper, TorchScript or ORT) -> (1, T', D)."""
    window, stride = chunk_window(model.encoder, chunk_size)
    context = model.encoder.embed.right_context + 1
    att_cache, cnn_cache = initial_caches(model, chunk_size, left_chunks)
    fixed = left_chunks > 0
    valid = 0
    offset = 0
    outs = []
    for cur in range(0, feats.size(1) - context + 1, stride):
        chunk = feats[:, cur:min(cur + window, feats.size(1))]
        n_out = (chunk.size(1) - context) // model.encoder.embed.subsampling_rate + 1
        mask = chunk_mask(att_cache.size(2), valid if fixed else att_cache.size(2), n_out)
        out, _, att_cache, cnn_cache = step(chunk, torch.tensor([offset], dtype=torch.int64), att_cache,
                                            cnn_cache, mask)
        outs.append(out)
        offset += out.size(1)
        valid = min(valid + out.size(1), att_cache.size(2))
    return torch.cat(outs, dim=1)


class OrtRescorer:
    """Stands in for the model in ``attention_rescoring`` with the ONNX decoder."""

    def __init__(self, decoder: OrtPart, sos: int, eos: int):
        self.decoder, self.sos, self.eos = decoder, sos, eos

    def forward_attention_decoder(self, hyps, hyps_lens, encoder_out, reverse_weight=0.0, encoder_lens=None,
                                  utt=None):
        # The exported decoder takes the hypotheses of one utterance whose frames are all valid (WeNet's runtime
        # layout), while rescoring passes a batch's hypotheses at once: one call per utterance, on its own frames.
        if utt is None:
            utt, encoder_lens = torch.zeros(hyps.size(0), dtype=torch.long), torch.tensor([encoder_out.size(1)])
        rows = [(utt == b).nonzero().squeeze(1) for b in range(encoder_lens.size(0))]
        outs = [self.decoder(hyps=hyps[r].to(torch.int64), hyps_lens=hyps_lens[r].to(torch.int64),
                             encoder_out=encoder_out[b:b + 1, :int(encoder_lens[b])])
                for b, r in enumerate(rows) if r.numel() > 0]
        order = torch.cat(rows).argsort()  # back to the order of hyps
        return torch.cat([o[0] for o in outs])[order], torch.cat([o[1] for o in outs])[order]


def ort_decode(output_dir: str, model: nn.Module, feats: torch.Tensor, lens: torch.Tensor, beam_size: int,
               ctc_weight: float, reverse_weight: float) -> Dict[str, List[DecodeResult]]:
    """ctc_greedy_search and attention_rescoring with the ONNX encoder and decoder (searches from search.py)."""
    encoder = OrtPart(os.path.join(output_dir, "encoder.onnx"))
    decoder = OrtPart(os.path.join(output_dir, "decoder.onnx"))
    enc_out, enc_lens, ctc = encoder(speech=feats, speech_lengths=lens.to(torch.int64))
    blank = model.ctc.blank_id
    prefix = ctc_prefix_beam_search(ctc, enc_lens, beam_size, blank)
    rescored = attention_rescoring(OrtRescorer(decoder, model.sos, model.eos), prefix, enc_out, enc_lens,
                                   ctc_weight, reverse_weight)
    return {"ctc_greedy_search": ctc_greedy_search(ctc, enc_lens, blank), "attention_rescoring": rescored}


def check_parity(model: nn.Module, output_dir: str, feats: torch.Tensor, lens: torch.Tensor, *,
                 chunk_size: int, left_chunks: int, beam_size: int = 4, ctc_weight: float = 0.5,
                 reverse_weight: float = 0.0) -> Dict[str, float]:
    """Max abs differences of the exported parts against eager, and transcript agreement under onnxruntime.

    Returns ``{"<part>.<format>": max abs diff, ..., "ort_<mode>_mismatches": number of utterances whose
    onnxruntime transcript differs from eager model.decode}``.
    """
    model = model.eval()
    report: Dict[str, float] = {}
    full, chunk_mod, dec = FullEncoder(model), ChunkEncoder(model, chunk_size, left_chunks), \
        RescoringDecoder(model, reverse_weight)
    lens = lens.to(torch.int64)
    with torch.no_grad():
        ref_full = full(feats, lens)
        ts_full = _load_torchscript(os.path.join(output_dir, "encoder.pt"))(feats, lens)
        ort_full = OrtPart(os.path.join(output_dir, "encoder.onnx"))(speech=feats, speech_lengths=lens)
        for fmt, got in (("torchscript", ts_full), ("onnx", ort_full)):
            valid = _valid_mask(ref_full[1], ref_full[0].size(1))
            report[f"encoder.{fmt}"] = max(_masked_diff(r, g, valid) for r, g in
                                           ((ref_full[0], got[0]), (ref_full[2], got[2])))
            report[f"encoder_lens.{fmt}"] = float((ref_full[1] - got[1]).abs().max())
        one = feats[:1, :int(lens[0])]
        ref_chunk = run_chunks(chunk_mod, model, one, chunk_size, left_chunks)
        ts_step = _load_torchscript(os.path.join(output_dir, "encoder_chunk.pt"))
        ort_step = OrtPart(os.path.join(output_dir, "encoder_chunk.onnx"))
        report["encoder_chunk.torchscript"] = float((ref_chunk - run_chunks(ts_step, model, one, chunk_size,
                                                                            left_chunks)).abs().max())
        report["encoder_chunk.onnx"] = float((ref_chunk - run_chunks(
            lambda c, o, a, n, m: ort_step(chunk=c, offset=o, att_cache=a, cnn_cache=n, att_mask=m),
            model, one, chunk_size, left_chunks)).abs().max())
        enc = ref_full[0][:1, :int(ref_full[1][0])]
        hyps = torch.tensor([[model.sos, 2, 3, 4], [model.sos, 5, 0, 0], [model.sos, 6, 7, 0]], dtype=torch.int64)
        hyps_lens = torch.tensor([4, 2, 3], dtype=torch.int64)
        ref_dec = dec(hyps, hyps_lens, enc)
        ts_dec = _load_torchscript(os.path.join(output_dir, "decoder.pt"))(hyps, hyps_lens, enc)
        ort_dec = OrtPart(os.path.join(output_dir, "decoder.onnx"))(hyps=hyps, hyps_lens=hyps_lens, encoder_out=enc)
        for fmt, got in (("torchscript", ts_dec), ("onnx", ort_dec)):
            report[f"decoder.{fmt}"] = max(_masked_diff(r, g, _valid_mask(hyps_lens, hyps.size(1)))
                                           for r, g in zip(ref_dec, got))
        eager = model.decode(["ctc_greedy_search", "attention_rescoring"], feats, lens, beam_size,
                             ctc_weight=ctc_weight, reverse_weight=reverse_weight)
        ort = ort_decode(output_dir, model, feats, lens, beam_size, ctc_weight, reverse_weight)
        for mode in ("ctc_greedy_search", "attention_rescoring"):
            report[f"ort_{mode}_mismatches"] = float(sum(a.tokens != b.tokens for a, b in zip(eager[mode],
                                                                                              ort[mode])))
    return report


def _valid_mask(lens: torch.Tensor, length: int) -> torch.Tensor:
    return torch.arange(length).unsqueeze(0) < lens.unsqueeze(1)


def _masked_diff(ref: torch.Tensor, got: torch.Tensor, valid: torch.Tensor) -> float:
    """Max abs difference over valid (B, T) positions (padded frames hold arbitrary values)."""
    if ref.shape != got.shape:
        raise ValueError(f"exported output shape {tuple(got.shape)} differs from eager {tuple(ref.shape)}")
    return float((ref - got).abs()[valid].max())


def summarize(report: Dict[str, float], tolerance: float) -> Tuple[bool, List[str]]:
    """Lines for printing and whether every diff is within ``tolerance`` and every transcript matches."""
    ok = True
    lines = []
    for key in sorted(report):
        value = report[key]
        if key.endswith("_mismatches"):
            good = value == 0
            lines.append(f"{key}: {int(value)} {'OK' if good else 'MISMATCH'}")
        else:
            good = value <= tolerance
            lines.append(f"max abs diff {key}: {value:.3e} {'OK' if good else f'> {tolerance:g}'}")
        ok = ok and good
    return ok, lines


__all__: Sequence[str] = ("export_model", "check_parity", "summarize", "ort_decode", "run_chunks", "OrtPart")
