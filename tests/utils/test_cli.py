"""wenet_udps.utils.cli: what a program does with a user's mistake found during the work (run_cli), and the
checkers' edge cases. Bad arguments of every program: tests/bin/test_cli_bad_args.py."""
import argparse
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wenet_udps.utils import cli

ROOT = Path(__file__).resolve().parents[2]


def _exit_of(main, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(main, "prog")
    return exit_info.value.code, capsys.readouterr().err.splitlines()


def test_run_cli_turns_user_and_os_errors_into_one_line(capsys):
    def user_error(argv):
        raise cli.UserError("first line\nsecond line")

    def disk_full(argv):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/exp/epoch_3.pt")
    assert _exit_of(user_error, capsys) == (2, ["prog: error: first line second line"])
    assert _exit_of(disk_full, capsys) == (1, ["prog: error: /exp/epoch_3.pt: No space left on device"])
    assert _exit_of(lambda argv: 3, capsys) == (3, [])  # an int is the exit status (compute-wer, describe)
    assert _exit_of(lambda argv: {"rtf": 0.1}, capsys) == (0, [])


def test_output_checks_create_nothing_and_refuse_a_file_in_the_way(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    assert cli.output_dir(str(deep)) == str(deep) and cli.output_file(str(deep)) == str(deep)
    assert not (tmp_path / "a").exists()
    (tmp_path / "f").write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a directory"):
        cli.output_dir(str(tmp_path / "f"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory, not a file"):
        cli.output_file(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match=f"cannot be created: {tmp_path / 'f'} is a file"):
        cli.output_file(str(tmp_path / "f" / "x" / "y"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_result_dir_is_refused_before_the_work(tmp_path):
    """Issue 36, case 13: a read-only --result_dir was found only after the whole decode."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(argparse.ArgumentTypeError, match="not writable"):
            cli.output_dir(str(locked / "test"))
        with pytest.raises(argparse.ArgumentTypeError, match="directory not writable"):
            cli.output_dir(str(locked))
    finally:
        locked.chmod(0o755)


def test_numbers(capsys):
    assert cli.int_range(0, also=(-1,))("-1") == -1
    for check, text, message in ((cli.positive_int, "0", "must be >= 1, got 0"),
                                 (cli.positive_int, "1.5", "expected an integer, got '1.5'"),
                                 (cli.int_range(0, also=(-1,)), "-2", "must be >= 0 or -1, got -2"),
                                 (cli.float_range(0.0, 1.0), "1.5", r"must be in \[0, 1\], got 1.5"),
                                 (cli.float_range(0.0, low_open=True), "0", "must be > 0, got 0"),
                                 (cli.finite_float, "nan", "expected a finite number")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            check(text)


def test_a_data_error_found_at_work_is_one_line_from_a_real_process(tmp_path):
    """The path a script's UserError takes, end to end: tools/make_raw_list.py on a wav.scp with a pipe command."""
    (tmp_path / "wav.scp").write_text("a\tsox a.flac -t wav - |\n")
    (tmp_path / "text").write_text("a hello\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_raw_list.py"), "wav.scp", "text", "data.list"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["make_raw_list.py: error: wav.scp:1: entry 'a' is a pipe command (not "
                                                "run, by design); convert the audio to files first"]
