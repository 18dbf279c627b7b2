"""What a result or an export was made from, and the one rule for when it no longer counts.

``recognize`` writes ``<result_dir>/<mode>/decode.info``, ``export --format sherpa-onnx`` writes
``<output_dir>/export.info`` and ``sherpa_decode`` copies that into its ``<result_dir>/decode.info``: ``key: value``
lines naming the checkpoint by absolute path and SHA-256, and the config. A checkpoint replaced under the same name
(``--force`` retraining, a re-average of other epochs) or removed since is another model: every result made from
the old one is stale, and tools/collect_results.py leaves it out of the table, saying so.
A ``decode.info`` without ``sha256`` (written before this rule) cannot be checked and counts as current. The
``*_lm`` modes' ``decode.info`` also name their word LM (``lm``, ``lm_sha256``, order, size): a result whose LM has
been rebuilt or removed since is stale by the same rule, so no table mixes LMs silently.

A record moves with its results: after ``mv exp exp_old`` (an experiment root moved or copied elsewhere), a
recorded file that no longer exists at its path is looked for at the same place relative to the record
(:func:`located`, :func:`read_record`) and counts as found only with the recorded SHA-256.
"""
import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import open_input

_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:=]\s*(.*?)\s*$")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open_input(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_SUMS: Dict[Tuple[str, int, int, int, int, int], str] = {}
_SUMS_LOCK = threading.Lock()  # threads decoding with one model ask for the same LM's sum (the file is hashed unlocked)


def content_sha256(path: str) -> str:
    """The SHA-256 of ``path``, computed again only when the file may have changed: its inode, size, modification
    and change times (the change time moves on every write, also one that restores the modification time) are
    those of the last computation. A published LM is gigabytes; a result, an LM, a model is identified by this."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _SUMS_LOCK:
        known = _SUMS.get(key)
    if known is None:
        known = file_sha256(path)
        with _SUMS_LOCK:
            _SUMS[key] = known
    return known


def model_source(checkpoint: str, config: str) -> Dict[str, str]:
    """The source record of a model loaded from ``checkpoint`` with ``config``."""
    return {"checkpoint": os.path.abspath(checkpoint), "sha256": file_sha256(checkpoint),
            "config": os.path.abspath(config)}


def write_source(path: str, source: Mapping[str, str]) -> None:
    write_text(path, "".join(f"{key}: {value}\n" for key, value in source.items()))


def read_source(path: str) -> Dict[str, str]:
    """The ``key: value`` lines of ``path`` (``key = value`` too); {} when there is no such file."""
    if not os.path.isfile(path):
        return {}
    with open_input(path, "r", encoding="utf-8", errors="replace") as f:
        return {m.group(1): m.group(2) for m in map(_LINE.match, f) if m}


# The files a record names: (what, path key, SHA-256 key).
RECORDED_FILES = (("checkpoint", "checkpoint", "sha256"), ("LM", "lm", "lm_sha256"))


def _sha(path: str, sums: Dict[str, str]) -> str:
    if path not in sums:
        sums[path] = file_sha256(path)
    return sums[path]


def located(source: Mapping[str, str], near: str, sums: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """``source`` with the path of each recorded file (checkpoint, LM) that no longer exists there replaced by where
    it lies now with its recorded SHA-256, below ``near`` (the dir holding the record) or one of its parents, at the
    place the recorded path's last 1, 2, ... components name (``/old/exp/x/avg_5.pt`` recorded by
    ``/new/exp/x/test/attention/decode.info`` is found as ``/new/exp/x/avg_5.pt``); nearest first. A file that
    exists at its recorded path is left there, replaced or not (:func:`stale_reason` decides)."""
    sums = {} if sums is None else sums
    out = dict(source)
    here = Path(os.path.abspath(near))
    for _, path_key, sum_key in RECORDED_FILES:
        expected, path = source.get(sum_key), source.get(path_key, "")
        if not expected or not path or os.path.isfile(path):
            continue
        tail = Path(path).parts[1:] if os.path.isabs(path) else Path(path).parts
        found = (str(c) for base in (here, *here.parents) for k in range(1, len(tail) + 1)
                 if (c := base.joinpath(*tail[-k:])).is_file() and _sha(str(c), sums) == expected)
        out[path_key] = next(found, path)
    return out


def read_record(path: str, sums: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """:func:`read_source` of ``path`` (a ``decode.info`` or ``export.info``), its files :func:`located` from
    its own dir."""
    return located(read_source(path), os.path.dirname(os.path.abspath(path)), sums)


def stale_reason(source: Mapping[str, str], sums: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Why a result made from ``source`` is stale (its checkpoint, or the word LM of an ``*_lm`` mode, removed or
    replaced), or None when current. ``sums`` caches the files' SHA-256 by path between calls. Read the record
    with :func:`read_record`, so that a moved experiment root is not taken for a removed checkpoint."""
    sums = {} if sums is None else sums
    for what, path_key, sum_key in RECORDED_FILES:
        expected, path = source.get(sum_key), source.get(path_key, "")
        if not expected:
            continue
        if not os.path.isfile(path):
            return f"its {what} {path} no longer exists"
        if _sha(path, sums) != expected:
            return f"its {what} {path} has been replaced since (SHA-256 {expected[:12]}, now {sums[path][:12]})"
    return None
