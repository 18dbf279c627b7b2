"""Issue 66 G: a training transcript that is empty or blank, or maps mostly to ``<unk>`` under the units, is
unusable data at every entry point that reads training text: the list tools (make_raw_list, make_shard_list),
training from a raw list and from shards, and the greedy soup's dev pass (``train.targets.TargetAdmission``).
Each skips it with a warning, counts it (``empty_text``, ``unk_text``; the list tools "with an empty transcript")
and refuses a pass where they are more than the bad-fraction limit, naming the counts. Before, half a list of empty
transcripts was "filtered by choice" (``token_min_length``), lower-case transcripts under upper-case units trained
as ``<unk>``, and both trained (exit 0)."""
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.tools.load import run_tool
from tests.train.test_average_soup import fake_run
from tests.train.train_helpers import ROOT, WORDS, make_experiment, run_env
from wenet_udps.bin import average_model
from wenet_udps.config import finalize_config
from wenet_udps.train.checkpoint import save_yaml
from wenet_udps.utils.counts import WorkFailed

# Six utterances: two usable, two empty or blank, two in lower case under the upper-case units (3 of 3 tokens <unk>).
TEXTS = ["ONE", "TWO", "", " \t ", "one", "two"]
COUNTS = "2 utterances used, 4 skipped (empty_text 2, unk_text 2)"
REFUSED = "66.7% of the utterances are unusable, more than dataset_conf.max_bad_fraction 0.05"


@pytest.fixture(scope="module")
def data(tmp_path_factory, fsdd_dir):
    """An experiment whose train list (raw, and as one shard) holds TEXTS; a Kaldi dir of the same."""
    tmp = tmp_path_factory.mktemp("targets")
    exp = make_experiment(tmp, fsdd_dir, n_train=len(TEXTS), n_cv=2)
    items = [json.loads(line) for line in exp["train"].read_text().splitlines()]
    assert len(items) == len(TEXTS) and all(i["txt"] in WORDS for i in items)
    exp["train"].write_text("".join(json.dumps({**item, "txt": text}) + "\n" for item, text in zip(items, TEXTS)))
    _shard(tmp / "train.tar", items, TEXTS)
    (tmp / "shards.list").write_text(f"{tmp / 'train.tar'}\n")
    # shard training reads its cv list as shards too (a raw list given as shards is refused, issue 66 E)
    cv = [json.loads(line) for line in exp["cv"].read_text().splitlines()]
    _shard(tmp / "cv.tar", cv, [i["txt"] for i in cv])
    (tmp / "cv_shards.list").write_text(f"{tmp / 'cv.tar'}\n")
    kaldi = tmp / "kaldi"
    kaldi.mkdir()
    (kaldi / "wav.scp").write_text("".join(f"{i['key']} {i['wav']}\n" for i in items))
    (kaldi / "text").write_text("".join(f"{i['key']} {t}\n" for i, t in zip(items, TEXTS)))
    return {"dir": tmp, "exp": exp, "shards": tmp / "shards.list", "cv_shards": tmp / "cv_shards.list",
            "kaldi": kaldi}


def _shard(path, items, texts):
    """One shard tar at ``path`` of the items' audio with ``texts`` as their transcripts."""
    with tarfile.open(path, "w") as tar:
        for item, text in zip(items, texts):
            tar.add(item["wav"], f"{item['key']}.wav")
            info = tarfile.TarInfo(f"{item['key']}.txt")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def _train(data, train_list, cv_list, data_type, name):
    exp = data["exp"]
    return subprocess.run([sys.executable, "-m", "wenet_udps.bin.train", "--config", str(exp["conf"]),
                           "--train_data", str(train_list), "--cv_data", str(cv_list), "--data_type", data_type,
                           "--model_dir", str(data["dir"] / name), "--seed", "7"], cwd=ROOT, env=run_env(),
                          capture_output=True, text=True, timeout=600)


def training_raw(data):
    proc = _train(data, data["exp"]["train"], data["exp"]["cv"], "raw", "raw_model")
    return proc.returncode, proc.stderr


def training_shards(data):
    proc = _train(data, data["shards"], data["cv_shards"], "shard", "shard_model")
    return proc.returncode, proc.stderr


def greedy_soup(data):
    """The soup's dev pass (cv_loss) over the same list."""
    soup = data["dir"] / "soup"
    soup.mkdir()
    config = finalize_config(data["exp"]["config"])
    save_yaml(config, str(soup / "train.yaml"))
    fake_run(soup, [1.0, 2.0], config)
    try:
        average_model.main(["--method", "greedy_soup", "--soup_metric", "cv_loss", "--dst_model",
                            str(soup / "soup.pt"), "--src_path", str(soup), "--num", "2", "--dev_data",
                            str(data["exp"]["train"]), "--batch_size", "2"])
    except WorkFailed as e:
        return e.exit_status, str(e)
    return 0, ""


ENTRY_POINTS = {"training (raw list)": training_raw, "training (shards)": training_shards,
                "greedy soup (dev pass)": greedy_soup}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_unusable_transcripts_are_counted_and_refused_at_every_training_entry_point(data, entry, caplog, capfd):
    status, out = ENTRY_POINTS[entry](data)
    warned = out + capfd.readouterr().err + " ".join(r.getMessage() for r in caplog.records)
    assert status == 1, out[-3000:]
    assert COUNTS in out and REFUSED in out, out[-3000:]
    assert "is empty or blank: nothing to train on" in warned and "3 of its 3 tokens are not in the units" in warned


@pytest.mark.parametrize("tool", ["make_raw_list", "make_shard_list"])
def test_the_list_tools_count_empty_transcripts_as_unusable(data, tool, tmp_path):
    """The tools that make training lists from a Kaldi dir: empty transcripts left out and counted as unusable
    (before: left out by choice, exit 0), refused above --max_bad_fraction, written at a higher limit."""
    kaldi = data["kaldi"]
    outputs = [str(tmp_path / "list")] if tool == "make_raw_list" else [str(tmp_path / "shards"),
                                                                        str(tmp_path / "list")]
    with pytest.raises(WorkFailed, match=r"4 utterances used, 2 skipped \(with an empty transcript 2\): 33.3% of "
                                         r"the utterances are unusable, more than --max_bad_fraction 0.05"):
        run_tool(tool, [str(kaldi / "wav.scp"), str(kaldi / "text"), *outputs])
    assert not Path(outputs[-1]).exists()
    run_tool(tool, ["--max_bad_fraction", "0.4", str(kaldi / "wav.scp"), str(kaldi / "text"), *outputs])
    assert Path(outputs[-1]).exists()


def test_a_list_under_the_limit_trains_and_logs_its_counts(data):
    """With max_bad_fraction above the share, training runs on the usable utterances and logs the counts."""
    exp = data["exp"]
    conf = data["dir"] / "lenient.yaml"
    conf.write_text(yaml.safe_dump({**exp["config"], "max_epoch": 1,
                                    "dataset_conf": {**exp["config"]["dataset_conf"], "max_bad_fraction": 0.7}}))
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.train", "--config", str(conf), "--train_data",
                           str(exp["train"]), "--cv_data", str(exp["cv"]), "--model_dir",
                           str(data["dir"] / "lenient_model"), "--seed", "7"], cwd=ROOT, env=run_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"epoch 0 train data {exp['train']}: {COUNTS}" in proc.stderr
