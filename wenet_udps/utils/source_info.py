"""What a result or an export was made from, and the one rule for when it no longer counts.

``recognize`` writes ``<result_dir>/<mode>/decode.info``, ``export --format sherpa-onnx`` writes
``<output_dir>/export.info`` and ``sherpa_decode`` copies that into its ``<result_dir>/decode.info``: ``key: value``
lines naming the checkpoint by absolute path and SHA-256, and the config. A checkpoint replaced under the same name
(``--force`` retraining, a re-average of other epochs) or removed since is another model: every result made from
the old one is stale, and tools/collect_results.py leaves it out of the table, saying so.
A ``decode.info`` without ``sha256`` (written before this rule) cannot be checked and counts as current. The
``*_lm`` modes' ``decode.info`` also name their word LM (``lm``, ``lm_sha256``, order, size): a result whose LM has
been rebuilt or removed since is stale by the same rule, so no table mixes LMs silently.
"""
import hashlib
import os
import re
from typing import Dict, Mapping, Optional, Tuple

_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:=]\s*(.*?)\s*$")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_SUMS: Dict[Tuple[str, int, int, int, int, int], str] = {}


def content_sha256(path: str) -> str:
    """The SHA-256 of ``path``, computed again only when the file may have changed: its inode, size, modification
    and change times (the change time moves on every write, also one that restores the modification time) are
    those of the last computation. A published LM is gigabytes; a result, an LM, a model is identified by this."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _SUMS:
        _SUMS[key] = file_sha256(path)
    return _SUMS[key]


def model_source(checkpoint: str, config: str) -> Dict[str, str]:
    """The source record of a model loaded from ``checkpoint`` with ``config``."""
    return {"checkpoint": os.path.abspath(checkpoint), "sha256": file_sha256(checkpoint),
            "config": os.path.abspath(config)}


def write_source(path: str, source: Mapping[str, str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{key}: {value}\n" for key, value in source.items())


def read_source(path: str) -> Dict[str, str]:
    """The ``key: value`` lines of ``path`` (``key = value`` too); {} when there is no such file."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8", errors="replace") as f:
        return {m.group(1): m.group(2) for m in map(_LINE.match, f) if m}


def stale_reason(source: Mapping[str, str], sums: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Why a result made from ``source`` is stale (its checkpoint, or the word LM of an ``*_lm`` mode, removed or
    replaced), or None when current. ``sums`` caches the files' SHA-256 by path between calls."""
    sums = {} if sums is None else sums
    for what, path_key, sum_key in (("checkpoint", "checkpoint", "sha256"), ("LM", "lm", "lm_sha256")):
        expected, path = source.get(sum_key), source.get(path_key, "")
        if not expected:
            continue
        if not os.path.isfile(path):
            return f"its {what} {path} no longer exists"
        if path not in sums:
            sums[path] = file_sha256(path)
        if sums[path] != expected:
            return f"its {what} {path} has been replaced since (SHA-256 {expected[:12]}, now {sums[path][:12]})"
    return None
