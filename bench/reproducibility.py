"""Which settings change the bits of a result? One fresh process per setting (docs/reproducibility.md).

    python -m bench.reproducibility            # the training table of docs/reproducibility.md
    python -m bench.reproducibility --decode --exp_dir exp/tiny_en/x --checkpoint avg_5.pt \
        --test_data data/tiny_en/test/data.list --lm data/tiny_en/lm/lm.bin    # its decoding table

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
import json
import os
import random
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


def decode_child(args) -> None:
    """Print {mode: [digest of each run]} (JSON) of ``args.runs`` decodes of the list at ``args.batch_size``."""
    from torch.utils.data import DataLoader
    from wenet_udps.decode.data_list import eval_dataset, load_experiment
    from wenet_udps.lm.search import LmSearch, LmSearchConfig
    from wenet_udps.text import init_tokenizer
    from wenet_udps.transformer.modes import DECODING_METHODS, METHODS_WITHOUT_LM

    config, model = load_experiment(args.exp_dir, args.checkpoint)
    tokenizer = init_tokenizer(config)
    modes = list(DECODING_METHODS if args.lm else METHODS_WITHOUT_LM)
    kwargs = {"ctc_weight": 0.5}  # run.sh's
    if args.lm:
        kwargs["lm_search"] = LmSearch(args.lm, tokenizer, model.ctc.blank_id, LmSearchConfig(
            lm_weight=args.lm_weight, word_score=args.word_score, beam_size=args.beam_size))
    digests, junk, rng = {m: [] for m in modes}, [], random.Random(args.batch_size)
    for _ in range(args.runs):
        junk += [bytearray(rng.randint(1, 1 << 16)) for _ in range(rng.randint(1, 50))]  # another heap each run
        sums = {m: hashlib.sha256() for m in modes}
        for batch in DataLoader(eval_dataset(config, tokenizer, args.test_data, args.batch_size), batch_size=None):
            out = model.decode(modes, batch["feats"], batch["feats_lengths"], args.beam_size, **kwargs)
            for row in sorted(range(len(batch["keys"])), key=batch["order"].__getitem__):
                for m in modes:
                    r = out[m][row]
                    sums[m].update(json.dumps([batch["keys"][row], tokenizer.detokenize(r.tokens)[0], r.tokens,
                                               r.score.hex(), r.nbest, [x.hex() for x in r.nbest_scores]]).encode())
        for m in modes:
            digests[m].append(sums[m].hexdigest()[:12])
    print(json.dumps(digests))


def decode_table(args) -> None:
    """The decoding table: one column per (process, batch size, threads), one row per mode."""
    settings = [(p, b, t) for t in args.threads for b in args.batch_sizes for p in range(1, args.processes + 1)]
    columns = {}
    for proc, batch_size, threads in settings:
        cmd = [sys.executable, __file__, "--decode_child", "--batch_size", str(batch_size)] + [
            f"--{k}={v}" for k in ("exp_dir", "checkpoint", "test_data", "lm", "lm_weight", "word_score",
                                   "beam_size", "runs") if (v := getattr(args, k)) is not None]
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads))
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"reproducibility.py: error: the decode of process {proc}, batch size {batch_size}, {threads} "
                     f"threads failed: {done.stderr.strip().splitlines()[-1:]}")
        columns[(proc, batch_size, threads)] = json.loads(done.stdout.strip().splitlines()[-1])
    names = [f"process {p}, batch {b}, {t} thread{'s' * (t > 1)}" for p, b, t in settings]
    print(f"{args.runs} runs per cell: one digest where they agree\n")
    print("| mode | " + " | ".join(names) + " | identical |\n|---|" + "---|" * (len(names) + 1))
    all_same = True
    for mode in next(iter(columns.values())):
        cells = [sorted(set(columns[s][mode])) for s in settings]
        same = len({d for cell in cells for d in cell}) == 1
        all_same &= same
        print(f"| {mode} | " + " | ".join(" / ".join(c) for c in cells) + f" | {'yes' if same else 'NO'} |")
    print(f"\nevery mode identical in every run and setting: {'yes' if all_same else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--simdlen", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--decode", action="store_true", help="the decoding table (see above)")
    parser.add_argument("--decode_child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--exp_dir", help="--decode: the experiment dir (train.yaml)")
    parser.add_argument("--checkpoint", default="final.pt", help="--decode: its checkpoint")
    parser.add_argument("--test_data", help="--decode: a raw data.list")
    parser.add_argument("--lm", default=None, help="--decode: a word LM (ARPA or KenLM binary): the *_lm modes too")
    parser.add_argument("--lm_weight", type=float, default=0.3)
    parser.add_argument("--word_score", type=float, default=0.0)
    parser.add_argument("--beam_size", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5, help="--decode: decodes per process")
    parser.add_argument("--processes", type=int, default=2, help="--decode: fresh processes per setting")
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[int(os.environ.get("OMP_NUM_THREADS", 2))],
                        help="--decode: OMP_NUM_THREADS of the processes (default this one's, else 2)")
    parser.add_argument("--batch_size", type=int, default=16, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.decode_child:
        decode_child(args)
        return
    if args.decode:
        if not (args.exp_dir and args.test_data):
            parser.error("--decode needs --exp_dir and --test_data")
        decode_table(args)
        return
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
