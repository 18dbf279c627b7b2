"""The report of bench/gpu_report.sh: what each part left in its work dir, as report.md and report.json.

    python -m bench.gpu_report env > WORK/env.json       # the machine and versions (once, at the start)
    python -m bench.gpu_report write --work WORK --out OUT [--dry_run true]

``write`` reads WORK/parts.tsv (part, exit status, seconds, box) and each part's output: a: the pytest JUnit XML;
b: bench/gpu_an4.sh's logs, WERs and GPU samples; c, d, f: the Markdown tables of attention_gpu.py, train_step.py
and attention_gpu.py --tune; e: data_pipeline.py's JSON. It never fails on a part that is missing or cut short:
that part reads "not run" or "timed out" and its numbers are absent. No torch import: it runs after every part.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Optional

import soundfile as sf

from wenet_udps.results.peers import read_peer_results
from wenet_udps.utils.atomic import write_text
from wenet_udps.scoring.bound import ScoreError, check_scored, read_score

ROOT = Path(__file__).resolve().parents[1]

PARTS = {"a": "native kernel tests (pytest -m gpu)", "b": "AN4 on the GPU, both attentions (run.sh stages -1..5)",
         "c": "attention vs flash SDPA (bench/attention_gpu.py)",
         "d": "training step UDPS and cosine / scaled-dot (bench/train_step.py)",
         "e": "data pipeline per worker (bench/data_pipeline.py)",
         "f": "kernel block configurations, checked then timed (bench/attention_gpu.py --tune)"}
MODES = ["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring"]
# The CPU's numbers of the same model, features and epochs (conf/an4/train_conformer_short.yaml, batch 8, fp32):
# docs/an4.md, "The default one-hour run from a fresh clone (2026-11-27)", test WER % per mode of MODES.
CPU_AN4 = {"scaled_dot": [9.83, 9.44, 22.64, 6.60], "udps": [8.93, 8.54, 19.02, 6.60]}
EPOCH = re.compile(r"Epoch (\d+) \(of 0\.\.(\d+)\) done in ([\d.]+)s")
SELF_CHECK = re.compile(r"UDPS Triton kernel self-check: (.*)$", re.M)   # bin/train's last line


def env() -> Dict[str, Any]:
    """Date, commit, Python, torch, triton, CUDA, the GPU and its driver, CPU cores."""
    import torch
    info: Dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                            "python": platform.python_version(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "cpu_cores": os.cpu_count()}
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    info["commit"] = git.stdout.strip() if git.returncode == 0 else "unknown (no .git: a copy of the tree)"
    info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    info["driver"] = None
    if info["gpu"]:
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True)
            info["driver"] = smi.stdout.strip() if smi.returncode == 0 else None
        except OSError:   # no nvidia-smi: the versions above still go into the report
            pass
    return info


def md_rows(text: str) -> List[Dict[str, str]]:
    """The rows of the first Markdown table in ``text`` as {header: cell}."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    if len(lines) < 2:
        return []
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def number(text: str) -> Optional[float]:
    m = re.search(r"-?\d+(\.\d+)?", text or "")
    return float(m.group()) if m else None


def part_a(work: Path) -> Dict[str, Any]:
    xml = work / "a_pytest.xml"
    if not xml.is_file():
        return {}
    suite = ET.parse(xml).getroot()
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {**counts, "failed_tests": failed}


def bound_rate(wer: Path) -> Optional[float]:
    """The error rate of ``wer`` if it is the whole score of the ``text`` beside it (wenet_udps.scoring.bound), else
    None with a line on stderr saying why."""
    try:
        score = read_score(str(wer))
        check_scored(score, str(wer.parent / "text"))
    except ScoreError as e:
        print(f"gpu_report.py: {e}", file=sys.stderr)
        return None
    return score.rate


def part_b(work: Path) -> Dict[str, Any]:
    logs = work / "an4" / "logs"
    if not logs.is_dir():
        return {}
    result: Dict[str, Any] = {"stages_s": {}, "models": {}}
    stages = logs / "b_stages.tsv"
    if stages.is_file():
        result["stages_s"] = {s: float(t) for s, t in (line.split("\t") for line in stages.read_text().split("\n")
                                                     if line)}
    for label in ("scaled_dot", "udps"):   # bench/gpu_an4.sh's run.sh --families, one log per family
        log = logs / f"b_stage4_{label}.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        epochs = [float(m.group(3)) for m in EPOCH.finditer(text)]
        checks = SELF_CHECK.findall(text)
        wers = {}
        for mode in MODES:
            wer = work / "an4" / "exp" / f"an4_{label}" / "test" / mode / "wer"
            wers[mode] = bound_rate(wer) if wer.is_file() else None
        result["models"][label] = {"epochs": len(epochs), "first_epoch_s": epochs[0] if epochs else None,
                                   "median_epoch_s": statistics.median(epochs[1:] or epochs) if epochs else None,
                                   "test_wer": wers, "cpu_test_wer": dict(zip(MODES, CPU_AN4[label])),
                                   "kernel_self_check": checks[-1] if checks else None,
                                   "kernel_fallbacks": text.count("KernelFallbackWarning")}
    util = logs / "b_gpu_util.csv"
    samples = [[number(x) for x in line.split(",")[1:]] for line in util.read_text().splitlines()] \
        if util.is_file() else []
    samples = [s for s in samples if None not in s]
    if samples:
        result["gpu_util_pct_mean"] = statistics.mean(s[0] for s in samples)
        result["gpu_util_pct_median"] = statistics.median(s[0] for s in samples)
        result["gpu_memory_mib_max"] = max(s[1] for s in samples)
        result["gpu_util_samples"] = len(samples)
    scp = work / "an4" / "data" / "train" / "wav.scp"
    if scp.is_file():
        result["train_audio_s"] = sum(sf.info(line.split(maxsplit=1)[1]).duration
                                      for line in scp.read_text().splitlines() if line.strip())
    peers = [p for p in read_peer_results(str(ROOT / "recipes" / "an4" / "peer_results.tsv"))
             if p.set == "test" and p.lm == "none"]
    result["espnet_test_wer"] = peers[0].wer if peers else None
    return result


def part_table(work: Path, name: str, log: str) -> Dict[str, Any]:
    """The benchmark's table (``--out``), or, when it was cut short before writing it, the header and rows it
    printed as it went (logs/``log``)."""
    path, partial = work / name, work / "logs" / log
    if path.is_file():
        text = path.read_text()
    elif partial.is_file():
        text = "\n".join(line for line in partial.read_text(errors="replace").splitlines() if line.startswith("|"))
        text = f"(cut short: the rows measured)\n\n{text}" if text else ""
    else:
        text = ""
    return {"table": text, "rows": md_rows(text)} if text else {}


def part_e(work: Path) -> Dict[str, Any]:
    path = work / "e_data_pipeline.json"
    return {"rows": json.loads(path.read_text())} if path.is_file() else {}


def consumption(b: Dict[str, Any], d: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Audio seconds per second that training consumes: (b) one AN4 epoch's audio over its median epoch time,
    (d) each batch's audio over its step time (the median row; the batch label is '<utterances> x <seconds> s')."""
    out = []
    for label, model in (b.get("models") or {}).items():
        if b.get("train_audio_s") and model.get("median_epoch_s"):
            out.append({"what": f"(b) AN4 {label}, one epoch, two trainings side by side",
                        "audio_s_per_s": b["train_audio_s"] / model["median_epoch_s"]})
    for row in d.get("rows", []):
        m = re.match(r"(\d+) x (\d+) s", row.get("batch", ""))
        if m and "median" in row.get("what", ""):
            for mode in ("scaled-dot", "udps"):
                step = number(row.get(mode, ""))
                if step:
                    out.append({"what": f"(d) {row['conf']} {mode}, batch {row['batch']}",
                                "audio_s_per_s": int(m.group(1)) * int(m.group(2)) / step})
    return out


def status(rc: int) -> str:
    return "ok" if rc == 0 else "timed out" if rc in (124, 137) else f"failed (exit {rc})"


def fmt(x: Optional[float], spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(report: Dict[str, Any]) -> str:
    parts = report["parts"]
    e = {k: "-" for k in ("date", "torch", "triton", "cuda", "python", "cpu_cores", "commit")}
    e.update({k: v for k, v in report["env"].items() if v is not None})   # env.json missing: dashes, not a crash
    lines = [f"# GPU report, {e['date']}{' (DRY RUN on the CPU: toy sizes, no GPU)' if report['dry_run'] else ''}",
             "", f"GPU: {e.get('gpu', 'none')} (driver, memory: {e.get('driver', '-')}); torch {e['torch']}, "
             f"triton {e['triton']}, CUDA {e['cuda']}, Python {e['python']}, {e['cpu_cores']} CPU cores; commit "
             f"{e['commit']}. Made by `bash bench/gpu_report.sh` (docs/gpu_report.md).", "",
             "| part | what | status | seconds (box) |", "|---|---|---|---|"]
    for name, what in PARTS.items():
        p = parts.get(name)
        took = f"{p['seconds']:.0f} ({p['box']})" if p else "-"
        lines.append(f"| {name} | {what} | {p['status'] if p else 'not run'} | {took} |")
    a = report["a"]
    lines += ["", "## a. Native kernel tests", ""]
    lines.append(f"{a['passed']} passed, {a['failures'] + a['errors']} failed, {a['skipped']} skipped"
                 + (f": {', '.join(a['failed_tests'])}" if a["failed_tests"] else "") if a else "no result")
    b = report["b"]
    lines += ["", "## b. AN4 trained on the GPU (conf/an4/train_conformer_gpu.yaml), test WER %", "",
              "| model | where | " + " | ".join(MODES) + " | epochs | first epoch s | median epoch s |",
              "|---|---|" + "---|" * (len(MODES) + 3)]
    for label, m in (b.get("models") or {}).items():
        lines.append(f"| {label} | this run | " + " | ".join(fmt(m["test_wer"][k]) for k in MODES)
                     + f" | {m['epochs']} | {fmt(m['first_epoch_s'], '.1f')} | {fmt(m['median_epoch_s'], '.1f')} |")
        lines.append(f"| {label} | CPU, docs/an4.md (2026-11-27, short conf, batch 8, fp32) | "
                     + " | ".join(fmt(m["cpu_test_wer"][k]) for k in MODES) + " | 36 | | |")
    if b:
        lines += [f"| ESPnet transformer (published) | recipes/an4/peer_results.tsv | | | | "
                  f"{fmt(b.get('espnet_test_wer'), '.1f')} (joint CTC/attention) | | | |", "",
                  "Stage seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in b.get("stages_s", {}).items()) + ".",
                  f"GPU utilisation during stage 4: mean {fmt(b.get('gpu_util_pct_mean'), '.0f')} %, median "
                  f"{fmt(b.get('gpu_util_pct_median'), '.0f')} % ({b.get('gpu_util_samples', 0)} samples of "
                  f"nvidia-smi every 0.5 s), memory at most {fmt(b.get('gpu_memory_mib_max'), '.0f')} MiB."]
        lines += [f"UDPS kernel in training ({label}): {m['kernel_self_check'] or '-'}; "
                  f"{m['kernel_fallbacks']} KernelFallbackWarning(s)." for label, m in b["models"].items()]
    for key, title in (("c", "c. Attention against flash SDPA"), ("d", "d. Training step, UDPS / scaled-dot")):
        lines += ["", f"## {title}", "", report[key].get("table", "no result").strip()]
    lines += ["", "## e. Data pipeline per worker, and what training consumes", ""]
    rows = report["e"].get("rows", [])
    lines += ["| input | files | audio s | wall s | audio s per s per worker |", "|---|---|---|---|---|"]
    lines += [f"| {r['input']} | {r['files']} | {r['audio_s']:.1f} | {r['wall_s']:.2f} | "
              f"{r['audio_s_per_s_per_worker']:.0f} |" for r in rows]
    per_worker = rows[0]["audio_s_per_s_per_worker"] if rows else None
    lines += ["", "| training | audio s per s | workers needed at the AN4 rate |", "|---|---|---|"]
    lines += [f"| {c['what']} | {c['audio_s_per_s']:.0f} | "
              f"{fmt(c['audio_s_per_s'] / per_worker if per_worker else None, '.1f')} |" for c in report["consumes"]]
    if "f" in parts:  # only run when named
        lines += ["", "## f. The kernel's block configurations, checked then timed", "",
                  report["f"].get("table", "no result").strip()]
    return "\n".join(lines) + "\n"


def write(work: Path, out: Path, dry_run: bool) -> None:
    parts = {}
    tsv = work / "parts.tsv"
    for line in (tsv.read_text().splitlines() if tsv.is_file() else []):
        name, rc, seconds, box = line.split("\t")
        parts[name] = {"status": status(int(rc)), "exit": int(rc), "seconds": float(seconds), "box": int(box)}
    env_file = work / "env.json"
    report = {"env": json.loads(env_file.read_text()) if env_file.is_file() else {}, "dry_run": dry_run,
              "parts": parts, "a": part_a(work), "b": part_b(work), "c": part_table(work, "c_attention.md", "c.log"),
              "d": part_table(work, "d_train_step.md", "d.log"), "e": part_e(work),
              "f": part_table(work, "f_tune.md", "f.log")}
    report["consumes"] = consumption(report["b"], report["d"])
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
    write_text(out / "report.md", markdown(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="print the machine's JSON")
    w = sub.add_parser("write", help="write OUT/report.md and OUT/report.json")
    w.add_argument("--work", type=Path, required=True)
    w.add_argument("--out", type=Path, required=True)
    w.add_argument("--dry_run", choices=["true", "false"], default="false")
    args = parser.parse_args()
    if args.command == "env":
        print(json.dumps(env(), indent=2))
    else:
        write(args.work, args.out, args.dry_run == "true")


if __name__ == "__main__":
    main()
