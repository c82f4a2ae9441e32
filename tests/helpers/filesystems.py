"""Hostile filesystems for the tests of atomic writes: a small tmpfs mounted for a test."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(where: Path, options: str):
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
        )
    except OSError:
        done = None
    if done is None or done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root or no mount rights)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
