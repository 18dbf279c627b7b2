"""one_query: a decoding step's UDPS attention (one query row per head, denominators folded into the keys, SDPA)
gives the reference's numbers, and udps_attention_from_keys sends exactly the decoding steps to it."""
import pytest
import torch

from wenet_udps.kernels import dispatch, one_query
from wenet_udps.kernels.dispatch import udps_attention_from_keys
from wenet_udps.kernels.one_query import udps_attention_one_query
from wenet_udps.kernels.reference import udps_attention_reference, upcast

from tests.kernels.udps_inputs import make_inputs, padding_mask


def reference(q, k, v, alpha, mask, eps=1e-6):
    return udps_attention_reference(q, 4.0 * alpha * k, torch.linalg.vector_norm(upcast(k), dim=-1), v, mask=mask,
                                    eps=eps)


MASKS = {
    "no mask": lambda b, t: None,
    "padding": lambda b, t: padding_mask([t, t - 5, 1][:b], t),
    "a row with no kept key": lambda b, t: padding_mask([t, 0, 3][:b], t),
    "non-prefix keys": lambda b, t: torch.rand(b, 1, t, generator=torch.Generator().manual_seed(2)) > 0.4,
    "mask batch 1": lambda b, t: padding_mask([t - 2], t),
}


@pytest.mark.parametrize("case", list(MASKS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_reference(case, dtype):
    q, k, v, alpha = make_inputs(3, 3, 1, 17, 8, dtype=dtype)
    mask = MASKS[case](3, 17)
    got = udps_attention_one_query(q, k, 4.0 * alpha, v, mask=mask)
    assert got.dtype == dtype and got.shape == (3, 3, 1, 8)
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(got, reference(q, k, v, alpha, mask), **tol)
    if case == "a row with no kept key":
        assert torch.equal(got[1], torch.zeros_like(got[1]))


def test_half_precision_inputs_are_computed_in_float32():
    q, k, v, alpha = make_inputs(2, 3, 1, 12, 8, dtype=torch.bfloat16)
    got = udps_attention_one_query(q, k, 4.0 * alpha, v)
    assert got.dtype == torch.bfloat16
    want = reference(q.float(), k.float(), v.float(), alpha.float(), None)
    torch.testing.assert_close(got.float(), want, atol=1e-2, rtol=1e-2)


def test_eps_floor_as_the_reference():
    """Near-zero vectors: the denominator is max((|q| + |k|)^2, eps), not (|q| + |k|)^2."""
    q, k, v, alpha = make_inputs(2, 2, 1, 9, 4)
    q, k = q * 1e-5, k * 1e-5
    got = udps_attention_one_query(q, k, 4.0 * alpha, v, eps=1e-6)
    torch.testing.assert_close(got, reference(q, k, v, alpha, None, eps=1e-6), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(got, reference(q, k, v, alpha, None, eps=1e-30), atol=1e-4)


def test_more_than_one_query_row_is_refused():
    q, k, v, alpha = make_inputs(1, 2, 2, 5, 4)
    with pytest.raises(ValueError, match="one query row"):
        udps_attention_one_query(q, k, 4.0 * alpha, v)


def _route(monkeypatch):
    calls = []
    real = one_query.udps_attention_one_query
    monkeypatch.setattr(dispatch, "udps_attention_one_query", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def test_from_keys_sends_decoding_steps_to_one_query(monkeypatch):
    calls = _route(monkeypatch)
    q, k, v, alpha = make_inputs(2, 3, 1, 10, 8)
    mask = padding_mask([10, 6], 10)
    with torch.no_grad():
        got = udps_attention_from_keys(q, k, 4.0 * alpha, v, mask=mask)
    assert calls == [1]
    torch.testing.assert_close(got, reference(q, k, v, alpha, mask), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("why", ["two query rows", "gradients", "forced reference", "dropout while training"])
def test_from_keys_keeps_every_other_call_on_udps_attention(monkeypatch, why):
    calls = _route(monkeypatch)
    q, k, v, alpha = make_inputs(2, 3, 2 if why == "two query rows" else 1, 10, 8)
    kwargs = {}
    if why == "gradients":
        q.requires_grad_(True)
    if why == "forced reference":
        monkeypatch.setenv("WENET_UDPS_KERNEL", "reference")
    if why == "dropout while training":
        kwargs = dict(dropout_p=0.0001, training=True)
    with torch.set_grad_enabled(why == "gradients"):
        got = udps_attention_from_keys(q, k, 4.0 * alpha, v, **kwargs)
    assert calls == []
    if why != "dropout while training":
        torch.testing.assert_close(got, reference(q, k, v, alpha, None), atol=1e-6, rtol=1e-5)


def test_tracing_records_the_reference_formula():
    q, k, v, alpha = make_inputs(1, 2, 1, 6, 4)
    with torch.no_grad():
        traced = torch.jit.trace(lambda q, k, v: udps_attention_from_keys(q, k, 4.0 * alpha, v), (q, k, v))
    assert "scaled_dot_product_attention" not in str(traced.graph)
