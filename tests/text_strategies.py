"""Hypothesis strategies of hostile text for the property-based tests (tests/*/test_*_properties.py): every Unicode
form of a word (NFC, NFD, compatibility forms), format characters, every kind of white space and line end, CJK,
punctuation, tags, and the characters whose case mapping changes their length or form."""
import unicodedata

from hypothesis import strategies as st

# Characters that broke, or could break, one rule or another: combining marks, Cf (BOM, ZWSP, soft hyphen, word
# joiner, RLM), white space Python splits at but a line reader does not (\x0b \x0c \x1c \x85 \u2028 \u3000 NBSP),
# fullwidth and ligature forms NFKC maps, CJK and kana, punctuation the scorer skips, tag brackets, apostrophes,
# letters whose upper case is longer or decomposed (ß ŉ ǰ ΐ ﬁ), the dotless i and the long s, and characters whose
# NFKC form holds a space or several words (¨ ´ U+FDFA ㍿ ⑴).
INTERESTING = ("aAeEzZ09 \t\x0b\x0c\x1c\x85\xa0\u2028\u3000\u00e9\u0065\u0301\u0308\u00ef\ufeff\u200b\u00ad\u2060"
               "\u200e\uff21\uff41\uff0c\uff01\ufb01\u2103\u00df\u0149\u01f0\u0390\u0131\u017f\u4f60\u597d\u3042"
               "\u30a2\uac00,.!?;:'\u2019\"-<>{}[]()\u3002\uff0c\u00a8\u00b4\ufdfa\u337f\u2474")


def _word_forms(text: str) -> st.SearchStrategy:
    return st.sampled_from([unicodedata.normalize(form, text) for form in ("NFC", "NFD", "NFKC", "NFKD")])


# Any text a file could hold on one line (no surrogates: a UTF-8 file cannot hold one; no \n or \r: those end it).
line_text = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30),
    st.text(st.sampled_from(INTERESTING), max_size=30),
    st.lists(st.sampled_from(["CAFÉ", "OLÉ", "naïve", "ÅSA", "Zero,", "<unk>", "你好", "ＡＢＣ", "ﬁne"]).flatmap(
        _word_forms), max_size=6).map(" ".join),
)
# A key: what read_table reads as one (no white space by Python's rule, no BOM, no line end), non-empty.
key = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp"), blacklist_characters="\ufeff\n\r"),
              min_size=1, max_size=12).filter(lambda k: not any(c.isspace() for c in k))
line_end = st.sampled_from(["\n", "\r\n", "\r"])
space = st.text(st.sampled_from(" \t\x0b\x0c\u3000\xa0"), min_size=1, max_size=3)
