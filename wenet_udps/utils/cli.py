"""Command-line entry points: a user's mistake is one line on stderr and exit status 2, not a traceback."""
import sys
from typing import Callable, List, Optional


class UserError(ValueError):
    """A mistake the user can fix (config, data, checkpoint, experiment directory); its message says what to do."""


def run_cli(main: Callable[[Optional[List[str]]], object], prog: str) -> None:
    """Run ``main(sys.argv[1:])``; a :class:`UserError` exits with ``<prog>: error: <message>``."""
    try:
        main(sys.argv[1:])
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
