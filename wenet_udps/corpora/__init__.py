"""Corpus builders: synthetic tiny corpora (espeak-ng) and connected digits from FSDD.

Each builder writes Kaldi-style ``DIR/<set>/{wav.scp,text}`` that ``recipes/<corpus>/prepare.sh`` hands on.
"""
