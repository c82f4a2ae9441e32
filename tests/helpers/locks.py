"""A cell's lock held by another process, as a second job finds it."""

import subprocess
import sys
import textwrap
from pathlib import Path


def _hold_in_subprocess(partial_dir: Path) -> subprocess.Popen:
    """A process that takes the lock, says so on stdout, and sleeps until it is killed."""
    code = textwrap.dedent(f"""
        import sys, time
        from vlmgrid.cellrun.lock import cell_lock
        with cell_lock({str(partial_dir)!r}, "holder"):
            print("held", flush=True)
            time.sleep(600)
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--holder-marker"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "held\n"
    return process
