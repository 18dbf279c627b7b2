"""Decoding as a library: data lists (``data_list``), the Python API (``api``), streaming state (``stream``), CTC
token times (``align``), attention weights and their figures (``attention_maps``), the norm ratio r = |q|/|k| of the
UDPS heads (``norm_ratio``), greedy soup's dev evaluation (``soup``). bin/recognize and the other command lines only
parse arguments and call these."""
