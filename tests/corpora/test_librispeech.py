"""wenet_udps.corpora.librispeech and the mini LibriSpeech recipe's stages -1 and 0 on LibriSpeech-format trees
of real FLAC files: speaker-disjoint splits, with and without dev-clean-2, and bad trees that lose nothing silently."""
import gzip
import os
import subprocess
from pathlib import Path

import pytest
import soundfile as sf

from tests.recipe_trees import MINI_SPEAKERS, make_mini_librispeech
from wenet_udps.corpora.librispeech import main, scan_part

ROOT = Path(__file__).resolve().parents[2]
PARTIAL = ["--allow_partial", "true"]   # the fake trees hold a few utterances of each part


def sh(*args):
    return subprocess.run(["bash", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def speakers(data_dir: Path):
    return {line.split("-", 1)[0] for line in (data_dir / "wav.scp").read_text().splitlines()}


def test_prepare_without_dev_clean_2_is_speaker_disjoint(tmp_path):
    make_mini_librispeech(tmp_path / "dl")
    proc = sh("recipes/mini_librispeech/prepare.sh", *PARTIAL, tmp_path / "dl", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    data = tmp_path / "data"
    assert speakers(data / "test") == {"4680", "1867"}
    assert speakers(data / "dev") == {"19", "2136"}
    assert speakers(data / "train") == set(MINI_SPEAKERS) - {"4680", "1867", "19", "2136"}
    assert "no dev-clean-2" in proc.stderr
    key, path = (data / "train" / "wav.scp").read_text().splitlines()[0].split(" ", 1)
    assert sf.info(path).samplerate == 16000 and Path(path).name == f"{key}.flac"
    assert (data / "train" / "text").read_text().splitlines()[0].startswith(f"{key} ")


def test_prepare_with_dev_clean_2_trains_on_the_dev_speakers(tmp_path):
    make_mini_librispeech(tmp_path / "dl", dev_clean_2=("1272", "2428"))
    proc = sh("recipes/mini_librispeech/prepare.sh", *PARTIAL, tmp_path / "dl" / "LibriSpeech", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    data = tmp_path / "data"
    assert speakers(data / "dev") == {"1272", "2428"}
    assert speakers(data / "test") == {"4680", "1867"}
    assert speakers(data / "train") == set(MINI_SPEAKERS) - {"4680", "1867"}


def test_prepare_refuses_unknown_or_overlapping_speakers(tmp_path):
    make_mini_librispeech(tmp_path / "dl")
    proc = sh("recipes/mini_librispeech/prepare.sh", "--test_speakers", "4680 999", tmp_path / "dl", tmp_path / "d")
    assert proc.returncode == 1 and "speaker(s) 999 not in this part" in proc.stderr
    proc = sh("recipes/mini_librispeech/prepare.sh", "--dev_speakers", "19 4680", tmp_path / "dl", tmp_path / "d")
    assert proc.returncode == 1 and "speaker 4680 is in both" in proc.stderr


def test_download_uses_a_copy_that_holds_train_clean_5_and_writes_nothing(tmp_path):
    make_mini_librispeech(tmp_path / "dl")
    before = sorted(str(p) for p in (tmp_path / "dl").rglob("*"))
    proc = sh("recipes/mini_librispeech/download.sh", tmp_path / "dl")
    assert proc.returncode == 0, proc.stderr
    assert "without dev-clean-2: using it as it is" in proc.stderr
    assert sorted(str(p) for p in (tmp_path / "dl").rglob("*")) == before
    proc = sh("recipes/mini_librispeech/download.sh", "--parts", "train-clean-100", tmp_path / "dl")
    assert proc.returncode == 1 and "unknown part 'train-clean-100'" in proc.stderr


def test_fetch_part_unpacks_whole_parts_only(tmp_path):
    src = make_mini_librispeech(tmp_path / "src", speakers=("19",))
    archive = tmp_path / "srv" / "train-clean-5.tar.gz"
    archive.parent.mkdir()
    subprocess.run(["tar", "-czf", archive, "-C", src, "LibriSpeech"], check=True)
    md5 = subprocess.run(["md5sum", archive], capture_output=True, text=True).stdout.split()[0]
    # A wget that serves file:// URLs from disk (fetch calls wget --continue --no-verbose --output-document=F URL).
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "wget").write_text('#!/bin/sh\ncp "${4#file://}" "${3#--output-document=}"\n')
    (tmp_path / "bin" / "wget").chmod(0o755)
    script = f". tools/log.sh; . recipes/common.sh; fetch_part file://{archive} {md5} {tmp_path}/dl train-clean-5"
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == ["LibriSpeech"]
    assert (tmp_path / "dl" / "LibriSpeech" / "train-clean-5" / "19" / "190" / "19-190.trans.txt").is_file()
    assert not (tmp_path / "dl" / "train-clean-5.tar.gz").exists()
    # A second call finds the part whole and fetches nothing (the archive is gone: a fetch would fail).
    archive.unlink()
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0 and "already unpacked" in proc.stderr


def write_chapter(root: Path, lines, flacs):
    d = root / "p" / "19" / "198"
    d.mkdir(parents=True)
    for key in flacs:
        sf.write(str(d / f"{key}.flac"), [0.0] * 800, 16000, format="FLAC")
    if lines is not None:
        (d / "19-198.trans.txt").write_text("".join(f"{ln}\n" for ln in lines))
    return root / "p"


def test_bad_tree_is_counted_and_named(tmp_path, capsys):
    part = write_chapter(tmp_path, ["19-198-0000 A B", "19-198-0001 C", "19-198-0002", "19-198-0003 NO AUDIO"],
                         ["19-198-0000", "19-198-0001", "19-198-0002", "19-198-0009"])
    assert main([str(part), str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 utterance(s), empty transcript: " + f"{part}/19/198/19-198.trans.txt:3" in err
    assert "skipped 1 utterance(s), audio without a transcript line" in err and "19-198-0009.flac" in err
    assert f"skipped 1 utterance(s), transcript line without audio: {part}/19/198/19-198.trans.txt:4" in err
    assert (tmp_path / "out" / "text").read_text() == "19-198-0000 A B\n19-198-0001 C\n"


def test_missing_trans_txt_is_named(tmp_path, capsys):
    part = write_chapter(tmp_path, None, ["19-198-0000", "19-198-0001"])
    assert main([str(part), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "skipped 2 utterance(s), no transcript file" in err and "19-198.trans.txt missing" in err
    assert "no utterance with both audio and a transcript" in err.splitlines()[-1]


@pytest.mark.parametrize("lines,message", [
    (["19-198-0000 A", "19-198-0000 B"], "trans.txt:2: duplicate key '19-198-0000' (also on line 1"),
    (["19-198-0000 A", "20-198-0001 B"], "trans.txt:2: expected '<speaker>-<chapter>-<utt> WORDS ...'"),
])
def test_malformed_transcript_is_one_line_naming_file_and_line(tmp_path, capsys, lines, message):
    part = write_chapter(tmp_path, lines, ["19-198-0000", "19-198-0001"])
    assert main([str(part), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "out").exists()


def test_scan_part_pairs_every_chapter(tmp_path):
    make_mini_librispeech(tmp_path, speakers=("19", "32"), utts=3)
    part = scan_part(tmp_path / "LibriSpeech" / "train-clean-5")
    assert len(part.rows) == 6 and not part.skipped and part.speakers() == {"19", "32"}


def serve_file_urls(tmp_path):
    """The environment of a wget that serves file:// URLs from disk (fetch calls wget --continue --no-verbose
    --output-document=F URL) and logs each call, for a local mirror."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "wget").write_text(f'#!/bin/sh\necho "$4" >> {tmp_path}/wget.log\n'
                                           'cp "${4#file://}" "${3#--output-document=}"\n')
    (tmp_path / "bin" / "wget").chmod(0o755)
    return dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")


def test_download_lm_fetches_the_named_lm_from_a_mirror_once(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    arpa = b"\\data\\\nngram 1=1\n\n\\1-grams:\n-1\t<unk>\n\n\\end\\\n"
    (mirror / "3-gram.pruned.3e-7.arpa.gz").write_bytes(gzip.compress(arpa))
    env = serve_file_urls(tmp_path)
    cmd = ["bash", "recipes/librispeech/download_lm.sh", "--lm_name", "3-gram.pruned.3e-7", "--mirror",
           f"file://{mirror}", str(tmp_path / "dl")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    got = tmp_path / "dl" / "3-gram.pruned.3e-7.arpa.gz"
    assert gzip.decompress(got.read_bytes()) == arpa
    assert (tmp_path / "wget.log").read_text() == f"file://{mirror}/3-gram.pruned.3e-7.arpa.gz\n"
    # A whole file is kept: nothing is fetched again.
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0 and "already downloaded" in proc.stderr
    assert len((tmp_path / "wget.log").read_text().splitlines()) == 1


def test_download_lm_refuses_a_cut_download_and_an_unknown_name(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    whole = gzip.compress(b"\\data\\\n" * 5000)
    (mirror / "3-gram.pruned.1e-7.arpa.gz").write_bytes(whole[:len(whole) // 2])
    env = serve_file_urls(tmp_path)
    proc = subprocess.run(["bash", "recipes/librispeech/download_lm.sh", "--mirror", f"file://{mirror}",
                           str(tmp_path / "dl")], capture_output=True, text=True, cwd=ROOT, env=env)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "3-gram.pruned.1e-7.arpa.gz is not a whole gzip file" in last
    proc = sh("recipes/librispeech/download_lm.sh", "--lm_name", "5-gram", tmp_path / "dl")
    assert proc.returncode == 1 and "--lm_name takes one of: 3-gram.pruned.1e-7 3-gram.pruned.3e-7" in proc.stderr
