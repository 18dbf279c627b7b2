"""Synthesise a tiny ASR corpus with espeak-ng: random sentences from a small word list, several voices,
random speaking rate and pitch, white/pink noise at a random SNR, 16 kHz mono 16-bit wav.

    python -m wenet_udps.corpora.tiny --lang zh --out data/tiny_zh --seed 1

writes ``OUT/{train,dev,test}/{wav.scp,text}`` (Kaldi style) and ``OUT/wav/<set>/<key>.wav``. Train, dev
and test sentences are disjoint, and dev and test say only words that training says; the whole corpus (texts,
voices and noise) is a function of the seed.
Mandarin transcripts are characters without spaces (like AISHELL); English ones are upper-case words
(like LibriSpeech).
"""
import argparse
import io
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import soundfile as sf
import soxr

from wenet_udps.corpora.common import NOISE_KINDS, add_noise, boolean, to_int16, write_kaldi_dir
from wenet_udps.corpora.tiny_lexicon import EN_WORDS, ZH_WORDS
from wenet_udps.utils.atomic import open_atomic

SAMPLE_RATE = 16000
SPLITS = ("train", "dev", "test")
VARIANTS = ("", "+m1", "+m3", "+m5", "+f1", "+f2", "+f4")


@dataclass(frozen=True)
class LangSpec:
    """How to draw and speak sentences of one language."""

    voices: Tuple[str, ...]      # espeak-ng voice names (combined with VARIANTS)
    rate: Tuple[int, int]        # words per minute range for ``-s``
    words: Tuple[str, ...]       # transcript form of each word
    spoken: Tuple[str, ...]      # what espeak-ng is given for each word
    joiner: str                  # between words in the transcript


LANGS: Dict[str, LangSpec] = {
    "zh": LangSpec(voices=("cmn-latn-pinyin",), rate=(160, 230),
                   words=tuple(w for w, _ in ZH_WORDS), spoken=tuple(p for _, p in ZH_WORDS), joiner=""),
    "en": LangSpec(voices=("en-us", "en", "en-gb-x-rp", "en-029"), rate=(140, 200),
                   words=tuple(EN_WORDS), spoken=tuple(w.lower() for w in EN_WORDS), joiner=" "),
}


@dataclass(frozen=True)
class UtteranceSpec:
    """Everything needed to render one utterance; drawn up front so the corpus does not depend on --jobs."""

    key: str
    path: str
    transcript: str
    spoken: str
    voice: str
    rate: int
    pitch: int
    noise: str
    snr_db: float
    lead_s: float
    tail_s: float
    peak: float
    noise_seed: int


def check_espeak() -> str:
    """Path of espeak-ng, or SystemExit with the install hint."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("error: espeak-ng not found on PATH; install it with: bash tools/install.sh --espeak_ng true "
                         "(or sudo apt-get install espeak-ng)")
    return exe


def draw_sentences(rng: np.random.Generator, num_words: int, count: int, *, min_words: int,
                   max_words: int) -> List[Tuple[int, ...]]:
    """``count`` distinct sentences, each a tuple of 2..6 word indices."""
    seen, out = set(), []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 100 * count + 1000:
            raise ValueError(f"cannot draw {count} distinct sentences from {num_words} words")
        n = int(rng.integers(min_words, max_words + 1))
        sent = tuple(int(i) for i in rng.integers(0, num_words, size=n))
        if sent not in seen:
            seen.add(sent)
            out.append(sent)
    return out


def within_training(sentences: List[Tuple[int, ...]], num_train: int, seed: int, *, min_words: int,
                    max_words: int) -> List[Tuple[int, ...]]:
    """``sentences`` (training's first) with every later sentence that says a word training never says drawn again
    from training's words, as AISHELL's dev and test use only training's characters: the model cannot learn a unit
    it never hears, and a mostly-unknown transcript is refused as ``unk_text``. Only a tiny ``--num_train`` draws
    again (from 240 training sentences up, seed 1 says every word in training), so larger corpora stay as they were."""
    train = sentences[:num_train]
    known_set = {w for sent in train for w in sent}
    known = sorted(known_set)
    if not known:
        return sentences
    rng = np.random.default_rng([seed, 1])   # its own stream: the first draw, voices and noise stay as they were
    seen, out = set(sentences), list(train)
    for sent in sentences[num_train:]:
        attempts = 0
        while not known_set.issuperset(sent):
            attempts += 1
            if attempts > 10000:
                raise ValueError(f"cannot draw distinct dev/test sentences from the {len(known)} words of "
                                 f"{num_train} training sentences; use a larger --num_train")
            n = int(rng.integers(min_words, max_words + 1))
            candidate = tuple(known[int(i)] for i in rng.integers(0, len(known), size=n))
            sent = sent if candidate in seen else candidate
        seen.add(sent)
        out.append(sent)
    return out


def plan_corpus(lang: str, out_dir: Path, seed: int, counts: Dict[str, int], *, min_words: int = 2,
                max_words: int = 6, snr_range: Tuple[float, float] = (15.0, 30.0)) -> Dict[str, List[UtteranceSpec]]:
    """Draw every utterance of every split from ``seed`` (no audio is rendered here)."""
    spec = LANGS[lang]
    rng = np.random.default_rng(seed)
    total = sum(counts.values())
    sentences = within_training(draw_sentences(rng, len(spec.words), total, min_words=min_words,
                                               max_words=max_words),
                                counts["train"], seed, min_words=min_words, max_words=max_words)
    plan: Dict[str, List[UtteranceSpec]] = {}
    start = 0
    for split in SPLITS:
        plan[split] = [
            draw_utterance(rng, spec, out_dir, split, f"tiny_{lang}_{split}_{i:05d}",
                           spec.joiner.join(spec.words[w] for w in sent), " ".join(spec.spoken[w] for w in sent),
                           snr_range=snr_range)
            for i, sent in enumerate(sentences[start:start + counts[split]])]
        start += counts[split]
    return plan


def draw_utterance(rng: np.random.Generator, spec: LangSpec, out_dir: Path, split: str, key: str, transcript: str,
                   spoken: str, *, snr_range: Tuple[float, float] = (15.0, 30.0)) -> UtteranceSpec:
    """One utterance's voice, rate, pitch, noise and padding drawn from ``rng`` (always in this order)."""
    voice = spec.voices[int(rng.integers(len(spec.voices)))] + VARIANTS[int(rng.integers(len(VARIANTS)))]
    return UtteranceSpec(
        key=key,
        path=str((out_dir / "wav" / split / f"{key}.wav").resolve()),
        transcript=transcript,
        spoken=spoken,
        voice=voice,
        rate=int(rng.integers(spec.rate[0], spec.rate[1] + 1)),
        pitch=int(rng.integers(30, 71)),
        noise=NOISE_KINDS[int(rng.integers(len(NOISE_KINDS)))],
        snr_db=float(rng.uniform(*snr_range)),
        lead_s=float(rng.uniform(0.05, 0.25)),
        tail_s=float(rng.uniform(0.05, 0.25)),
        peak=float(rng.uniform(0.3, 0.9)),
        noise_seed=int(rng.integers(2 ** 31)),
    )


def render(utt: UtteranceSpec) -> float:
    """Synthesise, resample, pad, add noise and write one utterance; returns its duration in seconds."""
    cmd = ["espeak-ng", "-v", utt.voice, "-s", str(utt.rate), "-p", str(utt.pitch), "--stdout", utt.spoken]
    proc = subprocess.run(cmd, capture_output=True, check=False)
    if proc.returncode != 0 or not proc.stdout:
        raise RuntimeError(f"espeak-ng failed for {utt.key} ({' '.join(cmd)}): {proc.stderr.decode(errors='replace')}")
    audio, rate = sf.read(io.BytesIO(proc.stdout), dtype="float64")
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    audio = soxr.resample(audio, rate, SAMPLE_RATE)
    audio = np.concatenate([np.zeros(int(utt.lead_s * SAMPLE_RATE)), audio, np.zeros(int(utt.tail_s * SAMPLE_RATE))])
    audio = add_noise(audio, snr_db=utt.snr_db, kind=utt.noise, rng=np.random.default_rng(utt.noise_seed))
    Path(utt.path).parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(utt.path, "wb") as f:
        sf.write(f, to_int16(audio, peak=utt.peak), SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return audio.shape[0] / SAMPLE_RATE


def build(lang: str, out_dir: Path, seed: int, counts: Dict[str, int], *, jobs: int = 2,
          biasing: bool = False) -> Dict[str, float]:
    """Render the corpus and write the Kaldi dirs; returns seconds of audio per split. ``biasing`` adds the
    biasing sets (wenet_udps/corpora/tiny_biasing.py) and, for Mandarin, training utterances of their homophones."""
    if lang not in LANGS:
        raise ValueError(f"unknown --lang {lang!r}; valid choices: {', '.join(sorted(LANGS))}")
    check_espeak()
    plan = plan_corpus(lang, out_dir, seed, counts)
    splits = SPLITS
    if biasing:
        from wenet_udps.corpora import tiny_biasing   # imported here: it builds on this module's plan
        bias = tiny_biasing.plan_biasing(lang, out_dir, seed, plan["train"])
        plan["train"] = plan["train"] + bias.train_extra
        plan.update(bias.utts)
        splits = SPLITS + tiny_biasing.BIAS_SPLITS
    all_utts = [u for split in splits for u in plan[split]]
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        durations = list(pool.map(render, all_utts, chunksize=16))
    seconds: Dict[str, float] = {}
    pos = 0
    for split in splits:
        n = len(plan[split])
        seconds[split] = float(sum(durations[pos:pos + n]))
        pos += n
        write_kaldi_dir(out_dir / split, ((u.key, u.path, u.transcript) for u in plan[split]))
    if biasing:
        tiny_biasing.write_lists(out_dir, bias, seed)
    return seconds


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", required=True, choices=sorted(LANGS))
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num_train", type=int, default=800)
    parser.add_argument("--num_dev", type=int, default=60)
    parser.add_argument("--num_test", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2, help="parallel synthesis processes")
    parser.add_argument("--biasing", type=boolean, default=False,
                        help="true: add the biasing sets dev_biasing and test_biasing with their hotword lists")
    args = parser.parse_args(argv)
    counts = {"train": args.num_train, "dev": args.num_dev, "test": args.num_test}
    if min(counts.values()) < 0:
        parser.error("utterance counts must be >= 0")
    start = time.time()
    seconds = build(args.lang, args.out, args.seed, counts, jobs=args.jobs, biasing=args.biasing)
    summary = ", ".join(f"{s}: {seconds[s] / 60:.1f} min" for s in seconds)
    print(f"tiny_{args.lang} corpus in {args.out} ({summary}) built in {time.time() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
