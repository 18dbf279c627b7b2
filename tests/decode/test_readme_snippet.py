"""The Python API snippet (docs/api.md; the README's) runs verbatim on a model trained here (exp/x, test.wav and
data/test/data.list laid out as run.sh leaves them), and its decode_list gives the text that stage 5 wrote and
RESULTS.md scores (issue 57, F: the API rescored with ctc_weight 0.0, run.sh with 0.5)."""
import shutil
import subprocess
import sys

import yaml

import wenet_udps
from tests.decode.decode_helpers import read_hyps, write_clips, write_list
from tests.train.train_helpers import ROOT, run_env, run_train, tiny_config, write_units
from wenet_udps.bin import recognize

SNIPPET = '''\
import wenet_udps
model = wenet_udps.load_model("exp/tiny_zh/train_conformer_udps", checkpoint="avg_5.pt", device="cpu")
wav = "data/tiny_zh/wav/test/tiny_zh_test_00000.wav"
print(model.transcribe(wav, mode="attention_rescoring", beam_size=10, ctc_weight=0.5))
print(model.transcribe(wav, timestamps=True)["tokens"])   # [{'token': '我', 'start': 0.12, 'end': 0.16}, ...]
print(model.decode_list("data/tiny_zh/test/data.list").summary)   # RTF ... (as recognize prints)
'''


def test_the_readme_and_docs_show_this_snippet():
    for doc in ("README.md", "docs/api.md"):
        assert f"```python\n{SNIPPET}```" in (ROOT / doc).read_text(encoding="utf-8"), doc


def test_readme_snippet_runs_on_a_trained_model(tmp_path):
    # The main job's layout: exp/tiny_zh/train_conformer_udps/avg_5.pt, data/tiny_zh/{wav/test,test}/
    data = tmp_path / "data" / "tiny_zh" / "test"
    data.mkdir(parents=True)
    clips = write_clips(data, 6)
    units = tmp_path / "units.txt"
    write_units(units)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(tiny_config(units, max_epoch=1)), encoding="utf-8")
    exp = {"conf": conf, "train": write_list(clips, tmp_path / "train.list"),
           "cv": write_list(clips[:2], tmp_path / "cv.list")}
    out = tmp_path / "exp" / "tiny_zh" / "train_conformer_udps"
    run_train(exp, out)
    shutil.copy(out / "final.pt", out / "avg_5.pt")
    shutil.copy(out / "final.yaml", out / "avg_5.yaml")
    write_list(clips[:3], data / "data.list")
    (tmp_path / "data" / "tiny_zh" / "wav" / "test").mkdir(parents=True)
    shutil.copy(clips[0], tmp_path / "data" / "tiny_zh" / "wav" / "test" / "tiny_zh_test_00000.wav")
    # Stage 5 (tools/run_eval.sh decode_set) with run.sh's defaults: <exp>/<set>/<mode>/text and decode.info.
    stage5 = out / "test"
    recognize.main(["--config", str(out / "train.yaml"), "--checkpoint", str(out / "avg_5.pt"), "--test_data",
                    str(data / "data.list"), "--result_dir", str(stage5), "--modes", "attention_rescoring",
                    "--beam_size", "10", "--ctc_weight", "0.5", "--reverse_weight", "0.0", "--batch_size", "16"])
    proc = subprocess.run([sys.executable, "-c", SNIPPET], cwd=tmp_path, env=dict(run_env(), PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[1].startswith("[") and lines[2].startswith("RTF ")
    assert "3 utterances" in lines[2]
    model = wenet_udps.load_model(str(out), checkpoint="avg_5.pt")
    defaults = model.recipe.defaults(["attention_rescoring"])
    assert {k: defaults[k] for k in ("beam_size", "ctc_weight")} == {"beam_size": 10, "ctc_weight": 0.5}
    texts = model.decode_list(str(data / "data.list")).texts    # the snippet's call
    assert texts == {"attention_rescoring": read_hyps(stage5 / "attention_rescoring" / "text")}
