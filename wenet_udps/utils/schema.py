"""The one config-checking mechanism: a config section is checked against what its consumer declares.

A consumer declares its keys once, as the keyword parameters of its constructor or function (annotated with their
types) or as the fields of a small dataclass. :func:`check_section` then checks a section against it:

- every key must be one of those names, else :class:`ConfigError` names the key path, the valid keys and, when one
  is close, "did you mean";
- every value is converted to its annotated type (PyYAML 1.1 reads ``2e-3`` as a string: it becomes a float where a
  float is expected, ``"1"`` an int where an int is), or rejected naming the key and the expected type;
- a dataclass field may describe a nested section (:func:`section`): a fixed spec, or a ``name`` + ``name_conf``
  choice whose spec is the class the sibling ``name`` key picks from a registry.

Values are range-checked by key name (:data:`RANGES`): WeNet's key names mean the same in every section (a
``dropout_rate`` is a probability wherever it appears), so one table covers every section. Every float must be
finite.

Nothing here knows the config tree; ``wenet_udps.config`` assembles it. This module imports nothing of the package
but ``wenet_udps.utils``, so every layer may use it.
"""
import collections.abc
import dataclasses
import difflib
import functools
import inspect
import math
import re
import types
import typing
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from wenet_udps.utils.cli import UserError
from wenet_udps.utils.registry import lookup

_EMPTY = inspect.Parameter.empty


class ConfigError(UserError):
    """A config mistake: ``<source>: <key path>: <problem>`` (source = the file or the ``--override``)."""

    def __init__(self, key_path: str, problem: str, source: str = ""):
        self.key_path, self.problem, self.source = key_path, problem, source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.key_path}: " if self.key_path else ""
        return f"{self.source}: {where}{self.problem}" if self.source else f"{where}{self.problem}"

    def in_source(self, source: str) -> "ConfigError":
        """This error naming ``source`` (kept when it names one already)."""
        return self if self.source else ConfigError(self.key_path, self.problem, source)


@dataclasses.dataclass(frozen=True)
class Param:
    annotation: Any = Any
    default: Any = _EMPTY
    nested: Optional["Nested"] = None


@dataclasses.dataclass(frozen=True)
class Nested:
    """A nested section: ``spec`` fixed, or picked by the sibling ``choice`` key from ``registry``."""
    spec: Any = None
    supplied: Tuple[str, ...] = ()
    choice: Optional[str] = None
    registry: Optional[Mapping[str, Any]] = None
    default: Optional[Callable[[Mapping[str, Any]], str]] = None
    lazy: bool = False


def section(spec: Any = None, *, supplied: Iterable[str] = (), choice: Optional[str] = None,
            registry: Optional[Mapping[str, Any]] = None,
            default: Optional[Callable[[Mapping[str, Any]], str]] = None, lazy: bool = False) -> Any:
    """A dataclass field holding a nested section (default None = absent). See the module docstring.

    With ``lazy``, ``spec`` is a function returning the spec when a section is checked (a registry that grows
    after import, e.g. the UDPS attentions behind ``udps_conf``).

    With ``choice``, the section's spec is ``registry[parent[choice]]`` (when the parent lacks the key: the choice
    field's default, or ``default(section)`` when given), plus ``spec`` when given (keys either takes).
    """
    nested = Nested(spec=spec, supplied=tuple(supplied), choice=choice, registry=registry, default=default,
                    lazy=lazy)
    return dataclasses.field(default=None, metadata={"nested": nested})


def _hints(obj: Any) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # unresolvable forward references (third-party classes): fall back to the raw annotations
        return dict(getattr(obj, "__annotations__", {}) or {})


def params_of(spec: Any, supplied: Iterable[str] = ()) -> Dict[str, Param]:
    """The keys ``spec`` declares: dataclass fields, or the named parameters of a class's ``__init__`` / a function
    (``self``, ``*args``, ``**kwargs`` and the ``supplied`` ones excluded). A sequence of specs: their union."""
    if isinstance(spec, (list, tuple)):
        out: Dict[str, Param] = {}
        for one in spec:
            out.update(params_of(one, supplied))
        return out
    skip = set(supplied)
    return {k: v for k, v in _declared(spec).items() if k not in skip}


@functools.lru_cache(maxsize=None)
def _declared(spec: Any) -> Dict[str, Param]:
    """Every key of one spec (cached: signatures and type hints are read once per spec)."""
    skip = {"self"}
    if dataclasses.is_dataclass(spec):
        hints = _hints(spec)
        return {f.name: Param(hints.get(f.name, Any),
                              f.default if f.default is not dataclasses.MISSING else _EMPTY,
                              f.metadata.get("nested"))
                for f in dataclasses.fields(spec) if f.name not in skip}
    func = spec.__init__ if inspect.isclass(spec) else spec
    hints = _hints(func)
    return {name: Param(hints.get(name, Any), p.default)
            for name, p in inspect.signature(func).parameters.items()
            if name not in skip and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def defaults_of(spec: Any) -> Dict[str, Any]:
    """Name -> default of every key of ``spec`` that has one."""
    return {k: p.default for k, p in params_of(spec).items() if p.default is not _EMPTY}


def _unknown(key: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key{hint}; valid keys: {', '.join(sorted(valid)) or '(none)'}"


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _item_type(args: Tuple[Any, ...], i: int) -> Any:
    """Element type ``i`` of a ``List[X]`` / ``Tuple[X, ...]`` / ``Tuple[X, Y]`` annotation."""
    if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis):
        return args[0]
    return args[i] if i < len(args) else Any


def convert(value: Any, annotation: Any, path: str) -> Any:
    """``value`` as ``annotation`` (see the module docstring), else ConfigError naming ``path``."""
    if annotation is Any or annotation is _EMPTY or isinstance(annotation, (str, typing.TypeVar)):
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return convert(value, arg, path)
            except ConfigError:
                continue
        raise ConfigError(path, f"expected {' or '.join(_type_name(a) for a in args)}, got {value!r}")
    if origin in (list, tuple, collections.abc.Sequence):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {value!r} ({type(value).__name__})")
        fixed = origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis)
        if fixed and len(value) != len(args):
            raise ConfigError(path, f"expected a list of {len(args)} values, got {len(value)}: {list(value)!r}")
        items = [convert(v, _item_type(args, i), f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, collections.abc.Mapping) or annotation is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"expected a mapping, got {value!r} ({type(value).__name__})")
        return dict(value)
    if annotation in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {value!r} ({type(value).__name__})")
        return annotation(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
    elif annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
    elif annotation is str:
        if isinstance(value, str):
            return value
    elif isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        if value is None:
            raise ConfigError(path, f"expected {_type_name(annotation)}, got null")
        return value  # a type YAML cannot produce (e.g. a Tensor): the consumer checks it
    else:
        return value
    raise ConfigError(path, f"expected {_type_name(annotation)}, got {value!r} ({type(value).__name__})")


# A batch (of training or decoding) is held in memory at once: the ceiling of every batch_size, decoding's too.
BATCH_SIZE_MAX = 1024
BATCH_WHY = "a batch's padded features, and in training its activations, are held in memory at once"
# A model's width (output_size, linear_units) and depth or count (blocks, heads, kernel) ceilings, and its parameter
# count's (wenet_udps.model_builder.check_model_size, before anything is allocated).
WIDTH_MAX = 65536
DEPTH_MAX = 1024
MODEL_PARAMS_MAX = 2 * 10 ** 9
SIZE_WHY = "a model's weights are allocated at once; this is far above any speech model's"
# A units file's size (tools/train_bpe.py --nbpe): the CTC and decoder output layers hold a row per unit
UNITS_MAX = WIDTH_MAX
UNITS_WHY = "a model's output layers hold a row per unit; ASR vocabularies are of a few thousand"
# (key name pattern, low, high, low inclusive[, high inclusive[, why]]): the valid range of every key whose name
# matches (fullmatch), and why a ceiling is where it is; a list value (``betas``) is checked item by item.
# Ceilings of the data and training loop (issue 80 round 7: 1e12 was accepted, then hung or failed far inside).
EPOCHS_MAX = 100_000
EPOCHS_WHY = "an epoch is a pass over the training data; WeNet's recipes train 100 to 400"
FRAME_MS_MAX = 1000.0
FRAME_WHY = "milliseconds; Kaldi's frame is 25 ms long every 10 ms, and a frame of over 1 s is no frame"
RATE_MAX = 192_000
RATE_WHY = "Hz; 192 kHz is the highest audio rate in use"   # (also an array's rate: dataset.audio)
# np.random.seed takes 0 .. 2**32 - 1, and training seeds each rank with seed + rank (trainer.seed_all): half that
# range leaves every rank's seed valid
SEED_MAX = 2 ** 31 - 1
SEED_WHY = "numpy's seeds are 32-bit, and each training rank is seeded with seed + rank"

RANGES: Tuple[Tuple[Any, ...], ...] = (
    (r".*dropout_rate|ctc_weight|lsm_weight|reverse_weight|max_bad_fraction|dither|.*_prob", 0.0, 1.0, True),
    (r"batch_size", 0.0, BATCH_SIZE_MAX, False, True, BATCH_WHY),
    # a model's widths and depths: ceilings far above any ASR model (WeNet's largest: 1024 wide, 24 blocks), so that
    # a typo is a message naming its key, not an allocator's traceback (the whole model: MODEL_PARAMS_MAX)
    (r"output_size|linear_units", 0.0, WIDTH_MAX, False, True, SIZE_WHY),
    (r"attention_heads|num_blocks|r_num_blocks|cnn_module_kernel|positionwise_conv_kernel_size", 0.0, DEPTH_MAX, False,
     True, SIZE_WHY),
    (r"max_epoch", 0.0, EPOCHS_MAX, False, True, EPOCHS_WHY),
    (r"seed", 0.0, SEED_MAX, True, True, SEED_WHY),
    (r"frame_shift|frame_length", 0.0, FRAME_MS_MAX, False, True, FRAME_WHY),
    (r"resample_rate", 0.0, RATE_MAX, False, True, f"{RATE_WHY}, and every utterance is resampled to this rate"),
    (r"lr|grad_clip|max_frames_in_batch"
     r"|accum_grad|num_mel_bins|num_ceps|sample_rate"
     r"|shuffle_size|sort_size|log_interval|max_length|token_max_length"
     r"|max_output_input_ratio", 0.0, math.inf, False),
    (r"warmup_steps|min_length|token_min_length|min_output_input_ratio|weight_decay|num_t_mask|num_f_mask"
     r"|max_t|max_f|ctc_blank_id|save_interval|channel", 0.0, math.inf, True),
    (r"betas", 0.0, 1.0, True, False),  # Adam's moment decays: 1 would never forget
    # the floor of the UDPS / cosine norms (udps_conf, cosine_conf, attention_conf): sqrt(eps) of a negative one is
    # a math domain error at the first batch, and 0 makes a zero query or key row 0/0 = NaN
    (r"eps", 0.0, math.inf, False),
)


def check_range(key: str, value: Any, path: str) -> None:
    """ConfigError naming ``path`` when a number is not finite or outside the range :data:`RANGES` gives ``key``."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_range(key, item, f"{path}[{i}]")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(path, f"must be a finite number, got {value}")
    for pattern, low, high, low_inclusive, *rest in RANGES:
        high_inclusive = rest[0] if rest else True
        why = f" ({rest[1]})" if len(rest) > 1 else ""
        if re.fullmatch(pattern, key):
            too_low = value < low if low_inclusive else value <= low
            too_high = value > high if high_inclusive else value >= high
            if too_high and why:  # a ceiling with its reason (the floor reads as for an unbounded key)
                shown = int(high) if float(high).is_integer() else f"{high:g}"   # 2147483647, not 2.14748e+09
                raise ConfigError(path, f"must be {'<=' if high_inclusive else '<'} {shown}, got {value}{why}")
            if too_low or too_high:
                if math.isfinite(high) and not why:
                    valid = f"in [{low:g}, {high:g}{']' if high_inclusive else ')'}"
                elif not low_inclusive and isinstance(value, int):
                    valid = f">= {int(low) + 1}"
                else:
                    valid = f"{'>=' if low_inclusive else '>'} {low:g}"
                raise ConfigError(path, f"must be {valid}, got {value}")
            return


def _nested_spec(nested: Nested, parent: Mapping[str, Any], params: Mapping[str, Param], conf: Any,
                 where: str) -> Any:
    if nested.choice is None:
        return nested.spec() if nested.lazy else nested.spec
    name = parent.get(nested.choice)
    if name is None:  # the choice key's own default, or one computed from the section
        name = nested.default(conf if isinstance(conf, Mapping) else {}) if callable(nested.default) else params[nested.choice].default
    prefix = where.rpartition(".")[0]
    cls = lookup(nested.registry, name, f"{prefix}.{nested.choice}" if prefix else nested.choice)
    return cls if nested.spec is None else [cls, nested.spec]


def check_section(conf: Optional[Mapping[str, Any]], spec: Any, where: str, *,
                  supplied: Iterable[str] = ()) -> Dict[str, Any]:
    """``conf`` checked against ``spec`` and converted (a new dict; None -> {}).

    Args:
        conf: the section as read from YAML.
        spec: a class, function, dataclass or a list of them (keys = the union), see :func:`params_of`.
        where: the section's key path, for messages (``"encoder_conf"``, ``"dataset_conf.filter_conf"``).
        supplied: parameters the code fills in itself, which a config may not set.
    Raises:
        ConfigError: unknown key (with the valid ones and "did you mean"), a value of the wrong type, or a nested
            section's error.
    """
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise ConfigError(where, f"expected a mapping of keys, got {conf!r} ({type(conf).__name__})")
    params = params_of(spec, supplied)
    out: Dict[str, Any] = {}
    for key, value in conf.items():
        path = f"{where}.{key}" if where else str(key)
        param = params.get(key)
        if param is None:
            raise ConfigError(path, _unknown(str(key), list(params)))
        if param.nested is not None:
            if value is not None:
                try:
                    nested_spec = _nested_spec(param.nested, conf, params, value, path)
                except ValueError as e:
                    raise ConfigError("", str(e)) from None
                value = check_section(value, nested_spec, path, supplied=param.nested.supplied)
        elif value is not None or param.default is not None:
            value = convert(value, param.annotation, path)
            check_range(str(key), value, path)
        out[key] = value
    return out


def route(conf: Mapping[str, Any], spec: Any, supplied: Iterable[str] = ()) -> Dict[str, Any]:
    """The part of an already checked ``conf`` that ``spec`` takes (one section shared by several consumers)."""
    names = params_of(spec, supplied)
    return {k: v for k, v in conf.items() if k in names}


def call_with(spec: Callable, conf: Optional[Mapping[str, Any]], where: str, *, supplied: Iterable[str] = (),
              **given: Any) -> Any:
    """``spec(**given, **checked conf)``: check ``conf`` against ``spec`` (``given`` and ``supplied`` names may not
    be set by the config) and call it. A required key the config left out is a ConfigError too."""
    supplied = tuple(supplied) + tuple(given)
    kwargs = check_section(conf, spec, where, supplied=supplied)
    missing = [k for k, p in params_of(spec, supplied).items() if p.default is _EMPTY and k not in kwargs]
    if missing:
        raise ConfigError(where, f"missing required key(s) {', '.join(missing)}")
    return spec(**given, **kwargs)
