"""A PATH folder holding only the commands a test allows, to fake a machine that lacks the others."""
import os
import shutil
import sys
from pathlib import Path
from typing import Dict, Iterable

CORE = ("bash", "dirname", "basename", "date", "sed", "awk", "head", "tail", "cat", "tr", "ls", "mkdir", "rm",
        "grep", "find", "sort", "wc", "env", "id", "df", "nproc", "mktemp")


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return path


def bare_bin(bindir: Path, tools: Iterable[str] = CORE, stubs: Dict[str, str] = None,
             python: bool = True) -> Dict[str, str]:
    """Fill ``bindir`` and return an environment whose PATH is that folder alone.

    ``tools`` are linked to the real commands; ``stubs`` maps a name to a bash body replacing it; ``python``
    adds python3 as a script that execs this interpreter by its own path, so a venv's python keeps its venv
    (a symlink elsewhere would lose it).
    """
    bindir.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        if found and not (bindir / tool).exists():
            (bindir / tool).symlink_to(found)
    if python:
        write_script(bindir / "python3", f'exec "{sys.executable}" "$@"\n')
    for name, body in (stubs or {}).items():
        target = bindir / name
        if target.is_symlink() or target.exists():
            target.unlink()
        write_script(target, body)
    return dict(os.environ, PATH=str(bindir))
