"""Decode a data list with one or several methods in one pass (the encoder runs once per batch): the library
behind ``wenet_udps.bin.recognize``, ``average_model``'s WER soup, ``plot_attention``, ``wenet_udps.api`` and bench/.

Writes nothing unless asked (``write_results``); the real-time factor is decoding time / audio seconds, the audio
seconds being feature frames times the frame shift.
"""
import argparse
import logging
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from wenet_udps.config import load_config
from wenet_udps.dataset import init_dataset
from wenet_udps.dataset.dataset import DataTally, eval_dataset_conf
from wenet_udps.model_builder import build_model, min_input_frames
from wenet_udps.train.checkpoint import load_model_state
from wenet_udps.transformer.search import LM_METHODS
from wenet_udps.utils.source_info import write_source


def frame_shift_ms(dataset_conf: Mapping[str, Any]) -> float:
    name = "mfcc_conf" if dataset_conf.get("feats_type") == "mfcc" else "fbank_conf"
    return float((dataset_conf.get(name) or {}).get("frame_shift", 10))


def model_from_checkpoint(config: Mapping[str, Any], checkpoint: str, device: str = "cpu", *,
               verify: bool = True) -> torch.nn.Module:
    """build_model + the checkpoint's weights, in eval mode on ``device`` (the checkpoint verified, and refused when
    ``config``'s units file is not the one it was trained with; see ``load_checkpoint``)."""
    model = build_model(config)
    load_model_state(model, checkpoint, verify=verify,
                     units=(config.get("tokenizer_conf") or {}).get("symbol_table_path"))
    return model.to(device).eval()


def load_experiment(exp_dir: str, checkpoint: str) -> Tuple[Dict[str, Any], torch.nn.Module]:
    """(config, model in eval mode on the CPU) of an experiment dir: its train.yaml and its file ``checkpoint``."""
    config = load_config(os.path.join(exp_dir, "train.yaml"))
    return config, model_from_checkpoint(config, os.path.join(exp_dir, checkpoint))


def eval_dataset(config: Mapping[str, Any], tokenizer: Any, data_list: str, batch_size: int,
                 data_type: str = "raw") -> Any:
    """``data_list`` with ``config``'s features for evaluation: list order, no augmentation, every utterance."""
    return init_dataset(data_type, data_list, tokenizer,
                        eval_dataset_conf(dict(config.get("dataset_conf") or {}), batch_size), partition=False,
                        min_frames=min_input_frames(config))


def decode_dataset(model: torch.nn.Module, tokenizer: Any, config: Mapping[str, Any], data_list: str, *,
                   modes: List[str], data_type: str = "raw", batch_size: int = 16, beam_size: int = 10,
                   device: str = "cpu", decode_kwargs: Optional[Dict[str, Any]] = None, num_workers: int = 0,
                   progress: bool = True) -> Tuple[Dict[str, Dict[str, str]], Dict[str, float]]:
    """Decode ``data_list`` with every mode in ``modes``.

    Returns:
        mode -> {key: hypothesis text} (list order) and ``{"decode_seconds", "audio_seconds", "rtf", "utterances",
        "skipped", "counts", "references"}`` (utterances decoded, skipped ones, the count line recognize logs, and
        {key: transcript in the list} of the decoded ones: ``scoring.references.reference_record``).
    Raises:
        DataError: no utterance decoded, or more unusable than ``dataset_conf.max_bad_fraction``
            (``wenet_udps.utils.counts``).
    """
    dataset = eval_dataset(config, tokenizer, data_list, batch_size, data_type)
    loader = DataLoader(dataset, batch_size=None, num_workers=num_workers, pin_memory=device == "cuda")
    shift = frame_shift_ms(config.get("dataset_conf") or {}) / 1000.0
    results: Dict[str, Dict[str, str]] = {m: {} for m in modes}
    decode_seconds = audio_seconds = 0.0
    bar = tqdm(desc="decode", unit="utt", disable=not progress)
    tally = DataTally()
    references: Dict[str, str] = {}
    with torch.no_grad():
        for batch in tally.batches(loader):
            feats = batch["feats"].to(device, non_blocking=True)
            lens = batch["feats_lengths"].to(device, non_blocking=True)
            t0 = time.perf_counter()
            out = model.decode(list(modes), feats, lens, beam_size, **(decode_kwargs or {}))
            decode_seconds += time.perf_counter() - t0
            audio_seconds += float(batch["feats_lengths"].sum()) * shift
            for mode in modes:
                for key, res in zip(batch["keys"], out[mode]):
                    results[mode][key] = tokenizer.detokenize(res.tokens)[0]
            references.update(zip(batch["keys"], batch["txts"]))
            bar.update(len(batch["keys"]))
    bar.close()
    counts = dataset.check_tally(tally, "decode")  # exit 1 when nothing (or too little) was decoded
    logging.info("%s", counts)
    rtf = decode_seconds / audio_seconds if audio_seconds > 0 else float("nan")
    return results, {"decode_seconds": decode_seconds, "audio_seconds": audio_seconds, "rtf": rtf,
                     "utterances": tally.counts["used"], "skipped": sum(tally.skipped().values()), "counts": counts,
                     "references": references}


def rtf_line(stats: Mapping[str, Any], modes: List[str], device: str) -> str:
    """The line recognize prints after decoding: RTF, seconds, utterances, modes, device."""
    return (f"RTF {stats['rtf']:.4f} ({stats['decode_seconds']:.2f} s decoding for {stats['audio_seconds']:.2f} s "
            f"of audio, {stats['utterances']} utterances, modes {' '.join(modes)}, {device})")


def write_results(results: Mapping[str, Mapping[str, str]], result_dir: str,
                  source: Optional[Mapping[str, str]] = None,
                  lm_source: Optional[Mapping[str, str]] = None) -> List[str]:
    """``<result_dir>/<mode>/text`` for every mode, and with ``source`` (``source_info.model_source``) its
    ``decode.info`` (see wenet_udps.utils.source_info), for an LM mode with ``lm_source`` (``LmInfo.source``)
    added; returns the text paths."""
    paths = []
    for mode, hyps in results.items():
        os.makedirs(os.path.join(result_dir, mode), exist_ok=True)
        path = os.path.join(result_dir, mode, "text")
        with open(path, "w", encoding="utf-8") as f:
            for key, text in hyps.items():
                f.write(f"{key} {text}\n")
        if source is not None:
            lines = {**source, **(lm_source or {})} if mode in LM_METHODS else source
            write_source(os.path.join(result_dir, mode, "decode.info"), lines)
        paths.append(path)
    return paths


def decode_kwargs_from_args(args: argparse.Namespace) -> Dict[str, Any]:
    """``ASRModel.decode``'s keyword options from recognize-style flags (``args`` has every one of them)."""
    return {"decoding_chunk_size": args.decoding_chunk_size,
            "num_decoding_left_chunks": args.num_decoding_left_chunks, "ctc_weight": args.ctc_weight,
            "simulate_streaming": args.simulate_streaming, "reverse_weight": args.reverse_weight,
            "length_penalty": args.length_penalty, "blank_penalty": args.blank_penalty,
            "max_len_ratio": args.max_len_ratio}
