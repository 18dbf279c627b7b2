"""Load a tools/*.py script as a module from its file (tools/ holds scripts, not a package, and the tests leave the
import path alone), so tests can call its functions or its main(argv) without a subprocess's torch import."""
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import List

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as the module ``tool_<name>``."""
    spec = importlib.util.spec_from_file_location(f"tool_{name.replace('-', '_')}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so multiprocessing can pickle the tool's worker functions
    spec.loader.exec_module(module)
    return module


def run_tool(name: str, argv: List[str]) -> None:
    """Run tools/<name>.py's main(argv) in this process."""
    load_tool(name).main(argv)

