"""Answer files other tools publish (`vlmgrid import-predictions`), one importer per format (IMPORTERS).
Imported from the floor above (stages); it imports only the shared modules, no protocol.

An importer only matches the file's answers to the prepared benchmark's records and returns the raw texts;
the stage reads them with the benchmark's own parser and writes the predictions file. `guess_format`: a file's
format.
"""

from __future__ import annotations

from pathlib import Path

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Answer, Importer, check_answers
from vlmgrid.imports.llava import IMPORTER as LLAVA_ANSWERS
from vlmgrid.imports.llava_scienceqa import IMPORTER as LLAVA_SCIENCEQA_EVAL
from vlmgrid.imports.lmms_eval import IMPORTER as LMMS_EVAL_SAMPLES
from vlmgrid.imports.mmbench_submission import IMPORTER as MMBENCH_SUBMISSION
from vlmgrid.imports.mme_tool import IMPORTER as MME_EVAL_TOOL
from vlmgrid.imports.vlmevalkit import IMPORTER as VLMEVALKIT
from vlmgrid.registry import Registry

IMPORTERS: Registry[Importer] = Registry(
    "import format",
    [LLAVA_ANSWERS, LLAVA_SCIENCEQA_EVAL, MME_EVAL_TOOL, MMBENCH_SUBMISSION, LMMS_EVAL_SAMPLES, VLMEVALKIT],
)


def guess_format(path: Path) -> str:
    """The name of the one format the file (or folder) looks like; refused when none or several do."""
    names = [name for name in IMPORTERS if IMPORTERS.get(name).looks_like(Path(path))]
    if len(names) != 1:
        found = "no known format" if not names else f"several formats ({', '.join(names)})"
        raise VlmgridError(f"{path} looks like {found}; give --format (one of {', '.join(IMPORTERS)})")
    return names[0]


__all__ = ["IMPORTERS", "Answer", "Importer", "check_answers", "guess_format"]
