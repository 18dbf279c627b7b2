"""Throughput of the per-utterance data path on one worker (one process, one thread).

Measures read (soundfile) + resample to 16 kHz (soxr) + speed perturbation (0.9/1.0/1.1, soxr) + 80-bin Kaldi
fbank with dither (kaldi-native-fbank) + spec_aug, as seconds of audio per second of wall time, for
FSDD recordings (8 kHz, ~0.4 s each, resampled) and generated 10 s 16 kHz WAV files.

Command (from the repository root):
    python -m bench.data_pipeline --fsdd ../shared/data/fsdd/recordings --num_fsdd 500 --num_long 20

``--audio_dir DIR --config CONF`` times a corpus' own recordings (every audio file under DIR, sorted, the first
``--num_files``) through that training conf's ``dataset_conf`` instead (its resampling, speed perturbation,
features and augmentation), e.g. AN4 as bench/gpu_report.sh does; ``--json`` writes the rows there too.
"""
import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from wenet_udps.config import read_conf
from wenet_udps.dataset.audio import AUDIO_EXTENSIONS
from wenet_udps.dataset.transforms import UtteranceProcessor
from wenet_udps.utils.atomic import write_text

CONF = {"resample_conf": {"resample_rate": 16000}, "speed_perturb": True,
        "fbank_conf": {"num_mel_bins": 80, "frame_shift": 10, "frame_length": 25, "dither": 1.0},
        "spec_aug": True, "spec_aug_conf": {"num_t_mask": 2, "num_f_mask": 2, "max_t": 50, "max_f": 10},
        "filter_conf": {"max_length": 100000, "min_length": 0}}


def measure(paths, repeats=1, conf=None):
    """(seconds of audio, seconds of wall time) for processing every path ``repeats`` times with ``conf`` (a
    ``dataset_conf``; default :data:`CONF`)."""
    proc = UtteranceProcessor(conf or CONF, tokenizer=None)
    rng = np.random.default_rng(0)
    audio = sum(sf.info(p).duration for p in paths) * repeats
    start = time.perf_counter()
    for _ in range(repeats):
        for i, p in enumerate(paths):
            proc({"key": str(i), "wav": str(p), "txt": ""}, rng)
    return audio, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fsdd", default=str(Path(__file__).resolve().parents[2] / "shared/data/fsdd/recordings"))
    parser.add_argument("--num_fsdd", type=int, default=500)
    parser.add_argument("--num_long", type=int, default=20, help="generated 10 s files")
    parser.add_argument("--audio_dir", type=Path, help="time these recordings (any depth) instead of FSDD's")
    parser.add_argument("--num_files", type=int, default=300, help="with --audio_dir: the first N files")
    parser.add_argument("--config", type=Path, help="a training conf whose dataset_conf is timed (default: the "
                                                    "fixed one above)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    conf = dict(read_conf(str(args.config))["dataset_conf"]) if args.config else CONF
    # No length filter: every file is timed (the conf's filter would drop what training drops, uncounted here).
    conf["filter_conf"] = CONF["filter_conf"]
    rows = []
    if args.audio_dir:
        files = sorted(p for p in args.audio_dir.rglob("*") if p.suffix[1:].lower() in AUDIO_EXTENSIONS)
        files = files[:args.num_files]
        if files:
            rows.append((f"{args.audio_dir.name}: {', '.join(sorted({p.suffix for p in files}))}", len(files),
                         *measure(files, conf=conf)))
    else:
        fsdd = sorted(Path(args.fsdd).glob("*.wav"))[:args.num_fsdd]
        if fsdd:
            rows.append(("FSDD 8 kHz (resampled)", len(fsdd), *measure(fsdd, conf=conf)))
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        long_files = []
        for i in range(args.num_long):
            t = np.arange(160000) / 16000
            wav = 0.3 * np.sin(2 * np.pi * (200 + 50 * i) * t) + 0.05 * rng.standard_normal(len(t))
            path = Path(tmp) / f"long{i}.wav"
            sf.write(path, (wav * 32767).astype(np.int16), 16000, subtype="PCM_16")
            long_files.append(path)
        if long_files:
            rows.append(("generated 10 s 16 kHz", len(long_files), *measure(long_files, conf=conf)))
    print(f"dataset_conf: {args.config or 'the fixed one of bench/data_pipeline.py'}; one process, one thread "
          "(one DataLoader worker)\n")
    print("| input | files | audio (s) | wall (s) | x real time (audio s per s per worker) |")
    print("|---|---|---|---|---|")
    for name, n, audio, wall in rows:
        print(f"| {name} | {n} | {audio:.1f} | {wall:.2f} | {audio / wall:.0f} |")
    if args.json:
        write_text(args.json, json.dumps([{"input": name, "files": n, "audio_s": audio, "wall_s": wall,
                                          "audio_s_per_s_per_worker": audio / wall}
                                         for name, n, audio, wall in rows], indent=2) + "\n")


if __name__ == "__main__":
    main()
