"""`lmms-eval-samples`: the samples lmms-eval logs with `--log_samples` (EvolvingLMMs-Lab/lmms-eval).

Layout (`lmms_eval/loggers/evaluation_tracker.py`, `save_results_samples`): one JSON-lines file per task,
`<output_path>/<model>/<date>_samples_<task>.jsonl`, one object per document: `doc_id` (the document's
position in the task's split), `target` (the task's gold, as text), `filtered_resps` (the answer the task
scored, which `--log_samples` keeps; `resps` is dropped when it says the same), hashes, `input` (the prompt),
and one key per value the task's `process_results` returned. The document itself is not written. Older
versions wrote `<task>.json` instead: `{"args", "model_configs" (or "config", whose "task" names the task),
"logs": [the same objects]}`. FILE is one such file or a folder of them (a run's folder: the samples of the
tasks that answer the benchmark's kind are read, the others skipped), so that the three POPE tasks of one run
are imported together.

The lines never name the task, so the file name (or the config) does; each task is matched by the ids its
`process_results` keeps (`lmms_eval/tasks/<task>/utils.py`), and its gold is checked against the record's:

- `mme` (lmms-lab/MME, test): `mme_percetion_score` / `mme_cognition_score` `question_id` is the image's path,
  shared by its two questions: the answer is the record of that image whose question (without "Please answer
  yes or no.") is in the prompt; gold `target` ("Yes"/"No").
- `pope_adv`, `pope_pop`, `pope_random` (lmms-lab/POPE, config Full, splits adversarial, popular, random):
  `pope_accuracy` `question_id`, i.e. our "<split>-<question_id>"; gold `ground_truth`.
- `pope` (lmms-lab/POPE's default test split, the three splits in one): `pope_accuracy` `question_id` restarts
  in each split, so it is read only when the benchmark's records have no question_id twice, and refused
  otherwise.
- `textvqa_val` (lmms-lab/textvqa, validation): `submission` `question_id`, our id. `target` is no gold here
  (the task's doc_to_target names a column TextVQA does not have).
- `scienceqa_img` (lmms-lab/ScienceQA, ScienceQA-IMG, test): only `doc_id`, the row of the test split, i.e.
  our "test-<row>"; the prompt must hold the record's question and `target` be its letter, which tells a file
  of another copy or order.
- `mmbench_en_dev`, `mmbench_en_dev_static` (lmms-lab/MMBench, en, dev; the group `mmbench_en` writes the
  former's file): `submission` `index`, our id (circular copies included); its `answer` letter and options A-E
  must be the record's.
- `cv_bench`, or `cv_bench_2d` and `cv_bench_3d` together (nyu-visionx/CV-Bench, test): `cv_bench_acc` `type`
  and `id` (the row's idx), our "<type>-<idx>"; gold `gt_content`.
- `mmvp` (lmms-lab-eval/MMVP, the label corrections applied): `mmvp_accuracy` `index`, MMVP's Index made
  0-based, i.e. our id minus one; gold `gt`.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.imports.base import Answer, Importer, check_questions, first_json_object, read_json_lines, squeeze
from vlmgrid.imports.llava import mme_question

log = logging.getLogger(__name__)

SAMPLES_FILE = re.compile(r"(?:^|_)samples_(?P<task>.+)\.jsonl$")
REQUIRED = ("doc_id", "filtered_resps")
LETTERS = "ABCDE"


@dataclass(frozen=True)
class Sample:
    """One logged document: the file it is in, where (for messages) and its object."""

    file: Path
    where: str
    item: dict[str, Any]


@dataclass(frozen=True)
class Task:
    """An lmms-eval task whose samples name the items of one benchmark kind, and how they are matched."""

    name: str
    kind: str
    match: Callable[[list[Sample], pd.DataFrame], list[Answer]]


# ---------------------------------------------------------------------------------------------- reading

def _check(file: Path, where: str, item: Any) -> dict:
    if not isinstance(item, dict) or any(key not in item for key in REQUIRED):
        raise VlmgridError(
            f"{file} {where} is not a sample logged by lmms-eval (an object with doc_id and filtered_resps); "
            f"give the right --format"
        )
    return item


def _json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
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
            f"{file} is neither lmms-eval's `<date>_samples_<task>.jsonl` (the name says the task: keep it) nor an "
            f"older `<task>.json` with a `logs` list; give the right --format"
        )
    config = data.get("model_configs", data.get("config"))
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(task, str):
        raise VlmgridError(f"{file} has no `model_configs` with the task's name (`task`), so its samples cannot be "
                           f"matched; it is not a samples file of lmms-eval")
    return task


def read_samples(file: Path) -> list[Sample]:
    """The samples of one samples file (`task_name` has checked its kind)."""
    if not SAMPLES_FILE.search(file.name):
        logs = _json(file)["logs"]
        items = [_check(file, f"logs[{i}]", item) for i, item in enumerate(logs)]
        return [Sample(file, f"{file.name} logs[{i}] (doc_id {item['doc_id']})", item) for i, item in enumerate(items)]
    lines = read_json_lines(file, REQUIRED, "a samples file logged by lmms-eval (an object with doc_id and "
                                           "filtered_resps a line)")
    return [Sample(file, f"{file.name} line {n} (doc_id {item['doc_id']})", item) for n, item in lines]


def _is_samples_file(path: Path) -> bool:
    if SAMPLES_FILE.search(path.name):
        return True
    if path.suffix != ".json":
        return False
    data = _json(path)
    return isinstance(data, dict) and isinstance(data.get("logs"), list)


def looks_like(path: Path) -> bool:
    if path.is_dir():
        return any(p.is_file() and SAMPLES_FILE.search(p.name) for p in path.iterdir())
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


def value(sample: Sample, *keys: str) -> dict:
    """The first of `keys` that the sample holds: what the task's process_results returned for it."""
    for key in keys:
        if isinstance(sample.item.get(key), dict):
            return sample.item[key]
    raise VlmgridError(f"{sample.file} {sample.where} has no `{keys[0]}` object, which the task's process_results "
                       f"writes: the file is not the samples of the task its name says")


def _other_version(sample: Sample, what: str, theirs: Any, record_id: str, ours: Any, bench: str) -> VlmgridError:
    return VlmgridError(
        f"{sample.file} {sample.where} gives {what} {theirs!r}, but item {record_id} has {ours!r}: the samples were "
        f"made from another {bench} copy; import them into that one"
    )


# ---------------------------------------------------------------------------------------------- per task

def _check_gold_letter(sample: Sample, logged: Mapping, key: str, record_id: str, record: pd.Series,
                       bench: str) -> None:
    """Refuses a sample whose gold letter (`logged[key]`) is not the record's: it was made on another version."""
    letter = LETTERS[int(record["answer_index"])]
    if str(logged.get(key, "")).strip() != letter:
        raise _other_version(sample, "the gold letter", logged.get(key), record_id, letter, bench)


def _mme(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    by_image = defaultdict(list)  # image path -> its records' (id, question, answer)
    for _, r in records.iterrows():
        by_image[str(r["image_id"])].append((str(r["id"]), mme_question(r["question"]), str(r["answer"])))
    answers, asked_at = [], []
    for sample in samples:
        image = str(value(sample, "mme_percetion_score", "mme_cognition_score").get("question_id"))
        asked = prompt(sample)
        if asked is None:
            raise VlmgridError(f"{sample.file} {sample.where} has no prompt (`input`), which alone tells the two "
                               f"questions of MME's image {image} apart")
        found = [r for r in by_image.get(image, []) if r[1] in asked]
        record_id = found[0][0] if len(found) == 1 else None
        if record_id is not None and str(sample.item.get("target", "")).strip().lower() != found[0][2]:
            raise _other_version(sample, "the gold answer", sample.item.get("target"), record_id, found[0][2], "MME")
        answers.append(Answer(record_id, response(sample), sample.where))
        asked_at.append(((image,), mme_question(asked)))
    if samples:
        at_image = {(image,): [(record_id, question) for record_id, question, _ in found]
                    for image, found in by_image.items()}
        check_questions(samples[0].file, answers, asked_at, at_image, "image")
    return answers


def _pope_gold(sample: Sample, record_id: str, gold: dict[str, str]) -> None:
    truth = str(value(sample, "pope_accuracy").get("ground_truth", "")).strip().lower()
    if truth != gold[record_id]:
        raise _other_version(sample, "the gold answer", truth, record_id, gold[record_id], "POPE")


def _pope_split(split: str, samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    gold = dict(zip(records["id"].astype(str), records["answer"].astype(str)))
    answers = []
    for sample in samples:
        record_id = f"{split}-{value(sample, 'pope_accuracy').get('question_id')}"
        if record_id in gold:
            _pope_gold(sample, record_id, gold)
        answers.append(Answer(record_id if record_id in gold else None, response(sample), sample.where))
    return answers


def _pope_any_split(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    if not samples:
        return []
    question_ids = records["question_id"].astype(str)
    shared = question_ids[question_ids.duplicated()]
    if len(shared):
        raise VlmgridError(
            f"{samples[0].file} holds lmms-eval's pope task, whose question_id restarts in each of POPE's splits "
            f"(question_id {shared.iloc[0]} names {int((question_ids == shared.iloc[0]).sum())} items of this "
            f"benchmark), so its answers name no single item; run the tasks pope_adv, pope_pop and pope_random "
            f"and import the folder of their samples"
        )
    id_of = dict(zip(question_ids, records["id"].astype(str)))
    gold = dict(zip(records["id"].astype(str), records["answer"].astype(str)))
    answers = []
    for sample in samples:
        record_id = id_of.get(str(value(sample, "pope_accuracy").get("question_id")))
        if record_id is not None:
            _pope_gold(sample, record_id, gold)
        answers.append(Answer(record_id, response(sample), sample.where))
    return answers


def _textvqa(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    ids = set(records["id"].astype(str))
    answers = []
    for sample in samples:
        record_id = str(value(sample, "submission").get("question_id"))
        answers.append(Answer(record_id if record_id in ids else None, response(sample), sample.where))
    return answers


def _scienceqa(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        record_id = f"test-{sample.item['doc_id']}"
        record = by_id.get(record_id)
        if record is not None:
            asked = prompt(sample)
            if asked is not None and squeeze(record["question"]) not in asked:
                raise _other_version(sample, "a prompt without the question", asked, record_id,
                                     squeeze(record["question"]), "ScienceQA-IMG")
            _check_gold_letter(sample, sample.item, "target", record_id, record, "ScienceQA-IMG")
        answers.append(Answer(record_id if record is not None else None, response(sample), sample.where))
    return answers


def _given(option: Any) -> bool:
    """Whether an option of MMBench's row is given: the hub copy spells a missing one None or "nan"."""
    return isinstance(option, str) and option.strip().lower() not in ("", "nan")


def _mmbench(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        submission = value(sample, "submission")
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


def _match_by_result(samples: list[Sample], records: pd.DataFrame, metric: tuple[str, ...],
                     record_id_of: Callable[[dict], str | None], gold_key: str, bench: str) -> list[Answer]:
    """Answers matched by the task's logged result (under one of the `metric` keys): record_id_of(result) names
    the item, and the result's `gold_key` must be its gold letter."""
    by_id = {str(r["id"]): r for _, r in records.iterrows()}
    answers = []
    for sample in samples:
        result = value(sample, *metric)
        record_id = record_id_of(result)
        record = by_id.get(record_id)
        if record is not None:
            _check_gold_letter(sample, result, gold_key, record_id, record, bench)
        answers.append(Answer(record_id if record is not None else None, response(sample), sample.where))
    return answers


def _cvbench(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    return _match_by_result(samples, records, ("cv_bench_acc",),
                            lambda result: f"{result.get('type')}-{result.get('id')}", "gt_content", "CV-Bench")


def _mmvp_id(result: dict) -> str | None:
    index = result.get("index")
    return str(index + 1) if isinstance(index, int) else None  # process_results makes Index 0-based


def _mmvp(samples: list[Sample], records: pd.DataFrame) -> list[Answer]:
    return _match_by_result(samples, records, ("mmvp_accuracy", "mmvp_pair_accuracy"), _mmvp_id, "gt",
                            "MMVP (with its label corrections)")


TASKS = {task.name: task for task in [
    Task("mme", "mme", _mme),
    Task("pope", "pope", _pope_any_split),
    Task("pope_adv", "pope", partial(_pope_split, "adversarial")),
    Task("pope_pop", "pope", partial(_pope_split, "popular")),
    Task("pope_random", "pope", partial(_pope_split, "random")),
    Task("textvqa_val", "textvqa", _textvqa),
    Task("scienceqa_img", "scienceqa_img", _scienceqa),
    Task("mmbench_en_dev", "mmbench", _mmbench),
    Task("mmbench_en_dev_static", "mmbench", _mmbench),
    Task("cv_bench", "cvbench", _cvbench),
    Task("cv_bench_2d", "cvbench", _cvbench),
    Task("cv_bench_3d", "cvbench", _cvbench),
    Task("mmvp", "mmvp", _mmvp),
]}


# ---------------------------------------------------------------------------------------------- the format

def _tasks_for(kind: str) -> str:
    return ", ".join(name for name, task in TASKS.items() if task.kind == kind)


def read(path: Path, records: pd.DataFrame, kind: str, questions: Path | None) -> list[Answer]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and _is_samples_file(p))
    else:
        files = [path]
    found: list[str] = []
    answers: list[Answer] = []
    for file in files:
        name = task_name(file)
        found.append(name)
        task = TASKS.get(name)
        if task is not None and task.kind == kind:
            answers.extend(task.match(read_samples(file), records))
        elif path.is_dir():
            log.info(f"{file}: skipped, the samples of lmms-eval task {name} do not answer {kind} benchmarks")
        elif task is None:
            raise VlmgridError(
                f"{file} holds the samples of lmms-eval task {name}, whose documents cannot be matched to items; "
                f"the tasks read are {', '.join(TASKS)}"
            )
        else:
            raise VlmgridError(
                f"{file} holds the samples of lmms-eval task {name}, which answer {task.kind} benchmarks, not {kind} "
                f"ones (the tasks read for {kind} are {_tasks_for(kind)}); import it into a {task.kind} benchmark"
            )
    if not answers and path.is_dir():
        raise VlmgridError(
            f"{path} holds no samples of an lmms-eval task for {kind} benchmarks (it holds "
            f"{', '.join(found) or 'no samples files'}); the tasks read for {kind} are {_tasks_for(kind)}"
        )
    return answers


IMPORTER = Importer(
    "lmms-eval-samples",
    "the samples lmms-eval logs with --log_samples (<date>_samples_<task>.jsonl, or a folder of them)",
    tuple(dict.fromkeys(task.kind for task in TASKS.values())), looks_like, read,
)
