"""One LibriSpeech-format part (``<part>/<speaker>/<chapter>/{<key>.flac, <speaker>-<chapter>.trans.txt}``) as a
Kaldi data dir, optionally restricted to some speakers:

    python -m wenet_udps.corpora.librispeech PART_DIR OUT_DIR [--speakers "19 2136"] [--exclude_speakers "..."]

Used by the LibriSpeech and mini LibriSpeech recipes' stage 0. Nothing is lost silently: an utterance whose audio
has no transcript line (a missing ``.trans.txt`` included), and a transcript line without audio or without words,
is skipped, counted, and named in one warning per reason; a duplicate key or a malformed line is an error naming the
file and line. Speakers asked for but absent are an error (a typo would otherwise move a speaker into training).
A part of the published corpora (``dev-clean``, ``train-clean-5``, ...) with another number of utterances is refused
(``wenet_udps.corpora.common.check_counts``) unless ``--allow_partial true``, which marks OUT_DIR
(``partial_corpus``) so that RESULTS.md says so.
"""
import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from wenet_udps.corpora.common import ALLOW_PARTIAL_HELP, boolean, check_counts, mark_partial, warn_skipped, \
    write_kaldi_dir
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.kaldi_files import read_table



@dataclass
class Part:
    """What one part holds: ``rows`` (key, flac path, transcript) and every skipped utterance by reason."""
    rows: List[Tuple[str, str, str]] = field(default_factory=list)
    skipped: Dict[str, List[str]] = field(default_factory=lambda: defaultdict(list))

    def speakers(self) -> Set[str]:
        return {speaker_of(k) for k, _, _ in self.rows}


def speaker_of(key: str) -> str:
    """``19-198-0001`` -> ``19``."""
    return key.split("-", 1)[0]


def read_transcripts(trans: Path, part: Part) -> Dict[str, Tuple[str, str]]:
    """``key -> (transcript, "file:line")`` of one ``.trans.txt``; a key-only line maps to an empty transcript."""
    out: Dict[str, Tuple[str, str]] = {}
    # the one reader of Kaldi-style files: BOM, encoding and duplicate keys (both lines named) decided there
    for key, (text, n) in read_table(str(trans), allow_empty_value=True).items():
        where = f"{trans}:{n}"
        if key.count("-") != 2 or not key.startswith(f"{trans.name.split('.')[0]}-"):
            raise ValueError(f"{where}: expected '<speaker>-<chapter>-<utt> WORDS ...' of this chapter, "
                             f"got {f'{key} {text}'.strip()[:60]!r}")
        out[key] = (" ".join(text.split()), where)
    return out


def scan_part(part_dir: Path) -> Part:
    """Pair every ``.flac`` under ``part_dir`` with its chapter's transcript line."""
    part = Part()
    chapters: Dict[Path, List[Path]] = defaultdict(list)
    for flac in sorted(part_dir.rglob("*.flac")):
        chapters[flac.parent].append(flac)
    for trans in sorted(part_dir.rglob("*.trans.txt")):
        chapters.setdefault(trans.parent, [])
    for chapter, flacs in sorted(chapters.items()):
        trans = chapter / f"{chapter.parent.name}-{chapter.name}.trans.txt"
        if not trans.is_file():
            part.skipped["no transcript file"] += [f"{f} ({trans.name} missing)" for f in flacs]
            continue
        lines = read_transcripts(trans, part)
        audio = {f.name[:-len(".flac")]: f for f in flacs}
        for key in sorted(audio.keys() - lines.keys()):
            part.skipped["audio without a transcript line"].append(f"{audio[key]} (not in {trans})")
        for key in sorted(lines.keys() - audio.keys()):
            part.skipped["transcript line without audio"].append(f"{lines[key][1]} ({key}.flac missing)")
        for key in sorted(audio.keys() & lines.keys()):
            if lines[key][0]:
                part.rows.append((key, str(audio[key].resolve()), lines[key][0]))
            else:
                part.skipped["empty transcript"].append(lines[key][1])
    return part


def select(part: Part, speakers: Optional[Set[str]], exclude: Set[str]) -> List[Tuple[str, str, str]]:
    """The rows of ``speakers`` (all when None) minus ``exclude``; a named speaker absent from the part raises."""
    present = part.speakers()
    missing = sorted(((speakers or set()) | exclude) - present, key=int)
    if missing:
        have = " ".join(sorted(present, key=int))
        raise ValueError(f"speaker(s) {' '.join(missing)} not in this part (it has {have})")
    return [r for r in part.rows
            if (speakers is None or speaker_of(r[0]) in speakers) and speaker_of(r[0]) not in exclude]


def speaker_set(text: str) -> Set[str]:
    ids = set(text.split())
    bad = [s for s in ids if not s.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(f"speaker ids are numbers, got {' '.join(sorted(bad))}")
    return ids


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = cli.ArgumentParser(prog="librispeech", description=__doc__.split("\n\n")[0])
    parser.add_argument("part_dir", type=cli.existing_dir, help="a LibriSpeech part, e.g. LibriSpeech/train-clean-5")
    parser.add_argument("out_dir", type=cli.output_dir, help="Kaldi data dir to write (wav.scp, text, utt2spk)")
    parser.add_argument("--speakers", type=speaker_set, default=None, help="only these speaker ids (space-separated)")
    parser.add_argument("--exclude_speakers", type=speaker_set, default=set(), help="leave these speakers out")
    parser.add_argument("--allow_partial", type=boolean, default=False, help=ALLOW_PARTIAL_HELP)
    args = parser.parse_args(argv)
    args.part_dir, args.out_dir = Path(args.part_dir), Path(args.out_dir)
    try:
        part = scan_part(args.part_dir)
        rows = select(part, args.speakers, args.exclude_speakers)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"librispeech: error: {e}", file=sys.stderr)
        return 1
    warn_skipped(part.skipped, args.part_dir)
    # the whole part, before any speaker is selected: a partial copy is refused here unless asked for
    partial = check_counts("librispeech", {args.part_dir.resolve().name: len(part.rows)}, args.part_dir,
                           allow_partial=args.allow_partial)
    if not rows:
        print(f"librispeech: error: {args.part_dir}: no utterance with both audio and a transcript"
              f"{' for the speakers asked for' if args.speakers else ''}", file=sys.stderr)
        return 1
    write_kaldi_dir(args.out_dir, rows)
    mark_partial(args.out_dir, partial)
    # utt2spk (Kaldi's): results are also reported per speaker (tools/collect_results.py).
    write_text(args.out_dir / "utt2spk", "".join(f"{k} {speaker_of(k)}\n" for k, _, _ in sorted(rows)))
    spk = sorted({speaker_of(k) for k, _, _ in rows}, key=int)
    print(f"{args.out_dir}: {len(rows)} utterances of {len(spk)} speaker(s) from {args.part_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run_cli(main, "librispeech")
