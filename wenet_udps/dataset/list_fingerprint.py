"""A cheap fingerprint of the audio a data list names, for run.sh's stage 5 and 6 skip keys (issue 80 round 8).

A decode's stamp held the md5 of ``data.list``, which names paths only: a wav copied over another at the same path
left the key as it was, and stage 5 kept the old WER. The fingerprint is the md5 of each distinct file the list
names (a raw list's ``wav``, a shard list's tars) with its size and modification time in nanoseconds, as make
decides: a file written since is a new decode, and no audio is read, so a LibriSpeech-sized list stays fast
(10,000 lines: see docs/failure_behaviour.md). A file not there is ``absent``, a URL only its address (nothing to
stat). ``python -m wenet_udps.dataset.list_fingerprint LIST`` prints it; a list it cannot read prints
``unreadable`` (the decode then runs, and recognize names the bad line).
"""
import hashlib
import os
import sys
from typing import Iterable, List, Optional

from wenet_udps.dataset.lists import list_kind, read_raw_list, read_shard_list
from wenet_udps.utils.cli import UserError


def listed_files(path: str) -> List[str]:
    """The audio files (raw list) or tars (shard list) ``path`` names, each once, in the list's order."""
    kind = list_kind(path)[0]
    names: Iterable[str] = ([s["wav"] for s in read_raw_list(path)] if kind == "raw"
                            else read_shard_list(path) if kind != "empty" else [])
    return list(dict.fromkeys(names))


def file_stamp(name: str) -> str:
    if name.startswith(("http://", "https://")):
        return name
    try:
        st = os.stat(name)
    except OSError:
        return f"{name}\tabsent"
    return f"{name}\t{st.st_size}\t{st.st_mtime_ns}"


def fingerprint(path: str) -> str:
    """``<md5> (<n> files by size and mtime)`` of the files ``path`` names."""
    names = listed_files(path)
    digest = hashlib.md5()
    for name in names:
        digest.update(file_stamp(name).encode("utf-8", "surrogateescape") + b"\n")
    return f"{digest.hexdigest()} ({len(names)} files by size and mtime)"


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m wenet_udps.dataset.list_fingerprint LIST", file=sys.stderr)
        return 2
    try:
        print(fingerprint(argv[0]) if os.path.isfile(argv[0]) else "absent")
    except (UserError, ValueError, OSError):   # recognize refuses such a list, naming its line
        print("unreadable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
