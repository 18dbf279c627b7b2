"""The CPU tiled UDPS kernel (compiled and eager) gives the reference's values and gradients."""
import functools

import pytest
import torch

from wenet_udps.kernels import cpu_tiled
from wenet_udps.kernels.cpu_tiled import UDPSTiledFunction, plan_tiles, udps_attention_tiled
from wenet_udps.kernels.reference import udps_attention_reference

from tests.kernels.udps_inputs import CASES, assert_same, make_inputs, padding_mask, run_kernel


@pytest.fixture(params=["compiled", "eager"])
def tile_kernels(request, monkeypatch):
    """Run a test with the compiled tile functions and again with the eager ones (the no-compiler fallback)."""
    kernels = cpu_tiled.kernels()
    if request.param == "eager":
        monkeypatch.setattr(kernels, "compiled", False)
    else:
        assert kernels.compiled, "WENET_UDPS_COMPILE=0 in the test environment"
    return request.param


# (tile_elems, save_elems): one tile per call, scores saved for the backward; one tile, recomputed; tiles of a few
# items or of 8 query rows (the smallest block), recomputed and saved.
TILINGS = {"one tile, saved": (1 << 19, 1 << 22), "one tile, recomputed": (1 << 19, 0),
           "small tiles, recomputed": (16, 0), "small tiles, saved": (16, 1 << 22)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("tiling", list(TILINGS))
def test_tiled_matches_reference(case, tiling, tile_kernels):
    batch, heads, t1, t2, make_mask = CASES[case]
    mask = make_mask() if make_mask else None
    # A batch-1 key tensor (as the rel-pos term gives) must broadcast like the reference.
    q, k, v, alpha = make_inputs(batch, heads, t1, t2, 8, k_batch=1 if case == "no mask" else None)
    tile_elems, save_elems = TILINGS[tiling]
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    got = run_kernel(udps_attention_tiled, q, k, v, alpha, mask, tile_elems=tile_elems, save_elems=save_elems)
    assert_same(ref, got)


@pytest.mark.parametrize("save_elems", [0, 1 << 22])
def test_eps_floor_matches_reference(save_elems, tile_kernels):
    """Near-zero queries and keys hit the eps floor of the denominator; its gradient must stop there too."""
    q, k, v, alpha = make_inputs(2, 2, 12, 12, 4)
    q[:, :, :4] *= 1e-5
    k[:, :, :5] *= 1e-5
    q[0, 0, 0] = 0.0
    kwargs = dict(eps=1e-3)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, None, **kwargs)
    got = run_kernel(udps_attention_tiled, q, k, v, alpha, None, tile_elems=16, save_elems=save_elems, **kwargs)
    assert_same(ref, got)


def test_fully_masked_rows_are_zero(tile_kernels):
    q, k, v, _ = make_inputs(2, 2, 8, 8, 4)
    mask = torch.ones(2, 8, 8, dtype=torch.bool)
    mask[1, 3] = False
    out = udps_attention_tiled(q, 2 * k, torch.linalg.vector_norm(k, dim=-1), v, mask=mask)
    assert torch.equal(out[1, :, 3], torch.zeros_like(out[1, :, 3]))
    assert out[0].abs().sum() > 0


@pytest.mark.parametrize("save_elems", [0, 1 << 22])
def test_gradcheck_float64(save_elems):
    """The hand-derived backward against finite differences (eager tile functions: the same code the compiler
    fuses, checked against the reference in float32 above)."""
    q, k, v, _ = make_inputs(2, 2, 5, 6, 3, dtype=torch.float64)
    k_norm = torch.linalg.vector_norm(k, dim=-1)
    pad = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    holes = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 6)
    causal = torch.tril(torch.ones(5, 6, dtype=torch.bool)).expand(2, 1, 5, 6)
    for keep in (torch.ones(2, 1, 1, 6, dtype=torch.bool), pad, holes, causal):
        fn = functools.partial(_apply_tiled, keep=keep, save_elems=save_elems)
        inputs = [x.clone().requires_grad_(True) for x in (q, 3 * k, k_norm, v)]
        assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def _apply_tiled(q, k_num, k_norm, v, keep, save_elems):
    return UDPSTiledFunction.apply(q, k_num, k_norm, v, keep, 1e-6, 8, save_elems, False)


def test_plan_tiles_groups_items_and_cuts_rows():
    # Items fit together while items x heads x t1 x (largest extent) <= tile_elems; empty items get no tile.
    assert plan_tiles([10, 8, 0, 10], heads=2, t1=5, tile_elems=200) == [(0, 2, 10, 5), (3, 4, 10, 5)]
    # One item larger than a tile: blocks of query rows, a multiple of 8.
    assert plan_tiles([100], heads=2, t1=50, tile_elems=4000) == [(0, 1, 100, 16)]
    assert plan_tiles([100], heads=2, t1=50, tile_elems=10) == [(0, 1, 100, 8)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_close_to_float32(dtype):
    q, k, v, alpha = make_inputs(2, 2, 70, 70, 16)
    mask = padding_mask([70, 50], 70)
    ref = run_kernel(udps_attention_reference, q, k, v, alpha, mask)
    got = run_kernel(udps_attention_tiled, q.to(dtype), k.to(dtype), v.to(dtype), alpha.to(dtype), mask)
    assert got[0].dtype == dtype
    for r, g in zip(ref, got):
        assert torch.isfinite(g.float()).all()
    torch.testing.assert_close(got[0].float(), ref[0], atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(got[1].float(), ref[1], atol=5e-2, rtol=5e-2)


def test_compile_failure_falls_back_to_eager(monkeypatch, caplog):
    """Without a working compiler the tiles run eagerly, with one warning, and match the reference up to rounding."""
    def broken_compile(fn, **kwargs):
        def run(*args):
            raise RuntimeError("no C++ compiler found")
        return run
    monkeypatch.setattr(cpu_tiled, "_KERNELS", None)
    monkeypatch.setattr(torch, "compile", broken_compile)
    q, k, v, alpha = make_inputs(2, 2, 20, 20, 8)
    mask = padding_mask([20, 13], 20)
    with caplog.at_level("WARNING", logger=cpu_tiled.__name__):
        got = run_kernel(udps_attention_tiled, q, k, v, alpha, mask)
    assert "no C++ compiler found" in caplog.text and "eagerly" in caplog.text
    assert not cpu_tiled.kernels().compiled
    assert_same(run_kernel(udps_attention_reference, q, k, v, alpha, mask), got)
