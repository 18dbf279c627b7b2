"""The one check of decoding options against the model: an option that cannot take effect is refused, not ignored.

What a model can decode at is decided from its own encoder (built from its conf): ``use_dynamic_chunk`` (any chunk
size, or full context), ``static_chunk_size`` S > 0 without dynamic chunks (the encoder applies chunk S whatever
is asked: S only), neither (full context only). ``recognize``, ``ASRModel.decode`` and ``export`` all call
:func:`check_decode_options` / :func:`chunk_size_for`, so a chunk size that a path would silently replace by the
model's own is refused on every path alike (a :class:`UserError`: one line, exit 2 from a command).
"""
from typing import Iterable, Optional

from torch import nn

from wenet_udps.utils.cli import UserError


def chunking(encoder: nn.Module) -> str:
    """``"dynamic"``, ``"static S"`` or ``"none"``: the chunk training of ``encoder`` (see the module docstring)."""
    if getattr(encoder, "use_dynamic_chunk", False):
        return "dynamic"
    static = int(getattr(encoder, "static_chunk_size", 0) or 0)
    return f"static {static}" if static > 0 else "none"


def chunk_size_for(encoder: nn.Module, requested: Optional[int], option: str = "--decoding_chunk_size") -> int:
    """The chunk size decoding runs at: the model's own for ``requested`` None (-1 full context, or S for a
    static-chunk model), else ``requested`` when the model decodes at it; UserError otherwise.

    Args:
        encoder: the model's encoder; requested: -1 full context, > 0 a chunk size, None the model's own.
        option: the option's name in the messages.
    """
    kind = chunking(encoder)
    if requested == 0:
        raise UserError(f"{option} 0 is the training mode (random chunks); use -1 for full context or > 0 for a "
                        f"chunk size")
    if requested is None:
        return int(kind.split()[1]) if kind.startswith("static") else -1
    if kind == "dynamic":
        return requested
    if kind.startswith("static"):
        static = int(kind.split()[1])
        if requested != static:
            got = "full context" if requested < 0 else f"chunk {requested}"
            raise UserError(f"{option} {requested}: this model was trained with encoder_conf.static_chunk_size "
                            f"{static} (no dynamic chunks), so its encoder decodes at chunk {static} only, not "
                            f"{got}; pass {option} {static} or leave it out")
        return requested
    if requested > 0:
        raise UserError(f"{option} {requested}: this model was trained without chunks (encoder_conf."
                        f"use_dynamic_chunk false, static_chunk_size 0), so it decodes at full context only; "
                        f"leave {option} out (or -1), or train a streaming conf")
    return requested


def check_decode_options(encoder: nn.Module, methods: Iterable[str], *, decoding_chunk_size: Optional[int] = None,
                         num_decoding_left_chunks: int = -1, simulate_streaming: bool = False,
                         batch_size: Optional[int] = None, ctc_weight: float = 0.0, reverse_weight: float = 0.0,
                         length_penalty: float = 0.0, blank_penalty: float = 0.0,
                         max_len_ratio: Optional[float] = None) -> int:
    """UserError naming the first option (as ``recognize`` spells it) that would do nothing with this model and
    these ``methods``; else the chunk size decoding runs at (see :func:`chunk_size_for`).

    Values at their defaults (0, -1, False, None) are not options that were asked for, so they always pass.
    """
    methods = list(methods)
    chunk = chunk_size_for(encoder, decoding_chunk_size)
    if num_decoding_left_chunks != -1 and chunk < 0:
        raise UserError(f"--num_decoding_left_chunks {num_decoding_left_chunks} limits the left context of chunked "
                        f"decoding; at full context it does nothing (give a chunk size or leave it out)")
    if simulate_streaming and chunk < 0:
        raise UserError("--simulate_streaming runs the encoder chunk by chunk: it needs --decoding_chunk_size > 0 "
                        f"on a chunk-trained model (this one: {chunking(encoder)})")
    if simulate_streaming and batch_size is not None and batch_size != 1:
        raise UserError(f"--simulate_streaming decodes one utterance at a time: use --batch_size 1, not "
                        f"{batch_size}")
    rescoring = ("attention_rescoring", "attention_rescoring_lm")
    unused = [(ctc_weight > 0, "ctc_weight", ctc_weight, rescoring),
              (reverse_weight > 0, "reverse_weight", reverse_weight, rescoring),
              (length_penalty != 0, "length_penalty", length_penalty, ("attention",)),
              (max_len_ratio is not None, "max_len_ratio", max_len_ratio, ("attention",))]
    for asked, name, value, needs in unused:
        if asked and not set(needs) & set(methods):
            raise UserError(f"--{name} {value:g} applies to {' and '.join(needs)} decoding only, which --modes "
                            f"{' '.join(methods)} does not run; add {needs[0]} to --modes or leave the option out")
    if blank_penalty > 0 and all(m == "attention" for m in methods):
        raise UserError(f"--blank_penalty {blank_penalty:g} applies to the CTC searches only, which --modes "
                        f"{' '.join(methods)} does not run; leave it out")
    return chunk
