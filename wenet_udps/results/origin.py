"""A result is bound to what made it: its ``decode.info`` must name the mode, the experiment and the set of the
folder it lies in, ``EXP/<name>/<set>/<mode>``.

The results table takes its row from the experiment folder, its column from the mode folder and its set from the
set folder; the ``decode.info`` beside the ``text`` records what really ran (wenet_udps.utils.source_info):
``mode`` (recognize writes one per mode folder, sherpa_decode its variant's name, e.g. ``sherpa-streaming_int8``),
the ``checkpoint`` and the decoded list ``test_data``. ``cp -a EXP/test/attention EXP/test/attention_rescoring``
would otherwise put attention's number in the rescoring column. :func:`origin_problem` says what disagrees:

- mode: the folder is the recorded mode, or that mode with a tag (run.sh's ``<mode>_<lm_tag>``), but never a name
  that another, longer mode begins (``ctc_prefix_beam_search`` under ``ctc_prefix_beam_search_lm_big``). A
  legacy ``decode.info`` (wenet_udps.scoring.record: no ``mode``, nor any other key only current writers write)
  must at least list the folder's mode among its ``modes``; a current one must be whole (``record_problem``);
- experiment: the checkpoint lies in the experiment folder, or the folder holds a file of that name with the
  recorded SHA-256 (an experiment copied whole); without a SHA-256, its folder has the experiment's name;
- set: the decoded list lies in a folder of the set's name (``data/test/data.list`` for ``EXP/x/test``);
- LM: the tag of an LM mode's folder names the LM recorded (``lm``): ``<mode>_<T>`` is run.sh's folder of
  ``<data>/lm_<T>/lm.bin`` (--lm_tag T), so its LM lies in a folder ``lm_<T>``, and an untagged folder's LM in none
  named ``lm_...`` (a result copied under another tag would show one LM's number in another's column). One column
  holding one LM is collect_results' check of ``lm_sha256`` within a column.

Only a ``decode.info`` in the mode folder itself binds the mode (one in the set or experiment folder is shared).
"""
import os
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional

from wenet_udps.scoring.record import record_problem
from wenet_udps.utils.source_info import file_sha256


def folder_mode(name: str, modes: Iterable[str]) -> Optional[str]:
    """The mode a result folder ``name`` is of: the longest of ``modes`` that it is, or that it begins followed by
    ``_`` (a tag); None when none."""
    fits = [m for m in modes if name == m or name.startswith(m + "_")]
    return max(fits, key=len) if fits else None


def _inside(path: str, folder: Path) -> bool:
    try:
        Path(os.path.abspath(path)).resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _lm_tag_problem(info: Mapping[str, str], mode_dir: Path, modes: list, lm_modes: Iterable[str],
                    where: str) -> Optional[str]:
    """What in the recorded LM disagrees with the LM tag of ``mode_dir``'s name, or None (no LM mode, no LM)."""
    mode = folder_mode(mode_dir.name, modes + [info.get("mode", "")])
    if mode not in lm_modes or not info.get("lm"):
        return None
    tag = mode_dir.name[len(mode) + 1:]
    folder = Path(info["lm"]).parent.name
    if (folder == f"lm_{tag}") if tag else not folder.startswith("lm_"):
        return None
    return (f"{where} records the LM {info['lm']}, but the folder {mode_dir.name}/ names the LM of "
            f"{'lm_' + tag if tag else 'lm'}/ (run.sh --lm_tag: copied or renamed from another LM's column?)")


def origin_problem(info: Mapping[str, str], mode_dir: Path, modes: Iterable[str], own_record: bool,
                   sums: Optional[Dict[str, str]] = None, lm_modes: Iterable[str] = ()) -> Optional[str]:
    """What in ``info`` (the ``decode.info`` of ``mode_dir``, :func:`wenet_udps.utils.source_info.read_record`)
    disagrees with the folder ``EXP/<name>/<set>/<mode>`` it describes, or None. ``modes``: every result folder
    name a decoder writes (decoding methods, sherpa variants), ``lm_modes`` those that decode with a word LM;
    ``own_record``: the record lies in ``mode_dir``."""
    sums = {} if sums is None else sums
    test_dir, exp_dir = mode_dir.parent, mode_dir.parent.parent
    modes = list(modes)
    where = f"{mode_dir / 'decode.info' if own_record else 'its decode.info'}"
    problem = record_problem(info, where) if own_record else None
    if problem:   # (scoring.record: a current record lacking a key, or its mode not among its modes)
        return problem
    if own_record and info.get("mode"):
        if folder_mode(mode_dir.name, modes + [info["mode"]]) != info["mode"]:
            return (f"{where} records mode {info['mode']}, but it lies in {mode_dir.name}/ (copied or renamed "
                    f"from another mode's folder?)")
    elif own_record and info.get("modes"):   # a legacy record (record_problem refused a current one without mode)
        ran = info["modes"].split()
        if folder_mode(mode_dir.name, modes + ran) not in ran:
            return (f"{where} records modes {info['modes']}, none of which is {mode_dir.name} (copied or renamed "
                    f"from another mode's folder?)")
    checkpoint = info.get("checkpoint")
    if checkpoint and not _inside(checkpoint, exp_dir):
        mine = exp_dir / Path(checkpoint).name
        if info.get("sha256"):
            if not mine.is_file() or sums.setdefault(str(mine), file_sha256(str(mine))) != info["sha256"]:
                return (f"{where} records checkpoint {checkpoint}, which is not of the experiment {exp_dir} "
                        f"(copied from another experiment?)")
        elif Path(checkpoint).parent.name != exp_dir.name:
            return (f"{where} records checkpoint {checkpoint}, which is not of the experiment {exp_dir} (copied from "
                    f"another experiment?)")
    lm_problem = _lm_tag_problem(info, mode_dir, modes, tuple(lm_modes), where)
    if lm_problem:
        return lm_problem
    data = info.get("test_data")
    if data and Path(data).parent.name != test_dir.name:
        return (f"{where} records the decoded list {data}, which is not of the set {test_dir.name} (copied from "
                f"another set's folder?)")
    return None
