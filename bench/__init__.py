"""Benchmarks, run as modules from the repository root (``python -m bench.attention ...``); see docs/benchmarks.md."""
