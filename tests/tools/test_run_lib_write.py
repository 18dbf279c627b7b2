"""tools/run_lib.sh's write_atomic (mechanism F's shell side, issue 80): a stamp or a tuned LM weight is whole or
absent; a failed write stops the stage naming the file and leaves the earlier one. With the guard of the shell side:
run.sh and tools/*.sh write no file but through it (tests/utils/test_atomic_guard.py guards the Python side)."""
import errno
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bash(script: str, **env):
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . tools/log.sh; . tools/run_lib.sh; {script}"],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env})


def test_write_atomic_writes_whole_and_a_failed_write_leaves_the_earlier_file(tmp_path):
    target = tmp_path / "best"
    assert _bash(f'write_atomic "{target}" echo "12.5 0.3 1.0"').returncode == 0
    assert target.read_text() == "12.5 0.3 1.0\n"
    # the command fails half way (as on a full disk): exit 1, one line naming the file, nothing partial
    proc = _bash(f'half() {{ echo "12"; return 1; }}; write_atomic "{target}" half')
    assert proc.returncode == 1
    assert f"{target}: not written" in proc.stderr.strip().splitlines()[-1]
    assert target.read_text() == "12.5 0.3 1.0\n" and sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_stamp_write_on_a_full_tmpfs(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("no tiny tmpfs: mount -t tmpfs needs root (CAP_SYS_ADMIN); the failing-write case ran instead")
    try:
        (full / ".stage0.stamp").write_text("corpus=old\n")
        with open(full / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
        proc = _bash(f'stamp_write "{full}/.stage0.stamp" "corpus=new"')
        assert proc.returncode == 1 and f"{full}/.stage0.stamp: not written" in proc.stderr
        assert (full / ".stage0.stamp").read_text() == "corpus=old\n"
        assert sorted(p.name for p in full.iterdir()) == [".stage0.stamp", "filler"]
    finally:
        subprocess.run(["umount", "-l", str(full)], check=True)


# The shell side (run.sh's stages and tools/*.sh): a redirection to a file is write_atomic's (tools/run_lib.sh) or
# one of these, each with its reason.
SHELL_ALLOWED: Dict[Tuple[str, str], str] = {
    ("tools/run_lib.sh", '"${file}.partial"'): "write_atomic itself: renamed once the command succeeded, else "
                                                "removed",
    ("tools/run_eval.sh", '"${wer}.partial"'): "score_into: renamed over the wer once compute-wer succeeded",
    ("tools/run_lm.sh", '"${out}.partial"'): "the published LM: renamed once gzip succeeded, removed otherwise",
    ("tools/run_lib.sh", '"${exp}/.run.lock"'): "the lock file (flock); the pid in it is for a message only",
    ("tools/run_train.sh", '"${exp}/train.log"'): "the training log, appended deliberately (a resume continues it)",
    ("tools/run_train.sh", '"${tmp}/resume.err"'): "a scratch file of a mktemp -d dir",
    ("tools/run_setup.sh", '"${tmp}/describe.err"'): "a scratch file of a mktemp -d dir",
    ("tools/install.sh", '"${work}/error"'): "install.sh's scratch build dir (mktemp -d): its logs and error",
    ("tools/install.sh", '"${work}/download.log"'): "install.sh's scratch build dir (mktemp -d)",
    ("tools/install.sh", '"${work}/cmake.log"'): "install.sh's scratch build dir (mktemp -d)",
    ("tools/install.sh", '"${work}/build.log"'): "install.sh's scratch build dir (mktemp -d)",
}
_REDIRECT = re.compile(r"(?:(?<=\s)|^)(?:\d|&|\{\w+\})?>>?\|?\s*(\"[^\"]*\"|'[^']*'|[$/\w][^\s;|&)]*)"
                       r"|\btee\s+(?:-a\s+)?(\"[^\"]*\"|[$/\w][^\s;|&)]*)")


def _shell_writes(text: str) -> Iterator[Tuple[int, str]]:
    """(line, target) of every redirection or tee to a file in a shell script (comments and (( )) / [[ ]] left out)."""
    for n, line in enumerate(text.splitlines(), 1):
        code = re.sub(r"\(\(.*?\)\)|\[\[.*?\]\]", "", re.sub(r"(^|\s)#.*$", "", line))
        for m in _REDIRECT.finditer(code):
            target = m.group(1) or m.group(2)
            if target.rstrip("'") not in ("/dev/null", "/dev/stderr", "/dev/stdout") and not target[0].isdigit():
                yield n, target


def test_every_shell_write_goes_through_write_atomic():
    found, used = [], set()
    for path in [ROOT / "run.sh", *sorted((ROOT / "tools").glob("*.sh"))]:
        rel = path.relative_to(ROOT).as_posix()
        for line, target in _shell_writes(path.read_text(encoding="utf-8")):
            if (rel, target) in SHELL_ALLOWED:
                used.add((rel, target))
            else:
                found.append(f"{rel}:{line}: > {target}")
    assert not found, "shell writes outside write_atomic (tools/run_lib.sh):\n" + "\n".join(found)
    assert used == set(SHELL_ALLOWED), f"allow-list entries no longer needed: {sorted(set(SHELL_ALLOWED) - used)}"


@pytest.mark.parametrize("line", ['echo "${best}" > "${tune}/best"', 'printf x >> "$1"', 'cmd 2> "${dir}/err"',
                                  'x | tee "${out}/log"', 'cmd >"${f}"'])
def test_the_shell_scan_finds_each_kind_of_write(line):
    assert list(_shell_writes(line)), line


@pytest.mark.parametrize("line", ['cmd > /dev/null 2>&1', 'echo x >&2', '(( a > 0 ))', '[[ $a > $b ]]',
                                  'write_atomic "${f}" echo x', '# cmd > "${f}"', 'log "a -> ${out}"'])
def test_the_shell_scan_passes_what_writes_no_file(line):
    assert not list(_shell_writes(line)), line


def test_kept_by_binds_a_folder_of_kept_decodes_to_one_commit_its_inputs_and_its_package(tmp_path):
    """The research scripts' kept hypotheses (recipes/tiny_biasing.sh, recipes/an4/biasing_no_harm.sh) keep the
    cells a rerun finds done: a folder of another commit's or another model's decodes, a checkout with changes, or a
    python3 that imports another copy of the package must be refused before a cell is kept beside them (issue 80's
    attack: a PYTHONPATH of an older tree decoded every cell of a folder recorded as this commit's; another model
    and beam reused the first run's table)."""
    repo = tmp_path / "repo"
    (repo / "wenet_udps").mkdir(parents=True)
    (repo / "wenet_udps" / "__init__.py").write_text("")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "wenet_udps"], ["commit", "-qm", "one"]):
        subprocess.run(git + args, check=True)
    first = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    kept = tmp_path / "kept"

    def call(*settings, path=str(repo)):
        return _bash(f'cd "{repo}"; kept_by "{kept}" "{repo}" {" ".join(settings)}', PYTHONPATH=path)

    assert call("beam=10", "checkpoint_sha256=aa").returncode == 0
    assert (kept / "KEPT").read_text() == f"commit={first}\nbeam=10\ncheckpoint_sha256=aa\n"
    assert call("beam=10", "checkpoint_sha256=aa").returncode == 0     # a rerun made alike resumes
    other = call("beam=30", "checkpoint_sha256=aa")
    assert other.returncode == 1 and "beam: '10' -> '30'" in other.stderr
    elsewhere = call("beam=10", "checkpoint_sha256=aa", path=str(ROOT))   # the package of another checkout
    assert elsewhere.returncode == 1 and f"imports wenet_udps from {ROOT}" in elsewhere.stderr
    (repo / "wenet_udps" / "new.py").write_text("")
    untracked = call("beam=10", "checkpoint_sha256=aa")
    assert untracked.returncode == 1 and "untracked files in wenet_udps/" in untracked.stderr
    subprocess.run(git + ["add", "wenet_udps/new.py"], check=True)
    changed = call("beam=10", "checkpoint_sha256=aa")
    assert changed.returncode == 1 and "has changes to tracked files" in changed.stderr
    subprocess.run(git + ["commit", "-qm", "two"], check=True)
    later = call("beam=10", "checkpoint_sha256=aa")
    assert later.returncode == 1 and f"commit: '{first}' -> '" in later.stderr
    assert (kept / "KEPT").read_text().startswith(f"commit={first}\n")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "COMMIT").write_text(first + "\n")                  # a folder kept before KEPT records
    kept = tmp_path / "old"
    unrecorded = call("beam=10")
    assert unrecorded.returncode == 1 and "no KEPT record" in unrecorded.stderr
