"""The one normaliser's read form (wenet_udps.utils.text_norm.read_form: format characters removed, NFKC) wherever
text is compared or made into units, tokens or LM words (issue 80, mechanism D).

The guards find the entry points from the code: every tool or bin/ module that reads transcripts (it declares the
normaliser's options or reads sentences), every tokenizer of the registry, and every public function of the text
packages whose first argument is text. Each is run on a text in NFC and on the same text in NFD with format
characters (a byte-order mark, a zero-width space, a soft hyphen) in it: the results must be equal. A new entry
point without a row here fails the guard until it has one.
"""
import ast
import importlib
import inspect
import pkgutil
import unicodedata
from pathlib import Path

import pytest

import wenet_udps
from tests.lm.lm_helpers import need_lmplz
from tests.tools.load import load_tool
from wenet_udps.lm import arpa, build, held_out
from wenet_udps.scoring import bound, tokens as scoring_tokens, wer
from wenet_udps.text import TOKENIZER_CLASSES, char_tokenizer
from wenet_udps.text.base_tokenizer import read_symbol_table
from wenet_udps.utils import text_norm

ROOT = Path(__file__).resolve().parents[2]
NFC = ["CAFÉ OLÉ NAÏVE", "NAÏVE CAFÉ", "OLÉ OLÉ CAFÉ"]


def hostile(text: str) -> str:
    """``text`` in NFD, a byte-order mark before it and a zero-width space and a soft hyphen inside its first word."""
    nfd = unicodedata.normalize("NFD", text)
    return "\ufeff" + nfd[:2] + "\u200b" + nfd[2:3] + "\u00ad" + nfd[3:]


def test_hostile_text_differs_and_reads_as_nfc():
    for text in NFC:
        assert hostile(text) != text and unicodedata.normalize("NFKC", hostile(text)) != text


def kaldi(path: Path, sentences) -> Path:
    path.write_text("".join(f"u{i} {s}\n" for i, s in enumerate(sentences)), encoding="utf-8")
    return path


# ---- the cases of issue 80 (D) ----

def test_compute_wer_scores_nfc_against_nfd_as_equal(tmp_path, capsys):
    # was 50.00 %: CAFÉ precomposed against E + U+0301 was a substitution
    ref = tmp_path / "ref"
    ref.write_text("u1 CAFÉ OLE\n", encoding="utf-8")
    hyp = tmp_path / "hyp"
    hyp.write_text(unicodedata.normalize("NFD", "u1 CAFÉ OLE\n"), encoding="utf-8")
    assert load_tool("compute-wer").main(["--char=0", str(ref), str(hyp)]) == 0
    assert "Overall -> 0.00 % N=2 C=2 S=0 D=0 I=0" in capsys.readouterr().out


def test_a_bom_after_the_key_never_becomes_a_unit_that_stage_4_refuses(tmp_path):
    # stage 0 (normalise_text) kept U+FEFF inside a line, stage 2 (make_char_units) made it a unit and stage 4's
    # tokenizer refused the units file: "token '\ufeff...' holds a byte-order mark ... remove it"
    text = tmp_path / "text"
    text.write_text("u1 \ufeffHELLO WORLD\nu2 \ufeff\ufeffHELLO\n", encoding="utf-8")
    load_tool("normalise_text").main(["--case", "keep", "--punctuation", "keep", str(text)])
    assert text.read_text(encoding="utf-8") == "u1 HELLO WORLD\nu2 HELLO\n"
    text.write_text("u1 \ufeffHELLO WORLD\n", encoding="utf-8")  # stage 2 alone, on a text stage 0 did not see
    load_tool("make_char_units").main([str(text), str(tmp_path / "units.txt")])
    assert set(read_symbol_table(str(tmp_path / "units.txt"))) == {"<blank>", "<unk>", "HELLO", "WORLD", "\u2581",
                                                                   "<sos/eos>"}


# ---- guard 1: every tool and bin/ module that reads transcripts ----

def _reads_transcripts(source: str) -> bool:
    return any(call in source for call in ("text_norm.add_arguments(", "sentences(", "read_text("))


def _entry_points():
    found = {f"tools/{p.name}" for p in (ROOT / "tools").glob("*.py") if _reads_transcripts(p.read_text())}
    found |= {f"wenet_udps/bin/{p.name}" for p in (ROOT / "wenet_udps" / "bin").glob("*.py")
              if _reads_transcripts(p.read_text())}
    return found


def _units(tmp, name, text, *extra):
    out = tmp / f"{name}.units"
    load_tool(name).main([*extra, str(text), str(out)] if name == "make_char_units" else
                         ["--text", str(text), "--nbpe", "12", "--model_prefix", str(tmp / "bpe"), "--units",
                          str(out), *extra])
    return out.read_text(encoding="utf-8")


def _run_compute_wer(tmp, text, capsys):
    capsys.readouterr()
    load_tool("compute-wer").main(["--v=1", str(kaldi(tmp / "ref", NFC)), str(text)])
    return capsys.readouterr().out.split("\n", 2)[2]  # after the two lines naming the files


def _run_compute_biased_wer(tmp, text, capsys):
    phrases = tmp / "phrases.txt"
    phrases.write_text("CAFÉ\nNAÏVE CAFÉ\n", encoding="utf-8")
    capsys.readouterr()
    load_tool("compute-biased-wer").main(["--biasing_list", str(phrases), str(kaldi(tmp / "ref", NFC)), str(text)])
    return "".join(line for line in capsys.readouterr().out.splitlines(True) if str(tmp) not in line)


def _run_normalise_text(tmp, text, capsys):
    load_tool("normalise_text").main(["--punctuation", "keep", str(text)])
    return text.read_text(encoding="utf-8")


def _run_build_lm(tmp, text, capsys):
    need_lmplz()
    from wenet_udps.bin import build_lm
    out = tmp / f"{text.name}.arpa"
    assert build_lm.main(["--text", str(text), "--order", "2", "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _run_check_lm(tmp, text, capsys):
    from wenet_udps.bin import check_lm
    lm = tmp / "lm.arpa"
    if not lm.exists():
        _run_build_lm(tmp, kaldi(tmp / "lm_text", NFC), capsys)
        (tmp / "lm_text.arpa").rename(lm)
    return check_lm.main(["--lm", str(lm), "--text", str(text)])


# How each entry point is run on a Kaldi text; the result must not depend on the text's Unicode form.
RUNS = {
    "tools/compute-wer.py": _run_compute_wer,
    "tools/compute-biased-wer.py": _run_compute_biased_wer,
    "tools/normalise_text.py": _run_normalise_text,
    "tools/make_char_units.py": lambda tmp, text, capsys: _units(tmp, "make_char_units", text),
    "tools/train_bpe.py": lambda tmp, text, capsys: _units(tmp, "train_bpe", text),
    "wenet_udps/bin/build_lm.py": _run_build_lm,
    "wenet_udps/bin/check_lm.py": _run_check_lm,
}
# Entry points that read transcripts but make nothing of them that this guard could compare, and why.
EXEMPT = {
    "tools/make_lm_book_text.py": "writes LM text from a book (ASCII-folded); build_lm, guarded above, reads it",
    "tools/collect_results.py": "reads the wer files compute-wer wrote; compares no transcript",
    "wenet_udps/bin/gpu_check.py": "scores through wenet_udps.scoring (guarded below)",
    "wenet_udps/bin/sherpa_decode.py": "scores through wenet_udps.scoring (guarded below)",
}


def test_every_entry_point_that_reads_transcripts_is_guarded():
    found = _entry_points()
    assert found - set(RUNS) - set(EXEMPT) == set(), "add a row to RUNS (or EXEMPT, with the reason)"
    assert set(RUNS) | set(EXEMPT) <= found, "a row names an entry point that no longer reads transcripts"


@pytest.mark.parametrize("entry", sorted(RUNS))
def test_entry_point_reads_nfd_and_format_characters_as_nfc(entry, tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    clean = RUNS[entry](tmp_path / "a", kaldi(tmp_path / "a" / "text", NFC), capsys)
    dirty = RUNS[entry](tmp_path / "b", kaldi(tmp_path / "b" / "text", map(hostile, NFC)), capsys)
    if isinstance(clean, str):
        clean, dirty = clean.replace(str(tmp_path / "a"), "X"), dirty.replace(str(tmp_path / "b"), "X")
    assert dirty == clean


# ---- guard 2: every tokenizer of the registry ----

@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    text = kaldi(tmp / "text", NFC * 5)
    load_tool("make_char_units").main(["--letters", str(text), str(tmp / "char.units")])
    load_tool("train_bpe").main(["--text", str(text), "--nbpe", "12", "--model_prefix", str(tmp / "bpe"),
                                 "--units", str(tmp / "bpe.units")])
    confs = {"char": {"symbol_table_path": str(tmp / "char.units")},
             "bpe": {"symbol_table_path": str(tmp / "bpe.units"), "bpe_path": str(tmp / "bpe.model")}}
    assert set(confs) == set(TOKENIZER_CLASSES), "a tokenizer without a row here"
    return {name: cls(**confs[name]) for name, cls in TOKENIZER_CLASSES.items()}


@pytest.mark.parametrize("name", sorted(TOKENIZER_CLASSES))
def test_tokenizer_splits_nfd_and_format_characters_as_nfc(tokenizers, name):
    tok = tokenizers[name]
    for text in NFC:
        assert tok.tokenize(hostile(text)) == tok.tokenize(text)
        assert tok.num_unk == 0


# ---- guard 3: every public function of the text packages whose first argument is text ----

PACKAGES = ("wenet_udps.scoring", "wenet_udps.text", "wenet_udps.lm", "wenet_udps.utils.text_norm")
TEXT_ARGS = {"text", "texts", "sentence", "sentences", "line", "lines", "refs", "hyps", "transcript"}


def _text_functions():
    found = {}
    for info in pkgutil.walk_packages(wenet_udps.__path__, "wenet_udps."):
        if not info.name.startswith(PACKAGES):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != info.name:
                continue
            members = [(name, obj)] if inspect.isfunction(obj) else [
                (f"{name}.{n}", f) for n, f in vars(obj).items()
                if inspect.isfunction(f) and (not n.startswith("_") or n == "__call__")] if inspect.isclass(obj) else []
            for qual, fn in members:
                params = [p for p in inspect.signature(fn).parameters if p != "self"]
                if params and params[0] in TEXT_ARGS:
                    found[f"{info.name}.{qual}"] = fn
    return found


def _per_text(fn):
    return lambda texts: [fn(t) for t in texts]


def _score(texts):
    report = wer.score(dict(enumerate(NFC)), dict(enumerate(texts)), char=False)
    return report.total, [(key, alignment.pairs) for key, alignment in report.utterances]


# How each function is called on a list of texts; None: exempt, with the reason as a comment.
CALLS = {
    "wenet_udps.scoring.tokens.tokenize": _per_text(lambda t: scoring_tokens.tokenize(t, char=True)),
    "wenet_udps.scoring.biasing.score_biased": None,  # scores through wer.score's tokenize (guarded above)
    "wenet_udps.scoring.bound.reference_tokens": _per_text(lambda t: bound.reference_tokens({"u": t}, {
        "case": "keep", "punctuation": "keep", "char": "1", "case_sensitive": "1", "remove_tag": "1"})),
    "wenet_udps.scoring.wer.score": _score,
    "wenet_udps.scoring.wer.error_rate": lambda texts: wer.error_rate(dict(enumerate(NFC)), dict(enumerate(texts)),
                                                                      char=True),
    "wenet_udps.scoring.tokens.char_tokens": None,  # the raw splitter: called on the read form only (scan below)
    "wenet_udps.scoring.references.check_references": None,  # compares a list's record with a file, not texts
    "wenet_udps.scoring.references.check_record": None,  # the same
    "wenet_udps.text.char_tokenizer.char_split": _per_text(char_tokenizer.char_split),
    "wenet_udps.text.text_utils.split_non_lang_syms": None,  # the raw splitter: on the read form only (scan below)
    "wenet_udps.text.base_tokenizer.BaseTokenizer.text2tokens": None,  # abstract: the registry's (guard 2)
    "wenet_udps.text.base_tokenizer.BaseTokenizer.tokenize": None,  # the registry's tokenizers (guard 2)
    "wenet_udps.text.char_tokenizer.CharTokenizer.text2tokens": None,  # guard 2
    "wenet_udps.text.bpe_tokenizer.BpeTokenizer.text2tokens": None,  # guard 2
    "wenet_udps.lm.arpa.char_lm_tokens": _per_text(arpa.char_lm_tokens),
    "wenet_udps.lm.arpa.words_of_text": lambda texts: arpa.words_of_text(texts, False),
    "wenet_udps.lm.build.lm_lines": lambda texts: list(build.lm_lines(texts, False)),
    "wenet_udps.lm.build.build_arpa": None,  # hands lm_lines' lines (above) to lmplz
    "wenet_udps.lm.search.spaced": None,  # spaces the detokeniser's output and the LM's words, both read forms
    "wenet_udps.lm.held_out.tokens_of": _per_text(held_out.tokens_of),
    "wenet_udps.lm.held_out.HeldOut.find": None,  # compares tokens_of's tokens (above)
    "wenet_udps.lm.held_out.Stream.add": None,  # the same: tokens_of's tokens of each line, across line breaks
    "wenet_udps.utils.text_norm.TextNorm.__call__": _per_text(text_norm.TextNorm("upper", "remove")),
    "wenet_udps.utils.text_norm.read_form": _per_text(lambda t: text_norm.read_form(t)),
    "wenet_udps.utils.text_norm.match_form": _per_text(text_norm.match_form),
    "wenet_udps.utils.text_norm.text_scripts": text_norm.text_scripts,
    "wenet_udps.utils.text_norm.foreign_letter": _per_text(lambda t: text_norm.foreign_letter(t, ["GREEK"])),
}


def test_every_text_function_is_guarded():
    found = set(_text_functions())
    assert found - set(CALLS) == set(), "add a row to CALLS (None with the reason if it needs none)"
    assert set(CALLS) <= found, "a row names a function that no longer takes text first"


@pytest.mark.parametrize("name", sorted(k for k, v in CALLS.items() if v is not None))
def test_text_function_reads_nfd_and_format_characters_as_nfc(name):
    call = CALLS[name]
    assert call([hostile(t) for t in NFC]) == call(NFC)


def test_the_raw_splitters_are_called_on_the_read_form_only():
    # the exempt splitters above: every function calling one applies read_form first (scanned from the source)
    raw = {"char_tokens", "split_non_lang_syms"}
    for path in [*(ROOT / "wenet_udps").rglob("*.py"), *(ROOT / "tools").glob("*.py")]:
        for fn in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", None)
                     for c in ast.walk(fn) if isinstance(c, ast.Call)}
            if calls & raw:
                assert "read_form" in calls, f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} splits text that " \
                                             "may not be in its read form"
