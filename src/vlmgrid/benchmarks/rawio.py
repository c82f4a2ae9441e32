"""Reading raw benchmark files (and writing hub-style parquet for fixtures), with errors that name the
file."""

from __future__ import annotations

import glob
import hashlib
import json
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vlmgrid import fileio
from vlmgrid.errors import VlmgridError
from vlmgrid.image_sources import IMAGE_SOURCES

# The `datasets` Image feature as stored in hub parquet files.
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def find_raw(raw_dir: Path, pattern: str) -> list[Path]:
    """The files under raw_dir matching one of a kind's raw_files patterns; none -> a VlmgridError naming
    it."""
    found = sorted(Path(p) for p in glob.glob(glob.escape(str(raw_dir)) + "/" + pattern) if Path(p).is_file())
    if not found:
        raise VlmgridError(
            f"{Path(raw_dir) / pattern}: missing from the raw files; put the benchmark's files there in "
            "their published layout, or delete the benchmark folder and run prepare again"
        )
    return found


def raw_file(raw_dir: Path, name: str) -> Path:
    return find_raw(raw_dir, name)[0]


def within(folder: Path, name: str | Path, what: str) -> Path:
    """folder/name, the path of a file a release names (an image name, an id, a folder listing); refused,
    naming `what` (the item that names it), unless it lies inside `folder` once links are followed. A name
    such as "../../secret" or "/etc/hostname", or a link placed in the folder, would otherwise copy a file
    from elsewhere on the disk into the prepared benchmark. `folder` itself may be a link (a shared image
    folder). A name holding a NUL, which no file name can, is refused too (the system refuses to look it
    up)."""
    if "\0" in str(name):
        raise VlmgridError(
            f"{what}: the file name {str(name)!r} holds a NUL character, which no file name can; fix the name"
        )
    path = Path(folder) / name
    target = path.resolve()
    if not target.is_relative_to(Path(folder).resolve()):
        raise VlmgridError(
            f"{what}: {path} leads out of {folder} (to {target}); a release is read only from inside its own "
            f"folders: fix the name, or put the file itself there in place of a link"
        )
    return path


def read_bytes(path: Path, fix: str) -> bytes:
    """The bytes of a raw file; one that cannot be read (no permission, a disk error) is named with `fix`."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise VlmgridError(f"{path}: cannot be read ({exc.strerror or exc}); {fix}") from None


def read_text(path: Path, fix: str) -> str:
    """A raw text file (JSON, TSV, CSV, a list) as UTF-8, with or without the byte-order mark a Windows editor
    or Excel puts first; a file in another encoding is named with the line of its first foreign byte."""
    data = read_bytes(path, fix)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise VlmgridError(
            f"{path}: not readable UTF-8 text (line {line} holds byte 0x{data[exc.start]:02x}, as a file "
            f"saved in Latin-1 or another encoding does: save it as UTF-8); {fix}"
        ) from None


def _refuse_link(archive: Path | str, name: str, kind: str, target: str) -> None:
    raise VlmgridError(
        f"{archive}: member {name} is a {kind} link (to {target}), and links inside an archive are not "
        "followed (one could point anywhere on the disk); re-download the archive, or rebuild it with the "
        "file itself in place of the link (tar --dereference)"
    )


# Larger than any file a release's archive holds (images of a few MB, lists and metadata of less): a member
# that declares more is refused before it is read, where reading it whole would exhaust memory (a gzip bomb).
MAX_MEMBER = 1 << 30


def _refuse_huge(archive: Path | str, name: str, size: int) -> None:
    if size > MAX_MEMBER:
        raise VlmgridError(
            f"{archive}: its member {name} declares {size:,} bytes, more than any file of a benchmark's "
            f"release ({MAX_MEMBER:,}), so it is not read; re-download the archive"
        )


def archive_file(archive: Path | str, member: tarfile.TarInfo) -> bool:
    """Whether a tar member the reader wants is a regular file to read (False for a folder); a symbolic or
    hard link is refused, naming the member: links are not followed; so is a member larger than MAX_MEMBER."""
    if member.issym() or member.islnk():
        _refuse_link(archive, member.name, "symbolic" if member.issym() else "hard", member.linkname)
    if member.isfile():
        _refuse_huge(archive, member.name, member.size)
    return member.isfile()


def extract_images(
    archive: Path, mode: str, targets: Mapping[str, str], bench_dir: Path, what: str, listed_in: str
) -> None:
    """Writes the tar archive's members named in `targets` ({member name, without a leading "./": path under
    bench_dir/images}) once each, reading the archive in `mode`. An unreadable archive (`what`: ".tgz
    archive") is an error, and so is one that lacks a target, naming `listed_in`, the file that lists it."""
    found: set[str] = set()
    try:
        with tarfile.open(archive, mode) as tar:
            for member in tar:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if name in targets and name not in found and archive_file(archive, member):
                    fileio.write_bytes(
                        Path(bench_dir) / "images" / targets[name], tar.extractfile(member).read()
                    )
                    found.add(name)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise VlmgridError(
            f"{archive}: not a readable {what} ({exc}); delete it and run prepare again"
        ) from None
    missing = sorted(set(targets) - found)
    if missing:
        raise VlmgridError(
            f"{archive}: has no {missing[0]} (a test image listed in {listed_in}); the archive is "
            "incomplete: re-download it"
        )


def zip_file(archive: Path | str, zf: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of a zip member the reader wants; a symbolic link (a Unix mode stored by `zip --symlinks`)
    is refused, naming the member: links are not followed."""
    info = zf.getinfo(name)
    if stat.S_ISLNK(info.external_attr >> 16):
        _refuse_link(archive, name, "symbolic", zf.read(name).decode("utf-8", "replace"))
    # zipfile stops a deflated member at its declared size, but inflates a bzip2 or LZMA one whole first
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        method = zipfile.compressor_names.get(info.compress_type, "an unknown method")
        raise VlmgridError(
            f"{archive}: its member {name} is packed with {method}, as the published archive's are not, so "
            "it is not read; re-download the archive"
        )
    _refuse_huge(archive, name, info.file_size)
    return zf.read(name)


def _features_metadata(features: Mapping[str, Any]) -> dict[bytes, bytes]:
    return {b"huggingface": json.dumps({"info": {"features": dict(features)}}).encode("utf-8")}


def write_hub_parquet(
    path: Path, schema: pa.Schema, rows: Sequence[Mapping[str, Any]], features: Mapping[str, Any]
) -> None:
    """Write rows the way `datasets` does (image = struct {bytes, path}, features in the schema metadata)."""
    table = pa.Table.from_pylist(list(rows), schema=schema.with_metadata(_features_metadata(features)))
    with fileio.atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def iter_parquet_rows(path: Path, columns: Sequence[str], batch_size: int = 256) -> Iterator[dict[str, Any]]:
    """Rows of a parquet file as dicts, batch by batch (hub files can be large)."""
    try:
        handle = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise VlmgridError(
            f"{path}: not a readable parquet file ({exc}); delete it and run prepare again"
        ) from None
    missing = [c for c in columns if c not in handle.schema_arrow.names]
    if missing:
        raise VlmgridError(
            f"{path}: has no column {missing[0]!r} (it has {', '.join(handle.schema_arrow.names)}); "
            f"the file is not this benchmark's published format: check the source's repo and revision"
        )
    try:
        for batch in handle.iter_batches(batch_size=batch_size, columns=list(columns)):
            yield from batch.to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise VlmgridError(
            f"{path}: could not be read to the end ({exc}); delete it and run prepare again"
        ) from None


def _extension(data: bytes, hint: str | None) -> str:
    if data.startswith(b"\xff\xd8"):
        return ".jpg"
    if data.startswith(b"\x89PNG"):
        return ".png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    if hint and Path(hint).suffix:
        return Path(hint).suffix.lower()
    return ".bin"


# Where each stored image came from, one JSON object a line: {"image": <stored path>, "from": <where>}.


def _inside(where: str, bench_dir: Path) -> str:
    """`where` with the benchmark folder's own path left off (the file must not depend on where data/
    lies)."""
    for root in dict.fromkeys((str(bench_dir), str(bench_dir.resolve()))):
        if root not in ("", ".") and where.startswith(root.rstrip("/") + "/"):
            return where[len(root.rstrip("/")) + 1 :]
    return where


class ImageStore:
    """Writes embedded image bytes unchanged to images/<sha256><ext>, one file per distinct image.

    Each newly stored image gets a line in image_sources.jsonl (beside records.parquet) saying where it was
    read (the raw file and row, and the image's own name), so an error about the stored copy can name it.
    """

    def __init__(self, bench_dir: Path, folder: str = "images") -> None:
        self.bench_dir = Path(bench_dir)
        self.folder = folder
        self._written: dict[str, str] = {}

    def _note_source(self, rel: str, where: str, name: Any) -> None:
        source = _inside(str(where), self.bench_dir)
        if isinstance(name, str) and name and name not in source:
            source = f"{source}, {name!r}"
        line = json.dumps({"image": rel, "from": source}, ensure_ascii=False)
        with open(self.bench_dir / IMAGE_SOURCES, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def add(self, image: Mapping[str, Any] | None, where: str) -> str | None:
        """Store one `datasets` image struct; returns the path relative to bench_dir (None: no image)."""
        if image is None:
            return None
        data = image.get("bytes") if isinstance(image, Mapping) else None
        if data is None:
            if isinstance(image, Mapping) and image.get("path"):
                raise VlmgridError(
                    f"{where}: the image holds only a path ({image['path']!r}), not its bytes; use a copy "
                    "of the dataset with embedded images (the hub parquet files)"
                )
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self._written:
            rel = f"{self.folder}/{digest}{_extension(data, image.get('path'))}"
            fileio.write_bytes(self.bench_dir / rel, data)
            self._written[digest] = rel
            self._note_source(rel, where, image.get("path"))
        return self._written[digest]
