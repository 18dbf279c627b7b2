"""Multi-head attention: the registry of every attention site's types and similarity families, and the scaled-dot
family (WeNet's math).

Registry names (YAML values of ``selfattention_layer_type`` / ``src_attention_layer_type``):

| name                | scores per head                                                     |
|---------------------|---------------------------------------------------------------------|
| ``selfattn``        | q.k / sqrt(d_k)                                                     |
| ``rel_selfattn``    | ((q+u).k + (q+v).p) / sqrt(d_k)   (WeNet's, no rel_shift)           |
| ``udps_selfattn``   | 4 a q.k / (|q|+|k|)^2                                              |
| ``rel_udps_selfattn`` | (4 a q.k + 4 b q.p) / (|q|+|k|)^2   (the paper author's variant)   |
| ``crossattn``       | as ``selfattn``; the cache holds the memory's projected k/v          |
| ``udps_crossattn``  | as ``udps_selfattn``; the cache holds 4 alpha k, v and the norms |k| |
| ``cosine_selfattn`` | a q.k / (|q| |k|)                                                    |
| ``rel_cosine_selfattn`` | (a q.k + b q.p) / (|q| |k|)   (``rel_udps_selfattn`` without g)    |
| ``cosine_crossattn`` | as ``cosine_selfattn``; the cache holds the memory's unit keys and values |

All take ``forward(query, key, value, mask, pos_emb, cache) -> (output, new_cache)`` with batch-first tensors:
query (B, T1, D), key/value (B, T2, D), mask bool (B, 1, T2) or (B, T1, T2) (True = attend) or empty,
pos_emb (1 or B, T_key, D), cache (B, H, T_cache, 2 * d_k) holding k and v side by side (``udps_crossattn``:
(B, H, 2 * d_k + 1, T2)). Cross attentions make their cache with ``memory_cache(key, value)``, once per decoding.
The decoder's self-attentions decode with ``step(x, mask, cache, block)``: each position's ``step_entries`` (k and v;
UDPS also |k|) are made once, when the position is new, and written into the decoder's
:class:`~wenet_udps.transformer.step_cache.StepCache` (kept once per utterance where its hypotheses agree).

Each class states its facts as class attributes (``name``, ``kind``, ``family``, ``uses_pos_emb``,
``counterpart``) and joins ``ATTENTION_CLASSES`` through the :func:`register_attention` decorator; each similarity
family (``scaled_dot``, ``udps``, ``cosine``) is a :class:`Family` in ``FAMILIES`` (:func:`register_family`). The
family of a site is chosen through :func:`family_type`, which maps a type to the same site's type in another family
by ``counterpart`` (the scaled-dot type a class stands in for). Everything else that depends on the attention type
(the encoder's self-attention choices, the decoder's positional check, ``att_udps`` / ``att_family``, each family's
options section, the run labels of ``wenet_udps.bin.describe``, run.sh's ``--families``) is derived from these, so
a new variant is one class and a new family one module (docs/design.md, "Adding an attention variant"). The
non-scaled-dot families live in their own modules (:mod:`~wenet_udps.transformer.udps_attention`,
:mod:`~wenet_udps.transformer.cosine_attention`), which import this one; the package's ``__init__`` imports them, so
the registry is complete whichever module is imported first, and this module imports none of them.
"""
import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple, Type

import torch
from torch import nn

from wenet_udps.kernels.dispatch import prefix_pool_attention, scaled_dot_attention

if TYPE_CHECKING:
    from wenet_udps.transformer.step_cache import StepCache

EMPTY_MASK = torch.ones((0, 0, 0), dtype=torch.bool)
EMPTY_CACHE = torch.zeros((0, 0, 0, 0))
ATTENTION_KINDS = ("self", "cross")

SCALED_DOT = "scaled_dot"

ATTENTION_CLASSES: Dict[str, Type["MultiHeadedAttention"]] = {}


@dataclass(frozen=True)
class Family:
    """A similarity family: what every attention class with ``family = name`` computes.

    ``name``: its value in ``att_family``, run.sh ``--families`` and the run labels (exp dir suffixes);
    ``display``: how tables name it; ``conf_key``: the top-level section of its options (the keyword arguments of
    its classes), None when it has none; ``marker``: a parameter name that every attention of this family has and
    no other family's has, so a checkpoint's family is read from its parameter names (None: scaled-dot, which adds
    none to WeNet's).
    """

    name: str
    display: str
    conf_key: Optional[str] = None
    marker: Optional[str] = None


FAMILIES: Dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Add ``family`` to ``FAMILIES``; ValueError when its name, options key or marker is another family's."""
    for other in FAMILIES.values():
        for field in ("name", "conf_key", "marker"):
            mine = getattr(family, field)
            if mine is not None and mine == getattr(other, field):
                raise ValueError(f"family {family.name!r}: {field} {mine!r} is taken by family {other.name!r}")
    FAMILIES[family.name] = family
    # One order whatever the import order (a family module imported first registers after the others): scaled-dot,
    # UDPS (the project's own family), then by name; tables and labels list families in it.
    order = sorted(FAMILIES, key=lambda n: (n != SCALED_DOT, n != "udps", n))
    for name in order:
        FAMILIES[name] = FAMILIES.pop(name)
    return family


register_family(Family(SCALED_DOT, "scaled-dot"))


def register_attention(cls: Type["MultiHeadedAttention"]) -> Type["MultiHeadedAttention"]:
    """Class decorator: add ``cls`` to ``ATTENTION_CLASSES`` under ``cls.name`` (the YAML value).

    Raises:
        ValueError: the name is taken (a subclass must set its own ``name``), ``kind`` is not self/cross, the family
            is not registered, or ``counterpart`` is not a registered scaled-dot type of the same kind and positional
            input, or is already the counterpart of another class of the family (a variant that is no site's
            default in its family sets ``counterpart = None``).
    """
    if cls.kind not in ATTENTION_KINDS:
        raise ValueError(f"{cls.__name__}.kind {cls.kind!r}; valid choices: {', '.join(ATTENTION_KINDS)}")
    if cls.name in ATTENTION_CLASSES:
        raise ValueError(f"attention name {cls.name!r} of {cls.__name__} is taken by "
                         f"{ATTENTION_CLASSES[cls.name].__name__}: give the class its own ``name``")
    if cls.family not in FAMILIES:
        raise ValueError(f"{cls.__name__}.family {cls.family!r} is not registered; valid: {', '.join(FAMILIES)}")
    if cls.family == SCALED_DOT and cls.counterpart is not None:
        raise ValueError(f"{cls.__name__} is scaled-dot: its counterpart is itself (set counterpart = None)")
    if cls.counterpart is not None:
        base = ATTENTION_CLASSES.get(cls.counterpart)
        if base is None or base.family != SCALED_DOT or (base.kind, base.uses_pos_emb) != (cls.kind, cls.uses_pos_emb):
            raise ValueError(f"{cls.__name__}.counterpart {cls.counterpart!r} is no registered scaled-dot type of "
                             f"kind {cls.kind!r} with uses_pos_emb {cls.uses_pos_emb}")
        taken = [c.name for c in ATTENTION_CLASSES.values()
                 if c.family == cls.family and c.counterpart == cls.counterpart]
        if taken:
            raise ValueError(f"{cls.__name__}: {taken[0]!r} already stands in for {cls.counterpart!r} in family "
                             f"{cls.family!r}; a variant that is no site's default sets counterpart = None")
    ATTENTION_CLASSES[cls.name] = cls
    return cls



@register_attention
class MultiHeadedAttention(nn.Module):
    """Scaled-dot multi-head attention with WeNet's parameter names (linear_q/k/v/out).

    Uses torch's fused ``scaled_dot_product_attention``, which computes the same softmax(q.k/sqrt(d_k)) v.
    """

    name = "selfattn"                  # registry name, the YAML value of a ``*_layer_type`` key
    kind = "self"                      # "cross": a given cache is the memory's projected k/v, reused as is
    family = SCALED_DOT                # its similarity (a ``FAMILIES`` name): att_family / att_udps target it
    uses_pos_emb = False               # reads ``pos_emb`` (relative positions; the decoder has none)
    counterpart: Optional[str] = None  # the scaled-dot type this class stands in for (None: scaled-dot itself)
    # its learned score scales: parameter name (an ``effective_scales`` key) -> the symbol it is in the score
    # (plots draw α solid, β dashed, titled with the family's display name: :func:`scale_symbols`)
    scales: Dict[str, str] = {}

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0):
        super().__init__()
        if n_feat % n_head != 0:
            raise ValueError(f"attention size {n_feat} is not divisible by the number of heads {n_head}")
        self.d_k = n_feat // n_head
        self.h = n_head
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.dropout_rate = dropout_rate

    def _heads(self, linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, H, T, d_k)."""
        return linear(x).view(x.size(0), -1, self.h, self.d_k).transpose(1, 2)

    def forward_qkv(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    cache: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project and split heads; prepend the cached k/v (self-attention streaming).

        Returns q (B, H, T1, d_k), k and v (B, H, T_cache + T2, d_k), new_cache (B, H, T_cache + T2, 2 * d_k);
        for ``kind == "cross"`` a given cache is the memory's k/v (constant while decoding): k, v (B, H, T2, d_k).
        """
        if self.kind == "cross" and cache.size(0) > 0:
            k, v = torch.split(cache, self.d_k, dim=-1)
            return self._heads(self.linear_q, query), k, v, cache
        q = self._heads(self.linear_q, query)
        k = self._heads(self.linear_k, key)
        v = self._heads(self.linear_v, value)
        if cache.size(0) > 0:
            k_cache, v_cache = torch.split(cache, self.d_k, dim=-1)
            k = torch.cat([k_cache, k], dim=2)
            v = torch.cat([v_cache, v], dim=2)
        return q, k, v, torch.cat((k, v), dim=-1)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
               pos_emb: torch.Tensor) -> torch.Tensor:
        """Attention over heads: (B, H, T1, d_k) x (B, H, T2, d_k) -> (B, H, T1, d_k)."""
        return scaled_dot_attention(q, k, v, mask, self.dropout_rate if self.training else 0.0)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor = EMPTY_MASK, pos_emb: torch.Tensor = torch.empty(0),
                cache: torch.Tensor = EMPTY_CACHE) -> Tuple[torch.Tensor, torch.Tensor]:
        """query (B, T1, D), key/value (B, T2, D) -> output (B, T1, D), new_cache (B, H, T_cache + T2, 2 d_k)."""
        q, k, v, new_cache = self.forward_qkv(query, key, value, cache)
        return self._output(self.attend(q, k, v, mask, pos_emb)), new_cache

    def step_entries(self, x: torch.Tensor) -> torch.Tensor:
        """What a decoder's self-attention cache keeps of each position, made once per position: x (B, T, D) ->
        (B, H, T, 2 d_k), its key and value side by side."""
        return torch.cat((self._heads(self.linear_k, x), self._heads(self.linear_v, x)), dim=-1)

    def step(self, x: torch.Tensor, mask: torch.Tensor, cache: "StepCache", block: int) -> torch.Tensor:
        """Decoder self-attention of the positions not yet in ``cache`` (one per decoding step) over the prefix.

        x (N, T1, D) the new positions; mask (N, T1, T0 + T1) bool, their rows of the causal mask; cache the
        decoder's :class:`~wenet_udps.transformer.step_cache.StepCache` of T0 positions, ``block`` this block's
        index in it. Only the new positions are projected, and their :meth:`step_entries` written into the cache ->
        output (N, T1, D).
        """
        if self.kind != "self" or self.uses_pos_emb:
            raise TypeError(f"{type(self).__name__} is no decoder self-attention: it has no step cache")
        pool, member, pos = cache.extend(block, self.step_entries(x))
        return self._output(self.attend_cache(self._heads(self.linear_q, x), pool, member, pos, mask))

    def attend_cache(self, q: torch.Tensor, pool: torch.Tensor, member: torch.Tensor, pos: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
        """Attention of q (N, H, T1, d_k) over a step cache's pool (B, H, C, P) of entries, ``member`` (N, P) and
        ``pos`` (B, P) as :meth:`StepCache.extend` returns them -> (N, H, T1, d_k)."""
        keys, values = pool.split(self.d_k, dim=2)
        return prefix_pool_attention(q, keys, values, member, pos, mask, 1.0 / math.sqrt(self.d_k))

    def _output(self, heads: torch.Tensor) -> torch.Tensor:
        """Merge heads and project: (B, H, T1, d_k) -> (B, T1, D)."""
        return self.linear_out(heads.transpose(1, 2).reshape(heads.size(0), -1, self.h * self.d_k))

    def effective_scales(self) -> Dict[str, torch.Tensor]:
        """The learned score scales as used in the forward pass (none for scaled-dot)."""
        return {}


@register_attention
class RelPositionMultiHeadedAttention(MultiHeadedAttention):
    """WeNet's relative-position attention: ((q+u).k + (q+v).p) / sqrt(d_k), p = linear_pos(pos_emb), no rel_shift.

    Both terms are dot products, so they run as one SDPA call on concatenated features:
    [q+u, q+v] . [k, p] = (q+u).k + (q+v).p, with the scale kept at 1/sqrt(d_k).
    """

    name = "rel_selfattn"
    uses_pos_emb = True

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate)
        self.linear_pos = nn.Linear(n_feat, n_feat, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(self.h, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.empty(self.h, self.d_k))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)

    def pos_heads(self, pos_emb: torch.Tensor, batch: int) -> torch.Tensor:
        """(1 or B, T2, D) -> (B, H, T2, d_k)."""
        p = self._heads(self.linear_pos, pos_emb)
        return p.expand(batch, -1, -1, -1)

    def attend(self, q, k, v, mask, pos_emb):
        p = self.pos_heads(pos_emb, q.size(0))
        q_cat = torch.cat([q + self.pos_bias_u.unsqueeze(1), q + self.pos_bias_v.unsqueeze(1)], dim=-1)
        k_cat = torch.cat([k, p], dim=-1)
        return scaled_dot_attention(q_cat, k_cat, v, mask, self.dropout_rate if self.training else 0.0,
                                    scale=1.0 / math.sqrt(self.d_k))


@register_attention
class MultiHeadedCrossAttention(MultiHeadedAttention):
    """Scaled-dot source (cross) attention of the decoder; the cache holds the memory's k/v."""

    name = "crossattn"
    kind = "cross"

    def memory_cache(self, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The cache ``forward`` reuses for this memory: key/value (B, T2, D) -> (B, H, T2, 2 d_k)."""
        return torch.cat((self._heads(self.linear_k, key), self._heads(self.linear_v, value)), dim=-1)


def attention_classes(kind: str) -> Dict[str, Type[MultiHeadedAttention]]:
    """The registered attentions of one ``kind`` (``self`` or ``cross``), by name."""
    return {name: cls for name, cls in ATTENTION_CLASSES.items() if cls.kind == kind}


def family_of(name: str) -> Optional[str]:
    """The family of a registry name, None when the name is not registered."""
    cls = ATTENTION_CLASSES.get(name)
    return None if cls is None else cls.family


def family_classes(family: str) -> List[Type[MultiHeadedAttention]]:
    """Every registered attention class of ``family`` (their keyword arguments are the family's options keys)."""
    return [cls for cls in ATTENTION_CLASSES.values() if cls.family == family]


def scale_symbols() -> Dict[str, Tuple[str, str]]:
    """Every registered class's learned scales: parameter name -> (its symbol, its family's display name)."""
    return {param: (symbol, FAMILIES[cls.family].display) for cls in ATTENTION_CLASSES.values()
            for param, symbol in cls.scales.items()}


def is_udps(name: str) -> bool:
    """Whether a registry name is a UDPS attention."""
    return family_of(name) == "udps"


def family_type(name: str, family: str) -> Optional[str]:
    """The type a site of type ``name`` gets in ``family``: itself when already of that family, else the class of
    that family and of ``name``'s kind whose ``counterpart`` is ``name``'s scaled-dot type; None when there is none.
    ``att_udps`` and ``att_family`` map every site through this, after the site's kind is checked
    (site_families.SITE_KINDS), so a self type never becomes a source attention."""
    cls = ATTENTION_CLASSES[name]
    if cls.family == family:
        return name
    base = name if cls.family == SCALED_DOT else cls.counterpart
    if base is None:
        return None
    if family == SCALED_DOT:
        return base
    return next((c.name for c in ATTENTION_CLASSES.values()
                 if c.family == family and c.kind == cls.kind and c.counterpart == base), None)


def _import_families() -> None:
    """Import every family module of this package (``*_attention``, found by name; each registers its classes and
    family). Run once, as this module's import ends: everything a family module takes from here exists by then."""
    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name.endswith("_attention"):
            importlib.import_module(f"{package}.{info.name}")


_import_families()
