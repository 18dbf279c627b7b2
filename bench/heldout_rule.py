"""The held-out check's window against a global rule, over a book text (docs/lm.md, "The gap the window leaves").

    python -m bench.heldout_rule --books BOOKS --text TEXT [TEXT ...] [--orders 3 4] [--limit N] [--examples 10]

BOOKS: a folder of ``.txt`` books (every one under it, in sorted path order; ``--limit``: the first N), read as
UTF-8 (a byte that is not is replaced, and the files holding one are counted). Each book is split into sentences at
blank lines and after ``.``, ``!``, ``?``, ``;`` and ``:``; each sentence is normalised as the LM text is (the one
normaliser, ``wenet_udps.utils.text_norm``: ``--case`` and ``--punctuation``, upper and remove by default), and the
empty ones are dropped. TEXT: Kaldi texts of the held-out sentences (``<utt> <words>``; LibriSpeech's
``*.trans.txt`` are such texts).

For each ``--orders`` n, counts the distinct held-out sentences that

* the window check refuses: ``wenet_udps.lm.held_out``'s, as ``tools/make_lm_book_text.py`` applies it (a sentence
  that is, or holds every n-gram of, a held-out sentence; else one that completes a window of adjacent sentences
  holding every n-gram of one; the sentence is left out and the stream goes on with the ones kept);
* a global rule would refuse: every n-gram of the held-out sentence with ``<s>`` and ``</s>`` (a sentence of fewer
  than n - 2 words: the whole padded sentence) occurs somewhere in the book text, each book sentence a line
  padded the same way, so that the line starts and ends give the boundary n-grams.

Both compare tokens as the check does (``held_out.tokens_of``: the match form's words). Prints the text's counts,
then per order the two counts, how many both refuse, and ``--examples`` of each rule's sentences with their words
and where they are in TEXT.
"""
import argparse
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from wenet_udps.lm.held_out import HeldOut, tokens_of
from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.cli import UserError, open_input, run_cli

BREAK = re.compile(r"\n[ \t\r\f\v]*\n")  # a blank line ends a paragraph, and its sentence
END = re.compile(r"(?<=[.!?;:])")


def sentences(raw: str) -> Iterator[str]:
    """The sentences of a book: its paragraphs (split at blank lines) split after ``.!?;:``, each on one line."""
    for paragraph in BREAK.split(raw.replace("\r\n", "\n")):
        for part in END.split(" ".join(paragraph.split())):
            if part.strip():
                yield part.strip()


def book_lines(books: Sequence[Path], norm: text_norm.TextNorm) -> Tuple[List[str], int]:
    """The normalised sentences of ``books`` in order, and how many books held a byte that is not UTF-8."""
    lines, damaged = [], 0
    for path in books:
        with open_input(path, "rb") as f:
            data = f.read()
        try:
            raw = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raw, damaged = data.decode("utf-8-sig", errors="replace"), damaged + 1
        lines.extend(s for s in (norm(s) for s in sentences(raw)) if s)
    return lines, damaged


def padded_grams(tokens: Sequence[str], n: int) -> Set[Tuple[str, ...]]:
    """The n-grams of ``<s> tokens </s>``; the whole padded sequence when it is shorter than n."""
    padded = ("<s>", *tokens, "</s>")
    if len(padded) < n:
        return {padded}
    return {padded[i:i + n] for i in range(len(padded) - n + 1)}


def window_refused(held: HeldOut, lines: Sequence[str]) -> Dict[str, str]:
    """``where`` -> sentence of the held-out sentences the window check refuses in ``lines``."""
    refused: Dict[str, str] = {}
    stream = held.stream()
    for line in lines:
        match = held.find(line)
        if match is None:
            across = stream.add(line)
            match = across[1] if across is not None else None
        if match is not None:
            refused.setdefault(match.where, match.sentence)
    return refused


def global_refused(held: HeldOut, lines: Sequence[str], n: int) -> Dict[str, str]:
    """``where`` -> sentence of the held-out sentences each of whose padded n-grams occurs somewhere in ``lines``."""
    wanted = {match.where: (match.sentence, padded_grams(tokens, n)) for tokens, match in held.whole.items()}
    needed = set().union(*(grams for _, grams in wanted.values())) if wanted else set()
    seen: Set[Tuple[str, ...]] = set()
    for line in lines:
        seen |= padded_grams(tokens_of(line), n) & needed
    return {where: sentence for where, (sentence, grams) in wanted.items() if grams <= seen}


def report(name: str, refused: Dict[str, str], examples: int) -> List[str]:
    lines = []
    for where, sentence in list(refused.items())[:examples]:
        lines.append(f"  {name}: {sentence!r} ({len(tokens_of(sentence))} words, {where})")
    return lines


def main(argv: Optional[List[str]] = None) -> None:
    parser = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=Path, required=True, help="a folder of .txt books")
    parser.add_argument("--text", nargs="+", required=True, help="Kaldi texts of the held-out sentences")
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 4], help="LM orders to count at")
    parser.add_argument("--limit", type=int, default=None, help="the first N books only (sorted path order)")
    parser.add_argument("--examples", type=int, default=10, help="sentences shown per rule and order")
    text_norm.add_arguments(parser, case="upper", punctuation="remove")
    args = parser.parse_args(argv)
    if min(args.orders) < 1:
        raise UserError(f"--orders must be at least 1, got {args.orders}")
    if not args.books.is_dir():
        raise UserError(f"--books {args.books}: not a folder")
    books = sorted((p for p in args.books.rglob("*.txt") if p.is_file()),
                   key=lambda p: str(p.relative_to(args.books)))[:args.limit]
    if not books:
        raise UserError(f"--books {args.books}: no .txt file under it")
    lines, damaged = book_lines(books, text_norm.from_args(args))
    words = sum(len(line.split()) for line in lines)
    print(f"books: {len(books)} under {args.books} ({damaged} with bytes that are not UTF-8), {len(lines)} "
          f"sentences, {words} words")
    for n in args.orders:
        held = HeldOut(args.text, order=n)
        window, rule = window_refused(held, lines), global_refused(held, lines, n)
        both = len(set(window) & set(rule))
        if n == args.orders[0]:
            print(f"held out: {len(held)} distinct sentences ({', '.join(args.text[:3])}"
                  f"{' ...' if len(args.text) > 3 else ''}, {len(args.text)} files)")
        print(f"order {n}: the window check refuses {len(window)}, the global rule {len(rule)}, both {both}")
        for line in report("window", window, args.examples) + report("global", rule, args.examples):
            print(line)


if __name__ == "__main__":
    run_cli(main, "heldout_rule.py")
