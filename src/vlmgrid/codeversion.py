"""The version of vlmgrid's code: a digest of the content of the package's files, as they are on disk.

A release number says nothing about a checkout edited since, and a file's time says nothing about an edit that
keeps it (`cp -p`, `rsync -a`, `touch -r`). The digest is of every file under the package's folder (modules,
recipes, templates, schemas, fixtures; not the interpreter's __pycache__), each named by its path inside the
package, so it changes with any edit, addition or removal and with nothing else.

`CodeOnDisk` reads the files once and then only those whose stat changed since: a file's inode change time
(ctime) moves with every write and cannot be set back, so a kept modification time never hides an edit. A fork
server holds one, to check before every job that the code on disk is still the code it imported
(vlmgrid.forkserver.server): the one that `running_code()` read first. `running_version()` is the version of
the code this process runs: computed on the first call, which the `vlmgrid` command makes at its start (and so
a fork server before it imports the jobs' modules, so its jobs, forked from it, inherit it); each output
records it (docs/formats.md).
"""

from __future__ import annotations

import functools
import hashlib
import os

DIGITS = 16  # of the sha256: enough to tell versions apart, short enough to read in a file's metadata


def package_folder() -> str:
    import vlmgrid

    return os.path.dirname(os.path.abspath(vlmgrid.__file__))


def _stat_key(found: os.stat_result) -> tuple:
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


class CodeOnDisk:
    """The files under `folder` and their content digests, read again only where a file's stat changed."""

    def __init__(self, folder: str | None = None):
        self.folder = folder or package_folder()
        self._known: dict[
            str, tuple[tuple, str]
        ] = {}  # path inside the folder -> (stat key, sha256 of content)

    def version(self) -> str:
        """The digest of every file's path and content, as they are now."""
        seen: dict[str, tuple[tuple, str]] = {}
        for root, folders, files in os.walk(self.folder):
            folders[:] = sorted(name for name in folders if name != "__pycache__")  # written by the imports
            for name in sorted(files):
                path = os.path.join(root, name)
                inside = os.path.relpath(path, self.folder)
                try:
                    key = _stat_key(os.stat(path))
                    known = self._known.get(inside)
                    if known is None or known[0] != key:
                        with open(path, "rb") as handle:
                            digest = hashlib.sha256(handle.read()).hexdigest()
                        # A write between the stat and the read leaves a key that no longer matches: read
                        # again next time.
                        known = (key, digest)
                except (
                    OSError
                ) as error:  # unreadable or gone between the listing and the read: it counts as such
                    known = ((), f"unreadable: {error.strerror}")
                seen[inside] = known
        self._known = seen
        listing = "\n".join(f"{inside}\0{digest}" for inside, (_, digest) in sorted(seen.items()))
        return hashlib.sha256(listing.encode()).hexdigest()[:DIGITS]


@functools.cache
def running_code() -> tuple[CodeOnDisk, str]:
    """The package's files as this process first read them, and their version: the code it runs. A fork server
    checks the disk with this same `CodeOnDisk`, so that its check reads only the files whose stat changed
    since."""
    disk = CodeOnDisk()
    return disk, disk.version()


def running_version() -> str:
    """The version of the code this process runs: the package's files as they were at the first call."""
    return running_code()[1]
