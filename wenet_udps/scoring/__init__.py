"""Word / character error rates exactly as WeNet's ``tools/compute-wer.py`` counts and prints them.

``tokens``: transcript files and the scoring tokens (word / character mode, case, ignored words, tags, clusters);
``align``: the edit-distance alignment with WeNet's tie order; ``wer``: corpus scores and the report layout.
``tools/compute-wer.py`` is the command line over these.
"""
from wenet_udps.scoring.align import Alignment, Counts, align
from wenet_udps.scoring.tokens import char_tokens, cluster_of, read_ignore_words, read_text, tokenize
from wenet_udps.scoring.wer import MISSING_POLICIES, Report, confusions, error_rate, notes, score, write_report

__all__ = ["Alignment", "Counts", "align", "char_tokens", "cluster_of", "read_ignore_words", "read_text",
           "tokenize", "MISSING_POLICIES", "Report", "confusions", "error_rate", "notes", "score", "write_report"]
