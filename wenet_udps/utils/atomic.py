"""The one way the package, tools/ and bench/ write an output file: atomically, so a file is whole or absent.

Every output goes to a hidden temporary file in the same directory (``.<name>.tmp.<pid>.<n><random>``), is flushed and
fsync'ed, then ``os.replace``d onto its final name, and the directory is fsync'ed. When anything fails on the way (a
full disk, a permission, the caller's own error in the middle of a file written line by line, Ctrl-C) the temporary
file is removed and the final file, if one was there, is left as it was. An ``OSError`` is raised again naming the
**final** path (never the temporary one), so ``cli.run_cli`` prints ``<prog>: error: <final path>: No space left on
device (not written: ...)`` and exits 1.

- :func:`open_atomic`: a context manager yielding the file object (text or binary), for files written line by line
  or by a library that takes a file (``torch.save``, ``np.save``, ``json.dump``, ``tarfile``, ``soundfile``,
  ``savefig``, ``onnx``);
- :func:`write_bytes`, :func:`write_text`, :func:`write_json`: a whole file at once;
- :func:`temp_path`: a context manager yielding a temporary *path*, for an external program (KenLM's
  ``build_binary``) or a library that only takes a path: what it wrote there is renamed onto the final name;
  :func:`program_failure` then gives the program's real reason when it fails (an OS error it reports, naming the
  final file, or its last meaningful line, never a progress bar).

A final path that exists and is not a regular file (``/dev/null``, a FIFO, ``/dev/stdout``) cannot be replaced and
holds no partial file: it is written straight through. A symbolic link is followed: the file it names is replaced.
``tests/utils/test_atomic_guard.py`` fails on any write in wenet_udps/, tools/ or bench/ that does not come here.

This module imports only the standard library, so every layer (and every script) may use it.
"""
import contextlib
import errno
import itertools
import json
import os
import re
import signal
import stat
from typing import IO, Any, Iterator

TMP_MARK = ".tmp."   # in every temporary name: the checkpoint readers skip such files (and globs: a leading dot)
NOT_WRITTEN = "not written: no partial file left, any earlier file unchanged"
_counter = itertools.count()


def _final(path: "str | os.PathLike") -> str:
    path = os.fspath(path)
    return os.path.realpath(path) if os.path.islink(path) else path


def _streamed(path: str) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a FIFO): it is written through, not replaced."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _failed(e: OSError, path: str) -> OSError:
    """``e`` again, naming the final ``path`` (a temporary name would send the user looking for the wrong file)."""
    reason = e.strerror or str(e)
    return OSError(e.errno, f"{reason} ({NOT_WRITTEN})", path)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def temp_path(path: "str | os.PathLike") -> Iterator[str]:
    """Yield a temporary path beside ``path``; when the block ends without an error, the file written there is
    fsync'ed and renamed onto ``path``; on any error it is removed. An ``OSError`` of the write (one naming no file,
    or the temporary one; also when the block wrote nothing there) is raised again naming ``path``; another file's
    (an input the block read) as it is."""
    final = _final(path)
    directory = os.path.dirname(os.path.abspath(final))
    # pid and counter: unique in this run; the random part: a file a killed run left (a container's pids repeat)
    tmp = os.path.join(directory, f".{os.path.basename(final)}{TMP_MARK}{os.getpid()}.{next(_counter)}"
                                  f"{os.urandom(4).hex()}")
    try:
        yield tmp
        with contextlib.suppress(FileNotFoundError):  # a file replaced keeps its permissions (a private one stays so)
            os.chmod(tmp, stat.S_IMODE(os.stat(final).st_mode))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        _fsync_dir(directory)
    except OSError as e:
        if e.filename not in (None, tmp):  # another file's error (an input the block read): as it is
            raise
        raise _failed(e, final) from e
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


@contextlib.contextmanager
def open_atomic(path: "str | os.PathLike", mode: str = "w", *, encoding: str = "utf-8",
                newline: "str | None" = None) -> Iterator[IO[Any]]:
    """``open(path, mode)`` that makes ``path`` appear only whole: yields a file object (``mode`` "w" text with
    ``encoding``, "wb" binary) on a temporary file, renamed onto ``path`` when the block ends without an error;
    on any error removed, the earlier ``path`` unchanged (see the module's docstring)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_atomic: mode must be 'w' or 'wb', got {mode!r}")
    text = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
    final = _final(path)
    if _streamed(final):  # /dev/null, a FIFO: nothing to rename, nothing partial can stay behind
        try:
            with open(final, mode, **text) as f:
                yield f
        except OSError as e:
            if e.filename not in (None, final):
                raise
            raise _failed(e, final) from e
        return
    with temp_path(final) as tmp:
        try:
            f = open(tmp, mode.replace("w", "x"), **text)
        except FileNotFoundError as e:  # the directory is missing: name the file the user asked for
            raise _failed(e, final) from e
        with f:
            yield f
            f.flush()


def write_bytes(path: "str | os.PathLike", data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`open_atomic`)."""
    with open_atomic(path, "wb") as f:
        f.write(data)


def write_text(path: "str | os.PathLike", text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (:func:`open_atomic`); no newline translation."""
    with open_atomic(path, "w", encoding=encoding, newline="") as f:
        f.write(text)


def write_json(path: "str | os.PathLike", obj: Any, **dumps: Any) -> None:
    """Write ``obj`` as JSON (``json.dumps(obj, **dumps)``, serialised before the file is opened) atomically."""
    write_text(path, json.dumps(obj, **dumps))


FULL_BELOW = 1 << 20   # a program that failed with less free beside its output met a full disk
_PROGRESS = re.compile(r"^[-*=0-9 ]*$|^ERROR$")   # KenLM's progress bars and its closing "ERROR"
_ERRNO_OF = {os.strerror(code): code for code in errno.errorcode}


def program_failure(program: str, output: str, final: str, returncode: int = 1) -> str:
    """The reason an external program that was writing ``final`` (through :func:`temp_path`) failed, from its
    ``output`` (stdout, then stderr) and exit status: raises an ``OSError`` naming ``final`` when the program reports
    an OS error writing beside it (a full disk, a permission), or naming the other file it reports (its scratch
    file), or when ``final``'s file system is full (build_binary writes a memory map: on a full disk it dies of
    SIGBUS, saying nothing); else returns its last meaningful line (never a progress bar), or the signal that
    killed it."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        for reason, code in sorted(_ERRNO_OF.items(), key=lambda item: -len(item[0])):
            if reason not in line:
                continue
            where = re.search(r" in (/\S+)", line[line.index(reason):])
            path = where.group(1) if where else final
            beside = os.path.dirname(os.path.abspath(path)) == os.path.dirname(os.path.abspath(final))
            raise OSError(code, f"{reason} ({program}: {NOT_WRITTEN})" if beside else
                          f"{reason} ({program}'s scratch file; {final} {NOT_WRITTEN})", final if beside else path)
    try:
        fs = os.statvfs(os.path.dirname(os.path.abspath(final)))
        free = fs.f_bavail * fs.f_frsize
    except OSError:
        free = FULL_BELOW
    if free < FULL_BELOW:
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({program} failed, exit {returncode}, with "
                                    f"{free} bytes free; {NOT_WRITTEN})", final)
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    meaningful = [line for line in lines if not _PROGRESS.match(line)]
    return meaningful[-1] if meaningful else f"{program} said nothing"
