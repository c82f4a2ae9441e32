"""The package's messages (logging, one logger per module under PACKAGE) shown bare on stderr while a command
runs, and only there."""

from __future__ import annotations

import contextlib
import logging
import sys

PACKAGE = "vlmgrid"  # the logger above every module's own


@contextlib.contextmanager
def on_stderr():
    """The package's messages (INFO and above) shown bare on stderr while a command runs, and only there: a
    library that configures the root logger (open_clip does on import) must not print them a second time."""
    package = logging.getLogger(PACKAGE)
    handler = logging.StreamHandler(sys.stderr)  # this command's stderr (a captured one in tests); bare messages
    saved = package.level, package.propagate
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    package.propagate = False
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.level, package.propagate = saved


def off() -> None:
    """No handler on the package's logger: a forked process whose parent showed them on the stderr it now has
    shows its own once (vlmgrid.forkserver)."""
    logging.getLogger(PACKAGE).handlers.clear()
