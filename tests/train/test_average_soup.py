import pytest
import torch
import yaml

from wenet_udps.bin import average_model
from wenet_udps.decode.soup import SoupEvaluator
from wenet_udps.model_builder import build_model
from wenet_udps.train.average import average_state_dicts, greedy_soup, select_checkpoints
from wenet_udps.train.checkpoint import load_checkpoint, save_checkpoint, save_yaml
from wenet_udps.config import finalize_config
from tests.train.train_helpers import tiny_config, write_data_list, write_units


def fake_run(tmp_path, cv_losses, config=None):
    """epoch_N.pt/.yaml with random weights and the given cv losses."""
    states = []
    for epoch, loss in enumerate(cv_losses):
        torch.manual_seed(epoch)
        if config is not None:
            state = build_model(config).state_dict()
        else:
            state = {"w": torch.randn(3, 2), "b": torch.randn(2), "n": torch.tensor(epoch * 3)}
        save_checkpoint(str(tmp_path), f"epoch_{epoch}", {"model": state}, {"epoch": epoch, "step": epoch,
                                                                              "cv_loss": loss})
        states.append(state)
    return states


def test_average_of_val_best_equals_manual_average(tmp_path):
    states = fake_run(tmp_path, [5.0, 2.0, 3.0, 1.0])
    chosen = select_checkpoints(str(tmp_path), 2, val_best=True)
    assert [p.rsplit("/", 1)[1] for p in chosen] == ["epoch_3.pt", "epoch_1.pt"]
    average_model.main(["--dst_model", str(tmp_path / "avg.pt"), "--src_path", str(tmp_path), "--num", "2",
                        "--val_best"])
    avg = load_checkpoint(str(tmp_path / "avg.pt"))["model"]
    torch.testing.assert_close(avg["w"], (states[1]["w"] + states[3]["w"]) / 2)
    torch.testing.assert_close(avg["b"], (states[1]["b"] + states[3]["b"]) / 2)
    assert avg["n"].dtype == torch.int64 and int(avg["n"]) == (3 + 9) // 2
    last = select_checkpoints(str(tmp_path), 3, min_epoch=0, max_epoch=2)
    assert [p.rsplit("/", 1)[1] for p in last] == ["epoch_2.pt", "epoch_1.pt", "epoch_0.pt"]
    torch.testing.assert_close(average_state_dicts(last)["w"], sum(s["w"] for s in states[:3]) / 3)


def test_greedy_soup_adds_only_strictly_improving_candidates():
    # Synthetic metric (exact binary fractions, so ties are exact): mean of the ingredients' values minus 0.5 per
    # extra ingredient, plus 10 when "bad" is mixed with anything.
    value = {"b": 3.5, "bad": 2.5, "c": 2.0, "a": 1.0, "d": 1.5}
    calls = []

    def evaluate(soups):
        calls.append(len(soups))
        return [sum(value[x] for x in s) / len(s) - 0.5 * (len(s) - 1) + (10.0 if "bad" in s and len(s) > 1
                                                                            else 0.0) for s in soups]

    soup, metric, history = greedy_soup(list(value), evaluate, num_look=1)
    # rank a, d, c, bad, b: +d 0.75 (added), +c 0.5 (added), +bad 10.8 (no), +b 0.5 = tie (no: not strict).
    assert soup == ["a", "d", "c"] and metric == 0.5
    assert [h["added"] for h in history] == ["d", "c", None, None]
    assert calls == [5, 1, 1, 1, 1]

    calls.clear()
    soup, metric, history = greedy_soup(list(value), evaluate, num_look=2)
    # windows (d, c) -> d; (c, bad) -> c; (bad, b) -> none improves, both dropped.
    assert soup == ["a", "d", "c"] and metric == 0.5
    assert [h["tried"] for h in history] == [["d", "c"], ["c", "bad"], ["bad", "b"]]
    assert calls == [5, 2, 2, 2]


def test_greedy_soup_real_run_cv_loss_in_two_workers(tmp_path, fsdd_dir):
    units = tmp_path / "units.txt"
    write_units(units)
    config = finalize_config(tiny_config(units))
    save_yaml(config, str(tmp_path / "train.yaml"))
    fake_run(tmp_path, [1.0, 2.0, 3.0], config)
    dev = tmp_path / "dev.list"
    write_data_list(fsdd_dir, dev, 3)
    dst = tmp_path / "soup.pt"
    soup = average_model.main(["--method", "greedy_soup", "--soup_metric", "cv_loss", "--dst_model", str(dst),
                               "--src_path", str(tmp_path), "--num", "3", "--dev_data", str(dev),
                               "--num_workers", "2", "--batch_size", "2"])
    info = yaml.safe_load(open(str(dst) + ".soup.yaml"))
    evaluator = SoupEvaluator({"config": str(tmp_path / "train.yaml"), "dev_data": str(dev), "data_type": "raw",
                               "metric": "cv_loss", "batch_size": 2})
    singles = {p: evaluator([p]) for p in info["candidates"]}
    assert soup[0] == min(singles, key=singles.get)
    assert abs(evaluator(soup) - info["value"]) < 1e-4
    best = singles[soup[0]]
    for h in info["history"]:
        if h["added"] is not None:
            assert min(h["metrics"]) < best
            best = min(h["metrics"])
        else:
            assert min(h["metrics"]) >= best
    assert abs(best - info["value"]) < 1e-9
    torch.testing.assert_close(load_checkpoint(str(dst))["model"]["encoder.after_norm.weight"],
                               average_state_dicts(soup)["encoder.after_norm.weight"])


@pytest.mark.parametrize("metric", ["cv_loss", "wer"])
def test_greedy_soup_on_an_unusable_dev_set_fails_and_writes_nothing(tmp_path, metric):
    """Issue 47 case 5: every --dev_data wav missing gave exit 0 and soup.pt with cv_loss inf. Now the soup's dev
    pass is checked by the one rule (wenet_udps.utils.counts): exit 1 (counts.WorkFailed), no soup written."""
    import json

    from wenet_udps.utils.counts import WorkFailed
    units = tmp_path / "units.txt"
    write_units(units)
    config = finalize_config(tiny_config(units))
    save_yaml(config, str(tmp_path / "train.yaml"))
    fake_run(tmp_path, [1.0, 2.0], config)
    dev = tmp_path / "dev.list"
    dev.write_text("".join(json.dumps({"key": f"u{i}", "wav": str(tmp_path / f"gone{i}.wav"), "txt": "ONE"}) + "\n"
                           for i in range(2)))
    dst = tmp_path / "soup.pt"
    with pytest.raises(WorkFailed, match=rf"greedy soup dev data {dev}: 0 utterances used, 2 skipped \(bad_audio 2\)"
                                         r"|decode data .*bad_audio 2") as err:
        average_model.main(["--method", "greedy_soup", "--soup_metric", metric, "--dst_model", str(dst),
                            "--src_path", str(tmp_path), "--num", "2", "--dev_data", str(dev), "--batch_size", "2"])
    assert "no usable utterance" in str(err.value) and err.value.exit_status == 1
    assert not dst.exists() and not (tmp_path / "soup.pt.soup.yaml").exists()


@pytest.mark.parametrize("dst", ["epoch_1.pt", "step_7.pt", "final.pt", "train.pt", "copy.pt"])
def test_average_never_overwrites_a_training_checkpoint_or_its_yaml(tmp_path, dst):
    """Issue 36 item 7: --dst_model epoch_0.pt replaced a checkpoint of the run and its .yaml."""
    from wenet_udps.utils.cli import UserError
    fake_run(tmp_path, [3.0, 2.0])
    (tmp_path / "train.yaml").write_text("encoder: conformer\n")
    save_checkpoint(str(tmp_path), "copy", {"model": {"w": torch.zeros(1)}}, {"epoch": 1, "step": 1})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(UserError, match=f"--dst_model {tmp_path / dst}: "):
        average_model.main(["--dst_model", str(tmp_path / dst), "--src_path", str(tmp_path), "--num", "2"])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # An earlier average may be replaced (stage 5 reruns).
    for _ in range(2):
        average_model.main(["--dst_model", str(tmp_path / "avg_2.pt"), "--src_path", str(tmp_path), "--num", "2"])


def test_force_retires_the_averages_of_the_deleted_run_and_hides_their_results(tmp_path, capsys):
    """Issue 36 item 10: after --force with fewer epochs, avg_5.pt of the deleted run stayed beside the new
    avg_2.pt, and its results were shown as the experiment's."""
    from tests.tools.load import load_tool
    from wenet_udps.decode.data_list import write_results
    from wenet_udps.train.run_dir import claim
    from wenet_udps.utils.source_info import model_source
    exp = tmp_path / "exp" / "x"
    exp.mkdir(parents=True)
    fake_run(exp, [5.0, 4.0, 3.0, 2.0, 1.0])
    (exp / "train.yaml").write_text("encoder: transformer\n")
    average_model.main(["--dst_model", str(exp / "avg_5.pt"), "--src_path", str(exp), "--num", "5"])
    (exp / "avg_5.pt.stamp").write_text("stage 5's key\n")
    write_results({"attention": {"a": "A"}}, str(exp / "test"), model_source(str(exp / "avg_5.pt"),
                                                                               str(exp / "train.yaml")))
    (exp / "test" / "attention" / "wer").write_text("Overall -> 9.00 % N=1 C=0 S=1 D=0 I=0\n")
    (exp / "tensorboard" / "x").mkdir(parents=True)
    (exp / "tensorboard" / "x" / "events.out.tfevents.1").write_bytes(b"the old run's losses")
    claim(str(exp), None, force=True)
    assert not list(exp.glob("avg_5*")) and not list(exp.glob("epoch_*")) and not (exp / "tensorboard").exists()
    [abandoned] = exp.glob("abandoned_*")
    assert {p.name for p in abandoned.iterdir()} == {"avg_5.pt", "avg_5.yaml", "avg_5.pt.stamp", "tensorboard"}
    assert load_tool("collect_results").collect(tmp_path / "exp") == []
    assert f"its checkpoint {exp / 'avg_5.pt'} no longer exists" in capsys.readouterr().err


def test_greedy_soup_refuses_a_ref_text_other_than_its_dev_sets(tmp_path, fsdd_dir):
    """Issue 57, S15: the greedy soup ranks candidates by their WER against --ref_text; another set's text ranked
    them by the wrong references without a word. The one reference check (wenet_udps.scoring.references)."""
    from wenet_udps.scoring.references import ReferencesError
    units = tmp_path / "units.txt"
    write_units(units)
    config = finalize_config(tiny_config(units))
    save_yaml(config, str(tmp_path / "train.yaml"))
    fake_run(tmp_path, [1.0, 2.0], config)
    dev = tmp_path / "dev.list"
    items = write_data_list(fsdd_dir, dev, 3)
    right, other = tmp_path / "text", tmp_path / "other_text"
    right.write_text("".join(f"{i['key']} {i['txt']}\n" for i in items))
    other.write_text("".join(f"{i['key']} {i['txt']} ONE\n" for i in items))
    common = ["--method", "greedy_soup", "--soup_metric", "wer", "--src_path", str(tmp_path), "--num", "2",
              "--dev_data", str(dev), "--batch_size", "3", "--decode_mode", "ctc_greedy_search"]
    average_model.main(common + ["--dst_model", str(tmp_path / "soup.pt"), "--ref_text", str(right)])
    with pytest.raises(ReferencesError, match=rf"{other} are not the references of {dev}, which the greedy soup's "
                                              r"decode was decoded from: the transcripts of the 3 decoded"):
        average_model.main(common + ["--dst_model", str(tmp_path / "soup2.pt"), "--ref_text", str(other)])
    assert not (tmp_path / "soup2.pt").exists()


@pytest.mark.parametrize("files, message", [
    ((), "no epoch_N.pt/epoch_N.yaml checkpoints in {d}: the folder holds no checkpoint"),
    (("epoch_1.pt", "epoch_2.pt"), "no epoch_N.pt/epoch_N.yaml checkpoints in {d}: its 2 .pt file(s) (epoch_1.pt, "
                                   "epoch_2.pt) have no epoch_N.yaml beside them"),
])
def test_average_model_of_nothing_to_average_is_one_line(tmp_path, files, message):
    """Issue 80, I: an empty --src_path, or WeNet's own .pt files without their .yaml, gave a ValueError
    traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    src = tmp_path / "exp"
    src.mkdir()
    for name in files:
        (src / name).write_bytes(b"weights")
    proc = subprocess.run([sys.executable, "-m", "wenet_udps.bin.average_model", "--src_path", str(src), "--dst_model",
                           str(tmp_path / "avg.pt"), "--num", "2"], capture_output=True, text=True, cwd=root,
                          env=dict(os.environ, PYTHONPATH=str(root)), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "wenet_udps.bin.average_model: error: " + message.format(d=src)), proc.stderr
    assert not (tmp_path / "avg.pt").exists()
