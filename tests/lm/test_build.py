import pytest

from tests.lm.lm_helpers import need_lmplz
from wenet_udps.lm import tools
from wenet_udps.lm.arpa import LmError, check_oov
from wenet_udps.lm.build import build_arpa
from wenet_udps.lm.tools import LmToolsMissing

SENTENCES = ["the cat sat", "the dog sat", "a cat ran", "the cat ran home", "a dog sat home"]


def test_builds_an_arpa_with_lmplz(tmp_path):
    need_lmplz()
    info = build_arpa(SENTENCES, str(tmp_path / "lm" / "lm.arpa"), order=3)
    assert info.order == 3 and len(info.counts) == 3
    assert set(info.words) == {"<unk>", "<s>", "</s>", "the", "cat", "sat", "dog", "a", "ran", "home"}
    assert not (tmp_path / "lm" / "lm.arpa.partial").exists()


def test_pruning_drops_rare_ngrams(tmp_path):
    need_lmplz()
    full = build_arpa(SENTENCES * 2 + ["the cat sat"], str(tmp_path / "full.arpa"), order=3)
    pruned = build_arpa(SENTENCES * 2 + ["the cat sat"], str(tmp_path / "pruned.arpa"), order=3, prune=[0, 2, 2])
    assert pruned.counts[0] == full.counts[0] and pruned.counts[2] < full.counts[2]


def test_character_lm_splits_mandarin(tmp_path):
    need_lmplz()
    info = build_arpa(["你好世界", "你好"], str(tmp_path / "zh.arpa"), order=2, char_lm=True)
    assert {"你", "好", "世", "界"} <= set(info.words)


def test_a_code_switch_character_lm_keeps_english_words_whole(tmp_path):
    """Issue 80 (hostile round): --char_lm split every non-space character, so a code-switch text gave the letters
    I P H O N E as unigrams. Mandarin is split into characters, English words kept whole (the char tokenizer's
    split), and a dev sentence's words are all LM words."""
    need_lmplz()
    info = build_arpa(["我 爱 IPHONE APP", "我爱APP 你好"], str(tmp_path / "cs.arpa"), order=2, char_lm=True)
    assert set(info.words) == {"<unk>", "<s>", "</s>", "我", "爱", "你", "好", "IPHONE", "APP"}
    assert check_oov(info, ["我爱 IPHONE APP"], "dev") == (0.0, 4)


def test_bad_prune_is_refused(tmp_path):
    with pytest.raises(LmError, match="prune"):
        build_arpa(SENTENCES, str(tmp_path / "x.arpa"), order=2, prune=[1, 1])


def test_missing_lmplz_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tools.sys, "executable", str(tmp_path / "python3"))
    with pytest.raises(LmToolsMissing) as e:
        build_arpa(SENTENCES, str(tmp_path / "x.arpa"))
    assert "tools/install.sh --lm true" in str(e.value) and "\n" not in str(e.value)
