"""Decode a data set with sherpa-onnx (the files of ``export --format sherpa-onnx``) and time it.

    python -m wenet_udps.bin.sherpa_decode --config exp/x/train.yaml --export_dir exp/x/sherpa \
        --wav_scp data/test/wav.scp --result_dir exp/x/test/sherpa_fp32 [--int8] [--streaming --chunk_size 16 \
        --left_chunks 4] [--num_threads 1]

A ``segments`` file beside the wav.scp is cut as in training and decoding (``kaldi_data.scp_utterances``); the
export's tokens.txt must be the config's units file (``sherpa_runtime.check_tokens``), and what the sherpa path
reads of --config (``sherpa_runtime.frontend``) that of the config the export was made from (its export.info).
Writes ``<result_dir>/text`` (key transcript, tokens joined as in our own results), ``<result_dir>/rtf`` and
``<result_dir>/decode.info`` (the export's checkpoint, wenet_udps.utils.source_info, --config, and the
references: the ``text`` beside the wav.scp, wenet_udps.scoring.references), and prints the RTF (decoding seconds /
audio seconds as loaded, before resampling; one stream at a time). Audio is read (the one reader:
``dataset_conf.channel`` of --config for multi-channel audio, a cut file skipped and counted) and resampled as in
training; features are training's fbank (wenet_udps.export.sherpa_runtime). Score the text with
tools/compute-wer.py, as stage 5's.
"""
import argparse
import json
import logging
import os
import time
from typing import Dict, List, Optional

from wenet_udps.config import load_config
from wenet_udps.dataset.audio import BadAudioError, duration_seconds, load_audio, resample
from wenet_udps.dataset.kaldi_data import scp_utterances
from wenet_udps.export import sherpa_runtime as rt
from wenet_udps.scoring.references import reference_record
from wenet_udps.scoring.tokens import read_text
from wenet_udps.transformer.decode_options import CHUNK_MAX, CHUNK_SIZE, LEFT_CHUNKS_WHY
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import UserError, run_cli
from wenet_udps.utils.counts import check_pass, counts_line, max_bad_fraction
from wenet_udps.utils.kaldi_files import ListError, read_table
from wenet_udps.scoring.record import check_written
from wenet_udps.utils.source_info import file_sha256, read_record, stale_reason, write_source


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, type=cli.existing_file, help="the experiment's train.yaml")
    p.add_argument("--export_dir", required=True, type=cli.existing_dir,
                   help="output_dir of export --format sherpa-onnx")
    p.add_argument("--wav_scp", required=True, type=cli.existing_file,
                   help="Kaldi wav.scp: key and audio file per line")
    p.add_argument("--result_dir", required=True, type=cli.output_dir)
    p.add_argument("--int8", action="store_true", help="the int8 model (model[-streaming].int8.onnx)")
    p.add_argument("--streaming", action="store_true", help="OnlineRecognizer on model-streaming[.int8].onnx")
    p.add_argument("--chunk_size", type=CHUNK_SIZE, default=None,
                   help="--streaming: the export's chunk size (default: the one the export recorded)")
    p.add_argument("--left_chunks", type=cli.int_range(1, CHUNK_MAX, why=LEFT_CHUNKS_WHY), default=None,
                   help="--streaming: the export's left chunks (default: the ones the export recorded)")
    p.add_argument("--num_threads", type=cli.threads_int, default=1)
    return p


def check_export(parser: cli.ArgumentParser, args: argparse.Namespace, config: Dict) -> None:
    """Refuse, before anything is decoded, an export that the options or the config do not fit: sherpa-onnx
    would stop part-way with an IndexError or an onnxruntime error (leaving an empty ``text``)."""
    name = f"model{'-streaming' if args.streaming else ''}{'.int8' if args.int8 else ''}.onnx"
    path = os.path.join(args.export_dir, name)
    if not os.path.isfile(path):
        why = (": the export is not streaming (its config trains no chunks); drop --streaming"
               if args.streaming and os.path.isfile(os.path.join(args.export_dir, "model.onnx")) else
               "; export with python -m wenet_udps.bin.export --format sherpa-onnx")
        parser.error(f"--export_dir {args.export_dir} has no {name}{why}")
    # The metadata (vocab_size, chunk_size, ...) is written into the fp32 graph; int8 is quantized from it.
    fp32 = os.path.join(args.export_dir, name.replace(".int8", ""))
    try:  # a cut model.onnx: one line naming it, not onnxruntime's InvalidProtobuf traceback
        session = rt.onnx_session(fp32 if os.path.isfile(fp32) else path)
    except UserError as e:
        parser.error(str(e))
    meta = session.get_modelmeta().custom_metadata_map
    try:
        dim = rt.feature_kwargs(config)["feature_dim"]
    except ValueError as e:
        parser.error(f"--config {args.config}: {e}")
    want = session.get_inputs()[0].shape[-1]
    if dim != want:
        parser.error(f"--config {args.config} makes {dim}-dim features, but {path} takes {want}: pass the "
                     f"train.yaml the model was exported from")
    tokens = os.path.join(args.export_dir, "tokens.txt")
    try:  # the one reader of Kaldi-style files (BOM, encoding, duplicate tokens)
        rows = read_table(tokens, what="token id", key_name="token", fields=2)
    except ListError as e:
        parser.error(str(e))
    ids = set()
    for token, (token_id, n) in rows.items():
        if not token_id.isdigit():
            parser.error(f"{tokens}:{n}: expected 'token id', got {f'{token} {token_id}'!r}")
        ids.add(int(token_id))
    vocab = int(meta.get("vocab_size", 0))
    if ids != set(range(vocab)):
        parser.error(f"{tokens} has ids for {len(ids)} tokens, but {path} outputs {vocab} (its vocab_size): the "
                     f"file is truncated or of another model; export again")
    for key in ("chunk_size", "left_chunks"):
        if args.streaming and getattr(args, key) is None:  # the export's own (its caches have that size)
            setattr(args, key, int(meta.get(key, {"chunk_size": 16, "left_chunks": 4}[key])))
        if args.streaming and key in meta and int(meta[key]) != getattr(args, key):
            parser.error(f"--{key} {getattr(args, key)}: {path} was exported with {key} {meta[key]} (its caches "
                         f"have that fixed size); pass --chunk_size {meta['chunk_size']} --left_chunks "
                         f"{meta['left_chunks']}")


def check_config(parser: cli.ArgumentParser, args: argparse.Namespace, config: Dict) -> None:
    """Refuse a --config whose frontend (``sherpa_runtime.frontend``: the features, rate, channel, units and CMVN
    it reads) is not that of the config the export was made from, as export.info records it (``frontend``; the
    ``config`` file itself for an export made before that): the model would be fed other input than it was made
    for, and decode.info would name a config that was not used."""
    info = os.path.join(args.export_dir, "export.info")
    record = read_record(info)
    recorded = record.get("config")
    if "frontend" in record:
        try:
            exported = json.loads(record["frontend"])
        except ValueError:
            exported = None
        if not isinstance(exported, dict):
            parser.error(f"{info}: its frontend is not the JSON object an export writes; export again")
    elif not recorded:
        return   # no export.info (export_problem refuses it), or one that records no config
    else:
        try:
            exported = rt.frontend_record(load_config(recorded))
        except (OSError, UserError) as e:   # moved or removed since: the checks of the files above still hold
            logging.warning("--config %s is not compared with the config %s the export was made from: %s",
                            args.config, recorded, e)
            return
    changed = rt.frontend_changes(exported, config)
    if changed:
        same = recorded and os.path.isfile(recorded) and os.path.samefile(recorded, args.config)
        what = "has changed since" if same else f"is not the config {recorded} that"
        parser.error(f"--config {args.config} {what} {args.export_dir} was exported from (as {info} records it): "
                     f"they differ in {', '.join(changed)}, so the model would get other input than it was "
                     f"exported for; export again with this config, or pass the one exported")


def main(argv: Optional[List[str]] = None) -> Dict[str, float]:
    parser = get_parser()
    args = parser.parse_args(argv)
    given = [f"--{key}" for key in ("chunk_size", "left_chunks") if getattr(args, key) is not None]
    if given and not args.streaming:
        parser.error(f"{' and '.join(given)} set the streaming recognizer's chunks; without --streaming the whole "
                     f"utterance is decoded at once and they would do nothing (add --streaming or leave them out)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    config = load_config(args.config)
    check_export(parser, args, config)
    check_config(parser, args, config)
    rate = rt.feature_kwargs(config)["sampling_rate"]
    channel = rt.frontend(config)["dataset_conf.channel"]  # the channel policy of training and recognize
    try:  # a set cut short or mixed (wenet_udps.export.sherpa moves a whole set in, export.info last)
        if args.streaming:
            rec = rt.online_recognizer(args.export_dir, config, chunk_size=args.chunk_size,
                                       left_chunks=args.left_chunks, int8=args.int8, num_threads=args.num_threads)
            tail = rt.tail_seconds(args.export_dir, args.chunk_size)
        else:
            rec = rt.offline_recognizer(args.export_dir, config, int8=args.int8, num_threads=args.num_threads)
    except rt.ExportError as e:   # its message starts with the folder
        parser.error(f"--export_dir {e}")
    try:
        rows = scp_utterances(args.wav_scp)
    except ValueError as e:  # the readers' messages name the file and line
        raise UserError(str(e)) from None
    os.makedirs(args.result_dir, exist_ok=True)
    # The export's source (bin.export's export.info) is this result's: stale once that checkpoint is replaced.
    source = read_record(os.path.join(args.export_dir, "export.info"))   # found there after a move
    for key in ("files", "frontend"):   # the export's own file list and frontend (checked above), not the result's
        source.pop(key, None)
    if source:  # an export made before export.info existed: no model to record
        stale = stale_reason(source)
        if stale:  # still a model (a deployed copy may outlive its checkpoint), but not the experiment's any more
            logging.warning("%s was exported from another model than the experiment's now: %s; results tables "
                            "leave these results out (export again: run.sh --stage 6)", args.export_dir, stale)
    audio = seconds = 0.0
    skipped: Dict[str, int] = {}
    lines = []
    decoded: List[str] = []
    for key, path, start, end in rows:
        try:
            wav, sr = load_audio(path, start, end, name=key, channel=channel)
        except BadAudioError as e:
            logging.warning("skipped: %s", e)
            skipped[e.reason] = skipped.get(e.reason, 0) + 1
            continue
        audio += duration_seconds(wav, sr)   # as loaded, before resampling: the one definition
        wav = resample(wav, sr, rate)
        t0 = time.perf_counter()
        if args.streaming:
            text = rt.transcribe_online(rec, wav, rate, tail)
        else:
            text = rt.transcribe_offline(rec, [wav], rate)[0]
        seconds += time.perf_counter() - t0
        lines.append(f"{key} {text}\n")
        decoded.append(key)
    # the one rule of a pass (wenet_udps.utils.counts): nothing decoded, or too much unusable, is exit 1
    logging.info("%s", check_pass(f"decode {args.wav_scp}: {counts_line(len(lines), skipped)}", used=len(lines),
                                  total=len(rows), unusable=sum(skipped.values()),
                                  max_bad_fraction=max_bad_fraction(config)))
    write_text(os.path.join(args.result_dir, "text"), "".join(lines))
    # The references are the data dir's: the text beside the wav.scp (scoring.references checks them when scored).
    text = os.path.join(os.path.dirname(args.wav_scp), "text")
    if os.path.isfile(text):
        refs = read_text(text)
        source = {**source, **reference_record(args.wav_scp, {k: refs.get(k, "") for k in decoded},
                                               sum(skipped.values()))}
    if source:  # its variant's name: tools/collect_results checks it against the folder (results.origin)
        source["mode"] = rt.result_name(streaming=args.streaming, int8=args.int8)
        source["config"] = os.path.abspath(args.config)   # the config decoded with (its frontend the export's)
        source["text_sha256"] = file_sha256(os.path.join(args.result_dir, "text"))   # scoring.bound checks it
        check_written(source, os.path.join(args.result_dir, "decode.info"))   # what the readers require
        write_source(os.path.join(args.result_dir, "decode.info"), source)
    stats = {"decode_seconds": seconds, "audio_seconds": audio, "rtf": seconds / audio if audio else float("nan"),
             "skipped": sum(skipped.values())}
    write_text(os.path.join(args.result_dir, "rtf"),
               f"RTF {stats['rtf']:.4f} ({seconds:.2f} s for {audio:.2f} s of audio, {args.num_threads} thread(s))\n")
    print(f"RTF {stats['rtf']:.4f} ({seconds:.2f} s for {audio:.2f} s of audio); {stats['skipped']} skipped")
    return stats


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.sherpa_decode")
