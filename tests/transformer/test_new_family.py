"""Adding a similarity family is one file: a ``*_attention`` module in wenet_udps/transformer/ with its classes.

A copy of the package gets one new module (a dummy family, ``gainfam``: scaled-dot with a learnable per-head gain on
the queries, its marker parameter ``gain``) and nothing else; a fresh process importing the copy then has the family
at every site through ``att_family``, its options section, its run label and checkpoint label, run.sh's --families
check (model_info.families_error, which run.sh calls) and RESULTS.md's column group per family.
"""
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

from wenet_udps.model_info import label_parts
from wenet_udps.results.seeds import families_table

PACKAGE = Path(__file__).resolve().parents[2] / "wenet_udps"

FAMILY_MODULE = '''"""A dummy family: scaled-dot with a learnable gain per head on the queries."""
import torch

from wenet_udps.transformer.attention import Family, MultiHeadedAttention, MultiHeadedCrossAttention, \\
    RelPositionMultiHeadedAttention, register_attention, register_family

GAIN = register_family(Family("gainfam", "gain", conf_key="gainfam_conf", marker="gain")).name


class _Gain:
    family = GAIN

    def __init__(self, *, n_head: int, n_feat: int, dropout_rate: float = 0.0, gain_init: float = 1.0):
        super().__init__(n_head=n_head, n_feat=n_feat, dropout_rate=dropout_rate)
        self.gain = torch.nn.Parameter(torch.full((n_head,), gain_init))

    def attend(self, q, k, v, mask, pos_emb):
        return super().attend(q * self.gain.view(1, -1, 1, 1), k, v, mask, pos_emb)


@register_attention
class GainSelf(_Gain, MultiHeadedAttention):
    name, counterpart = "gainfam_selfattn", "selfattn"


@register_attention
class GainRel(_Gain, RelPositionMultiHeadedAttention):
    name, counterpart = "rel_gainfam_selfattn", "rel_selfattn"


@register_attention
class GainCross(_Gain, MultiHeadedCrossAttention):
    name, counterpart = "gainfam_crossattn", "crossattn"
'''

CHECK = '''
import json
from wenet_udps.model_builder import build_model
from wenet_udps.model_info import attention_label, checkpoint_site_types, families_error, model_site_types
from wenet_udps.transformer.attention import FAMILIES
cfg = {"input_dim": 8, "output_dim": 12, "encoder": "conformer", "att_family": "gainfam",
       "gainfam_conf": {"gain_init": 2.0},
       "encoder_conf": {"output_size": 16, "attention_heads": 2, "linear_units": 32, "num_blocks": 1,
                        "input_layer": "linear", "pos_enc_layer_type": "rel_pos",
                        "selfattention_layer_type": "rel_selfattn"},
       "decoder": "transformer", "decoder_conf": {"attention_heads": 2, "linear_units": 32, "num_blocks": 1}}
model = build_model(cfg)
types = model_site_types(model)
part = build_model(dict(cfg, att_family="gainfam:dec_cross"))
print(json.dumps({"families": list(FAMILIES), "types": types, "label": attention_label(types),
                  "part": attention_label(model_site_types(part)),
                  "checkpoint": attention_label(checkpoint_site_types(model.state_dict())),
                  "gain": float(model.decoder.decoders[0].src_attn.gain[0]),
                  "ok": families_error(["scaled_dot", "udps", "cosine", "gainfam"]),
                  "bad": families_error(["gainfa"])}))
'''


def test_a_new_family_is_one_module(tmp_path):
    copy = tmp_path / "wenet_udps"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    (copy / "transformer" / "gainfam_attention.py").write_text(FAMILY_MODULE, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["families"] == ["scaled_dot", "udps", "cosine", "gainfam"]
    assert got["types"] == {"enc_self": ["rel_gainfam_selfattn"], "dec_self": ["gainfam_selfattn"],
                            "dec_cross": ["gainfam_crossattn"]}
    assert got["label"] == got["checkpoint"] == "gainfam" and got["part"] == "gainfam_dec_cross"
    assert got["gain"] == 2.0          # its options section, gainfam_conf, reached its sites
    assert got["ok"] == "" and "unknown family 'gainfa'; valid: a family of scaled_dot, udps, cosine, gainfam" \
        in got["bad"]


def test_the_results_table_has_a_column_group_per_family_given():
    """RESULTS.md's family table takes the families from the registry (tools/collect_results.py passes FAMILIES):
    a new one gets its columns and its difference to scaled-dot."""
    groups = {f"x_{f}": {s: f"x_{f}_seed{s}" for s in (1, 2)} for f in ("scaled_dot", "udps", "cosine", "gainfam")}
    rates = {f"x_{f}_seed{s}": {("test", "attention"): base + s} for f, base in
             (("scaled_dot", 10.0), ("udps", 7.0), ("cosine", 8.0), ("gainfam", 9.5)) for s in (1, 2)}
    names = ["scaled_dot", "udps", "cosine", "gainfam"]
    table = families_table(groups, rates, ["test"], ["attention"], names, "WER",
                           functools.partial(label_parts, families=names))
    header, row = [line for line in table.splitlines() if line.startswith("| ")][:2]
    assert header == ("| set | mode | scaled_dot WER | udps WER | cosine WER | gainfam WER | cosine - scaled_dot "
                      "| gainfam - scaled_dot | udps - scaled_dot | udps - cosine |")
    assert row == ("| test | attention | 11.50 ± 0.71 (2) | 8.50 ± 0.71 (2) | 9.50 ± 0.71 (2) | 11.00 ± 0.71 (2) "
                   "| -2.00 | -0.50 | -3.00 | -1.00 |")
    assert families_table(groups, rates, ["test"], ["attention"], ["scaled_dot"], "WER",
                          functools.partial(label_parts, families=names)) == ""
