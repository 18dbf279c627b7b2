"""recipes/an4/issue81_seed.sh (issue 81's AN4 verdict, one seed per call) against a stand-in pin: a git checkout at
the recorded commit whose run.sh writes the layout the real one writes, and a python3 that stands in for norm_ratio.
What the script owes the verdict: it refuses a pin at another commit or with changes, trains and decodes through the
pin's run.sh only, decodes the joint modes at every λ of the grid on copies that leave λ 0.3's results as they are,
and keeps every decode's text, wer and decode.info under <family>_seed<N>/<set>/<mode>[_lambda<λ>]/."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "recipes" / "an4" / "issue81_seed.sh"

# A run.sh that records its arguments and writes, per family, what stage 5 writes: <dir>_<family>_seed<N>/<set>/
# <mode>/{text,wer,decode.info}, the LM modes beside them and lm_tune's grid; each text names the λ it was decoded at.
FAKE_RUN_SH = r'''#!/usr/bin/env bash
set -euo pipefail
echo "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} $*" >> "$(dirname "$0")/calls.log"
dir= families= seeds= modes= lambda=0.3 data=
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2 ;; --data) data=$2 ;; --families) families=$2 ;; --seeds) seeds=$2 ;; --decode_modes) modes=$2 ;;
    --joint_ctc_weight) lambda=$2 ;;
  esac
  shift 2
done
for set in dev test; do mkdir -p "${data}/${set}"; echo "u1 REF ${set}" > "${data}/${set}/text"; done
for f in ${families}; do
  exp=${dir}_${f}_seed${seeds}
  mkdir -p "${exp}"
  [[ -f ${exp}/avg_5.pt ]] || echo "model ${f}" > "${exp}/avg_5.pt"
  for set in dev test; do
    for m in ${modes} ctc_prefix_beam_search_lm attention_rescoring_lm joint_ctc_attention_lm; do
      [[ ${m} != joint_ctc_attention_lm || " ${modes} " == *" joint_ctc_attention "* ]] || continue
      mkdir -p "${exp}/${set}/${m}"
      echo "u1 ${f} ${m} ${lambda}" > "${exp}/${set}/${m}/text.new"
      mv "${exp}/${set}/${m}/text.new" "${exp}/${set}/${m}/text"
      echo "Overall ${lambda}" > "${exp}/${set}/${m}/wer.new"; mv "${exp}/${set}/${m}/wer.new" "${exp}/${set}/${m}/wer"
      echo "mode ${m}" > "${exp}/${set}/${m}/info.new"
      mv "${exp}/${set}/${m}/info.new" "${exp}/${set}/${m}/decode.info"
    done
  done
  mkdir -p "${exp}/lm_tune/dev_joint/0.3_1"
  echo "grid ${lambda}" > "${exp}/lm_tune/wer.new"; mv "${exp}/lm_tune/wer.new" "${exp}/lm_tune/dev_joint/0.3_1/wer"
  echo "5.0 0.3 1" > "${exp}/lm_tune/best.new"; mv "${exp}/lm_tune/best.new" "${exp}/lm_tune/dev_joint/best"
done
'''
# As `python -m` does, it looks for the module in the working directory before PYTHONPATH: the pin's package (which
# predates norm_ratio) must not be the one found.
FAKE_PYTHON = '''#!/usr/bin/env bash
if [[ -d wenet_udps && ! -f wenet_udps/bin/norm_ratio.py ]]; then
  echo "python3: No module named wenet_udps.bin.norm_ratio" >&2; exit 1
fi
out=; while [[ $# -gt 0 ]]; do [[ $1 != --out ]] || out=$2; shift; done
echo '{"sites": {}}' > "${out}"; echo "r table"
'''


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def pin(tmp_path):
    pin = tmp_path / "pin"
    pin.mkdir()
    (pin / "run.sh").write_text(FAKE_RUN_SH)
    (pin / "wenet_udps").mkdir()
    (pin / "wenet_udps" / "__init__.py").write_text("")
    git(pin, "init", "-q")
    git(pin, "add", "run.sh", "wenet_udps")
    git(pin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pin")
    out = tmp_path / "out"
    out.mkdir()
    (out / "COMMIT").write_text(git(pin, "rev-parse", "HEAD") + "\n")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").write_text(FAKE_PYTHON)
    (shims / "python3").chmod(0o755)
    (tmp_path / "an4").mkdir()
    return pin


def run(tmp_path, pin, seed="3", *more):
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    env.pop("OMP_NUM_THREADS", None)   # (the calls after training must show the caller's own, here none)
    return subprocess.run(["bash", str(SCRIPT), "--pin", str(pin), "--seed", seed, "--work", str(tmp_path / "work"),
                           "--download_dir", str(tmp_path / "an4"), "--out", str(tmp_path / "out"), *more],
                          capture_output=True, text=True, env=env, timeout=120)


def test_one_seed_keeps_every_decode_at_every_lambda(tmp_path, pin):
    proc = run(tmp_path, pin)
    assert proc.returncode == 0, proc.stderr
    calls = (pin / "calls.log").read_text().splitlines()
    # one training call (stages -1..4) at one thread a model, stage 5, then stage 5 per λ of the grid besides 0.3
    assert len(calls) == 6 and "--stage -1 --stop_stage 4" in calls[0] and "--stage 5 --stop_stage 5" in calls[1]
    assert calls[0].startswith("OMP_NUM_THREADS=1 ") and all(c.startswith("OMP_NUM_THREADS=unset ") for c in calls[1:])
    assert all("--seeds 3" in c and "--families scaled_dot udps cosine" in c for c in calls)
    assert [c.split("--joint_ctc_weight ")[1].split()[0] for c in calls[2:]] == ["0.1", "0.2", "0.5", "0.7"]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["COMMIT", "cosine_seed3", "refs", "scaled_dot_seed3",
                                                     "udps_seed3"]
    assert (out / "refs" / "test" / "text").read_text() == "u1 REF test\n"
    for family in ("scaled_dot", "udps", "cosine"):
        kept = out / f"{family}_seed3"
        for set_ in ("dev", "test"):
            modes = sorted(p.name for p in (kept / set_).iterdir())
            grid = [f"{m}_lambda{lam}" for lam in ("0.1", "0.2", "0.5", "0.7")
                    for m in ("joint_ctc_attention", "joint_ctc_attention_lm")]
            assert modes == sorted(["ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring",
                                    "joint_ctc_attention", "ctc_prefix_beam_search_lm", "attention_rescoring_lm",
                                    "joint_ctc_attention_lm", *grid])
            for mode in modes:
                assert sorted(p.name for p in (kept / set_ / mode).iterdir()) == ["decode.info", "text", "wer"]
            # λ 0.3's results are the original model's, untouched by the copies' decodes
            assert (kept / set_ / "joint_ctc_attention" / "text").read_text() == \
                f"u1 {family} joint_ctc_attention 0.3\n"
            assert (kept / set_ / "joint_ctc_attention_lambda0.7" / "text").read_text() == \
                f"u1 {family} joint_ctc_attention 0.7\n"
        assert (kept / "lm_tune" / "dev_joint" / "0.3_1" / "wer").read_text() == "grid 0.3\n"
        assert (kept / "lm_tune_lambda0.5" / "dev_joint" / "0.3_1" / "wer").read_text() == "grid 0.5\n"
        assert (kept / "lm_tune_lambda0.5" / "dev_joint" / "best").read_text() == "5.0 0.3 1\n"
        assert (kept / "norm_ratio.json").is_file() == (family == "udps")
    assert (tmp_path / "work" / "exp" / "an4_udps_seed3" / "test" / "joint_ctc_attention" / "text").read_text() == \
        "u1 udps joint_ctc_attention 0.3\n"
    # a rerun resumes: the copies are reused, the kept folders replaced whole
    again = run(tmp_path, pin)
    assert again.returncode == 0, again.stderr
    assert not list((tmp_path / "out").glob("*.partial"))
    # a seed scored against other references than the kept ones is refused before anything is kept
    (tmp_path / "out" / "refs" / "dev" / "text").write_text("u1 OTHER\n")
    other = run(tmp_path, pin)
    assert other.returncode == 1 and "differs from the kept" in other.stderr


def test_some_families_are_kept_alone_and_unknown_ones_refused(tmp_path, pin):
    """--families: a session that can train two models keeps those two; the others are left for another call."""
    proc = run(tmp_path, pin, "4", "--families", "udps cosine")
    assert proc.returncode == 0, proc.stderr
    calls = (pin / "calls.log").read_text().splitlines()
    assert calls[0].startswith("OMP_NUM_THREADS=1 ") and all("--families udps cosine" in c for c in calls)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["COMMIT", "cosine_seed4", "refs", "udps_seed4"]
    for bad, message in (("udps cosin", "unknown family 'cosin'"), (" ", "--families is empty")):
        refused = run(tmp_path, pin, "4", "--families", bad)
        assert refused.returncode == 2 and message in refused.stderr


@pytest.mark.parametrize("damage, message", [
    ("commit", "the verdict's commit is"),
    ("change", "has changes to tracked files"),
    ("seed", "the verdict's seeds are 1-10"),
])
def test_refuses_another_commit_a_changed_pin_and_other_seeds(tmp_path, pin, damage, message):
    seed = "3"
    if damage == "commit":
        (pin / "other").write_text("x")
        git(pin, "add", "other")
        git(pin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "later")
    elif damage == "change":
        (pin / "run.sh").write_text(FAKE_RUN_SH + "\n# edited\n")
    else:
        seed = "11"
    proc = run(tmp_path, pin, seed)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (pin / "calls.log").exists()
