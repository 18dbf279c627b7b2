"""The model's parts. Importing any of them first registers every attention family: the scaled-dot one
(``attention``) and each family module of this package, a module named ``*_attention`` (``udps_attention``,
``cosine_attention``), which imports ``attention`` (``attention`` imports none of them). They are found by name, so a
new similarity family is one new module here (docs/design.md, "Adding an attention family"). The families register
in name order after scaled-dot, but UDPS first (the project's own family)."""
import importlib
import pkgutil

for _name in sorted((m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith("_attention")),
                    key=lambda n: (n != "udps_attention", n)):
    importlib.import_module(f"{__name__}.{_name}")
