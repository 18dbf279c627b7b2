"""The public biasing test sets, prepared for run.sh ``--hotwords true`` (stage 0) from what stage -1 downloaded
(recipes/<corpus>/download_hotwords.sh):

- LibriSpeech: Le et al.'s lists (2021; facebookresearch/fbai-speech, is21_deep_bias/ref), one file per test set
  and list size, ``test-{clean,other}.biasing_{100,500,1000,2000}.tsv``. Each line has four tab-separated
  columns: the utterance id, its reference (lower case), a JSON list of the rare words of the reference, and a JSON
  list of biasing words, the rare words plus distractors up to the size (their README; their score.py scores with
  the third column). Written, for each prepared ``test_clean``/``test_other`` and size N, into
  ``<set>/biasing/``: ``list_N`` (a context list, wenet_udps.scoring.context_lists: each utterance's biasing words,
  decoded with ``recognize --context_list``) and ``rare_N`` (its rare words, scored with
  ``compute-biased-wer.py --biasing_lists``).
- AISHELL-1: SeACo-Paraformer's hotword subsets (R1ckShi/SeACo-Paraformer, data/{dev,test}): ``text`` (the
  subset's utterance ids with transcripts: 1334 of dev, 808 of test), ``hotword.txt`` (600 and 400 hotwords) and
  ``r1-hotword.txt`` (371 and 226: those a general model recalls under 40 %). Written as the sets ``hotword_dev``
  and ``hotword_test`` (the subsets of the prepared dev and test, our transcripts) with ``biasing/list_all`` and
  ``biasing/list_r1``, one list for the whole set (``recognize --context_file``, ``--biasing_list``).

Refused, naming the file and line: a line that is not of its format, a key given twice, rare words that are not
among the biasing words, a reference that is not the prepared transcript (another release or set), an utterance of
the prepared set without a line; and a key that the prepared set lacks, unless ``--allow_partial true`` (a partial
copy: such lines are dropped, and counted).
"""
import json
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from wenet_udps.corpora.common import boolean
from wenet_udps.utils import cli
from wenet_udps.utils.atomic import write_text
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.kaldi_files import read_table, utf8_lines
from wenet_udps.utils.text_norm import TextNorm

LIBRI_SETS = {"test_clean": "test-clean", "test_other": "test-other"}
LIBRI_SIZES = (100, 500, 1000, 2000)
AISHELL_SETS = {"hotword_dev": "dev", "hotword_test": "test"}
AISHELL_LISTS = {"list_all": "hotword.txt", "list_r1": "r1-hotword.txt"}


def _words(cell: str, where: str, column: str) -> List[str]:
    try:
        words = json.loads(cell)
    except json.JSONDecodeError as e:
        raise UserError(f"{where}: column {column} is not a JSON list ({e.msg})") from None
    if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() and " " not in w for w in words):
        raise UserError(f"{where}: column {column} must be a JSON list of words (strings without spaces)")
    return words


def read_le_tsv(path: str) -> Dict[str, Tuple[int, str, List[str], List[str]]]:
    """key -> (line number, reference, rare words, biasing words) of one of Le et al.'s files."""
    out: Dict[str, Tuple[int, str, List[str], List[str]]] = {}
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        cells = line.rstrip("\n").split("\t")
        if len(cells) != 4:
            raise UserError(f"{where}: {len(cells)} tab-separated columns, expected 4 (id, reference, rare words, "
                            f"biasing words)")
        key, ref = cells[0].strip(), cells[1].strip()
        if key in out:
            raise UserError(f"{where}: {key} was given at line {out[key][0]} already")
        rare, biasing = _words(cells[2], where, "3 (rare words)"), _words(cells[3], where, "4 (biasing words)")
        stray = sorted(set(rare) - set(biasing))
        if stray:
            raise UserError(f"{where}: rare word {stray[0]!r} of {key} is not among its biasing words (column 4 "
                            f"holds them all, with distractors)")
        out[key] = (lineno, ref, rare, biasing)
    if not out:
        raise UserError(f"{path}: no line")
    return out


def _matched_keys(ours: Dict[str, Tuple[str, int]], theirs: Dict[str, int], path: str, our_text: Path,
                  allow_partial: bool, whole: bool) -> List[str]:
    """The keys of ``theirs`` (key -> line) kept: each in ``ours``; UserError for an utterance of ours without a
    line where the list covers the ``whole`` set, or (without ``allow_partial``) a line for an utterance we lack."""
    lacking = [k for k in ours if k not in theirs]
    if lacking and whole:
        raise UserError(f"{path}: no line for {lacking[0]} of {our_text} ({len(lacking)} utterances have none): "
                        f"is it the list of this set?")
    extra = sorted((line, k) for k, line in theirs.items() if k not in ours)
    if extra and not allow_partial:
        raise UserError(f"{path}:{extra[0][0]}: {extra[0][1]} is not in {our_text} ({len(extra)} of the list's "
                        f"{len(theirs)} utterances are not; a partial copy: --prepare_opts \"--allow_partial "
                        f"true\")")
    if extra:
        logging.info("%s: %d of its %d utterances are not in %s (a partial copy): left out", path, len(extra),
                     len(theirs), our_text)
    return [k for k in theirs if k in ours]


def prepare_librispeech(src: Path, data: Path, case: str, allow_partial: bool) -> List[Path]:
    """``<set>/biasing/{list_N,rare_N}`` for each prepared LibriSpeech test set and size (module docstring)."""
    norm = TextNorm(case=case, punctuation="keep")
    written = []
    for our_set, part in LIBRI_SETS.items():
        text_path = data / our_set / "text"
        if not text_path.is_file():
            raise UserError(f"{text_path} not found: prepare {our_set} first (run.sh --stage 0)")
        ours = read_table(str(text_path), what="<utt> <transcript>")
        for size in LIBRI_SIZES:
            path = src / f"{part}.biasing_{size}.tsv"
            if not path.is_file():
                raise UserError(f"{path} not found: download it with recipes/librispeech/download_hotwords.sh")
            rows = read_le_tsv(str(path))
            keys = _matched_keys(ours, {k: r[0] for k, r in rows.items()}, str(path), text_path, allow_partial,
                                 whole=True)
            decode, rare = [], []
            for key in keys:
                lineno, ref, rare_words, biasing = rows[key]
                if norm(ref) != ours[key][0]:
                    raise UserError(f"{path}:{lineno}: the reference of {key} is not its transcript in {text_path} "
                                    f"(line {ours[key][1]}): another release of the set?")
                decode.append("\t".join([key] + [norm(w) for w in biasing]) + "\n")
                rare.append("\t".join([key] + [norm(w) for w in rare_words]) + "\n")
            out = data / our_set / "biasing"
            out.mkdir(parents=True, exist_ok=True)
            write_text(out / f"list_{size}", "".join(decode))
            write_text(out / f"rare_{size}", "".join(rare))
            written += [out / f"list_{size}", out / f"rare_{size}"]
    return written


def prepare_aishell(src: Path, data: Path, allow_partial: bool) -> List[Path]:
    """The sets ``hotword_dev``, ``hotword_test`` with ``biasing/list_all``, ``list_r1`` (module docstring)."""
    written = []
    for our_set, split in AISHELL_SETS.items():
        theirs_path = src / split / "text"
        for f in ("text", *AISHELL_LISTS.values()):
            if not (src / split / f).is_file():
                raise UserError(f"{src / split / f} not found: download it with recipes/aishell/download_hotwords.sh")
        theirs = {k: line for k, (_, line) in read_table(str(theirs_path), what="<utt> <transcript>").items()}
        parent = data / split
        ours = read_table(str(parent / "text"), what="<utt> <transcript>")
        wavs = read_table(str(parent / "wav.scp"), what="<utt> <path>")
        keys = _matched_keys(ours, theirs, str(theirs_path), parent / "text", allow_partial, whole=False)
        if not keys:
            raise UserError(f"{theirs_path}: none of its utterances is in {parent / 'text'}")
        out = data / our_set
        (out / "biasing").mkdir(parents=True, exist_ok=True)
        write_text(out / "wav.scp", "".join(f"{k} {wavs[k][0]}\n" for k in sorted(keys)))
        write_text(out / "text", "".join(f"{k} {ours[k][0]}\n" for k in sorted(keys)))
        for name, f in AISHELL_LISTS.items():
            if not any(line.strip() for _, line in utf8_lines(str(src / split / f))):
                raise UserError(f"{src / split / f}: no phrase (one a line)")
            write_text(out / "biasing" / name, (src / split / f).read_text(encoding="utf-8"))
            written.append(out / "biasing" / name)
        written += [out / "wav.scp", out / "text"]
    return written


def main(argv: Optional[Sequence[str]] = None) -> None:
    p = cli.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", choices=["librispeech", "aishell"])
    p.add_argument("src", type=cli.existing_dir, help="the download dir of the lists (DOWNLOAD_DIR/biasing)")
    p.add_argument("data", type=cli.existing_dir, help="the prepared data dir (run.sh's --data)")
    p.add_argument("--case", default="upper", choices=["keep", "upper", "lower"],
                   help="librispeech: the case of the prepared transcripts (run.sh's --text_case)")
    p.add_argument("--allow_partial", type=boolean, default=False,
                   help="true: lines for utterances the prepared sets lack are left out (a partial copy)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    src, data = Path(args.src), Path(args.data)
    if args.corpus == "librispeech":
        written = prepare_librispeech(src, data, args.case, args.allow_partial)
    else:
        written = prepare_aishell(src, data, args.allow_partial)
    print(f"{len(written)} files written under {data}")


if __name__ == "__main__":
    cli.run_cli(main, "wenet_udps.corpora.biasing_sets")
