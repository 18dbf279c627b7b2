"""The model's parts. Importing any of them first registers every attention family: the scaled-dot one
(``attention``) and each family module below, which imports ``attention`` (``attention`` imports none of them).
A new similarity family is one module here, named in this import (docs/design.md)."""
from wenet_udps.transformer import udps_attention, cosine_attention  # noqa: F401  (FAMILIES in this order)
