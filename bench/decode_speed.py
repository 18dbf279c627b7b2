"""Decoding time per model and mode, steady state: each model decodes a data list once per mode, after a warm-up.

    python -m bench.decode_speed --exp_dirs exp/tiny_zh/train_conformer_scaled_dot exp/tiny_zh/train_conformer_udps \
        --test_data data/tiny_zh/test/data.list --repeats 3 --threads 1

Times the five modes without an LM (ctc_greedy_search, ctc_prefix_beam_search, attention, attention_rescoring,
joint_ctc_attention) unless ``--modes`` names some; with ``--lm LM.bin`` (a word n-gram LM, as recognize takes it)
also the three LM modes (ctc_prefix_beam_search_lm, attention_rescoring_lm, joint_ctc_attention_lm) at
``--lm_weight`` / ``--word_score``, so RTF with and without the LM comes from one run (``--ctc_weight`` and
``--length_bonus`` as recognize's: not given, each mode its own default, 0 for rescoring and 0.3 for the joint
modes). ``--modes attention_rescoring joint_ctc_attention`` with ``--repeats 3 --threads 1 --clock cpu`` gives
joint / rescoring side by side (a line per model: ``ratio joint_ctc_attention / attention_rescoring``). Prints
one line per model and mode: seconds for ``--repeats`` passes over the list, each pass decoding in that mode alone
(the encoder included, so a search's own cost is its mode's time minus ``ctc_greedy_search``'s), and the
UDPS-to-scaled-dot style ratio of each mode when two models are given (docs/benchmarks.md). Passes alternate
between the models, so a machine that slows down slows both.

Two trained models stop their beam searches after different numbers of steps (their hypotheses differ), so the
``attention`` ratio mixes speed with what they decode. ``--step_prefixes 10 40 80`` also times one decoder step at
fixed prefix lengths, equal work for both: the first batch's encoder output (once per utterance, as the beam search
holds it) with ``--beam_size`` random prefixes of L tokens per utterance (no common prefix: every position of every
row is a column of its own in the utterance's pool, the search's worst case) and their cache,
``decoder.forward_one_step`` (median of ``--repeats`` x 5 calls, the models alternating).

``--neighbour`` times everything next to a process that competes for the cores, started before the timing and
stopped after it (with its children): ``busyloop`` (one Python loop, one core), ``matmul`` (torch 512x512 products on
one thread: compute and memory traffic), ``suite`` (the project's kernel and attention tests, ``pytest -x`` over
and over: the mixed load of a test run); ``none`` (the default) runs alone.

``--long_utterance_s 300`` also decodes one synthetic utterance of that length (the list's features one after
another, repeated) per model: ``attention`` with end-of-sentence suppressed, so the search runs its full
ceil(max_len_ratio * T') steps, the worst case of a model that never ends a sentence, and ``attention_rescoring``;
it prints both times (after the encoder, timed apart) and attention / attention_rescoring. With
``joint_ctc_attention`` in ``--modes`` it also times the joint search on it (as it ends by itself), with its tokens
and its seconds per encoder frame x token; several lengths (``--long_utterance_s 5 10 20 40 60``) give its
scaling.

``--context_file hotwords.txt`` (``--context_score``) times every mode that takes hotwords twice in each pass,
without and with the list, side by side (a line per model and mode: ``ratio MODE with hotwords / without``;
docs/hotwords.md).

``--compile_step`` runs each decoder's ``forward_one_step`` under ``torch.compile(dynamic=True)`` (inductor), to see
what a compiled step would give (the warm-up pass of each mode pays the compiles).
"""
import argparse
import time
from typing import List, Optional

import torch
from torch.utils.data import DataLoader

from wenet_udps.decode.data_list import eval_dataset, frame_shift_ms, load_experiment
from wenet_udps.decode.hotwords import context_graph
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.text import init_tokenizer
from wenet_udps.transformer.decode_options import DECODE_OPTIONS, add_decode_arguments, resolve_decode_options
from wenet_udps.transformer.modes import DECODING_METHODS, LM_METHODS, METHODS_WITHOUT_LM
from wenet_udps.transformer.search import attention_beam_search
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError, run_cli

from bench._harness import NEIGHBOURS, neighbour

BENCH_OPTIONS = ("lm", "lm_weight", "word_score", "ctc_weight", "length_bonus", "beam_size", "batch_size", "hotwords",
                 "context_score")
HOT = " with hotwords"  # the timings' key of a mode decoded with the list


def load(exp: str, checkpoint: str, test_data: str, batch_size: int):
    """(model, batches, seconds of audio in the batches, seconds per feature frame) of one experiment dir, and its
    tokenizer."""
    config, model = load_experiment(exp, checkpoint)
    tokenizer = init_tokenizer(config)
    dataset = eval_dataset(config, tokenizer, test_data, batch_size)
    batches = list(DataLoader(dataset, batch_size=None, num_workers=0))
    shift = frame_shift_ms(config.get("dataset_conf") or {}) / 1000.0
    return (model, batches, sum(sum(b["seconds"]) for b in batches), shift), tokenizer


def long_input(batches, frames: int):
    """One utterance of ``frames`` feature frames: the list's utterances' valid frames one after another, repeated
    -> feats (1, frames, F), lengths (1,)."""
    joined = torch.cat([b["feats"][i, :n] for b in batches for i, n in enumerate(b["feats_lengths"].tolist())])
    joined = joined.repeat(-(-frames // joined.size(0)), 1)[:frames]
    return joined.unsqueeze(0), torch.tensor([frames])


@torch.no_grad()
def long_utterance(runs, seconds: float, args, clock) -> None:
    """Print each model's seconds for ``attention`` (eos suppressed) and ``attention_rescoring`` on one utterance of
    ``seconds``, and their ratio (and ``joint_ctc_attention``'s, if timed); the encoder runs once, timed apart."""
    for exp, (model, batches, _, shift) in runs.items():
        feats, lens = long_input(batches, max(1, round(seconds / shift)))
        start = clock()
        enc, mask = model.encode(feats, lens, 0, -1, False)
        encoder_s = clock() - start
        start = clock()
        hyp = attention_beam_search(model.decoder, enc, mask, args.beam_size, model.sos, model.eos,
                                    suppress_eos=True)[0]
        attention_s = clock() - start
        start = clock()
        model.search(["attention_rescoring"], enc, mask, args.beam_size)
        rescoring_s = clock() - start
        print(f"{exp}: long utterance {seconds:g} s ({feats.size(1)} frames, T' {enc.size(1)}): "
              f"encoder {encoder_s:.2f} s, attention (eos suppressed, {len(hyp.tokens)} tokens) {attention_s:.2f} s, "
              f"attention_rescoring {rescoring_s:.2f} s, ratio attention / attention_rescoring "
              f"{attention_s / rescoring_s:.3f}")
        if "joint_ctc_attention" in args.modes:
            start = clock()
            joint = model.search(["joint_ctc_attention"], enc, mask, args.beam_size,
                                 **decode_kwargs(args, None, ["joint_ctc_attention"]))["joint_ctc_attention"][0]
            joint_s = clock() - start
            work = enc.size(1) * max(1, len(joint.tokens))
            print(f"{exp}: long utterance {seconds:g} s: joint_ctc_attention ({len(joint.tokens)} tokens) "
                  f"{joint_s:.2f} s, {1e6 * joint_s / work:.3f} us per frame x token, ratio joint_ctc_attention / "
                  f"attention_rescoring {joint_s / rescoring_s:.3f}")


def _time_sublayers(decoder, clock):
    """(totals, removers): each block's self_attn / src_attn / feed_forward seconds add into ``totals``; call each of
    the ``removers`` when done. A cached step calls ``self_attn.step``, not its forward, so that method is timed too."""
    totals = {"self_attn": 0.0, "src_attn": 0.0, "feed_forward": 0.0}
    started, removers = {}, []

    def timed(name, method):
        def call(*args, **kwargs):
            start = clock()
            out = method(*args, **kwargs)
            totals[name] += clock() - start
            return out
        return call

    for layer in getattr(decoder, "left_decoder", decoder).decoders:  # a bitransformer steps its left decoder
        for name in totals:
            module = getattr(layer, name)
            removers.append(module.register_forward_pre_hook(
                lambda m, inp: started.__setitem__(id(m), clock())).remove)
            removers.append(module.register_forward_hook(
                lambda m, inp, out, n=name: totals.__setitem__(n, totals[n] + clock() - started[id(m)])).remove)
            if name == "self_attn":  # step does not call forward: no time is counted twice
                module.step = timed(name, module.step)  # an instance attribute over the class's method
                removers.append(lambda m=module: delattr(m, "step"))
    return totals, removers


@torch.no_grad()
def step_times(runs, length: int, args, clock) -> None:
    """Print each model's median seconds for one ``forward_one_step`` with prefixes of ``length`` tokens."""
    calls = {}
    for exp, (model, batches, _, _) in runs.items():
        b = batches[0]
        memory, memory_mask = model.encoder(b["feats"], b["feats_lengths"])
        rows = memory.size(0) * args.beam_size
        gen = torch.Generator().manual_seed(length)
        tokens = torch.randint(1, model.vocab_size, (rows, length), generator=gen)
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool)).expand(rows, length, length)
        dec = model.decoder
        caches = dec.memory_caches(memory)
        # The cache of the first L - 1 positions, made by the decoder itself (so its layout is the decoder's).
        cache = None if length == 1 else dec.forward_one_step(memory, memory_mask, tokens[:, :-1],
                                                               causal[:, :-1, :-1], None, caches)[1]
        def call(d=dec, m=memory, mm=memory_mask, t=tokens, c=causal, k=cache, mc=caches):
            if k is not None:
                k.truncate(length - 1)  # the step writes its position into the cache: forget it for the next call
            return d.forward_one_step(m, mm, t, c, k, mc)
        calls[exp] = call
        calls[exp]()
    times = {exp: [] for exp in calls}
    parts = {exp: _time_sublayers(runs[exp][0].decoder, clock) for exp in calls}
    for rep in range(5 * args.repeats):
        for exp in (list(calls) if rep % 2 == 0 else list(reversed(calls))):
            start = clock()
            calls[exp]()
            times[exp].append(clock() - start)
    median = {exp: sorted(ts)[len(ts) // 2] for exp, ts in times.items()}
    for exp, t in median.items():
        totals, removers = parts[exp]
        for remove in removers:
            remove()
        shares = ", ".join(f"{name} {1e3 * sec / len(times[exp]):.2f}" for name, sec in totals.items())
        print(f"{exp}: {t * 1e3:.2f} ms per decoder step, prefix {length}, {rows} rows (median of {len(times[exp])}; "
              f"mean ms per step in all blocks: {shares})")
    if len(median) == 2:
        first, second = median
        print(f"ratio {second} / {first}, decoder step at prefix {length}: {median[second] / median[first]:.3f}")


def main(argv: Optional[List[str]] = None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exp_dirs", nargs="+", required=True, help="experiment dirs (train.yaml + checkpoint)")
    parser.add_argument("--checkpoint", default="avg_5.pt", help="checkpoint file name in each dir")
    parser.add_argument("--test_data", required=True, help="data.list to decode")
    parser.add_argument("--modes", nargs="*", default=None, choices=DECODING_METHODS,
                        help="decoding modes to time over the whole list (default: the four without an LM, and the "
                             "*_lm modes with --lm; none: only --step_prefixes / --long_utterance_s)")
    # recognize's flags, with its checks (decode_options.DECODE_OPTIONS).
    add_decode_arguments(parser, BENCH_OPTIONS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--step_prefixes", nargs="*", type=int, default=[], metavar="L",
                        help="also time one decoder step at these prefix lengths (equal work for both models)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: this process's CPU time, steadier on a machine shared with other jobs")
    parser.add_argument("--neighbour", choices=list(NEIGHBOURS), default="none",
                        help="a process competing for the cores while timing (see the description)")
    parser.add_argument("--long_utterance_s", type=float, nargs="*", default=[], metavar="SECONDS",
                        help="also decode one synthetic utterance of each of these lengths: attention with eos "
                             "suppressed, attention_rescoring, and joint_ctc_attention if in --modes")
    parser.add_argument("--compile_step", action="store_true",
                        help="run decoder.forward_one_step under torch.compile (see the description)")
    args = parser.parse_args(argv)
    if args.modes is None:
        args.modes = list(METHODS_WITHOUT_LM) + (list(LM_METHODS) if args.lm else [])
    try:  # recognize's one check: values, the modes that use them, the LM of the *_lm modes
        args.modes, options = resolve_decode_options(args.modes, {o: getattr(args, o) for o in BENCH_OPTIONS},
                                                     flags=True, empty_ok=True)
    except UserError as e:
        parser.error(str(e))
    vars(args).update((o, options[o]) for o in BENCH_OPTIONS)
    needs_lm = [m for m in args.modes if m in LM_METHODS]
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    runs, lm_searches, args.graphs = {}, {}, {}
    for exp in args.exp_dirs:
        runs[exp], tokenizer = load(exp, args.checkpoint, args.test_data, args.batch_size)
        if args.hotwords is not None:  # each model its own spelling of the list, built before any timing
            model = runs[exp][0]
            try:
                args.graphs[exp] = context_graph(args.hotwords, tokenizer, args.context_score,
                                                 [model.ctc.blank_id, model.sos, model.eos])
            except UserError as e:
                parser.error(str(e))
        if needs_lm:  # each model its own LM search (its units' lexicon), built before any timing
            config = LmSearchConfig(lm_weight=args.lm_weight, word_score=args.word_score, beam_size=args.beam_size)
            lm_searches[exp] = LmSearch(args.lm, tokenizer, runs[exp][0].ctc.blank_id, config)
            if "joint_ctc_attention_lm" in args.modes:  # (units that mark no word ends: refused here, not half-way)
                lm_searches[exp].word_scorer()
    if args.compile_step:
        for model, *_ in runs.values():
            model.decoder.forward_one_step = torch.compile(model.decoder.forward_one_step, dynamic=True)
    with neighbour(args.neighbour):
        seconds = timed_passes(runs, lm_searches, args, clock)
        for length in args.step_prefixes:
            step_times(runs, length, args, clock)
        for length in args.long_utterance_s:
            long_utterance(runs, length, args, clock)
    for mode in [m + variant for m in args.modes for variant in ("", HOT) if
                 (variant == "" or (args.graphs and m in DECODE_OPTIONS["hotwords"].modes))]:
        for exp, (_, batches, audio, _) in runs.items():
            rtf = seconds[exp, mode] / (args.repeats * audio)
            print(f"{exp}: {seconds[exp, mode]:.2f} s for {args.repeats} passes of {mode}, RTF {rtf:.4f} "
                  f"({len(batches)} batches, {args.threads} thread(s), {args.clock} clock, neighbour "
                  f"{args.neighbour})")
            if mode.endswith(HOT):
                plain = mode[:-len(HOT)]
                print(f"{exp}: ratio {plain} with hotwords / without: {seconds[exp, mode] / seconds[exp, plain]:.3f}")
        if len(runs) == 2:
            first, second = runs
            print(f"ratio {second} / {first}, {mode}: {seconds[second, mode] / seconds[first, mode]:.3f}")
    for joint, rescoring in (("joint_ctc_attention", "attention_rescoring"),
                             ("joint_ctc_attention_lm", "attention_rescoring_lm")):
        if joint in args.modes and rescoring in args.modes:  # the issue-67 target: joint at most 2x rescoring
            for exp in runs:
                print(f"{exp}: ratio {joint} / {rescoring}: {seconds[exp, joint] / seconds[exp, rescoring]:.3f}")


def decode_kwargs(args, lm_search, modes, context=None) -> dict:
    """``model.decode``'s options for these modes: the model's LM search (if any), and ``--ctc_weight`` and
    ``--length_bonus`` where a mode that uses them runs (decode refuses an option its modes would ignore), and the
    hotwords' graph ``context`` if given."""
    kwargs = {} if lm_search is None else {"lm_search": lm_search}
    if context is not None:
        kwargs["context"] = context
    for name in ("ctc_weight", "length_bonus"):
        if set(DECODE_OPTIONS[name].modes) & set(modes):
            kwargs[name] = getattr(args, name)
    return kwargs


@torch.no_grad()
def timed_passes(runs, lm_searches, args, clock):
    """{(exp, mode): seconds} of ``--repeats`` passes over the list per mode, after one warm-up batch;
    ``lm_searches`` {exp: LmSearch} for the *_lm modes."""
    graphs = getattr(args, "graphs", {})
    hot = [m for m in args.modes if graphs and m in DECODE_OPTIONS["hotwords"].modes]
    seconds = {(exp, mode): 0.0 for exp in runs for mode in list(args.modes) + [m + HOT for m in hot]}
    if args.modes:
        for exp, (model, batches, _, _) in runs.items():
            model.decode(list(args.modes), batches[0]["feats"], batches[0]["feats_lengths"], args.beam_size,
                         **decode_kwargs(args, lm_searches.get(exp), args.modes))
            if hot:  # the list's warm-up too: its graph fills its step memo and rows once per list, not per pass
                model.decode(hot, batches[0]["feats"], batches[0]["feats_lengths"], args.beam_size,
                             **decode_kwargs(args, lm_searches.get(exp), hot, graphs[exp]))
        for rep in range(args.repeats):
            for mode in args.modes:
                # The order flips every pass, so neither model always runs right after the other's cache traffic;
                # so does the order of a mode without and with the hotwords.
                for exp in (list(runs) if rep % 2 == 0 else list(reversed(runs))):
                    variants = [("", None)] + ([(HOT, graphs[exp])] if mode in hot else [])
                    for variant, context in (variants if rep % 2 == 0 else list(reversed(variants))):
                        model, batches = runs[exp][:2]
                        kwargs = decode_kwargs(args, lm_searches.get(exp), [mode], context)
                        start = clock()
                        for b in batches:
                            model.decode([mode], b["feats"], b["feats_lengths"], args.beam_size, **kwargs)
                        seconds[exp, mode + variant] += clock() - start
    return seconds

if __name__ == "__main__":
    run_cli(main, "decode_speed.py")  # a user error (a corrupt LM, another LM's words file) is one line, exit 2
