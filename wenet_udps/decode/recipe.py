"""The decoding a recipe ran on a checkpoint: the Python API's defaults, so that its text is run.sh's text.

run.sh stage 5 decodes with ``recognize``, which records every option as applied, with the checkpoint's SHA-256,
in ``<exp_dir>/<set>/<mode>/decode.info`` (``wenet_udps.utils.source_info``; the ``*_lm`` modes in
``<set>/<mode><suffix>``, with the LM's SHA-256). ``load_model`` reads the records of the checkpoint it loads, and
``transcribe`` / ``decode_list`` / ``stream`` take the search options not given from them: for each option the
value recorded for a requested mode, else for any mode that uses the option. The LM weights are taken only with the
LM they were recorded with (its SHA-256). Without a record (a checkpoint stage 5 did not decode), run.sh's own
defaults (:data:`RUN_SH_DEFAULTS`; tests/decode/test_recipe.py checks them against run.sh). Records that disagree
(another recognize run into the experiment dir) are not used for that option, with a warning naming them.
"""
import glob
import logging
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from wenet_udps.transformer.decode_options import DECODE_OPTIONS
from wenet_udps.transformer.modes import DECODING_METHODS, JOINT_METHODS, LM_METHODS
from wenet_udps.utils.source_info import content_sha256, file_sha256, read_source

# The search options a record gives, chunking too (run.sh --decoding_chunk_size 4 decodes stage 5 in chunks, and
# RESULTS.md scores that text; ``stream`` passes its own chunking, which wins as any option given does).
RECORDED = ("beam_size", "ctc_weight", "reverse_weight", "length_penalty", "blank_penalty", "max_len_ratio",
            "length_bonus") + ("decoding_chunk_size", "num_decoding_left_chunks")
# The chunking options go together: a caller who gives one (or simulate_streaming) gets none of them from a record
# (a recorded left-chunk count is no option of a full-context decode).
CHUNKING = ("decoding_chunk_size", "num_decoding_left_chunks", "simulate_streaming")
LM_RECORDED = ("lm_weight", "word_score")
# run.sh's defaults of the same options: its variables of those names, and joint_ctc_weight, the ctc_weight it
# decodes the joint modes with.
RUN_SH_DEFAULTS = {"beam_size": 10, "ctc_weight": 0.5, "reverse_weight": 0.0, "joint_ctc_weight": 0.3}


def run_sh_default(name: str, mode: str) -> Any:
    """run.sh's value of option ``name`` in ``mode`` (None: it passes none, the table's default applies)."""
    if name == "ctc_weight" and mode in JOINT_METHODS:
        return RUN_SH_DEFAULTS["joint_ctc_weight"]
    return RUN_SH_DEFAULTS.get(name)


def _mode_of(result_dir: str) -> Optional[str]:
    """The mode a stage-5 result dir is named after (``attention_rescoring_lm_books`` -> attention_rescoring_lm)."""
    name = os.path.basename(result_dir)
    modes = [m for m in DECODING_METHODS if name == m or (m in LM_METHODS and name.startswith(m))]
    return max(modes, key=len) if modes else None


class RecipeDecoding:
    """The options recorded for one checkpoint: (mode, option) -> {value: [record paths]}."""

    def __init__(self, exp_dir: str, checkpoint: str):
        self.values: Dict[Tuple[str, str], Dict[Any, List[str]]] = {}
        self.lm_sha: Dict[str, str] = {}
        self.warned: Set[str] = set()
        self._warned_lock = threading.Lock()
        records = sorted(glob.glob(os.path.join(glob.escape(exp_dir), "*", "*", "decode.info")))
        sha = file_sha256(checkpoint) if records else None
        for path in records:
            mode, source = _mode_of(os.path.dirname(path)), read_source(path)
            if mode is None or source.get("sha256") != sha:
                continue
            names = RECORDED + (LM_RECORDED if mode in LM_METHODS else ())
            for name in names:
                value = self._parse(name, source.get(name), path)
                if value is not None:
                    self.values.setdefault((mode, name), {}).setdefault(value, []).append(path)
            if mode in LM_METHODS and source.get("lm_sha256"):
                self.lm_sha[path] = source["lm_sha256"]

    @staticmethod
    def _parse(name: str, text: Optional[str], path: str) -> Any:
        if text is None or text == "None":
            return None
        try:
            return DECODE_OPTIONS[name].check(text)
        except Exception as e:  # a record made before a bound (ctc_weight 5): not a default to decode with
            logging.warning("%s: %s %s is not a valid value now (%s); not used as a default", path, name, text, e)
            return None

    def defaults(self, modes: Sequence[str], lm: Optional[str] = None, given: Sequence[str] = ()) -> Dict[str, Any]:
        """The options recorded for ``modes`` (see the module docstring), run.sh's defaults for the rest. An option
        that modes use differently (``ctc_weight``: the rescoring and the joint modes, ``DecodeOption.families``)
        is looked up within each family, and comes as {mode: value} where the families' values differ. ``given``:
        the options the caller gives; one of :data:`CHUNKING` among them leaves every chunking option out."""
        lm_sha = content_sha256(lm) if lm is not None and self.lm_sha and os.path.isfile(lm) else None
        out: Dict[str, Any] = {}
        chunked_by_caller = any(name in given for name in CHUNKING)
        for name in RECORDED + LM_RECORDED:
            if chunked_by_caller and name in CHUNKING:
                continue
            spec = DECODE_OPTIONS[name]
            using = [m for m in DECODING_METHODS if spec.modes is None or m in spec.modes]
            per_mode: Dict[str, Any] = {}
            for family in dict.fromkeys(spec.family(m) for m in modes if m in using):  # (in the modes' order)
                kin = [m for m in using if spec.family(m) == family]
                value = self._value(name, [m for m in modes if m in kin], kin, lm_sha)
                if value is None:
                    value = run_sh_default(name, kin[0])
                per_mode.update((m, value) for m in modes if m in kin)
            values = set(per_mode.values()) - {None}
            if len(values) == 1 and None not in per_mode.values():
                out[name] = values.pop()
            elif values:
                out[name] = {m: v for m, v in per_mode.items() if v is not None}
        return out

    def _value(self, name: str, asked: Sequence[str], kin: Sequence[str], lm_sha: Optional[str]) -> Any:
        """The value recorded for the modes ``asked``, else for any of their family ``kin``; None where none is
        (or the records disagree: a warning, once per option)."""
        for group in (asked, kin):
            found = self._found(group, name, lm_sha)
            if found:
                break
        if len(found) == 1:
            return next(iter(found))
        with self._warned_lock:  # (threads decoding with one model share the records)
            warn = len(found) > 1 and name not in self.warned  # once per option, not per call
            if warn:
                self.warned.add(name)
        if warn:
            logging.warning("decoding records disagree on %s (%s); using %s's default", name,
                            "; ".join(f"{v} in {', '.join(p)}" for v, p in found.items()), "run.sh")
        return None

    def _found(self, modes: Sequence[str], name: str, lm_sha: Optional[str]) -> Mapping[Any, List[str]]:
        found: Dict[Any, List[str]] = {}
        for mode in modes:
            for value, paths in self.values.get((mode, name), {}).items():
                paths = [p for p in paths if name not in LM_RECORDED or self.lm_sha.get(p) == lm_sha]
                if paths:
                    found.setdefault(value, []).extend(paths)
        return found
