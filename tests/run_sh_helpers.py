"""run.sh as the tests call it, and the one run of every stage on a tiny synthesised corpus that several tests read
(the session fixture ``tiny_run`` in tests/conftest.py): its stages 0-7 take a couple of minutes, so the test of
those stages reads its log and outputs, and the site-ablation test goes on from its data and its two trained models
instead of preparing and training them again."""
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ("max_epoch=1 encoder_conf.num_blocks=1 decoder_conf.num_blocks=1 encoder_conf.linear_units=64 "
              "decoder_conf.linear_units=64 encoder_conf.output_size=32 dataset_conf.batch_conf.batch_size=4")
TINY_CORPUS = ["--prepare_opts", "--num_train 12 --num_dev 4 --num_test 4"]
# What stage 4 leaves in an exp dir (stages 5-7 add avg_*, test/, export/, sherpa/), less run.sh's lock files.
TRAINED = ("train.yaml", "train.log", ".train.stamp", "final.*", "epoch_*", "tensorboard")


def run_sh(*args, env=None, timeout=900, own=None):
    # own: --data and --dir under this tmp dir, not the checkout's data/ and exp/ (issue 47 case 25)
    own = ["--data", str(own / "data"), "--dir", str(own / "exp" / "x")] if own else []
    return subprocess.run(["bash", str(ROOT / "run.sh"), *args, *own], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_error_line(proc):
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines, "no message"
    return lines[-1]


def run_tiny_corpus(root: Path) -> SimpleNamespace:
    """``bash run.sh --stage 0 --stop_stage 7`` on a 12/4/4-utterance tiny_zh corpus, both attentions, a one-block
    model trained one epoch, under ``root``: ``proc`` (its CompletedProcess), ``data``, ``exp`` (the --dir prefix:
    exp dirs ``<exp>_scaled_dot``, ``<exp>_udps``) and ``results`` (the folder of RESULTS.md and plots/)."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is required (bash tools/install.sh installs it)")
    data, exp = root / "data", root / "exp" / "tiny"
    proc = run_sh("--stage", "0", "--stop_stage", "7", "--data", str(data), "--dir", str(exp), *TINY_CORPUS,
                  "--train_override", TINY_MODEL, "--average_num", "1", "--beam_size", "2",
                  "--num_workers", "1", "--decode_batch_size", "4")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return SimpleNamespace(proc=proc, data=data, exp=exp, results=root / "exp")


def copy_trained(src: Path, dst: Path) -> None:
    """Stage 4's outputs of exp dir ``src`` into ``dst``: a later run.sh with the same data, conf and overrides
    finds the model trained (its .train.stamp matches) and goes on from there."""
    dst.mkdir(parents=True)
    for pattern in TRAINED:
        for path in src.glob(pattern):
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, dst / path.name)
