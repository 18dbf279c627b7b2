"""Published results of other toolkits on a recipe's split, and their table in RESULTS.md.

A recipe that reproduces another toolkit's split (recipes/an4: ESPnet's egs2/an4) names a file of that toolkit's
published numbers in its settings.sh (``peer_results=recipes/<corpus>/peer_results.tsv``); stage 7 passes it to
tools/collect_results.py, which prints the rows beside this project's own in a table of their own, each with its
source. The numbers are typed in from the source, never computed here.

The file: UTF-8, tab-separated, ``#`` lines and blank lines ignored, the first other line the header
(:data:`COLUMNS`, in that order), then one row per published result:

- ``set``: this recipe's set scored on the same utterances; ``published_set``: the name the source gives it;
- ``lm``: the language model of the decoding, or ``none``;
- ``wer``, ``cer``: percent, or ``-`` where the source gives none (at least one of the two);
- ``cer_counts``: what the published CER counts (e.g. ``characters, word spaces included``), ``-`` without a CER:
  CERs that count different things are different measures;
- ``source``: where the numbers are published (file, version, date).

Any other line is a :class:`~wenet_udps.utils.kaldi_files.ListError` (a usage error) naming the file and line.
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

from wenet_udps.utils.kaldi_files import ListError, utf8_lines

COLUMNS = ("toolkit", "model", "decoding", "set", "published_set", "lm", "wer", "cer", "cer_counts", "source")
NONE = "-"   # a rate the source does not give


@dataclass(frozen=True)
class PeerResult:
    """One published result (one row of the file)."""

    toolkit: str
    model: str
    decoding: str
    set: str
    published_set: str
    lm: str
    wer: Optional[float]   # percent; None: not published
    cer: Optional[float]
    cer_counts: str        # what the CER counts; "-" without a CER
    source: str


def _rate(text: str, column: str, where: str) -> Optional[float]:
    """A percentage cell: a finite number >= 0, or ``-`` (None)."""
    if text == NONE:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ListError(f"{where}: {column} must be a percentage >= 0 or '{NONE}', got {text!r}")
    return value


def read_peer_results(path: str) -> List[PeerResult]:
    """The rows of a peer-results file (format: this module's docstring), in file order.

    Raises:
        ListError: naming the file and line: no header or a different one, a row with another number of fields
            or an empty one, a rate that is not a percentage, no rate at all, a CER without what it counts.
        OSError: the file cannot be read.
    """
    rows: List[PeerResult] = []
    header_seen = False
    for lineno, line in utf8_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{lineno}"
        fields = [f.strip() for f in line.split("\t")]
        if not header_seen:
            if tuple(fields) != COLUMNS:
                raise ListError(f"{where}: expected the tab-separated header '{' '.join(COLUMNS)}', "
                                f"got {line[:120]!r}")
            header_seen = True
            continue
        if len(fields) != len(COLUMNS):
            raise ListError(f"{where}: expected {len(COLUMNS)} tab-separated fields ({', '.join(COLUMNS)}), "
                            f"got {len(fields)}: {line[:120]!r}")
        cell = dict(zip(COLUMNS, fields))
        empty = [c for c in COLUMNS if not cell[c]]
        if empty:
            raise ListError(f"{where}: empty {', '.join(empty)} (write '{NONE}' for a rate the source does not give)")
        wer, cer = _rate(cell["wer"], "wer", where), _rate(cell["cer"], "cer", where)
        if wer is None and cer is None:
            raise ListError(f"{where}: neither a wer nor a cer: a row needs at least one published rate")
        if (cer is None) != (cell["cer_counts"] == NONE):
            raise ListError(f"{where}: cer_counts says what the cer counts: give both or '{NONE}' in both, got "
                            f"cer {cell['cer']!r} and cer_counts {cell['cer_counts']!r}")
        rows.append(PeerResult(**{**cell, "wer": wer, "cer": cer}))
    if not header_seen:
        raise ListError(f"{path}: no header line '{' '.join(COLUMNS)}' and no rows")
    return rows


def partial_note(partial: Sequence[str]) -> str:
    """RESULTS.md's warning, under its title, that the data came from a partial copy of the corpus (``partial``: the
    parts and counts, ``wenet_udps.corpora.common.partial_notes``); "" for a whole copy."""
    if not partial:
        return ""
    return ("**Partial corpus**: these results come from a copy of the corpus with fewer utterances than published "
            f"(prepared with --allow_partial true): {'; '.join(partial)}. They do not compare with results on the "
            "whole corpus.\n\n")


def section(rows: Sequence[PeerResult], path: str, *, wer_char: bool, partial: Sequence[str] = ()) -> str:
    """RESULTS.md's table of published results (empty without rows), with where they come from and which of its
    rates compare with this project's; ``partial`` (the parts of a partial copy this project's results come from)
    marks every row as not comparable."""
    if not rows:
        return ""
    ours = ("characters, as compute-wer.py --char 1 counts them (no spaces; a Latin-script word is one unit)"
            if wer_char else "letters, without word spaces (the CER section, wenet_udps.results.speakers.letters)")
    header = ["toolkit", "model", "decoding", "set", "LM", "WER", "CER", "CER counts", "source"] \
        + (["comparable"] if partial else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        name = r.set if r.published_set == r.set else f"{r.set} (their {r.published_set})"
        cells = [r.toolkit, r.model, r.decoding, name, r.lm, _cell(r.wer), _cell(r.cer), r.cer_counts, r.source] \
            + (["no: our results are of a partial copy"] if partial else [])
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return ("\n## Published results on the same split\n\n"
            f"Other toolkits' published numbers (%) on the same utterances, from `{path}`, as their sources give "
            f"them. This project's CER counts {ours}; a published CER that counts something else (its CER counts "
            "column) is another measure: there only the WER compares directly."
            + (f" **Not comparable**: this project's results come from a partial copy of the corpus "
               f"({'; '.join(partial)}), these from the whole corpus." if partial else "")
            + "\n\n" + "\n".join(lines) + "\n")


def _cell(value: Optional[float]) -> str:
    return NONE if value is None else f"{value:g}"
