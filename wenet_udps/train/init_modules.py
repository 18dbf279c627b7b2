"""Initialise part of a new model from another model's checkpoint (WeNet's ``--enc_init`` / ``--enc_init_mods``).

Fine-tuning on a new corpus keeps what transfers and re-makes what does not: e.g. the encoder of a mini LibriSpeech
model, with the output layers (CTC projection, decoder embedding and output) made afresh for the digit vocabulary:

    python -m wenet_udps.bin.train ... --enc_init exp/mini_librispeech/train_conformer_udps/avg_5.pt \\
        --enc_init_mods encoder.

Every parameter and buffer whose name starts with one of the prefixes is copied; the rest keep their fresh
initialisation. As in WeNet the encoder's buffers come too, the global CMVN statistics among them: the encoder
then sees features normalised as in its first training. A mismatch is an error naming the tensor, never a partial
load: a prefix that selects nothing, a tensor the new model lacks or has in another shape (another architecture,
or a scaled-dot checkpoint for a UDPS model: their attention layers hold other parameters).
"""
import logging
from typing import List, Sequence

import torch

from wenet_udps.train.checkpoint import CheckpointError, load_checkpoint


def parse_prefixes(text: str) -> List[str]:
    """``"encoder.,decoder.decoders."`` -> module-name prefixes, each ending in a dot (``encoder`` names the module
    ``encoder``, not ``encoder_foo``)."""
    prefixes = [p.strip() for p in text.split(",") if p.strip()]
    if not prefixes:
        raise ValueError(f"expected module-name prefixes, comma-separated (e.g. encoder.), got {text!r}")
    return [p if p.endswith(".") else p + "." for p in prefixes]


def init_modules(model: torch.nn.Module, path: str, prefixes: Sequence[str], verify: bool = True) -> int:
    """Copy the tensors under ``prefixes`` from checkpoint ``path`` into ``model``; returns how many were copied.

    Raises:
        CheckpointError: a prefix selects nothing in the checkpoint, or a selected tensor is missing from the model,
            absent from the checkpoint, or has another shape (nothing is copied then).
    """
    state = load_checkpoint(path, verify=verify)["model"]
    own = model.state_dict()
    picked = {}
    for prefix in prefixes:
        keys = [k for k in state if k.startswith(prefix)]
        if not keys:
            tops = sorted({k.split(".")[0] + "." for k in state})
            raise CheckpointError(f"{path} holds nothing under {prefix!r}; its modules: {', '.join(tops)}")
        for key in keys:
            if key not in own:
                raise CheckpointError(f"{path}: {key} has no counterpart in this model (another architecture, or "
                                      "the other attention type: initialise UDPS from UDPS, scaled-dot from "
                                      "scaled-dot)")
            if own[key].shape != state[key].shape:
                raise CheckpointError(f"{path}: {key} has shape {tuple(state[key].shape)}, this model's "
                                      f"{tuple(own[key].shape)}")
            picked[key] = state[key]
        lacking = [k for k in own if k.startswith(prefix) and k not in state]
        if lacking:
            raise CheckpointError(f"{path} lacks {len(lacking)} tensor(s) of this model under {prefix!r}, e.g. "
                                  f"{lacking[0]} (another architecture or attention type)")
    model.load_state_dict(picked, strict=False)
    logging.info("initialised %d tensors under %s from %s; the rest are fresh", len(picked), ", ".join(prefixes),
                 path)
    return len(picked)
