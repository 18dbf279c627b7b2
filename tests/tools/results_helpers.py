"""Synthetic experiment folders for the tools/collect_results.py tests."""
import os
import subprocess
import sys
from pathlib import Path

import yaml

from wenet_udps.scoring.bound import binding_lines
from wenet_udps.scoring.references import reference_record
from wenet_udps.scoring.tokens import read_text
from wenet_udps.utils.source_info import file_sha256

ROOT = Path(__file__).resolve().parents[2]


def write_wer(path: Path, value: float, n: int = 400) -> None:
    """A verbose ``wer`` of ``value`` % bound (scoring.bound) to the ``text`` beside it (written when missing) and to
    the references: ``<tmp>/data/<set>/text`` where a test wrote one, else a file of its own outside the exp dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = round(value * n / 100)
    assert errors * 100 == value * n, "a rate that n utterances can give"
    ref = references(path.parent)
    if not (path.parent / "text").is_file():
        (path.parent / "text").write_text("a A\n", encoding="utf-8")
    path.write_text("".join(line + "\n" for line in binding_lines(str(ref), str(path.parent / "text")))
                    + f"\nutt: a\nWER: 0.00 % N=1 C=1 S=0 D=0 I=0\nlab: A\nrec: A\n\n{'=' * 75}\n\n"
                    f"Overall -> {value:.2f} % N={n} C={n - errors} S={errors} D=0 I=0\n"
                    f"English -> {value:.2f} % N={n} C={n - errors} S={errors} D=0 I=0\n\n{'=' * 75}\n",
                    encoding="utf-8")


def references(mode_dir: Path) -> Path:
    """The references of ``EXP/<name>/<set>/<mode>``: ``<tmp>/data/<set>/text`` where a test wrote one, else
    ``<tmp>/refs/<set>/text`` (one utterance ``a A``, written when missing)."""
    ref = mode_dir.parents[3] / "data" / mode_dir.parent.name / "text"
    if not ref.is_file():
        ref = mode_dir.parents[3] / "refs" / mode_dir.parent.name / "text"
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file():
            ref.write_text("a A\n", encoding="utf-8")
    return ref


def decoded_record(mode_dir: Path) -> dict:
    """The references lines a decode of ``mode_dir``'s set records (scoring.references), for ``write_results``'s
    source: the list ``data.list`` beside its references."""
    ref = references(mode_dir)
    (ref.parent / "data.list").write_text("{}\n", encoding="utf-8")
    return reference_record(str(ref.parent / "data.list"), read_text(str(ref)), 0)


def score_beside(mode_dir: Path) -> None:
    """``mode_dir/wer``: compute-wer's score (stage 5's options) of the ``text`` there against its references."""
    (mode_dir / "wer").write_text(score(references(mode_dir), mode_dir / "text"), encoding="utf-8")


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


ENV = dict(os.environ, PYTHONPATH=str(ROOT))   # the tool imports this checkout's package
REFS = {f"u{i}": "ONE TWO THREE UH FOUR" for i in range(3)}


def score(ref: Path, hyp: Path, *opts: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-wer.py"), "--v=1", *opts, str(ref), str(hyp)],
                          capture_output=True, text=True, check=True, env=ENV)
    return proc.stdout


def decoded_exp(tmp_path: Path, modes=("attention", "attention_rescoring")) -> Path:
    """``EXP/m/test/<mode>`` as recognize and stage 5 leave them: text, decode.info (one per mode) and wer."""
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    (data / "text").write_text("".join(f"{k} {v}\n" for k, v in REFS.items()), encoding="utf-8")
    (data / "data.list").write_text("{}\n", encoding="utf-8")
    exp = tmp_path / "exp" / "m"
    exp.mkdir(parents=True)
    (exp / "train.yaml").write_text(yaml.safe_dump({"encoder": "transformer"}), encoding="utf-8")
    (exp / "avg_5.pt").write_bytes(b"weights")
    for mode, hyp in zip(modes, ("ONE TWO", "ONE TWO THREE UH")):
        d = exp / "test" / mode
        d.mkdir(parents=True)
        (d / "text").write_text("".join(f"{k} {hyp}\n" for k in REFS), encoding="utf-8")
        info = {"checkpoint": str(exp / "avg_5.pt"), "sha256": file_sha256(str(exp / "avg_5.pt")),
                "config": str(exp / "train.yaml"), "modes": " ".join(modes), "mode": mode,
                "text_sha256": file_sha256(str(d / "text")), **reference_record(str(data / "data.list"), REFS, 0)}
        (d / "decode.info").write_text("".join(f"{k}: {v}\n" for k, v in info.items()), encoding="utf-8")
        (d / "wer").write_text(score(data / "text", d / "text"), encoding="utf-8")
    return tmp_path / "exp"
