"""Per-utterance biasing lists (a *context list*): one line per utterance, the key, then its phrases, each after a
tab::

    2830-3980-0017<TAB>ACTERRALLY<TAB>ARISEN<TAB>AUBIGNY
    237-134493-0004<TAB>INTERMINGLED<TAB>MATED
    260-123286-0016

A phrase may hold spaces (several words) and a `` :score`` at its end, as a line of a hotword file does; a key
alone is an utterance without a list. ``recognize --context_list`` decodes each utterance with its own list
(Le et al.'s LibriSpeech lists are per utterance, 100 to 2,000 words each), and ``compute-biased-wer.py
--biasing_lists`` scores each utterance against its own. Refused, naming the file and line: a line whose key is
empty, a key given twice, an empty phrase between tabs; and against a data set (:func:`check_keys`) a key the set
does not hold, or an utterance of the set without a line.
"""
from typing import Dict, Iterable, List, Tuple

from wenet_udps.utils.cli import UserError
from wenet_udps.utils.kaldi_files import utf8_lines

ContextLists = Dict[str, Tuple[int, List[str]]]   # key -> (its line number, its phrases as written)


def read_context_lists(path: str) -> ContextLists:
    """key -> (line number, phrases) of a context list (module docstring); UserError naming the line."""
    out: ContextLists = {}
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        key, *phrases = line.rstrip("\n").split("\t")
        if not key.strip() or key != key.strip() or " " in key:
            raise UserError(f"{path}:{lineno}: {key!r} is not a key: a line is the utterance's key, then its "
                            f"phrases, each after a tab")
        if key in out:
            raise UserError(f"{path}:{lineno}: {key} was given at line {out[key][0]} already (one line per "
                            f"utterance)")
        empty = [i for i, p in enumerate(phrases, 1) if not p.strip()]
        if empty:
            raise UserError(f"{path}:{lineno}: phrase {empty[0]} of {key} is empty (two tabs in a row, or a tab at "
                            f"the end)")
        out[key] = (lineno, [p.strip() for p in phrases])
    if not out:
        raise UserError(f"{path}: no line (one per utterance: key, then its phrases after tabs)")
    return out


def check_keys(lists: ContextLists, path: str, keys: Iterable[str], what: str) -> None:
    """UserError for a key of ``lists`` (read from ``path``) that ``keys`` (the utterances of ``what``) does not hold,
    naming its line, or for utterances of ``what`` without a line, naming the first and how many."""
    keys = list(keys)
    known = set(keys)
    unknown = sorted((lineno, key) for key, (lineno, _) in lists.items() if key not in known)
    if unknown:
        lineno, key = unknown[0]
        raise UserError(f"{path}:{lineno}: {key} is not an utterance of {what} ({len(unknown)} key(s) of {path} "
                        f"are not): a list for another set?")
    missing = [k for k in keys if k not in lists]
    if missing:
        raise UserError(f"{path}: no line for {missing[0]} of {what} ({len(missing)} of its {len(keys)} utterances "
                        f"have none; a line holding the key alone is an utterance without a list)")
