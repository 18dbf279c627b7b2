"""run.sh stages 5 and 6 skip only what is whole and made from the checkpoint asked for (issue 80 round 7, G:
the hostile tester's findings). tools/run_eval.sh's functions run in bash as run.sh calls them, with stand-ins on
PATH for the averaging, recognize and the exports (python3 -m wenet_udps.bin.{average_model,recognize,export});
compute-wer and the checks are this checkout's own.

- A decode interrupted or failed left a result dir that a rerun skipped as done: stage 5 decodes into
  ``<set>/.decode.partial``, moved in when whole, removes the old stamp first, and skips only results whose
  ``decode.info`` records the averaged checkpoint's SHA-256 and the options asked (``decoded_as``).
- Averaged checkpoints were stamped without their SHA-256: an ``avg_N.pt`` replaced (averaged again by hand from
  other epochs) was "up to date" for stages 5 and 6; an old stamp without it is redone, saying so.
- Stage 6 skipped a damaged or deleted sherpa/ export because its stamp existed."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
# the stand-in python3: the three programs of stages 5 and 6, and the real interpreter for everything else
if [[ $1 == -m && $2 == wenet_udps.bin.average_model ]]; then
  shift 2; while [[ $# -gt 0 ]]; do [[ $1 == --dst_model ]] && dst=$2; [[ $1 == --src_path ]] && src=$2; shift; done
  cat "${src}"/epoch_*.pt > "${dst}"; echo averaged >> "${FAKE_LOG}"; exit 0
fi
if [[ $1 == -m && ( $2 == wenet_udps.bin.recognize || $2 == wenet_udps.bin.export ) ]]; then
  tool=$2; shift 2; exec "${REAL_PYTHON}" "${FAKE_DIR}/${tool##*.}.py" "$@"
fi
exec "${REAL_PYTHON}" "$@"
"""

FAKE_RECOGNIZE = """import argparse, os, sys
from wenet_udps.decode.data_list import write_results
from wenet_udps.scoring.references import reference_record
from wenet_udps.scoring.tokens import read_text
from wenet_udps.utils.source_info import model_source
p = argparse.ArgumentParser()
for name in ("--checkpoint", "--config", "--test_data", "--result_dir", "--beam_size"):
    p.add_argument(name)
p.add_argument("--modes", nargs="+")
args, _ = p.parse_known_args()
refs = read_text(os.path.join(os.path.dirname(args.test_data), "text"))
source = {**model_source(args.checkpoint, args.config), "modes": " ".join(args.modes), "beam_size": args.beam_size,
          **reference_record(args.test_data, refs, 0)}
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"recognize {' '.join(args.modes)} into {args.result_dir}\\n")
for i, mode in enumerate(args.modes):
    if os.environ.get("FAKE_FAIL") and i == 1:
        sys.exit("recognize: killed")
    write_results({mode: refs}, args.result_dir, source)
"""

FAKE_EXPORT = """import argparse, os
from wenet_udps.utils.source_info import file_sha256, write_source
p = argparse.ArgumentParser()
p.add_argument("--format", default="wenet"); p.add_argument("--output_dir")
args, _ = p.parse_known_args()
os.makedirs(args.output_dir, exist_ok=True)
names = ["model.onnx", "tokens.txt"] if args.format == "sherpa-onnx" else ["final.zip"]
for name in names:
    with open(os.path.join(args.output_dir, name), "w") as f:
        f.write(name)
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"export {args.format}\\n")
if args.format == "sherpa-onnx":
    write_source(os.path.join(args.output_dir, "export.info"), {"files": " ".join(
        f"{n}={file_sha256(os.path.join(args.output_dir, n))}" for n in names)})
"""


def stage(tmp_path: Path, script: str, **env) -> subprocess.CompletedProcess:
    """``script`` in bash after run.sh's eval functions, in ``tmp_path`` holding exp/m (two epochs) and data/test."""
    fake = tmp_path / "fake"
    if not fake.is_dir():
        fake.mkdir()
        (fake / "python3").write_text(FAKE_PYTHON)
        (fake / "python3").chmod(0o755)
        (fake / "recognize.py").write_text(FAKE_RECOGNIZE)
        (fake / "export.py").write_text(FAKE_EXPORT)
        exp, data = tmp_path / "exp" / "m", tmp_path / "data" / "test"
        exp.mkdir(parents=True)
        data.mkdir(parents=True)
        for epoch in (0, 1):
            (exp / f"epoch_{epoch}.pt").write_text(f"weights {epoch}\n")
            (exp / f"epoch_{epoch}.yaml").write_text(f"epoch: {epoch}\n")
        (exp / "final.pt").write_text("weights 1\n")
        (exp / "train.yaml").write_text("encoder: transformer\n")
        (data / "text").write_text("u0 ONE TWO\nu1 THREE\n")
        (data / "data.list").write_text("{}\n")
        (tmp_path / "tools").symlink_to(ROOT / "tools")   # run.sh runs its tools from its own folder
    setup = ("set -euo pipefail; . tools/log.sh; . tools/run_lib.sh; . tools/run_setup.sh; . tools/run_eval.sh; "
             f"cd {tmp_path}; data=data; data_type=raw; average_num=2; average_mode=last; keep_checkpoints=all; "
             "decode_modes='ctc_greedy_search attention'; beam_size=${BEAM:-10}; ctc_weight=0.5; reverse_weight=0; "
             "decoding_chunk_size=-1; num_decoding_left_chunks=-1; joint_ctc_weight=0.3; gpus=; decode_batch_size=1; "
             "wer_char=0; text_norm_opts=(--case keep --punctuation keep); test_sets=test; lm=false; "
             "hotwords=false; ")
    run_env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", REAL_PYTHON=sys.executable, FAKE_DIR=str(fake),
                   FAKE_LOG=str(tmp_path / "calls"), PYTHONPATH=str(ROOT), **env)
    (tmp_path / "calls").write_text("")
    return subprocess.run(["bash", "-c", setup + script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=run_env)


DECODE = "average_run exp/m; decode_set exp/m test"


def calls(tmp_path: Path) -> list:
    return (tmp_path / "calls").read_text().splitlines()


def test_an_interrupted_decode_is_never_skipped_as_done(tmp_path):
    """Decoded at beam 10; a decode at beam 20 killed after its first mode; beam 10 asked again: the folders hold
    a mix (on main the first mode was beam 20's and the stamp beam 10's: skipped as done)."""
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    test = tmp_path / "exp" / "m" / "test"
    proc = stage(tmp_path, DECODE, BEAM="20", FAKE_FAIL="1")
    assert proc.returncode != 0
    # the results of beam 10 are whole where they were; the partial decode lies beside them, never in their place
    for mode in ("ctc_greedy_search", "attention"):
        assert "beam_size: 10\n" in (test / mode / "decode.info").read_text(), mode
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    assert "skipping decoding" not in proc.stderr and "recognize ctc_greedy_search attention" in calls(tmp_path)[-1]
    assert not (test / ".decode.partial").exists()
    proc = stage(tmp_path, DECODE)
    assert "skipping decoding" in proc.stderr and not [c for c in calls(tmp_path) if c.startswith("recognize")]


def test_a_result_is_skipped_only_when_its_record_is_the_decode_asked_for(tmp_path):
    """The stamp says what was asked; each mode's decode.info must say it too (``decoded_as``) and name the
    averaged checkpoint's SHA-256: a result folder replaced by another decode's is decoded again."""
    assert stage(tmp_path, DECODE).returncode == 0
    test = tmp_path / "exp" / "m" / "test"
    info = test / "attention" / "decode.info"
    assert "decoded_as: " in info.read_text()
    info.write_text(info.read_text().replace("decoded_as: ", "decoded_as: 0"))
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    assert "skipping decoding" not in proc.stderr, proc.stderr


def test_a_replaced_average_is_averaged_again_and_decoded_again(tmp_path):
    """avg_2.pt averaged again by hand from other epochs: its stamp (made from the epoch YAMLs) still matched, so
    stages 5 and 6 skipped as if it were the model they had made."""
    assert stage(tmp_path, DECODE + "; stage_export() { :; }").returncode == 0
    avg = tmp_path / "exp" / "m" / "avg_2.pt"
    assert "avg_sha256=" in (tmp_path / "exp" / "m" / "avg_2.pt.stamp").read_text()
    avg.write_text("weights 0\n")
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    assert "skipping averaging" not in proc.stderr and calls(tmp_path)[0] == "averaged"


def test_an_old_stamp_without_the_average_sha_is_redone(tmp_path):
    assert stage(tmp_path, DECODE).returncode == 0
    for stamp in (tmp_path / "exp" / "m" / "avg_2.pt.stamp", tmp_path / "exp" / "m" / "test" / ".decode.stamp"):
        stamp.write_text("".join(line for line in stamp.read_text().splitlines(keepends=True)
                                 if not line.startswith("avg_sha256=")))
    proc = stage(tmp_path, DECODE)
    assert proc.returncode == 0, proc.stderr
    stamp = tmp_path / "exp" / "m" / "avg_2.pt.stamp"
    assert (f"{stamp.relative_to(tmp_path)} records no SHA-256 of the averaged checkpoint (written before stamps "
            f"carried it): redoing") in proc.stderr, proc.stderr
    assert calls(tmp_path)[0] == "averaged" and "skipping decoding" not in proc.stderr


def test_stage6_exports_again_when_the_average_or_the_export_changed(tmp_path):
    """Stage 6's stamp carries the average's SHA-256, and its sherpa/ folder must verify as sherpa_decode checks
    it (export_problem) before it is skipped."""
    export = DECODE + "; runs=(m); run_exp() { echo exp/m; }; parity_set() { echo test; }; stage_export"
    assert stage(tmp_path, export).returncode == 0
    proc = stage(tmp_path, "runs=(m); run_exp() { echo exp/m; }; stage_export")
    assert proc.returncode == 0 and "up to date, skipping" in proc.stderr and calls(tmp_path) == []
    sherpa = tmp_path / "exp" / "m" / "sherpa"
    for damage in ("deleted", "edited"):
        if damage == "deleted":
            (sherpa / "model.onnx").unlink()
        else:
            (sherpa / "tokens.txt").write_text("other units\n")
        proc = stage(tmp_path, "runs=(m); run_exp() { echo exp/m; }; stage_export")
        assert proc.returncode == 0, proc.stderr
        assert "up to date, skipping" not in proc.stderr and "export sherpa-onnx" in calls(tmp_path), damage
        assert f"{sherpa.relative_to(tmp_path)} is not one whole export" in proc.stderr, proc.stderr
    (tmp_path / "exp" / "m" / "avg_2.pt").write_text("averaged again by hand\n")
    proc = stage(tmp_path, "runs=(m); run_exp() { echo exp/m; }; stage_export")
    assert proc.returncode == 0 and "up to date, skipping" not in proc.stderr, proc.stderr
