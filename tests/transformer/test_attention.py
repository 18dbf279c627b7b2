"""Every attention registry entry against a hand-written formula."""
import copy
import math
import subprocess
import sys

import pytest
import torch

from wenet_udps.transformer.attention import ATTENTION_CLASSES, FAMILIES, attention_classes, family_of, family_type, \
    is_udps, register_attention

N_HEAD, N_FEAT = 2, 8
D_K = N_FEAT // N_HEAD


# ---------------------------------------------------------------- hand-written reference formulas
def _lin(layer, x):
    return x @ layer.weight.T + (layer.bias if layer.bias is not None else 0)


def _split(x):
    b, t, _ = x.shape
    return x.view(b, t, N_HEAD, D_K).transpose(1, 2)


def _eff(m, name):
    p = getattr(m, name)
    form = getattr(m, "alpha_form", "linear")
    return p * p if form == "squared" else p.exp() if form == "log" else p


def reference_forward(name, m, query, key, value, mask, pos_emb):
    """The registry entry's formula written out directly (float64), heads explicit."""
    q, k, v = _split(_lin(m.linear_q, query)), _split(_lin(m.linear_k, key)), _split(_lin(m.linear_v, value))
    nq = q.norm(dim=-1)[..., :, None]
    nk = k.norm(dim=-1)[..., None, :]
    qk = q @ k.transpose(-1, -2)
    if name in ("selfattn", "crossattn"):
        scores = qk / math.sqrt(D_K)
    elif name == "rel_selfattn":
        p = _split(_lin(m.linear_pos, pos_emb))
        u = m.pos_bias_u[None, :, None, :]
        w = m.pos_bias_v[None, :, None, :]
        scores = ((q + u) @ k.transpose(-1, -2) + (q + w) @ p.transpose(-1, -2)) / math.sqrt(D_K)
    elif name in ("udps_selfattn", "udps_crossattn"):
        a = _eff(m, "alpha").view(1, -1, 1, 1)
        scores = 4 * a * qk / (nq + nk) ** 2
    elif name in ("cosine_selfattn", "cosine_crossattn"):
        a = _eff(m, "cos_alpha").view(1, -1, 1, 1)
        scores = a * qk / (nq.clamp_min(m.eps ** 0.5) * nk.clamp_min(m.eps ** 0.5))
    elif name == "rel_cosine_selfattn":
        p = _split(_lin(m.linear_pos, pos_emb))
        a = _eff(m, "cos_alpha").view(1, -1, 1, 1)
        b = _eff(m, "cos_beta").view(1, -1, 1, 1)
        scores = (a * qk + b * (q @ p.transpose(-1, -2))) / (nq * nk)
    elif name == "rel_udps_selfattn":
        p = _split(_lin(m.linear_pos, pos_emb))
        a = _eff(m, "alpha").view(1, -1, 1, 1)
        b = _eff(m, "beta").view(1, -1, 1, 1)
        qp = q @ p.transpose(-1, -2)
        if m.pos_norm == "qk":
            scores = (4 * a * qk + 4 * b * qp) / (nq + nk) ** 2
        else:
            npos = p.norm(dim=-1)[..., None, :]
            scores = 4 * a * qk / (nq + nk) ** 2 + 4 * b * qp / (nq + npos) ** 2
    else:
        raise AssertionError(name)
    keep = mask.unsqueeze(1).expand_as(scores)
    attn = torch.softmax(scores.masked_fill(~keep, -1e30), dim=-1).masked_fill(~keep, 0.0)
    ctx = (attn @ v).transpose(1, 2).reshape(query.size(0), -1, N_FEAT)
    return _lin(m.linear_out, ctx)


def _build(name, **kw):
    m = ATTENTION_CLASSES[name](n_head=N_HEAD, n_feat=N_FEAT, dropout_rate=0.0, **kw).double().eval()
    with torch.no_grad():
        # Move the UDPS scales away from their init so a wrong head/broadcast shows up.
        for pname in ("alpha", "beta", "cos_alpha", "cos_beta"):
            if hasattr(m, pname):
                getattr(m, pname).add_(torch.linspace(-1.0, 1.5, getattr(m, pname).numel(), dtype=torch.float64))
    return m


def _masks(b, t1, t2):
    lengths = torch.tensor([t2, t2 - 3])
    pad = (torch.arange(t2)[None, :] < lengths[:, None]).unsqueeze(1)  # (B, 1, T2)
    causal = torch.tril(torch.ones(t1, t2, dtype=torch.bool), diagonal=t2 - t1).unsqueeze(0).expand(b, -1, -1)
    chunk = (torch.arange(t2)[None, :] // 2 <= torch.arange(t1)[:, None] // 2).unsqueeze(0).expand(b, -1, -1)
    return {"padding": pad, "causal": causal & pad, "chunk": chunk.contiguous()}


VARIANTS = [(name, {}) for name in ATTENTION_CLASSES] + [
    ("udps_selfattn", {"alpha_form": "squared"}),
    ("udps_selfattn", {"alpha_per_head": False}),
    ("rel_udps_selfattn", {"pos_norm": "qp"}),
    ("rel_udps_selfattn", {"alpha_form": "squared", "alpha_per_head": False}),
    ("rel_udps_selfattn", {"alpha_form": "log", "alpha_init": 20.0, "beta_init": 2.0}),
    ("udps_crossattn", {"alpha_form": "log"}),
    ("cosine_selfattn", {"alpha_form": "squared"}),
    ("cosine_selfattn", {"alpha_per_head": False}),
    ("rel_cosine_selfattn", {"alpha_form": "squared", "alpha_per_head": False}),
    ("rel_cosine_selfattn", {"alpha_form": "log", "alpha_init": 20.0, "beta_init": 2.0}),
    ("cosine_crossattn", {"alpha_form": "log"}),
]


@pytest.mark.parametrize("name,kw", VARIANTS, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in VARIANTS])
@pytest.mark.parametrize("mask_kind", ["padding", "causal", "chunk"])
def test_forward_and_gradients_match_formula(name, kw, mask_kind):
    m = _build(name, **kw)
    b, t = 2, 7
    mask = _masks(b, t, t)[mask_kind]
    x = torch.randn(b, t, N_FEAT, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(b, t, N_FEAT, dtype=torch.float64, requires_grad=True)
    pos = torch.randn(1, t, N_FEAT, dtype=torch.float64)
    key = mem if ATTENTION_CLASSES[name].kind == "cross" else x
    out, cache = m(x, key, key, mask, pos)
    ref = reference_forward(name, m, x, key, key, mask, pos)
    assert out.shape == (b, t, N_FEAT)
    # udps_crossattn also caches the key norms (one more channel), feature-major; cosine_crossattn unit keys.
    if name == "udps_crossattn":
        assert cache.shape == (b, N_HEAD, 2 * D_K + 1, t)
    else:
        assert cache.shape == (b, N_HEAD, t, 2 * D_K)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    w = torch.randn_like(out)
    grads = torch.autograd.grad((out * w).sum(), [x, mem] + list(m.parameters()), allow_unused=True)
    ref_grads = torch.autograd.grad((ref * w).sum(), [x, mem] + list(m.parameters()), allow_unused=True)
    for g, r in zip(grads, ref_grads):
        if r is None:
            assert g is None or torch.count_nonzero(g) == 0
        else:
            torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", list(attention_classes("cross")))
def test_cross_attention_reuses_its_memory_cache(name):
    """A decoding step given ``memory_cache(key, value)`` computes what a step given the memory computes, and the
    cache a step returns is that cache (so it can be fed back)."""
    m = _build(name)
    q = torch.randn(3, 1, N_FEAT, dtype=torch.float64)
    mem = torch.randn(3, 9, N_FEAT, dtype=torch.float64)
    mask = torch.ones(3, 1, 9, dtype=torch.bool)
    mask[1, :, 4:] = False
    out, returned = m(q, mem, mem, mask)
    cache = m.memory_cache(mem, mem)
    torch.testing.assert_close(returned, cache, rtol=0, atol=0)
    cached_out, same = m(q, torch.empty(0), torch.empty(0), mask, cache=cache)
    assert same is cache
    torch.testing.assert_close(cached_out, out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, reference_forward(name, m, q, mem, mem, mask, torch.empty(0)),
                               rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", list(ATTENTION_CLASSES))
def test_query_and_key_lengths_differ(name):
    m = _build(name)
    b, t1, t2 = 2, 3, 9
    mask = _masks(b, t1, t2)["causal"]
    q = torch.randn(b, t1, N_FEAT, dtype=torch.float64)
    kv = torch.randn(b, t2, N_FEAT, dtype=torch.float64)
    pos = torch.randn(1, t2, N_FEAT, dtype=torch.float64)
    out, _ = m(q, kv, kv, mask, pos)
    torch.testing.assert_close(out, reference_forward(name, m, q, kv, kv, mask, pos), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", list(ATTENTION_CLASSES))
def test_fully_masked_row_gives_zero_context_and_finite_gradients(name):
    m = ATTENTION_CLASSES[name](n_head=N_HEAD, n_feat=N_FEAT)
    x = torch.randn(2, 5, N_FEAT, requires_grad=True)
    pos = torch.randn(1, 5, N_FEAT)
    mask = torch.ones(2, 5, 5, dtype=torch.bool)
    mask[1] = False          # a fully padded utterance
    mask[0, 2] = False       # one fully masked query row
    out, _ = m(x, x, x, mask, pos)
    bias = m.linear_out.bias.detach()
    # zero context -> the output is linear_out's bias alone
    torch.testing.assert_close(out[1], bias.expand(5, -1))
    torch.testing.assert_close(out[0, 2], bias)
    out.square().sum().backward()
    for p in [x] + list(m.parameters()):
        assert torch.isfinite(p.grad).all()


@pytest.mark.parametrize("name", list(attention_classes("self")))
def test_self_attention_cache_matches_full_sequence(name):
    """Chunk 2 with chunk 1's cache equals the full forward's rows for chunk 2 under the matching mask."""
    m = _build(name)
    b, t1, t2 = 2, 4, 3
    x = torch.randn(b, t1 + t2, N_FEAT, dtype=torch.float64)
    pos = torch.randn(1, t1 + t2, N_FEAT, dtype=torch.float64)
    full_mask = torch.tril(torch.ones(t1 + t2, t1 + t2, dtype=torch.bool)).unsqueeze(0).expand(b, -1, -1)
    full, _ = m(x, x, x, full_mask, pos)
    first = x[:, :t1]
    _, cache = m(first, first, first, full_mask[:, :t1, :t1], pos[:, :t1])
    second = x[:, t1:]
    out, new_cache = m(second, second, second, full_mask[:, t1:, :], pos, cache)
    assert new_cache.shape == (b, N_HEAD, t1 + t2, 2 * D_K)
    torch.testing.assert_close(out, full[:, t1:], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", list(attention_classes("cross")))
def test_cross_attention_cache_reuses_memory_projection(name):
    m = _build(name)
    mem = torch.randn(2, 6, N_FEAT, dtype=torch.float64)
    mask = torch.ones(2, 1, 6, dtype=torch.bool)
    q1 = torch.randn(2, 1, N_FEAT, dtype=torch.float64)
    _, cache = m(q1, mem, mem, mask)
    q2 = torch.randn(2, 1, N_FEAT, dtype=torch.float64)
    with_cache, cache2 = m(q2, torch.empty(2, 0, N_FEAT, dtype=torch.float64),
                           torch.empty(2, 0, N_FEAT, dtype=torch.float64), mask, cache=cache)
    without, _ = m(q2, mem, mem, mask)
    torch.testing.assert_close(with_cache, without)
    assert cache2 is cache


@pytest.mark.parametrize("name", [n for n in ATTENTION_CLASSES if family_of(n) != "scaled_dot"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bounded_families_under_autocast_are_finite_with_large_activations(name, dtype):
    """|q|+|k| of 300 squares to 9e4 > fp16's max: UDPS's D (and cosine's norms) must be formed in float32."""
    m = ATTENTION_CLASSES[name](n_head=N_HEAD, n_feat=N_FEAT)
    x = (torch.randn(2, 6, N_FEAT) * 60).requires_grad_()
    pos = torch.randn(1, 6, N_FEAT) * 60
    mask = torch.ones(2, 1, 6, dtype=torch.bool)
    mask[1, :, 3:] = False
    with torch.autocast("cpu", dtype=dtype):
        out, _ = m(x, x, x, mask, pos)
    assert torch.isfinite(out).all()
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()
    with torch.no_grad():
        ref, _ = m(x, x, x, mask, pos)
    assert (out.float() - ref).abs().max() < 0.1 * ref.abs().max()


@pytest.mark.parametrize("amp", [True, False])
def test_rel_cosine_in_float16_does_not_overflow_where_the_key_is_short(amp):
    """Issue 81 F7: rel_cosine_selfattn's keys (a k + b p) / |k| are not bounded by a and b: where |k| is near its
    floor sqrt(eps) (here 0, floored at 1e-3) the position term b p / |k| passed float16's 65504 and the keys, cast
    back to float16, became inf (NaN outputs). Under fp16 autocast and in a float16 model they stay float32."""
    torch.manual_seed(0)
    m = ATTENTION_CLASSES["rel_cosine_selfattn"](n_head=N_HEAD, n_feat=N_FEAT)
    with torch.no_grad():
        m.linear_k.weight.zero_()
        m.linear_k.bias.zero_()
    x = torch.randn(2, 6, N_FEAT).requires_grad_()
    pos = torch.randn(1, 6, N_FEAT) * 60   # b |p_d| / 1e-3 above 65504
    mask = torch.ones(2, 1, 6, dtype=torch.bool)
    mask[1, :, 3:] = False
    with torch.no_grad():
        ref, _ = m(x, x, x, mask, pos)
    half = m if amp else copy.deepcopy(m).half()
    with torch.autocast("cpu", dtype=torch.float16, enabled=amp):
        out, _ = half(x if amp else x.half(), x if amp else x.half(), x if amp else x.half(), mask,
                      pos if amp else pos.half())
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert (out.float() - ref).abs().max() < 0.05 * ref.abs().max()


def test_udps_options_and_bad_values():
    m = ATTENTION_CLASSES["udps_selfattn"](n_head=4, n_feat=16)
    assert torch.equal(m.effective_scales()["alpha"], torch.full((4,), 10.0))
    sq = ATTENTION_CLASSES["udps_selfattn"](n_head=4, n_feat=16, alpha_form="squared", alpha_init=9.0)
    torch.testing.assert_close(sq.effective_scales()["alpha"], torch.full((4,), 9.0))
    torch.testing.assert_close(sq.alpha.detach(), torch.full((4,), 3.0))
    shared = ATTENTION_CLASSES["rel_udps_selfattn"](n_head=4, n_feat=16, alpha_per_head=False)
    assert shared.alpha.shape == (1,) and shared.beta.shape == (1,)
    rel = ATTENTION_CLASSES["rel_udps_selfattn"](n_head=4, n_feat=16)
    assert torch.equal(rel.effective_scales()["alpha"], torch.full((4,), 5.0))
    assert torch.equal(rel.effective_scales()["beta"], torch.full((4,), 5.0))
    assert not hasattr(rel, "pos_bias_u")
    lg = ATTENTION_CLASSES["rel_udps_selfattn"](n_head=4, n_feat=16, alpha_form="log", alpha_init=20.0)
    torch.testing.assert_close(lg.effective_scales()["alpha"], torch.full((4,), 20.0))
    torch.testing.assert_close(lg.alpha.detach(), torch.full((4,), math.log(20.0)))
    with pytest.raises(ValueError, match="beta_init must be > 0 with alpha_form 'log'"):
        ATTENTION_CLASSES["rel_udps_selfattn"](n_head=4, n_feat=16, alpha_form="log", beta_init=0.0)
    with pytest.raises(ValueError, match="alpha_form.*linear, squared, log"):
        ATTENTION_CLASSES["udps_selfattn"](n_head=4, n_feat=16, alpha_form="cubic")
    with pytest.raises(ValueError, match="pos_norm.*qk, qp"):
        ATTENTION_CLASSES["rel_udps_selfattn"](n_head=4, n_feat=16, pos_norm="pp")
    with pytest.raises(ValueError, match="divisible"):
        ATTENTION_CLASSES["selfattn"](n_head=3, n_feat=16)


def test_cosine_has_udps_options_and_defaults():
    """Each cosine class takes its UDPS twin's options (less pos_norm, the position term normalisation that has no
    cosine analogue) with the same defaults; the scales are stored as UDPS stores them."""
    import inspect
    for name in ("selfattn", "rel_selfattn", "crossattn"):
        cos, udps = (ATTENTION_CLASSES[family_type(name, f)] for f in ("cosine", "udps"))
        params = {k: p.default for k, p in inspect.signature(cos.__init__).parameters.items() if k != "self"}
        twin = {k: p.default for k, p in inspect.signature(udps.__init__).parameters.items()
                if k not in ("self", "pos_norm")}
        assert params == twin, name
    rel = ATTENTION_CLASSES["rel_cosine_selfattn"](n_head=4, n_feat=16, alpha_form="log", alpha_init=20.0,
                                                    alpha_per_head=False)
    torch.testing.assert_close(rel.effective_scales()["cos_alpha"], torch.full((1,), 20.0))
    torch.testing.assert_close(rel.effective_scales()["cos_beta"], torch.full((1,), 5.0))
    assert not hasattr(rel, "pos_bias_u") and not hasattr(rel, "alpha")
    with pytest.raises(ValueError, match="cosine_conf.beta_init must be > 0 with alpha_form 'log'"):
        ATTENTION_CLASSES["rel_cosine_selfattn"](n_head=4, n_feat=16, alpha_form="log", beta_init=0.0)


def test_cosine_is_udps_without_g():
    """With every |q_i| = |k_j| (g = 1) cosine and UDPS give the same output; with unequal norms they differ by g."""
    torch.manual_seed(0)
    udps, cos = _build("udps_selfattn"), _build("cosine_selfattn")
    cos.load_state_dict({k.replace("alpha", "cos_alpha"): v for k, v in udps.state_dict().items()})
    with torch.no_grad():
        for m in (udps, cos):   # q = k = x, and x unit per head: every |q_i| = |k_j| = 1
            for lin in (m.linear_q, m.linear_k):
                lin.weight.copy_(torch.eye(N_FEAT))
                lin.bias.zero_()
    x = torch.nn.functional.normalize(torch.randn(2, 5, N_HEAD, D_K, dtype=torch.float64), dim=-1).flatten(2)
    mask = torch.ones(2, 1, 5, dtype=torch.bool)
    torch.testing.assert_close(cos(x, x, x, mask)[0], udps(x, x, x, mask)[0], rtol=1e-10, atol=1e-12)
    mem = x * torch.linspace(0.2, 3.0, 5, dtype=torch.float64).view(1, 5, 1)
    assert not torch.allclose(cos(x, mem, mem, mask)[0], udps(x, mem, mem, mask)[0])


@pytest.mark.parametrize("name", ["cosine_selfattn", "rel_cosine_selfattn", "cosine_crossattn"])
def test_cosine_zero_vectors_are_floored_not_nan(name):
    """A zero query or key has score 0 (its norm floored at sqrt(eps)), with finite gradients."""
    m = ATTENTION_CLASSES[name](n_head=N_HEAD, n_feat=N_FEAT)
    for lin in (m.linear_q, m.linear_k):
        torch.nn.init.zeros_(lin.bias)
    x = torch.randn(2, 4, N_FEAT)
    x[0, 1] = 0.0          # q and k of that position are exactly zero
    x.requires_grad_()
    out, _ = m(x, x, x, torch.ones(2, 1, 4, dtype=torch.bool), torch.randn(1, 4, N_FEAT))
    out.square().sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()


def test_every_site_has_a_type_in_every_family():
    """Each type maps to the same site's type in each family (same kind and positional input), and back."""
    assert list(FAMILIES) == ["scaled_dot", "udps", "cosine"]
    assert set(attention_classes("self")) | set(attention_classes("cross")) == set(ATTENTION_CLASSES)
    assert set(attention_classes("cross")) == {"crossattn", "udps_crossattn", "cosine_crossattn"}
    for name, cls in ATTENTION_CLASSES.items():
        for family in FAMILIES:
            target = family_type(name, family)
            assert family_of(target) == family and ATTENTION_CLASSES[target].kind == cls.kind
            assert ATTENTION_CLASSES[target].uses_pos_emb == cls.uses_pos_emb
            assert family_type(target, cls.family) == name   # and back
    assert family_type("selfattn", "udps") == "udps_selfattn" and family_type("udps_selfattn", "udps") == "udps_selfattn"
    assert family_type("rel_udps_selfattn", "cosine") == "rel_cosine_selfattn"
    assert family_type("cosine_crossattn", "scaled_dot") == "crossattn"
    assert is_udps("udps_crossattn") and not is_udps("cosine_crossattn")


@pytest.mark.parametrize("first", ["attention", "udps_attention", "cosine_attention"])
def test_importing_any_attention_module_first_registers_every_class(first):
    """The package's __init__ imports every family module (attention.py imports none: no import circle), so the
    registry is complete whichever module a fresh process imports first."""
    code = (f"import wenet_udps.transformer.{first}; from wenet_udps.transformer.attention import ATTENTION_CLASSES; "
            f"print(' '.join(sorted(ATTENTION_CLASSES)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["cosine_crossattn", "cosine_selfattn", "crossattn", "rel_cosine_selfattn", "rel_selfattn",
                           "rel_udps_selfattn", "selfattn", "udps_crossattn", "udps_selfattn"]


def test_register_attention_refuses_a_taken_name_and_a_bad_kind():
    class Copy(ATTENTION_CLASSES["selfattn"]):
        """Forgot its own name."""
    with pytest.raises(ValueError, match="'selfattn' of Copy is taken"):
        register_attention(Copy)
    Copy.name, Copy.kind = "copy_selfattn", "both"
    with pytest.raises(ValueError, match="kind 'both'; valid choices: self, cross"):
        register_attention(Copy)
    assert "copy_selfattn" not in ATTENTION_CLASSES


def test_register_attention_checks_family_and_counterpart():
    """A class names a registered family and, as its counterpart, a scaled-dot type of its own kind that no other
    class of its family stands in for; families' names, options keys and markers are their own."""
    from wenet_udps.transformer.attention import Family, register_family

    class Bad(ATTENTION_CLASSES["cosine_selfattn"]):
        name = "bad_selfattn"
    with pytest.raises(ValueError, match="'cosine_selfattn' already stands in for 'selfattn' in family 'cosine'"):
        register_attention(Bad)
    Bad.counterpart = "crossattn"
    with pytest.raises(ValueError, match="counterpart 'crossattn' is no registered scaled-dot type of kind 'self'"):
        register_attention(Bad)
    Bad.counterpart, Bad.family = "selfattn", "qknorm"
    with pytest.raises(ValueError, match="family 'qknorm' is not registered; valid: scaled_dot, udps, cosine"):
        register_attention(Bad)
    assert "bad_selfattn" not in ATTENTION_CLASSES
    with pytest.raises(ValueError, match="family 'qk': marker 'alpha' is taken by family 'udps'"):
        register_family(Family("qk", "QK-norm", conf_key="qk_conf", marker="alpha"))
    assert "qk" not in FAMILIES
