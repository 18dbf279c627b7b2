"""Issue 57, M13: ``--lm_weight 1e6`` gave all-empty hypotheses without a word. The weight is bounded (refused above
``LM_WEIGHT_MAX``: tests/decode/test_option_entry_points.py), and a decode whose every hypothesis in a mode is empty
although the audio is not silent warns, naming the mode and the option that likely caused it."""
from types import SimpleNamespace

import torch

from tests.lm.lm_helpers import need_flashlight, need_lmplz
from tests.train.train_helpers import WORDS, make_model_dir, write_data_list
from wenet_udps.bin import recognize
from wenet_udps.decode.data_list import all_empty_warning, not_silent
from wenet_udps.lm.build import build_arpa


def test_the_warning_names_the_mode_and_the_likely_option():
    lm = {"lm_search": SimpleNamespace(conf=SimpleNamespace(lm_weight=5.0, word_score=-20.0))}
    empty = {"a": "", "b": " "}
    warning = all_empty_warning("attention_rescoring_lm", empty, 2, lm)
    assert warning.startswith("attention_rescoring_lm: all 2 hypotheses are empty, though 2 utterance(s) are not "
                              "silent") and "--lm_weight 5" in warning and "--word_score -20" in warning
    assert "is it trained" in all_empty_warning("attention", empty, 1, {})
    assert all_empty_warning("attention_rescoring_lm", {"a": "", "b": "ONE"}, 2, lm) is None
    assert all_empty_warning("attention_rescoring_lm", empty, 0, lm) is None  # silence: empty is right


def test_an_empty_attention_decode_at_a_wide_beam_names_the_beam_not_the_model():
    """Issue 80, I: ``attention`` at ``--beam_size 1000`` gave 30 empty hypotheses and the warning asked whether the
    model was trained; a wide search finds the hypothesis the decoder scores highest, often the empty one."""
    empty = {"a": "", "b": ""}
    warning = all_empty_warning("attention", empty, 2, {}, beam_size=1000)
    assert "--beam_size 1000 is the likely cause" in warning and "is it trained" not in warning
    assert "decode at --beam_size 10 (WeNet's), with --length_penalty > 0, or in attention_rescoring" in warning
    assert "is it trained" in all_empty_warning("attention", empty, 2, {}, beam_size=10)
    assert "is it trained" in all_empty_warning("attention", empty, 2, {"length_penalty": 1.0}, beam_size=1000)


def test_silence_and_a_steady_sound_are_silent_speech_is_not():
    t = torch.arange(200, dtype=torch.float32)
    assert not not_silent(torch.full((200, 40), -15.9))                        # digital silence
    assert not not_silent(20 + 0.3 * torch.sin(t)[:, None].expand(200, 40))   # a steady tone
    assert not_silent(torch.where(t < 100, 10.0, 16.0)[:, None].expand(200, 40))


def test_recognize_warns_when_an_lm_empties_every_hypothesis(tmp_path, fsdd_dir, capsys):
    need_lmplz()
    need_flashlight()
    conf, ckpt = make_model_dir(tmp_path, att_udps=False)
    data = tmp_path / "test.list"
    write_data_list(fsdd_dir, data, 3)
    build_arpa([w for w in WORDS for _ in range(3)], str(tmp_path / "lm.arpa"), order=2)
    common = ["--config", str(conf), "--checkpoint", str(ckpt), "--test_data", str(data), "--beam_size", "4",
              "--modes", "ctc_prefix_beam_search_lm", "--lm", str(tmp_path / "lm.arpa")]
    recognize.main(common + ["--result_dir", str(tmp_path / "heavy"), "--lm_weight", "5", "--word_score", "-20"])
    texts = (tmp_path / "heavy" / "ctc_prefix_beam_search_lm" / "text").read_text().splitlines()
    assert len(texts) == 3 and all(" " not in line.strip() for line in texts)  # every hypothesis empty
    warned = [line for line in capsys.readouterr().err.splitlines() if "hypotheses are empty" in line]
    assert len(warned) == 1 and "WARNING ctc_prefix_beam_search_lm: all 3" in warned[0], warned
    assert "--lm_weight 5" in warned[0]
    recognize.main(common + ["--result_dir", str(tmp_path / "bonus"), "--lm_weight", "0", "--word_score", "30"])
    assert "hypotheses are empty" not in capsys.readouterr().err
    assert any(" " in line.strip() for line in
               (tmp_path / "bonus" / "ctc_prefix_beam_search_lm" / "text").read_text().splitlines())
