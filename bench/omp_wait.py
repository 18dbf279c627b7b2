"""How OpenMP's wait policy affects small torch ops, idle and beside a busy torch process.

Times a 160x128 linear and an SDPA call (B=8, H=4, T=150, d_k=64) in fresh processes under libgomp's default spin,
OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT=1000 (what training processes set), first on an idle machine, then
while another process runs small torch matmuls (as a DataLoader worker computing features would).

    python bench/omp_wait.py
"""
import argparse
import os
import subprocess
import sys
import time

SETTINGS = {"libgomp default": {}, "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
            "GOMP_SPINCOUNT=1000": {"GOMP_SPINCOUNT": "1000"}}
MEASURE = r"""
import time, torch
import torch.nn.functional as F
def median_ms(fn, n):
    fn(); ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return sorted(ts)[n // 2] * 1e3
x, lin, q = torch.randn(160, 128), torch.nn.Linear(128, 128), torch.randn(8, 4, 150, 64)
with torch.no_grad():
    print(f"{median_ms(lambda: lin(x), 200):.3f} {median_ms(lambda: F.scaled_dot_product_attention(q, q, q), 50):.2f}")
"""
BUSY = "import time, torch\nx = torch.randn(400, 400)\nwhile True:\n    x @ x\n    time.sleep(0.0005)\n"


def run(extra_env: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(extra_env)
    out = subprocess.run([sys.executable, "-c", MEASURE], env=env, check=True, capture_output=True, text=True)
    linear_ms, sdpa_ms = out.stdout.split()
    return f"{linear_ms} | {sdpa_ms}"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print("| machine | setting | linear 160x128 ms | SDPA T=150 ms |\n|---|---|---|---|")
    for name, env in SETTINGS.items():
        print(f"| idle | {name} | {run(env)} |", flush=True)
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(1.0)
        for name, env in SETTINGS.items():
            print(f"| beside a busy torch process | {name} | {run(env)} |", flush=True)
    finally:
        busy.kill()


if __name__ == "__main__":
    main()
