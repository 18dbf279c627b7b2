"""Dependencies point one way: kernels <- attention <- encoder/decoder <- model <- train/decode/export.

Read from the source (ast), so a wrong-way import fails here before it can tangle the package. Nothing in the
package imports tools/ or loads a file as a module (tools/ are command lines over the package, never the reverse).
"""
import ast
from pathlib import Path
from typing import Dict, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "wenet_udps"

LOW = {"utils"}
MODEL = LOW | {"kernels", "transformer"}
# Top-level part of wenet_udps -> the parts it may import (itself always). A new part must be added here.
ALLOWED: Dict[str, Set[str]] = {
    "": {"kernels", "model_builder", "decode"},   # the package's lazy re-exports (build_model, the Python API)
    "utils": set(),
    "kernels": LOW,
    "transformer": MODEL,
    "model_builder": MODEL,
    "dataset": LOW, "text": LOW, "scoring": LOW, "results": LOW | {"scoring"},
    "corpora": LOW | {"dataset"},   # corpus preparation reads recordings through the one checked audio reader
    "train": MODEL | {"model_builder", "dataset", "text", "scoring"},
    "config": MODEL | {"model_builder", "dataset", "text", "train"},
    "export": MODEL | {"model_builder", "dataset", "text", "config", "train"},
    "model_info": MODEL | {"model_builder", "dataset"},
    "lm": MODEL | {"text"},
    "decode": MODEL | {"model_builder", "dataset", "text", "scoring", "config", "train", "lm"},
    "bin": MODEL | {"model_builder", "model_info", "dataset", "text", "scoring", "results", "config", "train",
            "export", "lm", "decode"},
}
# Inside transformer/: attention modules <- encoder/decoder and their layers <- the model. step_cache (the decoder's
# self-attention cache, which an attention's step writes) and score_scale (the families' learnable scales) import
# nothing of the package's blocks: they sit with them. A family module is named *_attention.
ATTENTION = {"attention", "score_scale", "step_cache"}   # and every family module, *_attention
MODEL_FILES = {"asr_model"}
LOADERS = {"spec_from_file_location", "run_path", "SourceFileLoader", "import_module", "load_source"}
# transformer/attention.py imports its own family modules by name (pkgutil lists the package's *_attention modules):
# no file path, and what they import is checked above like every module's.
NAME_IMPORTS = {Path("transformer/attention.py"): {"import_module"}}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(imported module, line) of every import in ``path``; relative imports resolved against the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module(path).split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + (path.name == "__init__.py")] if node.level else []
            yield ".".join(base + ([node.module] if node.module else [])), node.lineno


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


FILES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    me = _module(path)
    part = _part(me)
    assert part in ALLOWED, f"{me}: new part {part!r} of wenet_udps: add its layer to ALLOWED in {__file__}"
    for target, line in _imports(path):
        where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        assert target.split(".")[0] != "tools", where
        if not target.startswith("wenet_udps"):
            continue
        other = _part(target)
        assert other == part or other in ALLOWED[part], f"{where}: {part or 'wenet_udps'} may not import {other}"
        if part == "transformer" and other == "transformer":
            mine, theirs = me.split(".")[-1], target.split(".")[2] if target.count(".") >= 2 else ""
            if mine in ATTENTION or mine.endswith("_attention"):
                assert theirs in ATTENTION or theirs.endswith("_attention"), \
                    f"{where}: attention modules may not import the blocks built on them"
            if mine not in MODEL_FILES and theirs in MODEL_FILES:
                raise AssertionError(f"{where}: encoder/decoder parts may not import the model")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_loaded_by_file_path(path):
    """tools/ scripts are not modules of the package; loading one by path would hide a wrong-way dependency."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            allowed = NAME_IMPORTS.get(path.relative_to(PACKAGE), set())
            assert name not in LOADERS - allowed, f"{path.relative_to(PACKAGE.parent)}:{node.lineno} calls {name}"


def test_the_rules_catch_a_wrong_way_import(tmp_path, monkeypatch):
    """The checks above can fail: a kernel importing the attention modules is reported."""
    fake = PACKAGE / "kernels" / "reference.py"
    source = fake.read_text(encoding="utf-8") + "\nfrom wenet_udps.transformer.attention import ATTENTION_CLASSES\n"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    with pytest.raises(AssertionError, match="kernels may not import transformer"):
        test_imports_point_down(fake)


def _bin_imports(path: Path):
    """(bin module imported, line) for every import of ``wenet_udps.bin`` or one of its modules in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            parent = node.module in ("wenet_udps", "wenet_udps.bin")  # from wenet_udps(.bin) import NAME
            names = [f"{node.module}.{a.name}" for a in node.names] if parent else [node.module or ""]
        else:
            continue
        for name in names:
            if name == "wenet_udps.bin" or name.startswith("wenet_udps.bin."):
                yield name, node.lineno


def layering_violations(root: Path = ROOT):
    """Where the command lines are imported as a library: a package module (not bin/) importing bin/, a bin/ module
    importing another bin/ module, bench/ or tools/ importing bin/ (they use the library, wenet_udps.decode...)."""
    found = []
    scripts = sorted((root / "bench").rglob("*.py")) + sorted((root / "tools").rglob("*.py"))
    for path in sorted((root / "wenet_udps").rglob("*.py")) + scripts:
        rel = path.relative_to(root)
        in_bin = rel.parts[:2] == ("wenet_udps", "bin")
        me = ".".join(rel.with_suffix("").parts)
        for name, line in _bin_imports(path):
            if in_bin and name in (me, "wenet_udps.bin"):
                continue
            found.append(f"{rel}:{line} imports {name}")
    return found


def test_nothing_imports_the_command_lines():
    assert layering_violations() == []


def test_the_command_line_rule_catches_each_case(tmp_path):
    """Each of the three rules can fail: a library module, a bin/ module and a bench script importing bin/."""
    for rel, line in [("wenet_udps/decode/x.py", "from wenet_udps.bin.recognize import main"),
                      ("wenet_udps/bin/a.py", "from wenet_udps.bin import describe"),
                      ("bench/b.py", "import wenet_udps.bin.recognize"),
                      ("tools/c.py", "from wenet_udps.bin.describe import site_types")]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(line + "\n", encoding="utf-8")
    assert [v.split(":")[0] for v in layering_violations(tmp_path)] == [
        "wenet_udps/bin/a.py", "wenet_udps/decode/x.py", "bench/b.py", "tools/c.py"]
