"""The word LM's options, each rule once: the n-gram order and lmplz's pruning (:func:`check_order_and_prune`, run by
``build_arpa`` and so by ``build_lm``), the LM weight and word score (:data:`LM_WEIGHT`, :data:`WORD_SCORE`: the
``type=`` of recognize's and bench/decode_speed.py's ``--lm_weight`` / ``--word_score``), and run.sh's lists of them
(:func:`run_sh_error`), checked with those same rules before any stage: a value that would stop stage 2 or 5 half-way
is refused at the start, naming the option.

The two weights' rules are recognize's and the Python API's (``transformer.decode_options.DECODE_OPTIONS``), so
run.sh refuses exactly what stage 5's recognize would.
"""
import argparse
from typing import Optional, Sequence

from wenet_udps.lm.arpa import LmError
from wenet_udps.transformer.decode_options import DECODE_OPTIONS
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError

LM_WEIGHT = DECODE_OPTIONS["lm_weight"].check    # scale of the LM's log-probability in the *_lm modes
WORD_SCORE = DECODE_OPTIONS["word_score"].check  # bonus per word (negative: fewer insertions)
DEFAULT_ORDER = 3                 # build_lm's --order and run.sh's --lm_order when not given


def check_order_and_prune(order: int, prune: Optional[Sequence[int]]) -> None:
    """An n-gram order lmplz and KenLM's decoder take (>= 2), and lmplz ``--prune`` thresholds it takes: one count
    per order from the unigrams (n-grams seen this many times or fewer are dropped), at most ``order`` of them,
    >= 0, the first 0 (unigrams are never pruned) and non-decreasing (lmplz refuses a higher order pruned less than
    a lower one: its n-grams would lose their prefixes). LmError naming what is wrong otherwise."""
    if order < 2:
        raise LmError(f"LM order must be >= 2 (KenLM's decoder reads no unigram LM), got {order}")
    if prune is None:
        return
    shown = " ".join(map(str, prune))
    if not prune or len(prune) > order or any(p < 0 for p in prune) or prune[0] != 0:
        raise LmError(f"LM prune '{shown}': give 1 to {order} counts (one per order of the {order}-gram LM, from "
                        f"the unigrams), each >= 0, the first 0 (unigrams are never pruned)")
    if any(b < a for a, b in zip(prune, prune[1:])):
        raise LmError(f"LM prune '{shown}': the counts must not decrease from one order to the next (lmplz "
                        f"refuses it: a pruned n-gram would leave longer n-grams without their prefix)")


def _integer(option: str, text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"--{option} takes {what}, got '{text}'") from None


def run_sh_error(lm_weights: str, word_scores: str, lm_order: str, lm_prune: str) -> str:
    """run.sh's ``--lm_weights``, ``--word_scores`` (the values stage 5 tries on dev), ``--lm_order`` and
    ``--lm_prune`` (stage 2's lmplz), each a space-separated string: the first error in one line naming the option
    and the value, or "" when every value is one its program takes."""
    try:
        for option, values, check, program in (("lm_weights", lm_weights, LM_WEIGHT, "--lm_weight"),
                                               ("word_scores", word_scores, WORD_SCORE, "--word_score")):
            if not values.split():
                raise UserError(f"--{option} is empty: give the values stage 5 tries on dev, e.g. '0.3 0.6 1.0'")
            for value in values.split():
                try:
                    check(value)
                except argparse.ArgumentTypeError as e:
                    raise UserError(f"--{option} '{values}': {value} is not a recognize {program} ({e})") from None
        order = _integer("lm_order", lm_order, "an integer >= 2") if lm_order.strip() else DEFAULT_ORDER
        if order < 2:
            raise UserError(f"--lm_order takes an integer >= 2, got '{lm_order}'")
        prune = [_integer("lm_prune", p, "integers (lmplz --prune counts, e.g. '0 1 1')")
                 for p in lm_prune.split()] if lm_prune.strip() else None
        try:
            check_order_and_prune(order, prune)
        except UserError as e:
            raise UserError(f"--lm_prune (with --lm_order {order}): {e}") from None
    except UserError as e:
        return cli.one_line(str(e))
    return ""
