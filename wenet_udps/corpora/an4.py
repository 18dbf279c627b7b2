"""CMU AN4 (``an4/etc/an4_{train,test}.transcription`` and ``an4/wav/{an4_clstk,an4test_clstk}/<spk>/*.sph``) as
Kaldi data dirs, split as ESPnet's egs2/an4 recipe splits it, so that results compare with its published ones:

    python -m wenet_udps.corpora.an4 AN4_DIR DATA_DIR [--num_dev 100]

writes ``DATA_DIR/{train,dev,test}/{wav.scp,text,utt2spk}``. Keys are ESPnet's: a transcript line
``<s> WORDS </s> (an251-fash-b)`` becomes key ``fash-an251-b`` (speaker first, so keys sort by speaker) with text
``WORDS``. ``dev`` is the first ``--num_dev`` training utterances in byte order of their keys (Kaldi's sorted
order, as ESPnet's ``subset_data_dir.sh --first``), ``train`` the others; ``test`` is the test transcription whole
(10 speakers never in training).

The audio may be CMU's NIST SPHERE (``<source>.sph``) or a lossless FLAC copy of it (``<source>.flac``, the same
samples: :func:`to_flac`, ``tools/an4_to_flac.py``; 41 MiB instead of 90, what travels to a GPU machine): the same
keys, split and samples either way.

Nothing is lost silently: a transcript line whose recording is missing, or without words, is skipped, counted and
named in one warning per reason; a malformed line or a duplicate key is an error naming the file and line. A copy
without all 948 training and 130 test utterances is refused (``wenet_udps.corpora.common.check_counts``) unless
``--allow_partial true``, which marks the sets (``partial_corpus``) so that RESULTS.md says so. ``--check`` only
checks that AN4_DIR is whole (recipes/an4/download.sh): nothing is written.
"""
import re
import shutil
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from wenet_udps.corpora.common import ALLOW_PARTIAL_HELP, boolean, check_counts, mark_partial, warn_skipped, \
    write_kaldi_dir
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import open_atomic, write_bytes, write_text
from wenet_udps.utils.kaldi_files import utf8_lines

SETS = {"train": "an4_clstk", "test": "an4test_clstk"}  # transcription name -> folder of its speakers under wav/
# The audio of one utterance, in the order looked for: CMU's SPHERE, then the FLAC copy of to_flac.
AUDIO_SUFFIXES = (".sph", ".flac")
# "<s> WORDS </s> (an251-fash-b)"; the sentence marks are optional (the test transcription has none).
LINE = re.compile(r"^(?P<words>.*?)\s*\((?P<source>[^()\s]+)\)$")
Row = Tuple[str, str, str]  # key, audio path, words


def espnet_key(source: str) -> Tuple[str, str]:
    """``an251-fash-b`` -> (``fash-an251-b``, ``fash``): ESPnet's key (speaker, prompt, session) and speaker."""
    parts = source.split("-")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"utterance id {source!r} is not <prompt>-<speaker>-<session>")
    prompt, speaker, session = parts
    return f"{speaker}-{prompt}-{session}", speaker


def audio_path(an4: Path, name: str, speaker: str, source: str) -> Path:
    """The recording of utterance ``source`` of set ``name``: the first of :data:`AUDIO_SUFFIXES` that exists
    (the ``.sph`` path when none does)."""
    folder = an4 / "wav" / SETS[name] / speaker
    for suffix in AUDIO_SUFFIXES:
        if (folder / f"{source}{suffix}").is_file():
            return folder / f"{source}{suffix}"
    return folder / f"{source}{AUDIO_SUFFIXES[0]}"


def to_flac(an4: Path, out: Path) -> int:
    """Copy the AN4 tree ``an4`` (SPHERE) to ``out`` with every ``.sph`` as FLAC (16-bit, same rate): the other
    files (transcriptions, LICENSE) as they are. Each FLAC is read back and compared with its SPHERE samples, so the
    copy is lossless or nothing: a mismatch or an unreadable ``.sph`` is an error naming the file. Returns the
    number of recordings converted.

    Raises:
        ValueError: ``out`` exists already, ``an4`` holds no .sph, a .sph is unreadable, or a recording failed the
            comparison (nothing is left behind).
        OSError: reading or writing a file failed (a full disk, a permission).
    """
    import soundfile as sf
    if out.exists():
        raise ValueError(f"{out} exists: delete it, or use it as it is")
    if not (an4 / "etc").is_dir() or not (an4 / "wav").is_dir():
        raise ValueError(f"{an4} has no etc/ and wav/: not an unpacked AN4 tree (recipes/an4/download.sh)")
    tmp = out.with_name(out.name + ".partial")   # only a whole, checked copy appears as ``out``
    shutil.rmtree(tmp, ignore_errors=True)
    converted = 0
    try:
        for src in sorted(an4.rglob("*")):
            dst = tmp / src.relative_to(an4)
            if src.is_dir():
                dst.mkdir(parents=True, exist_ok=True)
            elif src.suffix != ".sph":
                dst.parent.mkdir(parents=True, exist_ok=True)
                write_bytes(dst, src.read_bytes())
            else:
                dst = dst.with_suffix(".flac")
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    samples, rate = sf.read(str(cli.regular_file(src)), dtype="int16", always_2d=True)
                    with open_atomic(dst, "wb") as f:
                        sf.write(f, samples, rate, format="FLAC", subtype="PCM_16")
                    back, back_rate = sf.read(str(dst), dtype="int16", always_2d=True)
                except (RuntimeError, sf.SoundFileError) as e:
                    raise ValueError(f"{src}: {e}") from None
                if back_rate != rate or not np.array_equal(back, samples):
                    raise ValueError(f"{src}: its FLAC copy {dst} does not read back to the same samples")
                converted += 1
        if not converted:
            raise ValueError(f"{an4}: no .sph recording found under wav/")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.rename(out)
    return converted


def read_set(an4: Path, name: str, skipped: Dict[str, List[str]]) -> List[Row]:
    """The rows of ``etc/an4_<name>.transcription`` whose audio exists; the others go to ``skipped`` by reason."""
    trans = an4 / "etc" / f"an4_{name}.transcription"
    rows: List[Row] = []
    seen: Dict[str, str] = {}
    for n, line in utf8_lines(str(trans)):   # the package's one reader: UTF-8 checked, a leading BOM dropped
        where = f"{trans}:{n}"
        line = line.strip()
        if not line:
            continue
        m = LINE.match(line)
        if m is None:
            raise ValueError(f"{where}: expected '<s> WORDS </s> (prompt-speaker-session)', got {line[:60]!r}")
        try:
            key, speaker = espnet_key(m["source"])
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if key in seen:
            raise ValueError(f"{where}: duplicate utterance {m['source']} (first at {seen[key]})")
        seen[key] = where
        tokens = m["words"].split()
        tokens = tokens[tokens[:1] == ["<s>"]:len(tokens) - (tokens[-1:] == ["</s>"])]
        words = " ".join(tokens)
        audio = audio_path(an4, name, speaker, m["source"])
        if not words:
            skipped["empty transcript"].append(where)
        elif not audio.is_file():
            skipped["transcript line without audio"].append(f"{where} ({audio} missing, nor a .flac copy)")
        else:
            rows.append((key, str(audio.resolve()), words))
    return rows


def split_dev(rows: List[Row], num_dev: int) -> Tuple[List[Row], List[Row]]:
    """(dev, train): the first ``num_dev`` rows in byte order of their keys, and the rest."""
    ordered = sorted(rows, key=lambda r: r[0].encode("utf-8"))
    if not 0 < num_dev < len(ordered):
        raise ValueError(f"--num_dev {num_dev}: the training transcription has {len(ordered)} usable utterances")
    return ordered[:num_dev], ordered[num_dev:]


def write_set(out_dir: Path, rows: List[Row]) -> None:
    """``wav.scp``, ``text`` and Kaldi's ``utt2spk`` (results are also reported per speaker)."""
    write_kaldi_dir(out_dir, rows)
    write_text(out_dir / "utt2spk", "".join(f"{k} {k.split('-', 1)[0]}\n" for k, _, _ in sorted(rows)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = cli.ArgumentParser(prog="an4", description=__doc__.split("\n\n")[0])
    parser.add_argument("an4_dir", type=cli.existing_dir, help="the unpacked an4/ folder (holds etc/ and wav/)")
    parser.add_argument("out_dir", type=cli.output_dir, nargs="?", help="data dir to write: train/, dev/, test/")
    parser.add_argument("--num_dev", type=int, default=100,
                        help="training utterances, first in key order, that form dev (ESPnet: 100)")
    parser.add_argument("--allow_partial", type=boolean, default=False, help=ALLOW_PARTIAL_HELP)
    parser.add_argument("--check", action="store_true", help="only check that AN4_DIR is whole; write nothing")
    args = parser.parse_args(argv)
    if (args.out_dir is None) != args.check:
        parser.error("give OUT_DIR, or --check without it")
    an4 = Path(args.an4_dir)
    skipped: Dict[str, List[str]] = defaultdict(list)
    try:
        train = read_set(an4, "train", skipped)
        test = read_set(an4, "test", skipped)
        if not test:
            raise ValueError(f"{an4}: no test utterance with both audio and a transcript")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"an4: error: {e}", file=sys.stderr)
        return 1
    warn_skipped(skipped, an4)
    # a partial copy is refused here (a UserError: one line, exit 2) unless asked for
    partial = check_counts("an4", {"train": len(train), "test": len(test)}, an4, allow_partial=args.allow_partial)
    if args.check:
        return 0
    try:
        dev, train = split_dev(train, args.num_dev)
    except ValueError as e:
        print(f"an4: error: {e}", file=sys.stderr)
        return 1
    out = Path(args.out_dir)
    for name, rows in (("train", train), ("dev", dev), ("test", test)):
        write_set(out / name, rows)
        mark_partial(out / name, partial)
        speakers = {k.split("-", 1)[0] for k, _, _ in rows}
        print(f"{out / name}: {len(rows)} utterances of {len(speakers)} speaker(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "an4")
