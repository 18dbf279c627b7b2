"""The biasing section of RESULTS.md (tools/collect_results.py): each decode of a biasing test set with a list,
beside the decode of the same set without it, both scored on that list by tools/compute-biased-wer.py (run.sh
``--hotwords true``, tools/run_hotwords.sh).

Reads ``EXP/<name>/<set>/hot_<list>/<mode>/biased_wer`` (the decode with the list) and ``baseline_biased_wer``
beside it (the decode without, ``EXP/<name>/<set>/<mode>/text``). Each report names the hypotheses it scored and
their SHA-256 in its first line (scoring.bound.binding_lines); a report whose hypotheses have changed since, or are
gone, or one that is not whole, is a problem named in one line, and no RESULTS.md is written (as for a ``wer``).
"""
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from wenet_udps.results.table import mode_sort_key, set_sort_key
from wenet_udps.scoring.biasing import rate_text
from wenet_udps.utils.source_info import file_sha256

SCORED = re.compile(r"^Scored hypotheses: (.*) \(SHA-256 ([0-9a-f]{64})\)$")
RATE = re.compile(r"^(WER|U-WER|B-WER) -> ([0-9.]+|-) % N=(\d+)")   # '-': undefined (N=0, nothing written)
PHRASES = re.compile(r"^Phrases -> recall ([0-9.]+|-) precision ([0-9.]+|-) F1 ([0-9.]+|-) ")
REPORTS = (("baseline_biased_wer", "no list"), ("biased_wer", "the list"))


@dataclass
class BiasRow:
    experiment: str
    test_set: str
    biasing: str        # the list's name (hot_<name>)
    mode: str
    decoded: str        # "no list" | "the list"
    rates: Dict[str, Optional[float]]   # WER, U-WER, B-WER (%); None: undefined (no word of its kind)
    biased_n: int
    recall: Optional[float]     # None: undefined (no phrase in the references / none written)
    precision: Optional[float]
    f1: Optional[float]


def read_report(path: Path) -> Tuple[Optional[Dict], Optional[str]]:
    """(values, None) of a compute-biased-wer report, or (None, the problem)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    bound = SCORED.match(lines[0]) if lines else None
    if not bound:
        return None, f"{path}: not a compute-biased-wer report (no 'Scored hypotheses' line)"
    hyp, sha = bound.groups()
    if not Path(hyp).is_file():
        return None, f"{path}: the hypotheses it scored, {hyp}, are gone; rescore (run.sh --stage 5)"
    if file_sha256(hyp) != sha:
        return None, f"{path}: {hyp} changed since it was scored (another SHA-256); rescore (run.sh --stage 5)"
    rates: Dict[str, Tuple[float, int]] = {}
    phrases = None
    for line in lines:
        m = RATE.match(line)
        if m:
            rates[m.group(1)] = (_value(m.group(2)), int(m.group(3)))
        phrases = phrases or PHRASES.match(line)
    if len(rates) != 3 or phrases is None:
        return None, f"{path}: not whole (its WER, U-WER, B-WER and Phrases lines); rescore (run.sh --stage 5)"
    return {"rates": {k: v[0] for k, v in rates.items()}, "biased_n": rates["B-WER"][1],
            "phrases": tuple(_value(x) for x in phrases.groups())}, None


def _value(text: str) -> Optional[float]:
    return None if text == "-" else float(text)


def collect_biasing(exp_dir: Path) -> Tuple[List[BiasRow], List[str]]:
    """Every row of the section under ``exp_dir`` and the problems found (each one line)."""
    rows: List[BiasRow] = []
    problems: List[str] = []
    for mode_dir in sorted({p.parent for p in exp_dir.glob("*/*/hot_*/*/biased_wer")}
                           | {p.parent for p in exp_dir.glob("*/*/hot_*/*/baseline_biased_wer")}):
        list_dir = mode_dir.parent
        for name, decoded in REPORTS:
            path = mode_dir / name
            if not path.is_file():
                problems.append(f"{path} missing: stage 5 stopped before scoring it? (run.sh --stage 5)")
                continue
            values, problem = read_report(path)
            if problem:
                problems.append(problem)
                continue
            recall, precision, f1 = values["phrases"]
            rows.append(BiasRow(list_dir.parent.parent.name, list_dir.parent.name, list_dir.name[len("hot_"):],
                                mode_dir.name, decoded, values["rates"], values["biased_n"], recall, precision,
                                f1))
    return rows, problems


def _list_key(name: str) -> Tuple[bool, int, str]:
    return (not name.isdigit(), int(name) if name.isdigit() else 0, name)


def section(rows: Sequence[BiasRow], metric: str) -> str:
    """The Markdown section ("" without rows): per experiment, set, list and mode, the decode without the list
    and with it."""
    if not rows:
        return ""
    u, b = f"U-{metric}", f"B-{metric}"
    head = (f"| experiment | set | list | mode | decoded with | {metric} | {u} | {b} | biased N | recall | precision "
            f"| F1 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    order = sorted(rows, key=lambda r: (r.experiment, set_sort_key(r.test_set), _list_key(r.biasing),
                                        mode_sort_key(r.mode), r.decoded != "no list"))
    body = "".join(f"| {r.experiment} | {r.test_set} | {r.biasing} | {r.mode} | {r.decoded} | "
                   f"{rate_text(r.rates['WER'])} | {rate_text(r.rates['U-WER'])} | {rate_text(r.rates['B-WER'])} | "
                   f"{r.biased_n} | {rate_text(r.recall, 3)} | {rate_text(r.precision, 3)} | {rate_text(r.f1, 3)} |\n"
                   for r in order)
    return (f"\n## Biasing lists\n\nEach biasing test set decoded without a list and with each of its lists "
            f"(run.sh --hotwords true), both scored on that list by tools/compute-biased-wer.py (Le et al.'s {u} "
            f"and {b}: the error rate over the words not in the list and over those in it; recall, precision and "
            f"F1 of the listed phrases), `<name>/<set>/hot_<list>/<mode>/`.\n\n" + head + body)
