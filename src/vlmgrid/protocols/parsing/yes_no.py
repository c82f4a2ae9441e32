"""Yes/no readers: ``pope`` and ``mme`` (the authors' rules) and ``mme_lenient``."""

from __future__ import annotations

from collections.abc import Sequence

from vlmgrid.protocols.parsing.base import UNPARSABLE, Parsed, as_options


def _yes_no(label: str | None, options: Sequence[str]) -> Parsed:
    """ "yes"/"no" with its index among the options (0 for yes, 1 for no when the options do not say)."""
    if label is None:
        return UNPARSABLE
    lowered = [option.strip().lower() for option in as_options(options)]
    index = lowered.index(label) if label in lowered else (0 if label == "yes" else 1)
    return Parsed(label, index)


def parse_pope(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """POPE's rule (RUCAIBox/POPE, stored as AoiDragon/POPE, ``evaluate.py`` at f3ec604; LLaVA's
    ``llava/eval/eval_pope.py`` at 4241f08 has the same rule), with unparsable answers kept apart.

    Keep the text before the first "."; delete every ","; split on single spaces (so a line break or a tab
    does not separate words); if the words include "No", "not" or "no" (case-sensitive, whole words: "NO",
    "Not" and "No\\nthere" do not count) -> "no". The authors read everything else as "yes"; here it is
    "yes" only when that kept text holds "yes" in any case, and unparsable (None) otherwise. The POPE metric
    counts None as "yes", as the authors do, and reports it as a format error, so every score is the
    authors'. The text is read as generated: ``evaluate.py`` strips nothing (LLaVA's generation script
    strips the output before writing it; a leading line break, as in "\\nNo", is the only place where that
    changes the reading).
    """
    if text is None:
        return UNPARSABLE
    kept = str(text).split(".")[0].replace(",", "")
    words = kept.split(" ")
    if "No" in words or "not" in words or "no" in words:
        return _yes_no("no", options)
    if "yes" in kept.lower():
        return _yes_no("yes", options)
    return UNPARSABLE


def parse_mme(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """MME's rule: BradyFU/Awesome-Multimodal-Large-Language-Models ``tools/eval_tool.zip`` ->
    ``eval_tool/calculation.py`` (``parse_pred_ans``; read in the copy zjunlp/Deco
    ``eval_tool/calculation.py`` at a3ccc15).

    Lowercase, and nothing else (no strip); exactly "yes" or "no" is taken as is; otherwise look at the
    first 4 characters: "yes" among them -> yes, else "no" among them -> no ("not ...", "none", "nope",
    "know", " no" read as no), else unparsable (None; the tool's "other", always wrong). Leading
    whitespace counts: "  yes" is "other" (its first 4 characters are "  ye") while " yes" is yes.

    The tool reads one answer per line of a tab-separated file, so it has no rule for a text holding a
    line break or a tab (such a file breaks it); here such a text is read the same way, from its first 4
    characters. The line break that ends each line in the tool's files changes no reading.
    """
    if text is None:
        return UNPARSABLE
    answer = str(text).lower()
    if answer in ("yes", "no"):
        return _yes_no(answer, options)
    prefix = answer[:4]
    if "yes" in prefix:
        return _yes_no("yes", options)
    if "no" in prefix:
        return _yes_no("no", options)
    return UNPARSABLE


def parse_mme_lenient(text: str, options: Sequence[str] = ("yes", "no")) -> Parsed:
    """MME read leniently (vlmgrid's reading, not the tool's): as `parse_mme`, but on the stripped text, so
    leading whitespace does not hide the answer ("  yes" -> yes).
    """
    return UNPARSABLE if text is None else parse_mme(str(text).strip(), options)
