"""CTC prefix beam search with a word n-gram LM (flashlight-text's lexicon decoder over KenLM, run by
:mod:`.lexicon_search` with a fixed order among equal scores), the first pass of ``ctc_prefix_beam_search_lm`` and
``attention_rescoring_lm``.

The lexicon is the LM's own vocabulary spelled with the model's units (the tokenizer's own split, so BPE words are
their pieces, the first carrying '▁'; a Mandarin character LM's words are single characters), so every word the
search emits is an LM word: an out-of-vocabulary word cannot be recognised, which is why the recipe builds the LM
from the training transcripts (and warns with the dev text's OOV rate). Between words the decoder may emit the
word-boundary unit: the space unit '▁' of a character model of spaced text, else the blank (BPE pieces and
Mandarin characters carry no separate boundary). Where a word ends is decided per word: two words of CJK characters
join without a space, any other pair is spaced (so a Mandarin character LM holding English words, a code-switch LM,
whose English words ``build_lm --char_lm`` keeps whole, spaces them with '▁', and is refused on units that have no
'▁').
A word has more than one spelling in the decoder's trie (``trie_spellings``), so that a last unit lasting several
frames (as CTC spikes do) costs nothing more than in CTC prefix beam search.
Score of a hypothesis: CTC log-probability (natural log) + lm_weight * LM log-probability (KenLM's, base 10) +
word_score * words.
"""
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch

from wenet_udps.lm.arpa import SPECIAL_WORDS, LmError, LmInfo, is_char_lm, words_of_text
from wenet_udps.lm.binary import load_kenlm, read_lm
from wenet_udps.lm.context import TriePaths, WordContext
from wenet_udps.lm.lexicon_search import LexiconBeamSearch, LexiconTrie, SearchOptions
from wenet_udps.lm.tools import import_flashlight
from wenet_udps.lm.words import WordScorer, word_rule
from wenet_udps.text.base_tokenizer import SPACE, UNK
from wenet_udps.text.char_tokenizer import CharTokenizer
from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.search import DecodeResult
from wenet_udps.utils.text_norm import CJK, CJK_RANGES


@dataclass
class LmSearchConfig:
    """lm_weight: scale of the LM's log-probability; word_score: bonus per word (> 0 fewer deletions);
    beam_size: hypotheses kept per frame (also the n-best size); beam_threshold: hypotheses further than this below
    the best are dropped."""
    lm_weight: float = 0.5
    word_score: float = 0.0
    beam_size: int = 10
    beam_threshold: float = 25.0


def spell_lexicon(words: List[str], tokenizer: Any) -> Dict[str, List[int]]:
    """word -> unit ids for every LM word the units can spell (no ``<unk>`` unit in its spelling)."""
    lexicon = {}
    for word in words:
        if word in SPECIAL_WORDS:
            continue
        ids = [tokenizer.symbol_table.get(t) for t in tokenizer.text2tokens(word)]
        if ids and None not in ids and tokenizer.unk_id not in ids:
            lexicon[word] = ids
    return lexicon


def trie_spellings(lexicon: Dict[str, List[int]], boundaries: List[int]) -> Dict[str, List[List[int]]]:
    """word -> its spellings in the decoder's trie: its units, then its units followed by each boundary unit (blank,
    and the space unit where it is the word boundary), then, where safe, its units with the last one doubled.

    Why: flashlight's lexicon decoder emits a word on the first frame of its last unit and moves to the trie's root,
    where a frame can only be the boundary unit or blank; so the further frames of that unit (a CTC spike of 2-3
    frames) were scored as blank, and a hypothesis starting a spurious word there often won (AN4 dev: 23.5 % WER at
    lm_weight 0 against prefix beam search's 16.9 %). With a boundary unit after it, a word ends on the blank (or
    space) frame after its last unit, however many frames that unit took. With the last unit doubled, it ends on the
    last of those frames when the next word follows without a blank (a BPE model's letters run straight into the
    next word's '▁'). The decoder also takes "last unit, blank, last unit" for that doubled spelling (it checks the
    blank only before a unit that starts a word), which would swallow a repeated word ("ONE ONE" -> "ONE") or read
    another word's spelling ("TOO" as "TO"): so the doubled spelling is left out where the last unit starts some
    word or the doubled spelling begins another word's spelling, and such words end on the blank after them.
    """
    firsts = {ids[0] for ids in lexicon.values()}
    prefixes = {tuple(ids[:i]) for ids in lexicon.values() for i in range(1, len(ids) + 1)}
    out = {}
    for word, ids in lexicon.items():
        spellings = [ids] + [ids + [b] for b in boundaries]
        if ids[-1] not in firsts and tuple(ids + ids[-1:]) not in prefixes:
            spellings.append(ids + ids[-1:])
        out[word] = spellings
    return out


def spaced(text: str) -> str:
    """``text`` with its words one space apart and none between two CJK characters: the form in which the
    read-back check compares a text with its words (a space next to a non-CJK word matters, issue 80)."""
    return _CJK_SPACE.sub("", " ".join(text.split()))


_CJK_SPACE = re.compile(f"(?<=[{CJK_RANGES}]) (?=[{CJK_RANGES}])")


class LmSearch:
    """Callable ``(ctc_probs (B, T, V) log-probs, ctc_lens (B,)) -> B DecodeResults`` (n-best of unit ids), the
    ``lm_search`` argument of ``ASRModel.decode``.

    Raises:
        LmToolsMissing: flashlight-text not installed.
        LmError: a missing or corrupt LM, or one whose words the units cannot spell.
    """

    def __init__(self, lm_path: str, tokenizer: Any, blank_id: int, conf: LmSearchConfig):
        _, fl_kenlm, fl_dict = import_flashlight()
        self.info: LmInfo = read_lm(lm_path)
        self.conf, self.blank_id = conf, blank_id
        self.char_lm = is_char_lm(self.info.words)
        self.non_lang_syms = frozenset(getattr(tokenizer, "non_lang_syms", ()))  # units that are words of their own
        lexicon = spell_lexicon(self.info.words, tokenizer)
        real = [w for w in self.info.words if w not in SPECIAL_WORDS]
        if not lexicon:
            raise LmError(f"no word of the LM {lm_path} ({len(real)} words, e.g. {' '.join(real[:3])!r}) can be "
                          f"spelled with the units {tokenizer.symbol_table_path}: the LM was built for another "
                          f"language or unit set")
        if len(lexicon) < len(real):
            logging.warning("%d of the LM's %d words cannot be spelled with the units %s and are left out",
                            len(real) - len(lexicon), len(real), tokenizer.symbol_table_path)
        # Word ends are decided per LM word (issue 80, second attack: a Mandarin character LM that also holds
        # English words glued them, 'IPHONE APP' -> 'IPHONEAPP'): a word of CJK characters (or, in a character LM,
        # a non-language symbol) joins a neighbour of its kind without a space; any other word is spaced, so the
        # units' space unit, where they have one, is the word boundary of any LM that holds such words.
        joining = {w for w in lexicon if all(CJK.match(c) for c in w) or (self.char_lm and w in self.non_lang_syms)}
        space = tokenizer.symbol_table.get(SPACE)
        uses_space = (isinstance(tokenizer, CharTokenizer) and space is not None and not tokenizer.split_with_space
                      and len(joining) < len(lexicon))
        self.sil_id = space if uses_space else blank_id
        words = list(lexicon) + [w for w in SPECIAL_WORDS if w in self.info.words or w == UNK]
        self.word_dict = fl_dict.Dictionary(words)
        self.lm = load_kenlm(self.info, lambda path: fl_kenlm.KenLM(path, self.word_dict))
        trie = LexiconTrie()
        start = self.lm.start(False)
        boundaries = sorted({blank_id, self.sil_id})
        for word, spellings in trie_spellings(lexicon, boundaries).items():
            index = self.word_dict.get_index(word)
            for ids in spellings:
                trie.insert(ids, index, self.lm.score(start, index)[1])
        self.spelling = {self.word_dict.get_index(w): ids for w, ids in lexicon.items()}
        self.joins = frozenset(self.word_dict.get_index(w) for w in joining)
        self.glued = self._words_read_back(lexicon, joining, tokenizer)
        if self.glued and self.char_lm:  # its English words would be glued together in every *_lm mode
            raise LmError(f"the character LM {lm_path} holds words that are not CJK characters, and {self.glued}; "
                          f"use units with the space unit '▁' (tools/make_char_units.py keeps it)")
        if self.glued:  # (the digits of FSDD are one word an utterance: their letters need no '▁')
            logging.warning("%s: an LM hypothesis of several words reads as one word", self.glued)
        self.symbols = tokenizer.symbol_table
        self._words = None
        self._words_lock = threading.Lock()  # word_scorer is made once, by whichever thread asks first
        self._paths: Optional[TriePaths] = None  # (so are the trie's paths, for hotwords)
        self.lexicon_words = frozenset(lexicon)
        self._oov_named: Set[str] = set()  # hotword words outside the lexicon, warned of once
        trie.smear()  # a prefix's look-ahead: its best word's unigram score
        self.trie = trie
        self.search = LexiconBeamSearch(trie, self.lm, self.sil_id, blank_id, SearchOptions(
            beam_size=conf.beam_size, beam_threshold=conf.beam_threshold, lm_weight=conf.lm_weight,
            word_score=conf.word_score))

    def _words_read_back(self, lexicon: Dict[str, List[int]], joining: Set[str], tokenizer: Any) -> str:
        """"" when the one detokeniser (the tokenizer's ``detokenize``, that of every mode) reads each pair of LM
        words of the kinds below, as the LM modes emit them (:meth:`units`), back as those two words (a character
        LM's run together); else why not, naming the first pair that does not.

        Why: every ``*_lm`` mode emits its words as :meth:`units` spells them, so on units that do not mark where a
        word ends (letters or word units without the space unit '▁') a hypothesis of several words reads as one.
        The kinds: every non-language symbol (``<noise>``: a unit with no '▁', glued to the word before it by a
        detokeniser that only reads '▁'), the lexicon's first two words, and the first word of each spelling class
        (one unit or several, its first unit with or without '▁', CJK or not), each pair in both orders."""
        kinds: Dict[Any, str] = {}
        for word, ids in lexicon.items():
            first = tokenizer.ids2tokens(ids[:1])[0]
            key = word if word in self.non_lang_syms else (len(ids) == 1, first.startswith(SPACE),
                                                           bool(CJK.search(word)))
            kinds.setdefault(key, word)
        sample = list(dict.fromkeys(list(lexicon)[:2] + list(kinds.values())))
        pairs = [(a, b) for a in sample for b in sample if a != b] + [(a, a) for a in sample]
        for pair in pairs:
            text = tokenizer.detokenize(self.units([self.word_dict.get_index(w) for w in pair]))[0]
            joined = all(w in joining for w in pair)
            if spaced(text) != spaced(("" if joined else " ").join(pair)):
                return (f"the units {tokenizer.symbol_table_path} do not mark where the LM's words end: the LM words "
                        f"{' '.join(pair)!r}, spelled with them, read back as {text!r}")
        return ""

    def word_scorer(self) -> WordScorer:
        """The word LM of ``joint_ctc_attention_lm`` (``lm.words``): this search's LM, lexicon and weights."""
        with self._words_lock:
            if self._words is None:
                space = self.sil_id if self.sil_id != self.blank_id else None
                rule = word_rule(self.spelling, self.symbols, space, self.char_lm)
                if self.glued:
                    raise LmError(f"joint_ctc_attention_lm scores a word when it ends, and {self.glued}; use units "
                                  f"with the space unit '▁' (or BPE pieces marking word starts)")
                # a word starts at a '▁' piece, or at a non-language symbol (a word of its own, with no '▁')
                starts = [i for s, i in self.symbols.items() if s.startswith(SPACE) or s in self.non_lang_syms]
                # a character LM's CJK characters (and symbols) join without '▁': each is a word of one unit
                joining = [self.spelling[w][0] for w in self.joins if len(self.spelling[w]) == 1 and self.char_lm]
                self._words = WordScorer(self.lm, {tuple(ids): w for w, ids in self.spelling.items()}, rule, space,
                                         starts, self.conf.lm_weight, self.conf.word_score, joining)
            return self._words

    def trie_paths(self) -> TriePaths:
        """The lexicon trie's paths that the hotwords' bonus reads (``lm.context``), made on first use."""
        with self._words_lock:
            if self._paths is None:
                self._paths = TriePaths(self.spelling, self.trie.children)
            return self._paths

    def warn_oov(self, context: ContextGraph) -> None:
        """One warning naming the words of the hotword phrases (``context.texts``) that the LM's lexicon lacks and
        no earlier warning named: the search writes LM words only, so such a phrase can never be completed in the
        *_lm modes' first pass (issue 82, F8)."""
        words = words_of_text(context.texts, self.char_lm)
        with self._words_lock:
            new = list(dict.fromkeys(w for w in words if w not in self.lexicon_words and w not in self._oov_named))
            self._oov_named.update(new)
        if new:
            logging.warning("hotwords: %d word(s) of the phrases are not words of the LM %s (%s%s): the *_lm modes "
                            "cannot write them, so a phrase holding one is never completed there; add them to the "
                            "LM's text", len(new), self.info.path, " ".join(new[:10]), " ..." if len(new) > 10 else "")

    def inserted(self) -> Tuple[int, ...]:
        """The units :meth:`units` puts between two words whether CTC emitted them there or not: the space unit,
        where the units have one (an alignment of the text lets them take no frame: ``decode.align``)."""
        return () if self.sil_id == self.blank_id else (self.sil_id,)

    def units(self, words: Sequence[int]) -> List[int]:
        """A hypothesis's word indices -> the units of their spellings, with the space unit between two words unless
        both join without one (CJK), when the units have one (so the tokenizer's detokenize gives the words' text)."""
        out: List[int] = []
        last = None
        for w in words:
            if w in self.spelling:
                if last is not None and self.sil_id != self.blank_id and not (last in self.joins and w in self.joins):
                    out.append(self.sil_id)
                out.extend(self.spelling[w])
                last = w
        return out

    @torch.no_grad()
    def __call__(self, ctc_probs: torch.Tensor, ctc_lens: torch.Tensor,
                 context: Optional[ContextGraph] = None) -> List[DecodeResult]:
        """``context``: hotwords (``transformer.context_graph``), their bonus in the search (``lm.context``); each
        n-best hypothesis's kept bonus is then in ``nbest_context`` (and in its score)."""
        probs = ctc_probs.detach().float().cpu()
        results = []
        space = self.sil_id if self.sil_id != self.blank_id else None
        if context is not None:
            self.warn_oov(context)
        for i in range(probs.size(0)):
            nbest: Dict[tuple, float] = {}
            bias = None if context is None else WordContext(context, self.spelling, self.trie_paths(), space)
            for words, score in self.search.search(probs[i, :int(ctc_lens[i])].numpy(), bias):
                # best first (ties in a fixed order); paths that merge to the same units keep the best score
                nbest.setdefault(tuple(self.units(words)), score)
            if not nbest:  # no path spells LM words (e.g. an utterance too short): an empty hypothesis
                nbest[()] = 0.0
            results.append(DecodeResult(tokens=list(next(iter(nbest))), score=next(iter(nbest.values())),
                                        nbest=[list(k) for k in nbest], nbest_scores=list(nbest.values()),
                                        nbest_context=[] if context is None else
                                        [context.final_bonus(k) for k in nbest]))
        return results
