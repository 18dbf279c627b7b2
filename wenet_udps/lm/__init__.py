"""Word n-gram language models for decoding: built with KenLM's ``lmplz`` (:mod:`.build`), read and identified
as ARPA files (:mod:`.arpa`) or KenLM binaries with their words file (:mod:`.binary`), and fused into CTC prefix
beam search with flashlight-text's lexicon decoder (:mod:`.search`), whose n-best the attention decoder then
rescores (``attention_rescoring_lm``).

Optional: ``tools/install.sh --lm true`` installs ``lmplz``/``build_binary`` and flashlight-text (the ``[lm]``
extra); without them every entry point stops with :data:`INSTALL_HINT`.
"""
from wenet_udps.lm.arpa import LmError, LmInfo, oov_rate, read_arpa, words_of_text
from wenet_udps.lm.binary import read_lm, write_binary
from wenet_udps.lm.tools import INSTALL_HINT, LmToolsMissing

__all__ = ["LmInfo", "LmError", "LmToolsMissing", "INSTALL_HINT", "oov_rate", "read_arpa", "read_lm", "write_binary",
           "words_of_text"]
