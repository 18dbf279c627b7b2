"""Decode a data list with one or several methods in one pass (the encoder runs once per batch): the library
behind ``wenet_udps.bin.recognize``, ``average_model``'s WER soup, ``plot_attention``, ``wenet_udps.api`` and bench/.

Writes nothing unless asked (``write_results``); the real-time factor is decoding time / audio seconds, each
utterance's seconds by the one definition, wenet_udps.dataset.audio.duration_seconds (as sherpa_decode counts them).
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
from wenet_udps.lm.arpa import check_oov
from wenet_udps.model_builder import build_model, min_input_frames
from wenet_udps.train.checkpoint import load_model_state
from wenet_udps.transformer.modes import LM_METHODS
from wenet_udps.utils.atomic import open_atomic
from wenet_udps.scoring.record import check_written
from wenet_udps.utils.source_info import file_sha256, write_source


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
                 data_type: str = "raw", items: Optional[List[Dict[str, Any]]] = None) -> Any:
    """``data_list`` with ``config``'s features for evaluation: list order, no augmentation, every utterance
    (``items``: its entries read already, see ``AsrDataset``)."""
    return init_dataset(data_type, data_list, tokenizer,
                        eval_dataset_conf(dict(config.get("dataset_conf") or {}), batch_size), partition=False,
                        min_frames=min_input_frames(config), items=items)


def decode_dataset(model: torch.nn.Module, tokenizer: Any, config: Mapping[str, Any], data_list: str, *,
                   modes: List[str], data_type: str = "raw", batch_size: int = 16, beam_size: int = 10,
                   device: str = "cpu", decode_kwargs: Optional[Dict[str, Any]] = None, num_workers: int = 0,
                   progress: bool = True, items: Optional[List[Dict[str, Any]]] = None,
                   contexts: Any = None) -> Tuple[Dict[str, Dict[str, str]], Dict[str, float]]:
    """Decode ``data_list`` (``items``: its entries read already, see ``AsrDataset``) with every mode in ``modes``.

    Returns:
        mode -> {key: hypothesis text} (list order) and ``{"decode_seconds", "audio_seconds", "rtf", "utterances",
        "skipped", "counts", "references"}`` (utterances decoded, skipped ones, the count line recognize logs, and
        {key: transcript in the list} of the decoded ones: ``scoring.references.reference_record``).
    ``contexts`` (``hotwords.UtteranceContexts``): each utterance decoded with its own hotword list, one at a time
    (a batch's searches share one graph), so the encoder runs per utterance.
    With an LM search among ``decode_kwargs`` (the ``*_lm`` modes), the references of the utterances decoded are
    checked against the LM's words once the pass ends (``lm.arpa.check_oov``, check_lm's check): one warning naming
    the list and the LM when too many of their words are not LM words (the search can output LM words only).

    Raises:
        DataError: no utterance decoded, or more unusable than ``dataset_conf.max_bad_fraction``
            (``wenet_udps.utils.counts``).
    """
    dataset = eval_dataset(config, tokenizer, data_list, batch_size, data_type, items)
    loader = DataLoader(dataset, batch_size=None, num_workers=num_workers, pin_memory=device == "cuda")
    results: Dict[str, Dict[str, str]] = {m: {} for m in modes}
    decode_seconds = audio_seconds = 0.0
    bar = tqdm(desc="decode", unit="utt", disable=not progress)
    tally = DataTally()
    lm_search = (decode_kwargs or {}).get("lm_search")
    references: Dict[str, str] = {}
    audible = 0  # utterances that are not silence (see all_empty_warning)
    with torch.no_grad():
        for batch in tally.batches(loader):
            feats = batch["feats"].to(device, non_blocking=True)
            lens = batch["feats_lengths"].to(device, non_blocking=True)
            t0 = time.perf_counter()
            if contexts is None:
                out = model.decode(list(modes), feats, lens, beam_size, **(decode_kwargs or {}))
            else:
                out = decode_each(model, list(modes), feats, lens, batch["keys"], beam_size, decode_kwargs or {},
                                  contexts)
            decode_seconds += time.perf_counter() - t0
            audio_seconds += sum(batch["seconds"])
            audible += sum(int(not_silent(f[:n])) for f, n in zip(batch["feats"], batch["feats_lengths"].tolist()))
            rows = sorted(range(len(batch["keys"])), key=batch["order"].__getitem__)  # the list's order
            for mode in modes:
                for row in rows:
                    results[mode][batch["keys"][row]] = tokenizer.detokenize(out[mode][row].tokens)[0]
            references.update(zip(batch["keys"], batch["txts"]))
            bar.update(len(batch["keys"]))
    bar.close()
    counts = dataset.check_tally(tally, "decode")  # exit 1 when nothing (or too little) was decoded
    logging.info("%s", counts)
    if lm_search is not None:  # a list without transcripts (a wav.scp given to the API) has no words to check
        check_oov(lm_search.info, list(references.values()), f"the references of {data_list}")
    for mode in modes:
        warning = all_empty_warning(mode, results[mode], audible, decode_kwargs or {}, beam_size=beam_size)
        if warning:
            logging.warning("%s", warning)
    rtf = decode_seconds / audio_seconds if audio_seconds > 0 else float("nan")
    return results, {"decode_seconds": decode_seconds, "audio_seconds": audio_seconds, "rtf": rtf,
                     "utterances": tally.counts["used"], "skipped": sum(tally.skipped().values()), "counts": counts,
                     "references": references}


def decode_each(model: torch.nn.Module, modes: List[str], feats: torch.Tensor, lens: torch.Tensor, keys: List[str],
                beam_size: int, kwargs: Mapping[str, Any], contexts: Any) -> Dict[str, List[Any]]:
    """``model.decode``'s mode -> [result per row] of a (B, T, D) batch, each row decoded alone with the context graph
    of its key (``contexts.graph``)."""
    out: Dict[str, List[Any]] = {m: [] for m in modes}
    for row, key in enumerate(keys):
        n = int(lens[row])
        one = model.decode(modes, feats[row:row + 1, :n], lens[row:row + 1], beam_size,
                           **{**kwargs, "context": contexts.graph(key)})
        for mode in modes:
            out[mode].append(one[mode][0])
    return out


# The mean log filterbank energy of the frames of an utterance spans more than this (nats; 2 is about 9 dB) where
# something is said: FSDD's digits span 3 to 8, a steady tone or noise under 1, digital silence 0.
SILENCE_SPREAD = 2.0
# A beam above this (WeNet decodes at 10) is named in the warning of an attention decode that came out all empty.
WIDE_BEAM = 20


def not_silent(feats: torch.Tensor) -> bool:
    """Whether the (T, F) features of one utterance hold more than silence (see ``SILENCE_SPREAD``)."""
    energy = feats.float().mean(dim=-1)
    return energy.numel() > 0 and float(energy.max() - energy.min()) > SILENCE_SPREAD


def all_empty_warning(mode: str, texts: Mapping[str, str], audible: int, kwargs: Mapping[str, Any],
                      beam_size: int = 10) -> Optional[str]:
    """The warning for a list whose every hypothesis in ``mode`` is empty although ``audible`` of its utterances are
    not silent, naming the option that likely caused it (issue 57, M13: ``--lm_weight 1e6`` emptied them all
    without a word; issue 80: ``attention`` at ``--beam_size 1000``); None otherwise."""
    if not texts or audible == 0 or any(t.strip() for t in texts.values()):
        return None
    if mode in LM_METHODS and "lm_search" in kwargs:
        conf = kwargs["lm_search"].conf
        likely = (f"--lm_weight {conf.lm_weight:g} (each word costs lm_weight x its LM cost; tuned values lie in "
                  f"0.1-2) or --word_score {conf.word_score:g} (a word's bonus) is the likely cause")
    elif mode == "attention" and beam_size > WIDE_BEAM and not kwargs.get("length_penalty"):
        # A wide search finds what the decoder scores highest, and ranked by total log-probability alone the empty
        # hypothesis (one eos) often beats every transcript: the search's answer, not an untrained model.
        likely = (f"--beam_size {beam_size} is the likely cause: a search this wide finds the hypothesis the decoder "
                  f"scores highest, and by total log-probability alone (--length_penalty 0) the empty one, a single "
                  f"end token, often scores above every transcript; decode at --beam_size 10 (WeNet's), with "
                  f"--length_penalty > 0, or in attention_rescoring")
    elif kwargs.get("blank_penalty"):
        likely = f"the model emits only blanks even at --blank_penalty {kwargs['blank_penalty']:g}: is it trained?"
    else:
        likely = "the model emits no token: is it trained, and is this its data (sample rate, features)?"
    return (f"{mode}: all {len(texts)} hypotheses are empty, though {audible} utterance(s) are not silent; "
            f"{likely}")


def rtf_line(stats: Mapping[str, Any], modes: List[str], device: str) -> str:
    """The line recognize prints after decoding: RTF, seconds, utterances, modes, device."""
    return (f"RTF {stats['rtf']:.4f} ({stats['decode_seconds']:.2f} s decoding for {stats['audio_seconds']:.2f} s "
            f"of audio, {stats['utterances']} utterances, modes {' '.join(modes)}, {device})")


def write_results(results: Mapping[str, Mapping[str, str]], result_dir: str,
                  source: Optional[Mapping[str, str]] = None,
                  lm_source: Optional[Mapping[str, str]] = None,
                  per_mode: Optional[Mapping[str, Mapping[str, str]]] = None, complete: bool = False) -> List[str]:
    """``<result_dir>/<mode>/text`` for every mode, and with ``source`` (``source_info.model_source``) its
    ``decode.info`` (see wenet_udps.utils.source_info), for an LM mode with ``lm_source`` (``LmInfo.source``)
    added, and ``per_mode[mode]`` (the options as that mode applied them: ``ctc_weight``); returns the text
    paths. ``complete`` (recognize): each record must be whole (``scoring.record.check_written``), else nothing of
    that mode is written."""
    paths = []
    for mode, hyps in results.items():
        os.makedirs(os.path.join(result_dir, mode), exist_ok=True)
        path = os.path.join(result_dir, mode, "text")
        with open_atomic(path) as f:
            for key, text in hyps.items():
                f.write(f"{key} {text}\n")
        if source is not None:
            lines = {**source, **(lm_source or {})} if mode in LM_METHODS else dict(source)
            lines.update((per_mode or {}).get(mode, {}))
            lines["mode"] = mode   # the folder's own mode: tools/collect_results checks it (results.origin)
            lines["text_sha256"] = file_sha256(path)   # the text decoded: a hand-edited one is refused (scoring.bound)
            try:
                if complete:   # the keys the readers require (scoring.record): a writer's slip fails here
                    check_written(lines, os.path.join(result_dir, mode, "decode.info"))
                write_source(os.path.join(result_dir, mode, "decode.info"), lines)
            except OSError:  # a text without its record would be scored as another toolkit's: not kept
                os.unlink(path)
                raise
        paths.append(path)
    return paths


def decode_kwargs_from_args(args: argparse.Namespace) -> Dict[str, Any]:
    """``ASRModel.decode``'s keyword options from recognize-style flags (``args`` has every one of them)."""
    return {"decoding_chunk_size": args.decoding_chunk_size,
            "num_decoding_left_chunks": args.num_decoding_left_chunks, "ctc_weight": args.ctc_weight,
            "simulate_streaming": args.simulate_streaming, "reverse_weight": args.reverse_weight,
            "length_penalty": args.length_penalty, "blank_penalty": args.blank_penalty,
            "max_len_ratio": args.max_len_ratio, "length_bonus": args.length_bonus,
            "context_weight": args.context_weight}
