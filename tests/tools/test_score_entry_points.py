"""Issue 66, C: a score is bound to the text it scored, at every entry point that writes or reads a ``wer``.

tools/compute-wer.py records the SHA-256 of the hypotheses and references it scored (wenet_udps.scoring.bound);
collect_results and bench/gpu_report.py read every ``wer`` through ``read_score`` and ``check_scored``; run.sh's
stages 5 and 7 write every ``wer`` through ``score_into`` (a temporary file renamed when whole), and remove the
score of a text they are about to decode again. Also G: a moved experiment root keeps its results.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from bench import gpu_report
from tests.tools.load import load_tool
from wenet_udps.decode.data_list import write_results
from wenet_udps.scoring.references import reference_record
from wenet_udps.utils.source_info import model_source

ROOT = Path(__file__).resolve().parents[2]
REFS = {"u1": "A B C", "u2": "D E"}
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def data_dir(root: Path) -> Path:
    test = root / "data" / "test"
    test.mkdir(parents=True, exist_ok=True)
    (test / "text").write_text("".join(f"{k} {v}\n" for k, v in REFS.items()), encoding="utf-8")
    (test / "data.list").write_text("".join(f'{{"key": "{k}", "wav": "{k}.wav", "txt": "{v}"}}\n'
                                            for k, v in REFS.items()), encoding="utf-8")
    return root / "data"


def decode(exp: Path, checkpoint: str, hyps: dict, modes=("attention",)) -> None:
    """What recognize leaves: ``<exp>/test/<mode>/text`` and a decode.info naming the checkpoint and references."""
    exp.mkdir(parents=True, exist_ok=True)
    (exp / "train.yaml").write_text(yaml.safe_dump({"encoder": "transformer"}), encoding="utf-8")
    ckpt = exp / checkpoint
    if not ckpt.exists():   # a state dict of its own per name (collect_results reads the attention from it)
        torch.save({"w": torch.tensor([float(len(checkpoint))])}, ckpt)
    data = exp.parents[1] / "data" / "test"
    source = {**model_source(str(ckpt), str(exp / "train.yaml")),
              **reference_record(str(data / "data.list"), REFS, 0)}
    write_results({m: hyps for m in modes}, str(exp / "test"), {k: str(v) for k, v in source.items()})


def score(mode_dir: Path, ref: Path) -> None:
    """``compute-wer.py REF mode_dir/text > mode_dir/wer``, as stage 5 scores."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-wer.py"), "--v=1", str(ref),
                           str(mode_dir / "text")], capture_output=True, text=True, env=ENV, check=True)
    (mode_dir / "wer").write_text(proc.stdout, encoding="utf-8")


def collect(exp_dir: Path, capsys, *extra: str) -> subprocess.CompletedProcess:
    """collect_results's exit status, stdout and stderr (run in this process: no torch import per call)."""
    code = load_tool("collect_results").main(["--exp_dir", str(exp_dir), "--plots_dir", str(exp_dir.parent / "plots"),
                                              *extra])
    out = capsys.readouterr()
    return subprocess.CompletedProcess([], code, out.out, out.err)


def scored_exp(root: Path, modes=("attention",), name: str = "m_udps") -> Path:
    data = data_dir(root)
    exp = root / "exp" / name
    decode(exp, "avg_5.pt", {"u1": "A X C", "u2": "D E"}, modes)
    for mode in modes:
        score(exp / "test" / mode, data / "test" / "text")
    return exp


def test_case3_a_new_decode_beside_an_old_score_is_refused_naming_both(tmp_path, capsys):
    """Issue 66, case 3: a new checkpoint decoded into a result dir holding the old ``wer``, not rescored:
    collect_results printed the old WER (20.00) beside the new checkpoint, while its CER section scored the new
    text. Now no RESULTS.md is written, and the message names the wer and the text beside it."""
    exp = scored_exp(tmp_path)
    decode(exp, "avg_10.pt", {"u1": "A B C", "u2": "X"})   # a new checkpoint's text, the old wer kept
    proc = collect(tmp_path / "exp", capsys, "--data_dir", str(tmp_path / "data"))
    mode_dir = exp / "test" / "attention"
    assert proc.returncode == 1, proc.stdout
    assert (f"collect_results.py: {mode_dir / 'wer'} is the score of other text: it scored the hypotheses "
            f"{mode_dir / 'text'} with SHA-256") in proc.stderr
    assert "score it again: run.sh --stage 5" in proc.stderr
    assert "20.00" not in proc.stdout and not (tmp_path / "exp" / "RESULTS.md").exists()
    score(mode_dir, tmp_path / "data" / "test" / "text")   # rescored: the table holds the new text's score
    proc = collect(tmp_path / "exp", capsys, "--data_dir", str(tmp_path / "data"))
    assert proc.returncode == 0, proc.stderr
    assert "| 40.00 | " in proc.stdout and "avg_10.pt" in proc.stdout


def test_case3_an_empty_wer_is_an_error_not_a_missing_column(tmp_path, capsys):
    """Issue 66, case 3: ``compute-wer > wer`` leaves an empty file when compute-wer fails; collect_results
    dropped that mode's column without a word, exit 0."""
    exp = scored_exp(tmp_path, modes=("attention", "ctc_greedy_search"))
    (exp / "test" / "ctc_greedy_search" / "wer").write_text("", encoding="utf-8")
    proc = collect(tmp_path / "exp", capsys)
    assert proc.returncode == 1, proc.stdout
    assert f"collect_results.py: {exp / 'test' / 'ctc_greedy_search' / 'wer'} is empty" in proc.stderr
    assert not (tmp_path / "exp" / "RESULTS.md").exists()


# Stands in for python3 in run.sh's stage 5: recognize writes new hypotheses (and stops when RECOGNIZE_STOPS is
# set, as a stage 5 stopped before scoring); compute-wer fails when WER_FAILS is set, else is the real one.
FAKE_PYTHON = """#!/usr/bin/env bash
if [[ " $* " == *" wenet_udps.bin.recognize "* ]]; then
  args=("$@"); dir=
  for i in "${!args[@]}"; do [[ ${args[i]} == --result_dir ]] && dir=${args[i+1]}; done
  for mode in attention ctc_greedy_search; do
    mkdir -p "${dir}/${mode}"; printf 'u1 A B C\\nu2 X\\n' > "${dir}/${mode}/text"
  done
  [[ -z ${RECOGNIZE_STOPS:-} ]] || exit 130
  exit 0
fi
if [[ $1 == tools/compute-wer.py && -n ${WER_FAILS:-} ]]; then echo "compute-wer.py: error: it failed" >&2; exit 1; fi
exec "%s" "$@"
"""


def stage5(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(FAKE_PYTHON % sys.executable)
    (bin_dir / "python3").chmod(0o755)
    setup = (f"data={tmp_path / 'data'} avg={tmp_path / 'exp' / 'avg.pt'} avg_key=k decode_modes='attention "
             f"ctc_greedy_search' beam_size=10 ctc_weight=0.5 reverse_weight=0 decoding_chunk_size=-1 "
             f"num_decoding_left_chunks=-1 gpus= data_type=raw decode_batch_size=1 wer_char=0 text_norm_opts=()")
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . tools/log.sh; . tools/run_lib.sh; "
                                         f". tools/run_setup.sh; . tools/run_eval.sh; PATH={bin_dir}:$PATH; "
                                         f"{setup}; decode_set {tmp_path / 'exp' / 'm'} test"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**ENV, **env})


def old_result(tmp_path: Path) -> Path:
    """An old decode of ``exp/m/test/<mode>`` with its score (no decode.info: compute-wer scores it unchecked)."""
    data = data_dir(tmp_path)
    for mode in ("attention", "ctc_greedy_search"):
        mode_dir = tmp_path / "exp" / "m" / "test" / mode
        mode_dir.mkdir(parents=True)
        (mode_dir / "text").write_text("u1 A X C\nu2 D E\n", encoding="utf-8")
        score(mode_dir, data / "test" / "text")
    return tmp_path / "exp" / "m" / "test"


def test_stage5_writes_wer_whole_and_leaves_no_old_one_beside_new_text(tmp_path):
    """A stage 5 stopped after decoding left the old ``wer`` beside the new text; a failed compute-wer left an
    empty ``wer``. Now a decode is moved in whole, its text and decode.info together, over the old folder (issue 80
    round 7: a stopped one leaves the old text with its own score), and a ``wer`` is renamed into place whole."""
    from wenet_udps.scoring.bound import check_scored, read_score
    result = old_result(tmp_path)
    proc = stage5(tmp_path, RECOGNIZE_STOPS="1")
    assert proc.returncode != 0
    for mode in ("attention", "ctc_greedy_search"):   # the old text and its score, as they were
        check_scored(read_score(str(result / mode / "wer")), str(result / mode / "text"))
        assert (result / mode / "text").read_text() == "u1 A X C\nu2 D E\n"
    proc = stage5(tmp_path, WER_FAILS="1")
    assert proc.returncode == 1
    assert f"scoring {result / 'attention' / 'text'} against" in proc.stderr and "it failed" in proc.stderr
    assert [p.name for p in sorted(result.rglob("wer*"))] == []                 # no empty or partial wer
    proc = stage5(tmp_path)
    assert proc.returncode == 0, proc.stderr
    for mode in ("attention", "ctc_greedy_search"):
        bound = read_score(str(result / mode / "wer"))
        check_scored(bound, str(result / mode / "text"), str(tmp_path / "data" / "test" / "text"))
        assert bound.rate == 40.0
    assert sorted(p.name for p in result.rglob("wer*")) == ["wer", "wer"]


def test_every_stage_scores_through_the_one_atomic_writer():
    """run.sh's stages 5 and 7 (decode_set, lm_tune, lm_decode, sherpa_decode_all) call compute-wer.py only in
    ``score_into``: none redirects it into a ``wer`` of its own."""
    scripts = {path.name: path.read_text() for path in sorted((ROOT / "tools").glob("run_*.sh"))}
    calls = [(name, m.start()) for name, text in scripts.items()
             for m in re.finditer(r"python3 tools/compute-wer", text)]
    writer = scripts["run_eval.sh"].index("score_into() {")
    assert calls == [("run_eval.sh", calls[0][1])]
    assert writer < calls[0][1] < scripts["run_eval.sh"].index("\n}", writer)
    users = {name: len(re.findall(r"^\s+score_into ", text, re.M)) for name, text in scripts.items()}
    assert users["run_eval.sh"] == 2 and users["run_lm.sh"] == 2   # decode_set, sherpa_decode_all; lm_tune, lm_decode


def _rescored_by_hand(mode_dir: Path, ref: Path) -> None:
    """Issue 80, G: ``compute-wer.py --ig`` with a word of the references: N=4 of their 5 tokens."""
    (mode_dir.parent / "ignore").write_text("C\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compute-wer.py"), "--v=1",
                           f"--ig={mode_dir.parent / 'ignore'}", str(ref), str(mode_dir / "text")],
                          capture_output=True, text=True, env=ENV, check=True)
    (mode_dir / "wer").write_text(proc.stdout, encoding="utf-8")


BAD = {   # what is left where a wer should be the score of the text beside it
    "decoded again, not rescored": lambda mode_dir, ref: (mode_dir / "text").write_text("u1 A B C\nu2 X\n"),
    "empty": lambda mode_dir, ref: (mode_dir / "wer").write_text(""),
    "partial": lambda mode_dir, ref: (mode_dir / "wer").write_text((mode_dir / "wer").read_text()[:300]),
    "not bound (WeNet's compute-wer)": lambda mode_dir, ref: (mode_dir / "wer").write_text(
        (mode_dir / "wer").read_text().split("\n", 2)[2]),
    "references prepared again": lambda mode_dir, ref: ref.write_text("u1 A B C\nu2 D F\n"),
    "rescored by hand with --ig": _rescored_by_hand,
}
WORDS = {"decoded again, not rescored": "is the score of other text", "empty": "is empty", "partial": "is partial",
         "not bound (WeNet's compute-wer)": "records no SHA-256",
         "references prepared again": "scored the references",
         "rescored by hand with --ig": "scores N=4 reference tokens, but its references"}


@pytest.mark.parametrize("state", list(BAD))
def test_every_reader_refuses_a_score_that_is_not_of_its_text(tmp_path, state, capsys):
    """The readers of a ``wer``: collect_results (stage 7's RESULTS.md), without and with --data_dir, and the GPU
    report's AN4 numbers (bench/gpu_report.py): each refuses the state, naming the wer."""
    exp = scored_exp(tmp_path / "an4", name="an4_udps")
    mode_dir = exp / "test" / "attention"
    ref = tmp_path / "an4" / "data" / "test" / "text"
    BAD[state](mode_dir, ref)
    for extra in ([], ["--data_dir", str(tmp_path / "an4" / "data")]):
        proc = collect(tmp_path / "an4" / "exp", capsys, *extra)
        assert proc.returncode == 1 and WORDS[state] in proc.stderr and str(mode_dir / "wer") in proc.stderr, \
            (extra, proc.stderr)
        assert not (tmp_path / "an4" / "exp" / "RESULTS.md").exists()
    (tmp_path / "an4" / "logs").mkdir()
    report = gpu_report.part_b(tmp_path)
    assert report["models"]["udps"]["test_wer"]["attention"] is None
    err = capsys.readouterr().err
    assert WORDS[state] in err and str(mode_dir / "wer") in err


def test_a_decode_never_scored_is_named(tmp_path, capsys):
    exp = scored_exp(tmp_path, modes=("attention", "ctc_greedy_search"))
    (exp / "test" / "attention" / "wer").unlink()
    proc = collect(tmp_path / "exp", capsys)
    assert proc.returncode == 1
    assert f"{exp / 'test' / 'attention' / 'text'} was decoded but never scored" in proc.stderr


def test_g_a_moved_experiment_root_keeps_its_results(tmp_path, capsys):
    """Issue 66, G: after ``mv`` of an experiment root, collect_results left every result out ("its checkpoint ...
    no longer exists") though the checkpoint with the recorded SHA-256 sits beside the results."""
    scored_exp(tmp_path)
    shutil.move(str(tmp_path / "exp"), str(tmp_path / "moved"))
    (tmp_path / "data").rename(tmp_path / "data_moved")   # the references moved too: not checked, not refused
    proc = collect(tmp_path / "moved", capsys)
    assert proc.returncode == 0, proc.stderr
    assert "left out" not in proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "| test |" in line)
    assert "| 20.00 |" in row and str(tmp_path / "moved" / "m_udps" / "avg_5.pt") in row
    # the moved checkpoint replaced by another model: stale, as at its old place
    (tmp_path / "moved" / "m_udps" / "avg_5.pt").write_bytes(b"retrained")
    proc = collect(tmp_path / "moved", capsys)
    assert proc.returncode == 1 and "left out, its checkpoint" in proc.stderr
