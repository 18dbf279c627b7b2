#!/usr/bin/env python3
"""Collect decoding results of all experiments into one Markdown table and plots.

Usage: collect_results.py --exp_dir exp [--out exp/RESULTS.md] [--plots_dir exp/plots] [--metric CER|WER]
                          [--peer_results recipes/<corpus>/peer_results.tsv]

Reads ``EXP/<name>/<set>/<mode>/wer`` (compute-wer output: its ``Overall -> X %`` line) for every decoded set (dev
and test alike), and ``EXP/<name>/train.yaml``: the model label is the encoder/decoder type, the attention label
what the built model really has (``scaled-dot``, ``udps`` or ``udps (sites)``, wenet_udps.bin.describe). A ``wer``
must be the score of the ``text`` beside it and of the references it names (where they still exist), by the SHA-256
it records (wenet_udps.scoring.bound), with ``N`` every token of those references (a ``wer`` rescored by hand with
``--ig`` is refused), scored as stage 5 scores (``--case``/``--punctuation``: the recipe's, which run.sh passes)
against the references its decode recorded and ``--data_dir``'s (wenet_udps.scoring.recorded); its ``decode.info``
must record the folder's mode, experiment, set and (an LM column's tag) LM (wenet_udps.results.origin). One that is
not, an empty or partial ``wer``, a decode never scored, and a result no ``decode.info`` records (made by hand:
shown, marked, only with ``--allow_unrecorded``) are errors, each named, and no RESULTS.md is written. The
checkpoint a result came from is read from a ``decode.info`` file (a ``checkpoint: PATH`` line) in the mode, set or
experiment folder, and found by its SHA-256 beside the results when the experiment root has moved; a result whose
checkpoint has been replaced or removed since (wenet_udps.utils.source_info) is left out, with a line on stderr.
Table: one row per experiment, set and checkpoint (wenet_udps.results.table), one column per decoding mode, then an
RTF column per mode whose folder has an ``rtf`` file (stage 7's sherpa-onnx decodes: one stream, one thread). Models
of a site ablation (run.sh --udps_sites) get their own table with the paired test of every site set against
all-scaled-dot (wenet_udps.results.sites). ``--peer_results``: other toolkits' published results on the same split,
in a table of their own with their sources (wenet_udps.results.peers; a malformed line is a usage error naming it).
A data dir made from a partial corpus copy (its sets' ``partial_corpus``) is said under the title. With run.sh
--hotwords true, a section of the biasing test sets, each decoded without and with each list
(wenet_udps.results.biasing). Plots (PNG): losses (per step and per epoch), ``--metric`` bars per set, and the
learned UDPS α/β (wenet_udps/results/plots.py).
"""
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from wenet_udps.transformer.site_families import SITES
from wenet_udps.config import read_conf
from wenet_udps.results import plots as results_plots
from wenet_udps.results.biasing import collect_biasing, section as biasing_section
from wenet_udps.results.preflight import gpu_check_lines
from wenet_udps.corpora.common import partial_notes
from wenet_udps.results.peers import partial_note, read_peer_results, section as peer_section
from wenet_udps.results import speakers
from wenet_udps.results import sites as site_ablation
from wenet_udps.results.table import Experiment, bar_rows, lm_lines, lm_line, markdown_table, modes_and_sets, \
    shown_path
from wenet_udps.results.seeds import comparisons, families_table, group_by_seed, seeds_table
from wenet_udps.transformer.attention import FAMILIES, scale_symbols
from wenet_udps.transformer.decode_options import DECODE_OPTIONS
from wenet_udps.transformer.modes import DECODING_METHODS, LM_METHODS
from wenet_udps.export.sherpa_runtime import RESULT_NAMES
from wenet_udps.results.origin import origin_problem
from wenet_udps.scoring.bound import Score, ScoreError, options_problem
from wenet_udps.scoring.recorded import UNRECORDED, bound_score, read_decode_info, result_dirs, stage5_options
from wenet_udps.scoring.references import ReferencesError
from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import one_line
from wenet_udps.utils.provenance import provenance, provenance_markdown
from wenet_udps.utils.source_info import stale_reason

# The decoding options a decode.info records that must agree within one mode's column (scoring.bound
# .options_problem): all that change the text but the batch size, and the LM and hotword files (named per row),
# and the LM's SHA-256 (one column, one LM: the tag of ``<mode>_<lm_tag>`` names it, results.origin).
COMPARED_OPTIONS = tuple(k for k in DECODE_OPTIONS if k not in ("batch_size", "lm", "hotwords")) + ("lm_sha256",)
RTF_RE = re.compile(r"^RTF ([0-9.]+|inf|nan)\b")   # wenet_udps.bin.sherpa_decode's <result_dir>/rtf


def checkpoint_attention(checkpoint: str) -> Optional[str]:
    """The attention label of the weights in ``checkpoint`` (their parameter names), None when unreadable."""
    from wenet_udps.model_info import attention_label, checkpoint_site_types, display_label
    from wenet_udps.train.checkpoint import load_checkpoint
    try:  # collect() has checked the file against the SHA-256 its decode.info recorded
        names = load_checkpoint(checkpoint, verify=False)["model"].keys()
    except (OSError, ValueError) as e:
        print(f"collect_results.py: {checkpoint}: attention labelled from train.yaml ({one_line(e)})",
              file=sys.stderr)
        return None
    types = checkpoint_site_types(names)
    return display_label(attention_label(types)) if any(types.values()) else None


def describe_model(train_yaml: Path, checkpoint: Optional[str] = None) -> Tuple[str, str]:
    """(model, attention) of an experiment: the encoder (+decoder) type of its train.yaml, and the attention label
    of ``checkpoint``'s weights (the model decoded), or where it cannot be read, of the model train.yaml builds."""
    from wenet_udps.model_info import attention_label, display_label, site_types
    truth = checkpoint_attention(checkpoint) if checkpoint else None
    config = read_conf(str(train_yaml))  # the one conf reader (a train.yaml is resolved already)
    model = str(config.get("encoder", "conformer"))
    decoder = config.get("decoder")
    if decoder and decoder != "transformer":
        model += f"+{decoder}"
    try:
        written = display_label(attention_label(site_types(config)))
    except (ValueError, TypeError, KeyError) as e:
        if truth is None:
            raise ValueError(f"{train_yaml}: the model does not build: {e}") from None
        written = None
    if truth is not None and written != truth:
        print(f"collect_results.py: {train_yaml} builds {written} attention, but {checkpoint} holds {truth} "
              f"weights; labelled {truth}", file=sys.stderr)
    return model, truth or written


def collect(exp_dir: Path, expected: Optional[Dict[str, str]] = None, data_dir: Optional[Path] = None,
            allow_unrecorded: bool = False) -> List[Experiment]:
    """Every experiment under ``exp_dir`` that has at least one ``<set>/<mode>/wer``; ScoreError, after a line on
    stderr for each, when any ``wer`` is not stage 5's score (``expected`` options, default compute-wer's) of what
    it names and its decode recorded (scoring.recorded.bound_score, against ``data_dir``'s texts where given), or a
    result has no decode.info and not ``allow_unrecorded``."""
    expected = stage5_options() if expected is None else expected
    experiments: Dict[Path, Experiment] = {}
    sums: Dict[str, str] = {}
    problems: List[str] = []
    scores: List[Score] = []
    decoded: List[Tuple[str, str, Dict[str, str]]] = []
    for mode_dir in result_dirs(exp_dir):
        test_dir = mode_dir.parent
        exp_path = test_dir.parent
        info = read_decode_info(mode_dir, test_dir, exp_path, sums=sums)
        stale = stale_reason(info, sums)
        if stale:
            print(f"collect_results.py: {mode_dir}: left out, {stale}", file=sys.stderr)
            continue
        problem = origin_problem(info, mode_dir, DECODING_METHODS + RESULT_NAMES,
                                 own_record=(mode_dir / "decode.info").is_file(), sums=sums, lm_modes=LM_METHODS)
        if problem:  # a result in another mode's, experiment's or set's folder: its number would be shown there
            problems.append(f"{mode_dir}: {problem}; decode it into its own folder (run.sh --stage 5)")
            continue
        if not info and not allow_unrecorded:   # a hand-made folder: nothing says what made its number
            problems.append(f"{mode_dir}: {UNRECORDED}")
            continue
        try:
            score = bound_score(mode_dir, sums, expected, data_dir)
        except ScoreError as e:
            problems.append(str(e))
            continue
        scores.append(score)
        decoded.append((str(mode_dir), mode_dir.name, {k: v for k, v in info.items() if k in COMPARED_OPTIONS}))
        value = score.rate
        if exp_path not in experiments:
            exp = Experiment(name=exp_path.name, path=exp_path)
            train_yaml = exp_path / "train.yaml"
            if train_yaml.is_file():
                ckpt = info.get("checkpoint")
                exp.model, exp.attention = describe_model(train_yaml, ckpt if ckpt and os.path.isfile(ckpt) else None)
                exp.seed = read_conf(str(train_yaml)).get("seed")
            else:
                print(f"collect_results.py: {train_yaml} not found; model unknown", file=sys.stderr)
            experiments[exp_path] = exp
        key = (test_dir.name, mode_dir.name)
        experiments[exp_path].wer[key] = value
        experiments[exp_path].checkpoints[key] = (shown_path(info.get("checkpoint", "-")) if info
                                                  else "unrecorded (no decode.info)")
        if info.get("lm"):
            experiments[exp_path].lms[key] = lm_line(info)
        rtf = RTF_RE.match((mode_dir / "rtf").read_text(encoding="utf-8")) if (mode_dir / "rtf").is_file() else None
        if rtf:
            experiments[exp_path].rtf[key] = float(rtf.group(1))
    mixed = options_problem(scores, decoded)
    if mixed:
        problems.append(mixed)
    for problem in problems:
        print(f"collect_results.py: {problem}", file=sys.stderr)
    if problems:
        raise ScoreError(f"{len(problems)} result(s) named above have no score of the text they hold; no results "
                         f"table written")
    return sorted(experiments.values(), key=lambda e: (e.model, e.attention, e.name))


def read_scalars(exp_path: Path) -> Dict[str, List[Tuple[int, float]]]:
    """All scalar series under ``exp_path/tensorboard`` (any depth), as tag -> [(step, value)] sorted by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    series: Dict[str, Dict[int, float]] = defaultdict(dict)
    tb_root = exp_path / "tensorboard"
    if not tb_root.is_dir():
        return {}
    event_dirs = sorted({p.parent for p in tb_root.rglob("events.out.tfevents*")})
    for d in event_dirs:
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                series[tag][ev.step] = ev.value  # a resumed run rewrites steps: keep the latest value
    return {tag: sorted(points.items()) for tag, points in series.items()}


def make_plots(experiments: Sequence[Experiment], exp_dir: Path, plots_dir: Path, metric: str) -> List[Path]:
    """Write all plots; returns the files written. Experiments without results still get loss/UDPS plots."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written: List[Path] = []
    scalars = {p.name: s for p in sorted(exp_dir.iterdir()) if p.is_dir() and (s := read_scalars(p))}
    if results_plots.plot_losses(scalars, plots_dir / "loss.png"):
        written.append(plots_dir / "loss.png")
    for name, s in sorted(scalars.items()):
        written += results_plots.udps_outputs(name, s, plots_dir, scale_symbols())
    if experiments:
        modes, sets = modes_and_sets(experiments)
        rows = bar_rows(experiments)
        out = plots_dir / f"{metric.lower().replace(' ', '_')}.png"
        results_plots.plot_error_bars(rows, sets, modes, metric, out)
        written.append(out)
    return written


def seeds_sections(experiments: Sequence[Experiment], args) -> str:
    """Mean ± std over seeds, a column group per attention family, and with --data_dir the paired tests of each
    family - scaled-dot and UDPS - cosine (wenet_udps.results.seeds)."""
    from wenet_udps.model_info import label_parts
    groups = group_by_seed([e.name for e in experiments])
    if not groups:
        return ""
    modes, sets = modes_and_sets(experiments)
    rates = {e.name: e.wer for e in experiments}
    text = (f"\n## Over seeds\n\nmean ± std (ddof 1) and every seed's {args.metric} (%).\n\n"
            + seeds_table(groups, rates, sets, modes, args.metric))
    by_family = families_table(groups, rates, sets, modes, list(FAMILIES), args.metric, label_parts)
    if by_family:
        text += f"\n## By attention family\n{by_family}"
    if args.data_dir is None:
        return text
    utt2spk = {s: speakers.read_utt2spk(args.data_dir / s / "utt2spk") for s in sets
               if (args.data_dir / s / "utt2spk").is_file()}
    lines = comparisons(groups, args.exp_dir, args.data_dir, sets, modes, char=bool(args.wer_char),
                        label_parts=label_parts, utt2spk=utt2spk)
    text += ("\n## Paired tests: each family - scaled-dot, UDPS - cosine\n\nPaired over utterances, pooled over "
             "seeds: 95 % CI by bootstrap, p-value by permutation test (wenet_udps.scoring.significance); "
             "significant means p < 0.05 for that one comparison (no correction for testing every mode and set). "
             "Then in how many seeds (and speaker-seed pairs, where the set has utt2spk) the second system is "
             "lower, with the sign test: each training (voice) counted once.\n\n"
             + ("\n".join(lines) if lines else "No pair of runs (a family and scaled-dot, UDPS and cosine) with the "
                                                "same seeds.") + "\n")
    if lines and not args.wer_char:  # a word-scored corpus: the same tests on the letter CER
        lines = comparisons(groups, args.exp_dir, args.data_dir, sets, modes, char=False, label_parts=label_parts,
                            as_text=speakers.letters, utt2spk=utt2spk)
        text += "\nThe same on the letter CER (the CER section's scoring):\n\n" + "\n".join(lines) + "\n"
    return text


def speaker_sections(experiments: Sequence[Experiment], args) -> str:
    """With --data_dir: the letter CER of a word-scored corpus and the error rate per speaker (utt2spk)."""
    if args.data_dir is None or not experiments:
        return ""
    modes, sets = modes_and_sets(experiments)
    return speakers.sections(args.exp_dir, args.data_dir, {e.name: set(e.wer) for e in experiments}, sets, modes,
                             char=bool(args.wer_char), metric=args.metric)


def ablation_section(experiments: Sequence[Experiment], args) -> str:
    """The site-ablation tables (run.sh --udps_sites), each site set against all-scaled-dot."""
    modes, sets = modes_and_sets(experiments)
    return site_ablation.section([e.name for e in experiments], args.exp_dir, args.data_dir, sets, modes,
                                 args.metric, list(SITES), char=bool(args.wer_char))


def seeds_ran(experiments: Sequence[Experiment]) -> List[int]:
    """The seeds the table's models trained with, each once, as their train.yaml records them (not run.sh's
    ``--seeds``, empty for a model trained with its conf's seed)."""
    return sorted({int(e.seed) for e in experiments if e.seed is not None})


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exp_dir", type=cli.existing_dir, default="exp")
    parser.add_argument("--out", type=cli.output_file, default=None, help="Markdown file (default EXP_DIR/RESULTS.md)")
    parser.add_argument("--plots_dir", type=cli.output_dir, default=None, help="PNG folder (default EXP_DIR/plots)")
    parser.add_argument("--metric", default="error rate", help="what the wer files measure: CER or WER")
    parser.add_argument("--data_dir", type=cli.existing_dir, default=None,
                        help="data dir with <set>/text: enables the significance tests of seeded experiments")
    parser.add_argument("--wer_char", type=int, choices=[0, 1], default=0, help="1: score characters (CER)")
    parser.add_argument("--peer_results", type=cli.existing_file, default=None,
                        help="other toolkits' published results on this split (wenet_udps.results.peers)")
    parser.add_argument("--allow_unrecorded", action="store_true",
                        help="show results without a decode.info (made by hand), marked in the checkpoint column")
    for name, choices in (("case", text_norm.CASES), ("punctuation", text_norm.PUNCTUATION)):
        parser.add_argument(f"--{name}", choices=choices, default=None,
                            help=f"the recipe's --text_{name}, which stage 5 scored with (unchecked when not given)")
    args = parser.parse_args(argv)
    args.exp_dir = Path(args.exp_dir)
    args.data_dir = Path(args.data_dir) if args.data_dir else None
    out = Path(args.out) if args.out else args.exp_dir / "RESULTS.md"
    plots_dir = Path(args.plots_dir) if args.plots_dir else args.exp_dir / "plots"
    partial = partial_notes(args.data_dir) if args.data_dir else []   # --allow_partial's record, said plainly
    # A malformed line is a usage error naming it (run_cli), before any work.
    peers = peer_section(read_peer_results(args.peer_results), args.peer_results, wer_char=bool(args.wer_char),
                         partial=partial) if args.peer_results else ""
    try:  # a bad train.yaml, wer file or utt2spk: one line naming it
        experiments = collect(args.exp_dir, stage5_options(args.case, args.punctuation), args.data_dir,
                              args.allow_unrecorded)
        ablation = ablation_section(experiments, args)
        sections = seeds_sections(experiments, args) + ablation + speaker_sections(experiments, args)
        bias_rows, bias_problems = collect_biasing(args.exp_dir)
        for problem in bias_problems:
            print(f"collect_results.py: {problem}", file=sys.stderr)
        if bias_problems:
            raise ScoreError(f"{len(bias_problems)} biasing report(s) named above are not scores of what they name; "
                             f"no results table written")
    except ReferencesError:  # --data_dir's text is not what a result was decoded with: one line, exit 2 (run_cli)
        raise
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(f"collect_results.py: {e}", file=sys.stderr)
        return 1
    if not experiments:  # a table of nothing would pass stage 7 silently (and replace an older RESULTS.md)
        print(f"collect_results.py: no results: no {args.exp_dir}/<name>/<set>/<mode>/wer files (run stage 5); "
              f"{out} not written", file=sys.stderr)
        return 1
    table = markdown_table(experiments, args.metric)
    text = (f"# Results\n\n{partial_note(partial)}{args.metric} (%) from compute-wer, "
            f"`{args.exp_dir}/<name>/<set>/<mode>/wer`.\n\n"
            f"{table}{biasing_section(bias_rows, args.metric)}{peers}{sections}\n## Made with\n\n"
            + "\n".join(provenance_markdown(provenance(seeds_ran(experiments)))
                        + gpu_check_lines(experiments) + lm_lines(experiments)) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, text)
    print(table + peers + ablation, end="")   # the site ablation's paired tests are what --udps_sites is run for
    for p in make_plots(experiments, args.exp_dir, plots_dir, args.metric):
        print(f"collect_results.py: wrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "collect_results.py")
