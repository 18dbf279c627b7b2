"""What the GPU executes per attention score, read from the compiled Triton kernels without a GPU.

Triton compiles for a named GPU target on any machine (its wheel carries ptxas and nvdisasm): this script runs one
forward+backward of ``triton_udps.udps_attention_triton`` on CPU tensors with each kernel launch intercepted, compiles
each launch for the target (sm_90: H100/H200) with the arguments and specialisation a real launch would have, and
reads the SASS. Per launch it reports the registers, spills and shared memory, and for the loop over score tiles (the
loop holding the tensor-core instructions) the instructions each score costs: one thread's instructions in the loop
body times the threads, over the tile's scores.

These are issue counts, not times: they say where a kernel spends its instruction slots, and how two versions of a
kernel differ (``--jit`` compiles the kernels of another file, e.g. ``git show REV:wenet_udps/kernels/triton_udps/jit.py
> /tmp/old_jit.py``). The H100/H200 issue at most one warp instruction per clock per scheduler (4 per SM), MUFU
(exp2, reciprocal) at 16 threads per clock per SM, FP32 at 128, and dense bf16/fp16 tensor work at about 4096 FLOP
per clock per SM; the ``clk`` columns divide each class by its rate (clocks per score per SM).

    python -m bench.kernel_sass                                  # bf16, d_k 64, T 1024, padding mask, sm_90
    python -m bench.kernel_sass --mask rows --dtype float16      # causal + padding (the decoder), fp16
    python -m bench.kernel_sass --jit /tmp/old_jit.py            # the same for another version of the kernels
"""
import argparse
import collections
import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import torch
import triton
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction, native_specialize_impl

from wenet_udps.kernels import triton_udps


BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
# Per-SM issue rates of sm_90 (threads per clock): MUFU, FP32 pipe, and tensor-core FLOP (dense bf16/fp16).
MUFU_RATE, FP32_RATE, TC_FLOP_RATE, ISSUE_RATE = 16, 128, 4096, 128
# Products of a (rows x keys x head dim) tile per launch: S and P v; S, dO v^T and dS k~; S, P^T dO, v dO^T, dS^T q.
DOTS = {"udps_fwd": 2, "udps_bwd_dq": 3, "udps_bwd_dkv": 4}
CLASSES = [("tensor", r"^(HGMMA|HMMA)"), ("mufu", r"^MUFU"), ("fp32", r"^F(MUL|ADD|FMA|MNMX|SEL|SETP|CHK)"),
           ("convert", r"^(F2F|F2FP|I2F|F2I)"), ("memory", r"^(LDG|STG|LDS|STS|LDSM|LD|ST|ATOM|RED|LDC|LDGSTS)"),
           ("sync", r"^(BAR|WARPGROUP|MEMBAR|FENCE|DEPBAR|SYNCS)"), ("integer/other", r".")]


def capture_launches(jit_module) -> List[Tuple[object, Dict, Dict]]:
    """Run one forward+backward through :class:`triton_udps.UDPSTritonFunction` on CPU tensors with the kernels of
    ``jit_module``, their launches recorded instead of run: [(JITFunction, arguments by name, launch options)]."""
    launches = []

    def recorder(fn):
        def run(*args, grid, warmup, **kwargs):
            options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
            launches.append((fn, dict(zip(fn.arg_names, args), **kwargs), options))
        return run

    for name in ("udps_fwd", "udps_bwd_dq", "udps_bwd_dkv"):
        fn = getattr(jit_module, name)
        fn.run = recorder(fn)
        setattr(triton_udps, name, fn)  # the module's launches look the names up at call time
    return launches


def compile_launch(fn, args: Dict, options: Dict, arch: int):
    """The launch compiled for ``arch`` with the signature, constants and alignment attributes a real launch
    gets (Triton's own specialisation: integers equal to 1 become constants, multiples of 16 are marked)."""
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        value = args[name]
        if fn.params[i].is_constexpr:
            signature[name], constexprs[name] = "constexpr", value
            continue
        kind, attr = native_specialize_impl(BaseBackend, value, False, True, True)
        if kind == "constexpr":
            signature[name], constexprs[name] = "constexpr", attr
        else:
            signature[name] = kind
            attrs[(i,)] = BaseBackend.parse_attr(attr) if isinstance(attr, str) else []
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32),
                          options=options)


def _run_on(tool: str, cubin: bytes, *options: str) -> str:
    """The output of one of the wheel's CUDA binary tools (nvdisasm, cuobjdump) on ``cubin``."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(BIN / tool), *options, f.name], capture_output=True, text=True, check=True).stdout


def sass_loop_mix(cubin: bytes) -> Tuple[collections.Counter, int]:
    """Instruction counts (one thread) of the innermost loop holding tensor-core instructions, and its length."""
    sass = _run_on("nvdisasm", cubin, "-c").splitlines()
    labels, instructions = {}, []
    for i, line in enumerate(sass):
        m = re.match(r"^\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = i
        m = re.match(r"^\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m:
            instructions.append((i, re.sub(r"^@!?U?P\w+\s+", "", m.group(1))))
    loops = []
    for i, ins in instructions:
        m = re.match(r"BRA\s+`?\(?(\.L_x_\d+)", ins)
        if m and labels.get(m.group(1), i) < i:
            body = [op for j, op in instructions if labels[m.group(1)] <= j <= i]
            if any(re.match(CLASSES[0][1], op) for op in body):
                loops.append(body)
    if not loops:
        raise RuntimeError("no loop with tensor-core instructions in the SASS")
    body = min(loops, key=len)
    return collections.Counter(op.split()[0] for op in body), len(body)


def resources(kernel) -> Dict[str, int]:
    """Registers per thread, spilled bytes per thread, shared memory (static and dynamic) bytes per program."""
    text = _run_on("cuobjdump", kernel.asm["cubin"], "-res-usage")
    usage = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)}
    return {"regs": usage.get("REG", 0), "spill": usage.get("STACK", 0) + usage.get("LOCAL", 0),
            "shared": usage.get("SHARED", 0) + kernel.metadata.shared}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--d-k", dest="d_k", type=int, default=64)
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--mask", default="keys", choices=["none", "keys", "rows"],
                        help="none; keys: a padding mask (B, 1, T); rows: causal and padding (B, T, T)")
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100/H200)")
    parser.add_argument("--jit", type=Path, help="compile the kernels of this file instead of the package's jit.py")
    parser.add_argument("--blocks", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="change triton_udps.DEFAULT_BLOCKS, e.g. dkv_n=64 dkv_warps=4 (fields: "
                             + ", ".join(triton_udps.Blocks._fields) + ")")
    args = parser.parse_args()

    if args.jit:
        spec = importlib.util.spec_from_file_location("other_jit", args.jit)
        jit_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(jit_module)
    else:
        from wenet_udps.kernels.triton_udps import jit as jit_module
    if not isinstance(jit_module.udps_fwd, JITFunction):
        parser.error("the kernels were loaded for Triton's interpreter: unset TRITON_INTERPRET (this compiles them)")
    launches = capture_launches(jit_module)
    dtype, t = getattr(torch, args.dtype), args.T
    q, k, v = (torch.randn(2, 4, t, args.d_k, dtype=dtype, requires_grad=True) for _ in range(3))
    lengths = torch.tensor([t, t * 3 // 4])
    mask = {"none": None, "keys": (torch.arange(t) < lengths[:, None]).unsqueeze(1),
            "rows": torch.tril(torch.ones(t, t, dtype=torch.bool)) & (torch.arange(t) < lengths[:, None, None])}
    k_norm = torch.linalg.vector_norm(k, dim=-1, dtype=torch.float32)
    blocks = triton_udps.DEFAULT_BLOCKS._replace(**{f: int(v) for f, v in (b.split("=") for b in args.blocks)})
    triton_udps.udps_attention_triton(q, 40.0 * k, k_norm, v, mask[args.mask], blocks=blocks).sum().backward()

    print(f"{args.dtype}, d_k {args.d_k}, T {t}, mask {args.mask}, sm_{args.arch}, triton {triton.__version__}"
          + (f", kernels of {args.jit}" if args.jit else "") + f", {blocks}\n")
    print("| launch | blocks x warps | regs | spill bytes | shared KiB | loop instr. (1 thread) | per score: all | "
          + " | ".join(name for name, _ in CLASSES) + " | issue clk | mufu clk | fp32 clk | tensor clk |")
    print("|" + "---|" * (13 + len(CLASSES)))
    for fn, launch_args, options in launches:
        if "FAST_RCP" in launch_args:  # what a launch on CUDA tensors passes (these are CPU tensors)
            launch_args["FAST_RCP"] = True
        kernel = compile_launch(fn, launch_args, options, args.arch)
        ops, length = sass_loop_mix(kernel.asm["cubin"])
        res = resources(kernel)
        threads = 32 * options["num_warps"]
        by_class = collections.Counter()
        for op, n in ops.items():
            by_class[next(name for name, pattern in CLASSES if re.match(pattern, op))] += n
        # An HGMMA is one warpgroup's (128 threads) M x N x K product, an HMMA one warp's.
        flop = sum(n * 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3)) * threads
                   / (128 if op.startswith("HGMMA") else 32)
                   for op, n in ops.items() for m in [re.search(r"(\d+)x(\d+)x(\d+)", op)] if m)
        # The scores one pass of the loop body covers, from its tensor work (each score takes DOTS products of head
        # dim length): the compiler may unroll the loop over tiles, so one pass can hold two tiles' products.
        scores = flop / (DOTS[fn.__name__] * 2 * launch_args["BLOCK_D"])
        per = threads / scores  # thread-instructions per score, per instruction of the loop
        print(f"| {fn.__name__} | {launch_args['BLOCK_M']}x{launch_args['BLOCK_N']} x {options['num_warps']} | "
              f"{res['regs']} | {res['spill']} | {res['shared'] / 1024:.0f} | "
              f"{length} | {length * per:.1f} | " + " | ".join(f"{by_class[name] * per:.1f}" for name, _ in CLASSES)
              + f" | {length * per / ISSUE_RATE:.3f} | {by_class['mufu'] * per / MUFU_RATE:.3f} | "
              f"{by_class['fp32'] * per / FP32_RATE:.3f} | {flop / scores / TC_FLOP_RATE:.3f} |")


if __name__ == "__main__":
    main()
