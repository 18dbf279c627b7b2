"""wenet_udps.corpora.tiny_biasing: the tiny corpora's biasing sets (issue 82)."""
import collections

import pytest

from wenet_udps.corpora import common, tiny, tiny_biasing as tb

COUNTS = {"train": 800, "dev": 60, "test": 60}


def plan(lang, seed=1):
    base = tiny.plan_corpus(lang, tiny.Path("x"), seed, COUNTS)
    return base, tb.plan_biasing(lang, tiny.Path("x"), seed, base["train"])


@pytest.fixture(scope="module")
def zh():
    return plan("zh")


@pytest.fixture(scope="module")
def en():
    return plan("en")


def test_same_seed_same_sets_and_another_seed_others(zh):
    _, again = plan("zh")
    assert again == zh[1]
    _, other = plan("zh", seed=2)
    assert other.true != zh[1].true and other.distractors != zh[1].distractors


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_lists_are_ten_times_disjoint_and_unique(lang, zh, en):
    bias = {"zh": zh, "en": en}[lang][1]
    every_true = {p for s in tb.BIAS_SPLITS for p in bias.true[s]}
    for split in tb.BIAS_SPLITS:
        true, distractors = bias.true[split], bias.distractors[split]
        assert len(true) == tb.NUM_ENTITIES[split] and len(distractors) == tb.DISTRACTOR_RATIO * len(true)
        assert len(set(true)) == len(true) and len(set(distractors)) == len(distractors)
        assert not set(distractors) & every_true
        texts = [u.transcript for u in bias.utts[split]]
        # Each true phrase is said UTTS_PER_ENTITY times, once per sentence; no distractor is ever said.
        said = collections.Counter(p for t in texts for p in true if p in (t.split(" ") if lang == "en" else t))
        assert said == dict.fromkeys(true, tb.UTTS_PER_ENTITY)
        assert not any(d in (t.split(" ") if lang == "en" else t) for t in texts for d in distractors)


def test_english_phrases_are_absent_from_training_and_spellable(en):
    base, bias = en
    train_words = {w for u in base["train"] for w in u.transcript.split(" ")}
    letters = set("".join(train_words))
    for split in tb.BIAS_SPLITS:
        for phrase in bias.true[split] + bias.distractors[split]:
            assert phrase not in train_words and set(phrase) <= letters
        for u in bias.utts[split]:
            assert u.spoken == u.transcript.lower()
    assert bias.train_extra == []


def test_mandarin_entities_sound_like_their_word_per_espeak_ng(zh):
    base, bias = zh
    lexicon = dict(tiny.ZH_WORDS)
    lexicon_chars = set("".join(lexicon))
    for split in tb.BIAS_SPLITS:
        for entity in bias.true[split]:
            assert not set(entity) & lexicon_chars
            words = [w for w in lexicon if len(w) == len(entity) and all(
                tb.espeak_reading(a) == tb.espeak_reading(b) for a, b in zip(entity, w))]
            assert len(words) == 1, (entity, words)
            word = words[0]
            # espeak-ng reads the entity as it reads the word (syllables and tones), and the corpus speaks it so.
            assert tb.espeak_reading(entity) == tb.espeak_reading(word)
            utts = [u for u in bias.utts[split] if entity in u.transcript]
            assert utts and all(lexicon[word] in u.spoken for u in utts)
            # A set never says, as itself, a word one of its entities sounds like.
            assert not any(word in u.transcript for u in bias.utts[split])


def test_mandarin_homophones_are_units_heard_rarely_and_their_words_often(zh):
    base, bias = zh
    train = [u.transcript for u in base["train"] + bias.train_extra]
    counts = collections.Counter("".join(train))
    lexicon = [w for w, _ in tiny.ZH_WORDS]
    for split in tb.BIAS_SPLITS:
        for entity in bias.true[split] + bias.distractors[split]:
            assert not any(entity in t for t in train)      # the phrase itself is never heard
            for ch in entity:
                assert 2 <= counts[ch] <= 6, (ch, counts[ch])
        for entity in bias.true[split]:
            word = next(w for w in lexicon if all(tb.espeak_reading(a) == tb.espeak_reading(b)
                                                  for a, b in zip(entity, w)) and len(w) == len(entity))
            assert sum(t.count(word) for t in train) >= 30
    keys = [u.key for u in base["train"] + bias.train_extra]
    assert len(set(keys)) == len(keys)


def test_build_writes_sets_lists_and_leaves_the_corpus_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(tb, "NUM_ENTITIES", {"dev_biasing": 1, "test_biasing": 2})
    monkeypatch.setattr(tb, "UTTS_PER_ENTITY", 1)
    counts = {"train": 20, "dev": 2, "test": 2}
    tiny.build("en", tmp_path / "plain", seed=3, counts=counts, jobs=2)
    tiny.build("en", tmp_path / "bias", seed=3, counts=counts, jobs=2, biasing=True)
    for split in tiny.SPLITS:
        assert (tmp_path / "plain" / split / "text").read_text() == (tmp_path / "bias" / split / "text").read_text()
    for split in tb.BIAS_SPLITS:
        d = tmp_path / "bias" / split
        assert common.check_kaldi_dir(d) == tb.NUM_ENTITIES[split]
        true, distractors, mixed = ((d / name).read_text().splitlines() for name in tb.LIST_FILES)
        assert len(true) == tb.NUM_ENTITIES[split] and len(distractors) == 10 * len(true)
        assert sorted(mixed) == sorted(true + distractors)
