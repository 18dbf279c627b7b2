"""wenet_udps.results.entropy: attention entropy per site over seeds, each group paired with scaled-dot seed by seed."""

from wenet_udps.results import entropy


def _runs(values):
    """{exp: {site: heads}} from {(group, seed): (enc value, dec value)}, two heads each averaging to the value."""
    return {f"x_{g}_seed{s}": {"enc.0": [e - 0.1, e + 0.1], "dec.0.src": [d, d]} for (g, s), (e, d) in values.items()}


def test_groups_are_paired_with_scaled_dot_seed_by_seed():
    runs = _runs({("scaled_dot", 1): (2.0, 1.0), ("scaled_dot", 2): (3.0, 1.5), ("scaled_dot", 3): (4.0, 1.0),
                  ("udps", 1): (1.5, 1.2), ("udps", 2): (2.5, 1.3), ("udps", 3): (3.5, 1.0)})
    lines = entropy.seeds_table(runs).splitlines()
    assert lines[2] == "| site | x_scaled_dot (3 seeds) | x_udps (3 seeds) | x_udps - x_scaled_dot |"
    enc = lines[4].split(" | ")
    assert enc[0] == "| enc.0" and enc[1] == "3.000 ± 1.000" and enc[2] == "2.500 ± 1.000"
    # Every seed 0.5 lower: no spread, so the interval is the point.
    assert enc[3] == "-0.500 [-0.500, -0.500]; lower in 3 of 3 seeds, sign test p = 0.25 |"
    dec = lines[5].split(" | ")
    # +0.2, -0.2, 0: mean 0, t-interval +-4.303 * 0.2 / sqrt(3); the tie is left out of the sign test.
    assert dec[3] == "+0.000 [-0.497, +0.497]; lower in 1 of 3 seeds (1 tied), sign test p = 1 |"


def test_without_a_group_of_two_seeds_there_is_no_table_and_the_tsv_lists_every_head():
    runs = _runs({("scaled_dot", 1): (2.0, 1.0), ("udps", 1): (1.0, 1.0)})
    assert entropy.seeds_table(runs) == ""
    lines = entropy.tsv(runs).splitlines()
    assert lines[0] == "exp\tsite\thead\tnats" and len(lines) == 1 + 2 * 2 * 2
    assert lines[1] == "x_scaled_dot_seed1\tenc.0\t0\t1.900000"
