"""Guard of mechanism F (issue 80): every file wenet_udps/, tools/ or bench/ writes goes through the one atomic
writer, ``wenet_udps.utils.atomic``.

The scan (ast) finds every write in the source and fails on one whose destination is not the helper's: a write-mode
``open`` (``w``, ``a``, ``x``, ``+``; also ``Path.open``, ``gzip.open``, ``os.fdopen``, a mode it cannot read),
``os.open`` with a writing flag, ``.write_text``/``.write_bytes``, ``np.save*``/``savetxt``/``.tofile``,
``torch.save``/``torch.jit.save``/``onnx.save``/any ``.save(path)``, ``json``/``yaml``/``pickle.dump`` to a file,
``tarfile.open`` in a write mode, ``shutil.copy*``/``move``, ``soundfile.write``, ``savefig``,
``torch.onnx.export``, sentencepiece's ``model_prefix``, a log file (``SummaryWriter``, ``FileHandler``), and a
subprocess that may write a file.

A destination is the helper's when it is (or is derived from) a name bound by ``with open_atomic(...) as f`` or
``with temp_path(...) as tmp``; a scratch name (``tempfile``'s, an ``io.BytesIO``) is not an output either. A
subprocess is fine inside such a block (it writes the temporary file), or when its program only prints (below).
"""
import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "wenet_udps" / "utils" / "atomic.py"
SCANNED = ("wenet_udps", "tools", "bench")

# (file, function) -> why it may write outside the helper. Kept small; every entry must still be needed.
ALLOWED: Dict[Tuple[str, str], str] = {
    ("wenet_udps/kernels/cpu_ext.py", "build_under_lock"): "an empty lock file for flock; its content is never read",
    ("wenet_udps/export/sherpa.py", "export_lock"): "an empty lock file for flock (one export into a folder at a "
                                                    "time); its content is never read",
    ("wenet_udps/train/run_dir.py", "__init__"): "the experiment's lock file (flock); the pid in it only names the "
                                                 "holder in a message (\"unknown\" when empty)",
    ("wenet_udps/train/tensorboard.py", "__init__"): "TensorBoard's event log, appended deliberately while training "
                                                     "(a log, like train.log)",
    ("bench/attention.py", "measure_memory_child"): "/proc/self/clear_refs: a kernel control, not a file",
    ("bench/_harness.py", "neighbour"): "the CPU-load neighbours (a busy loop, a matmul, the test suite) write "
                                        "no output of the bench",
    ("bench/kernel_sass.py", "_run_on"): "nvdisasm/cuobjdump print the disassembly to a pipe",
    ("wenet_udps/utils/cli.py", "open_input"): "the one reader's open: it refuses every write mode",
}
# Programs a subprocess may run outside an atomic block: each writes only to a pipe.
PRINTING_PROGRAMS = {
    "git": "ls-tree, cat-file, rev-parse: read the repository",
    "grep": "prints the matching lines",
    "nvidia-smi": "prints the GPU's facts",
    "espeak-ng": "--stdout: the audio to a pipe",
    "python": "this project's own code (sys.executable), whose writes this scan covers",
}
ATOMIC_CONTEXTS = {"open_atomic", "temp_path"}
SCRATCH_CONTEXTS = {"TemporaryDirectory", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"}
SCRATCH_CALLS = {"BytesIO", "StringIO", "mkdtemp", "mkstemp"}  # not gettempdir: a fixed path in it is shared
SUBPROCESS = {"run", "call", "check_call", "check_output", "Popen", "system"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _name(node: ast.AST) -> str:
    """``a.b.c`` of a call's function (the last parts that are names)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _arg(call: ast.Call, index: int, keyword: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index else None


class _Scope:
    """The names of one function (and those enclosing it) that are the helper's, or scratch."""

    def __init__(self, func: ast.AST, outer: Optional["_Scope"]):
        self.safe: Set[str] = set(outer.safe) if outer else set()
        self.in_atomic: Set[int] = set(outer.in_atomic) if outer else set()  # ids of nodes in such a block
        self.assigned: Dict[str, ast.AST] = dict(outer.assigned) if outer else {}
        nodes = [n for n in ast.walk(func)]
        for node in nodes:
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    called = _name(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else ""
                    last = called.rsplit(".", 1)[-1]
                    if last in ATOMIC_CONTEXTS:
                        self.in_atomic.update(id(n) for n in ast.walk(node))
                    if last in ATOMIC_CONTEXTS | SCRATCH_CONTEXTS and isinstance(item.optional_vars, ast.Name):
                        self.safe.add(item.optional_vars.id)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned[target.id] = node.value
        changed = True
        while changed:  # names derived from safe ones: os.path.join(scratch, "x"), Path(tmp) / "x"
            changed = False
            for node in nodes:
                if isinstance(node, ast.Assign) and self.is_safe(node.value):
                    for target in node.targets:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name) and name.id not in self.safe:
                                self.safe.add(name.id)
                                changed = True

    def is_safe(self, node: Optional[ast.AST]) -> bool:
        if node is None:
            return False
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.safe:
                return True
            if isinstance(sub, ast.Call) and _name(sub.func).rsplit(".", 1)[-1] in SCRATCH_CALLS:
                return True
            if isinstance(sub, ast.Attribute) and _name(sub) in ("sys.stdout", "sys.stderr"):
                return True
        return False

    def inside_atomic_block(self, call: ast.Call) -> bool:
        return id(call) in self.in_atomic

    def program(self, call: ast.Call) -> str:
        """The program a subprocess call runs, as far as the source says ("" when it does not)."""
        cmd = _arg(call, 0, "args")
        if isinstance(cmd, ast.Name) and cmd.id in self.assigned:
            cmd = self.assigned[cmd.id]
        while isinstance(cmd, ast.BinOp):
            cmd = cmd.left
        if isinstance(cmd, ast.List) and cmd.elts:
            first = cmd.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return first.value
            if _name(first) == "sys.executable":
                return "python"
        return ""


def _write_mode(mode: Optional[ast.AST], default: str = "r") -> bool:
    """Whether an ``open`` mode writes; a mode the source does not spell out counts as writing."""
    if mode is None:
        return any(c in default for c in "wax+")
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True


def _violation(call: ast.Call, scope: _Scope) -> Optional[str]:
    """Why ``call`` writes a file outside the helper, or None."""
    name = _name(call.func)
    last = name.rsplit(".", 1)[-1]
    dest: Optional[ast.AST] = None
    what = ""
    if isinstance(call.func, ast.Name) and name == "open" or name in ("io.open", "gzip.open", "bz2.open",
                                                                       "lzma.open", "os.fdopen", "codecs.open"):
        if _write_mode(_arg(call, 1, "mode")):
            dest, what = _arg(call, 0, "file"), f"{name}() in a write mode"
    elif name == "tarfile.open":
        if _write_mode(_arg(call, 1, "mode")):
            fileobj = _arg(call, 99, "fileobj")
            dest, what = (fileobj if fileobj is not None else _arg(call, 0, "name")), "tarfile.open in a write mode"
    elif last == "open" and isinstance(call.func, ast.Attribute):  # Path.open(mode)
        if _arg(call, 0, "mode") is not None and _write_mode(_arg(call, 0, "mode")):
            dest, what = call.func.value, f"{name}() in a write mode"
    elif name == "os.open":
        flags = {n.attr for n in ast.walk(_arg(call, 1, "flags") or ast.Constant(0)) if isinstance(n, ast.Attribute)}
        if flags & WRITE_FLAGS:
            dest, what = _arg(call, 0, "path"), "os.open with a writing flag"
    elif last in ("write_text", "write_bytes") and isinstance(call.func, ast.Attribute):
        dest, what = call.func.value, f".{last}()"
    elif name in ("np.save", "np.savez", "np.savez_compressed", "np.savetxt", "numpy.save", "numpy.savetxt"):
        dest, what = _arg(call, 0, "file"), name
    elif last == "tofile":
        dest, what = _arg(call, 0, "file"), ".tofile()"
    elif name in ("torch.save", "torch.jit.save", "onnx.save", "onnx.save_model"):
        dest, what = _arg(call, 1, "f"), name
    elif last == "save" and isinstance(call.func, ast.Attribute):
        dest, what = _arg(call, 0, "f"), f"{name}()"
    elif name in ("json.dump", "yaml.dump", "yaml.safe_dump", "pickle.dump"):
        dest, what = _arg(call, 1, "fp" if name == "json.dump" else "stream" if "yaml" in name else "file"), name
        if dest is None:
            return None  # yaml.dump without a stream returns the text
    elif name.startswith("shutil.") and last in ("copy", "copy2", "copyfile", "copyfileobj", "copytree", "move"):
        dest, what = _arg(call, 1, "dst"), name
    elif name in ("sf.write", "soundfile.write", "torchaudio.save"):
        dest, what = _arg(call, 0, "file"), name
    elif last == "savefig":
        dest, what = _arg(call, 0, "fname"), ".savefig()"
    elif name in ("torch.onnx.export", "onnx.export"):
        dest, what = _arg(call, 2, "f"), name
    elif last == "train" and "SentencePieceTrainer" in name:
        dest, what = _arg(call, 99, "model_prefix"), "sentencepiece's model_prefix"
    elif last in ("SummaryWriter", "FileHandler", "RotatingFileHandler"):
        return f"{name}() writes a log file"
    elif name.startswith(("subprocess.", "os.")) and last in SUBPROCESS:
        program = scope.program(call)
        if scope.inside_atomic_block(call) or program in PRINTING_PROGRAMS:
            return None
        return f"{name}({program or '?'}) may write a file: run it inside open_atomic/temp_path"
    if not what or scope.is_safe(dest):
        return None
    return f"{what} to {ast.unparse(dest) if dest is not None else '?'}"


def _scan(path: Path, source: Optional[str] = None) -> Iterator[Tuple[int, str, str]]:
    """(line, enclosing function, why) of every write in ``path`` outside the helper."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))

    def visit(node: ast.AST, scope: _Scope, func: str) -> Iterator[Tuple[int, str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, _Scope(child, scope), getattr(child, "name", func))
                continue
            if isinstance(child, ast.Call):
                why = _violation(child, scope)
                if why:
                    yield child.lineno, func, why
            yield from visit(child, scope, func)
    yield from visit(tree, _Scope(tree, None), "<module>")


def _files() -> List[Path]:
    return sorted(p for part in SCANNED for p in (ROOT / part).rglob("*.py") if p != HELPER)


def test_every_write_goes_through_the_atomic_helper():
    assert len(_files()) > 100  # the scan sees the package, tools/ and bench/
    found, used = [], set()
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        for line, func, why in _scan(path):
            if (rel, func) in ALLOWED:
                used.add((rel, func))
                continue
            found.append(f"{rel}:{line} ({func}): {why}")
    assert not found, ("writes outside wenet_udps.utils.atomic (a full disk would leave a partial file there):\n"
                       + "\n".join(found))
    assert used == set(ALLOWED), f"allow-list entries no longer needed: {sorted(set(ALLOWED) - used)}"


BYPASSES = [
    'open(out, "w").write(text)',
    'open(out, mode).write(text)',
    'open(out, "a")',
    'open(out, "r+b")',
    'Path(out).open("w")',
    'Path(out).write_text(text)',
    'out.write_bytes(data)',
    'np.save(out, a)',
    'np.savetxt(out, a)',
    'a.tofile(out)',
    'torch.save(state, out)',
    'torch.jit.save(module, out)',
    'traced.save(out)',
    'onnx.save(proto, out)',
    'torch.onnx.export(m, x, out)',
    'json.dump(obj, open(out, "w"))',
    'with open(out, "w") as f:\n    json.dump(obj, f)',
    'tarfile.open(out, "w")',
    'tarfile.open(out, mode="w:gz")',
    'shutil.copyfile(src, out)',
    'shutil.copy(src, out)',
    'shutil.move(src, out)',
    'sf.write(out, audio, 16000)',
    'fig.savefig(out)',
    'os.open(out, os.O_WRONLY | os.O_CREAT)',
    'spm.SentencePieceTrainer.train(input=x, model_prefix=out)',
    'SummaryWriter(log_dir)',
    'logging.FileHandler(out)',
    'subprocess.run(["lmplz", "-o", "3"], stdout=f)',
    'subprocess.run([tool, arpa, out])',
    'with open_atomic(out) as f:\n    pass\nsubprocess.run([tool, arpa, out])',
    'with open_atomic(out) as f:\n    pass\ntorch.save(state, g)',
]
FINE = [
    'with open_atomic(out, "wb") as f:\n    torch.save(state, f)',
    'with open_atomic(out) as f:\n    json.dump(obj, f)',
    'with atomic.open_atomic(out, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:\n    pass',
    'with open_atomic(out, "wb") as f:\n    fig.savefig(f, format="png")',
    'with temp_path(out) as tmp:\n    subprocess.run([tool, arpa, tmp])',
    'with open_atomic(out, "wb") as f:\n    subprocess.run(cmd, stdout=f)',
    'buf = io.BytesIO()\ntorch.save(state, buf)',
    'with tempfile.TemporaryDirectory() as d:\n    p = os.path.join(d, "x")\n    open(p, "w")',
    'open(path)',
    'open(path, "rb")',
    'write_text(out, text)',
    'subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True)',
    'cmd = [sys.executable, "-m", "x"]\nsubprocess.run(cmd)',
    'yaml.safe_dump(obj)',
    'json.dump(obj, sys.stdout)',
]


@pytest.mark.parametrize("source", BYPASSES)
def test_the_scan_finds_each_kind_of_write(source):
    """Each kind of write the scan is meant to find, written outside the helper, is found (a scan that found
    nothing would pass the test above)."""
    assert list(_scan(Path("x.py"), source)), source


@pytest.mark.parametrize("source", FINE)
def test_the_scan_passes_writes_through_the_helper(source):
    assert not list(_scan(Path("x.py"), source)), source

