"""Export a trained model to TorchScript and ONNX and check the exports against eager PyTorch.

    python -m wenet_udps.bin.export --config exp/x/train.yaml --checkpoint exp/x/avg_10.pt --output_dir exp/x/export \
        [--chunk_size 16 --left_chunks -1] [--test_data data/test/data.list --num_utts 8]

Writes encoder.{pt,onnx} (whole utterance: speech, speech_lengths -> encoder_out, encoder_out_lens,
ctc_log_probs), encoder_chunk.{pt,onnx} (streaming step: chunk, offset, att_cache, cnn_cache, att_mask -> output,
ctc_log_probs, new_att_cache, new_cnn_cache) and decoder.{pt,onnx} (rescoring: hyps with sos, hyps_lens,
encoder_out -> l2r/r2l log-probs); see wenet_udps/export/wrappers.py. Then prints the max abs difference of every
exported part against eager (fails above --tolerance) and checks that onnxruntime ctc_greedy_search and
attention_rescoring give eager's transcripts on the first --num_utts utterances of --test_data (random features
when no list is given). Works for scaled-dot and UDPS attention alike (the graphs are traced).

``--format sherpa-onnx`` writes instead what sherpa-onnx's WeNet CTC runtime loads: model.onnx, model.int8.onnx,
tokens.txt and, for streaming confs, model-streaming.onnx / model-streaming.int8.onnx (``--chunk_size`` and
``--left_chunks`` > 0 fix their cache size; decode with the same values); see wenet_udps/export/sherpa.py. The
parity check then compares the fp32 graphs' CTC log-probs with eager PyTorch.
"""
import argparse
import json
import logging
from typing import Dict, List, Optional

import torch

from wenet_udps.export.exporter import check_parity, export_model, summarize
from wenet_udps.transformer.decode_options import CHUNK_SIZE, DECODE_OPTIONS, LEFT_CHUNKS, chunk_size_for
from wenet_udps.text import init_tokenizer
from wenet_udps.config import load_config
from wenet_udps.dataset.dataset import DataError
from wenet_udps.train.checkpoint import add_verify_flag
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli
from wenet_udps.utils.source_info import model_source

# The chunk of the streaming graphs of a dynamic-chunk model (and of encoder_chunk for a non-streaming one).
DEFAULT_CHUNK = 16


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file, help="the experiment's train.yaml")
    p.add_argument("--checkpoint", required=True, type=cli.existing_file)
    p.add_argument("--output_dir", required=True, type=cli.output_dir)
    p.add_argument("--format", default="wenet", choices=["wenet", "sherpa-onnx"],
                   help="wenet: encoder/decoder TorchScript + ONNX; sherpa-onnx: sherpa-onnx's WeNet CTC models")
    p.add_argument("--chunk_size", type=CHUNK_SIZE, default=None,
                   help="output frames per streaming chunk (default the model's static_chunk_size, else 16); "
                        "refused where the model cannot decode at it (a non-streaming or other static chunk)")
    p.add_argument("--left_chunks", type=LEFT_CHUNKS, default=None,
                   help="chunks of left context kept (default -1: all; sherpa-onnx: 4, must be > 0)")
    p.add_argument("--reverse_weight", type=DECODE_OPTIONS["reverse_weight"].check, default=0.0,
                   help="export the r2l decoder output (> 0)")
    p.add_argument("--test_data", default=None, type=cli.existing_file,
                   help="data list whose first utterances drive the parity check")
    p.add_argument("--data_type", default="raw", choices=["raw", "shard"], help="--test_data's format")
    p.add_argument("--num_utts", type=cli.positive_int, default=8)
    # The parity check's attention_rescoring: recognize's checks (decode_options.DECODE_OPTIONS), its own defaults.
    p.add_argument("--beam_size", type=DECODE_OPTIONS["beam_size"].check, default=4)
    p.add_argument("--ctc_weight", type=DECODE_OPTIONS["ctc_weight"].check, default=0.5)
    p.add_argument("--tolerance", type=cli.float_range(0.0, low_open=True), default=1e-4,
                   help="max abs diff allowed (float32)")
    add_verify_flag(p)
    return p


def parity_batch(config: Dict, test_data: Optional[str], num_utts: int, data_type: str = "raw"):
    """(feats, lens) of the list's first utterances (decoding features), or random features."""
    if test_data:
        from wenet_udps.dataset.dataset import eval_dataset_conf
        from wenet_udps.dataset import init_dataset
        conf = eval_dataset_conf(config.get("dataset_conf") or {}, num_utts)
        from wenet_udps.dataset.dataset import DataTally
        dataset = init_dataset(data_type, test_data, init_tokenizer(config), conf, partition=False)
        batch = next(DataTally().batches(dataset), None)
        if batch is None:
            raise DataError(f"{test_data}: no usable utterance for the parity check")
        return batch["feats"], batch["feats_lengths"].to(torch.int64)
    g = torch.Generator().manual_seed(0)
    lens = torch.tensor([120, 97, 64][:max(1, num_utts)], dtype=torch.int64)
    return torch.randn(len(lens), int(lens.max()), config["input_dim"], generator=g), lens


def main(argv: Optional[List[str]] = None) -> Dict[str, float]:
    parser = get_parser()
    args = parser.parse_args(argv)
    if args.format == "sherpa-onnx" and args.left_chunks is not None and args.left_chunks <= 0:
        parser.error(f"--format sherpa-onnx: --left_chunks must be > 0 (it fixes the cache size), got "
                     f"{args.left_chunks}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    from wenet_udps.decode.data_list import model_from_checkpoint
    config = load_config(args.config)
    model = model_from_checkpoint(config, args.checkpoint, verify=args.verify_checkpoint)
    try:  # the recognizer's check: a chunk size the model would not decode at is refused, not exported
        chunk = chunk_size_for(model.encoder, args.chunk_size, "--chunk_size")
    except UserError as e:
        parser.error(f"{e} ({args.config})")
    if args.reverse_weight > 0 and not hasattr(model.decoder, "right_decoder"):
        parser.error(f"--reverse_weight {args.reverse_weight:g} exports the right-to-left decoder's output, which "
                     f"this model has not (decoder {config.get('decoder')!r}, not bitransformer); leave it out "
                     f"({args.config})")
    if chunk < 0 and args.left_chunks is not None:
        parser.error(f"--left_chunks {args.left_chunks}: this model was trained without chunks, so it has no "
                     f"streaming left context to set; leave --left_chunks out ({args.config})")
    args.chunk_size = chunk if chunk > 0 else DEFAULT_CHUNK
    if args.format == "sherpa-onnx":
        return export_sherpa_onnx(args, config, model)
    args.left_chunks = -1 if args.left_chunks is None else args.left_chunks
    export_model(model, config["input_dim"], args.output_dir, chunk_size=args.chunk_size,
                 left_chunks=args.left_chunks, reverse_weight=args.reverse_weight)
    feats, lens = parity_batch(config, args.test_data, args.num_utts, args.data_type)
    report = check_parity(model, args.output_dir, feats, lens, chunk_size=args.chunk_size,
                          left_chunks=args.left_chunks, beam_size=args.beam_size, ctc_weight=args.ctc_weight,
                          reverse_weight=args.reverse_weight)
    return _print_parity(report, feats.size(0), args.tolerance)


def _print_parity(report: Dict[str, float], num_utts: int, tolerance: float) -> Dict[str, float]:
    """Print the parity lines; exit 1 when a difference is above the tolerance."""
    ok, lines = summarize(report, tolerance)
    for line in lines:
        print(line)
    print(f"parity {'OK' if ok else 'FAILED'} on {num_utts} utterances (tolerance {tolerance:g})")
    if not ok:
        raise SystemExit(1)
    return report


def export_sherpa_onnx(args: argparse.Namespace, config: Dict, model: torch.nn.Module) -> Dict[str, float]:
    from wenet_udps.export.sherpa import export_sherpa, sherpa_parity
    from wenet_udps.export.sherpa_runtime import frontend_record
    left_chunks = 4 if args.left_chunks is None else args.left_chunks
    feats, lens = parity_batch(config, args.test_data, args.num_utts, args.data_type)
    report: Dict[str, float] = {}

    def parity(folder: str) -> None:   # on the new set before it is moved in: a failure leaves the old export
        report.update(_print_parity(sherpa_parity(model, folder, feats, lens, args.chunk_size, left_chunks),
                                    feats.size(0), args.tolerance))

    paths = export_sherpa(model, config["input_dim"], config["tokenizer_conf"]["symbol_table_path"], args.output_dir,
                          chunk_size=args.chunk_size, left_chunks=left_chunks,
                          source={**model_source(args.checkpoint, args.config),
                                  "frontend": json.dumps(frontend_record(config))}, check=parity)
    print("wrote " + ", ".join(sorted(paths)))
    return report


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.export")
