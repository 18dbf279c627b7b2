"""The Python API snippet (docs/api.md; the README's) runs verbatim on a model trained here (exp/x, test.wav and
data/test/data.list laid out as run.sh leaves them)."""
import shutil
import subprocess
import sys

import yaml

from tests.decode.decode_helpers import write_clips, write_list
from tests.train.train_helpers import ROOT, run_env, run_train, tiny_config, write_units

SNIPPET = '''\
import wenet_udps
model = wenet_udps.load_model("exp/x", checkpoint="final.pt", device="cpu")
print(model.transcribe("test.wav", mode="attention_rescoring", beam_size=10, ctc_weight=0.5))
print(model.transcribe("test.wav", timestamps=True)["tokens"])   # [{'token': 'O', 'start': 0.12, 'end': 0.16}, ...]
print(model.decode_list("data/test/data.list").summary)          # RTF ... (as recognize prints)
'''


def test_the_docs_show_this_snippet():
    assert f"```python\n{SNIPPET}```" in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_readme_snippet_runs_on_a_trained_model(tmp_path):
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    clips = write_clips(data, 6)
    units = tmp_path / "units.txt"
    write_units(units)
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(tiny_config(units, max_epoch=1)), encoding="utf-8")
    exp = {"conf": conf, "train": write_list(clips, tmp_path / "train.list"),
           "cv": write_list(clips[:2], tmp_path / "cv.list")}
    run_train(exp, tmp_path / "exp" / "x")
    write_list(clips[:3], data / "data.list")
    shutil.copy(clips[0], tmp_path / "test.wav")
    proc = subprocess.run([sys.executable, "-c", SNIPPET], cwd=tmp_path, env=dict(run_env(), PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[1].startswith("[") and lines[2].startswith("RTF ")
    assert "3 utterances" in lines[2]
