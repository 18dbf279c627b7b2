"""Guard of issue 80's mechanism C (one loaded model, many threads): nothing that a loaded model shares between the
threads decoding with it changes after it is made, except under a lock.

The shared objects are found from the code itself: every object reachable from a ``RecognitionModel`` that has
decoded in every mode of the registry (its torch modules, tokenizer, feature pipeline, recipe records, the LM search
with its lexicon search, trie and word scorer, ...). For each of their classes defined in wenet_udps, every method but
``__init__`` is read (its AST): an assignment to ``self.<x>`` (or ``self.<x>[...]``, ``self.<x>.<y>``), a ``del`` of
one, or a call of a mutating method on one (``self.<x>.append(...)``, ``.add``, ``.update``, ...) fails the guard
unless it sits inside ``with self.<...lock...>:`` or the method is in BUILD (it runs only while the object is being
made, before any thread can see it). The same holds for module-level state: a function of any wenet_udps module
loaded once the model has decoded in every mode (with the kernels each attention call may dispatch to) that rebinds
a module global (``global``) or changes a module-level container must do it inside ``with <..._LOCK>:`` (a module
lock), unless it runs only at import or process setup (IMPORT_TIME).

Search state of one call (a beam, a memo, a cache of one utterance) lives in objects that the call makes and drops:
they are not reachable from the model, and are not checked.
"""
import ast
import importlib
import inspect
import os
import sys
import textwrap
import types
from typing import Iterator, List, Set, Tuple

import numpy as np
import pytest
import torch

from tests.decode.test_threads import options, setup  # noqa: F401 - the module fixture: a model, clips, an LM
from wenet_udps.transformer.modes import DECODING_METHODS

MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear", "remove",
            "discard", "__setitem__", "__delitem__", "sort", "reverse"}
# Methods that change their object while it is being made, before it is shared: (class, method) -> why.
BUILD = {
    ("LexiconTrie", "insert"): "LmSearch.__init__ fills the trie before the search exists",
    ("LexiconTrie", "smear"): "LmSearch.__init__ smears the trie before the search exists",
    ("AsrDataset", "set_epoch"): "training only: a dataset is made per decode_list call",
}
# Functions that change module state while the module is imported, before any thread decodes: name -> why.
IMPORT_TIME = {
    "wenet_udps.transformer.attention.register_attention": "the attention classes' decorator (the registry)",
    "wenet_udps.decode.soup._init_worker": "the soup's pool initialiser: runs once in each spawned worker process, "
                                            "before it evaluates anything",
    "wenet_udps.transformer.attention.register_family": "the attention families' registry, filled as each family's "
                                                        "module is imported",
    "wenet_udps.train.distributed.init_distributed": "a training process's setup, before it trains",
}
# Modules every decoding call may run through (the kernels it dispatches to, the attention-map recorder), imported
# here if decoding in every mode did not import them; the module scan reads every wenet_udps module then loaded.
DISPATCH_MODULES = ("wenet_udps.kernels.dispatch", "wenet_udps.kernels.selfcheck", "wenet_udps.kernels.cpu_ext",
                    "wenet_udps.kernels.cpu_tiled", "wenet_udps.decode.attention_maps")


def reachable(root: object) -> Iterator[object]:
    """Every object reachable from ``root`` through attributes and containers (tensors, arrays and scalars are
    leaves; modules and classes are not followed)."""
    seen: Set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None), torch.Tensor, np.ndarray,
                                               types.ModuleType, type, types.FunctionType, types.MethodType)):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, dict):
            todo += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo += list(obj)
        elif hasattr(obj, "__dict__"):
            todo += list(vars(obj).values())


def shared_classes(model) -> Set[type]:
    """The wenet_udps classes (and their wenet_udps bases) of the objects the loaded model holds."""
    found = set()
    for obj in reachable(model):
        for cls in type(obj).__mro__:
            if cls.__module__.startswith("wenet_udps"):
                found.add(cls)
    return found


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


def _locked(stack: List[ast.AST], is_lock) -> bool:
    return any(isinstance(n, (ast.With, ast.AsyncWith)) and any(is_lock(item.context_expr) for item in n.items)
               for n in stack)


def _mutations(tree: ast.AST, changes) -> Iterator[Tuple[int, str, List[ast.AST]]]:
    """(line, what, enclosing nodes) of each change that ``changes(node)`` names in ``tree``."""
    def walk(node: ast.AST, stack: List[ast.AST]) -> Iterator[Tuple[int, str, List[ast.AST]]]:
        what = changes(node)
        if what:
            yield node.lineno, what, stack
        for child in ast.iter_child_nodes(node):
            yield from walk(child, stack + [node])
    yield from walk(tree, [])


def _targets(node: ast.AST) -> List[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return node.targets
    return []


def _flat(targets: List[ast.AST]) -> Iterator[ast.AST]:
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _flat(t.elts)
        else:
            yield t


def self_changes(node: ast.AST) -> str:
    for t in _flat(_targets(node)):
        if isinstance(t, (ast.Attribute, ast.Subscript)) and isinstance(_root(t), ast.Name) and _root(t).id == "self":
            return ast.unparse(t)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
            and isinstance(node.func.value, (ast.Attribute, ast.Subscript))
            and isinstance(_root(node.func.value), ast.Name) and _root(node.func.value).id == "self"):
        return ast.unparse(node.func)
    return ""


def is_lock(expr: ast.AST) -> bool:
    """``with self._lock:``, ``with _CACHE_LOCK:``, ``with self._busy:``, ``with _PATCH["lock"]:`` ..."""
    text = ast.unparse(expr).lower()
    return "lock" in text or "busy" in text


def unlocked_self_changes(cls: type) -> List[str]:
    """``Class.method:line what`` for each change of ``self`` outside ``__init__``, a lock and BUILD."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # (a class made at run time: nothing to read)
        return []
    out = []
    for method in tree.body[0].body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.name in ("__init__",
                                                                                               "__post_init__"):
            continue
        if (cls.__name__, method.name) in BUILD:
            continue
        for line, what, stack in _mutations(method, self_changes):
            if not _locked(stack, is_lock):
                out.append(f"{cls.__module__}.{cls.__name__}.{method.name}: {what}")
    return out


def unlocked_global_changes(module: types.ModuleType) -> List[str]:
    """``module.function: what`` for each function that rebinds a global or changes a module-level container
    outside ``with <NAME>_LOCK`` (thread-local objects excepted: each thread has its own)."""
    tree = ast.parse(inspect.getsource(module))
    top = {t.id for n in tree.body for t in _flat(_targets(n)) if isinstance(t, ast.Name)}
    top |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    local = {name for name in top if type(getattr(module, name, None)).__name__ == "_local"}

    def changes(node: ast.AST, shared: Set[str], rebound: Set[str]) -> str:
        for t in _flat(_targets(node)):
            if isinstance(t, ast.Name) and t.id in rebound:
                return f"{t.id} (global)"
            if isinstance(t, (ast.Attribute, ast.Subscript)) and isinstance(_root(t), ast.Name) \
                    and _root(t).id in shared:
                return ast.unparse(t)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
                and isinstance(_root(node.func.value), ast.Name) and _root(node.func.value).id in shared):
            return ast.unparse(node.func)
        return ""

    out = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                f"{module.__name__}.{func.name}" in IMPORT_TIME:
            continue
        rebound = {name for n in ast.walk(func) if isinstance(n, ast.Global) for name in n.names}
        # (a name the function binds itself is its own, unless declared global)
        own = {t.id for n in ast.walk(func) for t in _flat(_targets(n)) if isinstance(t, ast.Name)} - rebound
        own |= {a.arg for a in func.args.args + func.args.kwonlyargs}
        shared = (top - local) - own
        for line, what, stack in _mutations(func, lambda n: changes(n, shared, rebound)):
            if not _locked(stack, is_lock):
                out.append(f"{module.__name__}.{func.name}:{line}: {what}")
    return sorted(set(out))


@pytest.fixture(scope="module")
def decoded(setup):  # noqa: F811 - the fixture imported above
    """The model of test_threads after decoding once in every mode (so what it makes on first use exists)."""
    model = setup["model"]
    for mode in DECODING_METHODS:
        model.transcribe(setup["clips"][0], mode=mode, **options(mode, setup["lm"]))
    return model


def test_the_walk_finds_the_shared_parts(decoded):
    """The walk reaches what the threads share (else the guard below would check nothing)."""
    names = {cls.__name__ for cls in shared_classes(decoded)}
    assert {"RecognitionModel", "ASRModel", "LmSearch", "LexiconBeamSearch", "LexiconTrie", "WordScorer",
            "RecipeDecoding", "UtteranceProcessor"} <= names, sorted(names)


def test_shared_objects_change_only_under_a_lock(decoded):
    found = sorted(line for cls in shared_classes(decoded) for line in unlocked_self_changes(cls))
    assert not found, ("state shared by the threads decoding with one model changes outside a lock (make it per "
                       "call, or hold the object's lock):\n" + "\n".join(found))


def test_module_state_changes_only_under_a_lock(decoded):
    for name in DISPATCH_MODULES:
        importlib.import_module(name)
    modules = [module for name, module in sorted(sys.modules.items())
               if name.startswith("wenet_udps") and inspect.getsourcefile(module) and os.path.getsize(
                   inspect.getsourcefile(module))]
    assert {sys.modules[cls.__module__] for cls in shared_classes(decoded)} <= set(modules)
    found = [line for module in modules for line in unlocked_global_changes(module)]
    assert not found, ("module state that decoding threads share changes outside a module lock:\n"
                       + "\n".join(found))
