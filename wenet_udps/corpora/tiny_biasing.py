"""Biasing test sets of the tiny corpora (issue 82): phrases a model trained on the corpus gets wrong without a
hotword list, each set with its list of true phrases and a list of ten times as many distractors.

    python -m wenet_udps.corpora.tiny --lang zh --out data/tiny_zh --seed 1 --biasing true

adds ``OUT/{dev,test}_biasing/{wav.scp,text,hotwords_true.txt,hotwords_distractors.txt,
hotwords_true_and_distractors.txt}`` (dev to tune the bonus on, test to report), all a function of the seed.

- Mandarin: an entity is a training word with each character replaced by a homophone, a character espeak-ng reads
  alike (``espeak-ng -v cmn -x``: the same syllable and tone) and that no word of the lexicon has; the corpus speaks
  the entity with the word's own pinyin, so its audio is the word's. The training set gains one utterance per pair
  of homophone characters (pairs that sound like no word and are no entity or distractor), so that every homophone
  is a unit heard a few times, against about 50 times for the word it sounds like. A set's sentences never say the
  word an entity of its list sounds like (the audio could not tell them apart).
- English: an entity is a word absent from training, spelled with the letters training's words have.

Distractors are entities of the same kind, never in either set's true list: Mandarin pairs of homophone characters
that sound like no word, English other absent words. Each sentence says one entity among training's words.
"""
import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple

import numpy as np

from wenet_udps.corpora.tiny import LANGS, UtteranceSpec, draw_utterance
from wenet_udps.corpora.tiny_lexicon import EN_ABSENT_WORDS, ZH_HOMOPHONE_CANDIDATES, ZH_WORDS
from wenet_udps.utils.atomic import open_atomic

BIAS_SPLITS = ("dev_biasing", "test_biasing")
NUM_ENTITIES = {"dev_biasing": 10, "test_biasing": 20}
UTTS_PER_ENTITY = 3
DISTRACTOR_RATIO = 10
LIST_FILES = ("hotwords_true.txt", "hotwords_distractors.txt", "hotwords_true_and_distractors.txt")


@dataclass(frozen=True)
class BiasingPlan:
    """The biasing sets' utterances and lists, and (Mandarin) the training utterances that teach the homophones."""

    train_extra: List[UtteranceSpec]
    utts: Dict[str, List[UtteranceSpec]]
    true: Dict[str, List[str]]
    distractors: Dict[str, List[str]]


@functools.lru_cache(maxsize=None)
def espeak_reading(text: str, voice: str = "cmn") -> str:
    """espeak-ng's phonemes of ``text`` (``-x``, nothing played); kept, as the homophone search asks each often."""
    proc = subprocess.run(["espeak-ng", "-q", "-v", voice, "-x", text], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"espeak-ng -v {voice} -x {text!r} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def zh_homophones(train_chars: Sequence[str], candidates: str) -> Dict[str, str]:
    """Training character -> the first candidate espeak-ng reads alike; each candidate serves one character."""
    by_reading: Dict[str, List[str]] = {}
    for ch in sorted(train_chars):
        by_reading.setdefault(espeak_reading(ch), []).append(ch)
    mapping: Dict[str, str] = {}
    for cand in candidates:
        if cand in train_chars:
            continue
        free = [ch for ch in by_reading.get(espeak_reading(cand), []) if ch not in mapping]
        if free:
            mapping[free[0]] = cand
    return mapping


def _sentence(rng: np.random.Generator, entity: int, known: Sequence[int], seen: Set[Tuple[int, ...]]
              ) -> Tuple[int, ...]:
    """Word indices of a new sentence: 1..4 of ``known`` with ``entity`` (a negative index) at a random place."""
    for _ in range(10000):
        words = [known[int(i)] for i in rng.integers(0, len(known), size=int(rng.integers(1, 5)))]
        words.insert(int(rng.integers(0, len(words) + 1)), entity)
        sent = tuple(words)
        if sent not in seen:
            seen.add(sent)
            return sent
    raise ValueError("cannot draw distinct biasing sentences")


def _utterances(rng, lang, out_dir, split, sentences, forms, tag: str = "") -> List[UtteranceSpec]:
    """``forms[i]`` is (transcript, spoken) of word index i (entities at negative indices); keys
    ``tiny_<lang>_<tag or split>_<n>``."""
    spec = LANGS[lang]
    return [draw_utterance(rng, spec, out_dir, split, f"tiny_{lang}_{tag or split}_{n:05d}",
                           spec.joiner.join(forms[w][0] for w in sent), " ".join(forms[w][1] for w in sent))
            for n, sent in enumerate(sentences)]


def _known_words(lang: str, train: Sequence[UtteranceSpec]) -> List[int]:
    spec = LANGS[lang]
    if spec.joiner:
        said = {w for u in train for w in u.transcript.split(spec.joiner)}
        return [i for i, w in enumerate(spec.words) if w in said]
    return [i for i, w in enumerate(spec.words) if any(w in u.transcript for u in train)]


def plan_biasing(lang: str, out_dir: Path, seed: int, train: Sequence[UtteranceSpec]) -> BiasingPlan:
    """Draw the biasing sets from ``seed`` (its own stream: the corpus ``train`` came from stays as it was)."""
    rng = np.random.default_rng([seed, 82])
    spec = LANGS[lang]
    known = _known_words(lang, train)
    forms: Dict[int, Tuple[str, str]] = {i: (spec.words[i], spec.spoken[i]) for i in known}
    need = sum(NUM_ENTITIES.values())
    if lang == "zh":
        mapping = zh_homophones(sorted({ch for i in known for ch in spec.words[i]}), ZH_HOMOPHONE_CANDIDATES)
        eligible = [i for i in known if all(ch in mapping for ch in spec.words[i])]
        entities = [(("".join(mapping[ch] for ch in spec.words[i]), spec.spoken[i]), i)
                    for i in (int(j) for j in rng.permutation(eligible)[:need])]
    else:
        letters = {ch for i in known for ch in spec.words[i]}
        absent = [w for w in EN_ABSENT_WORDS if w not in spec.words and set(w) <= letters]
        entities = [((w, w.lower()), -1) for w in (absent[int(i)] for i in rng.permutation(len(absent)))]
    if len(entities) < need:
        raise ValueError(f"only {len(entities)} biasing entities for {lang}, {need} needed")
    true: Dict[str, List[str]] = {}
    start = 0
    for split in BIAS_SPLITS:
        true[split] = [form[0] for form, _ in entities[start:start + NUM_ENTITIES[split]]]
        start += NUM_ENTITIES[split]
    taken = {t for split in BIAS_SPLITS for t in true[split]}
    train_extra: List[UtteranceSpec] = []
    if lang == "zh":
        distractors, train_entities = _zh_distractors(rng, mapping, taken)
        word_forms = {i: forms[i] for i in known}
        pairs = [(-1 - n, form) for n, form in enumerate(train_entities)]
        sentences, seen = [], set()
        for idx, form in pairs:
            word_forms[idx] = form
            sentences.append(_sentence(rng, idx, known, seen))
        train_extra = _utterances(rng, lang, out_dir, "train", sentences, word_forms, tag="train_homophones")
    else:
        rest = [form[0] for form, _ in entities[need:]]
        distractors, start = {}, 0
        for split in BIAS_SPLITS:
            size = DISTRACTOR_RATIO * NUM_ENTITIES[split]
            if start + size > len(rest):
                raise ValueError(f"only {len(rest)} English distractors, {start + size} needed")
            distractors[split] = rest[start:start + size]
            start += size
    utts: Dict[str, List[UtteranceSpec]] = {}
    start = 0
    for split in BIAS_SPLITS:
        chosen = entities[start:start + NUM_ENTITIES[split]]
        start += NUM_ENTITIES[split]
        homophone_words = {word for _, word in chosen}
        others = [i for i in known if i not in homophone_words]
        split_forms = {i: forms[i] for i in others}
        sentences, seen = [], set()
        for n, (form, _) in enumerate(chosen):
            split_forms[-1 - n] = form
            sentences += [_sentence(rng, -1 - n, others, seen) for _ in range(UTTS_PER_ENTITY)]
        utts[split] = _utterances(rng, lang, out_dir, split, sentences, split_forms)
    return BiasingPlan(train_extra=train_extra, utts=utts, true=true, distractors=distractors)


def _zh_distractors(rng: np.random.Generator, mapping: Dict[str, str], taken: Set[str]
                    ) -> Tuple[Dict[str, List[str]], List[Tuple[str, str]]]:
    """Distractors per split and training entities: pairs of homophone characters that sound like no word
    (their training characters' pinyin), each homophone in at least two training entities."""
    sound = {}
    for word, pinyin in ZH_WORDS:
        for ch, syl in zip(word, pinyin.split()):
            if ch in mapping:
                sound.setdefault(mapping[ch], syl)
    pool = sorted(sound, key=ZH_HOMOPHONE_CANDIDATES.index)
    word_sounds = {pinyin for _, pinyin in ZH_WORDS}
    used = set(taken)

    def draw(first: str = "") -> Tuple[str, str]:
        for _ in range(10000):
            a = first or pool[int(rng.integers(len(pool)))]
            b = pool[int(rng.integers(len(pool)))]
            pair = (a, b) if not first or rng.integers(2) else (b, a)
            entity, spoken = "".join(pair), " ".join(sound[c] for c in pair)
            if a != b and entity not in used and spoken not in word_sounds:
                used.add(entity)
                return entity, spoken
        raise ValueError("cannot draw distinct Mandarin distractors")

    distractors = {split: [draw()[0] for _ in range(DISTRACTOR_RATIO * NUM_ENTITIES[split])]
                   for split in BIAS_SPLITS}
    count = dict.fromkeys(pool, 0)
    train_entities = []
    for ch in pool:
        while count[ch] < 2:
            entity, spoken = draw(ch)
            for c in entity:
                count[c] += 1
            train_entities.append((entity, spoken))
    return distractors, train_entities


def write_lists(out_dir: Path, plan: BiasingPlan, seed: int) -> None:
    """The three hotword files of each biasing set (the mixed list in an order drawn from the seed)."""
    for split in BIAS_SPLITS:
        true, distractors = plan.true[split], plan.distractors[split]
        mixed = [(true + distractors)[int(i)] for i in np.random.default_rng([seed, 82, 1]).permutation(
            len(true) + len(distractors))]
        for name, phrases in zip(LIST_FILES, (true, distractors, mixed)):
            with open_atomic(out_dir / split / name, "w", encoding="utf-8") as f:
                f.write("".join(p + "\n" for p in phrases))
