"""WeNet data lists: raw ``data.list`` (JSON lines), shard lists (tar paths/URLs), and the exact partition.

Raw line: ``{"key": "utt1", "wav": "/path/utt1.wav", "txt": "text", "start": 0.5, "end": 2.0}`` (start/end
optional, seconds). Shard: a tar holding ``<key>.wav`` (or .flac, ...) and ``<key>.txt`` per utterance, members of one
utterance adjacent; the list holds one tar path or http(s) URL per line.
"""
import json
import logging
import math
import os
import tarfile
import urllib.request
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from wenet_udps.dataset.audio import AUDIO_EXTENSIONS, segment_problem
from wenet_udps.utils.kaldi_files import BOM, ListError, utf8_lines
from wenet_udps.utils.cli import open_input

# A shard member is read whole into memory, so its size is checked from its tar header first. The cap: the longest
# audio the length filter keeps (``filter_conf.max_length``, 10 ms frames) as uncompressed 96 kHz stereo float32,
# 768,000 bytes a second, plus 1 MiB of headers; and never above MAX_MEMBER_BYTES (256 MiB: 2.3 hours of 16 kHz
# 16-bit mono), which is also the cap when decoding (no length filter).
MAX_MEMBER_BYTES = 256 << 20
_BYTES_PER_SECOND = 96000 * 2 * 4


def read_raw_list(path: str) -> List[Dict[str, Any]]:
    """Parse a data.list; a malformed line raises ListError naming the file and line number, and so does a key
    given on two lines (both named), as the one reader of Kaldi files refuses one (utils/kaldi_files): each result
    file holds one line per key, so one of the two hypotheses would be lost (issue 80)."""
    samples = []
    first_line: Dict[str, int] = {}
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ListError(f"{where}: not a JSON object ({e.msg}): {line.strip()[:80]!r}") from None
        if not isinstance(obj, dict):
            raise ListError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for field in ("key", "wav", "txt"):
            if not isinstance(obj.get(field), str):
                raise ListError(f"{where}: field {field!r} missing or not a string")
        if not obj["key"] or any(c.isspace() or c == BOM for c in obj["key"]):
            # result files are "key text" lines: a key with white space would shift every word (and one holding a
            # byte-order mark would match no reference: the one reader's rule, utils/kaldi_files)
            raise ListError(f"{where}: key {obj['key']!r} is empty or contains white space or a byte-order mark")
        sample = {"key": obj["key"], "wav": obj["wav"], "txt": obj["txt"]}
        for field in ("start", "end"):
            if field in obj:
                value = obj[field]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ListError(f"{where}: field {field!r} of {obj['key']} must be a finite number of seconds, "
                                    f"got {value!r}")
                sample[field] = float(value)
        problem = segment_problem(sample.get("start"), sample.get("end"))
        if problem is not None:  # libsndfile would fail the seek ("psf_fseek() failed") and call it bad audio
            raise ListError(f"{where}: segment of {obj['key']} {problem}")
        if sample["key"] in first_line:
            raise ListError(f"{where}: duplicate utterance key {sample['key']!r} (also on line "
                            f"{first_line[sample['key']]})")
        first_line[sample["key"]] = lineno
        samples.append(sample)
    return samples


def list_kind(path: str) -> Tuple[str, int, str]:
    """(kind, line number, line) of the first non-empty line of ``path``: ``raw`` (a JSON object: a data.list),
    ``shard`` (one field: a tar path or URL), ``scp`` (a key and a value: a Kaldi wav.scp); ``empty``, 0, "" for
    a file of blank lines."""
    for lineno, line in utf8_lines(path):
        line = line.strip()
        if line:
            return ("raw" if line.startswith("{") else "shard" if len(line.split()) == 1 else "scp"), lineno, line
    return "empty", 0, ""


def read_shard_list(path: str) -> List[str]:
    """One tar path or URL per non-empty line. A raw data.list or a Kaldi wav.scp given as a shard list is a
    ListError naming the file, before any line is read as a tar (each would be one "error reading shard")."""
    lines = [(lineno, line.strip()) for lineno, line in utf8_lines(path) if line.strip()]
    kind, lineno, line = list_kind(path) if lines else ("empty", 0, "")
    first = line.split()[0] if line else ""
    if kind == "raw" or (kind == "scp" and not first.startswith(("http://", "https://"))
                         and not os.path.exists(first) and not os.path.exists(line)):
        what = "a JSON object: a raw data.list" if kind == "raw" else "'<key> <audio path>': a Kaldi wav.scp"
        raise ListError(f"{path}:{lineno}: not a shard list (one tar path or URL a line): its line is {what}; "
                        f"read it as data_type raw (--data_type raw), or make shards with tools/make_shard_list.py")
    return [line for _, line in lines]


def _open_stream(url: str):
    if url.startswith(("http://", "https://")):
        return urllib.request.urlopen(url, timeout=60)
    return open_input(url, "rb")


def member_cap(max_length: float) -> int:
    """The largest shard member read, in bytes, for ``filter_conf.max_length`` (see ``MAX_MEMBER_BYTES``)."""
    return int(min(MAX_MEMBER_BYTES, max_length / 100 * _BYTES_PER_SECOND + (1 << 20)))


def iterate_shard(url: str, stats: Dict[str, int],
                  max_member_bytes: int = MAX_MEMBER_BYTES) -> Iterator[Dict[str, Any]]:
    """Stream one shard: yields ``{"key", "txt", "audio": bytes, "wav": "<shard>#<member>"}``.

    An utterance lacking its audio or text is dropped with a warning and counted in ``stats["missing_member"]``,
    one whose text is not UTF-8 in ``stats["bad_text"]``, one whose key is empty or holds white space (it would
    break the ``key text`` result lines, as data.list keys would) in ``stats["bad_key"]``, one with a member
    larger than ``max_member_bytes`` (by its tar header; the member is skipped unread) in
    ``stats["oversize_member"]`` (the shard goes on). An unreadable or truncated shard is
    logged and counted in ``stats["shard_error"]``; its remaining utterances are lost. How many is unknowable from
    the broken shard itself, so ``stats`` also counts the complete shards and their utterances (``shard_ok``,
    ``shard_ok_utts``) and the utterances read from broken ones before the error (``shard_error_utts``), from which
    ``DataTally`` estimates the loss.
    """
    seen = 0

    def finish(group: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        nonlocal seen
        seen += 1
        problem = next((k for k in ("bad_key", "oversize_member", "bad_text") if group.get(k)), None)
        if problem:
            logging.warning("skipping utterance %r in shard %s: %s", group["key"], url, group[problem])
            stats[problem] += 1
        elif "audio" in group and "txt" in group:
            yield group
        else:
            missing = "audio" if "audio" not in group else "text"
            logging.warning("skipping utterance %s in shard %s: no %s member", group["key"], url, missing)
            stats["missing_member"] += 1

    group: Dict[str, Any] = {}
    try:
        with _open_stream(url) as stream, tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                key, _, ext = member.name.rpartition(".")
                if group and key != group["key"]:
                    yield from finish(group)
                    group = {}
                group["key"] = key
                if not key or any(c.isspace() or c == BOM for c in key):
                    group["bad_key"] = f"member name {member.name!r}: the key is empty or holds white space or a BOM"
                if member.size > max_member_bytes:
                    group["oversize_member"] = (f"member {member.name!r} has {member.size} bytes, more than the "
                                                f"{max_member_bytes} read at most (lists.member_cap: "
                                                f"dataset_conf.filter_conf.max_length)")
                if group.get("bad_key") or group.get("oversize_member"):
                    continue  # the stream skips the member's data unread
                data = tar.extractfile(member).read()
                if ext == "txt":
                    try:
                        group["txt"] = data.decode("utf-8").strip()
                    except UnicodeDecodeError as e:
                        group["bad_text"] = f"{member.name} is not UTF-8 ({e.reason} at byte {e.start})"
                elif ext.lower() in AUDIO_EXTENSIONS:
                    group["audio"] = data
                    group["wav"] = f"{url}#{member.name}"
    except (OSError, tarfile.TarError) as e:
        logging.warning("error reading shard %s (%s); its remaining utterances are lost", url, e)
        stats["shard_error"] += 1
        stats["shard_error_utts"] += seen
        return
    if group:
        yield from finish(group)
    stats["shard_ok"] += 1
    stats["shard_ok_utts"] += seen


def partition(num_items: int, *, rank: int, world_size: int, worker_id: int, num_workers: int,
              shuffle: bool, seed: int, epoch: int) -> List[int]:
    """Indices of the list items that one (rank, worker) reads in one epoch.

    All ranks draw the same permutation from ``seed + epoch``, then take every ``world_size``-th item from
    ``rank`` and, of those, every ``num_workers``-th from ``worker_id``; so over all ranks and workers each item
    is read exactly once. Ranks may get unequal numbers (by up to one item, hence possibly unequal batch counts).
    """
    if not 0 <= rank < world_size or not 0 <= worker_id < num_workers:
        raise ValueError(f"bad partition rank={rank}/{world_size} worker={worker_id}/{num_workers}")
    order = np.arange(num_items)
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(num_items)
    return order[rank::world_size][worker_id::num_workers].tolist()


def unread_share(num_items: int, world_size: int) -> float:
    """About the share of a list's items an epoch leaves unread on ``world_size`` ranks: :func:`partition` gives
    each rank the floor or the ceiling of ``num_items / world_size`` items, and the epoch ends for all when the
    first rank runs out of batches, so the ``num_items % world_size`` extra items (whole shards, for a shard list)
    go mostly unread; 1.0 when a rank has no item at all (no rank then trains a step)."""
    if num_items < world_size:
        return 1.0
    return (num_items % world_size) / num_items
