"""wenet_udps.results.seeds: the per-seed and per-voice counts beside the pooled paired test."""
import pytest

from wenet_udps.model_info import label_parts
from wenet_udps.results.seeds import families_table, group_by_seed, paired_groups, sign_counts
from wenet_udps.scoring.significance import t_interval


def test_group_by_seed_keeps_only_seeded_names():
    assert group_by_seed(["a_udps_seed1", "a_udps_seed2", "a_scaled_dot_seed1", "other"]) == {
        "a_udps": {1: "a_udps_seed1", 2: "a_udps_seed2"}, "a_scaled_dot": {1: "a_scaled_dot_seed1"}}


def test_sign_counts_count_each_seed_and_each_speaker_seed_pair_once():
    """Seed 1: the system is better for speaker A only and worse pooled; seed 2: better for both."""
    utt2spk = {"a1": "A", "a2": "A", "b1": "B"}
    baseline = [{"a1": (2, 4), "a2": (2, 4), "b1": (0, 4)}, {"a1": (2, 4), "a2": (2, 4), "b1": (3, 4)}]
    system = [{"a1": (1, 4), "a2": (1, 4), "b1": (3, 4)}, {"a1": (1, 4), "a2": (2, 4), "b1": (2, 4)}]
    # per seed: +8.33 (33.33 -> 41.67 %) and -16.67 (58.33 -> 41.67 %)
    per_seed = f"per-seed mean {t_interval([25 / 3, -50 / 3], digits=2)} (t-interval over seeds); "
    assert per_seed.startswith("per-seed mean -4.17 [")
    assert sign_counts(baseline, system) == per_seed + "lower in 1 of 2 seeds, sign test p = 1"
    assert sign_counts(baseline, system, utt2spk) == (per_seed + "lower in 1 of 2 seeds, sign test p = 1; lower in "
                                                      "3 of 4 speaker-seed pairs, sign test p = 0.625")


@pytest.mark.parametrize("utt2spk", [None, {}, {"a1": "A", "b1": "A"}])
def test_sign_counts_without_two_speakers_count_seeds_only(utt2spk):
    baseline, system = [{"a1": (1, 2), "b1": (1, 2)}], [{"a1": (1, 2), "b1": (1, 2)}]
    assert sign_counts(baseline, system, utt2spk) == "lower in 0 of 1 seeds (1 tied), sign test p = 1"


def test_paired_groups_test_every_family_against_scaled_dot_and_udps_against_cosine():
    from wenet_udps.results.seeds import paired_groups
    groups = {name: {1: f"{name}_seed1"} for name in ("a_scaled_dot", "a_udps", "a_cosine", "a_udps_enc_self",
                                                      "b_udps", "b_cosine")}
    assert paired_groups(groups, label_parts) == [("a_scaled_dot", "a_cosine"), ("a_scaled_dot", "a_udps"),
                                     ("a_scaled_dot", "a_udps_enc_self"), ("a_cosine", "a_udps"),
                                     ("b_cosine", "b_udps")]   # UDPS - cosine also without a scaled-dot model


def test_paired_groups_never_pair_the_models_of_two_confs():
    """Issue 81 attack F1: exp/an4 holds train_conformer_* (conf/an4/train_conformer.yaml) and train_conformer_short_*
    (the default conf) runs; ``train_conformer_short_cosine`` starts with ``train_conformer_`` but its rest,
    ``short_cosine``, is no run label: it is tested against its own conf's scaled-dot model only."""
    groups = {name: {1: f"{name}_seed1"} for name in ("train_conformer_scaled_dot", "train_conformer_short_scaled_dot",
                                                      "train_conformer_short_cosine", "train_conformer_short_udps")}
    assert paired_groups(groups, label_parts) == [
        ("train_conformer_short_scaled_dot", "train_conformer_short_cosine"),
        ("train_conformer_short_scaled_dot", "train_conformer_short_udps"),
        ("train_conformer_short_cosine", "train_conformer_short_udps")]


def test_site_set_families_get_their_columns_and_udps_against_cosine_at_the_same_sites():
    """Issue 81 attack F9: run.sh --families "scaled_dot udps:enc_self cosine:enc_self" names its models x_scaled_dot,
    x_udps_enc_self, x_cosine_enc_self: a column group each, and UDPS - cosine at enc_self (not against another site
    set's cosine model)."""
    labels = ("scaled_dot", "udps_enc_self", "cosine_enc_self", "cosine_dec_self")
    groups = {f"x_{f}": {s: f"x_{f}_seed{s}" for s in (1, 2)} for f in labels}
    assert paired_groups(groups, label_parts) == [
        ("x_scaled_dot", "x_cosine_dec_self"), ("x_scaled_dot", "x_cosine_enc_self"),
        ("x_scaled_dot", "x_udps_enc_self"), ("x_cosine_enc_self", "x_udps_enc_self")]
    rates = {f"x_{f}_seed{s}": {("test", "attention"): base + s} for f, base in
             zip(labels, (10.0, 7.0, 8.0, 9.0)) for s in (1, 2)}
    table = families_table(groups, rates, ["test"], ["attention"], ["scaled_dot", "udps", "cosine"], "WER",
                           label_parts)
    header, row = [line for line in table.splitlines() if line.startswith("| ")][:2]
    assert header == ("| set | mode | scaled_dot WER | udps_enc_self WER | cosine_dec_self WER | cosine_enc_self WER "
                      "| cosine_dec_self - scaled_dot | cosine_enc_self - scaled_dot | udps_enc_self - scaled_dot "
                      "| udps_enc_self - cosine_enc_self |")
    assert row.endswith("| -1.00 | -2.00 | -3.00 | -1.00 |")
