"""What a results table was made with: commit, date, machine, library versions and the numeric settings that change
CPU results (docs/reproducibility.md), so that a stale or foreign table shows.

    from wenet_udps.utils.provenance import provenance, provenance_markdown
    lines = provenance_markdown(provenance(seeds=[1, 2, 3]))
"""
import datetime
import getpass
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from wenet_udps.utils.atomic import write_json

ROOT = Path(__file__).resolve().parents[2]
# Environment variables that change the numbers (docs/reproducibility.md); recorded when set.
NUMERIC_ENV = ("ATEN_CPU_CAPABILITY", "WENET_UDPS_COMPILE", "WENET_UDPS_KERNEL", "OMP_NUM_THREADS", "MKL_CBWR",
               "TORCHINDUCTOR_CACHE_DIR")


def _git(*args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpuinfo(field: str) -> Optional[str]:
    """The value of ``field`` in /proc/cpuinfo's first CPU (Linux), else None."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else platform.processor())."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def compiled_vec_isa() -> str:
    """The vector ISA torch.compile's C++ code is built for on this machine (what the compiled UDPS tiles use).

    Inductor finds it by compiling and loading a probe per ISA (~6 s with its imports, each results table): the
    answer is kept in inductor's cache folder, under a key of everything it depends on (:func:`_vec_isa_key`)."""
    key = _vec_isa_key()
    cache = _inductor_cache_dir() / "wenet_udps_vec_isa.json"
    try:
        kept = json.loads(cache.read_text())
        if kept.get("key") == key:
            return kept["isa"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa
        isa = str(pick_vec_isa()) or "none"
    except Exception as exc:  # noqa: BLE001 - a private API: report rather than fail a results table
        return f"unknown ({type(exc).__name__})"
    try:  # a table that reads it half written, or not at all, only probes again
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_json(cache, {"key": key, "isa": isa})
    except OSError:
        pass
    return isa


def _inductor_cache_dir() -> Path:
    """torch inductor's cache folder (TORCHINDUCTOR_CACHE_DIR, else its default), found without importing it."""
    found = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return Path(found) if found else Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"


def _vec_isa_key() -> str:
    """What inductor's choice of vector ISA depends on: torch's version, the CPU's flags, ATEN_CPU_CAPABILITY (which
    caps it), TORCHINDUCTOR_VEC_ISA_OK (which can turn it off) and the C++ compiler it builds with ($CXX, else g++:
    its path and the file's size and time)."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    binary = os.path.realpath(compiler) if compiler else None
    stat = os.stat(binary) if binary else None
    facts = [torch.__version__, _cpuinfo("flags"), os.environ.get("ATEN_CPU_CAPABILITY"),
             os.environ.get("TORCHINDUCTOR_VEC_ISA_OK"), compiler, binary, stat and stat.st_size,
             stat and stat.st_mtime_ns]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def commit() -> str:
    """This checkout's commit (12 hex digits), "unknown" outside a git checkout, marked when files were changed."""
    found = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no"):
        found += " (uncommitted changes)"
    return found


def code_sha256() -> str:
    """SHA-256 of the package's source files (names and contents; no git needed): the code a process runs, which a
    commit names only when nothing was changed since."""
    package = ROOT / "wenet_udps"
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".h")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def provenance(seeds: Sequence[int] = ()) -> Dict[str, str]:
    """Key facts of this checkout and machine, as strings."""
    facts = {
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "ATen CPU capability": torch.backends.cpu.get_cpu_capability(),
        "compiled-code ISA": compiled_vec_isa(),
        "seeds": " ".join(str(s) for s in seeds) or "unknown (no train.yaml records one)",
    }
    facts.update({name: os.environ[name] for name in NUMERIC_ENV if name in os.environ})
    return facts


def provenance_markdown(facts: Dict[str, str]) -> List[str]:
    """A Markdown bullet list of :func:`provenance`'s facts."""
    return [f"- {key}: {value}" for key, value in facts.items()]
