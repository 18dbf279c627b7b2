"""Fake AISHELL-1 and LibriSpeech download trees: the real folder layouts, file names and transcript formats, with
short noise recordings, for running the recipes end to end in seconds."""
from pathlib import Path
from typing import Iterable, List

import numpy as np
import soundfile as sf

RATE = 16000
WORDS = ("ALPHA BRAVO CHARLIE DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA MIKE NOVEMBER OSCAR PAPA QUEBEC "
         "ROMEO SIERRA TANGO UNIFORM VICTOR WHISKEY XRAY YANKEE ZULU").split()
HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"


def noise(path: Path, seconds: float, seed: int, fmt: str) -> None:
    """Low-level white noise, 16 kHz, 16-bit mono (``fmt``: WAV or FLAC)."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), (0.05 * rng.standard_normal(int(seconds * RATE))).astype(np.float32), RATE,
             subtype="PCM_16", format=fmt)


def make_aishell(root: Path, utts_per_speaker=(("train", "S0002", 8), ("dev", "S0724", 2), ("test", "S0764", 2))
                 ) -> Path:
    """``root/data_aishell/{wav/<split>/<spk>/BAC009<spk>W<nnnn>.wav, transcript/aishell_transcript_v0.8.txt}``:
    the transcript is word-segmented (spaces between words), one line per utterance of all splits. Dev and test
    use only characters that training has, as in AISHELL (a transcript mostly of characters outside the units is
    refused as ``unk_text``)."""
    src = root / "data_aishell"
    rng = np.random.default_rng(0)
    lines = []
    seen: List[str] = []
    for split, spk, num in utts_per_speaker:
        for i in range(num):
            key = f"BAC009{spk}W{121 + i:04d}"
            noise(src / "wav" / split / spk / f"{key}.wav", 0.8, len(lines), "WAV")
            pool = HANZI if split == "train" else sorted(set(seen))
            chars = [pool[j] for j in rng.integers(0, len(pool), size=4)]
            if split == "train":
                seen += chars
            lines.append(f"{key} {''.join(chars[:2])} {''.join(chars[2:])}\n")
    (src / "transcript").mkdir(parents=True)
    (src / "transcript" / "aishell_transcript_v0.8.txt").write_text("".join(lines), encoding="utf-8")
    return root


def make_librispeech(root: Path, parts: Iterable[str], utts: int = 3, train_utts: int = 4) -> Path:
    """``root/LibriSpeech/<part>/<spk>/<chapter>/{<spk>-<chapter>-<nnnn>.flac, <spk>-<chapter>.trans.txt}``,
    upper-case transcripts of 4 words, two speakers per part. Each training part holds every word of ``WORDS``
    (enough distinct pieces for a 40-unit sentencepiece model); other parts hold ``utts`` per speaker."""
    seed = 0
    for p, part in enumerate(parts):
        word = 0
        for s in range(2):
            spk, chapter = 100 + 10 * p + s, 2000 + 10 * p + s
            d = root / "LibriSpeech" / part / str(spk) / str(chapter)
            lines: List[str] = []
            for u in range(train_utts if part.startswith("train") else utts):
                key = f"{spk}-{chapter}-{u:04d}"
                noise(d / f"{key}.flac", 2.0, seed, "FLAC")
                seed += 1
                lines.append(f"{key} {' '.join(WORDS[(word + i + p) % len(WORDS)] for i in range(4))}\n")
                word += 4
            (d / f"{spk}-{chapter}.trans.txt").write_text("".join(lines))
    return root


# The default split of recipes/mini_librispeech/prepare.sh: test 4680 1867, dev 19 2136; the rest trains.
MINI_SPEAKERS = ("19", "2136", "4680", "1867", "32", "118", "163")


def make_mini_librispeech(root: Path, speakers: Iterable[str] = MINI_SPEAKERS, utts: int = 2,
                          dev_clean_2: Iterable[str] = ()) -> Path:
    """``root/LibriSpeech/{train-clean-5,dev-clean-2}/<spk>/<chapter>/...``: real FLAC noise, one chapter of
    ``utts`` utterances per speaker (3-word transcripts); dev-clean-2 only for the speakers in ``dev_clean_2``."""
    seed = 0
    for part, spks in (("train-clean-5", speakers), ("dev-clean-2", dev_clean_2)):
        for spk in spks:
            chapter = f"{spk}0"
            d = root / "LibriSpeech" / part / spk / chapter
            lines = []
            for u in range(utts):
                key = f"{spk}-{chapter}-{u:04d}"
                noise(d / f"{key}.flac", 0.5, seed, "FLAC")
                lines.append(f"{key} {' '.join(WORDS[(seed + i) % len(WORDS)] for i in range(3))}\n")
                seed += 1
            (d / f"{spk}-{chapter}.trans.txt").write_text("".join(lines))
    return root


def make_an4(root: Path, train=(("fash", ("an251", "an253", "cen1")), ("mabc", ("an300", "cen2")),
                                ("fbbh", ("an261",))),
             test=(("fcaw", ("an409", "cen3")),), audio: bool = True) -> Path:
    """``root/an4/{etc/an4_{train,test}.transcription, wav/{an4_clstk,an4test_clstk}/<spk>/<prompt>-<spk>-b.sph}``:
    the training transcription with ESPnet's ``<s> ... </s>`` marks, the test one without (as CMU ships them); NIST
    SPHERE noise (``audio`` false: empty files, for trees only counted)."""
    an4 = root / "an4"
    for name, folder, speakers in (("train", "an4_clstk", train), ("test", "an4test_clstk", test)):
        lines = []
        for s, (spk, prompts) in enumerate(speakers):
            for p, prompt in enumerate(prompts):
                source = f"{prompt}-{spk}-b"
                path = an4 / "wav" / folder / spk / f"{source}.sph"
                if audio:
                    noise(path, 0.6, 100 * s + p, "NIST")
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.touch()
                words = " ".join(WORDS[(s + p + i) % len(WORDS)] for i in range(2))
                lines.append(f"<s> {words} </s> ({source})\n" if name == "train" else f"{words} ({source})\n")
        (an4 / "etc").mkdir(parents=True, exist_ok=True)
        (an4 / "etc" / f"an4_{name}.transcription").write_text("".join(lines[::-1]))   # unsorted, as CMU's
    return root


# Distractors per utterance of each fake Le et al. list (the real ones hold the list size minus the rare words).
FAKE_LIST_DISTRACTORS = {100: 1, 500: 2, 1000: 3, 2000: 4}


def make_le_lists(root: Path, libri_root: Path) -> Path:
    """``root/biasing/test-{clean,other}.biasing_{100,500,1000,2000}.tsv`` for the test parts of a fake LibriSpeech
    tree, as fbai-speech's is21_deep_bias/ref lays them out: id, lower-case reference, a JSON list of its rare words
    (here its second word), a JSON list of biasing words (the rare ones and distractors, sorted)."""
    import json
    out = root / "biasing"
    out.mkdir(parents=True, exist_ok=True)
    for part in ("test-clean", "test-other"):
        utts = []
        for trans in sorted((libri_root / "LibriSpeech" / part).rglob("*.trans.txt")):
            utts += [line.split(" ", 1) for line in trans.read_text().splitlines()]
        for size, extra in FAKE_LIST_DISTRACTORS.items():
            lines = []
            for i, (key, ref) in enumerate(utts):
                rare = [ref.split()[1].lower()]
                distractors = [WORDS[(7 * i + j) % len(WORDS)].lower() for j in range(extra)]
                biasing = sorted(set(rare + distractors))
                lines.append(f"{key}\t{ref.lower()}\t{json.dumps(rare)}\t{json.dumps(biasing)}\n")
            (out / f"{part}.biasing_{size}.tsv").write_text("".join(lines[::-1]))   # not in key order
    return root


def make_seaco_lists(root: Path, aishell_root: Path, per_split: int = 1) -> Path:
    """``root/biasing/{dev,test}/{text,hotword.txt,r1-hotword.txt}`` for a fake AISHELL-1 tree, as
    SeACo-Paraformer's data/ lays them out: the first ``per_split`` utterances of each split and one id AISHELL's
    split lacks (dev's lines tab-separated, test's space-separated, as published); hotwords of two characters of
    those transcripts, R1's the first of them."""
    transcript = (aishell_root / "data_aishell" / "transcript" / "aishell_transcript_v0.8.txt").read_text(
        encoding="utf-8").splitlines()
    for split, spk, sep in (("dev", "S0724", "\t"), ("test", "S0764", " ")):
        ours = [line.split(" ", 1) for line in transcript if line.startswith(f"BAC009{spk}")][:per_split]
        d = root / "biasing" / split
        d.mkdir(parents=True, exist_ok=True)
        rows = [(k, t.replace(" ", "")) for k, t in ours] + [(f"BAC009{spk}W9999", "的一")]
        (d / "text").write_text("".join(f"{k}{sep}{t}\n" for k, t in rows), encoding="utf-8")
        words = [t[:2] for _, t in rows[:-1]]
        (d / "hotword.txt").write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
        (d / "r1-hotword.txt").write_text(f"{words[0]}\n", encoding="utf-8")
    return root
