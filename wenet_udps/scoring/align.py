"""Levenshtein alignment of two token lists with WeNet's compute-wer tie order, and the N/C/S/D/I counts."""
from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

# Back-pointers of the alignment table.
_DEL, _INS, _DIAG = 0, 1, 2


@dataclass
class Counts:
    """``N`` reference tokens, ``C`` correct, ``S``/``D``/``I`` substitutions, deletions, insertions."""

    N: int = 0
    C: int = 0
    S: int = 0
    D: int = 0
    I: int = 0  # noqa: E741 (the conventional name)

    def add(self, other: "Counts") -> None:
        self.N += other.N
        self.C += other.C
        self.S += other.S
        self.D += other.D
        self.I += other.I

    def error_rate(self) -> float:
        """Percent errors (S + D + I) / N; 0 when N is 0, even with insertions, as WeNet reports it."""
        return 100.0 * (self.S + self.D + self.I) / self.N if self.N else 0.0

    def __str__(self) -> str:
        return f"{self.error_rate():.2f} % N={self.N} C={self.C} S={self.S} D={self.D} I={self.I}"


@dataclass
class Alignment:
    counts: Counts
    pairs: List[Tuple[str, str]] = field(default_factory=list)  # (ref token or "", hyp token or "")


def align(ref: Sequence[str], hyp: Sequence[str]) -> Alignment:
    """Minimum edit distance alignment (all edits cost 1), with WeNet's choice among equal-cost alignments.

    Filling the table, each cell takes a deletion if that is among the cheapest moves, else an insertion if that
    is, else the diagonal (match or substitution); the path is then traced back from the end. jiwer (rapidfuzz
    editops) cannot be told this order: on the same pairs it gives the same total errors but another C/S/D/I
    split in a few percent of utterances, so the counts would not be comparable with WeNet's published tables.
    The table is ``len(ref) * len(hyp)`` cells; transcripts are short, so plain Python is fast enough.
    """
    n, m = len(ref), len(hyp)
    dist = list(range(m + 1))  # row i of the distance table, updated in place
    back = [[_INS] * (m + 1)]
    for i in range(1, n + 1):
        row_back = [_DEL] + [_DIAG] * m
        prev_diag, dist[0] = dist[0], i
        r = ref[i - 1]
        for j in range(1, m + 1):
            diag = prev_diag + (r != hyp[j - 1])
            prev_diag = dist[j]
            best, move = dist[j] + 1, _DEL
            if dist[j - 1] + 1 < best:
                best, move = dist[j - 1] + 1, _INS
            if diag < best:
                best, move = diag, _DIAG
            dist[j] = best
            row_back[j] = move
        back.append(row_back)
    return _trace(ref, hyp, back)


def _trace(ref: Sequence[str], hyp: Sequence[str], back: List[List[int]]) -> Alignment:
    counts = Counts(N=len(ref))
    pairs: List[Tuple[str, str]] = []
    i, j = len(ref), len(hyp)
    while i > 0 or j > 0:
        move = back[i][j]
        if move == _DIAG:
            i, j = i - 1, j - 1
            pairs.append((ref[i], hyp[j]))
            if ref[i] == hyp[j]:
                counts.C += 1
            else:
                counts.S += 1
        elif move == _DEL:
            i -= 1
            pairs.append((ref[i], ""))
            counts.D += 1
        else:
            j -= 1
            pairs.append(("", hyp[j]))
            counts.I += 1
    pairs.reverse()
    return Alignment(counts, pairs)
