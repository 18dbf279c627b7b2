"""Where the optional LM tools are, and the one message that says how to install them."""
import os
import shutil
import sys

from wenet_udps.utils.cli import UserError

INSTALL_HINT = "install the LM tools with: tools/install.sh --lm true (KenLM's lmplz and flashlight-text)"


class LmToolsMissing(UserError):
    """lmplz or flashlight-text is not installed (the message ends with :data:`INSTALL_HINT`)."""


def find_kenlm_program(name: str) -> str:
    """Path of KenLM's ``name`` (lmplz, build_binary): the running Python's bin/ first (where tools/install.sh
    puts them, so an activated venv finds its own), then PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(here, os.X_OK):
        return here
    found = shutil.which(name)
    if found is None:
        raise LmToolsMissing(f"KenLM's {name} was not found (neither in {os.path.dirname(sys.executable)} nor on "
                             f"PATH): {INSTALL_HINT}")
    return found


def import_flashlight():
    """flashlight-text's decoder and KenLM modules: (decoder, kenlm, dictionary)."""
    try:
        from flashlight.lib.text import decoder, dictionary
        from flashlight.lib.text.decoder import kenlm
    except ImportError as e:
        raise LmToolsMissing(f"flashlight-text is not installed ({e}): {INSTALL_HINT}") from None
    return decoder, kenlm, dictionary
