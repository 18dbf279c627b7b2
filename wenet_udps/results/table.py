"""The results table of tools/collect_results.py: one :class:`Experiment` per ``EXP/<name>`` folder, one Markdown
row per experiment, set and checkpoint, the word LMs the ``*_lm`` columns used, and the plot rows (seed groups as
mean ± std)."""
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from wenet_udps.results.seeds import group_by_seed
from wenet_udps.scoring.significance import mean_std

# WeNet's order of decoding modes, then ESPnet's joint one; an LM mode of run.sh --lm_tag T (<mode>_T) after the
# untagged ones; others follow alphabetically.
MODE_ORDER = ("attention", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring",
              "joint_ctc_attention", "ctc_prefix_beam_search_lm", "attention_rescoring_lm", "joint_ctc_attention_lm")
LM_MODES = MODE_ORDER[-3:]


@dataclass
class Experiment:
    """One ``EXP/<name>`` folder: what model it is and its error rates."""

    name: str
    path: Path
    model: str = "?"
    attention: str = "?"
    wer: Dict[Tuple[str, str], float] = field(default_factory=dict)          # (set, mode) -> %
    checkpoints: Dict[Tuple[str, str], str] = field(default_factory=dict)    # (set, mode) -> path
    rtf: Dict[Tuple[str, str], float] = field(default_factory=dict)          # (set, mode) -> real-time factor
    lms: Dict[Tuple[str, str], str] = field(default_factory=dict)            # (set, mode) -> its word LM (lm_line)
    seed: Optional[int] = None   # the seed it trained with: train.yaml's (bin.train records the seed that ran)


def shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (run.sh's exp/... paths)."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def lm_line(info: Dict[str, str]) -> str:
    """The word LM of an ``*_lm`` result, from its decode.info: path, order, size, SHA-256 and the weights."""
    return (f"{shown_path(info['lm'])} ({info.get('lm_order', '?')}-gram, {info.get('lm_size', '?')} bytes, SHA-256 "
            f"{info.get('lm_sha256', '?')[:12]}; lm_weight {info.get('lm_weight', '?')}, word_score "
            f"{info.get('word_score', '?')})")


def lm_lines(experiments: Sequence[Experiment]) -> List[str]:
    """One line per word LM the table's ``*_lm`` columns used, with the experiments and sets decoded with it."""
    users: Dict[str, List[str]] = {}
    for e in experiments:
        for (test_set, _), lm in sorted(e.lms.items()):
            where = f"{e.name} {test_set}"
            if where not in users.setdefault(lm, []):
                users[lm].append(where)
    return [f"- word LM {lm}: {', '.join(where)}" for lm, where in sorted(users.items())]


def mode_sort_key(mode: str) -> Tuple[int, str, int, str]:
    """(group, LM tag, position in MODE_ORDER, name): WeNet's modes, then each tagged LM's, then any other."""
    for lm_mode in LM_MODES:
        if mode.startswith(lm_mode + "_"):
            return (1, mode[len(lm_mode) + 1:], MODE_ORDER.index(lm_mode), mode)
    return (0, "", MODE_ORDER.index(mode), mode) if mode in MODE_ORDER else (2, "", 0, mode)


def set_sort_key(name: str) -> Tuple[bool, str]:
    """dev sets before test sets (WeNet's tables), then by name."""
    return (not name.startswith("dev"), name)


def modes_and_sets(experiments: Sequence[Experiment]) -> Tuple[List[str], List[str]]:
    keys = {k for e in experiments for k in e.wer}
    return (sorted({m for _, m in keys}, key=mode_sort_key), sorted({t for t, _ in keys}, key=set_sort_key))


def markdown_table(experiments: Sequence[Experiment], metric: str) -> str:
    """One row per experiment and scored set, one column per decoding mode (``metric`` in %), then the RTF of the
    modes that measured one."""
    modes, sets = modes_and_sets(experiments)
    timed = [m for m in modes if any(k[1] == m for e in experiments for k in e.rtf)]
    header = (["model", "attention type", "set"] + [f"{m} {metric}" for m in modes] + [f"{m} RTF" for m in timed]
              + ["exp", "checkpoint"])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for e in experiments:
        for s in sets:
            # A row holds the results of one checkpoint only: two models never share a row.
            for ckpt in sorted({e.checkpoints[k] for k in e.wer if k[0] == s}):
                cells = [e.model, e.attention, s] + [f"{e.wer[(s, m)]:.2f}" if e.checkpoints.get((s, m)) == ckpt
                                                     else "-" for m in modes]
                cells += [f"{e.rtf[(s, m)]:.4f}" if e.checkpoints.get((s, m)) == ckpt and (s, m) in e.rtf else "-"
                          for m in timed]
                lines.append("| " + " | ".join(cells + [str(e.path), ckpt]) + " |")
    return "\n".join(lines) + "\n"


def bar_rows(experiments: Sequence[Experiment]) -> List[Tuple[str, Dict[Tuple[str, str], float],
                                                                 Dict[Tuple[str, str], float]]]:
    """Plot rows (label, values, errors): the runs of one ``--seeds`` group as one bar, mean ± std (ddof 1) over
    its seeds; any other experiment as a bar of its own."""
    by_name = {e.name: e for e in experiments}
    groups = group_by_seed(list(by_name))
    grouped = {name for members in groups.values() for name in members.values()}
    rows = [(f"{e.name} ({e.attention})", e.wer, {}) for e in experiments if e.name not in grouped]
    for base, members in sorted(groups.items()):
        runs = [by_name[name] for _, name in sorted(members.items())]
        keys = set().union(*(r.wer for r in runs))
        stats = {key: mean_std([r.wer[key] for r in runs if key in r.wer]) for key in keys}
        means = {key: m for key, (m, _) in stats.items()}
        stds = {key: sd for key, (_, sd) in stats.items()}
        rows.append((f"{base} ({runs[0].attention}, {len(runs)} seeds)", means, stds))
    return rows
