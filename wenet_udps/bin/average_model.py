"""Average checkpoints (WeNet's average_model.py) or build a greedy soup.

WeNet's modes:
    python -m wenet_udps.bin.average_model --dst_model exp/x/avg_10.pt --src_path exp/x --num 10 --val_best
    python -m wenet_udps.bin.average_model --dst_model exp/x/avg_5.pt --src_path exp/x --num 5 \
        --min_epoch 40 --max_epoch 60
(``--val_best``: the ``num`` lowest cv_loss epochs from epoch_N.yaml; else the last ``num`` epochs.) The flags
WeNet also has mean what they mean there, with these differences: ``--min_epoch``/``--max_epoch`` also bound the
last-epochs choice (WeNet applies them with ``--val_best`` only), and "last" goes by epoch number, not file time;
fewer matching checkpoints than ``--num`` is an error in both. WeNet's ``--mode`` (hybrid/epoch/step: which
checkpoints to rank) is not offered: only epoch checkpoints are averaged, as with WeNet's ``--mode epoch``.

Greedy soup (wenet_udps.train.average explains the selection), ranking by dev WER of one decoding mode:
    python -m wenet_udps.bin.average_model --method greedy_soup --dst_model exp/x/soup.pt --src_path exp/x \
        --num 20 --val_best --config exp/x/train.yaml --dev_data data/dev/data.list \
        --decode_mode attention_rescoring --wer_char 1 --num_look 2 --num_workers 4
``--soup_metric cv_loss`` ranks by the dev-set loss instead. Candidates are evaluated in parallel ``spawn``
processes. The soup's ingredients and metric history go to ``<dst_model>.soup.yaml``.
"""
import argparse
import logging
import os
from typing import Dict, List, Optional

import torch

from wenet_udps.decode.soup import ParallelEvaluator
from wenet_udps.train.average import average_state_dicts, greedy_soup, select_checkpoints
from wenet_udps.train.checkpoint import add_verify_flag, save_yaml, sidecar, write_checkpoint
from wenet_udps.train.checkpoint_files import read_info
from wenet_udps.train.run_dir import check_derived_output
from wenet_udps.transformer.decode_options import DECODE_OPTIONS
from wenet_udps.transformer.modes import METHODS_WITHOUT_LM
from wenet_udps.utils import cli
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dst_model", required=True, type=cli.output_file, help="output state dict")
    p.add_argument("--src_path", required=True, type=cli.existing_dir,
                   help="experiment dir with epoch_N.pt + epoch_N.yaml")
    p.add_argument("--num", type=cli.positive_int, default=5, help="checkpoints to average (soup: candidates)")
    p.add_argument("--val_best", action="store_true", help="pick by cv_loss instead of the last epochs")
    p.add_argument("--min_epoch", type=cli.non_negative_int, default=0)
    p.add_argument("--max_epoch", type=cli.non_negative_int, default=1 << 30)
    # Not --mode: WeNet's --mode chooses which checkpoints to rank (see the module docstring).
    p.add_argument("--method", default="average", choices=["average", "greedy_soup"],
                   help="uniform average of the selected checkpoints, or a greedy soup of them")
    p.add_argument("--soup_metric", default="wer", choices=["wer", "cv_loss"])
    p.add_argument("--num_look", type=cli.positive_int, default=1, help="greedy soup look-ahead window")
    p.add_argument("--num_workers", type=cli.workers_int, default=1,
                   help="parallel evaluation processes (greedy soup)")
    p.add_argument("--config", default=None, type=cli.existing_file,
                   help="train.yaml (greedy soup; default SRC_PATH/train.yaml)")
    p.add_argument("--dev_data", default=None, type=cli.existing_file, help="dev data.list (greedy soup)")
    p.add_argument("--data_type", default="raw", choices=["raw", "shard"])
    p.add_argument("--ref_text", default=None, type=cli.existing_file,
                   help="Kaldi text of the dev set (default: the list's txt)")
    p.add_argument("--decode_mode", default="attention_rescoring", choices=list(METHODS_WITHOUT_LM))
    # The soup's decoding: recognize's checks (decode_options.DECODE_OPTIONS), run.sh's defaults.
    p.add_argument("--beam_size", type=DECODE_OPTIONS["beam_size"].check, default=10)
    p.add_argument("--ctc_weight", type=DECODE_OPTIONS["ctc_weight"].check, default=0.5)
    p.add_argument("--batch_size", type=DECODE_OPTIONS["batch_size"].check, default=16)
    p.add_argument("--wer_char", type=int, default=0, choices=[0, 1], help="score characters (CER)")
    add_verify_flag(p)
    return p


def save_state(state: Dict[str, torch.Tensor], path: str, sources: List[str]) -> None:
    """Write the averaged state dict and its YAML (SHA-256, the averaged files, their run id and units file)."""
    first = read_info(sidecar(sources[0])) or {}
    info = {"averaged": [os.path.abspath(s) for s in sources], "run_id": first.get("run_id"),
            "units": first.get("units")}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_checkpoint(path, state, info)


def main(argv: Optional[List[str]] = None) -> List[str]:
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.min_epoch > args.max_epoch:
        parser.error(f"--min_epoch {args.min_epoch} is above --max_epoch {args.max_epoch}: no epoch to average")
    if args.method == "greedy_soup" and not args.dev_data:
        parser.error("--method greedy_soup needs --dev_data")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    check_derived_output(args.dst_model, "--dst_model")
    candidates = select_checkpoints(args.src_path, args.num, val_best=args.val_best, min_epoch=args.min_epoch,
                                    max_epoch=args.max_epoch)
    if args.method == "average":
        logging.info("averaging %s", ", ".join(os.path.basename(c) for c in candidates))
        save_state(average_state_dicts(candidates, args.verify_checkpoint), args.dst_model, candidates)
        logging.info("wrote %s", args.dst_model)
        return candidates
    settings = {"config": args.config or os.path.join(args.src_path, "train.yaml"), "dev_data": args.dev_data,
                "data_type": args.data_type, "ref_text": args.ref_text, "metric": args.soup_metric,
                "decode_mode": args.decode_mode, "beam_size": args.beam_size, "ctc_weight": args.ctc_weight,
                "batch_size": args.batch_size, "wer_char": bool(args.wer_char), "verify": args.verify_checkpoint}
    evaluator = ParallelEvaluator(settings, args.num_workers)
    try:
        soup, metric, history = greedy_soup(candidates, evaluator, num_look=args.num_look)
    finally:
        evaluator.close()
    save_state(average_state_dicts(soup, args.verify_checkpoint), args.dst_model, soup)
    info = {"metric": args.soup_metric, "value": metric, "ingredients": soup, "candidates": candidates,
            "history": history}
    save_yaml(info, args.dst_model + ".soup.yaml")
    logging.info("greedy soup of %d/%d checkpoints (%s %.4f) -> %s", len(soup), len(candidates),
                 args.soup_metric, metric, args.dst_model)
    return soup


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.average_model")
