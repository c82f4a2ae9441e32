"""The package's messages (logging, one logger per module under PACKAGE) shown bare on stderr while a command
runs, and only there; and the line a command ends with when it fails. Both name items, files and answers from
the data, shown with the characters a terminal acts on escaped (vlmgrid.escaping.terminal_message)."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TYPE_CHECKING

from vlmgrid.escaping import terminal_message

if TYPE_CHECKING:
    from vlmgrid.errors import VlmgridError

PACKAGE = "vlmgrid"  # the logger above every module's own


class _TerminalHandler(logging.StreamHandler):
    """A stream handler whose every message is one line, the data it names escaped, whatever its formatter."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_message(super().format(record))


@contextlib.contextmanager
def on_stderr():
    """The package's messages (INFO and above) shown bare on stderr while a command runs, and only there: a
    library that configures the root logger (open_clip does on import) must not print them a second time."""
    package = logging.getLogger(PACKAGE)
    handler = _TerminalHandler(sys.stderr)  # this command's stderr (a captured one in tests); bare messages
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


def error_text(error: VlmgridError, label: str = "") -> str:
    """The line a failed command prints on stderr: "vlmgrid: error: ", `label` (which piece of the command),
    and the error's sentence on one line, the data it names escaped; below it, the lines it quotes (a server's
    log), a line each, each escaped alike."""
    text = f"vlmgrid: error: {label}: " if label else "vlmgrid: error: "
    text += terminal_message(error.sentence)
    if error.quoted is not None:
        text += "".join(f"\n{terminal_message(line)}" for line in error.quoted.split("\n"))
    return text
