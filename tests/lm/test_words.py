"""The word LM of joint_ctc_attention_lm (wenet_udps.lm.words): a word scored when it ends, as the lexicon search
scores it; only LM words spelled; where words end for each kind of units; and in the joint search itself."""
import math

import pytest
import torch

from tests.lm.lm_helpers import emissions, need_flashlight
from tests.lm.test_search import small_bpe, write_arpa
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.lm.words import word_rule
from wenet_udps.transformer.decoder import TransformerDecoder
from wenet_udps.transformer.joint_search import joint_beam_search
from wenet_udps.utils.cli import UserError

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
