"""The learnable score scales of the bounded-similarity families (UDPS, cosine): how alpha and beta are stored.

A bounded score (UDPS and cosine lie in [-1, 1]) is too narrow for a softmax, so each family multiplies it by a
learnable scale, per head or shared, whose form (``alpha_form``) and initial value are options of the family's conf
section (``udps_conf``, ``cosine_conf``).
"""
import math

import torch
from torch import nn

# How a learnable score scale is stored: form -> (stored value of an initial scale, effective scale of the stored
# parameter). Adam moves a parameter by about the learning rate per step, whatever its size: a ``linear`` scale of
# 5 changes by ~0.02 % a step and in practice stays near its init (docs/fsdd_generalisation.md); ``log`` stores
# log(scale), so each step changes the scale by a fraction of itself, as weight matrices' norms change.
ALPHA_FORMS = {
    "linear": (float, lambda p: p),                  # the reference: as is, its sign may flip
    "squared": (math.sqrt, torch.square),            # stays positive
    "log": (math.log, torch.exp),                    # stays positive, relative updates
}


def scale_parameter(*, n_head: int, init: float, form: str, per_head: bool, name: str,
                    section: str = "udps_conf") -> nn.Parameter:
    """A learnable score scale, per head (H,) or shared (1,), stored so its effective value starts at ``init``
    (``form``: see :data:`ALPHA_FORMS`; ``section``: the options section errors name)."""
    if form not in ALPHA_FORMS:
        raise ValueError(f"unknown {section}.alpha_form {form!r}; valid choices: {', '.join(ALPHA_FORMS)}")
    if form == "squared" and init < 0:
        raise ValueError(f"{section}.{name}_init must be >= 0 with alpha_form 'squared', got {init}")
    if form == "log" and init <= 0:
        raise ValueError(f"{section}.{name}_init must be > 0 with alpha_form 'log', got {init}")
    start = ALPHA_FORMS[form][0](init)
    return nn.Parameter(torch.full((n_head if per_head else 1,), float(start)))
