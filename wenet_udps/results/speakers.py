"""Error rates per speaker, and the letter error rate (CER) of a word-scored corpus.

A data set with Kaldi's ``utt2spk`` (``<key> <speaker>`` lines) gets one row per speaker and experiment group in
RESULTS.md: with a handful of test speakers, a pooled difference between two attention types can come from one
voice, and this table shows whether it does. Seeded experiments (``<exp>_seed<N>``) are one group: mean ± std over
their seeds.
"""
from collections import defaultdict
from pathlib import Path
from typing import Collection, Dict, List, Mapping, Sequence, Tuple

from wenet_udps.results.seeds import group_by_seed, seeds_table
from wenet_udps.scoring.significance import mean_std
from wenet_udps.scoring.references import read_hypotheses
from wenet_udps.scoring.tokens import read_text
from wenet_udps.scoring.wer import error_rate
from wenet_udps.utils.kaldi_files import read_map

Rates = Dict[Tuple[str, str], float]  # (set, mode) -> %
# experiment name -> the (set, mode) results it has that are current (collect_results leaves out stale ones)
Results = Mapping[str, Collection[Tuple[str, str]]]


def read_utt2spk(path: Path) -> Dict[str, str]:
    """``{key: speaker}`` by the one reader of Kaldi files (``wenet_udps.utils.kaldi_files``); a line without a
    speaker, or a key given twice, raises ListError (a ValueError) naming the file and line."""
    return read_map(str(path), what="<key> <speaker>", fields=2)


def by_speaker(refs: Mapping[str, str], hyps: Mapping[str, str], utt2spk: Mapping[str, str], *, char: bool
               ) -> Dict[str, float]:
    """``{speaker: error rate %}`` over each speaker's reference utterances (a missing hypothesis counts as
    deletions, as in the pooled score); utterances absent from utt2spk are speaker ``?``."""
    groups: Dict[str, Dict[str, str]] = defaultdict(dict)
    for key, text in refs.items():
        groups[utt2spk.get(key, "?")][key] = text
    return {spk: error_rate(sub, hyps, char=char) for spk, sub in sorted(groups.items())}


def letters(texts: Mapping[str, str]) -> Dict[str, str]:
    """Each transcript as space-separated letters, spaces dropped: ``"IT'S OK"`` -> ``"I T ' S O K"``. Word-level
    scoring of these is the letter error rate (CER) of a word-scored corpus; WeNet's character mode would keep
    English words whole."""
    return {k: " ".join(c for c in t if not c.isspace()) for k, t in texts.items()}


def letter_cer(exp_dir: Path, data_dir: Path, results: Results, sets: Sequence[str], modes: Sequence[str]
               ) -> Dict[str, Rates]:
    """``{experiment: {(set, mode): CER %}}`` of the decoded ``<exp>/<set>/<mode>/text`` against
    ``<data_dir>/<set>/text``, letter by letter (:func:`letters`)."""
    out: Dict[str, Rates] = {}
    for name, current in results.items():
        for s in sets:
            ref = data_dir / s / "text"
            for m in modes:
                hyp = exp_dir / name / s / m / "text"
                if (s, m) in current and ref.is_file() and hyp.is_file():
                    refs = read_text(str(ref))
                    hyps = read_hypotheses(str(hyp), refs, str(ref))
                    out.setdefault(name, {})[(s, m)] = error_rate(letters(refs), letters(hyps), char=False)
    return out


def groups_of(names: Sequence[str]) -> Dict[str, List[str]]:
    """Experiment groups: ``<base>`` -> its ``<base>_seed<N>`` members in seed order; other experiments alone."""
    seeded = group_by_seed(names)
    grouped = {n for members in seeded.values() for n in members.values()}
    out = {base: [members[s] for s in sorted(members)] for base, members in seeded.items()}
    out.update({n: [n] for n in names if n not in grouped})
    return dict(sorted(out.items()))


def speaker_table(exp_dir: Path, data_dir: Path, results: Results, sets: Sequence[str], modes: Sequence[str],
                  *, char: bool, metric: str, letter: bool = False) -> str:
    """Markdown: per set that has ``utt2spk``, one row per experiment group and speaker, one column per mode
    (mean ± std over seeds for a seeded group). Empty when no set has ``utt2spk``. ``letter``: score the texts as
    letters (:func:`letters`), the CER of a word-scored set."""
    header = ["exp", "set", "speaker"] + [f"{m} {metric}" for m in modes]
    lines = []
    for s in sets:
        spk_file, ref_file = data_dir / s / "utt2spk", data_dir / s / "text"
        if not spk_file.is_file() or not ref_file.is_file():
            continue
        utt2spk, written = read_utt2spk(spk_file), read_text(str(ref_file))
        refs = letters(written) if letter else written
        for group, members in groups_of(list(results)).items():
            cells: Dict[str, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
            for name in members:
                for m in modes:
                    hyp = exp_dir / name / s / m / "text"
                    if (s, m) in results[name] and hyp.is_file():
                        hyps = read_hypotheses(str(hyp), written, str(ref_file))
                        for spk, r in by_speaker(refs, letters(hyps) if letter else hyps, utt2spk,
                                                 char=char and not letter).items():
                            cells[spk][m].append(r)
            for spk, per_mode in sorted(cells.items()):
                row = [group, s, spk] + [_cell(per_mode.get(m, [])) for m in modes]
                lines.append("| " + " | ".join(row) + " |")
    if not lines:
        return ""
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + lines) + "\n"


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "-"
    mean, std = mean_std(values)
    return f"{mean:.2f}" if len(values) == 1 else f"{mean:.2f} ± {std:.2f}"


def sections(exp_dir: Path, data_dir: Path, results: Results, sets: Sequence[str], modes: Sequence[str], *,
             char: bool, metric: str) -> str:
    """RESULTS.md's sections after the main table: the letter CER of a word-scored corpus (per experiment, and
    mean ± std per seed group), then the error rate per speaker of every set with ``utt2spk``."""
    text = ""
    if not char:
        cer = letter_cer(exp_dir, data_dir, results, sets, modes)
        if cer:
            header = ["exp", "set"] + [f"{m} CER" for m in modes]
            rows = [" | ".join([n, s] + [f"{cer[n][(s, m)]:.2f}" if (s, m) in cer[n] else "-" for m in modes])
                    for n in sorted(cer) for s in sets if any(k[0] == s for k in cer[n])]
            groups = group_by_seed(sorted(cer))
            text += ("\n## CER\n\nLetter error rate (%): the decoded words and the reference as letters, spaces not "
                     "counted (wenet_udps.results.speakers.letters).\n\n| " + " | ".join(header) + " |\n|"
                     + "|".join("---" for _ in header) + "|\n" + "".join(f"| {r} |\n" for r in rows)
                     + (f"\n{seeds_table(groups, cer, sets, modes, 'CER')}" if groups else ""))
    per = speaker_table(exp_dir, data_dir, results, sets, modes, char=char, metric=metric)
    if per:
        text += (f"\n## Per speaker\n\n{metric} (%) of each speaker's utterances (`<data>/<set>/utt2spk`); a seed "
                 f"group shows mean ± std over its seeds.\n\n{per}")
        if not char:
            text += ("\nLetter CER (%) of each speaker's utterances, scored as in the CER section.\n\n"
                     + speaker_table(exp_dir, data_dir, results, sets, modes, char=False, metric="CER", letter=True))
    return text
