"""Where reusable, derived things are cached (API responses, zero-shot classifier weights).

Outside data/ and results/ on purpose: those are DVC outputs, and a cache written there by one stage would
look like a change to another. A cache entry is keyed by a hash of everything that determines it, so a stale
entry is never read.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "VLMGRID_CACHE_DIR"


def cache_root(environ=os.environ) -> Path:
    """$VLMGRID_CACHE_DIR, else $XDG_CACHE_HOME/vlmgrid, else ~/.cache/vlmgrid."""
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV])
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vlmgrid"
