"""Hand-built grids for the report tests: score files of every kind written from a few numbers, the report
built from them, and its tables read back."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from vlmgrid.report import build_report

DASH = "\u2013"
MODELS = ["clip_tiny", "big-vlm"]
BENCHES = ["pope-fixture", "sqa_img", "flowers"]
METRICS = {"pope-fixture": "f1", "sqa_img": "accuracy", "flowers": "top1"}


# Headline (value, ci95, draws). clip_tiny's draws average elementwise to [10, 40, 20, 50, 30]:
# sorted [10, 20, 30, 40, 50]; linear percentiles 2.5 -> 10 + 0.1 * 10 = 11.0, 97.5 -> 40 + 0.9 * 10 = 49.0.
HEADLINES = {
    ("clip_tiny", "pope-fixture"): (50.0, [5.0, 85.0], [0, 60, 30, 90, 60]),
    ("clip_tiny", "sqa_img"): (25.0, [12.0, 38.0], [20, 40, 10, 30, 20]),
    ("clip_tiny", "flowers"): (18.0, [10.0, 29.0], [10, 20, 20, 30, 10]),
    ("big-vlm", "pope-fixture"): (51.2, [44.0, 58.1], [50, 52, 51, 53, 49]),
    ("big-vlm", "sqa_img"): (20.04, [15.46, 24.96], [19, 21, 20, 22, 18]),
    ("big-vlm", "flowers"): (33.3, [30.0, 36.6], [33, 34, 32, 35, 31]),
}
POPE_SPLITS = ["random", "popular", "adversarial"]


def plain_latex(tex: str) -> str:
    """A LaTeX table's text without the boxes its header and name cells are set in, nor the break points its
    names carry (`latex_table`, `latex_name`)."""
    unboxed = re.sub(
        r"\\parbox\[[tb]\]\{[^{}]*\}\{\\(?:raggedright|centering)\\hspace\{0pt\}(.*?)\}(?= & | \\\\$)",
        r"\1",
        tex,
        flags=re.M,
    )
    return unboxed.replace(r"\hspace{0pt}", "")


def latex_rows(tex: str) -> dict[str, list[str]]:
    """A LaTeX table's rows as their cells, keyed by the first (the first block's, where a wide table is split
    in blocks): `plain_latex`, and each value without the CI set small under it, so a cell reads as its value
    and marks."""
    text = re.sub(
        r"\\begin\{tabular\}\[t\]\{@\{\}c@\{\}\}(.*?) \\\\\{\} \{\\scriptsize \[[^\]]*\]\}\\end\{tabular\}",
        r"\1",
        plain_latex(tex),
    )
    cells = [line.removesuffix(r" \\").split(" & ") for line in text.splitlines() if " & " in line]
    rows: dict[str, list[str]] = {}
    for row in cells:
        rows.setdefault(row[0], row)
    return rows


def score_obj(model: str, bench: str) -> dict:
    value, ci, draws = HEADLINES[(model, bench)]
    metric = METRICS[bench]
    obj = {
        "model": model,
        "benchmark": bench,
        "metric": metric,
        "value": value,
        "ci95": ci,
        "n": 90,
        "n_valid": 87,
        "n_errors": 3,
        "format_error_rate": 3.3333,
        "metrics": {metric: {"value": value, "ci95": ci}},
        "breakdown": {},
        "variants": {},
        "bootstrap": {"samples": 5, "seed": 0, "draws": draws},
        "inputs": {"records_sha256": "x", "predictions_sha256": "y"},
        "vlmgrid_version": "0.1.0",
    }
    if bench == "pope-fixture":
        offset = 0.0 if model == "clip_tiny" else 10.0
        obj["breakdown"] = {
            "split": {
                split: {
                    "n": 30,
                    "n_valid": 29,
                    "format_error_rate": 3.3,
                    "metrics": {
                        "accuracy": {"value": 99.0, "ci95": [98.0, 100.0]},
                        "f1": {"value": 40.0 + offset + i, "ci95": [30.0 + i, 55.5 + i]},
                    },
                }
                for i, split in enumerate(POPE_SPLITS)
            }
        }
    return obj


def write_scores(root: Path, skip=()) -> dict:
    files = {}
    for model in MODELS:
        for bench in BENCHES:
            if (model, bench) in skip:
                continue
            path = root / "scores" / model / f"{bench}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(score_obj(model, bench)))
            files[(model, bench)] = path
    return files


def build(tmp_path: Path, files: dict, **kwargs) -> list[Path]:
    return build_report(files, MODELS, BENCHES, tmp_path / "tables", tmp_path / "figures", **kwargs)


def md_rows(path: Path) -> dict[str, list[str]]:
    """Markdown table rows keyed by their first cell."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not line.startswith("|:") and not line.startswith("|-"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


NA_REASON = (
    'model "clip_tiny" (open_clip backend, capability embed) cannot run benchmark "sqa_img" '
    "(multiple_choice protocol needs score_options or generate)"
)


def mark_not_applicable(files: dict, model: str, bench: str) -> None:
    files[(model, bench)].write_text(
        json.dumps(
            {
                "model": model,
                "benchmark": bench,
                "applicable": False,
                "reason": NA_REASON,
                "metric": METRICS[bench],
                "strategy": None,
                "inputs": {},
                "vlmgrid_version": "0.1.0",
            }
        )
    )


def _est(value, low, high):
    return {"value": value, "ci95": [low, high]}


def _group(value, low, high, n=4):
    return {"n": n, "metrics": {"accuracy": _est(value, low, high), "valid_accuracy": _est(value, low, high)}}


def kaleidoscope_obj(
    model: str, bench: str, languages: dict, *, strategy="generate", generation=None
) -> dict:
    """A Kaleidoscope score: headline 30.0 [20.0, 40.0], format errors 12.5 [5.0, 20.0]."""
    return {
        "model": model,
        "benchmark": bench,
        "applicable": True,
        "metric": "accuracy",
        "value": 30.0,
        "ci95": [20.0, 40.0],
        "n": 28,
        "n_valid": 24,
        "n_errors": 0,
        "format_error_rate": 12.5,
        "metrics": {
            "accuracy": _est(30.0, 20.0, 40.0),
            "valid_accuracy": _est(35.0, 25.0, 45.0),
            "format_error_rate": _est(12.5, 5.0, 20.0),
        },
        "breakdown": {
            "language": {lang: _group(*v) for lang, v in languages.items()},
            "modality": {"multimodal": _group(33.3, 20.0, 50.0, 21), "text-only": _group(14.3, 0.0, 42.9, 7)},
        },
        "variants": {},
        "strategy": strategy,
        "generation": generation or {},
        "bootstrap": {"samples": 5, "seed": 0, "draws": [20, 25, 30, 35, 40]},
    }


def _write(root: Path, obj: dict) -> Path:
    path = root / "scores" / obj["model"] / f"{obj['benchmark']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def cvqa_obj(model: str, shift: float) -> dict:
    settings = {"loc-en": 40.0, "loc-local": 30.0, "noloc-en": 20.0, "noloc-local": 10.0}
    return {
        "model": model,
        "benchmark": "cvqa",
        "applicable": True,
        "metric": "accuracy",
        "value": 25.0 + shift,
        "ci95": [15.0 + shift, 35.0 + shift],
        "n": 21,
        "n_valid": 21,
        "n_errors": 0,
        "format_error_rate": 0.0,
        "metrics": {"accuracy": _est(25.0 + shift, 15.0 + shift, 35.0 + shift)},
        "breakdown": {
            "country_language": {
                "Japan-Japanese": _group(50.0 + shift, 0.0, 100.0, 3),
                "India-Telugu": _group(0.0 + shift, 0.0, 10.0, 3),
            }
        },
        # written in another order than the paper's: the table puts them in its order
        "variants": {
            name: _est(v + shift, v - 10, v + 10) for name, v in sorted(settings.items(), reverse=True)
        },
        "strategy": "score_options",
        "generation": {},
        "bootstrap": {"samples": 5, "seed": 0, "draws": [15, 20, 25, 30, 35]},
    }


def dance_obj(model: str, subsets: dict[str, tuple[float, float, float]]) -> dict:
    return {
        "model": model,
        "benchmark": "dance",
        "applicable": True,
        "metric": "acc_at_50",
        "value": 40.0,
        "ci95": [30.0, 50.0],
        "n": 20,
        "n_valid": 20,
        "n_errors": 0,
        "format_error_rate": 0.0,
        "metrics": {"acc_at_50": _est(40.0, 30.0, 50.0)},
        "breakdown": {"subset": {name: _group(v, lo, hi, 5) for name, (v, lo, hi) in subsets.items()}},
        "strategy": "embed",
        "generation": {},
        "bootstrap": {"samples": 5, "seed": 0, "draws": [30, 35, 40, 45, 50]},
    }


def _capture_figures(monkeypatch) -> list:
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    return figures
