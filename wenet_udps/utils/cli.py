"""Command-line entry points: a user's mistake is one line on stderr and a non-zero exit, never a traceback.

The one argument-validation layer of every ``wenet_udps.bin`` entry point and ``tools/*.py`` script:

- before any work: :class:`ArgumentParser` (an argparse parser whose usage errors are one line, exit 2) with the
  ``type=`` checkers below, so a missing input file, a number out of range, an output path that cannot be
  created or an output file that is one of the inputs is refused while the arguments are parsed, before a model
  is loaded or an utterance decoded. Checks that involve two options (or the config) call ``parser.error`` right
  after ``parse_args``;
- during the work: :func:`run_cli` turns a :class:`UserError` (exit 2; exit 1 for ``counts.WorkFailed``, a pass
  that used nothing or too little of its list) or an ``OSError`` (exit 1: a full disk, a permission, a file removed
  meanwhile) into one line ``<prog>: error: <message>``.

This module imports only the standard library (torch only inside :func:`device`), so every layer of the package
may use it.
"""
import argparse
import math
import os
import stat
import sys
from typing import Callable, List, Optional, Sequence


class UserError(ValueError):
    """A mistake the user can fix (config, data, checkpoint, experiment directory); its message says what to do."""


class NotRegularFileError(UserError):
    """A path read as a file that is a FIFO, socket, device or directory."""


# What a path that is not a regular file is (``stat`` test, words for a message).
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe): reading it waits for a writer"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device: reading it may never end"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def regular_file(path, what: str = "") -> str:
    """``path`` unchanged when it is a regular file (after links) or does not exist (the open that follows says
    so); else :class:`NotRegularFileError` naming it (``what``: the key or option that gave it). Every reader of a
    file the user names calls this (or :func:`open_input`) before opening it: a FIFO would hang the program, a
    device never end (tests/utils/test_regular_inputs.py finds the readers)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return path   # an open file or a buffer: nothing to wait on
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):   # (ValueError: a NUL in the path; the open that follows says so)
        return path
    if stat.S_ISREG(mode):
        return path
    kind = next((words for test, words in _KINDS if test(mode)), "not a regular file")
    raise NotRegularFileError(f"{what + ' ' if what else ''}{os.fspath(path)} is {kind}; give a regular file")


def open_input(path, mode: str = "rb", what: str = "", **kwargs):
    """``open(path, mode, **kwargs)`` for reading, after :func:`regular_file`; a write mode is a ValueError (an
    output is written by ``utils.atomic`` alone)."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_input reads: mode {mode!r} writes (use wenet_udps.utils.atomic)")
    return open(regular_file(path, what), mode, **kwargs)


def one_line(text: str) -> str:
    """``text`` on one line (a message of several lines would read as several errors)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def os_error_text(e: OSError) -> str:
    """``<file>: <reason>`` of an OSError (``[Errno 28] No space left on device: 'x'`` reads worse)."""
    where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
    reason = e.strerror or str(e)
    return f"{where}: {reason}" if where else reason


def run_cli(main: Callable[[Optional[List[str]]], object], prog: str) -> None:
    """Run ``main(sys.argv[1:])`` and exit: with its return value when that is an int (an exit status), else 0;
    a :class:`UserError` exits 2 and an ``OSError`` 1, each as the one line ``<prog>: error: <message>``."""
    try:
        result = main(sys.argv[1:])
    except UserError as e:
        print(f"{prog}: error: {one_line(e)}", file=sys.stderr, flush=True)
        sys.exit(getattr(e, "exit_status", 2))  # 1 for work that used nothing (counts.WorkFailed)
    except OSError as e:  # the machine's state, not a bug: a traceback would hide the file and the reason
        print(f"{prog}: error: {one_line(os_error_text(e))}", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(result if type(result) is int else 0)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with a one-line usage error (argparse prints the whole usage first), which also refuses
    an output that is one of the inputs (see :func:`same_file`)."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        self._refuse_outputs_that_are_inputs(namespace)
        return namespace, extras

    def _refuse_outputs_that_are_inputs(self, namespace: argparse.Namespace) -> None:
        """Usage error when an option of role "output" names the same file (after links) as an option of role
        "input": writing it would destroy the input before, or while, it is read. (An output directory may be an
        input directory: files are written into it, not over it.)"""
        def paths(role: str):
            for action in self._actions:
                if getattr(action.type, "role", None) != role:
                    continue
                values = getattr(namespace, action.dest, None)
                for value in values if isinstance(values, (list, tuple)) else [values]:
                    if isinstance(value, (str, os.PathLike)):
                        yield "/".join(action.option_strings) or action.dest, value
        inputs = list(paths("input"))
        for out_name, out in paths("output"):
            for in_name, source in inputs:
                if not os.path.isdir(source) and same_file(out, source):
                    self.error(f"argument {out_name}: {out} is also the input {in_name} ({source}); writing it "
                               f"would destroy it: choose another output path")


def same_file(a: "str | os.PathLike", b: "str | os.PathLike") -> bool:
    """Whether two paths name the same file or directory: the same inode where both exist (hard and symbolic
    links), else the same path after resolving links."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _type(name: str, check: Callable[[str], object], **bounds: object) -> Callable[[str], object]:
    """A ``type=`` function whose failures argparse reports as ``argument --opt: <message>``; ``bounds`` (low,
    high) are kept on it, so tests can find a value out of range of any option."""
    check.__name__ = name
    check.__dict__.update(bounds)
    return check


def _role(role: str) -> Callable[[Callable[[str], object]], Callable[[str], object]]:
    """Mark a checker with what it checks ("input", "output", "number", "device"): tests find every option of a
    kind by it, so a new entry point or option is swept without being listed."""
    def mark(check: Callable[[str], object]) -> Callable[[str], object]:
        check.role = role
        return check
    return mark


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def int_range(low: Optional[int] = None, high: Optional[int] = None, *, also: Sequence[int] = (), why: str = ""):
    """``type=``: an int in [low, high] (None: unbounded), or one of ``also`` (e.g. -1 meaning "all"); ``why`` says
    why the range is what it is, in the message. Its ``value`` attribute checks an int already parsed (the Python
    API's options), with the same message."""
    def in_range(value: int) -> int:
        if value in also or ((low is None or value >= low) and (high is None or value <= high)):
            return value
        bounds = (f"in {low}..{high}" if low is not None and high is not None
                  else f">= {low}" if low is not None else f"<= {high}")
        extra = "".join(f" or {a}" for a in also)
        reason = f" ({why})" if why and high is not None and value > high else ""
        raise argparse.ArgumentTypeError(f"must be {bounds}{extra}, got {value}{reason}")

    def check(text: str) -> int:
        return in_range(int(_number(text, int)))
    return _role("number")(_type("int", check, low=low, high=high, also=tuple(also), value=in_range, why=why))


def float_range(low: Optional[float] = None, high: Optional[float] = None, *, low_open: bool = False):
    """``type=``: a finite float in [low, high] ((low, high] with ``low_open``); None: unbounded. Its ``value``
    attribute checks a float already parsed (the Python API's options), with the same message."""
    def in_range(value: float) -> float:
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {value!r}")
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high):
            left = "(" if low_open else "["
            bounds = (f"in {left}{low:g}, {high:g}]" if low is not None and high is not None
                      else f"{'>' if low_open else '>='} {low:g}" if low is not None else f"<= {high:g}")
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value:g}")
        return value

    def check(text: str) -> float:
        return in_range(_number(text, float))
    return _role("number")(_type("float", check, low=low, high=high, value=in_range))


positive_int = int_range(1)
non_negative_int = int_range(0)
# Workers and threads share this machine's CPUs: more than CPU_MULTIPLE a CPU only wait (and 100000 of them hung,
# each a process or thread started before any work; issue 80 round 7).
CPU_MULTIPLE = 4
CPU_CEILING = CPU_MULTIPLE * (os.cpu_count() or 1)
_CPU_WHY = (f"each is a process or thread on this machine's {os.cpu_count() or 1} CPUs; more than {CPU_MULTIPLE} a "
            f"CPU only wait for one")
workers_int = int_range(0, CPU_CEILING, why=_CPU_WHY)   # DataLoader workers, processes: 0 is the main process
threads_int = int_range(1, CPU_CEILING, why=_CPU_WHY)
finite_float = float_range()


@_role("input")
def existing_file(text: str) -> str:
    """``type=``: a readable regular file (an input)."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
    if os.path.exists(text) and not os.path.isfile(text):
        try:
            regular_file(text)
        except NotRegularFileError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def existing_file_or(*words: str):
    """``type=``: one of ``words`` (e.g. ``auto``) or an existing file."""
    def check(text: str) -> str:
        return text if text in words else existing_file(text)
    return _role("input")(_type("file", check))


@_role("input")
def existing_dir(text: str) -> str:
    """``type=``: a directory that exists (an input)."""
    if not os.path.isdir(text):
        what = "is a file, not a directory" if os.path.exists(text) else "no such directory"
        raise argparse.ArgumentTypeError(f"{text}: {what}")
    return text


def _creatable(path: str) -> None:
    """ArgumentTypeError unless ``path`` (absent) could be created: its nearest existing ancestor is a writable
    directory."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{path} cannot be created: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{path} cannot be created: {parent} is not writable")


@_role("output")
def output_dir(text: str) -> str:
    """``type=``: a directory to write into: a writable one, or one that can be created (nothing is created)."""
    if os.path.exists(text):
        if not os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"{text} is a file, not a directory")
        if not os.access(text, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text}: directory not writable")
    else:
        _creatable(text)
    return text


@_role("output")
def output_file(text: str) -> str:
    """``type=``: a file to write: a writable file, or one whose directory exists writable or can be created."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
    if os.path.exists(text):
        if not os.access(text, os.W_OK):
            raise argparse.ArgumentTypeError(f"{text}: not writable")
    else:
        _creatable(text)
    return text


@_role("device")
def device(text: str) -> str:
    """``type=``: ``cpu``, or ``cuda`` where torch sees a CUDA device."""
    if text not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"expected cpu or cuda, got {text!r}")
    if text == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"cuda, but torch {torch.__version__} sees no CUDA device "
                                             f"(use --device cpu)")
    return text

