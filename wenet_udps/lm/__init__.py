"""Word n-gram language models for decoding: built with KenLM's ``lmplz`` (:mod:`.build`), read and identified
as ARPA files (:mod:`.arpa`), and fused into CTC prefix beam search with flashlight-text's lexicon decoder
(:mod:`.search`), whose n-best the attention decoder then rescores (``attention_rescoring_lm``).

Optional: ``tools/install.sh --lm true`` installs ``lmplz``/``build_binary`` and flashlight-text (the ``[lm]``
extra); without them every entry point stops with :data:`INSTALL_HINT`.
"""
from wenet_udps.lm.arpa import ArpaInfo, LmError, oov_rate, read_arpa, words_of_text
from wenet_udps.lm.tools import INSTALL_HINT, LmToolsMissing

__all__ = ["ArpaInfo", "LmError", "LmToolsMissing", "INSTALL_HINT", "oov_rate", "read_arpa", "words_of_text"]
