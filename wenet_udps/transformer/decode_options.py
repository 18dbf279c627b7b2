"""The one check of decoding options: their values, the modes that use them, and what the model can decode at.

Every entry point goes through it: ``recognize`` and ``bench/decode_speed.py`` (their flags are made from
:data:`DECODE_OPTIONS`, and :func:`resolve_decode_options` runs right after parsing), the Python API
(``transcribe``, ``decode_list``, ``stream``: the same function on the keywords) and ``ASRModel.decode``
(:func:`check_decode_options`). A value out of range, an option given that no requested mode uses, an LM mode
without an LM: a :class:`UserError` naming the option and what is valid (one line; exit 2 from a command, where it
reads ``--ctc_weight``, and ``ctc_weight=`` from Python). An option that some requested modes use and others
cannot: those others decode without it, with one warning naming them, and their decode.info records None for it
(:func:`idle_record`).

What a model can decode at is decided from its own encoder (built from its conf): ``use_dynamic_chunk`` (any chunk
size, or full context), ``static_chunk_size`` S > 0 without dynamic chunks (the encoder applies chunk S whatever
is asked: S only), neither (full context only). ``recognize``, ``ASRModel.decode`` and ``export`` all call
:func:`check_decode_options` / :func:`chunk_size_for`, so a chunk size that a path would silently replace by the
model's own is refused on every path alike.
"""
import argparse
import logging
import numbers
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from wenet_udps.transformer.modes import DECODING_METHODS, JOINT_METHODS, LM_METHODS, METHODS_WITHOUT_LM
from wenet_udps.utils import cli
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.schema import BATCH_SIZE_MAX, BATCH_WHY

if TYPE_CHECKING:  # torch only for annotations: run.sh's start-up check (run_sh_error) imports no torch
    from torch import nn

RESCORING = ("attention_rescoring", "attention_rescoring_lm")
CTC_SEARCHES = tuple(m for m in DECODING_METHODS if m != "attention")
# ESPnet's CTC weight of its joint CTC/attention decoding (its AN4, LibriSpeech, AISHELL recipes decode with 0.3).
JOINT_CTC_WEIGHT = 0.3
# lm_weight scales the LM's log10 probability of a word (KenLM's; 1.5 to 4.5 for most words of an n-gram LM, 3 to
# 10 nats) against the CTC log-probabilities of its units. Tuned values lie between 0.1 and 2 (run.sh's grid is
# 0.3 0.6 1.0, docs/lm.md's AN4 grid 0 to 1); at 5 a word already costs 7 to 20 more than a confident CTC spike
# gives, so words are dropped, and far above it (1e6) every hypothesis is empty (issue 57, M13).
LM_WEIGHT_MAX = 5.0
# Every size a user gives has a ceiling, each with its reason in the message (issue 66, case 6: beam_size=10**9
# grew the API to 18 GB, recognize --beam_size 1000000000 ended in a MemoryError traceback).
BEAM_SIZE_MAX = 1000
BEAM_WHY = ("hypotheses kept per frame, and the n-best that rescoring scores at once: each frame of a search tries "
            "up to beam_size x the vocabulary, so time and memory grow with it; WeNet decodes at 10, ESPnet at 10 "
            "to 60")
CHUNK_MAX = 10000
CHUNK_WHY = (f"encoder frames; {CHUNK_MAX} of them are over 400 s of audio, so a longer chunk is full context, "
             f"which -1 says")
LEFT_CHUNKS_WHY = f"more left chunks than an utterance has ({CHUNK_MAX} of one frame: over 400 s) are all of them: -1"
CHUNK_SIZE = cli.int_range(1, CHUNK_MAX, why=CHUNK_WHY)           # export's and sherpa_decode's --chunk_size
LEFT_CHUNKS = cli.int_range(0, CHUNK_MAX, also=(-1,), why=LEFT_CHUNKS_WHY)  # ... and --left_chunks
# The modes whose searches take the hotwords' bonus (transformer/context_graph.py): the CTC prefix searches
# (without and with the LM), the rescoring of their n-best and the joint searches; not greedy, not attention.
CONTEXT_MODES = tuple(m for m in DECODING_METHODS if m not in ("ctc_greedy_search", "attention"))
CONTEXT_USED_BY = "every mode but ctc_greedy_search and attention"
# A unit's CTC log-probability where the model is unsure lies within a few nats of its rival's; a bonus of 20 per
# unit (e^20) outweighs any acoustic evidence, so every phrase would be "heard" wherever one of its units is.
CONTEXT_SCORE_MAX = 20.0


@dataclass(frozen=True)
class DecodeOption:
    """A decoding option: ``check`` the ``wenet_udps.utils.cli`` checker of its text (its ``value`` attribute
    checks a Python value with the same message; None: a flag), ``default``, ``modes`` the modes that use it (None:
    every mode), ``used_by`` those modes in words, ``help``; ``families`` groups of the modes that use it alike, each
    with its own default (``ctc_weight`` weighs the CTC score in the rescoring modes and is λ of the joint modes):
    a value not given is then each mode's own (:func:`value_for`)."""
    check: Optional[Callable[[str], Any]]
    default: Any
    modes: Optional[Tuple[str, ...]]
    used_by: str
    help: str
    families: Tuple[Tuple[Tuple[str, ...], Any], ...] = ()
    flag: Optional[str] = None  # the command line's name where it differs (hotwords= is --context_file)

    def family(self, mode: str) -> Optional[Tuple[str, ...]]:
        """The modes that use the option as ``mode`` does (None: no family, every mode alike)."""
        return next((modes for modes, _ in self.families if mode in modes), None)

    def default_for(self, mode: str) -> Any:
        return next((value for modes, value in self.families if mode in modes), self.default)


DECODE_OPTIONS: Dict[str, DecodeOption] = {
    "beam_size": DecodeOption(cli.int_range(1, BEAM_SIZE_MAX, why=BEAM_WHY), 10, None, "",
                              f"beam of the CTC prefix, LM, attention and joint searches, at most {BEAM_SIZE_MAX}"),
    "batch_size": DecodeOption(cli.int_range(1, BATCH_SIZE_MAX, why=BATCH_WHY), 16, None, "",
                               f"utterances read per batch, at most {BATCH_SIZE_MAX} (each is decoded alone)"),
    "ctc_weight": DecodeOption(
        cli.float_range(0.0, 1.0), None, RESCORING + JOINT_METHODS,
        "the rescoring and joint modes (attention_rescoring, attention_rescoring_lm, joint_ctc_attention, "
        "joint_ctc_attention_lm)",
        "rescoring: weight of the CTC prefix score added to the decoder's (attention_rescoring_lm: of the CTC + LM "
        "score of the LM search; above 1 CTC would outweigh the decoder that rescoring is for), default 0; joint "
        f"modes: lambda of (1 - lambda) log P_dec + lambda log P_ctc, default {JOINT_CTC_WEIGHT:g} (ESPnet's). "
        "One value given applies to every mode asked for",
        families=((RESCORING, 0.0), (JOINT_METHODS, JOINT_CTC_WEIGHT))),
    "reverse_weight": DecodeOption(
        cli.float_range(0.0, 1.0), 0.0, RESCORING, "attention_rescoring and attention_rescoring_lm decoding",
        "right-to-left decoder weight in attention_rescoring (bitransformer; an error otherwise)"),
    "decoding_chunk_size": DecodeOption(
        cli.int_range(1, CHUNK_MAX, also=(-1,), why=CHUNK_WHY), None, None, "",
        "-1 full context; > 0 chunk size (0, training's random chunks, is rejected); default the model's own (full "
        "context, or its static_chunk_size). A size the model cannot decode at is refused"),
    "num_decoding_left_chunks": DecodeOption(LEFT_CHUNKS, -1, None, "",
                                             "left chunks seen per chunk, -1 all"),
    "simulate_streaming": DecodeOption(None, False, None, "",
                                       "with a chunk size > 0: encoder chunk by chunk with caches (batch size 1)"),
    "length_penalty": DecodeOption(
        cli.finite_float, 0.0, ("attention",), "attention decoding",
        "attention mode: rank the final beam by score / length ** length_penalty (> 0 favours longer hypotheses)"),
    "max_len_ratio": DecodeOption(
        cli.float_range(0.0, low_open=True), None, ("attention",), "attention decoding",
        "attention mode: at most ceil(ratio * encoder frames) tokens per utterance (default 1.0, WeNet's bound)"),
    "blank_penalty": DecodeOption(cli.float_range(0.0), 0.0, CTC_SEARCHES, "the CTC searches (every mode but "
                                  "attention)", "subtracted from the blank logit before the CTC searches (>= 0)"),
    "length_bonus": DecodeOption(
        cli.finite_float, 0.0, JOINT_METHODS, "the joint modes (joint_ctc_attention, joint_ctc_attention_lm)",
        "joint modes: added to a hypothesis' score per token, eos included (ESPnet's penalty; > 0 longer "
        "hypotheses, fewer deletions)"),
    "lm": DecodeOption(
        cli.existing_file, None, LM_METHODS, "the *_lm modes",
        "word n-gram LM of the *_lm modes: ARPA, or KenLM binary with its words file LM.bin.words (run.sh's LM "
        "stage writes both)"),
    "lm_weight": DecodeOption(
        cli.float_range(0.0, LM_WEIGHT_MAX), 0.5, LM_METHODS, "the *_lm modes",
        f"*_lm modes: weight of the LM log-probability, in [0, {LM_WEIGHT_MAX:g}] (tune on dev; far above the "
        f"bound every hypothesis comes out empty)"),
    "word_score": DecodeOption(cli.finite_float, 0.0, LM_METHODS, "the *_lm modes",
                               "*_lm modes: bonus per word (> 0 fewer deletions; tune on dev)"),
    "hotwords": DecodeOption(
        cli.existing_file, None, CONTEXT_MODES, CONTEXT_USED_BY,
        "hotword file to bias decoding toward: one phrase a line, an optional ' :score' at its end (sherpa-onnx's "
        "format; docs/hotwords.md); the Python API's hotwords= also takes a list of phrases", flag="context_file"),
    "context_score": DecodeOption(
        cli.float_range(0.0, CONTEXT_SCORE_MAX, low_open=True), 3.0, CONTEXT_MODES, CONTEXT_USED_BY,
        f"bonus per matched unit of a hotword phrase without its own ' :score', in (0, {CONTEXT_SCORE_MAX:g}] "
        f"(taken back unless the phrase is completed)"),
    "context_weight": DecodeOption(
        cli.float_range(0.0, 1.0), 1.0, RESCORING, "attention_rescoring and attention_rescoring_lm",
        "weight of the hotword bonus in the rescoring modes' final score (1: as the CTC prefix search gave it; 0: "
        "dropped, as WeNet's rescoring drops it)"),
}
# Options that need the hotwords: alone they would do nothing.
NEED_HOTWORDS = ("context_score", "context_weight")


def value_for(name: str, value: Any, mode: str) -> Any:
    """Option ``name``'s value in ``mode``: ``value`` (one for every mode, or a {mode: value} mapping, which the
    recipe's records give when the modes asked for were decoded with different values), or the mode's own default
    where it is None or the mapping lacks the mode."""
    if isinstance(value, Mapping):
        value = value.get(mode)
    return DECODE_OPTIONS[name].default_for(mode) if value is None else value


def add_decode_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """``--name`` for each of ``names``, checked by its :data:`DECODE_OPTIONS` checker; the default is None (not
    given: :func:`resolve_decode_options` tells an option the user gave from one left at its default)."""
    for name in names:
        spec = DECODE_OPTIONS[name]
        shown = "" if spec.default is None else f" (default {spec.default})"
        if spec.check is None:
            parser.add_argument(f"--{name}", action="store_true", default=None, help=spec.help)
        else:
            parser.add_argument(f"--{spec.flag or name}", dest=name, type=spec.check, default=None,
                                help=spec.help + shown)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _spell(name: str, flags: bool, value: Any = None) -> str:
    """How the option reads in a message: ``--name value`` (a command) or ``name=value`` (Python)."""
    if flags:
        spec = DECODE_OPTIONS.get(name)
        name = spec.flag or name if spec is not None else name
        return f"--{name}" if value is None else f"--{name} {_show(value)}"
    return name if value is None else f"{name}={value!r}"


def option_value(name: str, value: Any, flags: bool = False) -> Any:
    """``value`` of option ``name`` checked as the command line checks its text (its range, finite); UserError
    naming the option and the valid range otherwise."""
    spec = DECODE_OPTIONS[name]
    where = _spell(name, flags, value)
    if spec.check is None:
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected True or False")
        return value
    if name == "hotwords" and isinstance(value, (list, tuple)):  # the API's list of phrases
        if not all(isinstance(v, str) for v in value):
            raise UserError(f"{where}: expected a list of phrases (strings) or a hotword file's path")
        return tuple(value)
    if spec.check is cli.existing_file:
        if not isinstance(value, (str, os.PathLike)):
            raise UserError(f"{where}: expected a file path")
        try:
            return spec.check(os.fspath(value))
        except argparse.ArgumentTypeError as e:
            hint = f" (phrases go in a list: {name}=[{value!r}])" if name == "hotwords" and not flags else ""
            raise UserError(f"{where}: {e}{hint}") from None
    integer = spec.check.__name__ == "int"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if integer else numbers.Real):
        raise UserError(f"{where}: expected {'an integer' if integer else 'a number'}")
    try:
        return spec.check.value(int(value) if integer else float(value))
    except argparse.ArgumentTypeError as e:
        raise UserError(f"{where}: {e}") from None


def _refuse_unused(modes: Sequence[str], asked: Mapping[str, Any], flags: bool) -> None:
    """UserError for the first option in ``asked`` that none of ``modes`` uses (it would be ignored silently)."""
    for name, value in asked.items():
        spec = DECODE_OPTIONS[name]
        if spec.modes is not None and not set(spec.modes) & set(modes):
            raise UserError(f"{_spell(name, flags, value)} applies to {spec.used_by} only, which "
                            f"{_spell('modes', flags)} {' '.join(modes)} does not run; add {spec.modes[0]} to "
                            f"{_spell('modes', flags)} or leave the option out")


def idle_options(mode: str, asked: Iterable[str]) -> List[str]:
    """The options of ``asked`` (names the user gave) that ``mode`` does not use."""
    return [n for n in asked if DECODE_OPTIONS[n].modes is not None and mode not in DECODE_OPTIONS[n].modes]


def _warn_idle(modes: Sequence[str], asked: Mapping[str, Any], flags: bool) -> None:
    """One warning for the options in ``asked`` that some of ``modes`` use and the others decode without."""
    parts = []
    for name, value in asked.items():
        idle = [m for m in modes if idle_options(m, [name])]
        if idle:
            parts.append(f"{' '.join(idle)} without {_spell(name, flags, value)} (it applies to "
                         f"{DECODE_OPTIONS[name].used_by} only)")
    if parts:
        logging.warning("decoding %s", "; ".join(parts))


def idle_record(mode: str, asked: Iterable[str], record: Mapping[str, str]) -> Dict[str, str]:
    """The lines of ``record`` (a decode.info's, shared by the modes of one run) that ``mode`` did not use, each
    as "None": every option of ``asked`` the mode does not use, and for the hotwords every ``context_*`` line (the
    list's file, its SHA-256, its phrases, the scores that weigh it)."""
    idle = idle_options(mode, asked)
    keys = {DECODE_OPTIONS[name].flag or name for name in idle} | set(idle)
    if "hotwords" in idle:
        keys |= {key for key in record if key.startswith("context_")}
    return {key: "None" for key in record if key in keys}


def resolve_decode_options(modes: Union[str, Sequence[str]], given: Mapping[str, Any], *,
                           defaults: Optional[Callable[[List[str]], Mapping[str, Any]]] = None,
                           flags: bool = False, empty_ok: bool = False) -> Tuple[List[str], Dict[str, Any]]:
    """(the modes as a list, every option of :data:`DECODE_OPTIONS` with its value) after the one check.

    Args:
        modes: one mode name or several (a single string is one mode, not its letters).
        given: the options the user gave (a command's flags not left at None, the API's keywords); each is
            checked (range, finite, type), and one that no mode in ``modes`` uses is refused.
        defaults: modes -> the values of options not given where they differ from the table's (the API: the
            recipe's decoding, ``wenet_udps.decode.recipe``); applied only to options the modes use.
        flags: spell the options as a command's flags in messages (``--ctc_weight``), else as keywords.
        empty_ok: no mode at all is allowed (a benchmark timing something else); else a UserError.
    """
    # one name, or a list or tuple of names; anything else (None, a number) is one mode that is not a mode name
    modes = list(modes) if isinstance(modes, (list, tuple)) else [modes]
    unknown = [m for m in modes if not isinstance(m, str) or m not in DECODING_METHODS]
    if (not modes and not empty_ok) or unknown:
        got = f"mode {unknown[0]!r}" if unknown else "no mode"
        raise UserError(f"{got}: valid modes are {', '.join(DECODING_METHODS)}")
    twice = sorted({m for m in modes if modes.count(m) > 1})
    if twice:  # it would be decoded twice, into the one folder: a mistake, not a request (issue 80)
        raise UserError(f"{_spell('modes', flags)}: {', '.join(twice)} given more than once; each mode is decoded "
                        f"once (give it once)")
    # an empty list of hotwords is no biasing at all: as if not given, in every mode
    checked = {name: option_value(name, value, flags) for name, value in given.items()
               if value is not None and not (name == "hotwords" and isinstance(value, (list, tuple)) and not value)}
    _refuse_unused(modes, checked, flags)
    _warn_idle(modes, checked, flags)
    lone = [name for name in NEED_HOTWORDS if name in checked and "hotwords" not in checked]
    if lone:
        raise UserError(f"{_spell(lone[0], flags, checked[lone[0]])} weighs the hotwords' bonus: give "
                        f"{_spell('hotwords', flags)} too, or leave it out")
    _refuse_streaming_joint(modes, checked.get("decoding_chunk_size"), checked.get("simulate_streaming", False),
                            flags)
    needs_lm = [m for m in modes if m in LM_METHODS]
    if needs_lm and "lm" not in checked:
        raise UserError(f"{_spell('modes', flags)} {' '.join(needs_lm)} need a word LM: add "
                        f"{_spell('lm', flags)}{' ' if flags else '='}LM.arpa (or a KenLM binary LM.bin)")
    values = {name: spec.default for name, spec in DECODE_OPTIONS.items()}
    for name, value in (defaults(modes) if defaults else {}).items():
        if DECODE_OPTIONS[name].modes is None or set(DECODE_OPTIONS[name].modes) & set(modes):
            values[name] = value
    values.update(checked)
    return modes, values


def chunking(encoder: "nn.Module") -> str:
    """``"dynamic"``, ``"static S"`` or ``"none"``: the chunk training of ``encoder`` (see the module docstring)."""
    if getattr(encoder, "use_dynamic_chunk", False):
        return "dynamic"
    static = int(getattr(encoder, "static_chunk_size", 0) or 0)
    return f"static {static}" if static > 0 else "none"


def chunk_size_for(encoder: "nn.Module", requested: Optional[int], option: str = "--decoding_chunk_size") -> int:
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


def check_decode_options(encoder: "nn.Module", methods: Iterable[str], *, decoding_chunk_size: Optional[int] = None,
                         num_decoding_left_chunks: int = -1, simulate_streaming: bool = False,
                         batch_size: Optional[int] = None, ctc_weight: Any = None, reverse_weight: float = 0.0,
                         length_penalty: float = 0.0, blank_penalty: float = 0.0,
                         max_len_ratio: Optional[float] = None, length_bonus: float = 0.0, context: Any = None,
                         context_weight: float = 1.0) -> int:
    """UserError naming the first option (as ``recognize`` spells it) that would do nothing with this model and
    these ``methods``; else the chunk size decoding runs at (see :func:`chunk_size_for`).

    Values at their defaults (0, -1, False, None) are not options that were asked for, so they always pass (the
    entry points refuse what the user gave that no mode uses, default or not: :func:`resolve_decode_options`).
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
    _refuse_streaming_joint(methods, decoding_chunk_size, simulate_streaming, flags=True)
    # ASRModel.decode sees values only: one that differs from its default was asked for.
    asked = {name: value for name, value in (("ctc_weight", ctc_weight), ("reverse_weight", reverse_weight),
                                             ("length_penalty", length_penalty), ("max_len_ratio", max_len_ratio),
                                             ("blank_penalty", blank_penalty), ("length_bonus", length_bonus),
                                             ("hotwords", context), ("context_weight", context_weight))
             if value is not None and value != DECODE_OPTIONS[name].default}
    _refuse_unused(methods, asked, flags=True)
    return chunk


def _refuse_streaming_joint(methods: Sequence[str], decoding_chunk_size: Optional[int], simulate_streaming: bool,
                            flags: bool) -> None:
    """UserError for a joint mode asked to decode chunk by chunk (a chunk size > 0, or streaming)."""
    joint = [m for m in methods if m in JOINT_METHODS]
    if not joint or not (simulate_streaming or (decoding_chunk_size is not None and decoding_chunk_size > 0)):
        return
    name, value = (("simulate_streaming", True) if simulate_streaming else
                   ("decoding_chunk_size", decoding_chunk_size))
    shown = None if flags and name == "simulate_streaming" else value  # (a flag without a value)
    raise UserError(f"{_spell(name, flags, shown)}: "
                    f"{' and '.join(joint)} cannot stream: its search starts only when the whole utterance is "
                    f"encoded (each step's CTC prefix score sums over every frame), so it gives no partial result "
                    f"and all its time comes after the last chunk; decode it at full context (leave "
                    f"{_spell(name, flags)} out), or stream with attention_rescoring")


# run.sh's decoding options (stage 5 passes them to recognize) and the recognize options they are; --decode_modes
# is checked apart (the modes without an LM; --lm true adds the *_lm modes).
RUN_SH_OPTIONS = {"beam_size": "beam_size", "decode_batch_size": "batch_size",
                  "decoding_chunk_size": "decoding_chunk_size", "num_decoding_left_chunks": "num_decoding_left_chunks",
                  "joint_ctc_weight": "ctc_weight"}


def run_sh_error(values: Mapping[str, str]) -> str:
    """run.sh's decoding options (run.sh's name -> the text given: ``decode_modes``, space-separated, and those of
    :data:`RUN_SH_OPTIONS`) checked as stage 5's recognize checks them, before any stage: the first error in one
    line naming run.sh's option, or "" (a value that stage 5 would refuse after hours of training is refused at
    the start)."""
    try:
        for name, text in values.items():
            if name == "decode_modes":
                modes = text.split()
                wrong = [m for m in modes if m not in METHODS_WITHOUT_LM]
                if not modes or wrong:
                    got = f"'{wrong[0]}' is not a mode" if wrong else "no mode given"
                    lm = " (the *_lm modes come with --lm true)" if wrong and wrong[0] in LM_METHODS else ""
                    raise UserError(f"--decode_modes '{text}': {got}; valid: {' '.join(METHODS_WITHOUT_LM)}{lm}")
                continue
            try:
                DECODE_OPTIONS[RUN_SH_OPTIONS[name]].check(text)
            except argparse.ArgumentTypeError as e:
                shown = f"'{text}'" if name == "joint_ctc_weight" else text
                raise UserError(f"--{name} {shown}: {e}") from None
        if "decode_modes" in values:
            _refuse_streaming_joint(values["decode_modes"].split(), int(values.get("decoding_chunk_size", -1)), False,
                                    flags=True)
    except UserError as e:
        return cli.one_line(str(e))
    return ""
