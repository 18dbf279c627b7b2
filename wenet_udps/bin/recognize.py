"""Decode a data list with several methods in one pass (the encoder runs once per batch).

    python -m wenet_udps.bin.recognize --config exp/x/train.yaml --checkpoint exp/x/avg_10.pt \
        --test_data data/test/data.list --result_dir exp/x/test \
        --modes attention ctc_greedy_search ctc_prefix_beam_search attention_rescoring \
        --beam_size 10 --ctc_weight 0.5 --reverse_weight 0.0 --batch_size 16

``--modes joint_ctc_attention`` is ESPnet's joint CTC/attention beam search (``--ctc_weight`` its λ, default 0.3;
``--length_bonus``). With ``--lm LM.arpa`` or ``--lm LM.bin`` (a word n-gram LM: ARPA, or a KenLM binary with its
words file ``LM.bin.words``; wenet_udps.lm; ``tools/install.sh --lm true``) the modes ``ctc_prefix_beam_search_lm``
and ``attention_rescoring_lm`` fuse it into the CTC prefix search, and ``joint_ctc_attention_lm`` into the joint
search (``--lm_weight``, ``--word_score``); their ``decode.info`` names the LM (path, order, n-gram counts, size,
SHA-256).

Writes ``<result_dir>/<mode>/text`` (``key hypothesis`` per line, tokens joined by the tokenizer's detokenize)
and ``decode.info`` (the checkpoint, the options, and the list and references decoded: what the hypotheses may be
scored against, wenet_udps.scoring.references), and prints the real-time factor: decoding time / audio seconds,
the audio seconds being feature frames times the frame shift. Score with
``tools/compute-wer.py --char=1|0 data/test/text <result_dir>/<mode>/text``.
"""
import argparse
import logging
from typing import Dict, List, Optional

from wenet_udps.config import load_config
from wenet_udps.decode.data_list import decode_dataset, decode_kwargs_from_args, model_from_checkpoint, \
    rtf_line, write_results
from wenet_udps.dataset.lists import read_raw_list
from wenet_udps.decode.hotwords import UtteranceContexts, context_graph
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.model_builder import ModelConfig
from wenet_udps.scoring.references import reference_record
from wenet_udps.text import init_tokenizer
from wenet_udps.train.checkpoint import add_verify_flag
from wenet_udps.train.resume_check import meaning_changes
from wenet_udps.transformer.decode_options import CONTEXT_MODES, CONTEXT_USED_BY, DECODE_OPTIONS, \
    add_decode_arguments, check_decode_options, idle_record, resolve_decode_options, value_for
from wenet_udps.transformer.modes import DECODING_METHODS, LM_METHODS
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli
from wenet_udps.utils.source_info import content_sha256, model_source

DECODE_FLAGS = list(DECODE_OPTIONS)


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file, help="the experiment's train.yaml")
    p.add_argument("--checkpoint", required=True, type=cli.existing_file,
                   help="model weights (epoch_N.pt, avg_N.pt, ...)")
    p.add_argument("--test_data", required=True, type=cli.existing_file, help="data.list (raw) or shard list")
    p.add_argument("--data_type", default="raw", choices=["raw", "shard"])
    p.add_argument("--result_dir", required=True, type=cli.output_dir)
    p.add_argument("--modes", nargs="+", required=True, choices=list(DECODING_METHODS))
    # Flags named as in WeNet's recognize.py mean what they mean there, with WeNet's defaults; their checks are the
    # Python API's (decode_options.DECODE_OPTIONS).
    add_decode_arguments(p, DECODE_FLAGS)
    p.add_argument("--context_list", type=cli.existing_file, default=None,
                   help="per-utterance hotwords: a line per utterance of --test_data, its key, then its phrases "
                        "after tabs (wenet_udps.scoring.context_lists); raw lists only; not with --context_file")
    p.add_argument("--context_unspellable", choices=["refuse", "drop"], default="refuse",
                   help="a hotword the model's units cannot spell: refuse the list, naming its line (default), or "
                        "drop it with a warning and its count in decode.info (a public list may hold a character "
                        "the training transcripts lack)")
    p.add_argument("--num_workers", type=cli.workers_int, default=0)
    p.add_argument("--device", default="cpu", type=cli.device, help="cpu | cuda")
    p.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="change a train.yaml value (e.g. dataset_conf.fbank_conf.dither)")
    add_verify_flag(p)
    return p


def main(argv: Optional[List[str]] = None) -> Dict[str, float]:
    parser = get_parser()
    args = parser.parse_args(argv)
    given = {name: getattr(args, name) for name in DECODE_FLAGS}
    if args.context_list is not None:  # --context_score and --context_weight weigh its phrases as a file's
        if args.hotwords is not None:
            parser.error("--context_list and --context_file: give one (a list per utterance, or one for all)")
        if not set(args.modes) & set(CONTEXT_MODES):
            parser.error(f"--context_list applies to {CONTEXT_USED_BY} only, which --modes {' '.join(args.modes)} "
                         f"does not run; add ctc_prefix_beam_search to --modes or leave the option out")
        if args.data_type != "raw":
            parser.error("--context_list needs --data_type raw (a shard list's keys are inside its tars)")
        given["hotwords"] = args.context_list
    if args.context_unspellable != "refuse" and args.hotwords is None and args.context_list is None:
        parser.error(f"--context_unspellable {args.context_unspellable} decides on the phrases of a list: give "
                     f"--context_file or --context_list too, or leave it out")
    asked = [name for name, value in given.items() if value is not None]
    try:  # the one check of the values, the modes that use them and the LM the *_lm modes need
        args.modes, options = resolve_decode_options(args.modes, given, flags=True)
    except UserError as e:
        parser.error(str(e))
    vars(args).update(options)
    if args.context_list is not None:
        args.hotwords = None
    if args.simulate_streaming and args.batch_size != 1:
        parser.error(f"--simulate_streaming decodes one utterance at a time: use --batch_size 1, not "
                     f"{args.batch_size}")
    config = load_config(args.config, args.override)
    changed = meaning_changes(load_config(args.config), config) if args.override else []
    if changed:  # the same rule as a resume's: the weights were trained under the conf's values
        parser.error(f"--override changes what {args.checkpoint}'s trained parameters mean: {'; '.join(changed)}; "
                     f"decode with the values it trained with ({args.config})")
    decoder = config.get("decoder", ModelConfig.decoder)
    if args.reverse_weight > 0 and decoder != "bitransformer":
        parser.error(f"--reverse_weight {args.reverse_weight:g} needs a bitransformer decoder; {args.config} has "
                     f"{decoder!r} (leave --reverse_weight at 0)")
    needs_lm = [m for m in args.modes if m in LM_METHODS]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    model = model_from_checkpoint(config, args.checkpoint, args.device, verify=args.verify_checkpoint)
    try:  # once, before any decoding: an option this model (its conf) would ignore is a usage error
        chunk = check_decode_options(model.encoder, args.modes, batch_size=args.batch_size,
                                     **decode_kwargs_from_args(args))
    except UserError as e:
        parser.error(f"{e} ({args.config})")
    # decode.info records what ran: the model, the overrides of its conf, and the options as applied.
    source = {**model_source(args.checkpoint, args.config), "overrides": " ".join(args.override) or "none",
              "modes": " ".join(args.modes), "beam_size": args.beam_size,
              **decode_kwargs_from_args(args), "decoding_chunk_size": chunk}
    if "attention" in args.modes and args.max_len_ratio is None:
        source["max_len_ratio"] = 1.0
    if args.hotwords is None and args.context_list is None:  # (recorded with the list below)
        source.pop("context_weight")
    source = {key: str(value) for key, value in source.items()}
    tokenizer = init_tokenizer(config)
    kwargs = decode_kwargs_from_args(args)
    dropped = None if args.context_unspellable == "refuse" else []
    if args.hotwords is not None:  # refused here, naming the line, before any decoding
        try:
            kwargs["context"] = context_graph(args.hotwords, tokenizer, args.context_score,
                                              [model.ctc.blank_id, model.sos, model.eos], dropped)
        except UserError as e:
            parser.error(str(e))
        source.update({"context_file": str(args.hotwords), "context_sha256": content_sha256(args.hotwords),
                       "context_phrases": str(kwargs["context"].phrases), "context_score": f"{args.context_score:g}"})
    contexts = None
    if args.context_list is not None:  # every phrase spelled and every key matched before any decoding
        try:
            keys = [item["key"] for item in read_raw_list(args.test_data)]
            contexts = UtteranceContexts(args.context_list, tokenizer, args.context_score,
                                         [model.ctc.blank_id, model.sos, model.eos], keys, args.test_data,
                                         dropped)
        except UserError as e:
            parser.error(str(e))
        source.update({"context_list": str(args.context_list), "context_sha256": content_sha256(args.context_list),
                       "context_phrases": str(contexts.phrases), "context_score": f"{args.context_score:g}"})
    if dropped is not None and (args.hotwords or args.context_list):
        source["context_dropped"] = str(len(dropped))
        if dropped:
            logging.warning("%d hotword phrase(s) dropped (--context_unspellable drop), the units spell none of "
                            "them; the first: %s", len(dropped), dropped[0])
    lm_source = None
    if needs_lm:
        lm_search = LmSearch(args.lm, tokenizer, model.ctc.blank_id,
                             LmSearchConfig(lm_weight=args.lm_weight, word_score=args.word_score,
                                            beam_size=args.beam_size))
        logging.info("LM %s; lm_weight %g, word_score %g", lm_search.info.describe(), args.lm_weight,
                     args.word_score)
        if "joint_ctc_attention_lm" in args.modes:  # its word rule, before any decoding (units without word ends)
            try:
                lm_search.word_scorer()
            except UserError as e:
                parser.error(f"{e} ({args.config})")
        kwargs["lm_search"] = lm_search
        lm_source = {**lm_search.info.source(), "lm_weight": f"{args.lm_weight:g}",
                     "word_score": f"{args.word_score:g}"}
    results, stats = decode_dataset(model, tokenizer, config, args.test_data, modes=args.modes,
                                    data_type=args.data_type, batch_size=args.batch_size,
                                    beam_size=args.beam_size, device=args.device,
                                    decode_kwargs=kwargs, num_workers=args.num_workers, contexts=contexts)
    # ... and what its hypotheses must be scored against (scoring.references: compute-wer, collect_results)
    source.update(reference_record(args.test_data, stats["references"], stats["skipped"]))
    # ctc_weight as each mode applied it (the rescoring and joint modes have their own defaults)
    # ... and None for what a mode did not use of the options given (its record is its own, issue 82 F3)
    per_mode = {m: {"ctc_weight": str(value_for("ctc_weight", args.ctc_weight, m)), **idle_record(m, asked, source)}
                for m in args.modes}
    for path in write_results(results, args.result_dir, source, lm_source, per_mode, complete=True):
        logging.info("wrote %s", path)
    print(rtf_line(stats, args.modes, args.device), flush=True)
    return stats


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.recognize")
