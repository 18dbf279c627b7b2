"""UDPS multi-head attention: scores 4 alpha q.k / (|q| + |k|)^2 in place of q.k / sqrt(d_k).

The UDPS members of the attention registry (``udps_selfattn``, ``rel_udps_selfattn``, ``udps_crossattn``; the table
of every type is in :mod:`wenet_udps.transformer.attention`), subclasses of its scaled-dot classes that keep their
projections (linear_q/k/v/out, linear_pos) and add the learnable score scales ``alpha`` (and ``beta``, stored as
:mod:`~wenet_udps.transformer.score_scale` says, as the cosine family's). Each class states its facts and joins
``ATTENTION_CLASSES`` through ``@register_attention``, like the scaled-dot ones, and the family (options
``udps_conf``, marker parameter ``alpha``) joins ``FAMILIES``; the package's ``__init__`` imports this module.
"""
from typing import Dict, Tuple

import torch
from torch import nn

from wenet_udps.kernels.dispatch import prefix_pool_attention, udps_attention, udps_attention_from_keys
from wenet_udps.kernels.reference import DEFAULT_EPS, udps_scores, upcast
from wenet_udps.transformer.attention import EMPTY_CACHE, EMPTY_MASK, Family, MultiHeadedAttention, \
    register_attention, register_family
from wenet_udps.transformer.score_scale import ALPHA_FORMS, scale_parameter

UDPS = register_family(Family("udps", "UDPS", conf_key="udps_conf", marker="alpha")).name


POS_NORMS = ("qk", "qp")


@register_attention
class UDPSMultiHeadedAttention(MultiHeadedAttention):
    """UDPS attention: scores = 4 alpha q.k / (|q| + |k|)^2, no 1/sqrt(d_k).

    Extra parameter ``alpha`` (H,) or (1,); the effective scale is ``alpha`` or ``alpha**2`` (``alpha_form``).
    """

    name = "udps_selfattn"
    family = UDPS
    counterpart = "selfattn"
    scales = {"alpha": "α"}

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, alpha_init: float = 10.0,
                 alpha_form: str = "linear", alpha_per_head: bool = True, eps: float = DEFAULT_EPS):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate)
        self.alpha_form = alpha_form
        self.alpha = scale_parameter(n_head=n_head, init=alpha_init, form=alpha_form, per_head=alpha_per_head,
                                      name="alpha")
        self.eps = eps

    def _effective(self, param: torch.Tensor) -> torch.Tensor:
        return ALPHA_FORMS[self.alpha_form][1](param)

    def key_terms(self, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Keys (B, H, T2, d_k) -> numerator keys 4 alpha k (B, H, T2, d_k) and key norms (B, H, T2) in float32."""
        a = self._effective(self.alpha).view(1, -1, 1, 1)
        return (4.0 * a) * k, torch.linalg.vector_norm(upcast(k), dim=-1)

    def attend(self, q, k, v, mask, pos_emb):
        # The keys' terms are formed by the kernel: one query row folds them into one pass (kernels/one_query.py).
        return udps_attention_from_keys(q, k, 4.0 * self._effective(self.alpha).view(1, -1, 1, 1), v, mask=mask,
                                        eps=self.eps, dropout_p=self.dropout_rate, training=self.training)

    def step_entries(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) -> (B, H, T, 2 d_k + 1): key, value and the key's norm |k|, the one per-key term of the
        denominator (in float32 or wider, the cache's dtype; the numerator's scale 4 alpha is applied to the step's
        scores, see kernels/prefix_pool.py)."""
        k, v = self._heads(self.linear_k, x), self._heads(self.linear_v, x)
        norm = torch.linalg.vector_norm(upcast(k), dim=-1, keepdim=True)
        return torch.cat((k.to(norm.dtype), v.to(norm.dtype), norm), dim=-1)

    def attend_cache(self, q: torch.Tensor, pool: torch.Tensor, member: torch.Tensor, pos: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
        keys, values, norm = pool.split([self.d_k, self.d_k, 1], dim=2)
        return prefix_pool_attention(q, keys, values, member, pos, mask,
                                     4.0 * self._effective(self.alpha).view(1, -1, 1, 1), norm=norm.squeeze(2),
                                     eps=self.eps).to(q.dtype)

    def effective_scales(self) -> Dict[str, torch.Tensor]:
        return {"alpha": self._effective(self.alpha).detach()}


@register_attention
class RelPositionUDPSMultiHeadedAttention(UDPSMultiHeadedAttention):
    """The paper author's Conformer variant: p = linear_pos(pos_emb), no pos_bias_u/v, no rel_shift.

    ``pos_norm: qk`` (the reference): scores = (4 alpha q.k + 4 beta q.p) / (|q| + |k|)^2; the position term shares
    the q/k denominator, so it is not bounded to [-beta, beta]. ``pos_norm: qp``: 4 alpha q.k / (|q| + |k|)^2 +
    4 beta q.p / (|q| + |p|)^2 (the alternative the reference's author judged not effective).
    """

    name = "rel_udps_selfattn"
    uses_pos_emb = True
    counterpart = "rel_selfattn"
    scales = {"alpha": "α", "beta": "β"}

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, alpha_init: float = 5.0,
                 beta_init: float = 5.0, alpha_form: str = "linear", alpha_per_head: bool = True,
                 pos_norm: str = "qk", eps: float = DEFAULT_EPS):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate, alpha_init=alpha_init,
                         alpha_form=alpha_form, alpha_per_head=alpha_per_head, eps=eps)
        if pos_norm not in POS_NORMS:
            raise ValueError(f"unknown udps_conf.pos_norm {pos_norm!r}; valid choices: {', '.join(POS_NORMS)}")
        self.pos_norm = pos_norm
        self.linear_pos = nn.Linear(n_feat, n_feat, bias=False)
        self.beta = scale_parameter(n_head=n_head, init=beta_init, form=alpha_form, per_head=alpha_per_head,
                                     name="beta")

    def attend(self, q, k, v, mask, pos_emb):
        a = self._effective(self.alpha).view(1, -1, 1, 1)
        b = self._effective(self.beta).view(1, -1, 1, 1)
        p = self._heads(self.linear_pos, pos_emb)  # (1 or B, H, T2, d_k)
        k_norm = torch.linalg.vector_norm(upcast(k), dim=-1)
        if self.pos_norm == "qk":
            # 4 (a q.k + b q.p) = q . (4 a k + 4 b p): one numerator, one q/k denominator (two passes over k).
            return udps_attention(q, torch.addcmul((4.0 * a) * k, 4.0 * b, p), k_norm, v, mask=mask, eps=self.eps,
                                  dropout_p=self.dropout_rate, training=self.training)
        pos_term = udps_scores(q, (4.0 * b) * p, torch.linalg.vector_norm(upcast(p), dim=-1), self.eps)
        return udps_attention(q, (4.0 * a) * k, k_norm, v, mask=mask, bias=pos_term, eps=self.eps,
                              dropout_p=self.dropout_rate, training=self.training)

    def effective_scales(self) -> Dict[str, torch.Tensor]:
        return {"alpha": self._effective(self.alpha).detach(), "beta": self._effective(self.beta).detach()}


@register_attention
class UDPSMultiHeadedCrossAttention(UDPSMultiHeadedAttention):
    """UDPS source (cross) attention of the decoder.

    Its cache holds what a decoding step needs of the memory, (B, H, 2 d_k + 1, T2): the numerator keys 4 alpha k,
    the values and the key norms, so a step recomputes none of them (the memory is the same at every step).
    """

    name = "udps_crossattn"
    kind = "cross"
    counterpart = "crossattn"

    def _memory_terms(self, key: torch.Tensor, value: torch.Tensor
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """key/value (B, T2, D) -> k_num, k_norm, v (as ``udps_attention`` takes them) and the packed cache."""
        k_num, k_norm = self.key_terms(self._heads(self.linear_k, key))
        v = self._heads(self.linear_v, value)
        dtype = torch.promote_types(k_num.dtype, v.dtype)
        # Feature-major (B, H, 2 d_k + 1, T2): a step's q . k~ and p @ v then read rows of T2 contiguous numbers
        # (a step's matrix products were twice as slow on the (B, H, T2, 2 d_k + 1) layout).
        cache = torch.cat((k_num.to(dtype).transpose(-2, -1), v.to(dtype).transpose(-2, -1),
                           k_norm.unsqueeze(-2).to(dtype)), dim=-2)
        return k_num, k_norm, v, cache

    def memory_cache(self, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The cache ``forward`` reuses for this memory: key/value (B, T2, D) -> (B, H, 2 d_k + 1, T2)."""
        return self._memory_terms(key, value)[3]

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor = EMPTY_MASK, pos_emb: torch.Tensor = torch.empty(0),
                cache: torch.Tensor = EMPTY_CACHE) -> Tuple[torch.Tensor, torch.Tensor]:
        """query (B, T1, D), key/value (B, T2, D) (ignored when ``cache`` is given) -> (B, T1, D), cache."""
        if cache.size(0) > 0:
            k_num, v, k_norm = torch.split(cache, [self.d_k, self.d_k, 1], dim=-2)
            k_num, v, k_norm = k_num.transpose(-2, -1), v.transpose(-2, -1), k_norm.squeeze(-2)
        else:
            k_num, k_norm, v, cache = self._memory_terms(key, value)
        out = udps_attention(self._heads(self.linear_q, query), k_num, k_norm, v, mask=mask, eps=self.eps,
                             dropout_p=self.dropout_rate, training=self.training)
        return self._output(out), cache
