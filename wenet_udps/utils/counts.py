"""When a pass over a list is a failure: the one rule of every command that consumes a list (training epochs and
cv, recognize, the greedy soup's dev set, sherpa_decode, compute_cmvn_stats, make_raw_list, make_shard_list).

- A pass that used nothing (no utterance decoded, trained on, averaged into statistics or written to a list) is a
  failure, whatever it skipped and why: :class:`WorkFailed`, exit status 1, one line with the counts.
- A pass in which more than ``max_bad_fraction`` of the utterances were unusable (bad or non-finite audio, a
  missing shard member, ...: the caller says which reasons are unusable) is a failure too. The share is
  ``dataset_conf.max_bad_fraction`` of the train.yaml the command reads, and :data:`MAX_BAD_FRACTION` where
  that does not say, or the command reads no train.yaml. Utterances dropped by choice (a length filter, a key
  only one of wav.scp and text has) are counted and logged but are not unusable.

This module imports only the standard library and ``cli``, so every layer may use it.
"""
import argparse
from typing import Any, Mapping, Optional

from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError

MAX_BAD_FRACTION = 0.05


def max_bad_fraction(config: Optional[Mapping[str, Any]]) -> float:
    """The share of unusable utterances a pass may have: ``dataset_conf.max_bad_fraction`` of a train.yaml's
    ``config``, or :data:`MAX_BAD_FRACTION`."""
    return float(((config or {}).get("dataset_conf") or {}).get("max_bad_fraction", MAX_BAD_FRACTION))


def add_max_bad_fraction(parser: argparse.ArgumentParser, unusable: str) -> None:
    """``--max_bad_fraction`` of a tool that reads no train.yaml (make_raw_list, make_shard_list): the share of
    ``unusable`` utterances above which it writes nothing (exit 1); default :data:`MAX_BAD_FRACTION`."""
    parser.add_argument("--max_bad_fraction", type=cli.float_range(0.0, 1.0), default=MAX_BAD_FRACTION,
                        help=f"the share of {unusable} above which nothing is written (exit 1; default "
                             f"{MAX_BAD_FRACTION:g}, as dataset_conf.max_bad_fraction)")


class WorkFailed(UserError):
    """The work ran but used nothing, or too little, of its input: one line, exit status 1 (see ``cli.run_cli``)."""

    exit_status = 1


def counts_line(used: int, skipped: Mapping[str, int]) -> str:
    """``N utterances used, M skipped (reason count, ...)``: the summary every pass logs."""
    reasons = ", ".join(f"{k} {v}" for k, v in skipped.items() if v) or "none"
    return f"{used} utterances used, {sum(skipped.values())} skipped ({reasons})"


def check_pass(line: str, *, used: int, total: int, unusable: int, max_bad_fraction: float = MAX_BAD_FRACTION,
               setting: str = "dataset_conf.max_bad_fraction") -> str:
    """``line`` (a pass's summary naming its list) when the pass may count as done; WorkFailed otherwise: nothing
    was used, or ``unusable`` of the ``total`` utterances is more than ``max_bad_fraction`` (named as
    ``setting``)."""
    if used == 0:
        raise WorkFailed(f"{line}: no usable utterance")
    if total and unusable / total > max_bad_fraction:
        raise WorkFailed(f"{line}: {unusable / total:.1%} of the utterances are unusable, more than {setting} "
                         f"{max_bad_fraction:g}")
    return line
