"""DANCE (arXiv 2211.16504): commonsense riddles ranked against pictures, and pictures against riddles.

The authors have not published their diagnostic set, so the raw format is vlmgrid's own, documented in
docs/dance-format.md: a folder with dance.json, queries.jsonl (one query, its 50 candidates and their
provenance per line), triples.tsv and images/<entity>/. `vlmgrid build-dance` makes such a folder from
ConceptNet triples and pictures of entities (dance_build.py); a `local` source points at one; the fixture
builds one from a small set of triples and drawn pictures.

Records (docs/formats.md): one per query. `question` is the riddle (riddle-to-image) or "" (image-to-riddle);
`image` is the query picture (image-to-riddle) or null; `options` are the candidates: picture paths
(riddle-to-image) or riddle texts (image-to-riddle); `answer_index` the first positive; `positives` every
positive's index. Metadata: `direction`, `split` (test-seen / test-unseen), `subset` ("<split> <direction>",
one cell of the paper's table), `entity`, `relation`, `end`, and per candidate `candidate_entities`,
`candidate_sources` and `candidate_distances` (the hard negatives' provenance; -1: beyond 3 hops in the graph).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import pandas as pd

from vlmgrid import fileio
from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.dance_build import (
    DIRECTIONS, FORMAT_DOC, FORMAT_NAME, FORMAT_VERSION, HARD_RELATIONS, META, QUERIES, SPLITS, TRIPLES, build_dance,
)
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import ImageStore
from vlmgrid.errors import VlmgridError

SOURCES = ("positive",) + HARD_RELATIONS + ("graph", "random")
_TRIPLE = {"type": "object", "required": ["relation", "start", "end"],
           "properties": {"relation": {"type": "string"}, "start": {"type": "string"}, "end": {"type": "string"},
                          "uri": {"type": "string"}}}
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
        "candidates": {"type": "array", "minItems": 2, "items": {
            "type": "object",
            "required": ["item", "entity", "positive", "source"],
            "properties": {"item": {"type": "string", "minLength": 1}, "entity": {"type": "string"},
                           "positive": {"type": "boolean"}, "source": {"enum": list(SOURCES)},
                           "distance": {"type": ["integer", "null"]}, "triple": _TRIPLE},
        }},
    },
}
META_SCHEMA = {
    "type": "object",
    "required": ["format", "version", "n_candidates", "max_positives"],
    "properties": {"format": {"const": FORMAT_NAME}, "version": {"const": FORMAT_VERSION},
                   "n_candidates": {"type": "integer", "minimum": 2}, "max_positives": {"type": "integer", "minimum": 1}},
}


def _absent(folder: Path, what: str) -> VlmgridError:
    return VlmgridError(
        f"{folder / what}: missing, so {folder} is not a DANCE-format folder; the DANCE authors have not published "
        f"their data: build one with `vlmgrid build-dance --triples F --images DIR --out DIR` (the format is "
        f"described in {FORMAT_DOC})"
    )


def load_dance(folder: Path) -> tuple[dict, list[dict]]:
    """A DANCE-format folder's dance.json and its queries, checked against docs/dance-format.md."""
    folder = Path(folder)
    for name in (META, QUERIES):
        if not (folder / name).is_file():
            raise _absent(folder, name)
    try:
        meta = json.loads((folder / META).read_text("utf-8"))
        jsonschema.validate(meta, META_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as exc:
        raise VlmgridError(f"{folder / META}: not a DANCE dance.json ({getattr(exc, 'message', exc)}); see {FORMAT_DOC}") from None
    queries, ids = [], set()
    lines = (folder / QUERIES).read_text("utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{folder / QUERIES} line {number}"
        try:
            query = json.loads(line)
            jsonschema.validate(query, QUERY_SCHEMA)
        except (ValueError, jsonschema.ValidationError) as exc:
            raise VlmgridError(f"{where}: not a DANCE query ({getattr(exc, 'message', exc)}); see {FORMAT_DOC}") from None
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
        raise VlmgridError(f"{where}: {len(candidates)} candidates, but dance.json says n_candidates {meta['n_candidates']}")
    if not 1 <= n_positive <= meta["max_positives"]:
        raise VlmgridError(f"{where}: {n_positive} positives; a query has 1 to {meta['max_positives']} (max_positives)")
    items = [c["item"] for c in candidates]
    if len(set(items)) != len(items):
        raise VlmgridError(f"{where}: a candidate appears twice in query {query['id']!r}")
    pictures = items if query["direction"] == "riddle-to-image" else [query["query"]]
    for picture in pictures:
        if Path(picture).is_absolute() or ".." in Path(picture).parts or not (folder / picture).is_file():
            raise VlmgridError(f"{folder / picture}: missing (query {query['id']!r} names it); pictures are paths "
                               f"relative to the folder, under images/")


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    _, queries = load_dance(raw_dir)
    store = ImageStore(bench_dir)
    stored: dict[str, str] = {}

    def picture(relative: str) -> str:
        if relative not in stored:
            path = Path(raw_dir) / relative
            stored[relative] = store.add({"bytes": path.read_bytes(), "path": path.name}, str(path))
        return stored[relative]

    rows = []
    for query in queries:
        candidates = query["candidates"]
        to_image = query["direction"] == "riddle-to-image"
        options = [picture(c["item"]) if to_image else c["item"] for c in candidates]
        positives = [k for k, c in enumerate(candidates) if c["positive"]]
        rows.append({
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
            "candidate_distances": [-1 if c.get("distance") is None else int(c["distance"]) for c in candidates],
        })
    records = pd.DataFrame(rows)
    records["image"] = records["image"].astype(object).where(records["image"].notna(), None)  # NaN -> null
    return Adapted(records=records)


# ---------------------------------------------------------------------------------------------- fixture

# A small commonsense graph in ConceptNet's terms: riddle triples for 12 pictured entities, and the
# RelatedTo / DistinctFrom / Antonym links that make the hard negatives.
FIXTURE_TRIPLES = (
    ("UsedFor", "knife", "cutting_bread"), ("UsedFor", "knife", "cutting"), ("IsA", "knife", "tool"),
    ("MadeOf", "knife", "metal"), ("AtLocation", "knife", "kitchen"), ("HasProperty", "knife", "sharp"),
    ("UsedFor", "fork", "eating"), ("IsA", "fork", "cutlery"), ("MadeOf", "fork", "metal"),
    ("AtLocation", "fork", "kitchen"), ("HasA", "fork", "prongs"),
    ("UsedFor", "spoon", "eating"), ("UsedFor", "spoon", "stirring_soup"), ("IsA", "spoon", "cutlery"),
    ("MadeOf", "spoon", "metal"), ("HasProperty", "spoon", "round"),
    ("HasProperty", "lemon", "sour"), ("HasProperty", "lemon", "yellow"), ("IsA", "lemon", "citrus_fruit"),
    ("UsedFor", "lemon", "making_lemonade"), ("AtLocation", "lemon", "tree"),
    ("HasProperty", "orange", "sweet"), ("IsA", "orange", "citrus_fruit"), ("UsedFor", "orange", "making_juice"),
    ("HasProperty", "orange", "round"), ("AtLocation", "orange", "tree"),
    ("HasProperty", "banana", "yellow"), ("IsA", "banana", "fruit"), ("HasProperty", "banana", "curved"),
    ("ReceivesAction", "banana", "peeled"), ("AtLocation", "banana", "bunch"),
    ("HasProperty", "cake", "sweet"), ("UsedFor", "cake", "celebrating_birthdays"), ("MadeOf", "cake", "flour"),
    ("ReceivesAction", "cake", "baked"), ("HasA", "cake", "candles"),
    ("HasProperty", "chocolate", "sweet"), ("MadeOf", "chocolate", "cocoa"), ("HasProperty", "chocolate", "brown"),
    ("ReceivesAction", "chocolate", "melted"), ("IsA", "chocolate", "candy"),
    ("CapableOf", "cat", "catch_mice"), ("IsA", "cat", "pet"), ("HasA", "cat", "whiskers"),
    ("Desires", "cat", "milk"), ("CapableOf", "cat", "purr"),
    ("CapableOf", "dog", "bark"), ("IsA", "dog", "pet"), ("CapableOf", "dog", "fetch_a_stick"),
    ("HasA", "dog", "tail"), ("Desires", "dog", "walks"),
    ("CapableOf", "bird", "fly"), ("HasA", "bird", "feathers"), ("AtLocation", "bird", "nest"),
    ("CapableOf", "bird", "sing"), ("HasA", "bird", "beak"),
    ("CapableOf", "fish", "swim"), ("AtLocation", "fish", "water"), ("HasA", "fish", "fins"),
    ("HasA", "fish", "scales"), ("NotCapableOf", "fish", "breathe_air"),
    ("HasA", "knife", "blade"), ("CapableOf", "fork", "pick_up_food"), ("AtLocation", "spoon", "drawer"),
    ("AtLocation", "chocolate", "candy_store"), ("Desires", "bird", "seeds"), ("IsA", "fish", "animal"),
    ("HasA", "orange", "peel"), ("AtLocation", "cake", "bakery"), ("UsedFor", "banana", "making_smoothies"),
    ("AtLocation", "dog", "kennel"), ("HasA", "lemon", "seeds"), ("Desires", "cat", "sleep"),
    ("RelatedTo", "knife", "fork"), ("RelatedTo", "fork", "spoon"), ("RelatedTo", "lemon", "orange"),
    ("DistinctFrom", "orange", "banana"), ("RelatedTo", "cake", "chocolate"), ("Antonym", "cat", "dog"),
    ("RelatedTo", "bird", "fish"), ("DistinctFrom", "lemon", "chocolate"), ("RelatedTo", "cat", "fish"),
    ("RelatedTo", "spoon", "cake"),
)
FIXTURE_LOOK = {  # entity -> (shape, colour) of its drawn pictures
    "knife": ("arrow", "black"), "fork": ("cross", "white"), "spoon": ("ring", "white"),
    "lemon": ("circle", "yellow"), "orange": ("circle", "orange"), "banana": ("triangle", "yellow"),
    "cake": ("square", "pink"), "chocolate": ("square", "brown"), "cat": ("star", "orange"),
    "dog": ("hexagon", "brown"), "bird": ("diamond", "blue"), "fish": ("arrow", "blue"),
}
# The fixture's own riddle templates (worded as in config/prompts/dance_relations.yaml), so that the
# fixture's bytes do not depend on the folder prepare runs in.
FIXTURE_TEMPLATES = {
    "UsedFor": "This is used for {end}.", "IsA": "This is a kind of {end}.", "HasProperty": "This is {end}.",
    "CapableOf": "This can {end}.", "AtLocation": "This is found in {end}.", "HasA": "This has {end}.",
    "MadeOf": "This is made of {end}.", "ReceivesAction": "This can be {end}.", "Desires": "This wants {end}.",
    "NotCapableOf": "This cannot {end}.",
}
PICTURES_PER_ENTITY = 5
IMAGE_SIZE = 64


def fixture_assertions() -> str:
    """FIXTURE_TRIPLES as lines of a ConceptNet assertions file."""
    lines = []
    for relation, start, end in FIXTURE_TRIPLES:
        uri = f"/a/[/r/{relation}/,/c/en/{start}/,/c/en/{end}/]"
        lines.append(f"{uri}\t/r/{relation}\t/c/en/{start}\t/c/en/{end}\t{json.dumps({'weight': 1.0})}\n")
    return "".join(lines)


def write_fixture_inputs(folder: Path, seed: int, corrupt: int = 0) -> tuple[Path, Path]:
    """The builder's inputs: assertions.csv and pictures/<entity>/<n>.jpg (drawn shapes, the name written on them)."""
    folder = Path(folder)
    triples = folder / "assertions.csv"
    triples.parent.mkdir(parents=True, exist_ok=True)
    triples.write_text(fixture_assertions(), "utf-8")
    names = [(entity, n) for entity in FIXTURE_LOOK for n in range(PICTURES_PER_ENTITY)]
    broken = fx.pick_corrupt(seed, names, corrupt, "pictures")
    rng = fx.rng_for(seed, "dance", "pictures")
    for entity, n in names:
        shape, colour = FIXTURE_LOOK[entity]
        image, draw = fx.canvas(IMAGE_SIZE, tuple(rng.randint(200, 250) for _ in range(3)))
        fx.draw_shape(draw, shape, 32 + rng.uniform(-6, 6), 26 + rng.uniform(-4, 4), 16, fx.COLOURS[colour])
        fx.draw_label(draw, entity, 32, 48, size=10)
        data = fx.encode(image, "JPEG")
        fileio.write_bytes(folder / "pictures" / entity / f"{n}.jpg", fx.truncate(data) if (entity, n) in broken else data)
    return triples, folder / "pictures"


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """A DANCE-format folder built from FIXTURE_TRIPLES: `size` riddle triples, one query per direction each."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    with tempfile.TemporaryDirectory() as inputs:
        triples, pictures = write_fixture_inputs(Path(inputs), seed, corrupt)
        build_dance(triples, pictures, raw_dir, seed=seed, relations=FIXTURE_TEMPLATES, max_triples=size)


KIND = register(
    BenchmarkKind(
        name="dance",
        protocol="ranking",
        metric="dance",
        breakdown_by=("split", "subset"),
        description="DANCE: commonsense riddles ranked against 50 pictures and pictures against 50 riddles (a DANCE-format folder).",
        templates=(),
        expected_count=0,  # no published set: any built set is valid
        raw_files=(META, QUERIES, TRIPLES, "images/*/*"),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 10, "corrupt": 0},
        local_only=True,
    )
)
