"""Cosine multi-head attention: scores a q.k / (|q| |k|), UDPS without its length factor g (docs/udps.md).

    UDPS   = 4 a (q.k) / (|q| + |k|)^2  =  a cos(q, k) g(r),   g(r) = 4r / (1 + r)^2,   r = |q| / |k|
    cosine =     a (q.k) / (|q| |k|)    =  a cos(q, k)

The cosine members of the attention registry (``cosine_selfattn``, ``rel_cosine_selfattn``, ``cosine_crossattn``)
mirror the UDPS ones class by class, with the same options (``cosine_conf``: ``alpha_init``, ``beta_init``,
``alpha_form``, ``alpha_per_head``, ``eps``) and defaults, so that a cosine model and a UDPS model differ in g alone.
``rel_cosine_selfattn`` is ``rel_udps_selfattn``'s structure (p = linear_pos(pos_emb), no pos_bias_u/v, no
rel_shift), its score (a q.k + b q.p) / (|q| |k|). The learnable scales are the parameters ``cos_alpha`` and
``cos_beta`` (the family's marker ``cos_alpha`` tells a cosine checkpoint from a UDPS one by its parameter names).
Every score is one SDPA call on unit queries and scaled unit keys (:mod:`wenet_udps.kernels.cosine`), so cosine
costs what scaled-dot costs (but ``rel_cosine_selfattn`` in float16, whose unbounded keys stay float32). Streaming
caches hold the raw k and v, as scaled-dot's (the keys are normalised per call); the decoder's step cache and the
source attention's memory cache hold unit keys. A conf's ``udps_conf`` never reaches a cosine site.
"""
from typing import Dict

import torch

from wenet_udps.kernels.cosine import cosine_attention, cosine_keys, unit_rows
from wenet_udps.kernels.dispatch import prefix_pool_attention
from wenet_udps.kernels.reference import DEFAULT_EPS
from wenet_udps.transformer.attention import EMPTY_CACHE, EMPTY_MASK, Family, MultiHeadedAttention, \
    register_attention, register_family
from wenet_udps.transformer.score_scale import ALPHA_FORMS, scale_parameter

COSINE = register_family(Family("cosine", "cosine", conf_key="cosine_conf", marker="cos_alpha")).name
SECTION = "cosine_conf"


@register_attention
class CosineMultiHeadedAttention(MultiHeadedAttention):
    """Cosine attention: scores = a q.k / (|q| |k|), no 1/sqrt(d_k); ``cos_alpha`` (H,) or (1,) as UDPS's alpha."""

    name = "cosine_selfattn"
    family = COSINE
    counterpart = "selfattn"
    scales = {"cos_alpha": "α"}

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, alpha_init: float = 10.0,
                 alpha_form: str = "linear", alpha_per_head: bool = True, eps: float = DEFAULT_EPS):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate)
        self.alpha_form = alpha_form
        self.cos_alpha = scale_parameter(n_head=n_head, init=alpha_init, form=alpha_form, per_head=alpha_per_head,
                                         name="alpha", section=SECTION)
        self.eps = eps

    def _effective(self, param: torch.Tensor) -> torch.Tensor:
        return ALPHA_FORMS[self.alpha_form][1](param)

    def _alpha(self) -> torch.Tensor:
        return self._effective(self.cos_alpha).view(1, -1, 1, 1)

    def attend(self, q, k, v, mask, pos_emb):
        return cosine_attention(q, cosine_keys(k, self._alpha(), eps=self.eps), v, mask,
                                self.dropout_rate if self.training else 0.0, eps=self.eps)

    def step_entries(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> (B, H, T, 2 d_k): the unit key and the value (the scale a is applied to the scores)."""
        return torch.cat((unit_rows(self._heads(self.linear_k, x), self.eps), self._heads(self.linear_v, x)), dim=-1)

    def attend_cache(self, q: torch.Tensor, pool: torch.Tensor, member: torch.Tensor, pos: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
        keys, values = pool.split(self.d_k, dim=2)
        return prefix_pool_attention(unit_rows(q, self.eps), keys, values, member, pos, mask,
                                     self._alpha()).to(q.dtype)

    def effective_scales(self) -> Dict[str, torch.Tensor]:
        return {"cos_alpha": self._effective(self.cos_alpha).detach()}


@register_attention
class RelPositionCosineMultiHeadedAttention(CosineMultiHeadedAttention):
    """``rel_udps_selfattn`` without g: scores = (a q.k + b q.p) / (|q| |k|), p = linear_pos(pos_emb), no
    pos_bias_u/v, no rel_shift; the position term shares the q/k denominator (not bounded to [-b, b]: in float16
    its keys and its SDPA call are float32, :mod:`wenet_udps.kernels.cosine`)."""

    name = "rel_cosine_selfattn"
    uses_pos_emb = True
    counterpart = "rel_selfattn"
    scales = {"cos_alpha": "α", "cos_beta": "β"}

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, alpha_init: float = 5.0,
                 beta_init: float = 5.0, alpha_form: str = "linear", alpha_per_head: bool = True,
                 eps: float = DEFAULT_EPS):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate, alpha_init=alpha_init,
                         alpha_form=alpha_form, alpha_per_head=alpha_per_head, eps=eps)
        self.linear_pos = torch.nn.Linear(n_feat, n_feat, bias=False)
        self.cos_beta = scale_parameter(n_head=n_head, init=beta_init, form=alpha_form, per_head=alpha_per_head,
                                        name="beta", section=SECTION)

    def attend(self, q, k, v, mask, pos_emb):
        p = self._heads(self.linear_pos, pos_emb)  # (1 or B, H, T2, d_k)
        b = self._effective(self.cos_beta).view(1, -1, 1, 1)
        return cosine_attention(q, cosine_keys(k, self._alpha(), p, b, eps=self.eps), v, mask,
                                self.dropout_rate if self.training else 0.0, eps=self.eps)

    def effective_scales(self) -> Dict[str, torch.Tensor]:
        return {"cos_alpha": self._effective(self.cos_alpha).detach(),
                "cos_beta": self._effective(self.cos_beta).detach()}


@register_attention
class CosineMultiHeadedCrossAttention(CosineMultiHeadedAttention):
    """Cosine source (cross) attention of the decoder; its cache holds the memory's unit keys and values
    (B, H, T2, 2 d_k), as ``crossattn``'s holds the keys and values, so a step normalises only its query."""

    name = "cosine_crossattn"
    kind = "cross"
    counterpart = "crossattn"

    def memory_cache(self, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The cache ``forward`` reuses for this memory: key/value (B, T2, D) -> (B, H, T2, 2 d_k)."""
        return torch.cat((unit_rows(self._heads(self.linear_k, key), self.eps), self._heads(self.linear_v, value)),
                         dim=-1)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor = EMPTY_MASK, pos_emb: torch.Tensor = torch.empty(0),
                cache: torch.Tensor = EMPTY_CACHE):
        """query (B, T1, D), key/value (B, T2, D) (ignored when ``cache`` is given) -> (B, T1, D), cache."""
        if cache.size(0) == 0:
            cache = self.memory_cache(key, value)
        k_unit, v = torch.split(cache, self.d_k, dim=-1)
        out = cosine_attention(self._heads(self.linear_q, query), k_unit * self._alpha().to(k_unit.dtype), v, mask,
                               self.dropout_rate if self.training else 0.0, eps=self.eps)
        return self._output(out), cache
