"""The one atomic writer (wenet_udps/utils/atomic.py): a file is whole or absent, an error names the final path."""
import errno
import os

import pytest

from wenet_udps.utils import atomic
from wenet_udps.utils.cli import os_error_text


def _disk_full_at_fsync(monkeypatch):
    real = os.fsync

    def fsync(fd):
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)
    monkeypatch.setattr(atomic.os, "fsync", fsync)


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "epoch_0.pt"
    atomic.write_bytes(str(target), b"old complete content")

    def boom(src, dst):
        raise KeyboardInterrupt("killed between write and rename")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_bytes(str(target), b"new")
    assert target.read_bytes() == b"old complete content"
    assert [p.name for p in tmp_path.iterdir()] == ["epoch_0.pt"]


@pytest.mark.parametrize("write", [
    lambda p: atomic.write_text(p, "new\n"),
    lambda p: atomic.write_bytes(p, b"new"),
    lambda p: atomic.write_json(p, {"new": 1}),
])
def test_a_full_disk_names_the_final_file_and_leaves_the_old_one(tmp_path, monkeypatch, write):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    _disk_full_at_fsync(monkeypatch)
    with pytest.raises(OSError) as e:
        write(target)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target)
    assert os_error_text(e.value).startswith(f"{target}: No space left on device (not written")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text() == "old\n"


def test_an_error_of_the_caller_mid_file_leaves_nothing(tmp_path):
    """A file written line by line whose writer fails half way (bad input): no half file, the error as it is."""
    target = tmp_path / "text"
    with pytest.raises(ValueError, match="bad line"):
        with atomic.open_atomic(target) as f:
            f.write("u1 A\n")
            raise ValueError("bad line")
    assert list(tmp_path.iterdir()) == []


def test_an_input_s_os_error_is_not_blamed_on_the_output(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        with atomic.open_atomic(tmp_path / "out") as f:
            f.write(open(tmp_path / "missing").read())
    assert e.value.filename == str(tmp_path / "missing") and list(tmp_path.iterdir()) == []


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "private"
    target.write_text("old")
    target.chmod(0o600)
    atomic.write_text(target, "new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o600


def test_a_missing_directory_names_the_final_file(tmp_path):
    with pytest.raises(OSError) as e:
        atomic.write_text(tmp_path / "no" / "out", "x")
    assert e.value.filename == str(tmp_path / "no" / "out")


def test_a_link_is_followed_and_a_device_written_through(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    (tmp_path / "link.txt").symlink_to(real)
    atomic.write_text(tmp_path / "link.txt", "new")
    assert (tmp_path / "link.txt").is_symlink() and real.read_text() == "new"
    atomic.write_text("/dev/null", "nothing")  # not replaced by a regular file
    assert not os.path.isfile("/dev/null")


def test_temp_path_renames_what_a_program_wrote_and_removes_it_on_failure(tmp_path):
    target = tmp_path / "lm.bin"
    with atomic.temp_path(target) as tmp:
        assert atomic.TMP_MARK in os.path.basename(tmp) and os.path.dirname(tmp) == str(tmp_path)
        with open(tmp, "wb") as f:
            f.write(b"binary")
    assert target.read_bytes() == b"binary"
    with pytest.raises(RuntimeError):
        with atomic.temp_path(target) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise RuntimeError("the program failed")
    assert target.read_bytes() == b"binary" and [p.name for p in tmp_path.iterdir()] == ["lm.bin"]
    with pytest.raises(OSError) as e:  # the program wrote nothing there: named as the final file
        with atomic.temp_path(target):
            pass
    assert e.value.filename == str(target)
