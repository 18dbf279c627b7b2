"""The admission check for training targets: what a transcript must satisfy before its label reaches the losses.

Training utterances that would otherwise be used, or dropped as if by choice, while teaching nothing or the wrong
thing are unusable (``dataset.BAD_REASONS``): each is skipped before its audio is read, with a warning naming it,
and counted, and a pass with more of them than ``dataset_conf.max_bad_fraction`` is refused (the one rule,
``wenet_udps.utils.counts``):

- an empty or blank transcript, or one that gives no token (issue 66 G: half a list of them trained, counted as
  filtered by ``token_min_length``, as if the user had chosen to drop them): ``empty_text``;
- a transcript naming a reserved symbol literally (``<blank>``, ``<sos/eos>``, ``<unk>``): the tokenizer keeps
  bracketed symbols of the units table whole, so ``<blank>`` would become a CTC target of id 0 (the blank itself)
  and ``<sos/eos>`` an end of sentence in mid-target: ``special_symbol``;
- a transcript more than :data:`MAX_UNK_SHARE` of whose tokens map to ``<unk>`` (issue 66 G: lower-case text in a
  hand-made data.list under upper-case units trained as all-``<unk>`` targets after one warning): ``unk_text``,
  the warning naming the count and the unknown tokens.

A target CTC cannot align in the encoder's output frames is dropped as a filter would: CTC needs one frame per token
plus a blank between two equal neighbours; with fewer frames its loss is infinite (0 under ``zero_infinity``) while
the decoder still trains on the utterance. Counted as ``ctc_frames``, like a ``filter_conf`` reason.
"""
from typing import Callable, List, Optional

from wenet_udps.dataset.audio import UnusableUtterance
from wenet_udps.text.base_tokenizer import BLANK, SOS_EOS, UNK

RESERVED_SYMBOLS = (BLANK, SOS_EOS, UNK)
# A target with more than this share of its tokens mapped to <unk> teaches mostly <unk>: the text is not in the
# units' case, script or spelling (a few unknown tokens in a long target are kept, and counted by the tokenizer).
MAX_UNK_SHARE = 0.5


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
        self.unk_id = table[UNK]
        self.tokenizer = tokenizer
        self.output_frames = output_frames

    def check_text(self, key: str, text: str, label: List[int]) -> None:
        """UnusableUtterance for a transcript that is empty or gives no token (reason ``empty_text``), names a
        reserved symbol or maps to one's id (a BPE model or a units file may produce their ids from other
        spellings; ``special_symbol``), or maps mostly to ``<unk>`` (``unk_text``)."""
        if not label:
            what = "empty or blank" if not text.strip() else f"{text[:40]!r}, which gives no token"
            raise UnusableUtterance(f"transcript of {key} is {what}: nothing to train on", reason="empty_text")
        found = {s for s in RESERVED_SYMBOLS if s in text} | {self.reserved_ids[i] for i in label
                                                             if i in self.reserved_ids}
        if found:
            raise UnusableUtterance(f"transcript of {key} holds the reserved symbol(s) {', '.join(sorted(found))}, "
                                    f"which would become targets of their own ids; remove or replace them in the "
                                    f"text", reason="special_symbol")
        unknown = sum(i == self.unk_id for i in label)
        if unknown > MAX_UNK_SHARE * len(label):
            tokens = self.tokenizer.text2tokens(text)
            missing = ", ".join(map(repr, sorted({t for t in tokens if t not in self.tokenizer.symbol_table})[:5]))
            raise UnusableUtterance(
                f"transcript of {key}: {unknown} of its {len(label)} tokens are not in the units "
                f"({self.tokenizer.symbol_table_path}) and would train as {UNK} (e.g. {missing}); is the text in "
                f"the units' case and script (run.sh --text_case)?", reason="unk_text")

    def ctc_reason(self, label: List[int], frames: int) -> Optional[str]:
        """``"ctc_frames"`` when ``frames`` feature frames give too few encoder frames for ``label``, else None."""
        if self.output_frames is None or not label:
            return None
        return "ctc_frames" if self.output_frames(frames) < ctc_frames_needed(label) else None
