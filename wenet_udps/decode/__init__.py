"""Decoding as a library: data lists (``data_list``), the Python API (``api``), streaming state (``stream``), CTC
token times (``align``), attention weights and their figures (``attention_maps``), greedy soup's dev evaluation
(``soup``). bin/recognize and the other command lines only parse arguments and call these."""
