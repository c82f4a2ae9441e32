"""Build a DANCE-style diagnostic set (docs/dance-format.md) from ConceptNet triples and pictures of entities.

Inputs:
- a ConceptNet assertions file: tab-separated `uri, relation, start, end, json-info` per line
  (`/a/[/r/UsedFor/,/c/en/knife/,/c/en/cutting_bread/]  /r/UsedFor  /c/en/knife  /c/en/cutting_bread  {...}`);
  only English concepts (`/c/en/...`) are read, and a concept is its name ("/c/en/knife/n" -> "knife");
- an image folder labelled by entity, `<images>/<entity>/*.jpg` (also .jpeg, .png), the folder named as the
  ConceptNet concept ("cutting_board");
- the riddle templates, one per relation (config/prompts/dance_relations.yaml, `relations`).

What it makes, all seeded:
- a riddle from every triple whose relation has a template and whose start is a pictured entity: the
  template filled with the end concept ("This is used for cutting bread."); the entities a riddle is true of
  are every pictured entity with the same (relation, end);
- the split: a riddle triple is seen when it is among the training triples (`train_triples`, a ConceptNet
  file of the triples a model was trained with) or, without that file, in a `train_fraction` of the riddle
  triples drawn with the seed; queries of seen triples are test-seen, the others test-unseen;
- per riddle triple, one query in each direction, with `n_candidates` (50) candidates of which 1 to
  `max_positives` (15) are positives: riddle -> images (positives: pictures of the entities the riddle is
  true of) and image -> riddles (one picture of the entity; positives: the riddles true of it);
- hard negatives by knowledge-graph distance from the query's entity, nearest first: entities linked to
  it by RelatedTo, DistinctFrom or Antonym, then the others by their distance in the graph of all triples
  (any relation, either direction, up to MAX_HOPS), then unrelated ones; each negative records why it was
  chosen (`source`, `distance`).
"""

from __future__ import annotations

import csv
import json
import random
import shutil
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from vlmgrid import fileio
from vlmgrid.errors import VlmgridError
from vlmgrid.prompts import DEFAULT_PROMPTS_DIR, load_prompts, prompts_file

RELATIONS_SET = "dance_relations"
HARD_RELATIONS = ("RelatedTo", "DistinctFrom", "Antonym")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# Beyond this many hops in the knowledge graph an entity counts as unrelated: ConceptNet's English graph is
# small-world (most concepts lie within a few hops of each other), and a full search per entity is slow.
MAX_HOPS = 3
N_CANDIDATES = 50
MAX_POSITIVES = 15
DIRECTIONS = ("riddle-to-image", "image-to-riddle")
SPLITS = ("test-seen", "test-unseen")
FORMAT_DOC = "docs/dance-format.md"
FORMAT_NAME = "vlmgrid-dance"
FORMAT_VERSION = 1
META = "dance.json"
QUERIES = "queries.jsonl"
TRIPLES = "triples.tsv"


def rng_for(seed: int, *salt: object) -> random.Random:
    """A private random stream per (seed, purpose), so adding draws in one place never shifts another (the
    same streams as vlmgrid.fixtures.drawing.rng_for, which the DANCE fixture draws its pictures with)."""
    return random.Random("|".join(map(str, (int(seed), *salt))))


def concept_name(uri: str) -> str | None:
    """The concept of an English ConceptNet node ("/c/en/cutting_bread/n" -> "cutting_bread"); None
    otherwise."""
    parts = str(uri).split("/")
    return parts[3] if len(parts) > 3 and parts[1] == "c" and parts[2] == "en" and parts[3] else None


def concept_text(name: str) -> str:
    return name.replace("_", " ")


def read_triples(path: Path) -> pd.DataFrame:
    """The English triples of a ConceptNet assertions file: columns uri, relation, start, end."""
    path = Path(path)
    if not path.is_file():
        raise VlmgridError(
            f"{path}: no such triples file; give a ConceptNet assertions CSV (tab-separated uri, relation, "
            "start, end, json-info)"
        )
    frame = pd.read_csv(
        path,
        sep="\t",
        header=None,
        names=["uri", "relation", "start", "end", "info"],
        usecols=range(5),
        dtype=str,
        quoting=csv.QUOTE_NONE,
        keep_default_na=False,
        on_bad_lines="error",
    )
    if frame.empty:
        raise VlmgridError(f"{path}: holds no triples; give a ConceptNet assertions CSV")
    bad = ~frame["relation"].str.startswith("/r/")
    if bad.any():
        line = int(bad.to_numpy().argmax()) + 1
        raise VlmgridError(
            f"{path} line {line}: relation {frame['relation'][line - 1]!r} is not a ConceptNet relation "
            f"(/r/...); the file must be tab-separated uri, relation, start, end, json-info"
        )
    frame["relation"] = frame["relation"].str[3:].str.strip("/")
    frame["start"] = frame["start"].map(concept_name)
    frame["end"] = frame["end"].map(concept_name)
    frame = frame.dropna(subset=["start", "end"])
    return (
        frame[["uri", "relation", "start", "end"]]
        .drop_duplicates(["relation", "start", "end"])
        .reset_index(drop=True)
    )


def find_images(folder: Path) -> dict[str, list[Path]]:
    """{entity: its pictures, sorted} from `<folder>/<entity>/*.jpg` (and .jpeg, .png)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise VlmgridError(
            f"{folder}: no such image folder; give a folder with one sub-folder of pictures per entity"
        )
    images = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        files = sorted(p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if files:
            images[sub.name] = files
    if not images:
        raise VlmgridError(
            f"{folder}: holds no <entity>/*.jpg pictures; put each entity's pictures in a sub-folder named "
            "after it"
        )
    return images


def relation_templates(path: Path | None = None) -> tuple[dict[str, str], str]:
    """The riddle templates ({relation: template holding {end}}) and the prompt, from dance_relations.yaml."""
    folder = Path(path).parent if path else DEFAULT_PROMPTS_DIR
    data = load_prompts(RELATIONS_SET if path is None else Path(path).stem, folder)
    where = str(path or prompts_file(RELATIONS_SET, folder))
    relations = data.get("relations")
    if not isinstance(relations, Mapping) or not relations:
        raise VlmgridError(f"{where}: `relations` must map ConceptNet relations to riddle templates")
    for relation, template in relations.items():
        if (
            not isinstance(template, str)
            or template.count("{end}") != 1
            or template.replace("{end}", "").count("{")
        ):
            raise VlmgridError(
                f"{where}: relations.{relation}: a template holds {{end}} exactly once and no other field"
            )
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise VlmgridError(
            f"{where}: `prompt` must be the non-empty text shown with the image before a riddle"
        )
    return dict(relations), prompt


def neighbours_of(triples: pd.DataFrame) -> dict[str, set[str]]:
    """The undirected graph of all triples (any relation) as {concept: its neighbours}."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for start, end in zip(triples["start"], triples["end"]):
        neighbours[start].add(end)
        neighbours[end].add(start)
    return neighbours


def graph_distances(
    neighbours: Mapping[str, set[str]], source: str, max_hops: int = MAX_HOPS
) -> dict[str, int]:
    """Hops from `source` to every concept within `max_hops` of it (breadth-first)."""
    distance, queue = {source: 0}, deque([source])
    while queue:
        node = queue.popleft()
        if distance[node] == max_hops:
            continue
        for other in neighbours.get(node, ()):
            if other not in distance:
                distance[other] = distance[node] + 1
                queue.append(other)
    return distance


@dataclass(frozen=True)
class Riddle:
    relation: str
    start: str
    end: str
    uri: str
    text: str

    def triple(self) -> dict:
        return {"relation": self.relation, "start": self.start, "end": self.end, "uri": self.uri}


class Builder:
    """One build: the inputs read once, the graph facts every query needs, then the queries."""

    def __init__(
        self,
        triples: pd.DataFrame,
        images: dict[str, list[Path]],
        templates: dict[str, str],
        *,
        seed: int,
        n_candidates: int,
        max_positives: int,
        train_fraction: float,
        train_triples: pd.DataFrame | None = None,
    ) -> None:
        self.triples, self.images, self.seed = triples, images, seed
        self.n_candidates, self.max_positives = n_candidates, max_positives
        riddles = [
            Riddle(
                row.relation,
                row.start,
                row.end,
                row.uri,
                templates[row.relation].format(end=concept_text(row.end)),
            )
            for row in triples.itertuples(index=False)
            if row.relation in templates and row.start in images
        ]
        self.riddles = riddles
        self.true_of: dict[str, set[str]] = defaultdict(set)  # riddle text -> the entities it is true of
        self.first = {r.text: r for r in reversed(riddles)}  # riddle text -> the first triple behind it
        for riddle in riddles:
            self.true_of[riddle.text].add(riddle.start)
        self.texts_of: dict[str, list[str]] = defaultdict(list)  # entity -> the riddle texts true of it
        for text in sorted(self.true_of):
            for entity in sorted(self.true_of[text]):
                self.texts_of[entity].append(text)
        self.hard: dict[str, dict[str, str]] = defaultdict(dict)  # entity -> {linked entity: relation}
        for row in triples[triples["relation"].isin(HARD_RELATIONS)].itertuples(index=False):
            self.hard[row.start].setdefault(row.end, row.relation)
            self.hard[row.end].setdefault(row.start, row.relation)
        self.neighbours = neighbours_of(triples)
        self._distances: dict[str, dict[str, int]] = {}
        order = list(range(len(riddles)))
        rng_for(seed, "dance", "train").shuffle(order)
        self.seen = set(order[: round(train_fraction * len(riddles))])
        if train_triples is not None:
            trained = set(zip(train_triples["relation"], train_triples["start"], train_triples["end"]))
            self.seen = {k for k, r in enumerate(riddles) if (r.relation, r.start, r.end) in trained}

    def distances(self, entity: str) -> dict[str, int]:
        if entity not in self._distances:
            self._distances[entity] = graph_distances(self.neighbours, entity)
        return self._distances[entity]

    def provenance(self, entity: str, other: str) -> tuple[int, str, int | None]:
        """(tier, source, distance) of a negative entity: hard relations first, then by graph distance."""
        distance = self.distances(entity).get(other)
        if other in self.hard[entity]:
            return 0, self.hard[entity][other], 1
        if distance is None:
            return 1 << 30, "random", None
        return distance, "graph", distance

    def _pick(self, positives: list[dict], negatives: list[tuple], rng, where: str) -> list[dict]:
        """Cap the positives, fill up with the nearest negatives, shuffle."""
        if len(positives) > self.max_positives:
            positives = [positives[0]] + rng.sample(positives[1:], self.max_positives - 1)
        wanted = self.n_candidates - len(positives)
        if len(negatives) < wanted:
            raise VlmgridError(
                f"{where}: only {len(negatives)} negatives for {wanted} places ({self.n_candidates} "
                f"candidates); add pictures or triples, or lower n_candidates"
            )
        keyed = [(tier, rank, rng.random(), candidate) for tier, rank, candidate in negatives]
        keyed.sort(key=lambda k: k[:3])
        chosen = positives + [k[3] for k in keyed[:wanted]]
        rng.shuffle(chosen)
        return chosen

    def riddle_to_image(self, k: int, riddle: Riddle, relative) -> dict:
        rng = rng_for(self.seed, "dance", "riddle-to-image", k)
        answers = self.true_of[riddle.text]
        own = [riddle.start] + sorted(answers - {riddle.start})
        positives = [
            {"item": relative(path), "entity": entity, "positive": True, "source": "positive", "distance": 0}
            for entity in own
            for path in self.images[entity]
        ]
        negatives = []
        for entity in sorted(set(self.images) - answers):
            tier, source, distance = self.provenance(riddle.start, entity)
            for rank, path in enumerate(self.images[entity]):
                negatives.append(
                    (
                        tier,
                        rank,
                        {
                            "item": relative(path),
                            "entity": entity,
                            "positive": False,
                            "source": source,
                            "distance": distance,
                        },
                    )
                )
        return self._query(
            f"r2i-{k:05d}",
            "riddle-to-image",
            k,
            riddle,
            riddle.text,
            self._pick(positives, negatives, rng, f"riddle {riddle.text!r}"),
        )

    def image_to_riddle(self, k: int, riddle: Riddle, relative) -> dict:
        rng = rng_for(self.seed, "dance", "image-to-riddle", k)
        entity = riddle.start
        image = relative(rng.choice(self.images[entity]))
        own = [riddle.text] + [t for t in self.texts_of[entity] if t != riddle.text]
        positives = [
            {
                "item": text,
                "entity": entity,
                "positive": True,
                "source": "positive",
                "distance": 0,
                "triple": self.first[text].triple(),
            }
            for text in own
        ]
        negatives = []
        for text in sorted(set(self.true_of) - set(own)):
            # a riddle true of several entities is as hard as its nearest one
            other = min(sorted(self.true_of[text]), key=lambda e: self.provenance(entity, e)[0])
            tier, source, distance = self.provenance(entity, other)
            negatives.append(
                (
                    tier,
                    0,
                    {
                        "item": text,
                        "entity": other,
                        "positive": False,
                        "source": source,
                        "distance": distance,
                        "triple": self.first[text].triple(),
                    },
                )
            )
        return self._query(
            f"i2r-{k:05d}",
            "image-to-riddle",
            k,
            riddle,
            image,
            self._pick(positives, negatives, rng, f"picture {image}"),
        )

    def _query(self, query_id: str, direction: str, k: int, riddle: Riddle, query: str, candidates) -> dict:
        return {
            "id": query_id,
            "direction": direction,
            "split": SPLITS[0] if k in self.seen else SPLITS[1],
            "entity": riddle.start,
            "triple": riddle.triple(),
            "query": query,
            "candidates": candidates,
        }


def build_dance(
    triples_path: Path,
    images_dir: Path,
    out_dir: Path,
    *,
    seed: int = 0,
    relations: Path | Mapping[str, str] | None = None,
    n_candidates: int = N_CANDIDATES,
    max_positives: int = MAX_POSITIVES,
    train_fraction: float = 0.5,
    train_triples: Path | None = None,
    max_triples: int | None = None,
) -> dict:
    """Write a DANCE-format folder (docs/dance-format.md) into out_dir; returns its dance.json.

    `relations`: the riddle templates, as a dance_relations.yaml file (None:
    config/prompts/dance_relations.yaml) or as a {relation: template} mapping. `train_triples`: a ConceptNet
    file of the triples seen in training (test-seen); without it, `train_fraction` of the riddle triples.
    `max_triples`: make queries for that many riddle triples only (drawn with the seed; the split is drawn
    over all of them).
    """
    if not 1 <= max_positives < n_candidates:
        raise VlmgridError(
            f"max_positives {max_positives} must be at least 1 and below n_candidates {n_candidates}"
        )
    if not 0.0 <= train_fraction <= 1.0:
        raise VlmgridError(f"train_fraction {train_fraction} must lie between 0 and 1")
    triples = read_triples(triples_path)
    images = find_images(images_dir)
    templates = dict(relations) if isinstance(relations, Mapping) else relation_templates(relations)[0]
    builder = Builder(
        triples,
        images,
        templates,
        seed=seed,
        n_candidates=n_candidates,
        max_positives=max_positives,
        train_fraction=train_fraction,
        train_triples=read_triples(train_triples) if train_triples else None,
    )
    if not builder.riddles:
        raise VlmgridError(
            f"{triples_path}: no triple has both a templated relation and a pictured start entity "
            f"(pictured: {', '.join(sorted(images)[:5])}...); check the entity folder names"
        )
    chosen = list(range(len(builder.riddles)))
    if max_triples is not None and max_triples < len(chosen):
        chosen = sorted(rng_for(seed, "dance", "queries").sample(chosen, max_triples))

    out_dir = Path(out_dir)
    copied: dict[Path, str] = {}

    def relative(path: Path) -> str:
        if path not in copied:
            rel = f"images/{path.parent.name}/{path.name}"
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            copied[path] = rel
        return copied[path]

    queries = []
    for k in chosen:
        queries.append(builder.riddle_to_image(k, builder.riddles[k], relative))
        queries.append(builder.image_to_riddle(k, builder.riddles[k], relative))
    queries.sort(key=lambda q: q["id"])
    fileio.write_text(out_dir / QUERIES, "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries))
    table = pd.DataFrame(
        [{**r.triple(), "riddle": r.text, "seen": k in builder.seen} for k, r in enumerate(builder.riddles)]
    )
    with fileio.atomic_path(out_dir / TRIPLES) as tmp:
        table.to_csv(tmp, sep="\t", index=False)
    meta = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "n_candidates": n_candidates,
        "max_positives": max_positives,
        "seed": seed,
        "train_fraction": None if train_triples else train_fraction,
        "train_triples": Path(train_triples).name if train_triples else None,
        "hard_relations": list(HARD_RELATIONS),
        "relations": templates,
        "n_queries": len(queries),
        "n_riddle_triples": len(builder.riddles),
        "source": {"triples": Path(triples_path).name, "images": Path(images_dir).name},
    }
    fileio.write_json(out_dir / META, meta)
    return meta
