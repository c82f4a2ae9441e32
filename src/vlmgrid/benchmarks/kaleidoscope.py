"""Kaleidoscope (in-language exam multiple choice, 18 languages) from the hub copy CohereLabs/kaleidoscope.

Raw layout (the hub repo; formerly CohereForAI/kaleidoscope): `data/train-*.parquet`, 20,911 rows, one
question each, columns language (ar, bn, de, en, es, fa, fr, hi, hr, hu, lt, ne, nl, pt, ru, sr, te, uk),
country, file_name, source, license (per row), level, category_en, category_original_lang,
original_question_num, question, options (list of strings), answer (0-based index), image_png,
image_information, image_type, parallel_question_id, image, general_category_en. The pixels are not in the
parquet: `image` is a path into `data.zip` at the repo root, whose members lie under `final_data/`; an empty
`image` (null, "" or "None") marks a text-only question (the card: 11,459 with an image, 9,452 text-only).
Two questions have image paths as option texts; they are kept as text, as the authors' prompts show them.

Records: id "train-<row>" (the rows in file order; the dataset has no id column), the image extracted to
images/<sha256>.<ext> (null for text-only), question, options, answer; metadata `language`, `country`,
`level`, `category_en`, `general_category_en`, `image_type`, `image_information`, `parallel_question_id`,
`license` (missing values as ""), and `modality` ("multimodal" or "text-only").

An `image` is looked up in the archive as given and, failing that, under `final_data/` (a leading "./" is
ignored), so both spellings of the path read the same image.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from vlmgrid import fileio
from vlmgrid.benchmarks import fixtures as fx
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind, register
from vlmgrid.benchmarks.rawio import ImageStore, find_raw, iter_parquet_rows, raw_file, write_hub_parquet
from vlmgrid.errors import VlmgridError

FILE_PATTERN = "data/train-*.parquet"
ARCHIVE = "data.zip"
ARCHIVE_ROOT = "final_data/"
FIXTURE_FILE = "data/train-00000-of-00001.parquet"
TEXT_COLUMNS = ("language", "country", "file_name", "source", "license", "level", "category_en",
                "category_original_lang", "original_question_num", "question")
AFTER_ANSWER = ("image_png", "image_information", "image_type", "parallel_question_id", "image", "general_category_en")
SCHEMA = pa.schema(
    [(name, pa.string()) for name in TEXT_COLUMNS]
    + [("options", pa.list_(pa.string())), ("answer", pa.int64())]
    + [(name, pa.string()) for name in AFTER_ANSWER]
)
FEATURES = (
    {name: {"dtype": "string", "_type": "Value"} for name in TEXT_COLUMNS}
    | {"options": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}}
    | {"answer": {"dtype": "int64", "_type": "Value"}}
    | {name: {"dtype": "string", "_type": "Value"} for name in AFTER_ANSWER}
)
COLUMNS = ("language", "question", "options", "answer", "image")
METADATA = ("country", "level", "category_en", "general_category_en", "image_type", "image_information",
            "parallel_question_id", "license")
TEXT_ONLY_MARKS = ("", "none", "nan", "null")


# ---------------------------------------------------------------------------------------------- fixture

# Per language: country, "how many shapes" question, "a + b" question (text-only).
FIXTURE_LANGUAGES: dict[str, tuple[str, str, str]] = {
    "ar": ("Jordan", "كم عدد الأشكال في الصورة؟", "ما ناتج {a} + {b}؟"),
    "bn": ("Bangladesh", "ছবিতে কয়টি আকৃতি আছে?", "{a} + {b} কত?"),
    "en": ("United States", "How many shapes are in the picture?", "What is {a} + {b}?"),
    "es": ("Spain", "¿Cuántas figuras hay en la imagen?", "¿Cuánto es {a} + {b}?"),
    "ru": ("Russia", "Сколько фигур на рисунке?", "Чему равно {a} + {b}?"),
    "te": ("India", "చిత్రంలో ఎన్ని ఆకారాలు ఉన్నాయి?", "{a} + {b} ఎంత?"),
    "uk": ("Ukraine", "Скільки фігур на малюнку?", "Скільки буде {a} + {b}?"),
}
FIXTURE_CATEGORIES = (("Mathematics", "STEM"), ("Geography", "Humanities"), ("Physics", "STEM"))
FIXTURE_IMAGE_TYPES = ("diagram", "figure", "graph")
OPTION_COUNTS = (4, 3, 5, 4)  # the exams have 4 options mostly, some 3 or 5
IMAGE_SIZE = 96


def _numeric_options(correct: int, n: int, rng) -> tuple[list[str], int]:
    pool = [value for value in range(max(0, correct - 6), correct + 7) if value != correct]
    options = [correct] + rng.sample(pool, n - 1)
    rng.shuffle(options)
    return [str(value) for value in options], options.index(correct)


def _count_image(count: int, rng) -> bytes:
    image, draw = fx.canvas(IMAGE_SIZE, (240, 238, 230))
    spots = rng.sample([(x, y) for x in (16, 48, 80) for y in (16, 48, 80)], count)
    shape = rng.choice(fx.SHAPES)
    for x, y in spots:
        fx.draw_shape(draw, shape, x, y, 11, fx.COLOURS[rng.choice(["red", "blue", "green", "purple"])])
    return fx.encode(image, "PNG")


def write_fixture(raw_dir: Path, settings: Mapping[str, Any]) -> None:
    """`size` questions per language in 7 languages (Arabic, Bengali, English, Spanish, Russian, Telugu,
    Ukrainian): counting questions about a generated picture and text-only sums, with 4, 3, 5, 4, ... options;
    the pictures go into data.zip under final_data/."""
    seed = fx.fixture_int(settings, "seed", 0)
    size = fx.fixture_int(settings, "size", 1)
    corrupt = fx.fixture_int(settings, "corrupt", 0)
    rng = fx.rng_for(seed, "kaleidoscope")
    plan = [(language, k) for language in FIXTURE_LANGUAGES for k in range(size)]
    with_image = [n for n, (_, k) in enumerate(plan) if k % 3 != 2]  # every third question is text-only
    broken = fx.pick_corrupt(seed, with_image, corrupt, "images")
    rows, members = [], {}
    for n, (language, k) in enumerate(plan):
        country, count_question, sum_question = FIXTURE_LANGUAGES[language]
        n_options = OPTION_COUNTS[n % len(OPTION_COUNTS)]
        category, general = FIXTURE_CATEGORIES[n % len(FIXTURE_CATEGORIES)]
        file_name = f"{language}_exam_{k // 3 + 1}.pdf"
        if n in with_image:
            count = rng.randint(1, 9)
            question = count_question
            options, answer = _numeric_options(count, n_options, rng)
            png = f"{language}_{k:03d}.png"
            image = f"images/{language}/{png}"
            data = _count_image(count, rng)
            members[ARCHIVE_ROOT + image] = fx.truncate(data) if n in broken else data
            image_type = FIXTURE_IMAGE_TYPES[n % len(FIXTURE_IMAGE_TYPES)]
            information = "essential"
        else:
            a, b = rng.randint(2, 40), rng.randint(2, 40)
            question = sum_question.format(a=a, b=b)
            options, answer = _numeric_options(a + b, n_options, rng)
            png = image = image_type = information = None
            if k % 2:
                image = "None"  # the hub copy spells some missing images as the text "None"
        rows.append({
            "language": language, "country": country, "file_name": file_name, "source": "vlmgrid fixture",
            "license": "CC BY 4.0", "level": rng.choice(["Secondary", "University Entrance"]),
            "category_en": category, "category_original_lang": category, "original_question_num": str(k + 1),
            "question": question, "options": options, "answer": answer, "image_png": png,
            "image_information": information, "image_type": image_type,
            "parallel_question_id": None, "image": image, "general_category_en": general,
        })
    write_hub_parquet(Path(raw_dir) / FIXTURE_FILE, SCHEMA, rows, FEATURES)
    _write_zip(Path(raw_dir) / ARCHIVE, sorted(members.items()))


def _write_zip(path: Path, members) -> None:
    """A zip whose bytes depend on the members only (fixed timestamps, stored, sorted)."""
    with fileio.atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)


# ---------------------------------------------------------------------------------------------- adapter

def _is_text_only(image: Any) -> bool:
    return image is None or str(image).strip().lower() in TEXT_ONLY_MARKS


def _member(image: str, names: set[str]) -> str | None:
    path = image.strip().removeprefix("./")
    for candidate in (path, ARCHIVE_ROOT + path):
        if candidate in names:
            return candidate
    return None


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


def adapt(raw_dir: Path, bench_dir: Path) -> Adapted:
    archive_path = raw_file(raw_dir, ARCHIVE)
    try:
        archive = zipfile.ZipFile(archive_path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise VlmgridError(f"{archive_path}: not a readable zip archive ({exc}); delete it and run prepare again") from None
    store = ImageStore(bench_dir)
    rows = []
    with archive:
        names = set(archive.namelist())
        for path in find_raw(raw_dir, FILE_PATTERN):
            for row in iter_parquet_rows(path, COLUMNS + METADATA):
                n = len(rows)
                where = f"{path} row {n}"
                options = row["options"]
                if not isinstance(options, list) or len(options) < 2:
                    raise VlmgridError(f"{where}: `options` must list at least 2 options, not {options!r}; re-download the file")
                answer = row["answer"]
                if answer is None or not 0 <= int(answer) < len(options):
                    raise VlmgridError(f"{where}: answer index {answer!r} is outside its {len(options)} options; re-download the file")
                language = _plain(row["language"]).strip()
                if not language:
                    raise VlmgridError(f"{where}: has no `language`; the file is not Kaleidoscope's: check the source")
                image = None
                if not _is_text_only(row["image"]):
                    member = _member(str(row["image"]), names)
                    if member is None:
                        raise VlmgridError(
                            f"{where}: image {row['image']!r} is not in {archive_path} (looked for it as given and "
                            f"under {ARCHIVE_ROOT}); the archive is incomplete or another version: re-download it"
                        )
                    image = store.add({"bytes": archive.read(member), "path": member}, where)
                rows.append({
                    "id": f"train-{n}",
                    "image": image,
                    "question": _plain(row["question"]),
                    "options": [str(option) for option in options],
                    "answer": str(options[int(answer)]),
                    "answer_index": int(answer),
                    "language": language,
                    **{key: _plain(row[key]) for key in METADATA},
                    "modality": "text-only" if image is None else "multimodal",
                })
    records = pd.DataFrame(rows)
    # pandas would turn the text-only items' None into NaN next to strings; records keep null paths.
    records["image"] = pd.Series([row["image"] for row in rows], dtype=object)
    return Adapted(records=records)


KIND = register(
    BenchmarkKind(
        name="kaleidoscope",
        protocol="exam_choice",
        metric="kaleidoscope",
        breakdown_by=("language", "modality", "image_type", "category_en", "general_category_en"),
        description="Kaleidoscope: in-language exam questions in 18 languages, with and without an image (20,911, multiple choice).",
        templates=(),
        expected_count=20911,
        raw_files=(FILE_PATTERN, ARCHIVE),
        write_fixture=write_fixture,
        adapt=adapt,
        fixture_defaults={"seed": 0, "size": 4, "corrupt": 0},
        # The headline reads the prompt mode's answers as the authors' code does (exam_json / exam_tag, by the
        # predictions' variant); the lenient readers accept more ways of writing a letter.
        lenient_parsers={"json": "exam_json_lenient", "tag": "exam_tag_lenient"},
        # unpinned: "main" until a commit of CohereLabs/kaleidoscope is confirmed; pin `revision` in the config.
        hub={"repo": "CohereLabs/kaleidoscope", "revision": "main", "split": "train"},
    )
)
