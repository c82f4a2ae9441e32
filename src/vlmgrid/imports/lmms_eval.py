"""`lmms-eval-samples`: the samples lmms-eval logs with `--log_samples` (EvolvingLMMs-Lab/lmms-eval), as
releases 0.1 to 0.7 write them.

Layout: one JSON-lines file per task, `<output_path>/<model>/<date>_samples_<task>.jsonl`, one object per
document, the sample lmms_eval/evaluator.py builds as `lmms_eval/loggers/evaluation_tracker.py`
`save_results_samples` writes it (`json.dumps(..., ensure_ascii=False)`, since e20d5d6b, v0.2.4); before it
(v0.1.0 to v0.2.3.post1) `lmms_eval/__main__.py` wrote `<output_path>/<task>.json`, `{"args", "model_configs"
(whose "task" names the task), "logs": [the samples by doc_id], "time"}`, `indent=4`. What each release's
sample holds (the keys read here in every one: `doc_id`, `target`, `filtered_resps`, and the prompt as
`input`, or as `arguments` in a `<task>.json`):

- v0.1.0 to v0.2.3.post1 (`<task>.json`): doc_id, target, doc, arguments (v0.2.0: `[[prompt, doc_id, task,
  split]]`), resps, filtered_resps (`[text]`), then one key per value the task's `process_results` returned.
- v0.2.4 to v0.3.5 (e20d5d6b): doc_id, doc (without its image keys), target (as text), arguments (the
  generation kwargs' names, numbered), resps, filtered_resps (`[text]`), doc_hash, prompt_hash, target_hash,
  the values, input (the prompt).
- v0.4 to v0.6.1 (b7b4b1d9): doc, arguments and the prompt and target hashes gone, resps dropped when it says
  what filtered_resps says: doc_id, target, filtered_resps (`[text]`), doc_hash, the values, input.
- v0.7 on (d8fcb9c3): a single request's filtered_resps is written bare (the text), token_counts after it:
  doc_id, target, filtered_resps, token_counts, doc_hash, the values, input.

FILE is one such file or a folder of them (a run's folder: the samples of the tasks that answer the
benchmark's kind are read, the others skipped), so that the three POPE tasks of one run are imported together.

The lines never name the task, so the file name (or the config) does; each task is matched by the ids its
`process_results` keeps (`lmms_eval/tasks/<task>/utils.py`), read under the keys of `TASKS` (a key that moved
has each of its names, with the releases that write it), and its gold is checked against the record's:

- `mme` (lmms-lab/MME, test): `mme_perception_score` (v0.3.0 on; bb3fd82 fixed the spelling) or
  `mme_percetion_score` (v0.1.0 to v0.2.4), or `mme_cognition_score`: `question_id` is the image's path,
  shared by its two questions: the answer is the record of that image whose question (without "Please answer
  yes or no.") is in the prompt; gold `target` ("Yes"/"No").
- `pope_adv`, `pope_pop`, `pope_random` (lmms-lab/POPE, config Full, splits adversarial, popular, random;
  v0.2.0 on): `pope_accuracy` `question_id`, i.e. our "<split>-<question_id>"; gold `ground_truth`.
- `pope` (lmms-lab/POPE's default test split, the three splits in one): `pope_accuracy` `question_id` restarts
  in each split, so it is read only when the benchmark's records have no question_id twice, and refused
  otherwise.
- `textvqa_val` (lmms-lab/textvqa, validation): `submission` `question_id`, our id. `target` is no gold here
  (the task's doc_to_target names a column TextVQA does not have).
- `scienceqa_img` (lmms-lab/ScienceQA, ScienceQA-IMG, test): only `doc_id`, the row of the test split, i.e.
  our "test-<row>"; the prompt must hold the record's question and `target` be its letter, which tells a file
  of another copy or order.
- `mmbench_en_dev`, `mmbench_en_dev_static` (lmms-lab/MMBench, en, dev; the group `mmbench_en` writes the
  former's file; the static one since d0c1eae, v0.7.2): `submission` `index`, our id (circular copies
  included); its `answer` letter and options A-E must be the record's.
- `cv_bench`, or `cv_bench_2d` and `cv_bench_3d` together (nyu-visionx/CV-Bench, test; fcd18a7, v0.6 on):
  `cv_bench_acc` `type` and `id` (the row's idx), our "<type>-<idx>"; gold `gt_content`.
- `mmvp` (3446555, v0.6 on): `mmvp_accuracy` (or `mmvp_pair_accuracy`, the same object) `index`, MMVP's Index
  made 0-based, i.e. our id minus one; gold `gt`. v0.6 read MMVP/MMVP and corrected two labels in
  process_results; v0.7 (d8fcb9c3) reads lmms-lab-eval/MMVP, which corrects four, as the records do: for those
  four either letter is taken as the gold.

None of these keys moved between the releases but MME's perception key. A sample without the task's key under
any of its names, or without `doc_id` or `filtered_resps`, is refused naming the file, the key and the
releases read here.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import unreadable
from vlmgrid.imports.base import (
    Answer,
    Importer,
    Verdict,
    check_questions,
    first_json_object,
    read_json_lines,
    squeeze,
    too_deep,
)
from vlmgrid.imports.llava import mme_question
from vlmgrid.imports.reading import DENIED, files_in

log = logging.getLogger(__name__)

SAMPLES_FILE = re.compile(r"(?:^|_)samples_(?P<task>.+)\.jsonl$")
REQUIRED = ("doc_id", "filtered_resps")  # every release writes both
LETTERS = "ABCDE"
RELEASES = "lmms-eval 0.1 to 0.7"
WHAT = f"a samples file logged by {RELEASES} (an object with doc_id and filtered_resps a line)"


@dataclass(frozen=True)
class Key:
    """A key under which a task's process_results writes a sample's value, and the releases that write it."""

    name: str
    releases: str


EVERY = "every release"
# The keys each task's values are read under, in the order they are tried: a key that moved has one entry per
# name, each with the releases that write it (lmms_eval/tasks/<task>/utils.py at the commit named).
MME_KEYS = (
    Key("mme_perception_score", "lmms-eval >= 0.3, since bb3fd82"),
    Key("mme_percetion_score", "lmms-eval 0.1 to 0.2, before bb3fd82"),
    Key("mme_cognition_score", EVERY),
)
POPE_KEYS = (Key("pope_accuracy", EVERY),)
SUBMISSION_KEYS = (Key("submission", EVERY),)
CV_BENCH_KEYS = (Key("cv_bench_acc", "lmms-eval >= 0.6, since fcd18a7"),)
MMVP_KEYS = (
    Key("mmvp_accuracy", "lmms-eval >= 0.6, since 3446555"),
    Key("mmvp_pair_accuracy", "lmms-eval >= 0.6, since 3446555"),
)


@dataclass(frozen=True)
class Reading:
    """Where a task's samples keep lmms-eval's own verdict on the answer (its `process_results` value): the
    field `hit` (1 or 0) of the task's value, or with `top` the sample's own key of that name, and the field
    `read` holding the answer as the task read it (None: none is kept)."""

    hit: str
    read: str | None = None
    top: bool = False


@dataclass(frozen=True)
class Sample:
    """One logged document: the file it is in, where (for messages) and its object."""

    file: Path
    where: str
    item: dict[str, Any]
    task: str


@dataclass(frozen=True)
class Task:
    """An lmms-eval task whose samples name the items of one benchmark kind, how they are matched (`match` is
    given the samples, the records and `result`, which reads a sample's value under the task's `keys`)."""

    name: str
    kind: str
    match: Callable[[list[Sample], pd.DataFrame, Callable[[Sample], dict]], list[Answer]]
    keys: tuple[Key, ...] = ()
    reading: Reading | None = None  # where its samples keep lmms-eval's verdict (None: its values hold none)

    def result(self, sample: Sample) -> dict:
        return value(sample, *self.keys)

    def verdict(self, sample: Sample) -> Verdict | str | None:
        """lmms-eval's verdict on the sample, read from the value its process_results stored (never
        recomputed); None for a task whose values hold no verdict, a sentence when this sample's value holds
        none."""
        if self.reading is None:
            return None
        if self.reading.top:
            holder, under = sample.item, ""
        else:
            holder = self.result(sample)
            under = (
                " under "
                f"`{next(key.name for key in self.keys if isinstance(sample.item.get(key.name), dict))}`"
            )
        hit = holder.get(self.reading.hit)
        if not isinstance(hit, (int, float)) or hit not in (0, 1):
            return (
                f"{sample.where} has no `{self.reading.hit}` of 1.0 or 0.0{under}, so lmms-eval's own "
                "reading is not kept"
            )
        read = holder.get(self.reading.read) if self.reading.read else None
        return Verdict(int(hit), False, read if isinstance(read, str) else None, str(sample.file))


# ---------------------------------------------------------------------------------------------- reading


def _check(file: Path, where: str, item: Any) -> dict:
    if not isinstance(item, dict):
        raise VlmgridError(
            f"{file} {where} is not an object: the file is not {WHAT} (give the right --format)"
        )
    missing = [key for key in REQUIRED if key not in item]
    if missing:
        raise VlmgridError(
            f"{file} {where} has no `{missing[0]}`: the file is not {WHAT} (give the right --format)"
        )
    return item


def _json(file: Path) -> Any:
    """The file's JSON document, None where it is not UTF-8 JSON; a file that cannot be read, or nests its
    JSON too deeply to parse, is refused naming it."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise unreadable(file, error, DENIED) from None
    except RecursionError:
        raise too_deep(file) from None
    except ValueError:
        return None


def task_name(file: Path) -> str:
    """The task a samples file holds: `<date>_samples_<task>.jsonl` names it, an older `<task>.json` says it
    in its config."""
    name = SAMPLES_FILE.search(file.name)
    if name:
        return name.group("task")
    data = _json(file) if file.suffix == ".json" else None
    if not isinstance(data, dict) or not isinstance(data.get("logs"), list):
        raise VlmgridError(
            f"{file} is neither lmms-eval's `<date>_samples_<task>.jsonl` (0.2.4 to 0.7; the name says the "
            "task: keep it) nor an older `<task>.json` with a "
            "`logs` list (0.1 to 0.2.3); give the right --format"
        )
    config = data.get("model_configs", data.get("config"))
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(task, str):
        raise VlmgridError(
            f"{file} has no `model_configs` with the task's name (`task`), so its samples cannot be "
            f"matched; it is not a samples file of lmms-eval"
        )
    return task


def read_samples(file: Path, task: str | None = None) -> list[Sample]:
    """The samples of one samples file of `task` (by default the one its name or config says)."""
    task = task_name(file) if task is None else task
    if not SAMPLES_FILE.search(file.name):
        logs = _json(file)["logs"]
        items = [_check(file, f"logs[{i}]", item) for i, item in enumerate(logs)]
        return [
            Sample(file, f"{file.name} logs[{i}] (doc_id {item['doc_id']})", item, task)
            for i, item in enumerate(items)
        ]
    lines = read_json_lines(file, REQUIRED, WHAT)
    return [Sample(file, f"{file.name} line {n} (doc_id {item['doc_id']})", item, task) for n, item in lines]


def _is_samples_file(path: Path) -> bool:
    if SAMPLES_FILE.search(path.name):
        return True
    if path.suffix != ".json":
        return False
    data = _json(path)
    return isinstance(data, dict) and isinstance(data.get("logs"), list)


def looks_like(path: Path) -> bool:
    if path.is_dir():
        return any(SAMPLES_FILE.search(p.name) for p in files_in(path))
    if not path.is_file():
        return False
    if path.suffix == ".json":
        return _is_samples_file(path)
    item = first_json_object(path)
    return item is not None and all(key in item for key in REQUIRED)


def response(sample: Sample) -> str:
    """The answer lmms-eval scored: `filtered_resps`, a list of one text per request (or, in later versions,
    the text itself when there is one)."""
    value = sample.item["filtered_resps"]
    while isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, str):
        raise VlmgridError(f"{sample.file} {sample.where} has no answer text in filtered_resps ({value!r})")
    return value


def prompt(sample: Sample) -> str | None:
    """The prompt's text, squeezed: `input`, or the first text of `arguments` in older files (None: none)."""
    value = sample.item.get("input", sample.item.get("arguments"))
    while isinstance(value, list) and value:
        value = value[0]
    return squeeze(value) if isinstance(value, str) else None


def value(sample: Sample, *keys: Key) -> dict:
    """What the task's process_results returned for the sample, under the first of `keys` it holds; a sample
    with none of them is of no release read here, or of another task."""
    for key in keys:
        if isinstance(sample.item.get(key.name), dict):
            return sample.item[key.name]
    lacks = " nor ".join(f"`{key.name}` ({key.releases})" for key in keys)
    raise VlmgridError(
        f"{sample.file} {sample.where} has no {lacks} object: it is not the samples of the task "
        f"{sample.task} its name says; vlmgrid reads {RELEASES}, whose "
        f"process_results write these keys"
    )


def _other_version(
    sample: Sample, what: str, theirs: Any, record_id: str, ours: Any, bench: str
) -> VlmgridError:
    return VlmgridError(
        f"{sample.file} {sample.where} gives {what} {theirs!r}, but item {record_id} has {ours!r}: the "
        f"samples were made from another {bench} copy; import them into that one"
    )


# ---------------------------------------------------------------------------------------------- per task


def _check_gold_letter(
    sample: Sample,
    logged: Mapping,
    key: str,
    record_id: str,
    record: pd.Series,
    bench: str,
    either: bool = False,
) -> None:
    """Refuses a sample whose gold letter (`logged[key]`) is not the record's: it was made on another version
    (`either`: any letter is taken for a record whose label the benchmark corrects)."""
    letter = LETTERS[int(record["answer_index"])]
    if either and bool(record.get("label_corrected", False)):
        return
    if str(logged.get(key, "")).strip() != letter:
        raise _other_version(sample, "the gold letter", logged.get(key), record_id, letter, bench)


def _mme(samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]) -> list[Answer]:
    by_image = defaultdict(list)  # image path -> its records' (id, question, answer)
    for _, r in records.iterrows():
        by_image[str(r["image_id"])].append((str(r["id"]), mme_question(r["question"]), str(r["answer"])))
    answers, asked_at = [], []
    for sample in samples:
        image = str(result(sample).get("question_id"))
        asked = prompt(sample)
        if asked is None:
            raise VlmgridError(
                f"{sample.file} {sample.where} has no prompt (`input`, or `arguments` in a "
                f"`<task>.json`), which alone tells the two questions of MME's image {image} apart "
                f"and which {RELEASES} all write"
            )
        found = [r for r in by_image.get(image, []) if r[1] in asked]
        record_id = found[0][0] if len(found) == 1 else None
        if record_id is not None and str(sample.item.get("target", "")).strip().lower() != found[0][2]:
            raise _other_version(
                sample, "the gold answer", sample.item.get("target"), record_id, found[0][2], "MME"
            )
        answers.append(Answer(record_id, response(sample), sample.where))
        asked_at.append(((image,), mme_question(asked)))
    if samples:
        at_image = {
            (image,): [(record_id, question) for record_id, question, _ in found]
            for image, found in by_image.items()
        }
        check_questions(samples[0].file, answers, asked_at, at_image, "image")
    return answers


def _pope_gold(
    sample: Sample, record_id: str, gold: dict[str, str], result: Callable[[Sample], dict]
) -> None:
    truth = str(result(sample).get("ground_truth", "")).strip().lower()
    if truth != gold[record_id]:
        raise _other_version(sample, "the gold answer", truth, record_id, gold[record_id], "POPE")


def _pope_split(
    split: str, samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]
) -> list[Answer]:
    gold = dict(zip(records["id"].astype(str), records["answer"].astype(str)))
    answers = []
    for sample in samples:
        record_id = f"{split}-{result(sample).get('question_id')}"
        if record_id in gold:
            _pope_gold(sample, record_id, gold, result)
        answers.append(Answer(record_id if record_id in gold else None, response(sample), sample.where))
    return answers


def _pope_any_split(
    samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]
) -> list[Answer]:
    if not samples:
        return []
    question_ids = records["question_id"].astype(str)
    shared = question_ids[question_ids.duplicated()]
    if len(shared):
        raise VlmgridError(
            f"{samples[0].file} holds lmms-eval's pope task, whose question_id restarts in each of POPE's "
            f"splits (question_id {shared.iloc[0]} names {int((question_ids == shared.iloc[0]).sum())} items "
            "of this benchmark), so its answers name no single item; run the tasks pope_adv, pope_pop and "
            "pope_random and import the folder of their samples"
        )
    id_of = dict(zip(question_ids, records["id"].astype(str)))
    gold = dict(zip(records["id"].astype(str), records["answer"].astype(str)))
    answers = []
    for sample in samples:
        record_id = id_of.get(str(result(sample).get("question_id")))
        if record_id is not None:
            _pope_gold(sample, record_id, gold, result)
        answers.append(Answer(record_id, response(sample), sample.where))
    return answers


def _textvqa(samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]) -> list[Answer]:
    ids = set(records["id"].astype(str))
    answers = []
    for sample in samples:
        record_id = str(result(sample).get("question_id"))
        answers.append(Answer(record_id if record_id in ids else None, response(sample), sample.where))
    return answers


def _scienceqa(
    samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]
) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        record_id = f"test-{sample.item['doc_id']}"
        record = by_id.get(record_id)
        if record is not None:
            asked = prompt(sample)
            if asked is not None and squeeze(record["question"]) not in asked:
                raise _other_version(
                    sample,
                    "a prompt without the question",
                    asked,
                    record_id,
                    squeeze(record["question"]),
                    "ScienceQA-IMG",
                )
            _check_gold_letter(sample, sample.item, "target", record_id, record, "ScienceQA-IMG")
        answers.append(Answer(record_id if record is not None else None, response(sample), sample.where))
    return answers


def _given(option: Any) -> bool:
    """Whether an option of MMBench's row is given: the hub copy spells a missing one None or "nan"."""
    return isinstance(option, str) and option.strip().lower() not in ("", "nan")


def _mmbench(samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        submission = result(sample)
        record_id = str(submission.get("index"))
        record = by_id.get(record_id)
        if record is not None:
            options = [str(o) for o in record["options"]]
            shown = [submission[c] for c in LETTERS if _given(submission.get(c))]
            if any(c in submission for c in LETTERS) and shown != options:
                raise _other_version(sample, "the options", shown, record_id, options, "MMBench")
            _check_gold_letter(sample, submission, "answer", record_id, record, "MMBench")
        answers.append(Answer(record_id if record is not None else None, response(sample), sample.where))
    return answers


def _match_by_result(
    samples: list[Sample],
    records: pd.DataFrame,
    result: Callable[[Sample], dict],
    record_id_of: Callable[[dict], str | None],
    gold_key: str,
    bench: str,
    either: bool = False,
) -> list[Answer]:
    """Answers matched by the task's logged value (`result`): record_id_of(value) names the item, and the
    value's `gold_key` must be its gold letter (`either`: see _check_gold_letter)."""
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        logged = result(sample)
        record_id = record_id_of(logged)
        record = by_id.get(record_id)
        if record is not None:
            _check_gold_letter(sample, logged, gold_key, record_id, record, bench, either)
        answers.append(Answer(record_id if record is not None else None, response(sample), sample.where))
    return answers


def _cvbench(samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]) -> list[Answer]:
    return _match_by_result(
        samples,
        records,
        result,
        lambda result: f"{result.get('type')}-{result.get('id')}",
        "gt_content",
        "CV-Bench",
    )


def _mmvp_id(result: dict) -> str | None:
    index = result.get("index")
    return str(index + 1) if isinstance(index, int) else None  # process_results makes Index 0-based


def _mmvp(samples: list[Sample], records: pd.DataFrame, result: Callable[[Sample], dict]) -> list[Answer]:
    """v0.6's process_results corrected two labels (0-based 99 and 279 to A, on MMVP/MMVP), v0.7's copy
    lmms-lab-eval/MMVP corrects four, as the records do: a label the records correct is taken in either
    letter, so a sample of either release imports."""
    return _match_by_result(
        samples, records, result, _mmvp_id, "gt", "MMVP (with its label corrections)", either=True
    )


# Where each task's values keep lmms-eval's verdict (lmms_eval/tasks/<task>/utils.py, every release 0.1 to
# 0.7): MME's `score` (parse_pred_ans of the answer is the gold), POPE's `score` (the answer lower-cased and
# stripped is the gold) with that text as `prediction`, ScienceQA's `exact_match` (sqa_process_results).
MME_READING = Reading("score")
POPE_READING = Reading("score", "prediction")
SCIENCEQA_READING = Reading("exact_match", top=True)

TASKS = {
    task.name: task
    for task in [
        Task("mme", "mme", _mme, MME_KEYS, MME_READING),
        Task("pope", "pope", _pope_any_split, POPE_KEYS, POPE_READING),
        Task("pope_adv", "pope", partial(_pope_split, "adversarial"), POPE_KEYS, POPE_READING),
        Task("pope_pop", "pope", partial(_pope_split, "popular"), POPE_KEYS, POPE_READING),
        Task("pope_random", "pope", partial(_pope_split, "random"), POPE_KEYS, POPE_READING),
        Task("textvqa_val", "textvqa", _textvqa, SUBMISSION_KEYS),
        Task("scienceqa_img", "scienceqa_img", _scienceqa, reading=SCIENCEQA_READING),
        Task("mmbench_en_dev", "mmbench", _mmbench, SUBMISSION_KEYS),
        Task("mmbench_en_dev_static", "mmbench", _mmbench, SUBMISSION_KEYS),
        Task("cv_bench", "cvbench", _cvbench, CV_BENCH_KEYS),
        Task("cv_bench_2d", "cvbench", _cvbench, CV_BENCH_KEYS),
        Task("cv_bench_3d", "cvbench", _cvbench, CV_BENCH_KEYS),
        Task("mmvp", "mmvp", _mmvp, MMVP_KEYS),
    ]
}


# ---------------------------------------------------------------------------------------------- the format


def _tasks_for(kind: str) -> str:
    return ", ".join(name for name, task in TASKS.items() if task.kind == kind)


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    if path.is_dir():
        files = [p for p in files_in(path) if _is_samples_file(p)]
    else:
        files = [path]
    found: list[str] = []
    answers: list[Answer] = []
    verdicts: list[Verdict | str | None] = []
    for file in files:
        name = task_name(file)
        found.append(name)
        task = TASKS.get(name)
        if task is not None and task.kind == kind:
            samples = read_samples(file, name)
            matched = task.match(samples, records, task.result)  # one answer per sample, in their order
            verdicts.extend(task.verdict(sample) for sample in samples)
            answers.extend(matched)
        elif path.is_dir():
            log.info(f"{file}: skipped, the samples of lmms-eval task {name} do not answer {kind} benchmarks")
        elif task is None:
            raise VlmgridError(
                f"{file} holds the samples of lmms-eval task {name}, whose documents cannot be matched to "
                f"items; the tasks read are {', '.join(TASKS)}"
            )
        else:
            raise VlmgridError(
                f"{file} holds the samples of lmms-eval task {name}, which answer {task.kind} benchmarks, "
                f"not {kind} ones (the tasks read for {kind} are "
                f"{_tasks_for(kind)}); import it into a {task.kind} benchmark"
            )
    if not answers and path.is_dir():
        raise VlmgridError(
            f"{path} holds no samples of an lmms-eval task for {kind} benchmarks (it holds "
            f"{', '.join(found) or 'no samples files'}); the tasks read for {kind} are {_tasks_for(kind)}"
        )
    return _with_verdicts(path, answers, verdicts)


def _with_verdicts(path: Path, answers: list[Answer], verdicts: list[Verdict | str | None]) -> list[Answer]:
    """The answers with lmms-eval's verdicts, when every sample's value holds one; else as they are, and a log
    line says why (a task whose values hold none, or the first sample without one)."""
    missing = next((v for v in verdicts if not isinstance(v, Verdict)), None)
    if missing is None and answers:
        return [replace(answer, verdict=v) for answer, v in zip(answers, verdicts)]
    if isinstance(missing, str):
        log.info(f"{path}: {missing} (the answers are imported all the same)")
    return answers


IMPORTER = Importer(
    "lmms-eval-samples",
    "the samples lmms-eval logs with --log_samples (<date>_samples_<task>.jsonl, or a folder of them)",
    tuple(dict.fromkeys(task.kind for task in TASKS.values())),
    looks_like,
    read,
    tool="lmms-eval",
)
