"""The one reader of line-based text files: Kaldi data-dir files (wav.scp, text, segments, utt2spk), units files,
data lists and shard lists. Every tool and module reads them through :func:`utf8_lines` and :func:`read_table`, so
each question below is decided here, once:

- encoding: UTF-8; a line that is not is a :class:`ListError` naming the file and line;
- line ends: ``\n``, ``\r\n`` and a bare ``\r`` (old Mac files, and text pasted between systems), as Python's and
  every editor's universal newlines read them: a file whose lines end in ``\r`` is read line by line, not as one
  line whose value holds every other line;
- a byte-order mark (U+FEFF) at the start of the file is dropped (Windows editors write one; read as part of the
  first key, that utterance would match nothing). Anywhere else in a key it is an error: an invisible character
  that would make the key differ from the same key in another file;
- a key given twice is an error naming the file and both lines (which of the two is meant cannot be known);
- ``key value`` tables: the key is the first white-space-separated field, the value the rest of the line with the
  white space around it removed.

This module imports only the standard library and ``cli``, so every layer of the package may use it.
"""
from typing import Dict, Iterator, List, Optional, Tuple

from wenet_udps.utils.cli import UserError, open_input

BOM = "\ufeff"


class ListError(UserError):
    """A malformed line of a data list, shard list or Kaldi file: names the file and line."""


def utf8_lines(path: str) -> Iterator[Tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, each line ended by ``\n`` (``\r\n`` and a bare ``\r`` read as
    one; the last line may have none), a byte-order mark at its start dropped; a line that is not UTF-8 raises
    ListError naming both."""
    lineno = 0
    with open_input(path, "rb") as f:
        for raw in f:
            ended = raw.endswith(b"\n")
            body = raw[:-1] if ended else raw
            if body.endswith(b"\r"):
                body, ended = body[:-1], True
            pieces = body.split(b"\r")
            for i, piece in enumerate(pieces):
                lineno += 1
                try:
                    line = piece.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ListError(f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start}): "
                                    f"{piece[:80]!r}") from None
                if lineno == 1 and line.startswith(BOM):
                    line = line[1:]
                yield lineno, line + ("\n" if i < len(pieces) - 1 or ended else "")


def read_table(path: str, *, what: str = "<key> <value>", key_name: str = "key", allow_empty_value: bool = False,
               fields: Optional[int] = None) -> Dict[str, Tuple[str, int]]:
    """``{key: (value, line number)}`` of a ``key value`` file, in file order; blank lines are skipped.

    Args:
        what, key_name: the expected line and what the key is, for error messages (``<utt> <speaker>``, ``token``).
        allow_empty_value: a line holding only a key gives the value "" (a text file's empty transcript).
        fields: when set, the number of white-space-separated fields a line must have (key included).
    Raises:
        ListError: naming the file and line: a malformed line, a key holding U+FEFF, a key given twice (both
            lines named).
    """
    out: Dict[str, Tuple[str, int]] = {}
    for lineno, line in utf8_lines(path):
        line = line.strip()
        if not line:
            continue
        parts = line.split(maxsplit=1)
        if (len(parts) < 2 and not allow_empty_value) or (fields is not None and len(line.split()) != fields):
            raise ListError(f"{path}:{lineno}: expected '{what}', got {line[:80]!r}")
        key = parts[0]
        if BOM in key:
            raise ListError(f"{path}:{lineno}: {key_name} {key!r} holds a byte-order mark (U+FEFF), which would "
                            f"make it differ from the same key elsewhere; remove it")
        if key in out:
            raise ListError(f"{path}:{lineno}: duplicate {key_name} {key!r} (also on line {out[key][1]})")
        out[key] = (parts[1] if len(parts) > 1 else "", lineno)
    return out


def read_map(path: str, **kwargs) -> Dict[str, str]:
    """``{key: value}`` of :func:`read_table` (same arguments and errors)."""
    return {key: value for key, (value, _) in read_table(path, **kwargs).items()}


def sentences(path: str, *, keys: bool = True) -> List[str]:
    """The transcripts of a Kaldi text file (``keys``: read as :func:`read_map` reads it), or of a file of plain
    sentences, one a line (each stripped; blank lines left out)."""
    if keys:
        return list(read_map(path, allow_empty_value=True).values())
    return [line.strip() for _, line in utf8_lines(path) if line.strip()]
