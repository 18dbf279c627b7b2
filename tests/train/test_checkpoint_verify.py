"""Every checkpoint load verifies the SHA-256 in its YAML and the units file it was trained with (issue 29)."""
import pytest
import torch

from wenet_udps.bin import average_model, recognize
from wenet_udps.config import finalize_config
from wenet_udps.model_builder import build_model
from wenet_udps.text.base_tokenizer import UnitsError, units_fingerprint
from wenet_udps.train.checkpoint import CheckpointError, link_final, load_checkpoint, save_checkpoint, \
    save_yaml
from tests.train.train_helpers import tiny_config, write_data_list, write_units


def _model_dir(tmp_path):
    units = tmp_path / "units.txt"
    write_units(units)
    config = finalize_config(tiny_config(units))
    save_yaml(config, str(tmp_path / "train.yaml"))
    torch.manual_seed(1)
    state = {"model": build_model(config).state_dict(), "run_id": "r"}
    for epoch in (0, 1):
        save_checkpoint(str(tmp_path), f"epoch_{epoch}", state,
                        {"epoch": epoch, "step": epoch, "run_id": "r", "cv_loss": 1.0,
                         "units": units_fingerprint(str(units))})
    return tmp_path / "train.yaml", tmp_path / "epoch_1.pt", units


def _tamper(path):
    """256 bytes overwritten inside the tensor data: the zip still loads, the weights are wrong."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 256] = bytes(256)
    path.write_bytes(bytes(data))


def _recognize(tmp_path, conf, ckpt, data, *extra):
    return recognize.main(["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data),
                           "--result_dir", str(tmp_path / "res"), "--modes", "ctc_greedy_search",
                           "--batch_size", "2", *extra])


def test_modified_checkpoint_is_refused_by_recognize_and_average_unless_opted_out(tmp_path, fsdd_dir):
    conf, ckpt, _ = _model_dir(tmp_path)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    _recognize(tmp_path, conf, ckpt, data)
    _tamper(ckpt)
    with pytest.raises(CheckpointError, match=r"epoch_1.pt does not match the SHA-256 in epoch_1.yaml .*"
                                              r"--no_verify_checkpoint"):
        _recognize(tmp_path, conf, ckpt, data)
    _recognize(tmp_path, conf, ckpt, data, "--no_verify_checkpoint")
    avg = ["--dst_model", str(tmp_path / "avg.pt"), "--src_path", str(tmp_path), "--num", "2"]
    with pytest.raises(CheckpointError, match="epoch_1.pt does not match"):
        average_model.main(avg)
    average_model.main(avg + ["--no_verify_checkpoint"])
    # the average has its own YAML: it is verified where it is loaded, and records the units file
    assert load_checkpoint(str(tmp_path / "avg.pt"), units=str(tmp_path / "units.txt"))["model"]
    _tamper(tmp_path / "avg.pt")
    with pytest.raises(CheckpointError, match="avg.pt does not match the SHA-256 in avg.yaml"):
        load_checkpoint(str(tmp_path / "avg.pt"))


def test_final_pt_is_verified_through_final_yaml(tmp_path):
    _, ckpt, _ = _model_dir(tmp_path)
    final = link_final(str(tmp_path), str(ckpt))
    assert (tmp_path / "final.yaml").read_text() == (tmp_path / "epoch_1.yaml").read_text()
    load_checkpoint(final)
    link_final(str(tmp_path), str(ckpt))  # a rerun of a finished run: final.pt is already that file
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]  # rename(2) of two links to one file is a no-op
    _tamper(ckpt)  # a hard link: final.pt is the same bytes
    with pytest.raises(CheckpointError, match="final.pt does not match the SHA-256 in final.yaml"):
        load_checkpoint(final)


def test_other_units_file_is_refused_naming_both_files(tmp_path, fsdd_dir):
    conf, ckpt, units = _model_dir(tmp_path)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    lines = units.read_text().splitlines()
    letters = [l.split()[0] for l in lines[2:-1]]
    rotated = letters[1:] + letters[:1]  # stage 2 rerun over other text: same size, other ids
    units.write_text("".join(f"{t} {i}\n" for i, t in enumerate(["<blank>", "<unk>"] + rotated + ["<sos/eos>"])))
    with pytest.raises(UnitsError, match=rf"units file {units} .* is not the one .*epoch_1.pt was trained with "
                                         rf"\({units}, \d+ bytes"):
        _recognize(tmp_path, conf, ckpt, data)
    with pytest.raises(UnitsError, match="is not the one"):
        load_checkpoint(str(ckpt), units=str(units))


def test_weights_of_another_vocabulary_are_a_user_error():
    from wenet_udps.train.checkpoint import fit_weights
    from wenet_udps.utils.cli import UserError
    with pytest.raises(CheckpointError, match=r"old.pt does not fit the model: size mismatch for weight") as err:
        fit_weights(torch.nn.Linear(4, 10), torch.nn.Linear(4, 12).state_dict(), "old.pt")
    assert isinstance(err.value, UserError)
    with pytest.raises(CheckpointError, match=r"old.pt does not fit the model: missing keys \['bias'\]"):
        fit_weights(torch.nn.Linear(4, 10), {"weight": torch.zeros(10, 4)}, "old.pt")


@pytest.mark.parametrize("failing_write", [1, 2])  # the .pt, then its .yaml
def test_full_disk_while_saving_is_one_line_and_leaves_the_earlier_checkpoints(tmp_path, monkeypatch, failing_write):
    """A full disk was an OSError traceback from deep in the save (issue 36); now a CheckpointError (one line,
    exit 2) saying the earlier checkpoints are intact, and they are; no temporary or unverifiable file is left."""
    import errno
    import os
    from wenet_udps.train import checkpoint
    _model_dir(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        if not os.path.isdir(f"/proc/self/fd/{fd}"):  # a file written, not the directory synced after a rename
            calls.append(fd)
            if len(calls) == failing_write:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)
    monkeypatch.setattr(checkpoint.os, "fsync", fsync)
    with pytest.raises(CheckpointError) as err:
        save_checkpoint(str(tmp_path), "epoch_2", {"model": {}}, {"epoch": 2})
    message = str(err.value)
    assert "\n" not in message and "No space left on device" in message and "intact" in message
    assert "epoch_2" in message
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before  # no epoch_2.pt without its .yaml, no .tmp file, the others unchanged
