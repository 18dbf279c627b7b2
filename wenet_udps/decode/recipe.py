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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from wenet_udps.transformer.decode_options import DECODE_OPTIONS
from wenet_udps.transformer.search import DECODING_METHODS, LM_METHODS
from wenet_udps.utils.source_info import content_sha256, file_sha256, read_source

# The search options a record gives (chunking stays the model's own or the caller's: streaming passes its own).
RECORDED = ("beam_size", "ctc_weight", "reverse_weight", "length_penalty", "blank_penalty", "max_len_ratio")
LM_RECORDED = ("lm_weight", "word_score")
# run.sh's defaults of the same options (its beam_size, ctc_weight, reverse_weight variables).
RUN_SH_DEFAULTS = {"beam_size": 10, "ctc_weight": 0.5, "reverse_weight": 0.0}


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

    def defaults(self, modes: Sequence[str], lm: Optional[str] = None) -> Dict[str, Any]:
        """The options recorded for ``modes`` (see the module docstring), run.sh's defaults for the rest."""
        lm_sha = content_sha256(lm) if lm is not None and self.lm_sha and os.path.isfile(lm) else None
        out: Dict[str, Any] = {}
        for name in RECORDED + LM_RECORDED:
            spec = DECODE_OPTIONS[name]
            using = [m for m in DECODING_METHODS if spec.modes is None or m in spec.modes]
            for group in ([m for m in modes if m in using], using):
                found = self._found(group, name, lm_sha)
                if found:
                    break
            if len(found) == 1:
                out[name] = next(iter(found))
            elif len(found) > 1 and name not in self.warned:  # once per option, not per call
                self.warned.add(name)
                logging.warning("decoding records disagree on %s (%s); using %s's default", name,
                                "; ".join(f"{v} in {', '.join(p)}" for v, p in found.items()), "run.sh")
            if name not in out and name in RUN_SH_DEFAULTS:
                out[name] = RUN_SH_DEFAULTS[name]
        return out

    def _found(self, modes: Sequence[str], name: str, lm_sha: Optional[str]) -> Mapping[Any, List[str]]:
        found: Dict[Any, List[str]] = {}
        for mode in modes:
            for value, paths in self.values.get((mode, name), {}).items():
                paths = [p for p in paths if name not in LM_RECORDED or self.lm_sha.get(p) == lm_sha]
                if paths:
                    found.setdefault(value, []).extend(paths)
        return found
