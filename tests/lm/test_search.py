"""The LM search on hand-made CTC emissions: the LM changes the answer where the acoustics are unsure, words are
joined as the units say (BPE pieces at '▁', letters with the space unit, Mandarin characters with nothing)."""
import sys

import pytest
import sentencepiece as spm
import torch

from tests.lm.lm_helpers import emissions, need_flashlight, write_units
from wenet_udps.lm.arpa import LmError, is_char_lm
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.lm.tools import LmToolsMissing
from wenet_udps.text import BpeTokenizer, CharTokenizer
from wenet_udps.transformer.search import ctc_prefix_beam_search


def write_arpa(path, unigrams):
    """A bigram ARPA file (KenLM reads no unigram LM): unigrams {word: log10 prob} plus <unk>, <s>, </s>, and one
    bigram that changes no test's answer."""
    uni = {"<unk>": -2.0, "<s>": -99.0, "</s>": -1.0, **unigrams}
    lines = ["\\data\\", f"ngram 1={len(uni)}", "ngram 2=1", "", "\\1-grams:"]
    lines += [f"{p}\t{w}\t-0.3" for w, p in uni.items()]
    lines += ["", "\\2-grams:", "-0.5\t<s> </s>"]
    path.write_text("\n".join(lines + ["", "\\end\\", ""]), encoding="utf-8")
    return str(path)


def decode(search, logp):
    return search(logp, torch.tensor([logp.size(1)]))[0]


def test_lm_weight_overrules_unsure_acoustics(tmp_path, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.1, "ba": -3.0})
    # Frame 0 leans to b, frame 2 to a: acoustically "ba" (0.55 * 0.55) beats "ab" (0.45 * 0.45).
    logp = emissions([{2: 0.45, 3: 0.55}, {0: 0.99}, {2: 0.55, 3: 0.45}], 6)
    plain = decode(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=0.0, beam_size=4)), logp)
    fused = decode(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=2.0, beam_size=4)), logp)
    assert letters.detokenize(plain.tokens)[0] == "ba"
    assert letters.detokenize(fused.tokens)[0] == "ab"
    assert sorted(map(tuple, fused.nbest)) == [(2, 3), (3, 2)] and fused.nbest_scores[0] >= fused.nbest_scores[1]


def test_letters_join_words_with_the_space_unit(tmp_path, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.5, "ba": -0.5})
    logp = emissions([{2: 0.9}, {3: 0.9}, {4: 0.9}, {3: 0.9}, {2: 0.9}], 6)
    best = decode(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=0.5)), logp)
    assert letters.detokenize(best.tokens)[0] == "ab ba"


def test_word_score_trades_deletions_for_insertions(tmp_path, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -1.0})
    # A weak second "ab": a word bonus keeps it, a penalty drops it.
    logp = emissions([{2: 0.9}, {3: 0.9}, {4: 0.6, 0: 0.4}, {2: 0.3, 0: 0.7}, {3: 0.3, 0: 0.7}], 6)
    bonus = decode(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=0.5, word_score=5.0)), logp)
    penalty = decode(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=0.5, word_score=-5.0)), logp)
    assert letters.detokenize(bonus.tokens)[0] == "ab ab"
    assert letters.detokenize(penalty.tokens)[0] == "ab"


def test_bpe_words_are_pieces_joined_at_the_marks(tmp_path):
    need_flashlight()
    text = tmp_path / "train.txt"
    text.write_text("".join(f"{s}\n" for s in ["HELLO WORLD", "HELLO THERE", "WORLD PEACE", "THE WORLD"] * 20))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "bpe"), vocab_size=16,
                                   model_type="unigram", character_coverage=1.0)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i) and not sp.is_unknown(i)]
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>"] + pieces + ["<sos/eos>"])
    tok = BpeTokenizer(symbol_table_path=str(tmp_path / "units.txt"), bpe_path=str(tmp_path / "bpe.model"))
    lm = write_arpa(tmp_path / "lm.arpa", {"HELLO": -0.6, "WORLD": -0.6, "THERE": -1.0, "PEACE": -1.0, "THE": -1.0})
    ids = tok.tokenize("HELLO WORLD")[1]
    frames = [f for i in ids for f in ({i: 0.9}, {0: 0.9})]
    best = decode(LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=0.5)), emissions(frames, len(tok.symbol_table)))
    assert best.tokens == ids and tok.detokenize(best.tokens)[0] == "HELLO WORLD"


def test_mandarin_characters_join_without_spaces(tmp_path):
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "世", "界", "▁", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    lm = write_arpa(tmp_path / "lm.arpa", {"你": -0.6, "好": -0.6, "世": -0.6, "界": -0.6})
    search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=0.5))
    assert search.char_lm and search.sil_id == 0
    best = decode(search, emissions([{2: 0.9}, {3: 0.9}, {4: 0.9}, {5: 0.9}], 8))
    assert best.tokens == [2, 3, 4, 5] and tok.detokenize(best.tokens)[0] == "你好世界"


def test_lm_the_units_cannot_spell_is_refused(tmp_path):
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    lm = write_arpa(tmp_path / "lm.arpa", {"yes": -0.5, "no": -0.5})
    with pytest.raises(LmError) as e:
        LmSearch(lm, tok, 0, LmSearchConfig())
    assert "can be spelled" in str(e.value) and "units.txt" in str(e.value) and "\n" not in str(e.value)


def test_missing_flashlight_says_how_to_install(tmp_path, monkeypatch, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.5})
    for name in ("flashlight", "flashlight.lib", "flashlight.lib.text", "flashlight.lib.text.decoder",
                 "flashlight.lib.text.decoder.kenlm"):
        monkeypatch.setitem(sys.modules, name, None)  # as if never installed (None: an import raises)
    with pytest.raises(LmToolsMissing, match="tools/install.sh --lm true"):
        LmSearch(lm, letters, 0, LmSearchConfig())


def test_char_lm_detection():
    assert is_char_lm(["<s>", "</s>", "你", "好", "世"]) and not is_char_lm(["<s>", "hello", "world"])
    # a code-switch character LM with more English word types than characters is one all the same (issue 80)
    assert is_char_lm(["<s>", "你", "好", "IPHONE", "APP", "HELLO"])
    assert not is_char_lm(["<s>", "你好", "世界", "我们", "你", "IPHONE"])  # a word LM of Mandarin words


def test_an_utterance_no_word_fits_gets_an_empty_hypothesis(tmp_path, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.5})
    best = decode(LmSearch(lm, letters, 0, LmSearchConfig()), emissions([{2: 0.99}], 6))  # one frame: no "ab"
    assert best.tokens == [] and best.nbest == [[]]


def spiky(runs):
    """Frames for (unit, frames) runs, each frame giving its unit 0.9: CTC spikes lasting several frames."""
    return [{unit: 0.9} for unit, n in runs for _ in range(n)]


def small_bpe(tmp_path):
    """A BPE model whose units mix a separate '▁' (B, C, TWO are '▁ B', '▁ C', '▁ T W O') with pieces carrying it
    ('▁A', '▁ONE')."""
    text = tmp_path / "train.txt"
    text.write_text("".join(f"{s}\n" for s in ["A B C ONE", "ONE TWO A", "B A TWO", "C A B ONE TWO"] * 20))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "bpe"), vocab_size=14,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i) and not sp.is_unknown(i)]
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>"] + pieces + ["<sos/eos>"])
    return BpeTokenizer(symbol_table_path=str(tmp_path / "units.txt"), bpe_path=str(tmp_path / "bpe.model"))


def check_long_spikes(search, tok, runs, text):
    """At lm_weight 0 the LM search's best is the plain prefix beam search's, and scores the best CTC path (every
    frame its spike's unit): a unit's later frames cost nothing extra after its word has ended."""
    logp = emissions(spiky(runs), len(tok.symbol_table))
    best = decode(search, logp)
    plain = ctc_prefix_beam_search(logp, torch.tensor([logp.size(1)]), beam_size=10)[0]
    assert tok.detokenize(best.tokens)[0] == tok.detokenize(plain.tokens)[0] == text
    assert best.score == pytest.approx(float(logp.max(-1).values.sum()), abs=1e-3)


def test_bpe_spikes_of_several_frames_cost_nothing_more(tmp_path):
    need_flashlight()
    tok = small_bpe(tmp_path)
    lm = write_arpa(tmp_path / "lm.arpa", {w: -0.7 for w in ["A", "B", "C", "ONE", "TWO"]})
    u = tok.symbol_table
    assert tok.tokenize("B TWO")[0] == ["▁", "B", "▁", "T", "W", "O"]
    # Letters run straight into the next word's '▁' (no blank between), as the AN4 model's did.
    runs = [(u["▁"], 2), (u["B"], 3), (u["▁"], 2), (u["C"], 2), (u["▁"], 3), (u["T"], 2), (u["W"], 3), (u["O"], 2),
            (u["▁ONE"], 3), (0, 1), (u["▁ONE"], 1), (0, 2), (u["▁A"], 3), (0, 2)]
    for weight in (0.0, 1.0):
        search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=weight))
        if weight == 0.0:
            check_long_spikes(search, tok, runs, "B C TWO ONE ONE A")
        else:  # the LM's cost of a second word does not make "ONE blank ONE" one word
            assert tok.detokenize(decode(search, emissions(spiky(runs), len(u))).tokens)[0] == "B C TWO ONE ONE A"


def test_letter_spikes_of_several_frames_cost_nothing_more(tmp_path, letters):
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.5, "ba": -0.5, "b": -0.5})
    runs = [(2, 2), (3, 3), (4, 2), (3, 2), (4, 3), (3, 2), (0, 1), (2, 3), (0, 2)]  # ab b ba, spaces after b's
    check_long_spikes(LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=0.0)), letters, runs, "ab b ba")


def test_mandarin_spikes_of_several_frames_cost_nothing_more(tmp_path):
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "世", "界", "▁", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    lm = write_arpa(tmp_path / "lm.arpa", {"你": -0.6, "好": -0.6, "世": -0.6, "界": -0.6})
    runs = [(2, 2), (0, 1), (3, 3), (0, 1), (3, 2), (0, 1), (4, 3), (0, 2), (5, 2), (0, 1)]
    check_long_spikes(LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=0.0)), tok, runs, "你好好世界")
