"""Greedy soup's evaluation of averaged checkpoints (bin/average_model --method greedy_soup): the dev WER of one
decoding mode (``decode_dataset``) or the utterance-weighted dev loss, in parallel ``spawn`` processes."""
import logging
import math
import multiprocessing
import os
from typing import Any, Dict, List, Optional

import torch

from wenet_udps.dataset.dataset import DataTally
from wenet_udps.decode.data_list import decode_dataset
from wenet_udps.scoring import error_rate, read_text
from wenet_udps.scoring.references import check_record, reference_record
from wenet_udps.train.average import average_state_dicts
from wenet_udps.train.executor import loss_sums


def _decode_kwargs(s: Dict[str, Any]) -> Dict[str, Any]:
    """The model's own chunk size; --ctc_weight only for the mode it weighs in (others refuse it as unused)."""
    return {"ctc_weight": s["ctc_weight"]} if s["decode_mode"] == "attention_rescoring" else {}


class SoupEvaluator:
    """Dev metric of averaged checkpoints: WER of one decoding mode, or the utterance-weighted dev loss."""

    def __init__(self, settings: Dict[str, Any]):
        from wenet_udps.dataset.dataset import eval_dataset_conf
        from wenet_udps.dataset import init_dataset
        from wenet_udps.dataset.lists import read_raw_list
        from wenet_udps.model_builder import build_model, ctc_output_frames, min_input_frames
        from wenet_udps.train.targets import TargetAdmission
        from wenet_udps.text import init_tokenizer
        from wenet_udps.config import load_config
        self.s = settings
        self.config = load_config(settings["config"])
        self.model = build_model(self.config).eval()
        self.tokenizer = init_tokenizer(self.config)
        # cv_loss over the utterances training's cv loss is taken over (no impossible or reserved-symbol targets)
        self.admission = TargetAdmission(self.tokenizer, ctc_output_frames(self.config))
        self.dataset_conf = eval_dataset_conf(self.config.get("dataset_conf") or {}, settings["batch_size"])
        self.init_dataset = init_dataset
        self.min_input_frames = min_input_frames
        self.refs: Dict[str, str] = {}
        if settings["metric"] == "wer":
            if settings.get("ref_text"):
                self.refs = read_text(settings["ref_text"])
            elif settings["data_type"] == "raw":
                self.refs = {s["key"]: s["txt"] for s in read_raw_list(settings["dev_data"])}
            else:
                raise ValueError("--soup_metric wer with shard data needs --ref_text (Kaldi text of the dev set)")

    def __call__(self, paths: List[str]) -> float:
        self.model.load_state_dict(average_state_dicts(paths, self.s.get("verify", True)))
        s = self.s
        if s["metric"] == "wer":
            results, stats = decode_dataset(self.model, self.tokenizer, self.config, s["dev_data"],
                                            modes=[s["decode_mode"]], data_type=s["data_type"],
                                            batch_size=s["batch_size"], beam_size=s["beam_size"],
                                            decode_kwargs=_decode_kwargs(s), progress=False)
            if s.get("ref_text"):   # another set's text would rank the candidates by the wrong references
                check_record(self.refs, s["ref_text"], results[s["decode_mode"]],
                             reference_record(s["dev_data"], stats["references"], stats["skipped"]),
                             "the greedy soup's decode")
            return error_rate(self.refs, results[s["decode_mode"]], char=s["wer_char"])
        dataset = self.init_dataset(s["data_type"], s["dev_data"], self.tokenizer, self.dataset_conf,
                                    partition=False, min_frames=self.min_input_frames(self.config),
                                    admission=self.admission)
        tally = DataTally()
        sums, nums, _, _ = loss_sums(self.model, tally.batches(dataset))  # NaN/Inf batches left out
        dataset.check_tally(tally, "greedy soup dev")  # nothing (or too little) of --dev_data used: exit 1
        return sums["loss"] / nums["loss"] if nums["loss"] else math.inf


_WORKER: Optional[SoupEvaluator] = None


def _init_worker(settings: Dict[str, Any], threads: int) -> None:
    global _WORKER
    torch.set_num_threads(threads)
    logging.basicConfig(level=logging.WARNING)
    _WORKER = SoupEvaluator(settings)


def _evaluate(paths: List[str]) -> float:
    return _WORKER(paths)


class ParallelEvaluator:
    """``evaluate(list of ingredient lists) -> metrics`` over a spawn pool (in-process with one worker)."""

    def __init__(self, settings: Dict[str, Any], num_workers: int):
        self.pool = None
        self.local = None
        if num_workers > 1:
            threads = max(1, (os.cpu_count() or 1) // num_workers)
            self.pool = multiprocessing.get_context("spawn").Pool(num_workers, initializer=_init_worker,
                                                                  initargs=(settings, threads))
        else:
            self.local = SoupEvaluator(settings)

    def __call__(self, tasks: List[List[str]]) -> List[float]:
        if self.pool is not None:
            return self.pool.map(_evaluate, tasks, chunksize=1)
        return [self.local(t) for t in tasks]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
