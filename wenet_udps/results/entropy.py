"""Attention entropy over training seeds: is one attention sharper or flatter than scaled-dot, site by site?

:mod:`wenet_udps.bin.plot_attention` measures, per experiment, attention site and head, the entropy of the weight rows
in nats, averaged over the query rows of a test list. Here a site's value is its mean over heads. Experiments named
``<base>_seed<N>`` (``run.sh --seeds``) are grouped by base. Each group is compared with the scaled-dot group
(``<...>_scaled_dot``) seed by seed: the difference group - scaled-dot per seed, its mean with a 95 % t-interval over
the seeds, and the sign test over the seeds (< 0: the group's attention is sharper than scaled-dot's).
"""
from typing import Dict, Mapping, Sequence

import numpy as np

from wenet_udps.results.seeds import BASELINE_SUFFIX, group_by_seed
from wenet_udps.scoring.significance import mean_std, sign_count, t_interval

Entropy = Mapping[str, Mapping[str, Sequence[float]]]  # experiment -> site -> entropy per head (nats)


def tsv(entropy: Entropy) -> str:
    """One line per experiment, site and head: ``exp site head nats`` (tab-separated, with a header line)."""
    lines = ["exp\tsite\thead\tnats"]
    for exp, sites in entropy.items():
        for site, heads in sites.items():
            lines += [f"{exp}\t{site}\t{h}\t{value:.6f}" for h, value in enumerate(heads)]
    return "\n".join(lines) + "\n"


def site_means(entropy: Entropy) -> Dict[str, Dict[str, float]]:
    """experiment -> site -> mean entropy over heads."""
    return {exp: {site: float(np.mean(heads)) for site, heads in sites.items()} for exp, sites in entropy.items()}


def seeds_table(entropy: Entropy) -> str:
    """Markdown, one row per site: each seed group's mean ± std over seeds of the head-mean entropy, then each group's
    paired difference from the scaled-dot group (95 % t-interval, sign test). Empty without a group of 2+ seeds."""
    groups = {base: members for base, members in group_by_seed(list(entropy)).items() if len(members) > 1}
    if not groups:
        return ""
    means = site_means(entropy)
    names = sorted(groups)
    sites = [s for s in next(iter(entropy.values())) if all(s in means[e] for g in names for e in groups[g].values())]
    baseline = next((g for g in names if g.endswith(BASELINE_SUFFIX)), None)
    others = [g for g in names if g != baseline] if baseline else []
    header = ["site"] + [f"{g} ({len(groups[g])} seeds)" for g in names] + [f"{g} - {baseline}" for g in others]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for site in sites:
        cells = [site]
        for g in names:
            mean, std = mean_std([means[e][site] for _, e in sorted(groups[g].items())])
            cells.append(f"{mean:.3f} ± {std:.3f}")
        for g in others:
            common = sorted(set(groups[g]) & set(groups[baseline]))
            diffs = [means[groups[g][s]][site] - means[groups[baseline][s]][site] for s in common]
            cells.append(f"{t_interval(diffs)}; {sign_count(diffs, 'seeds')}" if diffs else "no common seed")
        lines.append("| " + " | ".join(cells) + " |")
    return ("Mean attention-row entropy (nats) per site, averaged over heads and the query rows of every utterance; "
            "mean ± std over seeds. A difference is per seed, then its mean with a 95 % t-interval over the seeds "
            "(< 0: sharper than scaled-dot).\n\n" + "\n".join(lines) + "\n")

