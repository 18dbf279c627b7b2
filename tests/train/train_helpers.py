"""Tiny experiments on FSDD for the training, decoding and export tests (d=32, one block, a few utterances)."""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import torch
import yaml

from wenet_udps.config import finalize_config
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.model_builder import build_model

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"]


def write_data_list(fsdd_dir: Path, path: Path, n: int, offset: int = 0) -> List[Dict[str, str]]:
    """``n`` isolated-digit utterances (every digit, several speakers) as a raw data.list; text = digit word."""
    files = sorted(Path(fsdd_dir).glob("*.wav"))[offset::131][:n]
    items = []
    with open(path, "w", encoding="utf-8") as f:
        for wav in files:
            item = {"key": wav.stem, "wav": str(wav), "txt": WORDS[int(wav.stem.split("_")[0])]}
            f.write(json.dumps(item) + "\n")
            items.append(item)
    return items


def write_units(path: Path, space: bool = False) -> None:
    """WeNet char units: blank, unk, the letters of the digit words (and with ``space`` the word boundary '▁'),
    sos/eos."""
    letters = sorted({c for w in WORDS for c in w}) + (["▁"] if space else [])
    tokens = ["<blank>", "<unk>"] + letters + ["<sos/eos>"]
    path.write_text("".join(f"{t} {i}\n" for i, t in enumerate(tokens)), encoding="utf-8")


def tiny_config(units: Path, *, att_udps: bool = True, encoder: str = "transformer", max_epoch: int = 2,
                dropout: float = 0.0, batch_size: int = 4, chunks: Dict = None, att_family: str = None) -> Dict:
    """A tiny conf; ``att_family`` (a family, e.g. cosine) given: it chooses the sites' family and ``att_udps``
    is null."""
    enc = {"output_size": 32, "attention_heads": 2, "linear_units": 64, "num_blocks": 1, "dropout_rate": dropout,
           "positional_dropout_rate": dropout, "attention_dropout_rate": 0.0, "input_layer": "conv2d",
           **(chunks or {})}
    if encoder == "conformer":
        enc.update({"pos_enc_layer_type": "rel_pos", "selfattention_layer_type": "rel_selfattn",
                    "cnn_module_kernel": 3, "activation_type": "swish"})
    return {
        "att_udps": None if att_family else att_udps,
        **({"att_family": att_family} if att_family else {}),
        "encoder": encoder, "encoder_conf": enc,
        "decoder": "transformer",
        "decoder_conf": {"attention_heads": 2, "linear_units": 64, "num_blocks": 1, "dropout_rate": dropout,
                         "positional_dropout_rate": dropout, "self_attention_dropout_rate": 0.0,
                         "src_attention_dropout_rate": 0.0},
        "tokenizer": "char", "tokenizer_conf": {"symbol_table_path": str(units), "split_with_space": False},
        "ctc": "ctc", "ctc_conf": {"ctc_blank_id": 0},
        "model": "asr_model", "model_conf": {"ctc_weight": 0.3, "lsm_weight": 0.1},
        "dataset_conf": {"filter_conf": {"min_length": 0, "max_length": 100000, "token_max_length": 200,
                                         "token_min_length": 1, "max_output_input_ratio": 10},
                         "resample_conf": {"resample_rate": 8000},
                         "fbank_conf": {"num_mel_bins": 20, "frame_shift": 10, "frame_length": 25,
                                        "dither": 0.0},
                         "shuffle": True, "shuffle_conf": {"shuffle_size": 100},
                         "sort": True, "sort_conf": {"sort_size": 50},
                         "batch_conf": {"batch_type": "static", "batch_size": batch_size}},
        "grad_clip": 5.0, "accum_grad": 1, "max_epoch": max_epoch, "log_interval": 1,
        "optim": "adam", "optim_conf": {"lr": 0.002},
        "scheduler": "warmuplr", "scheduler_conf": {"warmup_steps": 10},
    }


def make_experiment(tmp_path: Path, fsdd_dir: Path, *, n_train: int = 8, n_cv: int = 4, **config_kwargs) -> Dict:
    """data.list files, units and conf.yaml under ``tmp_path``; returns their paths and the config dict."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    units = tmp_path / "units.txt"
    write_units(units)
    train = tmp_path / "train.list"
    cv = tmp_path / "cv.list"
    write_data_list(fsdd_dir, train, n_train)
    write_data_list(fsdd_dir, cv, n_cv, offset=60)
    config = tiny_config(units, **config_kwargs)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(config), encoding="utf-8")
    return {"conf": conf, "train": train, "cv": cv, "units": units, "config": config}


def train_cmd(exp: Dict, model_dir: Path, *extra: str) -> List[str]:
    return [sys.executable, "-m", "wenet_udps.bin.train", "--config", str(exp["conf"]), "--train_data",
            str(exp["train"]), "--cv_data", str(exp["cv"]), "--model_dir", str(model_dir), "--seed", "7",
            *extra]


def run_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_train(exp: Dict, model_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(train_cmd(exp, model_dir, *extra), cwd=ROOT, env=run_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def make_model_dir(tmp_path, space: bool = False, **kwargs):
    """train.yaml + a (randomly initialised) checkpoint, as training would leave them (``space``: the units have
    the word boundary '▁')."""
    units = tmp_path / "units.txt"
    write_units(units, space)
    config = finalize_config(tiny_config(units, **kwargs))
    save_yaml(config, str(tmp_path / "train.yaml"))
    torch.manual_seed(1)
    torch.save(build_model(config).state_dict(), tmp_path / "avg.pt")
    return tmp_path / "train.yaml", tmp_path / "avg.pt"
