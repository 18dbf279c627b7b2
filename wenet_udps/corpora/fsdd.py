"""Connected-digit utterances built from the Free Spoken Digit Dataset (FSDD) isolated recordings.

    python -m wenet_udps.corpora.fsdd --fsdd_dir free-spoken-digit-dataset-1.0.10/recordings --out data/fsdd

FSDD holds ``{digit}_{speaker}_{index}.wav`` (8 kHz mono, index 0..49). Each output utterance is one
speaker saying 2-7 digits, joined by random 50-300 ms pauses, with optional low-level noise. Test
utterances use only recordings whose index lies in ``--test_indices`` (default 0-4, FSDD's own test split);
train and dev use ``--train_indices`` (default 5-49), so no test recording is ever heard in training.
``--unseen_speaker`` (default ``yweweler``) holds one speaker out of train, dev and test; ``test_unseen`` is made
of that speaker alone (every recording index), so the two test sets measure in-distribution and unseen-speaker
error side by side. ``--unseen_speaker none`` keeps every speaker in train (no ``test_unseen``).
Writes ``OUT/<set>/{wav.scp,text,sources}`` (``sources``: the FSDD files of each utterance) and the wavs under
``OUT/wav/<set>/``. Transcripts are digit words (``THREE ONE FOUR``). A known speaker with other than their 500
recordings (a partial copy) is refused (``wenet_udps.corpora.common.check_counts``) unless ``--allow_partial true``,
which marks every set made (``partial_corpus``) so that RESULTS.md says so.
"""
import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import soundfile as sf
import soxr

from wenet_udps.corpora.common import ALLOW_PARTIAL_HELP, NOISE_KINDS, add_noise, boolean, check_counts, \
    mark_partial, speech_power, to_int16, write_kaldi_dir
from wenet_udps.dataset.audio import BadAudioError, load_audio
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import open_atomic, write_text

FSDD_RATE = 8000
DIGIT_WORDS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")
SPLITS = ("train", "dev", "test")
UNSEEN_SPLIT = "test_unseen"
DEFAULT_UNSEEN_SPEAKER = "yweweler"
FILE_RE = re.compile(r"^([0-9])_([A-Za-z0-9]+)_([0-9]+)\.wav$")

# recordings[speaker][digit] -> list of (index, path)
Inventory = Dict[str, Dict[int, List[Tuple[int, Path]]]]


def parse_range(text: str) -> range:
    """``"5-49"`` -> range(5, 50); ``"3"`` -> range(3, 4)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected an index range like 0-4, got {text!r}")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise argparse.ArgumentTypeError(f"empty index range {text!r}")
    return range(lo, hi + 1)


def speaker_counts(fsdd_dir: Path) -> Dict[str, int]:
    """Recordings per speaker in ``fsdd_dir`` (every index)."""
    counts: Dict[str, int] = defaultdict(int)
    for path in fsdd_dir.iterdir():
        m = FILE_RE.match(path.name)
        if m:
            counts[m.group(2)] += 1
    return dict(counts)


def scan_recordings(fsdd_dir: Path, indices: range) -> Inventory:
    """Index the FSDD recordings whose index is in ``indices``."""
    if not fsdd_dir.is_dir():
        raise FileNotFoundError(f"FSDD recordings directory {fsdd_dir} not found; "
                                "run recipes/fsdd/download.sh or pass the 'recordings' folder of FSDD")
    inv: Inventory = defaultdict(lambda: defaultdict(list))
    for path in sorted(fsdd_dir.iterdir()):
        m = FILE_RE.match(path.name)
        if m and int(m.group(3)) in indices:
            inv[m.group(2)][int(m.group(1))].append((int(m.group(3)), path))
    # Only speakers who said every digit in this index range can say any digit string.
    full = {spk: dict(d) for spk, d in inv.items() if len(d) == len(DIGIT_WORDS)}
    if not full:
        raise FileNotFoundError(f"no FSDD recordings ({{digit}}_{{speaker}}_{{index}}.wav, every digit, index in "
                                f"{indices.start}-{indices.stop - 1}) in {fsdd_dir}")
    return full


class RecordingCache:
    """Loads each recording once, as float64 at FSDD's 8 kHz and unit active power (speakers differ in level),
    through the package's one audio reader: a cut, unreadable, non-finite or multi-channel recording is refused
    naming the file (BadAudioError), never read as part of an utterance or as a channel average."""

    def __init__(self) -> None:
        self._audio: Dict[Path, np.ndarray] = {}

    def get(self, path: Path) -> np.ndarray:
        if path not in self._audio:
            x, rate = load_audio(str(path))
            x = x.astype(np.float64)  # int16-range samples: the unit power below removes the scale
            if rate != FSDD_RATE:
                x = soxr.resample(x, rate, FSDD_RATE)
            power = speech_power(x)
            if power == 0.0:
                raise ValueError(f"{path}: silent recording")
            self._audio[path] = x / np.sqrt(power)
        return self._audio[path]


def build_split(split: str, count: int, inv: Inventory, out_dir: Path, rng: np.random.Generator,
                cache: RecordingCache, *, rate: int, min_digits: int, max_digits: int,
                noise: bool, snr_range: Tuple[float, float]) -> Tuple[List[Tuple[str, str, str]], List[str], float]:
    """Build ``count`` utterances; returns Kaldi rows, ``sources`` lines and total seconds."""
    speakers = sorted(inv)
    rows, sources, seconds = [], [], 0.0
    wav_dir = out_dir / "wav" / split
    wav_dir.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        spk = speakers[int(rng.integers(len(speakers)))]
        digits = [int(d) for d in rng.integers(0, 10, size=int(rng.integers(min_digits, max_digits + 1)))]
        pieces = [np.zeros(int(rng.uniform(0.05, 0.2) * FSDD_RATE))]
        used = []
        for j, d in enumerate(digits):
            _, path = inv[spk][d][int(rng.integers(len(inv[spk][d])))]
            used.append(path.name)
            if j:
                pieces.append(np.zeros(int(rng.uniform(0.05, 0.3) * FSDD_RATE)))
            pieces.append(cache.get(path))
        pieces.append(np.zeros(int(rng.uniform(0.05, 0.2) * FSDD_RATE)))
        audio = np.concatenate(pieces)
        noise_seed = int(rng.integers(2 ** 31))
        snr = float(rng.uniform(*snr_range))
        kind = NOISE_KINDS[int(rng.integers(len(NOISE_KINDS)))]
        peak = float(rng.uniform(0.3, 0.9))
        if rate != FSDD_RATE:
            audio = soxr.resample(audio, FSDD_RATE, rate)
        if noise:
            audio = add_noise(audio, snr_db=snr, kind=kind, rng=np.random.default_rng(noise_seed))
        key = f"{spk}_{split}_{i:05d}"
        path = (wav_dir / f"{key}.wav").resolve()
        with open_atomic(path, "wb") as f:
            sf.write(f, to_int16(audio, peak=peak), rate, format="WAV", subtype="PCM_16")
        rows.append((key, str(path), " ".join(DIGIT_WORDS[d] for d in digits)))
        sources.append(f"{key} {','.join(used)}")
        seconds += audio.shape[0] / rate
    return rows, sources, seconds


def hold_out(pools: Dict[str, Inventory], everything: Inventory, speaker: Optional[str],
             dev_speaker: Optional[str] = None) -> Dict[str, Inventory]:
    """Remove ``speaker`` from every pool and add the ``test_unseen`` pool (all of that speaker's recordings).

    ``dev_speaker``: the dev pool becomes that speaker alone (its train-index recordings), removed from train and
    test, so that settings are chosen on a voice the model never heard (a speaker-disjoint dev set)."""
    for who, what in ((speaker, "unseen speaker"), (dev_speaker, "dev speaker")):
        if who is not None and who not in everything:
            raise ValueError(f"unknown {what} {who!r}; valid: {', '.join(sorted(everything))} (or none)")
    if speaker is not None and speaker == dev_speaker:
        raise ValueError(f"{speaker!r} cannot be both the unseen speaker and the dev speaker")
    gone = {speaker, dev_speaker} - {None}
    dev_pool = {dev_speaker: pools["dev"][dev_speaker]} if dev_speaker is not None else None
    pools = {split: {s: d for s, d in inv.items() if s not in gone} for split, inv in pools.items()}
    if dev_pool is not None:
        pools["dev"] = dev_pool
    if not all(pools.values()):
        raise ValueError(f"holding out {', '.join(sorted(gone))} leaves no speaker for training")
    if speaker is not None:
        pools[UNSEEN_SPLIT] = {speaker: everything[speaker]}
    return pools


def build(fsdd_dir: Path, out_dir: Path, *, seed: int, counts: Dict[str, int], rate: int = FSDD_RATE,
          test_indices: range = range(0, 5), train_indices: range = range(5, 50), min_digits: int = 2,
          max_digits: int = 7, noise: bool = True, snr_range: Tuple[float, float] = (20.0, 40.0),
          unseen_speaker: Optional[str] = None, dev_speaker: Optional[str] = None,
          allow_partial: bool = False) -> Dict[str, float]:
    """Write train, dev, test (and ``test_unseen`` with ``unseen_speaker``); returns seconds of audio per split.

    ``counts`` needs an entry for every split written. A partial copy: a UserError unless ``allow_partial``."""
    if set(test_indices) & set(train_indices):
        raise ValueError(f"test indices {test_indices.start}-{test_indices.stop - 1} overlap train indices "
                         f"{train_indices.start}-{train_indices.stop - 1}")
    if not 1 <= min_digits <= max_digits:
        raise ValueError(f"need 1 <= min_digits <= max_digits, got {min_digits}, {max_digits}")
    pools = {"train": scan_recordings(fsdd_dir, train_indices), "test": scan_recordings(fsdd_dir, test_indices)}
    partial = check_counts("fsdd", speaker_counts(fsdd_dir), fsdd_dir, allow_partial=allow_partial)
    pools["dev"] = pools["train"]
    everything = scan_recordings(fsdd_dir, range(min(test_indices.start, train_indices.start),
                                                 max(test_indices.stop, train_indices.stop)))
    pools = hold_out(pools, everything, unseen_speaker, dev_speaker)
    cache = RecordingCache()
    seconds = {}
    for index, split in enumerate((*SPLITS, UNSEEN_SPLIT)):
        if split not in pools:
            continue
        # Each split draws from its own stream: changing one split's size (--num_train) leaves the others, and
        # so the test sets that compare two confs, unchanged.
        rng = np.random.default_rng([seed, index])
        rows, sources, seconds[split] = build_split(
            split, counts[split], pools[split], out_dir, rng, cache, rate=rate, min_digits=min_digits,
            max_digits=max_digits, noise=noise, snr_range=snr_range)
        write_kaldi_dir(out_dir / split, rows)
        mark_partial(out_dir / split, partial)
        write_text(out_dir / split / "sources", "".join(s + "\n" for s in sorted(sources)))
    return seconds


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fsdd_dir", required=True, type=Path, help="FSDD 'recordings' folder")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num_train", type=int, default=2000)
    parser.add_argument("--num_dev", type=int, default=200)
    parser.add_argument("--num_test", type=int, default=300)
    parser.add_argument("--unseen_speaker", default=DEFAULT_UNSEEN_SPEAKER,
                        help="speaker held out of train/dev/test for the test_unseen set; 'none': no such set")
    parser.add_argument("--num_test_unseen", type=int, default=300)
    parser.add_argument("--dev_speaker", default="none",
                        help="a training speaker whose recordings alone make dev (held out of train and test): "
                             "a speaker-disjoint dev set; 'none': dev draws from the training speakers")
    parser.add_argument("--rate", type=int, default=FSDD_RATE, choices=[8000, 16000], help="output sample rate")
    parser.add_argument("--test_indices", type=parse_range, default=range(0, 5), help="e.g. 0-4")
    parser.add_argument("--train_indices", type=parse_range, default=range(5, 50), help="e.g. 5-49")
    parser.add_argument("--min_digits", type=int, default=2)
    parser.add_argument("--max_digits", type=int, default=7)
    parser.add_argument("--noise", type=int, default=1, choices=[0, 1], help="add white/pink noise")
    parser.add_argument("--snr_min", type=float, default=20.0)
    parser.add_argument("--snr_max", type=float, default=40.0)
    parser.add_argument("--allow_partial", type=boolean, default=False, help=ALLOW_PARTIAL_HELP)
    args = parser.parse_args(argv)
    counts = {"train": args.num_train, "dev": args.num_dev, "test": args.num_test,
              UNSEEN_SPLIT: args.num_test_unseen}
    unseen = None if args.unseen_speaker == "none" else args.unseen_speaker
    start = time.time()
    try:
        seconds = build(args.fsdd_dir, args.out, seed=args.seed, counts=counts, rate=args.rate,
                        test_indices=args.test_indices, train_indices=args.train_indices,
                        min_digits=args.min_digits, max_digits=args.max_digits, noise=bool(args.noise),
                        snr_range=(args.snr_min, args.snr_max), unseen_speaker=unseen,
                        dev_speaker=None if args.dev_speaker == "none" else args.dev_speaker,
                        allow_partial=args.allow_partial)
    except cli.UserError:   # a partial copy: one line, exit 2 (run_cli)
        raise
    except (FileNotFoundError, ValueError, BadAudioError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    summary = ", ".join(f"{s}: {counts[s]} utts {seconds[s] / 60:.1f} min" for s in seconds)
    print(f"fsdd corpus in {args.out} ({summary}) built in {time.time() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "fsdd")
