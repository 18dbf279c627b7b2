"""A full disk at each entry point issue 80 named (mechanism F): exit 1, one line naming the file that was not
written, and nothing partial left; a result written before is unchanged.

On 012e36b, recognize --result_dir, make_raw_list, make_shard_list and compute_cmvn_stats left 0-byte files, and
binarize_lm gave KenLM's closing line as its reason. Each case runs twice: with the helper's writes failing with
ENOSPC (``patched``: every machine), and on a real tmpfs filled up (``tmpfs``: needs ``mount``, as root; skipped
elsewhere), where KenLM's build_binary meets the full disk itself.
"""
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lm.lm_helpers import need_build_binary, need_lmplz
from tests.tools.load import load_tool
from tests.train.train_helpers import make_model_dir, write_data_list
from wenet_udps.utils import atomic, cli

FULL = os.strerror(errno.ENOSPC)
TMPFS_SKIP = "no tiny tmpfs: mount -t tmpfs needs root (CAP_SYS_ADMIN); the patched full disk ran instead"


class _FullFile:
    """A file on a full disk: opening it works, writing does not."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, FULL)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.fixture(params=["patched", "tmpfs"])
def full_disk(request, tmp_path, monkeypatch):
    """(an empty output directory, a function that fills its disk). Files put there before filling stay."""
    out = tmp_path / "out"
    out.mkdir()
    if request.param == "tmpfs":
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(out)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            pytest.skip(TMPFS_SKIP)  # one reason, whatever the path: the skip summary counts it once
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(out)], check=True))

    def fill():
        if request.param == "patched":
            real = open
            monkeypatch.setattr(atomic, "open", lambda *a, **k: _FullFile(real(*a, **k)), raising=False)
            return
        with open(out / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
            except OSError as e:
                assert e.errno == errno.ENOSPC
    return out, fill


def _files(out: Path):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != "filler"}


def _run(main, prog, argv, monkeypatch, capsys):
    """(exit status, stderr) of ``main`` run as its command line (``cli.run_cli``)."""
    monkeypatch.setattr(sys, "argv", [prog] + [str(a) for a in argv])
    with pytest.raises(SystemExit) as exit_info:
        cli.run_cli(main, prog)
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


def _check(out, before, status, err, prog, final):
    assert status == 1, err
    assert len(err) >= 1 and err[-1].startswith(f"{prog}: error: {final}: {FULL}"), err
    assert _files(out) == before  # nothing new, nothing partial, nothing 0-byte; the earlier file unchanged


@pytest.fixture
def kaldi_dir(fsdd_dir, tmp_path):
    files = sorted(fsdd_dir.glob("*.wav"))[::311][:3]
    d = tmp_path / "data"
    d.mkdir()
    (d / "wav.scp").write_text("".join(f"{f.stem} {f}\n" for f in files))
    (d / "text").write_text("".join(f"{f.stem} digit {f.stem[0]}\n" for f in files))
    return d


def test_recognize_result_dir_on_a_full_disk(full_disk, tmp_path, fsdd_dir, monkeypatch, capsys):
    from wenet_udps.bin import recognize
    out, fill = full_disk
    conf, ckpt = make_model_dir(tmp_path)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 2)
    text = out / "res" / "ctc_greedy_search" / "text"
    text.parent.mkdir(parents=True)
    text.write_text("old result\n")
    before = _files(out)
    fill()
    status, err = _run(recognize.main, "wenet_udps.bin.recognize",
                       ["--config", conf, "--checkpoint", ckpt, "--test_data", data, "--result_dir", out / "res",
                        "--modes", "ctc_greedy_search"], monkeypatch, capsys)
    _check(out, before, status, err, "wenet_udps.bin.recognize", text)


def test_make_raw_list_on_a_full_disk(full_disk, kaldi_dir, monkeypatch, capsys):
    out, fill = full_disk
    (out / "data.list").write_text("old list\n")
    before = _files(out)
    fill()
    status, err = _run(load_tool("make_raw_list").main, "make_raw_list.py",
                       [kaldi_dir / "wav.scp", kaldi_dir / "text", out / "data.list"], monkeypatch, capsys)
    _check(out, before, status, err, "make_raw_list.py", out / "data.list")


def test_make_shard_list_on_a_full_disk(full_disk, kaldi_dir, monkeypatch, capsys):
    out, fill = full_disk
    (out / "shards").mkdir()
    (out / "shards.list").write_text("old list\n")
    before = _files(out)
    fill()
    status, err = _run(load_tool("make_shard_list").main, "make_shard_list.py",
                       [kaldi_dir / "wav.scp", kaldi_dir / "text", out / "shards", out / "shards.list"],
                       monkeypatch, capsys)
    _check(out, before, status, err, "make_shard_list.py", (out / "shards" / "shards_000000000.tar").absolute())


def test_compute_cmvn_stats_on_a_full_disk(full_disk, kaldi_dir, tmp_path, monkeypatch, capsys):
    out, fill = full_disk
    conf = tmp_path / "train.yaml"
    conf.write_text(json.dumps({"dataset_conf": {"fbank_conf": {"num_mel_bins": 20},
                                                 "resample_conf": {"resample_rate": 16000}}}))
    (out / "global_cmvn").write_text('{"old": 1}')
    before = _files(out)
    fill()
    status, err = _run(load_tool("compute_cmvn_stats").main, "compute_cmvn_stats.py",
                       ["--train_config", conf, "--in_scp", kaldi_dir / "wav.scp", "--out_cmvn", out / "global_cmvn"],
                       monkeypatch, capsys)
    _check(out, before, status, err, "compute_cmvn_stats.py", out / "global_cmvn")


def test_binarize_lm_on_a_full_disk(full_disk, tmp_path, monkeypatch, capsys, request):
    """On the tmpfs build_binary itself meets the full disk (KenLM's "No space left on device in <its temp
    file>", then "ERROR" on stdout): the reason is the OS error and the file named is the binary asked for. With
    the helper patched, the binary is built and its words file is what cannot be written: neither is left."""
    from wenet_udps.bin import binarize_lm
    from wenet_udps.lm.build import build_arpa
    need_lmplz()
    need_build_binary()
    out, fill = full_disk
    arpa = build_arpa([f"w{i} w{i + 1} w{(i * 7) % 300}" for i in range(300)] * 2, str(tmp_path / "lm.arpa"))
    (out / "lm.bin").write_bytes(b"old binary")
    before = _files(out)
    fill()
    status, err = _run(binarize_lm.main, "wenet_udps.bin.binarize_lm", ["--arpa", arpa.path, "--out", out / "lm.bin"],
                       monkeypatch, capsys)
    patched = request.node.callspec.params["full_disk"] == "patched"
    _check(out, before, status, err, "wenet_udps.bin.binarize_lm", out / ("lm.bin.words" if patched else "lm.bin"))
    assert "ERROR" not in err[-1] and "*****" not in err[-1]


# What KenLM 0.3.0's build_binary printed converting to a full tmpfs (stdout, then stderr), 2026-12-02.
KENLM_FULL = """Reading /data/lm.arpa
----5---10---15---20---25---30---35---40---45---50---55---60---65---70---75---80---85---90---95--100
****************************************************************************************************
ERROR
/tmp/kenlm-0.3.0/util/file.cc:228 in void util::WriteOrThrow(int, const void*, std::size_t) threw FDException \
because `ret < 1'.
No space left on device in {dir}/.lm.bin.tmp.7.0bKJChT (deleted) while writing 2163312 bytes Byte: 4554665
"""


def test_a_program_s_full_disk_is_an_os_error_naming_the_final_file(tmp_path):
    final = str(tmp_path / "lm.bin")
    with pytest.raises(OSError) as e:
        atomic.program_failure("build_binary", KENLM_FULL.format(dir=tmp_path), final)
    assert e.value.errno == errno.ENOSPC and e.value.filename == final
    # a scratch file elsewhere (lmplz's -T) is named as it is, not the output
    with pytest.raises(OSError) as e:
        atomic.program_failure("lmplz", KENLM_FULL.format(dir="/scratch"), final)
    assert e.value.filename.startswith("/scratch/") and final in e.value.strerror


def test_a_program_s_reason_is_its_last_meaningful_line(tmp_path):
    text = "Reading x\n----5---10---100\n*****\nbad ARPA at line 7: no tab\nERROR\n"
    assert atomic.program_failure("build_binary", text, str(tmp_path / "lm.bin")) == "bad ARPA at line 7: no tab"
    assert atomic.program_failure("lmplz", "----5---10\n****\n", "x") == "lmplz said nothing"


def test_a_result_whose_decode_info_cannot_be_written_is_not_kept(tmp_path, monkeypatch):
    """A text without its decode.info would be scored unchecked, as another toolkit's: it goes with the record."""
    from wenet_udps.decode.data_list import write_results
    real = open

    def full_for_the_record(path, *a, **k):
        f = real(path, *a, **k)
        return _FullFile(f) if "decode.info" in os.path.basename(str(path)) else f
    monkeypatch.setattr(atomic, "open", full_for_the_record, raising=False)
    with pytest.raises(OSError) as e:
        write_results({"attention": {"u1": "A B"}}, str(tmp_path), source={"checkpoint": "x"})
    assert e.value.filename == str(tmp_path / "attention" / "decode.info")
    assert list((tmp_path / "attention").iterdir()) == []
