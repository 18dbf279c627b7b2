"""The model's parts. Every attention family registers when ``attention`` (the registry and the scaled-dot family)
is first imported: it ends by importing each family module of this package by name, a module named ``*_attention``
(``udps_attention``, ``cosine_attention``), which imports ``attention`` back (``attention`` names none of them). So a
new similarity family is one new module here (docs/design.md, "Adding an attention family"), and this package's
torch-free modules (``decode_options``, ``modes``: run.sh's start-up check) import no torch."""
