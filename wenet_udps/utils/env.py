"""Environment switches: one reading of a boolean variable for every module, so no two modules disagree.

``1 true yes on`` mean on and ``0 false no off`` off (any case, surrounding spaces ignored); unset or empty is the
default; anything else is a :class:`~wenet_udps.utils.cli.UserError` naming the variable and the valid values
(``WENET_UDPS_COMPILE=false`` used to leave compiling on: only ``0`` turned it off).
"""
import os

from wenet_udps.utils.cli import UserError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

# Compile nothing (no C++ extension, no torch.compile of the UDPS tiles): docs/reproducibility.md.
COMPILE_ENV = "WENET_UDPS_COMPILE"


def env_flag(name: str, default: bool) -> bool:
    """The boolean value of environment variable ``name`` (see the module docstring)."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise UserError(f"{name}={raw!r}: expected {' / '.join(TRUE_WORDS)} (on) or {' / '.join(FALSE_WORDS)} (off), "
                    f"or unset ({'on' if default else 'off'})")


def compiling() -> bool:
    """Whether ``WENET_UDPS_COMPILE`` allows compiling (default on)."""
    return env_flag(COMPILE_ENV, True)
