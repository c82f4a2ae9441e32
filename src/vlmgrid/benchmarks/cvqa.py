"""CVQA (culturally diverse multilingual VQA, Romero et al. 2024) from the hub copy afaji/cvqa, split test.

Raw layout (the hub repo): data/test-0000N-of-000MM.parquet, columns image (struct {bytes, path}), ID,
Subset (the language-country pair as a Python tuple repr, "('Japanese', 'Japan')"), Question and Options
(the local language), Translated Question and Translated Options (English), Label (0-based index; -1 in
the public copy, whose labels are hidden for the leaderboard), Category, Image Type, Image Source,
License (per item).

Records: id = ID; question/options are the local-language texts as written by the annotators and
question_en/options_en their English translations (the same option order, so one answer_index serves
both); language, country and country_language ("Japan-Japanese") come from Subset; category, image_type,
image_source and license are kept. A hidden label gives answer_index -1 and no answer: the metric refuses
to score such records (see vlmgrid.metrics.cvqa) instead of reading -1 as an option.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import IMAGE_TYPE, ImageStore, find_raw, iter_parquet_rows, write_hub_parquet
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/test-*.parquet"
FIXTURE_SHARDS = 2
HIDDEN = -1
COLUMNS = ("image", "ID", "Subset", "Question", "Translated Question", "Options", "Translated Options", "Label",
           "Category", "Image Type", "Image Source", "License")
_TEXT = ("ID", "Subset", "Question", "Translated Question")
_META = ("Category", "Image Type", "Image Source", "License")
SCHEMA = pa.schema(
    [("image", IMAGE_TYPE)] + [(name, pa.string()) for name in _TEXT]
    + [("Options", pa.list_(pa.string())), ("Translated Options", pa.list_(pa.string())), ("Label", pa.int64())]
    + [(name, pa.string()) for name in _META]
)
FEATURES = (
    {"image": {"_type": "Image"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in _TEXT}
    | {name: {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}
       for name in ("Options", "Translated Options")}
    | {"Label": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in _META}
)
METADATA = {"Category": "category", "Image Type": "image_type", "Image Source": "image_source", "License": "license"}


# ---------------------------------------------------------------------------------------------- Subset

def parse_subset(value: Any, where: str) -> tuple[str, str]:
    """(language, country) from the Subset field, a Python tuple repr such as "('Japanese', 'Japan')"."""
    try:
        pair = ast.literal_eval(value) if isinstance(value, str) else None
    except (ValueError, SyntaxError):
        pair = None
    if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p.strip() for p in pair)):
        raise VlmgridError(
            f"{where}: Subset {value!r} is not a (language, country) pair such as \"('Japanese', 'Japan')\"; "
            f"the file is not CVQA's published format: check the source"
        )
    return pair[0].strip(), pair[1].strip()


def country_language(country: str, language: str) -> str:
    return f"{country}-{language}"


# ---------------------------------------------------------------------------------------------- fixture

# The fixture's three questions and their options, in English and in each pair's local language (numerals
# in the local script where it has its own). Each list is in the same order as its English counterpart.
_COLOURS = ("red", "blue", "yellow", "green")
_SHAPES = ("circle", "square", "triangle", "star")
_COUNTS = ("1", "2", "3", "4")
ENGLISH = {
    "colour": ("What colour is the shape?", _COLOURS),
    "shape": ("Which shape is in the picture?", _SHAPES),
    "count": ("How many shapes are in the picture?", _COUNTS),
}
LOCAL = {
    ("Egyptian Arabic", "Egypt"): {
        "colour": ("ما لون الشكل؟", ("أحمر", "أزرق", "أصفر", "أخضر")),
        "shape": ("ما هو الشكل في الصورة؟", ("دائرة", "مربع", "مثلث", "نجمة")),
        "count": ("كم عدد الأشكال في الصورة؟", ("١", "٢", "٣", "٤")),
    },
    ("Bengali", "India"): {
        "colour": ("আকৃতিটির রং কী?", ("লাল", "নীল", "হলুদ", "সবুজ")),
        "shape": ("ছবিতে কোন আকৃতি আছে?", ("বৃত্ত", "বর্গ", "ত্রিভুজ", "তারা")),
        "count": ("ছবিতে কয়টি আকৃতি আছে?", ("১", "২", "৩", "৪")),
    },
    ("Telugu", "India"): {
        "colour": ("ఆకారం ఏ రంగులో ఉంది?", ("ఎరుపు", "నీలం", "పసుపు", "ఆకుపచ్చ")),
        "shape": ("చిత్రంలో ఏ ఆకారం ఉంది?", ("వృత్తం", "చతురస్రం", "త్రిభుజం", "నక్షత్రం")),
        "count": ("చిత్రంలో ఎన్ని ఆకారాలు ఉన్నాయి?", ("౧", "౨", "౩", "౪")),
    },
    ("Russian", "Russia"): {
        "colour": ("Какого цвета фигура?", ("красный", "синий", "жёлтый", "зелёный")),
        "shape": ("Какая фигура на картинке?", ("круг", "квадрат", "треугольник", "звезда")),
        "count": ("Сколько фигур на картинке?", ("1", "2", "3", "4")),
    },
    ("Chinese", "China"): {
        "colour": ("图形是什么颜色?", ("红色", "蓝色", "黄色", "绿色")),
        "shape": ("图中是什么形状?", ("圆形", "正方形", "三角形", "星形")),
        "count": ("图中有几个图形?", ("一", "二", "三", "四")),
    },
    ("Japanese", "Japan"): {
        "colour": ("図形は何色ですか?", ("赤", "青", "黄色", "緑")),
        "shape": ("絵の図形は何ですか?", ("円", "四角形", "三角形", "星")),
        "count": ("絵の中に図形はいくつありますか?", ("一", "二", "三", "四")),
    },
    ("Spanish", "Mexico"): {
        "colour": ("¿De qué color es la figura?", ("rojo", "azul", "amarillo", "verde")),
        "shape": ("¿Qué figura hay en la imagen?", ("círculo", "cuadrado", "triángulo", "estrella")),
        "count": ("¿Cuántas figuras hay en la imagen?", ("1", "2", "3", "4")),
    },
}
QUESTION_KINDS = ("colour", "shape", "count")
CATEGORIES = ("Objects / materials / clothing", "Tradition / art / history", "Cooking and food")
LICENSES = ("CC BY-SA", "CC BY 4.0")
IMAGE_SIZE = 64


def _image(kind: str, answer: int, rng) -> bytes:
    image, draw = fx.canvas(IMAGE_SIZE, (238, 238, 238))
    if kind == "colour":
        fx.draw_shape(draw, rng.choice(fx.SHAPES), 32, 32, 20, fx.COLOURS[_COLOURS[answer]])
    elif kind == "shape":
        fx.draw_shape(draw, _SHAPES[answer], 32, 32, 20, fx.COLOURS["blue"])
    else:
        spots = rng.sample([(x, y) for x in (14, 32, 50) for y in (14, 32, 50)], answer + 1)
        for x, y in spots:
            fx.draw_shape(draw, "circle", x, y, 6, fx.COLOURS["red"])
    return fx.encode(image, "JPEG")


def _hidden_labels(settings: Mapping[str, Any]) -> bool:
    value = settings.get("hidden_labels", False)
    if not isinstance(value, bool):
        raise VlmgridError(f"fixture source: `hidden_labels` must be true or false, not {value!r}; fix it in the config")
    return value


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` questions per language-country pair (7 pairs, 5 scripts), four options each, in two shards.

    With `hidden_labels: true` every Label is -1, as in the public hub copy.
    """
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    hidden = _hidden_labels(settings)
    pairs = list(LOCAL)
    broken = fx.pick_corrupt(seed, list(range(size * len(pairs))), corrupt, "images")
    rng = fx.rng_for(seed, "cvqa")
    rows = []
    for p, (language, country) in enumerate(pairs):
        for q in range(size):
            kind = QUESTION_KINDS[(p + q) % len(QUESTION_KINDS)]
            order = rng.sample(range(4), 4)  # option order differs per item, the same in both languages
            answer = rng.randrange(4)
            data = _image(kind, answer, rng)
            question, local_options = LOCAL[(language, country)][kind]
            question_en, options_en = ENGLISH[kind]
            rows.append(
                {
                    "image": {"bytes": fx.truncate(data) if len(rows) in broken else data, "path": None},
                    "ID": f"{rng.getrandbits(62)}_{q}",
                    "Subset": repr((language, country)),
                    "Question": question,
                    "Translated Question": question_en,
                    "Options": [local_options[k] for k in order],
                    "Translated Options": [options_en[k] for k in order],
                    "Label": HIDDEN if hidden else order.index(answer),
                    "Category": CATEGORIES[q % len(CATEGORIES)],
                    "Image Type": "Self",
                    "Image Source": "Self-open",
                    "License": LICENSES[p % len(LICENSES)],
                }
            )
    per_shard = -(-len(rows) // FIXTURE_SHARDS)
    for shard in range(FIXTURE_SHARDS):
        name = f"data/test-{shard:05d}-of-{FIXTURE_SHARDS:05d}.parquet"
        write_hub_parquet(Path(raw_dir) / name, SCHEMA, rows[shard * per_shard:(shard + 1) * per_shard], FEATURES)


# ---------------------------------------------------------------------------------------------- adapter

def _options(row: Mapping[str, Any], column: str, where: str) -> list[str]:
    options = row[column]
    if not isinstance(options, list) or len(options) < 2 or any(not isinstance(o, str) for o in options):
        raise VlmgridError(f"{where}: `{column}` must list at least 2 option texts, not {options!r}; re-download the file")
    return options


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    store = ImageStore(bench_dir)
    rows = []
    for path in find_raw(raw_dir, FILE_PATTERN):
        for n, row in enumerate(iter_parquet_rows(path, COLUMNS)):
            where = f"{path} row {n} (ID {row['ID']!r})"
            language, country = parse_subset(row["Subset"], where)
            options = _options(row, "Options", where)
            options_en = _options(row, "Translated Options", where)
            if len(options) != len(options_en):
                raise VlmgridError(
                    f"{where}: {len(options)} local options but {len(options_en)} translated ones; the file is "
                    f"damaged: re-download it"
                )
            label = row["Label"]
            if label is None or not HIDDEN <= int(label) < len(options):
                raise VlmgridError(
                    f"{where}: Label {label!r} is neither -1 (hidden) nor an index into its {len(options)} options; "
                    f"re-download the file"
                )
            label = int(label)
            rows.append(
                {
                    "id": str(row["ID"]),
                    "image": store.add(row["image"], where),
                    "question": row["Question"] or "",
                    "options": options,
                    "answer": None if label == HIDDEN else options[label],
                    "answer_index": label,
                    "question_en": row["Translated Question"] or "",
                    "options_en": options_en,
                    "language": language,
                    "country": country,
                    "country_language": country_language(country, language),
                    **{key: row[column] or "" for column, key in METADATA.items()},
                }
            )
    return Adapted(records=pd.DataFrame(rows))


KIND = register(
    BenchmarkKind(
        name="cvqa",
        protocol="cvqa",
        metric="cvqa",
        breakdown_by=("country_language",),
        description="CVQA: culturally diverse multiple-choice VQA in 31 languages and 30 countries, in four prompt "
                    "settings (location-aware or not, English or local language); public labels are hidden.",
        templates=(),
        # The dataset card of the current hub copy (10.4k rows, data/test-*-of-00010.parquet); earlier revisions
        # of the card listed 8,031 and 10,268 items, so a pinned older revision has another count.
        expected_count=10374,
        raw_files=(FILE_PATTERN,),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 3, "corrupt": 0, "hidden_labels": False},
        parser="letter",
        hub={"repo": "afaji/cvqa", "revision": "main", "split": "test"},  # unpinned: no commit sha verified yet
    )
)
