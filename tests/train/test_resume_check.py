"""Issue 47, cases 11 and 13: the records say what ran (the seed), and a resume that changes data or conf is
refused with the differences named, or, with --force, goes on and records them."""
import pytest
import yaml

from wenet_udps.bin import train
from wenet_udps.train.resume_check import config_changes, data_record, resume_changes
from wenet_udps.train.run_dir import RunDirError
from tests.train.train_helpers import make_experiment, write_data_list

TINY = ("--override", "max_epoch=1", "--num_workers", "0")


def args(exp, model_dir, *extra, train_list=None):
    return ["--config", str(exp["conf"]), "--train_data", str(train_list or exp["train"]), "--cv_data",
            str(exp["cv"]), "--model_dir", str(model_dir), *extra]


def read(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_config_changes_name_each_key_with_both_values(tmp_path):
    was = {"max_epoch": 2, "model_conf": {"ctc_weight": 0.3}, "dataset_conf": {"fbank_conf": {"dither": 1.0}}}
    now = {"max_epoch": 5, "model_conf": {"ctc_weight": 0.5}, "dataset_conf": {"fbank_conf": {}}}
    assert config_changes(was, now) == ["dataset_conf.fbank_conf.dither: 1.0 -> <absent>",
                                        "model_conf.ctc_weight: 0.3 -> 0.5"]  # max_epoch may grow
    data = {"train_data": {"path": "a", "sha256": "1"}}
    assert resume_changes({"data": {"train_data": {"path": "a", "sha256": "0"}}}, {}, data) == \
        (["--train_data: a changed since (another SHA-256)"], [])
    assert resume_changes({}, {"x": 1}, data) == ([], [])  # a record from before the check: nothing to compare
    assert resume_changes({"dtype": "fp32", "world_size": 1}, {}, {}, {"dtype": "bf16", "world_size": 1}) == \
        (["dtype: fp32 -> bf16"], [])
    # A resume applies a changed lr on purpose (scheduler.restore_with_config): recorded, not refused.
    assert resume_changes({"config": {"optim_conf": {"lr": 0.1}}}, {"optim_conf": {"lr": 0.2}}, {}) == \
        ([], ["optim_conf.lr: 0.1 -> 0.2"])
    # issue 57, M10: the global CMVN stats are recorded with the lists (recomputed stats under one name differ)
    stats = tmp_path / "global_cmvn"
    stats.write_text("{}")
    record = data_record(str(stats), str(stats), str(stats))
    assert set(record) == {"train_data", "cv_data", "cmvn"}
    stats.write_text('{"frame_num": 2}')
    assert resume_changes({"data": record}, {}, data_record(str(stats), str(stats)))[0] == [
        f"--train_data: {stats} changed since (another SHA-256)", f"--cv_data: {stats} changed since (another SHA-256)"]
    assert resume_changes({"data": record}, {}, {"cmvn": data_record(str(stats), str(stats), str(stats))["cmvn"]}
                          )[0] == [f"--cmvn: {stats} changed since (another SHA-256)"]


def test_seed_record_and_resume_changes(tmp_path, fsdd_dir, one_thread, caplog):
    exp = make_experiment(tmp_path / "exp", fsdd_dir, n_train=4, n_cv=2)
    model_dir = tmp_path / "run"
    train.main(args(exp, model_dir, "--seed", "1", *TINY))
    # Case 11: --seed 1 was used, and the records said 777 (the config's default).
    assert read(model_dir / "train.yaml")["seed"] == 1
    assert read(model_dir / "epoch_0.yaml")["config"]["seed"] == 1

    more = ("--checkpoint", "auto", "--seed", "1", "--override", "max_epoch=2", "--num_workers", "0")
    other = tmp_path / "other.list"
    write_data_list(fsdd_dir, other, 4, offset=20)
    for extra, train_list, words in [
            (("--override", "model_conf.ctc_weight=0.5"), None, "model_conf.ctc_weight: 0.3 -> 0.5"),
            (("--override", "dataset_conf.batch_conf.batch_size=2"), None,
             "dataset_conf.batch_conf.batch_size: 4 -> 2"),
            (("--override", "dataset_conf.fbank_conf.dither=0.5"), None, "dataset_conf.fbank_conf.dither: 0.0 -> 0.5"),
            ((), other, f"--train_data: {other} is not {exp['train']}")]:
        with pytest.raises(RunDirError, match="this resume changes what the run trains on") as info:
            train.main(args(exp, model_dir, *more, *extra, train_list=train_list))
        assert words in str(info.value) and "--force" in str(info.value)
        assert read(model_dir / "train.yaml")["model_conf"]["ctc_weight"] == 0.3  # the record was not rewritten

    # Issue 57, M10: --check_resume (what run.sh's stage 4 asks first) applies the same rule and writes nothing
    before = sorted(p.name for p in model_dir.iterdir())
    train.main(args(exp, model_dir, *more, "--check_resume"))   # a raised max_epoch may be resumed
    with pytest.raises(RunDirError, match="model_conf.ctc_weight: 0.3 -> 0.5"):
        train.main(args(exp, model_dir, *more, "--override", "model_conf.ctc_weight=0.5", "--check_resume"))
    assert sorted(p.name for p in model_dir.iterdir()) == before and not (model_dir / "epoch_1.pt").exists()

    train.main(args(exp, model_dir, *more, "--override", "model_conf.ctc_weight=0.5", "--force"))
    record = read(model_dir / "epoch_1.yaml")["resume_changes"]
    assert record == [{"epoch": 0, "step": record[0]["step"], "changes": ["model_conf.ctc_weight: 0.3 -> 0.5"]}]
