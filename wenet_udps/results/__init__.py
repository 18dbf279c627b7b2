"""Experiment results: tables and plots of finished runs (tools/collect_results.py is the command line)."""
