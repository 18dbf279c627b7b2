"""The admission check for training targets: what a transcript must satisfy before its label reaches the losses.

Two kinds of training utterance would otherwise be used and counted as used while teaching nothing or the wrong
thing:

- a transcript naming a reserved symbol literally (``<blank>``, ``<sos/eos>``, ``<unk>``): the tokenizer keeps
  bracketed symbols of the units table whole, so ``<blank>`` would become a CTC target of id 0 (the blank itself)
  and ``<sos/eos>`` an end of sentence in mid-target. Skipped before the audio is read, with a warning naming the
  symbols, and counted as ``special_symbol``.
- a target CTC cannot align in the encoder's output frames: CTC needs one frame per token plus a blank between
  two equal neighbours; with fewer frames its loss is infinite (0 under ``zero_infinity``) while the decoder
  still trains on the utterance. Counted as ``ctc_frames``, like a ``filter_conf`` reason.
"""
from typing import Callable, List, Optional

from wenet_udps.dataset.audio import UnusableUtterance
from wenet_udps.text.base_tokenizer import BLANK, SOS_EOS, UNK

RESERVED_SYMBOLS = (BLANK, SOS_EOS, UNK)


def ctc_frames_needed(label: List[int]) -> int:
    """The fewest frames a CTC alignment of ``label`` takes: a frame per token, a blank between equal neighbours."""
    return len(label) + sum(1 for a, b in zip(label, label[1:]) if a == b)


class TargetAdmission:
    """The checks of the module docstring for one tokenizer and encoder.

    Args:
        tokenizer: the training tokenizer (its units table gives the reserved ids).
        output_frames: input frames -> encoder output frames (``model_builder.ctc_output_frames``); None when the
            model trains no CTC, so that no target is too long for it.
    """

    def __init__(self, tokenizer, output_frames: Optional[Callable[[int], int]]):
        table = tokenizer.symbol_table
        self.reserved_ids = {table[BLANK]: BLANK, table[SOS_EOS]: SOS_EOS}
        self.output_frames = output_frames

    def check_symbols(self, key: str, text: str, label: List[int]) -> None:
        """UnusableUtterance (reason ``special_symbol``) naming the reserved symbols ``text`` holds or ``label``
        maps to (a BPE model or a units file may produce their ids from other spellings)."""
        found = {s for s in RESERVED_SYMBOLS if s in text} | {self.reserved_ids[i] for i in label
                                                             if i in self.reserved_ids}
        if found:
            raise UnusableUtterance(f"transcript of {key} holds the reserved symbol(s) {', '.join(sorted(found))}, "
                                    f"which would become targets of their own ids; remove or replace them in the "
                                    f"text", reason="special_symbol")

    def ctc_reason(self, label: List[int], frames: int) -> Optional[str]:
        """``"ctc_frames"`` when ``frames`` feature frames give too few encoder frames for ``label``, else None."""
        if self.output_frames is None or not label:
            return None
        return "ctc_frames" if self.output_frames(frames) < ctc_frames_needed(label) else None
