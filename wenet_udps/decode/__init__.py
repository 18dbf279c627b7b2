"""Decoding as a library: data lists (``data_list``), the Python API (``api``), streaming state (``stream``) and
CTC token times (``align``). bin/recognize and the other command lines only parse arguments and call these."""
