"""DANCE (arXiv 2211.16504): commonsense riddles ranked against pictures, and pictures against riddles.

The authors have not published their diagnostic set, so the raw format is vlmgrid's own, documented in
docs/dance-format.md: a folder with dance.json, queries.jsonl (one query, its 50 candidates and their
provenance per line), triples.tsv and images/<entity>/. `vlmgrid build-dance` makes such a folder from
ConceptNet triples and pictures of entities (dance_build.py); a `local` source points at one; the fixture
(vlmgrid.fixtures.kinds.dance) builds one from a small set of triples and drawn pictures.

Records (docs/formats.md): one per query. `question` is the riddle (riddle-to-image) or "" (image-to-riddle);
`image` is the query picture (image-to-riddle) or null; `options` are the candidates: picture paths
(riddle-to-image) or riddle texts (image-to-riddle); `answer_index` the first positive; `positives` every
positive's index. Metadata: `direction`, `split` (test-seen / test-unseen), `subset` ("<split> <direction>",
one cell of the paper's table), `entity`, `relation`, `end`, and per candidate `candidate_entities`,
`candidate_sources` and `candidate_distances` (the hard negatives' provenance; -1: beyond 3 hops in the
graph).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd

from vlmgrid.benchmarks.dance_build import (
    DIRECTIONS,
    FORMAT_DOC,
    FORMAT_NAME,
    FORMAT_VERSION,
    HARD_RELATIONS,
    META,
    QUERIES,
    SPLITS,
    TRIPLES,
)
from vlmgrid.benchmarks.kinds import Adapted, question_kind
from vlmgrid.benchmarks.rawio import ImageStore, read_bytes, read_text, within
from vlmgrid.errors import VlmgridError

SOURCES = ("positive",) + HARD_RELATIONS + ("graph", "random")
_TRIPLE = {
    "type": "object",
    "required": ["relation", "start", "end"],
    "properties": {
        "relation": {"type": "string"},
        "start": {"type": "string"},
        "end": {"type": "string"},
        "uri": {"type": "string"},
    },
}
QUERY_SCHEMA = {
    "type": "object",
    "required": ["id", "direction", "split", "entity", "triple", "query", "candidates"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "direction": {"enum": list(DIRECTIONS)},
        "split": {"enum": list(SPLITS)},
        "entity": {"type": "string"},
        "triple": _TRIPLE,
        "query": {"type": "string", "minLength": 1},
        "candidates": {
            "type": "array",
            "minItems": 2,
            "items": {
                "type": "object",
                "required": ["item", "entity", "positive", "source"],
                "properties": {
                    "item": {"type": "string", "minLength": 1},
                    "entity": {"type": "string"},
                    "positive": {"type": "boolean"},
                    "source": {"enum": list(SOURCES)},
                    "distance": {"type": ["integer", "null"]},
                    "triple": _TRIPLE,
                },
            },
        },
    },
}
META_SCHEMA = {
    "type": "object",
    "required": ["format", "version", "n_candidates", "max_positives"],
    "properties": {
        "format": {"const": FORMAT_NAME},
        "version": {"const": FORMAT_VERSION},
        "n_candidates": {"type": "integer", "minimum": 2},
        "max_positives": {"type": "integer", "minimum": 1},
    },
}


def _absent(folder: Path, what: str) -> VlmgridError:
    return VlmgridError(
        f"{folder / what}: missing, so {folder} is not a DANCE-format folder; the DANCE authors have not "
        "published their data: build one with `vlmgrid build-dance --triples F --images DIR --out DIR` "
        f"(the format is described in {FORMAT_DOC})"
    )


def load_dance(folder: Path) -> tuple[dict, list[dict]]:
    """A DANCE-format folder's dance.json and its queries, checked against docs/dance-format.md."""
    folder = Path(folder)
    for name in (META, QUERIES):
        if not (folder / name).is_file():
            raise _absent(folder, name)
    try:
        meta = json.loads(read_text(folder / META, f"see {FORMAT_DOC}"))
        jsonschema.validate(meta, META_SCHEMA)
    except (ValueError, RecursionError, jsonschema.ValidationError) as exc:
        raise VlmgridError(
            f"{folder / META}: not a DANCE dance.json ({getattr(exc, 'message', exc)}); see {FORMAT_DOC}"
        ) from None
    queries, ids = [], set()
    # lines end at "\n" only: splitlines() would also cut at a U+2028 or U+0085 that a JSON string holds raw
    lines = read_text(folder / QUERIES, f"see {FORMAT_DOC}").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{folder / QUERIES} line {number}"
        try:
            query = json.loads(line)
            jsonschema.validate(query, QUERY_SCHEMA)
        except (ValueError, RecursionError, jsonschema.ValidationError) as exc:
            raise VlmgridError(
                f"{where}: not a DANCE query ({getattr(exc, 'message', exc)}); see {FORMAT_DOC}"
            ) from None
        _check_query(query, meta, folder, where, ids)
        queries.append(query)
    if not queries:
        raise VlmgridError(f"{folder / QUERIES}: holds no query; see {FORMAT_DOC}")
    return meta, queries


def _check_query(query: dict, meta: dict, folder: Path, where: str, ids: set) -> None:
    if query["id"] in ids:
        raise VlmgridError(f"{where}: query id {query['id']!r} appears twice; ids must be unique")
    ids.add(query["id"])
    candidates = query["candidates"]
    n_positive = sum(c["positive"] for c in candidates)
    if len(candidates) != meta["n_candidates"]:
        raise VlmgridError(
            f"{where}: {len(candidates)} candidates, but dance.json says n_candidates {meta['n_candidates']}"
        )
    if not 1 <= n_positive <= meta["max_positives"]:
        raise VlmgridError(
            f"{where}: {n_positive} positives; a query has 1 to {meta['max_positives']} (max_positives)"
        )
    items = [c["item"] for c in candidates]
    if len(set(items)) != len(items):
        raise VlmgridError(f"{where}: a candidate appears twice in query {query['id']!r}")
    pictures = items if query["direction"] == "riddle-to-image" else [query["query"]]
    for picture in pictures:
        if not within(folder, picture, f"{where} (query {query['id']!r})").is_file():
            raise VlmgridError(
                f"{folder / picture}: missing (query {query['id']!r} names it); pictures are paths "
                f"relative to the folder, under images/"
            )


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    _, queries = load_dance(raw_dir)
    store = ImageStore(bench_dir)
    stored: dict[str, str] = {}

    def picture(relative: str) -> str:
        if relative not in stored:
            path = Path(raw_dir) / relative
            stored[relative] = store.add(
                {"bytes": read_bytes(path, f"see {FORMAT_DOC}"), "path": path.name}, str(path)
            )
        return stored[relative]

    rows = []
    for query in queries:
        candidates = query["candidates"]
        to_image = query["direction"] == "riddle-to-image"
        options = [picture(c["item"]) if to_image else c["item"] for c in candidates]
        positives = [k for k, c in enumerate(candidates) if c["positive"]]
        rows.append(
            {
                "id": query["id"],
                "image": None if to_image else picture(query["query"]),
                "question": query["query"] if to_image else "",
                "options": options,
                "answer": options[positives[0]],
                "answer_index": positives[0],
                "positives": positives,
                "direction": query["direction"],
                "split": query["split"],
                "subset": f"{query['split']} {query['direction']}",
                "entity": query["entity"],
                "relation": query["triple"]["relation"],
                "end": query["triple"]["end"],
                "candidate_entities": [c["entity"] for c in candidates],
                "candidate_sources": [c["source"] for c in candidates],
                "candidate_distances": [
                    -1 if c.get("distance") is None else int(c["distance"]) for c in candidates
                ],
            }
        )
    records = pd.DataFrame(rows)
    records["image"] = records["image"].astype(object).where(records["image"].notna(), None)  # NaN -> null
    return Adapted(records=records)


KIND = question_kind(
    "dance",
    "ranking",
    metric="dance",
    breakdown_by=("split", "subset"),
    description=(
        "DANCE: commonsense riddles ranked against 50 pictures and pictures against 50 riddles (a "
        "DANCE-format folder)."
    ),
    expected_count=0,  # no published set: any built set is valid
    raw_files=(META, QUERIES, TRIPLES, "images/*/*"),
    adapt=adapt,
    local_only=True,
)
