"""recipes/<corpus>/{settings,download,prepare}.sh on fake directory trees that mimic the real layouts."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTIAL = ["--allow_partial", "true"]   # the fake trees hold a few utterances of each published part
CORPORA = ["tiny_zh", "tiny_en", "fsdd", "aishell", "librispeech", "mini_librispeech", "an4"]


def sh(*args):
    return subprocess.run(["bash", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def read_table(path):
    return [line.rstrip("\n").split(" ", 1) for line in open(path, encoding="utf-8")]


@pytest.mark.parametrize("corpus", CORPORA)
def test_settings_define_every_variable(corpus):
    names = ["train_set", "dev_set", "test_sets", "token_type", "nbpe", "bpe_mode", "wer_char", "default_config"]
    script = f"set -euo pipefail; . recipes/{corpus}/settings.sh; " + "; ".join(
        f'echo "{n}=${{{n}}}"' for n in names)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert values["token_type"] in ("char", "bpe")
    assert values["wer_char"] in ("0", "1")
    assert values["default_config"].startswith(f"conf/{corpus}/")
    assert values["test_sets"]


def test_aishell_prepare(tmp_path):
    src = tmp_path / "dl" / "data_aishell"
    spk = {"train": "S0002", "dev": "S0724", "test": "S0764"}
    for split, s in spk.items():
        d = src / "wav" / split / s
        d.mkdir(parents=True)
        for utt in ("0121", "0122"):
            (d / f"BAC009{s}W{utt}.wav").touch()
    (src / "wav" / "train" / "S0002" / "BAC009S0002W0999.wav").touch()   # no transcript: skipped
    (src / "transcript").mkdir()
    (src / "transcript" / "aishell_transcript_v0.8.txt").write_text(
        "BAC009S0002W0122 而 对 楼市 成交 抑制 作用 最 大 的 限 购\n"
        "BAC009S0002W0121 甚至 出现 交易 几乎 停滞 的 情况\n"
        "BAC009S0724W0121 你 好\nBAC009S0724W0122 再见\nBAC009S0764W0121 一 二\nBAC009S0764W0122 三\n"
        "BAC009S0764W0999 没有 音频\n", encoding="utf-8")
    proc = sh("recipes/aishell/prepare.sh", *PARTIAL, tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    text = read_table(tmp_path / "data" / "train" / "text")
    assert text == [["BAC009S0002W0121", "甚至出现交易几乎停滞的情况"], ["BAC009S0002W0122", "而对楼市成交抑制作用最大的限购"]]
    scp = read_table(tmp_path / "data" / "train" / "wav.scp")
    assert [k for k, _ in scp] == [k for k, _ in text]
    assert scp[0][1] == str(src / "wav" / "train" / "S0002" / "BAC009S0002W0121.wav")
    for split in ("dev", "test"):
        assert len(read_table(tmp_path / "data" / split / "text")) == 2


def test_aishell_missing_dataset_is_one_clear_line(tmp_path):
    proc = sh("recipes/aishell/prepare.sh", *PARTIAL, tmp_path / "nothing", tmp_path / "data")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not found" in lines[0] and "recipes/aishell/download.sh" in lines[0]


def make_librispeech(root: Path, parts):
    for i, part in enumerate(parts):
        spk, chap = 100 + i, 2000 + i
        d = root / "LibriSpeech" / part / str(spk) / str(chap)
        d.mkdir(parents=True)
        lines = []
        for utt in range(2):
            key = f"{spk}-{chap}-{utt:04d}"
            (d / f"{key}.flac").touch()
            lines.append(f"{key} WORDS OF {part.upper()} NUMBER {utt}\n")
        (d / f"{spk}-{chap}.trans.txt").write_text("".join(lines))


def test_librispeech_prepare_960(tmp_path):
    parts = ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100", "train-clean-360",
             "train-other-500"]
    make_librispeech(tmp_path / "dl", parts)
    proc = sh("recipes/librispeech/prepare.sh", *PARTIAL, tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    data = tmp_path / "data"
    assert sorted(p.name for p in data.iterdir()) == sorted(
        ["dev", "dev_clean", "dev_other", "test_clean", "test_other", "train_100", "train_960"])
    train = read_table(data / "train_960" / "text")
    assert len(train) == 6 and {t.split()[2] for _, t in train} == {"TRAIN-CLEAN-100", "TRAIN-CLEAN-360", "TRAIN-OTHER-500"}
    assert len(read_table(data / "dev" / "wav.scp")) == 4
    scp = read_table(data / "test_clean" / "wav.scp")
    assert scp[0] == ["102-2002-0000", str(tmp_path / "dl" / "LibriSpeech" / "test-clean" / "102" / "2002" / "102-2002-0000.flac")]


def test_librispeech_prepare_100_only(tmp_path):
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100"])
    proc = sh("recipes/librispeech/prepare.sh", *PARTIAL, tmp_path / "dl" / "LibriSpeech", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "data" / "train_100" / "text").is_file()
    assert not (tmp_path / "data" / "train_960").exists()
    assert "--train_set train_100" in proc.stderr


def test_librispeech_missing_part(tmp_path):
    make_librispeech(tmp_path / "dl", ["dev-clean"])
    proc = sh("recipes/librispeech/prepare.sh", *PARTIAL, tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 1 and "dev-other not found" in proc.stderr


def test_fsdd_download_with_local_dir_and_prepare(tmp_path, fsdd_dir):
    proc = sh("recipes/fsdd/download.sh", "--fsdd_dir", fsdd_dir, tmp_path / "dl")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dl" / "recordings").resolve() == fsdd_dir.resolve()
    proc = sh("recipes/fsdd/prepare.sh", "--num_train", 3, "--num_dev", 1, "--num_test", 2, "--num_test_unseen", 2,
              tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    sets = ("train", "dev", "test", "test_unseen")
    assert [len(read_table(tmp_path / "data" / s / "text")) for s in sets] == [3, 1, 2, 2]
    assert all(k.startswith("yweweler_") for k, _ in read_table(tmp_path / "data" / "test_unseen" / "text"))


def test_tiny_recipe(tmp_path):
    assert "nothing to download" in sh("recipes/tiny_en/download.sh", tmp_path / "dl").stderr
    proc = sh("recipes/tiny_en/prepare.sh", "--num_train", 2, "--num_dev", 1, "--num_test", 1, tmp_path / "dl",
              tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    text = read_table(tmp_path / "data" / "train" / "text")
    assert len(text) == 2 and all(t.isupper() for _, t in text)


def test_prepare_usage_error(tmp_path):
    proc = sh("recipes/tiny_zh/prepare.sh", tmp_path / "only_one")
    assert proc.returncode == 1 and "expected DOWNLOAD_DIR DATA_DIR" in proc.stderr


def test_every_corpus_with_a_published_size_refuses_a_partial_copy_unless_asked_for(tmp_path, fsdd_dir):
    """Issue 57, S13: the one count check (wenet_udps.corpora.common.check_counts) in every recipe that has a
    published size: LibriSpeech (and mini LibriSpeech) parts, AISHELL-1's sets, FSDD's speakers."""
    make_librispeech(tmp_path / "dl", ["dev-clean", "dev-other", "test-clean", "test-other", "train-clean-100"])
    proc = sh("recipes/librispeech/prepare.sh", tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 2 and "librispeech: error: " in proc.stderr
    assert "is not the whole corpus (librispeech dev-clean: 2 of its 2703 utterances)" in proc.stderr
    assert sh("recipes/librispeech/prepare.sh", *PARTIAL, tmp_path / "dl", tmp_path / "data").returncode == 0
    assert (tmp_path / "data" / "test_clean" / "partial_corpus").read_text() == \
        "librispeech test-clean: 2 of its 2620 utterances\n"
    # AISHELL-1 (prepared in shell): the same check on each prepared set
    (tmp_path / "ai" / "data_aishell" / "transcript").mkdir(parents=True)
    (tmp_path / "ai" / "data_aishell" / "transcript" / "aishell_transcript_v0.8.txt").write_text(
        "".join(f"BAC009S0002W012{i} 你 好\n" for i in range(3)), encoding="utf-8")
    for split in ("train", "dev", "test"):
        (tmp_path / "ai" / "data_aishell" / "wav" / split / "S0002").mkdir(parents=True)
        (tmp_path / "ai" / "data_aishell" / "wav" / split / "S0002" / f"BAC009S0002W012{'trd'.index(split[0])}.wav"
         ).touch()
    proc = sh("recipes/aishell/prepare.sh", tmp_path / "ai", tmp_path / "ai_data")
    assert proc.returncode == 1 and "(aishell train: 1 of its 120098 utterances)" in proc.stderr
    assert sh("recipes/aishell/prepare.sh", *PARTIAL, tmp_path / "ai", tmp_path / "ai_data").returncode == 0
    assert (tmp_path / "ai_data" / "dev" / "partial_corpus").read_text() == "aishell dev: 1 of its 14326 utterances\n"
    # FSDD: a known speaker short of their 500 recordings
    rec = tmp_path / "rec"
    rec.mkdir()
    for wav in sorted(Path(fsdd_dir).glob("*_theo_*.wav")) + sorted(Path(fsdd_dir).glob("*_george_*.wav"))[:-1]:
        (rec / wav.name).symlink_to(wav)
    opts = ["--num_train", 3, "--num_dev", 1, "--num_test", 2, "--unseen_speaker", "none"]
    proc = sh("recipes/fsdd/prepare.sh", *opts, rec, tmp_path / "fsdd")
    assert proc.returncode == 2 and "fsdd: error: " in proc.stderr and "(fsdd george: 499 of its 500 " in proc.stderr
    proc = sh("recipes/fsdd/prepare.sh", *opts, *PARTIAL, rec, tmp_path / "fsdd")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fsdd" / "test" / "partial_corpus").read_text() == "fsdd george: 499 of its 500 utterances\n"
