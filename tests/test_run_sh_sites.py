"""run.sh --udps_sites: one model per attention-site set, one table with paired tests; --keep_checkpoints."""
import re

import pytest
import yaml

from tests.run_sh_helpers import TINY_CORPUS, TINY_MODEL, copy_trained, run_sh
from tests.run_sh_helpers import one_error_line as _one_error_line

SITES = "none enc_self dec_self+dec_cross all"
LABELS = {"none": "scaled_dot", "enc_self": "udps_enc_self", "dec_self+dec_cross": "udps_dec_self_dec_cross",
          "all": "udps"}
# What each site set builds at (encoder self, decoder self, decoder source) attention.
TYPES = {"none": ("rel_selfattn", "selfattn", "crossattn"), "enc_self": ("rel_udps_selfattn", "selfattn", "crossattn"),
         "dec_self+dec_cross": ("rel_selfattn", "udps_selfattn", "udps_crossattn"),
         "all": ("rel_udps_selfattn", "udps_selfattn", "udps_crossattn")}


@pytest.mark.parametrize("args,message", [
    (["--udps_sites", "enc_self all"], "--udps_sites needs none: the scaled-dot model"),
    (["--udps_sites", "none all", "--families", "udps"], "--udps_sites and --families both pick the models"),
    (["--udps_sites", "none enc_slef"], "'udps:enc_slef': unknown site 'enc_slef'; valid: a family of"),
    (["--udps_sites", "none all true"], "--udps_sites takes none, all or sites joined by +"),
    (["--udps_sites", "none dec_self+dec_cross dec_cross+dec_self"],
     "att_family udps:dec_self+dec_cross and udps:dec_cross+dec_self: conf/tiny_zh/train_conformer.yaml builds"),
    (["--keep_checkpoints", "some"], "--keep_checkpoints takes one of: all averaged; got 'some'"),
    (["--corpus", "fsdd", "--loso", "true", "--udps_sites", "none all"],
     "--loso true compares attention families (--families"),
])
def test_site_options_are_checked_before_any_work(tmp_path, args, message):
    proc = run_sh("--stage", "4", "--stop_stage", "4", "--dir", str(tmp_path / "exp"), *args)
    assert message in _one_error_line(proc), proc.stderr
    assert not (tmp_path / "exp").exists() and not list(tmp_path.glob("exp_*"))


def test_help_lists_every_stage():
    proc = run_sh("--help")
    assert proc.returncode == 0
    for stage in range(-1, 8):
        assert re.search(rf"^ +{stage}  \S", proc.stdout, re.M), f"stage {stage} not described"
    assert "--udps_sites" in proc.stdout and "--keep_checkpoints" in proc.stdout


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_run")
def test_site_ablation_end_to_end_on_a_tiny_corpus(tmp_path, tiny_run):
    """On the session's tiny corpus (tests/run_sh_helpers.py): its none and all models are the scaled-dot and UDPS
    models tiny_run trained with the same data and settings, copied in, so stage 4 trains the two site sets."""
    data, prefix = tiny_run.data, tmp_path / "exp" / "abl"
    for label in ("scaled_dot", "udps"):
        copy_trained(tiny_run.exp.with_name(f"{tiny_run.exp.name}_{label}"), prefix.with_name(f"abl_{label}"))
    common = ["--data", str(data), "--dir", str(prefix), "--udps_sites", SITES, "--train_override", TINY_MODEL,
              "--average_num", "1", "--beam_size", "2", "--num_workers", "1", "--decode_batch_size", "4",
              "--decode_modes", "ctc_greedy_search attention", "--keep_checkpoints", "averaged"]
    proc = run_sh("--stage", "0", "--stop_stage", "5", *TINY_CORPUS, *common)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The copied none and all models are taken as trained; the two site sets train.
    for label in ("scaled_dot", "udps"):
        assert f"stage 4: {prefix}_{label}/final.pt exists, skipping" in proc.stderr
    assert proc.stderr.count("stage 4: train ") == 2
    for sites, label in LABELS.items():
        exp = tmp_path / "exp" / f"abl_{label}"
        config = yaml.safe_load((exp / "train.yaml").read_text())
        got = (config["encoder_conf"]["selfattention_layer_type"], config["decoder_conf"]["selfattention_layer_type"],
               config["decoder_conf"]["src_attention_layer_type"])
        assert got == TYPES[sites], sites
        # --keep_checkpoints averaged: the epoch checkpoints are gone, the averaged one and final.pt stay.
        assert (exp / "avg_1.pt").is_file() and (exp / "final.pt").is_file() and not list(exp.glob("epoch_*.pt"))
        assert list(exp.glob("epoch_*.yaml"))
    assert "--keep_checkpoints averaged: deleting" in proc.stderr
    # Stage 5 again: its stamps still match without the epoch checkpoints; stage 7 writes the one table.
    again = run_sh("--stage", "5", "--stop_stage", "5", *common)
    assert again.returncode == 0 and "is up to date, skipping averaging" in again.stderr, again.stderr[-2000:]
    table = run_sh("--stage", "7", "--stop_stage", "7", *common)
    assert table.returncode == 0, table.stderr[-4000:]
    results = (tmp_path / "exp" / "RESULTS.md").read_text()
    ablation = results.split("## Attention-site ablation")[1]
    rows = re.findall(r"^\| (\S+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", ablation.split("\n## ")[0], re.M)
    assert [r[0] for r in rows] == ["--udps_sites"] + list(LABELS)
    assert "(the paper author's fork)" in rows[2][1]
    # Every UDPS row carries its paired test against the none row, in both modes.
    assert all(re.search(r"^\d+\.\d+ \([+-]\d+\.\d+ \[[+-]\d+\.\d+, [+-]\d+\.\d+\], p = ", cell.strip())
               for r in rows[2:] for cell in r[2:]), rows
