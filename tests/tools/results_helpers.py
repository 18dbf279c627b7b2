"""Synthetic experiment folders for the tools/collect_results.py tests."""
from pathlib import Path

import yaml

from wenet_udps.scoring.bound import binding_lines


def write_wer(path: Path, value: float, n: int = 400) -> None:
    """A verbose ``wer`` of ``value`` % bound (scoring.bound) to the ``text`` beside it (written when missing) and to
    the references: ``<tmp>/data/<set>/text`` where a test wrote one, else a file of its own outside the exp dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = round(value * n / 100)
    assert errors * 100 == value * n, "a rate that n utterances can give"
    ref = path.parents[4] / "data" / path.parents[1].name / "text"
    if not ref.is_file():
        ref = path.parents[4] / "refs" / path.parents[1].name / "text"
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text("a A\n", encoding="utf-8")
    if not (path.parent / "text").is_file():
        (path.parent / "text").write_text("a A\n", encoding="utf-8")
    path.write_text("".join(line + "\n" for line in binding_lines(str(ref), str(path.parent / "text")))
                    + f"\nutt: a\nWER: 0.00 % N=1 C=1 S=0 D=0 I=0\nlab: A\nrec: A\n\n{'=' * 75}\n\n"
                    f"Overall -> {value:.2f} % N={n} C={n - errors} S={errors} D=0 I=0\n"
                    f"English -> {value:.2f} % N={n} C={n - errors} S={errors} D=0 I=0\n\n{'=' * 75}\n",
                    encoding="utf-8")


def make_exp(root: Path, name: str, config: dict, wers: dict, udps: bool, checkpoint: str = None) -> None:
    from torch.utils.tensorboard import SummaryWriter

    exp = root / name
    exp.mkdir(parents=True)
    (exp / "train.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    for (test_set, mode), value in wers.items():
        write_wer(exp / test_set / mode / "wer", value)
    if checkpoint:
        (exp / "test" / "decode.info").write_text(f"checkpoint: {checkpoint}\nbeam_size: 10\n", encoding="utf-8")
    writer = SummaryWriter(str(exp / "tensorboard" / name))
    for step in range(5):
        writer.add_scalar("train/loss", 10.0 - step, step)
        if udps:
            writer.add_scalar("udps/encoder.encoders.0.self_attn.alpha", 10.0 + step, step)
            writer.add_scalar("udps/encoder.encoders.0.self_attn.alpha/h0", 9.0 + step, step)
    for epoch in range(2):
        writer.add_scalar("cv/loss", 8.0 - epoch, epoch)
    writer.close()


def build_exp_dir(tmp_path: Path) -> Path:
    exp = tmp_path / "exp"
    base = {"encoder": "conformer", "decoder": "bitransformer",
            "encoder_conf": {"selfattention_layer_type": "rel_selfattn"}}
    make_exp(exp, "conformer_sdp", {**base, "att_udps": False},
             {("test", "attention_rescoring"): 5.5, ("test", "ctc_greedy_search"): 6.25,
              ("dev", "attention_rescoring"): 8.0}, udps=False,
             checkpoint="exp/conformer_sdp/avg_5.pt")
    make_exp(exp, "conformer_udps", {**base, "att_udps": True},
             {("test", "attention_rescoring"): 4.75, ("test", "ctc_greedy_search"): 5.0}, udps=True)
    make_exp(exp, "transformer_enc_udps",
             {"encoder": "transformer", "encoder_conf": {"selfattention_layer_type": "udps_selfattn"}},
             {("test", "attention"): 7.5}, udps=True)
    return exp
