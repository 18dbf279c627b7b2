"""GPU attention benchmark: UDPS (Triton kernel, FlexAttention formulation, reference formula) and cosine attention
(SDPA on unit queries and keys) vs SDPA.

Inputs (B, H, T, d_k) in fp16/bf16 with a key padding mask (lengths in [T/2, T], one of them T). Times are medians
of ``triton.testing.do_bench`` (CUDA events; host launch time included where the GPU waits for it, as in training);
all implementations of one (dtype, T) run in the same process one after the other; ratio = time / the time of SDPA's
flash backend. Peak MiB = ``max_memory_allocated`` growth over one forward+backward (inputs excluded).

| implementation | what |
|---|---|
| sdpa flash (no mask) | ``F.scaled_dot_product_attention`` forced to the flash backend; flash takes no mask, so it \
attends to the padding too |
| sdpa (masked) | ``scaled_dot_attention`` as ``selfattn`` runs it: SDPA with the boolean mask (torch picks the \
backend) |
| udps triton | ``triton_udps.udps_attention_triton`` with the mask (what the UDPS modules run on CUDA) |
| udps triton (no mask) | the same without a mask: the like-for-like comparison with flash |
| udps flex (alpha in q) | ``flex_attention`` compiled: q scaled by 4 alpha, score_mod divides by (|q| + |k|)^2 from \
norms captured outside, block mask from the lengths (norm gradients not propagated: a speed reference only) |
| udps reference | ``reference.udps_attention_reference``: one op per step over full T x T float32 tensors |
| cosine (masked) | ``kernels.cosine`` as ``cosine_selfattn`` runs it: unit q, keys alpha k / |k| (norms in float32), \
then SDPA with the boolean mask and scale 1 |
| cosine flash (no mask) | the same keys and queries, SDPA forced to the flash backend without a mask: the \
like-for-like comparison with flash (what cosine costs over scaled-dot: its normalisations) |

    python -m bench.attention_gpu --out docs/bench_attention_gpu.md
    python -m bench.attention_gpu --tune --T 1024 4096   # block sizes / warps of the Triton kernel, checked

``--device cpu`` (with ``TRITON_INTERPRET=1``, toy sizes, ``--no-flex``) only dry-runs the same table on the CPU
(bench/gpu_report.sh --dry_run true): its times are medians of a few ``time.perf_counter`` calls, and peak memory
is not measured (nan).
"""
import argparse
import math
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench._harness import ALPHA, make_inputs, step, udps_call, write_table
from wenet_udps.kernels import selfcheck, triton_udps
from wenet_udps.kernels.cosine import cosine_attention, cosine_keys, unit_rows
from wenet_udps.kernels.reference import udps_attention_reference
from wenet_udps.kernels.scaled_dot import scaled_dot_attention

BASELINE = "sdpa flash (no mask)"


def _udps_triton(blocks=triton_udps.DEFAULT_BLOCKS, masked=True):
    kernel = udps_call(triton_udps.udps_attention_triton, blocks=blocks)
    return kernel if masked else (lambda q, k, v, mask, lengths: kernel(q, k, v, None))


def _flash(q, k, v, mask, lengths):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v)


def _cosine(masked=True):
    """Cosine attention as the cosine modules compute it (alpha = ALPHA, one scale for every head)."""
    scale = torch.tensor(ALPHA)

    def run(q, k, v, mask, lengths):
        k_tilde = cosine_keys(k, scale.to(k.device))
        if masked:
            return cosine_attention(q, k_tilde, v, mask)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(unit_rows(q), k_tilde, v, scale=1.0)
    return run


class Flex:
    """UDPS as a FlexAttention score_mod, alpha folded into q; compiled once per shape (outside the timing)."""

    def __init__(self):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        self.create_block_mask = create_block_mask
        self.flex = torch.compile(flex_attention, dynamic=False)
        self.block_masks = {}

    def __call__(self, q, k, v, mask, lengths):
        batch, _, t, _ = q.shape
        key = (batch, t, tuple(lengths.tolist()))
        if key not in self.block_masks:
            def keep(b, h, i, j):
                return j < lengths[b]
            self.block_masks[key] = self.create_block_mask(keep, batch, None, t, t, device=q.device.type)
        qn = torch.linalg.vector_norm(q.detach(), dim=-1, dtype=torch.float32)
        kn = torch.linalg.vector_norm(k.detach(), dim=-1, dtype=torch.float32)

        def score_mod(score, b, h, i, j):
            den = qn[b, h, i] + kn[b, h, j]
            return score / torch.clamp(den * den, min=1e-6)
        return self.flex((4.0 * ALPHA) * q, k, v, score_mod=score_mod, block_mask=self.block_masks[key], scale=1.0)


def bench(fn, inputs, backward) -> float:
    """Median milliseconds of one call (CUDA: ``do_bench``; CPU dry run: 3 timed calls after one)."""
    if inputs[0].device.type == "cpu":
        step(fn, *inputs, backward=backward)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            step(fn, *inputs, backward=backward)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3
    return triton.testing.do_bench(lambda: step(fn, *inputs, backward=backward), warmup=25, rep=100,
                                   return_mode="median")


def peak_mib(fn, inputs) -> float:
    if inputs[0].device.type == "cpu":
        return math.nan
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(fn, *inputs, backward=True)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def run_table(args) -> List[str]:
    impls: Dict[str, Callable] = {
        BASELINE: _flash,
        "sdpa (masked)": lambda q, k, v, mask, lengths: scaled_dot_attention(q, k, v, mask, 0.0),
        "udps triton": _udps_triton(),
        "udps triton (no mask)": _udps_triton(masked=False),
    }
    if args.flex:
        impls["udps flex (alpha in q)"] = Flex()
    impls["udps reference"] = udps_call(udps_attention_reference)
    impls["cosine (masked)"] = _cosine()
    impls["cosine flash (no mask)"] = _cosine(masked=False)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (Triton interpreter: a dry run)"
    timer = "triton.testing.do_bench" if args.device == "cuda" else "3 time.perf_counter calls"
    lines = [f"Device: {where}; torch {torch.__version__}; triton {triton.__version__}; "
             f"B={args.batch} H={args.heads} d_k={args.d_k}; key padding mask, lengths in [T/2, T]; median of "
             f"{timer}; ratio = time / flash SDPA time; peak MiB = allocated-memory growth of one fwd+bwd.", "",
             "| dtype | T | implementation | fwd ms | fwd ratio | fwd+bwd ms | fwd+bwd ratio | peak MiB | peak ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)  # then each row as it is measured: a run cut short leaves a table
    for dtype in args.dtypes:
        for t in args.T:
            inputs = make_inputs(args.batch, args.heads, t, args.d_k, getattr(torch, dtype), args.device)
            rows = {}
            for name, fn in impls.items():
                if name == "udps reference" and t > args.skip_reference_above:
                    continue
                try:
                    rows[name] = (bench(fn, inputs, False), bench(fn, inputs, True), peak_mib(fn, inputs))
                except Exception as exc:  # noqa: BLE001 - one failing implementation must not lose the table
                    print(f"{dtype} T={t} {name}: failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            base = rows[BASELINE]
            for name, (fwd, both, mem) in rows.items():
                lines.append(f"| {dtype} | {t} | {name} | {fwd:.3f} | {fwd / base[0]:.2f} | {both:.3f} | "
                             f"{both / base[1]:.2f} | {mem:.0f} | {mem / base[2]:.2f} |")
                print(lines[-1], flush=True)
    return lines


def block_variants() -> Dict[str, triton_udps.Blocks]:
    """The Triton kernel's default blocks, and the same with one launch's blocks / warps / stages changed at a time
    (named by the launch: ``fwd``, ``dq`` or ``dkv``)."""
    d = triton_udps.DEFAULT_BLOCKS
    variants = {"default": d}
    for m, n, w, s in [(64, 64, 4, 2), (128, 128, 8, 2), (128, 64, 4, 3), (64, 128, 4, 2)]:
        # stages is the forward's and the query pass's depth: the key pass keeps the default's
        variants[f"fwd {m}x{n} w{w} s{s}"] = d._replace(fwd_m=m, fwd_n=n, fwd_warps=w, stages=s,
                                                        dkv_stages=_dkv_stages(d))
    for m, n, w in [(128, 64, 8), (64, 32, 4), (32, 64, 4)]:
        variants[f"dq {m}x{n} w{w}"] = d._replace(dq_m=m, dq_n=n, dq_warps=w)
    for m, n, w in [(32, 128, 8), (64, 128, 8), (32, 64, 4), (64, 64, 8)]:
        variants[f"dkv {m}x{n} w{w}"] = d._replace(dkv_m=m, dkv_n=n, dkv_warps=w)
    # The key pass without register spills for sm_90 (bench/kernel_sass.py): 8 warps at 1 stage, which gave the right
    # dk~ where 8 warps at 2 stages miscompiled (H200, triton 3.6, 2026-11-26).
    variants["dkv 32x128 w8 s1"] = d._replace(dkv_warps=8, dkv_stages=1)
    # The default timed again, last: the spread of one setting's times is the yardstick for a variant's gain (on
    # 2026-11-26 the default's own settings, listed as variants, took 0.858, 1.008 and 0.935 ms at T = 1024).
    variants["default, again"] = d
    return variants


# The Blocks fields each launch reads (``stages`` is the query pass's too; :func:`combined` keeps it with the forward).
LAUNCH_FIELDS = {"fwd": ("fwd_m", "fwd_n", "fwd_warps", "stages"), "dq": ("dq_m", "dq_n", "dq_warps"),
                 "dkv": ("dkv_m", "dkv_n", "dkv_warps", "dkv_stages")}


def _dkv_stages(blocks: triton_udps.Blocks) -> int:
    return blocks.stages if blocks.dkv_stages is None else blocks.dkv_stages


def combined(variants: Dict[str, triton_udps.Blocks], times: Dict[str, float]) -> triton_udps.Blocks:
    """The default with each launch's fields taken from the fastest timed variant of that launch (``times``: name ->
    fwd+bwd ms of the variants that were checked and timed; the default competes in every launch)."""
    out = variants["default"]._replace(dkv_stages=_dkv_stages(variants["default"]))
    for launch, fields in LAUNCH_FIELDS.items():
        timed = [n for n in times if n == "default" or n.startswith(launch + " ")]
        best = variants[min(timed, key=times.get)]
        best = best._replace(dkv_stages=_dkv_stages(best))
        out = out._replace(**{f: getattr(best, f) for f in fields})
    return out


def describe(blocks: triton_udps.Blocks) -> str:
    """``Blocks(...)`` with only the fields that differ from the default: what adopting the setting changes."""
    d = triton_udps.DEFAULT_BLOCKS._replace(dkv_stages=_dkv_stages(triton_udps.DEFAULT_BLOCKS))
    changed = [f"{f}={v}" for f, v in blocks._replace(dkv_stages=_dkv_stages(blocks))._asdict().items()
               if getattr(d, f) != v]
    return f"Blocks({', '.join(changed)})"


def outputs(fn: Callable, q, k, v, grad, mask, lengths) -> List[torch.Tensor]:
    """The output and the gradients of q, k and v of one forward+backward of ``fn`` on fresh leaves."""
    leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
    out = fn(*leaves, mask, lengths)
    out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


def tune(args, variants: Dict[str, triton_udps.Blocks], kernel: Callable = _udps_triton) -> List[str]:
    """Each block configuration of ``variants`` (``kernel`` makes its attention call) first checked, then timed. The
    check compares its output and the gradients of q, k and v with the float32 reference formula on the same
    (rounded) inputs, within the runtime self-check's tolerance for the dtype: a faster setting is only worth
    adopting if it computes the right numbers (the key pass at 8 warps miscompiled on an H200, 2026-11-26), so a
    wrong one is not timed. Per T, the fastest right setting of each launch together (:func:`combined`) is checked
    and timed too, since that is what a new default would run; last, per T, the fastest right configuration, with
    the ``Blocks`` fields that adopting it changes."""
    dtype = getattr(torch, args.dtypes[0])
    tol = selfcheck.tolerance(dtype)
    names = ("out", "q", "k", "v")
    lines = [f"{args.dtypes[0]}, B={args.batch} H={args.heads} d_k={args.d_k}, key padding mask; checked against the "
             f"float32 reference (largest relative error of {', '.join(names)}; tolerance {tol:.0e}), then timed.",
             "", "| T | config | largest error | fwd ms | fwd+bwd ms |", "|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    best = []
    for t in args.T:
        inputs = make_inputs(args.batch, args.heads, t, args.d_k, dtype, args.device)
        wide = [x.float() if x.is_floating_point() else x for x in inputs]
        ref = outputs(udps_call(udps_attention_reference), *wide)
        flash = (bench(_flash, inputs, False), bench(_flash, inputs, True))
        lines.append(f"| {t} | flash SDPA | - | {flash[0]:.3f} | {flash[1]:.3f} |")
        print(lines[-1], flush=True)
        right: Dict[str, float] = {}
        configs = dict(variants)

        def check_and_time(name: str) -> None:
            try:
                fn = kernel(configs[name])
                errors = selfcheck.rel_errors(outputs(fn, *inputs), ref, names)
                worst = max(errors, key=errors.get)
                error = f"{errors[worst]:.1e} ({worst})"
                if errors[worst] <= tol:
                    right[name] = bench(fn, inputs, True)
                    lines.append(f"| {t} | {name} | {error} | {bench(fn, inputs, False):.3f} | {right[name]:.3f} |")
                else:
                    lines.append(f"| {t} | {name} | **WRONG: {error}** | not timed | not timed |")
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory for a large block
                lines.append(f"| {t} | {name} | failed: {type(exc).__name__} | | |")
            print(lines[-1], flush=True)

        for name in variants:
            check_and_time(name)
        if "default" in right:
            together = combined(variants, right)
            if describe(together) not in {describe(b) for n, b in variants.items() if n in right}:
                configs["combined"] = together
                check_and_time("combined")
        if right:
            name = min(right, key=right.get)
            best.append(f"T={t}: {name} = {describe(configs[name])}, fwd+bwd {right[name]:.3f} ms "
                        f"({right[name] / flash[1]:.2f}x flash SDPA"
                        + (f", {right[name] / right['default']:.2f}x the default)" if "default" in right else ")"))
    return lines + ["", "Fastest right configuration: " + ("; ".join(best) or "none") + "."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"], choices=["bfloat16", "float16"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-k", dest="d_k", type=int, default=64)
    parser.add_argument("--no-flex", dest="flex", action="store_false", help="skip FlexAttention (compiles per T)")
    parser.add_argument("--skip-reference-above", type=int, default=4096)
    parser.add_argument("--tune", action="store_true",
                        help="check, then time, Triton block configurations instead (first --dtypes)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: a dry run under TRITON_INTERPRET=1 (see above)")
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = parser.parse_args()
    lines = tune(args, block_variants()) if args.tune else run_table(args)
    write_table(lines, args.out)


if __name__ == "__main__":
    main()
