"""Which settings change the bits of a result? One fresh process per setting (docs/reproducibility.md).

    python -m bench.reproducibility            # the table of docs/reproducibility.md

Per setting, two fingerprints (first 12 hex digits of a SHA-1):
- ``tiles``: the compiled (or eager) UDPS tile kernel, forward + backward on fixed random inputs (B=4, H=4, T=203);
- ``model``: the tiny_zh conformer's weights after one Adam step on fixed random features (B=8, 820 frames, so the
  encoder's UDPS self-attention takes the compiled ``cpu_tiled`` path; dropout off), per variant.
Settings: the default; another run of the default; one intra-op thread; ATen's CPU capability forced to AVX2
(``ATEN_CPU_CAPABILITY``, with a fresh inductor cache, see the docs); the compiled code's vector width forced to
256 bits (AVX2) or 0 (scalar) with ``torch._inductor.config.cpp.simdlen``; the UDPS tiles run eagerly
(``WENET_UDPS_COMPILE=0``); and the portable mode of the docs.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = [  # (name, environment, simdlen)
    ("default", {}, None),
    ("default, rerun", {}, None),
    ("1 thread", {"OMP_NUM_THREADS": "1"}, None),
    ("ATen AVX2", {"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CACHE_DIR": "{tmp}/aten_avx2"}, None),
    ("compiled code AVX2 (simdlen 256)", {}, 256),
    ("compiled code scalar (simdlen 0)", {}, 0),
    ("UDPS tiles eager", {"WENET_UDPS_COMPILE": "0"}, None),
    ("portable mode", {"ATEN_CPU_CAPABILITY": "avx2", "WENET_UDPS_COMPILE": "0", "MKL_CBWR": "AVX2",
                       "OMP_NUM_THREADS": "2"}, None),
]


def _sha(tensors) -> str:
    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def child(simdlen) -> None:
    import torch
    if simdlen is not None:
        import torch._inductor.config as inductor_config
        inductor_config.cpp.simdlen = simdlen
    from wenet_udps.kernels.cpu_tiled import udps_attention_tiled
    from wenet_udps.model_builder import build_model
    from wenet_udps.config import read_conf
    from wenet_udps.utils.env import compiling

    torch.manual_seed(0)
    b, h, t, d = 4, 4, 203, 32
    q, k, v = (torch.randn(b, h, t, d, requires_grad=True) for _ in range(3))
    kn = k.detach().norm(dim=-1).requires_grad_()
    mask = torch.ones(b, 1, t, dtype=torch.bool)
    mask[1, :, 150:] = False
    out = udps_attention_tiled(q, k, kn, v, mask, compiled=compiling())
    out.square().sum().backward()
    row = [_sha([out, q.grad, k.grad, kn.grad, v.grad])]
    for udps in (False, True):
        config = read_conf(str(ROOT / "conf/tiny_zh/train_conformer.yaml"))
        config.update(att_udps=udps, cmvn=None, input_dim=40, output_dim=60)
        config.pop("cmvn_conf")
        for part in ("encoder_conf", "decoder_conf"):
            config[part].update({key: 0.0 for key in config[part] if "dropout" in key})
        torch.manual_seed(0)
        model = build_model(config)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        x, xl = torch.randn(8, 820, 40, generator=g), torch.tensor([820, 800, 790, 780, 770, 760, 750, 740])
        y = torch.randint(1, 59, (8, 12), generator=g)
        model(x, xl, y, torch.full((8,), 12))["loss"].backward()
        opt.step()
        row.append(_sha(model.state_dict().values()))
    print(" ".join(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--simdlen", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.simdlen)
        return
    print("| setting | UDPS tiles | scaled-dot model | UDPS model |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra, simdlen in SETTINGS:
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            env.update({key: value.format(tmp=tmp) for key, value in extra.items()})
            cmd = [sys.executable, "-m", "bench.reproducibility", "--child",
                   *([] if simdlen is None else ["--simdlen", str(simdlen)])]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
            cells = proc.stdout.split() if proc.returncode == 0 else ["failed"] * 3
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
