"""Where a training step's time goes (bench/train_step.py --profile): one step of each attention under
torch.profiler, as rows of train_step's table.

On CUDA the rows give the step's wall time, the GPU's busy time (the summed durations of its kernels and copies) and
their count, and the kernels whose summed time differs most between the two attentions. A step whose busy time is
well under its wall time waits on the host (Python, launches), so there fewer kernels count more than faster ones.
On the CPU (a dry run) the same rows come from the CPU ops' self times.
"""
from typing import Callable, Dict, List, Tuple

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

Busy = Dict[str, Tuple[float, int]]  # kernel (CUDA) or op (CPU) name -> (summed ms, calls)


def busy_by_name(prof: profile, cuda: bool) -> Busy:
    """Summed time and calls per kernel (``cuda``) or per CPU op's self time."""
    out: Busy = {}
    if not cuda:
        return {e.key: (e.self_cpu_time_total / 1e3, e.count) for e in prof.key_averages()}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            ms, calls = out.get(e.name, (0.0, 0))
            out[e.name] = (ms + e.time_range.elapsed_us() / 1e3, calls + 1)
    return out


def _row(conf: str, what: str, label: str, a: float, b: float, spec: str) -> str:
    ratio = f"{b / a:.3f}" if a else "-"
    return f"| {conf} | profile: {what} | {label} | {a:{spec}} | {b:{spec}} | {ratio} |"


def profile_rows(conf: str, label: str, steps: Dict[str, Callable[[], float]], cuda: bool, top: int = 6
                 ) -> List[str]:
    """Rows for one batch: ``steps`` maps the two attentions (scaled-dot first) to a call that runs one training step
    and returns its seconds; each runs once under the profiler."""
    wall, busy = {}, {}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities):
        pass  # the profiler's one-time start-up (CUPTI on CUDA), which would otherwise fall on the first step only
    for mode, run in steps.items():
        with profile(activities=activities) as prof:
            wall[mode] = 1e3 * run()
        busy[mode] = busy_by_name(prof, cuda)
    (base, other) = list(steps)
    unit = "GPU kernels" if cuda else "CPU ops"
    rows = [_row(conf, "step wall ms", label, wall[base], wall[other], ".1f"),
            _row(conf, f"busy ms, {unit}", label, *(sum(ms for ms, _ in busy[m].values()) for m in (base, other)),
                 ".1f"),
            _row(conf, f"{unit} run", label, *(sum(n for _, n in busy[m].values()) for m in (base, other)), ".0f")]
    ms = {m: {name: t for name, (t, _) in busy[m].items()} for m in (base, other)}
    names = set(ms[base]) | set(ms[other])
    for name in sorted(names, key=lambda n: -abs(ms[other].get(n, 0.0) - ms[base].get(n, 0.0)))[:top]:
        short = name if len(name) <= 60 else name[:57] + "..."
        rows.append(_row(conf, f"{short.replace('|', '/')} ms", label, ms[base].get(name, 0.0),
                         ms[other].get(name, 0.0), ".2f"))
    return rows

