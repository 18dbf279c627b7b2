"""Issue 66, case 1: the LM search gives the same n-best for the same emissions, in every call and every process.

flashlight's lexicon decoder kept, among candidates of exactly equal score, the ones its heap happened to order
first, and equal scores are common: "a word is emitted" and "the same word is still being spelled" score alike at
the start of a sentence (the trie's look-ahead is the word's score after ``<s>``) and everywhere at ``lm_weight``
0. So the n-best of one utterance held 4 or 5 hypotheses from call to call, and ``attention_rescoring_lm`` picked
the fifth when it was there. The search now ranks equal scores by what the hypotheses are.
"""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.lm.lm_helpers import need_flashlight, write_units
from tests.lm.test_search import write_arpa
from wenet_udps.lm.search import LmSearch, LmSearchConfig
from wenet_udps.text import CharTokenizer

UNITS = ["<blank>", "<unk>", "a", "b", "c", "▁", "<sos/eos>"]
WORDS = {"a": -0.9, "b": -0.9, "ab": -0.9, "ba": -0.9, "abc": -1.2, "cab": -1.2, "c": -0.9, "bb": -1.5}
SETTINGS = [(0.0, 0.0, 4), (0.5, 0.0, 4), (1.0, 0.0, 10), (0.5, 1.0, 3)]  # (lm_weight, word_score, beam)


def _emissions(seed: int) -> torch.Tensor:
    """(1, 40, V) log-probabilities: a blank-heavy, unsure CTC output, as an under-trained model gives."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(1, 40, len(UNITS), generator=g) * 2.0
    logits[..., 0] += 2.0
    logits[..., -1] = -30.0  # <sos/eos>
    return logits.log_softmax(-1)


def nbests(tmp: str, shake: bool) -> str:
    """Every setting's n-best (unit ids and the scores' exact bits) of 8 utterances, as one JSON text; with
    ``shake`` the heap is disturbed before each call (allocations of random sizes kept alive), as a long-lived
    process's heap is."""
    write_units(Path(tmp) / "units.txt", UNITS)
    tok = CharTokenizer(symbol_table_path=str(Path(tmp) / "units.txt"))
    lm = write_arpa(Path(tmp) / "lm.arpa", WORDS)
    rng, junk, out = random.Random(0), [], []
    for weight, word_score, beam in SETTINGS:
        search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=weight, word_score=word_score, beam_size=beam))
        for seed in range(8):
            if shake:
                junk.extend(bytearray(rng.randint(1, 50000)) for _ in range(rng.randint(1, 20)))
            logp = _emissions(seed)
            res = search(logp, torch.tensor([logp.size(1)]))[0]
            out.append([res.nbest, [s.hex() for s in res.nbest_scores]])
    return json.dumps(out)


def test_the_nbest_is_the_same_in_every_call(tmp_path):
    need_flashlight()
    first = nbests(str(tmp_path), shake=False)
    assert all(nbests(str(tmp_path), shake=True) == first for _ in range(3))


def test_the_nbest_is_the_same_in_another_process(tmp_path):
    need_flashlight()
    code = ("import sys; from tests.lm.test_search_ties import nbests; "
            "sys.stdout.write(nbests(sys.argv[1], shake=True))")
    other = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert other.stdout == nbests(str(tmp_path), shake=False)


@pytest.mark.parametrize("weight", [0.0, 0.7])
def test_equal_scores_are_ranked_by_the_hypotheses(tmp_path, weight):
    """Two words spelled by the same unit path score alike at lm_weight 0 and (same unigram) at any weight: the
    n-best lists both, and the order between them is fixed (the word with the smaller index first)."""
    need_flashlight()
    write_units(tmp_path / "units.txt", UNITS)
    tok = CharTokenizer(symbol_table_path=str(tmp_path / "units.txt"))
    lm = write_arpa(tmp_path / "lm.arpa", {"ab": -0.5, "ba": -0.5})
    logp = torch.full((1, 4, len(UNITS)), -20.0)
    for t, (u1, u2) in enumerate([(2, 3), (3, 2), (0, 0), (0, 0)]):
        logp[0, t, u1] = logp[0, t, u2] = 0.0  # "ab" and "ba" equally likely
    logp = logp.log_softmax(-1)
    search = LmSearch(lm, tok, 0, LmSearchConfig(lm_weight=weight, beam_size=4))
    results = [search(logp, torch.tensor([4]))[0] for _ in range(20)]
    texts = [[tok.detokenize(h)[0] for h in r.nbest] for r in results]
    assert texts[0][:2] in (["ab", "ba"], ["ba", "ab"]) and results[0].nbest_scores[0] == results[0].nbest_scores[1]
    assert all(t == texts[0] for t in texts)
