"""RESULTS.md's "Made with" lines of the GPU preflight: run.sh --gpus writes each experiment's verdict to
``<exp>/gpu_check.json`` (wenet_udps.bin.gpu_check)."""
import json
from typing import Any, List, Sequence


def gpu_check_lines(experiments: Sequence[Any]) -> List[str]:
    """The GPU preflight's verdict (run.sh --gpus writes <exp>/gpu_check.json) of each experiment that has one."""
    lines = []
    for exp in experiments:
        path = exp.path / "gpu_check.json"
        if path.is_file():
            try:
                report = json.loads(path.read_text(encoding="utf-8"))
                verdict = (f"{'passed' if report['ok'] else 'FAILED'} on {report['device']} ({report['date']}, "
                           f"torch {report['torch']}, triton {report['triton']}, CUDA {report['cuda']})")
            except (ValueError, KeyError) as e:
                verdict = f"unreadable ({type(e).__name__}: {e})"
            lines.append(f"- GPU preflight of {exp.name}: {verdict}, {path}")
    return lines
