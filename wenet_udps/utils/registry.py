"""Registry look-up shared by every swappable part (attention, encoder, decoder, ...)."""
from typing import Any, Mapping


def lookup(registry: Mapping[str, Any], name: str, what: str) -> Any:
    """Return ``registry[name]``; an unknown name raises ValueError listing the valid ones.

    Args:
        registry: the registry dict (YAML name -> class).
        name: the name read from the config.
        what: the config key, used in the message (e.g. ``"encoder_conf.selfattention_layer_type"``).
    """
    try:
        return registry[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(registry))
        raise ValueError(f"unknown {what} {name!r}; valid choices: {valid}") from None
