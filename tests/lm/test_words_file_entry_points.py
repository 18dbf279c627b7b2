"""Guard of issue 80 E (an LM is its content, words included): the words file of a KenLM binary (``lm.bin.words``)
is read by one function, ``lm.binary.read_words``, which checks its first line (the binary's SHA-256 and size, and
the SHA-256 of the words: tests/lm/test_binary.py). This test finds, from the code, every function of wenet_udps/,
tools/ and bench/ that names a words file (``words_path`` or a ``.words`` string) and every shell line of run.sh,
tools/ and recipes/ that builds one's path, and fails where one reads it without ``read_words``."""
import ast
import functools
import re
from pathlib import Path
from typing import Iterator, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
# Calls that read a file (a write-mode open is a writer: write_binary's).
READS = {"open", "read_text", "read_bytes", "readlines", "loadtxt", "read_table", "read_csv", "copyfile", "copy",
         "copy2", "memfd_create", "mmap"}
WRITE_MODE = re.compile(r"[wax]")


def _docstrings(tree: ast.AST) -> set:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def _names_words_file(node: ast.AST, docs: set) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "words_path" or \
                isinstance(sub, ast.Attribute) and sub.attr == "words_path":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in docs and \
                re.search(r"\.words\b", sub.value):
            return True
    return False


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _is_read(call: ast.Call) -> bool:
    name = _call_name(call)
    if name not in READS:
        return False
    if name == "open":
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and WRITE_MODE.search(mode.value):
            return False
    return True


@functools.lru_cache(maxsize=None)
def _parse(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def python_functions() -> Iterator[Tuple[str, ast.AST, str]]:
    """(``path:function``, the function's node, the source path) of every function of the package, tools, bench."""
    for top in ("wenet_udps", "tools", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = _parse(str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{path.relative_to(ROOT)}:{node.name}", node, str(path)
            # module level code outside functions (a script's body)
            module = ast.Module(body=[n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef,
                                                                                 ast.AsyncFunctionDef))],
                                type_ignores=[])
            yield f"{path.relative_to(ROOT)}:<module>", module, str(path)


def bypasses() -> Tuple[List[str], List[str]]:
    """(the functions naming a words file, those of them that read a file without read_words)."""
    naming, bad = [], []
    for where, node, path in python_functions():
        docs = _docstrings(_parse(path))
        if where.endswith(":words_path") or not _names_words_file(node, docs):
            continue
        naming.append(where)
        calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
        if any(_is_read(c) for c in calls) and not any(_call_name(c) == "read_words" for c in calls):
            bad.append(where)
    return naming, bad


def test_every_function_reading_a_words_file_goes_through_read_words():
    naming, bad = bypasses()
    # the scan sees the known places: the reader's caller, the writer, the API's cache key, binarize_lm's message
    for known in ("wenet_udps/lm/binary.py:read_binary", "wenet_udps/lm/binary.py:write_binary",
                  "wenet_udps/lm/binary.py:lm_content", "wenet_udps/bin/binarize_lm.py:main"):
        assert known in naming, (known, naming)
    assert not bad, f"these read a KenLM words file without lm.binary.read_words (its checks): {bad}"


def test_read_words_is_called_only_by_read_binary_and_every_lm_is_read_by_read_lm():
    """read_words's one caller is read_binary, whose one caller outside binary.py is none: LMs are read by
    read_lm (arpa or binary), so every entry point checks the words file."""
    callers = {}
    for where, node, _ in python_functions():
        for c in ast.walk(node):
            if isinstance(c, ast.Call) and _call_name(c) in ("read_words", "read_binary"):
                callers.setdefault(_call_name(c), set()).add(where)
    assert callers["read_words"] == {"wenet_udps/lm/binary.py:read_binary"}, callers
    assert callers["read_binary"] <= {"wenet_udps/lm/binary.py:read_lm", "wenet_udps/lm/binary.py:write_binary"}, \
        callers


def test_shell_scripts_only_test_that_a_words_file_exists():
    """run.sh's stages read an LM through the Python entry points; a shell line building a words file's path
    (``${bin}.words``) may only test that it exists."""
    scripts = [ROOT / "run.sh", *sorted((ROOT / "tools").glob("*.sh")), *sorted((ROOT / "recipes").rglob("*.sh"))]
    bad = []
    for script in scripts:
        for lineno, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1):
            code = re.sub(r"(^|\s)#.*$", "", line)
            for m in re.finditer(r"\$\{?\w+\}?\.words\b", code):
                if not code[:m.start()].rstrip().endswith("-f"):
                    bad.append(f"{script.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not bad, bad
