"""Dependencies point one way: kernels <- attention <- encoder/decoder <- model <- train/decode/export.

Read from the source (ast), so a wrong-way import fails here before it can tangle the package. Nothing in the
package imports tools/ or loads a file as a module (tools/ are command lines over the package, never the reverse).
"""
import ast
from pathlib import Path
from typing import Dict, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wenet_udps"

LOW = {"utils"}
MODEL = LOW | {"kernels", "transformer"}
# Top-level part of wenet_udps -> the parts it may import (itself always). A new part must be added here.
ALLOWED: Dict[str, Set[str]] = {
    "": {"kernels", "model_builder"},             # the package's lazy re-exports
    "utils": set(),
    "kernels": LOW,
    "transformer": MODEL,
    "model_builder": MODEL,
    "dataset": LOW, "text": LOW, "scoring": LOW, "results": LOW | {"scoring"}, "corpora": LOW,
    "train": MODEL | {"model_builder", "dataset", "text", "scoring"},
    "config": MODEL | {"model_builder", "dataset", "text", "train"},
    "export": MODEL | {"model_builder", "dataset", "text", "config", "train"},
    "lm": MODEL | {"text"},
    "bin": MODEL | {"model_builder", "dataset", "text", "scoring", "results", "config", "train", "export", "lm"},
}
# Inside transformer/: attention modules <- encoder/decoder and their layers <- the model.
ATTENTION = {"attention"}
MODEL_FILES = {"asr_model"}
LOADERS = {"spec_from_file_location", "run_path", "SourceFileLoader", "import_module", "load_source"}


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
            if mine in ATTENTION:
                assert theirs in ATTENTION, f"{where}: attention modules may not import the blocks built on them"
            if mine not in MODEL_FILES and theirs in MODEL_FILES:
                raise AssertionError(f"{where}: encoder/decoder parts may not import the model")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_loaded_by_file_path(path):
    """tools/ scripts are not modules of the package; loading one by path would hide a wrong-way dependency."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            assert name not in LOADERS, f"{path.relative_to(PACKAGE.parent)}:{node.lineno} calls {name}"


def test_the_rules_catch_a_wrong_way_import(tmp_path, monkeypatch):
    """The checks above can fail: a kernel importing the attention modules is reported."""
    fake = PACKAGE / "kernels" / "reference.py"
    source = fake.read_text(encoding="utf-8") + "\nfrom wenet_udps.transformer.attention import ATTENTION_CLASSES\n"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    with pytest.raises(AssertionError, match="kernels may not import transformer"):
        test_imports_point_down(fake)
