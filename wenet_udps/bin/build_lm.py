"""Build a word n-gram LM (ARPA) with KenLM's lmplz for the ``*_lm`` decoding modes (``tools/install.sh --lm
true`` installs lmplz), refusing ``--lm_text`` that contains a held-out (dev or test) sentence. The training
transcripts (``--text``) may hold one (a corpus whose speakers read the same prompts); how many do is printed.

    python -m wenet_udps.bin.build_lm --text data/train/text [--lm_text books.txt] \
        --held_out data/dev/text --held_out data/test/text --order 3 --out data/lm/lm.arpa

``--text`` is a Kaldi text (key words...), ``--lm_text`` plain text (one sentence a line); ``--char_lm`` builds a
character LM (Mandarin: each CJK character a word, the text needs no spaces; the words of other scripts, the English
of a code-switch text, stay whole words, as the char tokenizer splits them). Both are normalised as ``--case`` and
``--punctuation`` declare (the recipe's, passed by run.sh: the one normaliser, ``wenet_udps.utils.text_norm``), so the
LM's words are spelt as the units are. A line of ``--lm_text`` that is, or holds every ``--order``-gram of, a
held-out sentence (compared as a reader sees them: NFKC, no zero-width characters, lower case, no punctuation;
``wenet_udps.lm.held_out``) stops the build, as does a line holding a letter of a script that is not the recipe's
(a Cyrillic look-alike in English text; the scripts of ``--text``, else of ``--held_out``). Without ``--held_out``
one line says that no held-out check ran. Check an LM against a dev text with ``wenet_udps.bin.check_lm``.
"""
import argparse
import logging
from typing import List, Optional

from wenet_udps.lm.arpa import LmError
from wenet_udps.lm.build import build_arpa, lm_sentences
from wenet_udps.lm.held_out import HeldOut
from wenet_udps.scoring.tokens import read_text
from wenet_udps.lm.options import DEFAULT_ORDER, check_order_and_prune
from wenet_udps.utils import cli, text_norm
from wenet_udps.utils.cli import run_cli


def get_parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", action="append", default=[], type=cli.existing_file,
                   help="Kaldi text (key words...) whose sentences the LM learns; repeatable")
    p.add_argument("--lm_text", action="append", default=[], type=cli.existing_file,
                   help="plain text, one sentence a line; repeatable")
    p.add_argument("--held_out", action="append", default=[], type=cli.existing_file,
                   help="Kaldi text (dev, test) none of whose sentences --lm_text may contain; repeatable")
    p.add_argument("--order", type=cli.int_range(2), default=DEFAULT_ORDER)
    p.add_argument("--prune", type=cli.non_negative_int, nargs="+", default=None,
                   help="lmplz --prune counts per order from the unigrams, e.g. 0 1 1")
    p.add_argument("--char_lm", action="store_true",
                   help="a character LM: CJK characters as words, other words whole (Mandarin, code-switch)")
    text_norm.add_arguments(p)
    p.add_argument("--out", required=True, type=cli.output_file, help="the ARPA file to write")
    return p


def refuse_held_out_utterances(texts: List[str], held_out: List[str]) -> None:
    """A ``--text`` transcript whose utterance key is a ``--held_out`` one is that dev/test utterance itself, not
    a training sentence that happens to read alike (those are kept: the acoustic model trained on them too), so it
    is refused, naming both files: a held-out text given as ``--text`` was built into an LM with only a note."""
    if not texts or not held_out:
        return
    held = {path: set(read_text(path)) for path in held_out}
    for path in texts:
        keys = read_text(path)
        for other, other_keys in held.items():
            shared = [k for k in keys if k in other_keys]
            if shared:
                raise cli.UserError(f"--text {path}: {len(shared)} of its {len(keys)} utterances are in --held_out "
                                    f"{other} (e.g. {shared[0]}): a dev/test transcript in the LM's text; give the "
                                    "training transcripts as --text")


def main(argv: Optional[List[str]] = None) -> int:
    parser = get_parser()
    args = parser.parse_args(argv)
    if not args.text and not args.lm_text:
        parser.error("give the LM's text: --text (Kaldi text) or --lm_text (plain text)")
    try:  # before any text is read
        check_order_and_prune(args.order, args.prune)
    except LmError as e:
        parser.error(f"--prune: {e}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    norm = text_norm.from_args(args)
    held_out = HeldOut(args.held_out, order=args.order)
    refuse_held_out_utterances(args.text, args.held_out)
    read = {path: lm_sentences(path, keyed, norm) for keyed, paths in ((True, args.text), (False, args.lm_text))
            for path in paths}
    transcripts = [(path, read[path][0]) for path in args.text]
    extra = [(path, read[path][0]) for path in args.lm_text]
    # the recipe's scripts: those of its training transcripts, else of its dev/test texts
    scripts = (text_norm.text_scripts(s for _, rows in transcripts for _, s in rows) if args.text
               else held_out.scripts())
    held_out.refuse(extra, scripts)
    for _, said in read.values():
        print(said, flush=True)
    if not args.held_out:
        print("note: no held-out check ran (no --held_out): nothing stops a dev or test sentence in the LM text; "
              "pass the dev and test texts, as run.sh does", flush=True)
    shared = list(held_out.matches(transcripts))
    if shared:
        print(f"note: {len(shared)} transcript line(s) are or hold dev/test sentences, kept (the acoustic model "
              f"trained on them too), e.g. {shared[0][0]} = {shared[0][1].where}", flush=True)
    sources = transcripts + extra
    info = build_arpa((s for _, sentences in sources for _, s in sentences), args.out, order=args.order,
                      prune=args.prune, char_lm=args.char_lm)
    print(f"wrote LM {info.describe()}, n-grams {' '.join(map(str, info.counts))}", flush=True)
    return 0


if __name__ == "__main__":
    run_cli(main, "wenet_udps.bin.build_lm")
