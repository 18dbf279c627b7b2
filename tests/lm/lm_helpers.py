"""Shared by the LM tests: skip reasons for the optional tools, and CTC emissions that spell given units."""
from typing import List, Sequence

import pytest
import torch

from wenet_udps.lm.tools import INSTALL_HINT, LmToolsMissing, find_kenlm_program


def need_lmplz() -> str:
    """lmplz's path, or skip (CI installs it with tools/install.sh --lm true)."""
    try:
        return find_kenlm_program("lmplz")
    except LmToolsMissing:
        pytest.skip(f"KenLM's lmplz is not installed ({INSTALL_HINT})")


def need_build_binary() -> str:
    """build_binary's path, or skip (installed with lmplz by tools/install.sh --lm true)."""
    try:
        return find_kenlm_program("build_binary")
    except LmToolsMissing:
        pytest.skip(f"KenLM's build_binary is not installed ({INSTALL_HINT})")


def need_flashlight() -> None:
    pytest.importorskip("flashlight.lib.text.decoder.kenlm",
                        reason=f"flashlight-text is not installed ({INSTALL_HINT})")


def write_units(path, tokens: Sequence[str]) -> None:
    path.write_text("".join(f"{t} {i}\n" for i, t in enumerate(tokens)), encoding="utf-8")


def emissions(frames: List[dict], vocab: int, floor: float = -8.0) -> torch.Tensor:
    """(1, T, V) log-probabilities: frame t gives each unit id in ``frames[t]`` its probability, the rest share
    what is left (a tiny floor)."""
    logp = torch.full((1, len(frames), vocab), floor)
    for t, probs in enumerate(frames):
        for unit, p in probs.items():
            logp[0, t, unit] = torch.log(torch.tensor(p))
    return logp.log_softmax(-1)
