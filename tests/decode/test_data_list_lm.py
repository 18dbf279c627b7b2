"""decode_dataset with a word LM checks the references of the utterances it decoded against the LM's words (check_lm's
check, lm.arpa.check_oov): an LM lacking most of them (built for another corpus) is one warning naming the list and
the LM, from recognize and the Python API alike (issue 57 M14; before, only check_lm warned)."""
import logging
import tarfile

import pytest
import torch

import wenet_udps
from tests.decode.decode_helpers import write_clips, write_list
from tests.lm.lm_helpers import need_flashlight, need_lmplz
from tests.lm.test_search import write_arpa
from tests.train.train_helpers import WORDS, make_model_dir, tiny_config
from wenet_udps.bin import recognize
from wenet_udps.config import finalize_config
from wenet_udps.lm.build import build_arpa
from wenet_udps.model_builder import build_model
from wenet_udps.train.checkpoint import save_yaml


@pytest.fixture
def exp(tmp_path):
    need_lmplz()
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    clips = write_clips(tmp_path, 3)  # references ZERO, ONE, TWO
    return {"dir": tmp_path, "conf": conf, "ckpt": ckpt, "clips": clips,
            "list": write_list(clips, tmp_path / "test.list")}


def lm_of(path, words):
    return build_arpa([" ".join(words[i:] + words[:i]) for i in range(len(words))] * 3, str(path), order=2).path


def test_recognize_with_an_lm_lacking_most_reference_words_warns_naming_list_and_lm(exp, capsys):
    other = lm_of(exp["dir"] / "other.arpa", ["ZERO", "NINE", "EIGHT"])
    same = lm_of(exp["dir"] / "same.arpa", WORDS)
    for lm in (other, same):
        recognize.main(["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data",
                        str(exp["list"]), "--result_dir", str(exp["dir"] / "res"), "--modes",
                        "ctc_prefix_beam_search_lm", "--lm", lm, "--beam_size", "2"])
        err = capsys.readouterr().err
        warned = [line for line in err.splitlines() if "WARNING" in line and "another corpus" in line]
        if lm == other:
            assert len(warned) == 1, err
            assert f"66.7 % of the 3 words of the references of {exp['list']} are not in the LM {other}" in warned[0]
        else:
            assert not warned, err
    assert (exp["dir"] / "res" / "ctc_prefix_beam_search_lm" / "text").is_file()


def test_api_decode_list_warns_the_same_for_raw_and_shard_lists_and_not_without_references(exp, caplog):
    other = lm_of(exp["dir"] / "other.arpa", ["ZERO", "NINE", "EIGHT"])
    model = wenet_udps.load_model(str(exp["dir"]), checkpoint="avg.pt")
    with caplog.at_level(logging.WARNING):
        model.decode_list(str(exp["list"]), modes=["ctc_prefix_beam_search_lm"], lm=other, beam_size=2)
    warned = [r.getMessage() for r in caplog.records if "another corpus" in r.getMessage()]
    assert len(warned) == 1 and f"the references of {exp['list']}" in warned[0] and other in warned[0]
    caplog.clear()
    shard = exp["dir"] / "shard.tar"  # the transcripts of a shard list are its .txt members
    with tarfile.open(shard, "w") as tar:
        for i, clip in enumerate(exp["clips"]):
            (exp["dir"] / f"{clip.stem}.txt").write_text(WORDS[i])
            tar.add(str(clip), arcname=f"{clip.stem}.wav")
            tar.add(str(exp["dir"] / f"{clip.stem}.txt"), arcname=f"{clip.stem}.txt")
    (exp["dir"] / "shards.list").write_text(f"{shard}\n")
    with caplog.at_level(logging.WARNING):
        model.decode_list(str(exp["dir"] / "shards.list"), modes=["ctc_prefix_beam_search_lm"], lm=other,
                          data_type="shard", beam_size=2)
    warned = [r.getMessage() for r in caplog.records if "another corpus" in r.getMessage()]
    assert len(warned) == 1 and "66.7 % of the 3 words of the references of" in warned[0], warned
    caplog.clear()
    scp = exp["dir"] / "wav.scp"  # no transcripts: nothing to check, nothing said
    scp.write_text("".join(f"{p.stem} {p}\n" for p in exp["clips"]))
    with caplog.at_level(logging.WARNING):
        report = model.decode_list(str(scp), modes=["ctc_prefix_beam_search_lm"], lm=other, beam_size=2)
    assert report.utterances == 3 and not [r for r in caplog.records if "another corpus" in r.getMessage()]


def _word_units_model(tmp_path):
    """tiny_en's kind of units (each LM word one unit, '▁' a unit of its own), a model on them, 3 clips and an LM of
    the words: (model, clips, the LM options: a word bonus, so that an untrained model's lines are not empty)."""
    need_flashlight()
    units = tmp_path / "units.txt"
    units.write_text("".join(f"{t} {i}\n" for i, t in enumerate(["<blank>", "<unk>", *WORDS, "▁", "<sos/eos>"])))
    config = finalize_config(tiny_config(units))
    save_yaml(config, str(tmp_path / "train.yaml"))
    torch.manual_seed(1)
    torch.save(build_model(config).state_dict(), tmp_path / "avg.pt")
    clips = write_clips(tmp_path, 3)
    lm = write_arpa(tmp_path / "lm.arpa", {w: -1.0 for w in WORDS})
    model = wenet_udps.load_model(str(tmp_path), checkpoint="avg.pt")
    return model, clips, {"lm": lm, "lm_weight": 0.5, "word_score": 3.0}


def test_the_joint_lm_mode_spaces_words_on_word_units_with_the_space_unit(tmp_path):
    """Issue 80 case 1 (tiny_en's units: each LM word one unit, '▁' a unit of its own): joint_ctc_attention_lm wrote
    every line as one glued word ('FIVEFIVEFIVE...'). Through the API's transcribe and decode_list (recognize's
    decode_dataset), the same model and LM: every word of either mode's lines is an LM word."""
    model, clips, options = _word_units_model(tmp_path)
    modes = ["ctc_prefix_beam_search_lm", "joint_ctc_attention_lm"]
    texts = {m: [model.transcribe(str(c), mode=m, **options) for c in clips] for m in modes}
    listed = model.decode_list(str(write_list(clips, tmp_path / "test.list")), modes=modes, **options).texts
    for mode in modes:
        assert list(listed[mode].values()) == texts[mode]
        assert all(len(t.split()) > 1 and set(t.split()) <= set(WORDS) for t in texts[mode]), (mode, texts[mode])


@pytest.mark.parametrize("mode", ["ctc_prefix_beam_search_lm", "attention_rescoring_lm", "joint_ctc_attention_lm"])
def test_timestamps_in_the_lm_modes_are_the_times_of_the_units_the_search_emitted(tmp_path, mode):
    """Issue 80 round 7, F9: transcribe(timestamps=True) in ctc_prefix_beam_search_lm and attention_rescoring_lm was
    a ValueError traceback ('35 tokens cannot be aligned to 18 CTC frames'): the LM search emits a word a frame and
    puts the space unit between two words, which CTC had not emitted there. The space may take no frame: every word
    has its frames, in order, and a space not emitted sits at the boundary of its words."""
    model, clips, options = _word_units_model(tmp_path)
    skipped = 0
    for clip in clips:
        out = model.transcribe(str(clip), mode=mode, timestamps=True, **options)
        assert out["text"] == model.transcribe(str(clip), mode=mode, **options)
        tokens = out["tokens"]
        assert " ".join(t["token"] for t in tokens if t["token"] != "▁") == out["text"] and len(tokens) > 1
        assert [t["token"] == "▁" for t in tokens] == [i % 2 == 1 for i in range(len(tokens))]
        assert all(before["end"] <= after["start"] for before, after in zip(tokens, tokens[1:]))
        words = [t for t in tokens if t["token"] != "▁"]
        assert all(t["end"] > t["start"] for t in words)
        skipped += sum(t["start"] == t["end"] for t in tokens if t["token"] == "▁")
    assert skipped or mode == "joint_ctc_attention_lm"   # the case of the finding: spaces CTC did not emit
