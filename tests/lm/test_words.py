"""The word LM of joint_ctc_attention_lm (wenet_udps.lm.words): a word scored when it ends, as the lexicon search
scores it; only LM words spelled; where words end for each kind of units; and in the joint search itself."""
import math

import pytest
import torch

from tests.lm.lm_helpers import emissions, need_flashlight, need_lmplz, write_units
from tests.lm.test_search import small_bpe, write_arpa
from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.build import build_arpa
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.text import BpeTokenizer, CharTokenizer
from wenet_udps.lm.words import word_rule
from wenet_udps.transformer.decoder import TransformerDecoder
from wenet_udps.transformer.joint_search import joint_beam_search
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.text_norm import CJK

A, B, SPACE, EOS = 2, 3, 4, 5   # the letters' units: <blank> <unk> a b ▁ <sos/eos>


def test_a_word_costs_its_lm_score_when_it_ends(tmp_path, letters):
    """log10 probabilities of the ARPA file: p(ab | <s>) = backoff(<s>) + p(ab) = -0.3 - 0.1; the end of the
    sentence p(</s> | ab) = -0.3 - 1.0; each scaled by lm_weight 2, each word + word_score 0.5."""
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.1, "ba": -3.0})
    words = LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=2.0, word_score=0.5)).word_scorer()
    assert words.rule == "space"
    start = words.initial()
    assert words.allowed(start) == ([A, B], True)  # a word's first letter, or the empty sentence's end
    (after_a, d_a), (after_b, d_b), (_, d_space), (_, d_eos) = words.extend(start, [A, B, SPACE, EOS], EOS)
    assert (d_a, d_b, d_space) == (0.0, 0.0, -math.inf)
    assert d_eos == pytest.approx(2.0 * -0.5)  # the empty sentence: the file's bigram "<s> </s>"
    (ab, d_ab), (_, d_aa) = words.extend(after_a, [B, A], EOS)
    assert (d_ab, d_aa) == (0.0, -math.inf)  # "aa" begins no word
    assert words.allowed(ab) == ([SPACE], True)
    (spaced, d_word), (_, d_end) = words.extend(ab, [SPACE, EOS], EOS)
    assert d_word == pytest.approx(2.0 * -0.4 + 0.5)
    assert d_end == pytest.approx(2.0 * -0.4 + 0.5 + 2.0 * -1.3) == pytest.approx(words.finish(ab))
    assert words.allowed(spaced) == ([A, B], False)  # after the space a word must follow
    assert words.finish(after_b) == -math.inf  # "b" is no word


def test_where_words_end_depends_on_the_units(tmp_path):
    assert word_rule({1: [2, 3]}, {"a": 2, "b": 3, "▁": 4}, 4, False) == "space"
    assert word_rule({1: [2, 3]}, {"▁he": 2, "llo": 3}, None, False) == "piece"
    assert word_rule({1: [2], 2: [3]}, {"你": 2, "好": 3}, None, True) == "whole"
    # word units with the space unit between them (tiny_en's): the space ends a word, though each word is one unit
    assert word_rule({1: [2], 2: [3]}, {"GOOD": 2, "CAT": 3, "▁": 4}, 4, False) == "space"
    assert word_rule({1: [2], 2: [3]}, {"GOOD": 2, "CAT": 3}, None, False) == "whole"  # spaced by detokenize
    with pytest.raises(UserError, match="these units do not mark the ends"):
        word_rule({1: [2, 3]}, {"a": 2, "b": 3}, None, False)


def test_bpe_words_end_where_the_next_one_starts(tmp_path):
    need_flashlight()
    tok = small_bpe(tmp_path)
    lm = write_arpa(tmp_path / "lm.arpa", {"A": -0.5, "B": -0.5, "ONE": -0.7, "TWO": -0.7})
    words = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=1.0)).word_scorer()
    assert words.rule == "piece"
    state, total, eos = words.initial(), 0.0, tok.symbol_table["<sos/eos>"]
    ids = tok.tokenize("B ONE A")[1]
    for unit in ids:
        assert unit in words.allowed(state)[0], tok.ids2tokens([unit])
        state, delta = words.extend(state, [unit], eos)[0]
        total += delta
    scored = total + words.finish(state)
    # three words and the end, each scored once: <s> B ONE A </s> under the file's backoffs
    assert scored == pytest.approx((-0.3 - 0.5) + (-0.3 - 0.7) + (-0.3 - 0.5) + (-0.3 - 1.0))


def test_the_joint_search_spells_lm_words_and_the_lm_overrules_unsure_acoustics(tmp_path, letters):
    """CTC weight 1 (the decoder weighs nothing): the joint search with the word LM is CTC + LM over LM words.
    Acoustically "ba" beats "ab"; lm_weight 2 turns it, as in the lexicon search (test_search.py)."""
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.1, "ba": -3.0})
    logp = emissions([{A: 0.45, B: 0.55}, {0: 0.99}, {A: 0.55, B: 0.45}], 6)
    torch.manual_seed(0)
    dec = TransformerDecoder(vocab_size=6, encoder_output_size=8, attention_heads=2, linear_units=16,
                             num_blocks=1).eval()
    memory, mask = torch.randn(1, 3, 8), torch.ones(1, 1, 3, dtype=torch.bool)
    got = {}
    for weight in (0.0, 2.0):
        words = LmSearch(lm, letters, 0, LmSearchConfig(lm_weight=weight)).word_scorer()
        out = joint_beam_search(dec, memory, mask, logp, 4, EOS, EOS, 0, ctc_weight=1.0, words=words)[0]
        got[weight] = letters.detokenize(out.tokens)[0]
        assert all(letters.detokenize(h)[0] in ("", "ab", "ba") for h in out.nbest), out.nbest
    assert got == {0.0: "ba", 2.0: "ab"}


def word_units(tmp_path, space: bool):
    """Units that are words (tiny_en's), with the space unit '▁' between them, or joined by spaces
    (``split_with_space``)."""
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "CAT", "FATHER", "GOOD", "WHITE"] + ["▁"] * space
                + ["<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"), split_with_space=not space)


def mandarin(tmp_path):
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "世", "界", "▁", "<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))


def code_switch(tmp_path, space: bool = True):
    """Mandarin characters and English words, with the space unit '▁' (or without): a code-switch text's units."""
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "世", "界", "IPHONE", "APP"]
                + ["▁"] * space + ["<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))


def code_switch_letters(tmp_path):
    """Mandarin characters and the English letters, with '▁': a code-switch LM's English words are spelled by
    letters (the char tokenizer's fallback for a word that is not a unit)."""
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "你", "好", "世", "界"] + list("AEHINOP")
                + ["▁", "<sos/eos>"])
    return CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))


def bpe_noise(tmp_path):
    """small_bpe's model with the non-language symbol ``<noise>`` a unit (a word of its own, with no '▁')."""
    small_bpe(tmp_path)
    units = (tmp_path / "units.txt").read_text().splitlines()
    (tmp_path / "units.txt").write_text("\n".join(units[:-1] + [f"<noise> {len(units) - 1}",
                                                               f"<sos/eos> {len(units)}"]) + "\n")
    (tmp_path / "non_lang_syms.txt").write_text("<noise>\n")
    return BpeTokenizer(symbol_table_path=str(tmp_path / "units.txt"), bpe_path=str(tmp_path / "bpe.model"),
                        non_lang_syms_path=str(tmp_path / "non_lang_syms.txt"))


# (units, LM words, the sentence the CTC emissions spell, its word count as text)
UNIT_KINDS = {
    "letters with '▁'": (lambda p: CharTokenizer(symbol_table_path=str(p / "units.txt")), ["ab", "ba", "b"],
                         "ab b ba", 3),
    "BPE": (small_bpe, ["A", "B", "C", "ONE", "TWO"], "B ONE TWO A", 4),
    # a non-language symbol after a word (hostile round: 'B<noise> ONE A' from the lexicon search, never from joint)
    "BPE with <noise>": (bpe_noise, ["A", "B", "C", "ONE", "TWO", "<noise>"], "B <noise> ONE <noise> A", 5),
    "Mandarin characters": (mandarin, ["你", "好", "世", "界"], "你好世界", 1),
    # a character LM (by the majority of its words) that holds English words (issue 80: 'IPHONEAPP')
    "Mandarin characters and English words": (code_switch, ["你", "好", "世", "界", "IPHONE", "APP"],
                                              "你好 IPHONE APP 世界", 4),
    # the same LM on letters: the joint mode wrote only the characters ('你好 世 界 世 界 世界', issue 80)
    "Mandarin characters and English letters": (code_switch_letters, ["你", "好", "世", "界", "IPHONE", "APP"],
                                                "你好 IPHONE APP 世界", 4),
    "words with '▁'": (lambda p: word_units(p, True), ["CAT", "FATHER", "GOOD", "WHITE"], "GOOD FATHER WHITE CAT", 4),
    "words spaced": (lambda p: word_units(p, False), ["CAT", "FATHER", "GOOD", "WHITE"], "GOOD FATHER WHITE", 3),
}


@pytest.mark.parametrize("kind", list(UNIT_KINDS))
def test_the_joint_lm_mode_ends_words_where_the_lexicon_search_does_on_every_kind_of_units(tmp_path, letters,
                                                                                           kind):
    """One model (CTC emissions spelling the sentence, a decoder that weighs nothing at ctc_weight 1): the text of
    joint_ctc_attention_lm, through the one detokeniser, has the words and word count of ctc_prefix_beam_search_lm's
    first pass (issue 80: on word units with '▁' it glued the words together, 'GOODFATHERWHITECAT')."""
    make, lm_words, sentence, count = UNIT_KINDS[kind]
    tok = make(tmp_path)
    lm = write_arpa(tmp_path / "lm.arpa", {w: -0.7 for w in lm_words})
    ids = tok.tokenize(sentence)[1]
    frames = [f for i in ids for f in ({i: 0.9}, {0: 0.9})]
    vocab, eos = len(tok.symbol_table), tok.symbol_table["<sos/eos>"]
    logp = emissions(frames, vocab)
    search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=0.5))
    lexicon_text = tok.detokenize(search(logp, torch.tensor([logp.size(1)]))[0].tokens)[0]
    torch.manual_seed(0)
    dec = TransformerDecoder(vocab_size=vocab, encoder_output_size=8, attention_heads=2, linear_units=16,
                             num_blocks=1).eval()
    memory, mask = torch.randn(1, logp.size(1), 8), torch.ones(1, 1, logp.size(1), dtype=torch.bool)
    joint = joint_beam_search(dec, memory, mask, logp, 4, eos, eos, 0, ctc_weight=1.0, words=search.word_scorer())[0]
    joint_text = tok.detokenize(joint.tokens)[0]
    assert joint_text == lexicon_text == sentence
    assert len(joint_text.split()) == len(lexicon_text.split()) == count


def test_units_whose_words_read_back_glued_are_refused_naming_them(tmp_path, caplog):
    """Word units without a space unit and without split_with_space: two LM words read back as one. The joint LM
    mode refuses them; the lexicon search's modes warn (isolated words, FSDD's digits, need no boundary)."""
    need_flashlight()
    write_units(tmp_path / "units.txt", ["<blank>", "<unk>", "CAT", "GOOD", "<sos/eos>"])
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    lm = write_arpa(tmp_path / "lm.arpa", {"CAT": -0.5, "GOOD": -0.5})
    search = LmSearch(lm, tok, 0, LmSearchConfig())
    assert [r.getMessage() for r in caplog.records if "reads as one word" in r.getMessage()]
    with pytest.raises(LmError) as e:
        search.word_scorer()
    assert "do not mark where the LM's words end" in str(e.value) and "'CATGOOD'" in str(e.value)
    assert str(tmp_path / "units.txt") in str(e.value)


def test_every_non_language_symbol_is_read_back_as_a_word(tmp_path, monkeypatch):
    """The read-back check takes each non-language symbol and a word of each spelling class, not the lexicon's
    first two words: a detokeniser gluing ``<noise>`` to the word before it is named (hostile round: unchecked)."""
    need_flashlight()
    tok = bpe_noise(tmp_path)
    lm = write_arpa(tmp_path / "lm.arpa", {"A": -0.5, "B": -0.5, "ONE": -0.7, "<noise>": -0.7})
    assert LmSearch(lm, tok, 0, LmSearchConfig()).glued == ""
    monkeypatch.setattr(BpeTokenizer, "tokens2text", lambda self, tokens: "".join(tokens).replace("▁", " ").strip())
    glued = LmSearch(lm, tok, 0, LmSearchConfig()).glued
    assert "<noise>" in glued and "read back as" in glued, glued


def test_a_code_switch_character_lm_spaces_its_english_words_even_where_the_model_does_not(tmp_path):
    """A Mandarin character LM holding English words, on emissions with no '▁' between the English words: every
    *_lm mode spaces them (issue 80, second attack: the search was the character LM's, nothing between words,
    'IPHONE APP' -> 'IPHONEAPP', and the read-back check compared with the spaces removed)."""
    tok = code_switch(tmp_path)
    lm = write_arpa(tmp_path / "lm.arpa", {w: -0.7 for w in ["你", "好", "世", "界", "IPHONE", "APP"]})
    search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=0.5))
    assert search.char_lm and search.glued == ""
    ids = [tok.symbol_table[u] for u in ["你", "好", "IPHONE", "APP", "世"]]
    logp = emissions([f for i in ids for f in ({i: 0.9}, {0: 0.9})], len(tok.symbol_table))
    lexicon_text, joint_text = _lexicon_and_joint(tok, search, logp)
    assert lexicon_text == "你好 IPHONE APP 世"
    # the joint search spells '▁' where the next word is not CJK, at the acoustics' cost: never two words glued
    assert all(w in ["你", "好", "世", "界", "IPHONE", "APP"] for w in spaced_words(joint_text))


@pytest.mark.parametrize("make", [code_switch, code_switch_letters], ids=["English word units", "letters"])
def test_a_code_switch_lm_built_by_build_lm_is_decoded_by_every_lm_mode(tmp_path, make):
    """End to end (issue 80, hostile round): the LM ``build_lm --char_lm`` makes of a code-switch text holds its
    English words whole, so ctc_prefix_beam_search_lm's first pass and joint_ctc_attention_lm write them (its letters
    were the LM's words: no English word could be written)."""
    need_lmplz()
    tok = make(tmp_path)
    build_arpa(["你好 IPHONE APP 世界", "你好世界", "IPHONE APP 你好"], str(tmp_path / "cs.arpa"), order=2,
               char_lm=True)
    search = LmSearch(str(tmp_path / "cs.arpa"), tok, 0, LmSearchConfig(lm_weight=0.5))
    sentence = "你好 IPHONE APP 世界"
    logp = emissions([f for i in tok.tokenize(sentence)[1] for f in ({i: 0.9}, {0: 0.9})], len(tok.symbol_table))
    lexicon_text, joint_text = _lexicon_and_joint(tok, search, logp)
    assert search.char_lm and lexicon_text == joint_text == sentence


def _lexicon_and_joint(tok, search, logp):
    """The text ctc_prefix_beam_search_lm's lexicon search and the joint search with the LM's word scorer (a random
    one-block decoder, CTC weight 1) write from ``logp``."""
    lexicon_text = tok.detokenize(search(logp, torch.tensor([logp.size(1)]))[0].tokens)[0]
    eos = tok.symbol_table["<sos/eos>"]
    torch.manual_seed(0)
    dec = TransformerDecoder(vocab_size=len(tok.symbol_table), encoder_output_size=8, attention_heads=2,
                             linear_units=16, num_blocks=1).eval()
    memory, mask = torch.randn(1, logp.size(1), 8), torch.ones(1, 1, logp.size(1), dtype=torch.bool)
    joint = joint_beam_search(dec, memory, mask, logp, 4, eos, eos, 0, ctc_weight=1.0, words=search.word_scorer())[0]
    return lexicon_text, tok.detokenize(joint.tokens)[0]


def spaced_words(text):
    """The words of a code-switch text: each CJK character, each space-separated other word."""
    return [w for part in text.split() for w in (list(part) if all(CJK.match(c) for c in part) else [part])]


def test_a_code_switch_character_lm_on_units_without_a_space_unit_is_refused(tmp_path):
    """Without '▁' nothing can separate two English words: refused at load, naming a pair (not glued text)."""
    tok = code_switch(tmp_path, space=False)
    lm = write_arpa(tmp_path / "lm.arpa", {w: -0.7 for w in ["你", "好", "世", "界", "IPHONE", "APP"]})
    with pytest.raises(LmError) as e:
        LmSearch(lm, tok, 0, LmSearchConfig())
    assert "read back as" in str(e.value) and "IPHONE" in str(e.value) and "\n" not in str(e.value)
