"""Reading a user's answer file safely: text with or without a byte-order mark, and a workbook only once it is
known to unpack to a bounded size and to declare no DTD.

An `.xlsx` is a zip of XML files, so a file of a few hundred kilobytes can unpack to gigabytes (a 414 kB
workbook whose one cell inflates to 400 MB took 3.7 GB to read), and its XML can declare entities, which no
spreadsheet program writes; such a workbook is refused before openpyxl opens it. So is a member packed other
than stored or deflated: zipfile inflates a bzip2 or LZMA member whole before it cuts it to its declared size
(a 7 kB workbook took 4.2 GB), and Excel, openpyxl and xlsxwriter deflate. Cells are read as text: a
prediction "None", "NA" or "null" is that text, never a missing value.

A cell that holds a formula reads as the text it was written from, never as its stored value: xlsxwriter
(jmcnamara/XlsxWriter, `Worksheet._write_token_as_string` and `_prepare_formula`), under its default
`strings_to_formulas`, writes a text beginning with "=" as a formula of that text without its first "=" (and
"{=...}" as an array formula), with the stored value 0; VLMEvalKit wrote its workbooks so until 63a279f1
(2026-07), so a prediction "=A" was read back as "0". The formula's text with "=" put back (and the braces
of an array formula) is that text, except where xlsxwriter rewrote the formula: it prefixes Excel's newer
functions (FILTER, XLOOKUP, ...) with `_xlfn.`, so a formula holding `_xlfn.` cannot be told from the text;
such a cell is listed in the frame's `attrs["formulas"]` ({(row, column): "cell D4 holds the formula ..."}),
for the reader to make an error row of or refuse.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import unreadable

# The most a workbook may unpack to: VLMEvalKit's largest files of the datasets read here (about 5,000 rows,
# long answers included) unpack to a few tens of MB, and openpyxl and pandas take about ten times the unpacked
# size in memory.
MAX_UNPACKED = 128 << 20
# How much a member larger than MAX_RATIO_FROM may inflate relative to its packed size: sheets written by
# Excel, openpyxl or xlsxwriter inflate 3 to 20 times; a bomb inflates about a thousand times.
MAX_RATIO = 100
MAX_RATIO_FROM = 1 << 20
# The zip methods a workbook's members are read in: zipfile inflates deflated members a chunk at a time, as
# far as their declared size, and a stored member is as large as it is packed.
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_DTD = tuple("<!DOCTYPE".encode(encoding) for encoding in ("utf-8", "utf-16-le", "utf-16-be"))
_CHUNK = 1 << 20
# An answer file this user may not read: what follows its path in the sentence
# (vlmgrid.filehashes.unreadable's `denied`), the fix for the one file rather than a whole release
DENIED = "cannot be read: permission denied; make it readable by this user (chmod u+r) and run again"
# The same for a folder of answer files, which must be entered as well as listed
FOLDER_DENIED = "cannot be read: permission denied; make it readable by this user (chmod u+rx) and run again"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _refused(path: Path, why: str, fix: str = "save it again from the program that made it") -> VlmgridError:
    return VlmgridError(f"{path} {why}, so it is not read; {fix} (or give the answers as .tsv)")


def _declares_dtd(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bool:
    with archive.open(member) as handle:
        tail = b""
        while chunk := handle.read(_CHUNK):
            window = tail + chunk
            if any(mark in window for mark in _DTD):
                return True
            tail = window[-len(_DTD[1]) :]  # a mark split across two chunks
    return False


def check_workbook(path: Path) -> None:
    """Refuse, naming the file and the member, a workbook with a member packed other than stored or deflated,
    one that would unpack beyond MAX_UNPACKED, a member that inflates more than MAX_RATIO times, or XML that
    declares a DTD. The methods and sizes are those the zip declares, checked before anything is inflated; the
    sizes bound every later read too, because zipfile inflates a deflated member only as far as its declared
    size (a member that holds more fails its CRC check). A file that is not a zip passes: reading it says so;
    one that cannot be read is refused naming it."""
    try:
        archive = zipfile.ZipFile(path)
    except PermissionError as error:
        raise unreadable(path, error, DENIED) from None
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with archive:
        other = next((member for member in archive.infolist() if member.compress_type not in _METHODS), None)
        if other is not None:
            method = zipfile.compressor_names.get(other.compress_type, "an unknown method")
            raise _refused(
                path,
                f"holds {other.filename}, packed with {method} (zip method {other.compress_type}), as no "
                f"spreadsheet program packs a workbook",
            )
        members = [member for member in archive.infolist() if not member.is_dir()]
        total = sum(member.file_size for member in members)
        if total > MAX_UNPACKED:
            largest = max(members, key=lambda member: member.file_size)
            raise _refused(
                path,
                f"would unpack to {_size(total)} ({largest.filename} alone to "
                f"{_size(largest.file_size)} from {_size(largest.compress_size)}), more than the "
                f"{_size(MAX_UNPACKED)} a workbook of answers is read up to",
                "check that it is the file meant",
            )
        for member in members:
            packed = max(member.compress_size, 1)
            if member.file_size > MAX_RATIO_FROM and member.file_size > MAX_RATIO * packed:
                raise _refused(
                    path,
                    f"holds {member.filename}, which inflates {member.file_size // packed} times "
                    f"(to {_size(member.file_size)} from {_size(member.compress_size)}), as no "
                    f"spreadsheet program packs a workbook",
                )
        try:
            dtd = next((member for member in members if _declares_dtd(archive, member)), None)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError):
            return  # a damaged or encrypted member: reading the workbook says so
        if dtd is not None:
            raise _refused(
                path,
                f"holds {dtd.filename}, whose XML declares a DTD (<!DOCTYPE ...>), which no "
                f"spreadsheet program writes",
            )


def read_workbook(path: Path, **kwargs) -> pd.DataFrame:
    """The workbook's first sheet, every cell as text ("" where empty, unless `na_values` says otherwise),
    once `check_workbook` has passed it, a formula's cell as the text it was written from (the module's
    docstring); a file that is no readable workbook is refused in one sentence."""
    check_workbook(path)
    try:
        frame = pd.read_excel(path, engine="openpyxl", dtype=str, keep_default_na=False, **kwargs)
        formulas = _formulas(path) if _has_formulas(path) else {}
    except (
        zipfile.BadZipFile,
        KeyError,
        ValueError,
        OSError,
        SyntaxError,
    ) as error:  # XML's ParseError is one
        raise VlmgridError(
            f"{path} is not a readable .xlsx workbook ({type(error).__name__}: {error}); it may be "
            f"cut short: copy the whole file again"
        ) from None
    untold = {}
    for (row, column), (cell, text, stored) in formulas.items():
        at = (row - 2, column - 1)  # pandas reads the first row as the header, as to_excel writes it
        if not (0 <= at[0] < len(frame) and 0 <= at[1] < len(frame.columns)):
            continue
        if text is None:
            untold[(at[0], str(frame.columns[at[1]]))] = (
                f"{path.name} cell {cell} holds the formula {stored!r}, which xlsxwriter rewrote from the "
                "text it was given (a workbook of VLMEvalKit before 63a279f1 wrote a text beginning with '=' "
                "as a formula), so that text cannot be told"
            )
        else:
            frame.iat[at] = text
    frame.attrs["formulas"] = untold
    return frame


def _has_formulas(path: Path) -> bool:
    """Whether a worksheet of the workbook holds a formula element (<f>), before openpyxl reads it twice."""
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            if member.filename.startswith("xl/worksheets/") and member.filename.endswith(".xml"):
                with archive.open(member) as handle:
                    data = handle.read()
                if b"<f>" in data or b"<f " in data:
                    return True
    return False


def _formulas(path: Path) -> dict[tuple[int, int], tuple[str, str | None, str]]:
    """{(row, column), 1-based: (cell name, the text it was written from or None, the formula as stored)} of
    the first sheet's formula cells."""
    from openpyxl import load_workbook
    from openpyxl.worksheet.formula import ArrayFormula

    book = load_workbook(path, read_only=True, data_only=False, keep_links=False)
    try:
        found = {}
        for cells in book.worksheets[0].iter_rows():
            for cell in cells:
                if getattr(cell, "data_type", None) != "f":
                    continue
                value = cell.value
                stored = value.text if isinstance(value, ArrayFormula) else str(value)
                text = "{" + stored + "}" if isinstance(value, ArrayFormula) else stored
                found[(cell.row, cell.column)] = (
                    cell.coordinate,
                    None if "_xlfn." in stored else text,
                    stored,
                )
        return found
    finally:
        book.close()


def files_in(folder: Path) -> list[Path]:
    """The folder's files (not its subfolders), by name; a folder this user may not list or enter is refused
    in one sentence naming it."""
    try:
        return sorted(entry for entry in folder.iterdir() if entry.is_file())
    except OSError as error:
        raise unreadable(folder, error, FOLDER_DENIED) from None


def read_text(path: Path) -> str:
    """The file's text as UTF-8, without the byte-order mark that Excel and Notepad on Windows put first; a
    file that cannot be read, or is not UTF-8, is refused in one sentence naming it."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise unreadable(path, error, DENIED) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise VlmgridError(
            f"{path} line {line} is not UTF-8 text (byte 0x{data[error.start]:02x}); save the file as UTF-8"
        ) from None
