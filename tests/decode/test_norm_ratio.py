"""wenet_udps.decode.norm_ratio: r = |q|/|k| of every UDPS head over the valid pairs, as a float64 computation from the
projections gives it (uniform and attention-weighted), with padded pairs left out; the refusals."""
import math

import numpy as np
import pytest
import torch

from tests.train.train_helpers import tiny_config, write_units
from wenet_udps.config import finalize_config
from wenet_udps.decode.attention_maps import AttentionCall
from wenet_udps.decode.norm_ratio import BINS_PER_DECADE, QUANTILES, WEIGHTINGS, RatioTally, collect, udps_sites
from wenet_udps.model_builder import build_model

pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

BIN = 1.0 / BINS_PER_DECADE + 1e-9   # a quantile is within one histogram bin of log10 r of the exact one
FEATS_LENS = [90, 61, 75]
TEXT = [[3, 4, 5, 6], [6, 7, -1, -1], [8, 3, 4, -1]]


def model_of(tmp_path, encoder: str, **kwargs) -> torch.nn.Module:
    units = tmp_path / "units.txt"
    write_units(units)
    torch.manual_seed(3)
    return build_model(finalize_config(tiny_config(units, encoder=encoder, **kwargs))).double().eval()


def batch(n: int = 3):
    torch.manual_seed(4)
    feats = torch.randn(3, max(FEATS_LENS), 20, dtype=torch.float64)[:n]
    text = torch.tensor(TEXT)[:n]
    return {"feats": feats, "feats_lengths": torch.tensor(FEATS_LENS)[:n], "target": text,
            "target_lengths": (text >= 0).sum(1)}


def plain(model, b):
    """Per UDPS module path: (r, attention weights) of its valid pairs per head, float64, from the module's inputs,
    its projections and the utterances' lengths (not from the masks or the kernels)."""
    inputs = {}
    hooks = [module.register_forward_pre_hook(lambda m, a, kw, p=path: inputs.setdefault(p, (a, kw)),
                                              with_kwargs=True)
             for path, (_, _, module) in udps_sites(model).items()]
    with torch.no_grad():
        model(b["feats"], b["feats_lengths"], b["target"], b["target_lengths"])
        enc_lens = model.encoder(b["feats"], b["feats_lengths"])[1].squeeze(1).sum(1)
    for h in hooks:
        h.remove()
    dec_lens = b["target_lengths"] + 1
    return {path: _plain_site(m, site, *inputs[path], enc_lens, dec_lens)
            for path, (site, _, m) in udps_sites(model).items()}


@torch.no_grad()
def _plain_site(m, site, args, kwargs, enc_lens, dec_lens):
    """[(r, weights) of the valid pairs of head h] of one module from its forward's arguments."""
    def heads(x, linear):
        return linear(x).view(x.size(0), -1, m.h, m.d_k).transpose(1, 2)

    query, key = args[0], args[1]
    q, k = heads(query, m.linear_q), heads(key, m.linear_k)
    qn, kn = q.norm(dim=-1), k.norm(dim=-1)
    scales = {name: value.view(1, -1, 1, 1) for name, value in m.effective_scales().items()}
    num = 4 * scales["alpha"] * q @ k.transpose(-2, -1)
    if "beta" in scales:   # rel-pos, pos_norm qk: the position term shares (|q| + |k|)^2
        num = num + 4 * scales["beta"] * q @ heads(kwargs["pos_emb"], m.linear_pos).transpose(-2, -1)
    scores = num / (qn.unsqueeze(-1) + kn.unsqueeze(-2)) ** 2
    r_all = qn.unsqueeze(-1) / kn.unsqueeze(-2)
    rs, ws = [[] for _ in range(m.h)], [[] for _ in range(m.h)]
    for u in range(q.size(0)):
        n_q = int(enc_lens[u] if site == "enc_self" else dec_lens[u])
        n_k = int(dec_lens[u] if site == "dec_self" else enc_lens[u])
        keep = torch.ones(n_q, n_k, dtype=torch.bool)
        if site == "dec_self":
            keep = torch.tril(keep)
        w = torch.softmax(scores[u, :, :n_q, :n_k].masked_fill(~keep, -math.inf), -1)
        for h in range(m.h):
            rs[h].append(r_all[u, h, :n_q, :n_k][keep])
            ws[h].append(w[h][keep])
    return [(torch.cat(rs[h]).numpy(), torch.cat(ws[h]).numpy()) for h in range(m.h)]


def assert_quantiles(got, r, weights):
    """Each reported quantile within one bin of numpy's exact inverse-CDF one; where p falls on a step of the CDF
    (a tie, decided by the rounding of the sums), either side of the step."""
    for p in QUANTILES:
        low, high = (np.quantile(r, min(max(p / 100 + d, 0), 1), method="inverted_cdf", weights=weights)
                     for d in (-1e-9, 1e-9))
        assert math.log10(low) - BIN <= math.log10(got[f"{p:g}"]) <= math.log10(high) + BIN, (p, low, high)


def check_against_plain(tallies, want):
    assert set(tallies) == set(want)
    for path, heads in want.items():
        for h, (r, w) in enumerate(heads):
            got = tallies[path].summary(h)
            assert got["pairs"] == r.size, path
            assert got["attention_mass_per_row"] == pytest.approx(1.0, abs=1e-9)
            g = 4 * r / (1 + r) ** 2
            for name, weights in zip(WEIGHTINGS, (np.ones_like(r), w)):
                stats = got[name]
                assert_quantiles(stats["r_quantiles"], r, weights)
                assert stats["mean_g"] == pytest.approx(np.average(g, weights=weights), rel=1e-9)
                for t in (0.9, 0.5):
                    assert stats[f"frac_g_below_{t:g}"] == pytest.approx(weights[g < t].sum() / weights.sum(),
                                                                         abs=1e-9)
                assert sum(stats["histogram"]["fraction"]) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("encoder", ["transformer", "conformer"])
def test_r_is_the_plain_float64_ratio_over_valid_pairs_and_shifts_by_one_over_c(tmp_path, encoder):
    model = model_of(tmp_path, encoder)
    b = batch()
    tallies, used = collect(model, [b])
    assert used == 3 and len(tallies) == 3   # enc self, dec self, dec src: one block each
    check_against_plain(tallies, plain(model, b))
    # The keys' projection times c: every key norm times c, so r / c; g moves away from 1.
    c = 4.0
    with torch.no_grad():
        for _, _, module in udps_sites(model).values():
            module.linear_k.weight.mul_(c)
            module.linear_k.bias.mul_(c)
    scaled, _ = collect(model, [b])
    check_against_plain(scaled, plain(model, b))
    # Sites whose inputs no attention has touched (the features, the token embeddings) see exactly r / c; the
    # others' inputs change with the scaled attention too (checked against the plain computation above).
    for path in ("encoder.encoders.0.self_attn", "decoder.decoders.0.self_attn"):
        for h in range(2):
            before, after = tallies[path].summary(h)["uniform"], scaled[path].summary(h)["uniform"]
            for p in ("1", "50", "99"):
                shift = math.log10(before["r_quantiles"][p]) - math.log10(after["r_quantiles"][p])
                assert shift == pytest.approx(math.log10(c), abs=2 * BIN)
            # a random model's r is near 1 (g near 1); r / 4 gives g near 0.64
            assert before["frac_g_below_0.9"] < 0.5 < after["frac_g_below_0.9"]


def test_padding_adds_no_pair_and_max_utts_stops(tmp_path):
    """One padded batch of three utterances holds what the three alone hold; --max_utts 2 the first two's."""
    model = model_of(tmp_path, "conformer")
    together, _ = collect(model, [batch()])
    alone, used = collect(model, [{k: v[i:i + 1] for k, v in batch().items()} for i in range(3)])
    assert used == 3
    for path in together:
        for h in range(2):
            a, b = together[path].summary(h), alone[path].summary(h)
            assert (a["pairs"], a["rows"]) == (b["pairs"], b["rows"])
            for name in WEIGHTINGS:
                assert a[name]["mean_g"] == pytest.approx(b[name]["mean_g"], rel=1e-9)
                for p, value in a[name]["r_quantiles"].items():
                    assert abs(math.log10(value) - math.log10(b[name]["r_quantiles"][p])) <= BIN
    first_two, used = collect(model, [batch()], max_utts=2)
    assert used == 2
    check_against_plain(first_two, plain(model, batch(2)))


def test_only_udps_sites_are_measured(tmp_path):
    model = model_of(tmp_path, "conformer", att_family="udps:enc_self")
    assert [site for site, _, _ in udps_sites(model).values()] == ["enc_self"]
    tallies, _ = collect(model, [batch()])
    assert list(tallies) == ["encoder.encoders.0.self_attn"]
    for family in ("scaled_dot", "cosine"):
        assert udps_sites(model_of(tmp_path, "conformer", att_family=family)) == {}


norms = st.lists(st.floats(-3, 3), min_size=1, max_size=6).map(lambda xs: [10.0 ** x for x in xs])


@given(q=norms, k=norms, seed=st.integers(0, 2 ** 16))
def test_quantiles_are_within_a_bin_of_the_exact_weighted_ones(q, k, seed):
    """Any norms and attention rows: each quantile within one bin of numpy's inverse-CDF quantile, every row's
    weight 1 in all."""
    weights = torch.rand(1, 1, len(q), len(k), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    weights = weights / weights.sum(-1, keepdim=True)
    call = AttentionCall(weights, None, torch.tensor(q, dtype=torch.float64).view(1, 1, -1),
                         torch.tensor(k, dtype=torch.float64).view(1, 1, -1))
    tally = RatioTally(1)
    tally.add(call, torch.ones(1, len(q), dtype=torch.bool))
    got = tally.summary(0)
    r = (np.array(q)[:, None] / np.array(k)[None, :]).ravel()
    assert got["pairs"] == r.size and got["attention_mass_per_row"] == pytest.approx(1.0)
    for name, w in zip(WEIGHTINGS, (np.ones_like(r), weights.numpy().ravel())):
        assert_quantiles(got[name]["r_quantiles"], r, w)
