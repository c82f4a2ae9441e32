"""Running `vlmgrid` as a user whom a file's mode holds back, for the tests of a file that cannot be read.

Root reads a file of mode 000 all the same, so as root the command runs under capsh with the two capabilities
that let it read past a file's mode dropped (cap_dac_override, cap_dac_read_search); as any other user it runs
as it is. Where neither can be done (root without a working capsh) the test is skipped, never passed.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from helpers.common import REPO, workflow_env

NO_OVERRIDE = "cap_dac_override,cap_dac_read_search"


@functools.cache
def _capsh() -> str | None:
    """capsh, where it can drop the capabilities here (a container may not let it)."""
    capsh = shutil.which("capsh")
    if capsh is None:
        return None
    probe = subprocess.run([capsh, f"--drop={NO_OVERRIDE}", "--", "-c", "true"], capture_output=True)
    return capsh if probe.returncode == 0 else None


def held_back(args: list[str]) -> list[str]:
    """`args` as a command that a file of mode 000 refuses (see the module's docstring); skips the test where
    that cannot be."""
    if os.geteuid() != 0:
        return args
    capsh = _capsh()
    if capsh is None:
        pytest.skip("root reads a file of mode 000, and no working capsh is here to drop that power")
    return [capsh, f"--drop={NO_OVERRIDE}", "--", "-c", shlex.join(args)]


def vlmgrid_held_back(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """`vlmgrid ARGS` of this checkout, run by `held_back`. In a process of its own: a fork server, started
    with the caller's powers, would read the file for it."""
    env = workflow_env({"PYTHONPATH": str(REPO / "src"), "VLMGRID_FORKSERVER": "off"})
    return subprocess.run(
        held_back([sys.executable, "-m", "vlmgrid.cli", *args]),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
