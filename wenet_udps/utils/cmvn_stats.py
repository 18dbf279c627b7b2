"""WeNet's JSON CMVN stats file (written by ``tools/compute_cmvn_stats.py``): per-dimension sums over the training
set, ``{"mean_stat": [sum x_d], "var_stat": [sum x_d^2], "frame_num": N}``, read and checked. No torch here, so that
run.sh checks the stats before stage 4 in a tenth of a second; :mod:`wenet_udps.transformer.cmvn` makes the layer."""
import json
import math
from pathlib import Path
from typing import List, Tuple, Union

from wenet_udps.utils.cli import UserError, regular_file

# Variance floor, as WeNet: a constant feature dimension gets a huge but finite inverse std.
VAR_FLOOR = 1.0e-20


class CmvnError(UserError):
    """Unusable CMVN statistics, or statistics of another feature dimension than the model's."""


def read_cmvn_stats(path: Union[str, Path]) -> Tuple[List[float], List[float]]:
    """Read WeNet's JSON cmvn stats and return ``(mean, istd)``, one number per feature dimension.

    ``mean = mean_stat / frame_num``, ``var = var_stat / frame_num - mean^2`` floored at 1e-20,
    ``istd = 1 / sqrt(var)``. Malformed content (also NaN/Inf numbers, or a variance below zero beyond
    rounding, which would zero or blow up a feature) raises CmvnError naming the file.
    """
    path = Path(regular_file(path, "cmvn stats"))
    data = path.read_bytes()
    if data.startswith(b"\0B") or data.lstrip().startswith(b"["):
        raise CmvnError(f"{path} holds Kaldi-format CMVN stats, and the configs read WeNet's JSON: convert them "
                         f"with 'python tools/cmvn_kaldi2json.py {path} {path}.json' and point cmvn_conf.cmvn_file "
                         f"there, or recompute them with tools/compute_cmvn_stats.py")
    try:
        stats = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CmvnError(f"{path}: not valid JSON cmvn stats ({err})") from None
    if not isinstance(stats, dict):
        raise CmvnError(f"{path}: cmvn stats must be a JSON object with mean_stat, var_stat and frame_num")
    for key in ("mean_stat", "var_stat", "frame_num"):
        if key not in stats:
            raise CmvnError(f"{path}: cmvn stats lack the key {key!r} (need mean_stat, var_stat, frame_num)")
    mean_stat, var_stat, frame_num = stats["mean_stat"], stats["var_stat"], stats["frame_num"]
    if not isinstance(mean_stat, list) or not isinstance(var_stat, list) or len(mean_stat) != len(var_stat) \
            or not mean_stat:
        raise CmvnError(f"{path}: mean_stat and var_stat must be non-empty lists of the same length")
    if not isinstance(frame_num, (int, float)) or isinstance(frame_num, bool) or frame_num <= 0:
        raise CmvnError(f"{path}: frame_num must be a positive number, got {frame_num!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in mean_stat + var_stat):
        raise CmvnError(f"{path}: mean_stat and var_stat must hold numbers only")
    if not all(math.isfinite(v) for v in mean_stat + var_stat + [frame_num]):
        raise CmvnError(f"{path}: mean_stat, var_stat and frame_num must be finite numbers")
    mean, istd = [], []
    for dim, (m_sum, v_sum) in enumerate(zip(mean_stat, var_stat)):
        m = float(m_sum) / frame_num
        var = float(v_sum) / frame_num - m * m
        if var < -1e-6 * max(1.0, m * m):  # a constant feature may come out a rounding error below zero
            raise CmvnError(f"{path}: dimension {dim} has a negative variance ({var:g}): the stats are corrupt")
        var = max(var, VAR_FLOOR)
        mean.append(m)
        istd.append(1.0 / math.sqrt(var))
    return mean, istd
