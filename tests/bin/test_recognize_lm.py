"""recognize with a word LM built by lmplz, on a tiny (untrained) model and noise clips written here: the LM modes
write every utterance, emit only LM words and name the LM in decode.info; a missing, absent or corrupt LM stops
before decoding."""
import json

import numpy as np
import pytest
import soundfile as sf

from tests.lm.lm_helpers import need_build_binary, need_flashlight, need_lmplz
from tests.train.train_helpers import WORDS, make_model_dir
from wenet_udps.bin import recognize
from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.binary import write_binary
from wenet_udps.lm.build import build_arpa
from wenet_udps.utils.source_info import file_sha256, read_source

LM_MODES = ["ctc_prefix_beam_search_lm", "attention_rescoring_lm"]


def write_noise_list(tmp_path, n):
    rng = np.random.default_rng(0)
    path = tmp_path / "test.list"
    with open(path, "w") as f:
        for i in range(n):
            wav = tmp_path / f"utt{i}.wav"
            sf.write(str(wav), (0.1 * rng.standard_normal(8000 + 1600 * i)).astype(np.float32), 8000)
            f.write(json.dumps({"key": f"utt{i}", "wav": str(wav), "txt": WORDS[i]}) + "\n")
    return path


def args(conf, ckpt, data, out, *extra):
    return ["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data), "--result_dir", str(out),
            "--beam_size", "8", "--batch_size", "2", *extra]


def test_lm_modes_decode_with_an_lmplz_lm(tmp_path, capsys):
    need_lmplz()
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    data = write_noise_list(tmp_path, 3)
    info = build_arpa([w for w in WORDS for _ in range(3)], str(tmp_path / "lm.arpa"), order=2)
    out = tmp_path / "res"
    recognize.main(args(conf, ckpt, data, out, "--modes", "ctc_prefix_beam_search", *LM_MODES,
                        "--lm", str(tmp_path / "lm.arpa"), "--lm_weight", "1.0", "--word_score", "30"))
    assert "RTF" in capsys.readouterr().out
    for mode in LM_MODES:
        lines = (out / mode / "text").read_text().splitlines()
        assert sorted(line.split(" ", 1)[0] for line in lines) == ["utt0", "utt1", "utt2"]
        hyps = [line.split(" ", 1)[1] if " " in line else "" for line in lines]
        # The lexicon search emits LM words only (the units have no space: words join without one).
        assert all(h == "" or any(h.startswith(w) for w in WORDS) for h in hyps), hyps
        assert any(hyps), "a word bonus of 30 outweighs the untrained model's blanks"
        source = read_source(str(out / mode / "decode.info"))
        assert source["lm"] == info.path and source["lm_sha256"] == file_sha256(info.path)
        assert source["lm_order"] == "2" and source["lm_weight"] == "1" and source["word_score"] == "30"
    assert "lm" not in read_source(str(out / "ctc_prefix_beam_search" / "decode.info"))


def test_the_joint_lm_mode_decodes_lm_words_with_its_own_ctc_weight(tmp_path, capsys):
    """joint_ctc_attention_lm on letters with the space unit: every hypothesis is LM words (the joint search scores
    a word when it ends); decode.info names the LM and the joint mode's own ctc_weight. Letters without a word
    boundary are refused before decoding, saying why."""
    need_lmplz()
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, space=True, att_udps=False)
    data = write_noise_list(tmp_path, 3)
    info = build_arpa([w for w in WORDS for _ in range(3)], str(tmp_path / "lm.arpa"), order=2)
    out = tmp_path / "res"
    recognize.main(args(conf, ckpt, data, out, "--modes", "joint_ctc_attention_lm", "attention_rescoring_lm",
                        "--lm", info.path, "--lm_weight", "1.0", "--word_score", "30"))
    lines = (out / "joint_ctc_attention_lm" / "text").read_text().splitlines()
    hyps = [line.split(" ", 1)[1] if " " in line else "" for line in lines]
    assert len(hyps) == 3 and any(hyps) and all(w in WORDS for h in hyps for w in h.split()), hyps
    source = read_source(str(out / "joint_ctc_attention_lm" / "decode.info"))
    assert source["lm_sha256"] == file_sha256(info.path) and source["ctc_weight"] == "0.3"
    assert read_source(str(out / "attention_rescoring_lm" / "decode.info"))["ctc_weight"] == "0.0"
    other = tmp_path / "letters"
    other.mkdir()
    conf, ckpt = make_model_dir(other, att_udps=False)
    with pytest.raises(SystemExit) as e:
        recognize.main(args(conf, ckpt, data, other / "res", "--modes", "joint_ctc_attention_lm", "--lm", info.path))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "these units do not mark the ends" in err[-1] and not (other / "res").exists()


def test_kenlm_binary_decodes_as_its_arpa_and_is_named(tmp_path):
    need_lmplz()
    need_build_binary()
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    data = write_noise_list(tmp_path, 3)
    arpa = build_arpa([w for w in WORDS for _ in range(3)], str(tmp_path / "lm.arpa"), order=2)
    binary = write_binary(arpa.path, str(tmp_path / "lm.bin"))
    for name, lm in (("arpa", arpa), ("bin", binary)):
        recognize.main(args(conf, ckpt, data, tmp_path / name, "--modes", *LM_MODES, "--lm", lm.path,
                            "--lm_weight", "1.0", "--word_score", "30"))
    for mode in LM_MODES:
        assert (tmp_path / "bin" / mode / "text").read_text() == (tmp_path / "arpa" / mode / "text").read_text()
        source = read_source(str(tmp_path / "bin" / mode / "decode.info"))
        assert source["lm"] == str(tmp_path / "lm.bin") and source["lm_sha256"] == file_sha256(binary.path)
        assert source["lm_order"] == "2" and source["lm_size"] == str((tmp_path / "lm.bin").stat().st_size)
    assert any(" " in line for line in (tmp_path / "bin" / LM_MODES[0] / "text").read_text().splitlines())


def test_lm_mode_without_lm_is_a_usage_error(tmp_path, capsys):
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    data = write_noise_list(tmp_path, 1)
    with pytest.raises(SystemExit) as e:
        recognize.main(args(conf, ckpt, data, tmp_path / "res", "--modes", "attention_rescoring_lm"))
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "--lm" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        recognize.main(args(conf, ckpt, data, tmp_path / "res", "--modes", "attention_rescoring_lm",
                            "--lm", str(tmp_path / "none.arpa")))
    assert e.value.code == 2 and "none.arpa" in capsys.readouterr().err


def test_corrupt_lm_stops_before_decoding(tmp_path):
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    data = write_noise_list(tmp_path, 1)
    lm = tmp_path / "lm.arpa"
    lm.write_text("\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-1\t<s>\t0\n")
    with pytest.raises(LmError, match="truncated"):
        recognize.main(args(conf, ckpt, data, tmp_path / "res", "--modes", "ctc_prefix_beam_search_lm",
                            "--lm", str(lm)))
    assert not (tmp_path / "res" / "ctc_prefix_beam_search_lm" / "text").exists()
