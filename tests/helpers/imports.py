"""What the import tests share: a small grid, other harnesses' answer files written from a few rows, and
`vlmgrid import` run on them."""

import copy
import csv
import hashlib
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.common import DEFAULT_CONFIG, REPO
from vlmgrid.cli import main
from vlmgrid.config import load_config
from vlmgrid.predictions import SCHEMA
from vlmgrid.stages.prepare import prepare_benchmark

SIZES = {
    "pope-fixture": 2,
    "mme-fixture": 1,
    "textvqa-fixture": 3,
    "scienceqa-fixture": 6,
    "mmbench-fixture": 2,
}
MODEL_ID = "llava-v1.5-13b"
LLAVA_SHORT = "Answer the question using a single word or phrase."


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The default grid's config with the five benchmarks prepared small; (config path, {bench: records})."""
    return small_grid(tmp_path_factory.mktemp("imports"), SIZES)


def small_grid(root, sizes: dict[str, int]) -> tuple[str, dict[str, pd.DataFrame]]:
    """The default grid's config under root with the benchmarks of `sizes` prepared at those fixture sizes;
    (config path, {bench: records})."""
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["data_dir"], data["results_dir"] = str(root / "data"), str(root / "results")
    data["prompts_dir"] = str(REPO / "config" / "prompts")
    for name, size in sizes.items():
        data["benchmarks"][name] = copy.deepcopy(data["benchmarks"][name])
        data["benchmarks"][name]["source"]["size"] = size
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    records = {}
    for name in sizes:
        bench_dir = config.data_dir / name
        prepare_benchmark(name, config.benchmark(name), bench_dir)
        records[name] = pd.read_parquet(bench_dir / "records.parquet")
    return str(path), records


def llava_line(question_id, prompt, text, n, **extra) -> dict:
    """One line as llava/eval/model_vqa_loader.py writes it (MMBench's script adds its own keys)."""
    return {
        "question_id": question_id,
        "prompt": prompt,
        "text": text,
        "answer_id": f"ans{n:019d}",
        "model_id": MODEL_ID,
        "metadata": {},
        **extra,
    }


def write_jsonl(path, lines) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def run(config, *args) -> int:
    return main(["import-predictions", *args, "--config", config])


def refused(capsys, config, *args) -> str:
    assert run(config, *args) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith("vlmgrid: error: ")
    return message


def imported(path) -> pd.DataFrame:
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == SCHEMA
    return table.to_pandas()


def mmbench_answers(records, texts=None) -> list[dict]:
    """LLaVA-1.5's mmbench.sh (no --all-rounds): one round-0 line per row of the dev file, copies included."""
    lines = []
    for n, (_, r) in enumerate(records.iterrows()):
        options = list(r["options"])
        prompt = "\n".join([r["hint"], r["question"]] + [f"{'ABCD'[i]}. {o}" for i, o in enumerate(options)])
        lines.append(
            llava_line(
                int(r["id"]),
                prompt,
                texts[n] if texts else "ABCD"[r["answer_index"]],
                n,
                round_id=0,
                options=options,
                option_char=list("ABCD"[: len(options)]),
            )
        )
    return lines


def mme_answers(records, texts) -> list[dict]:
    """llava_mme.jsonl asks "<question>\\nAnswer the question using a single word or phrase." per image
    path."""
    return [
        llava_line(
            r["image_id"],
            r["question"].replace(" Please answer yes or no.", "") + "\n" + LLAVA_SHORT,
            text,
            n,
        )
        for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts))
    ]


def mme_tool_folder(folder, records, texts) -> str:
    """convert_answer_to_mme.py's output: <subtask>.txt, lines
    "<file>.txt<TAB>question<TAB>Yes/No<TAB>answer"."""
    folder.mkdir()
    by_subtask = {}
    for (_, r), text in zip(records.iterrows(), texts):
        name = r["image_id"].split("/")[-1].rsplit(".", 1)[0] + ".txt"
        line = "\t".join([name, r["question"], r["answer"].capitalize(), text])
        by_subtask.setdefault(r["category"], []).append(line)
    for subtask, lines in by_subtask.items():
        (folder / f"{subtask}.txt").write_text("\n".join(lines) + "\n")
    return str(folder)


def pope_files(tmp_path, records, texts) -> tuple[str, str]:
    """llava_pope_test.jsonl (ids numbered across the three splits) and the answers to it."""
    questions, answers = [], []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts), start=1):
        prompt = f"{r['question']}\n{LLAVA_SHORT}"
        questions.append(
            {"question_id": n, "image": f"{r['image_source']}.jpg", "text": prompt, "category": r["split"]}
        )
        answers.append(llava_line(n, prompt, text, n))
    return write_jsonl(tmp_path / "llava_pope_test.jsonl", questions), write_jsonl(
        tmp_path / "pope.jsonl", answers
    )


MODEL = "llava_v1.5_7b"  # VLMEvalKit's model names hold underscores too


LETTERS = "ABCDEF"
NAN = float("nan")


def options(r, width: int) -> dict:
    """Option columns A.. as the MCQ TSVs hold them: NaN where the question has fewer options."""
    return {LETTERS[i]: (r["options"][i] if i < len(r["options"]) else NAN) for i in range(width)}


def mmbench_rows(records) -> list[dict]:
    """MMBench_DEV_EN.tsv (Development.md, table 1): index (circular copies q + k * 1e6), question, hint
    (NaN when none), A-D, answer letter, category, l2-category, split."""
    return [
        {
            "index": int(r["id"]),
            "question": r["question"],
            "hint": r["hint"] or NAN,
            **options(r, 4),
            "answer": LETTERS[r["answer_index"]],
            "category": r["category"],
            "l2-category": r["l2_category"],
            "split": "dev",
        }
        for _, r in records.iterrows()
    ]


def mme_rows(records) -> list[dict]:
    """MME.tsv: index, question (with "Please answer yes or no."), answer Yes/No, category, image_path."""
    return [
        {
            "index": n,
            "question": r["question"],
            "answer": r["answer"].capitalize(),
            "category": r["category"],
            "image_path": r["image_id"],
        }
        for n, (_, r) in enumerate(records.iterrows())
    ]


def textvqa_rows(records) -> list[dict]:
    """TextVQA_VAL.tsv: index, question, answer (the ten human answers as a Python list's text)."""
    return [
        {"index": n, "question": r["question"], "answer": str(list(r["answers"]))}
        for n, (_, r) in enumerate(records.iterrows())
    ]


def dump(
    rows: list[dict],
    predictions: list[str],
    folder,
    dataset: str,
    fmt: str = "xlsx",
    before_63a279f1: bool = False,
) -> str:
    """`<model>_<dataset>.<fmt>` as vlmeval.smp.file.dump writes the inference job's table (`before_63a279f1`:
    as it wrote a workbook until 63a279f1, `to_excel(f, index=False, engine='xlsxwriter')`, whose default
    strings_to_formulas makes a text beginning with "=" a formula)."""
    data = pd.DataFrame(rows)
    data["prediction"] = [str(p) for p in predictions]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{MODEL}_{dataset}.{fmt}"
    if fmt == "xlsx" and before_63a279f1:
        data.to_excel(path, index=False, engine="xlsxwriter")
    elif fmt == "xlsx":
        with pd.ExcelWriter(
            path, engine="xlsxwriter", engine_kwargs={"options": {"strings_to_formulas": False}}
        ) as writer:
            data.to_excel(writer, index=False)
    elif fmt == "tsv":
        data.to_csv(path, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    else:
        json.dump(data.to_dict("records"), open(path, "w"), indent=4, ensure_ascii=False)
    return str(path)


def score_of(config, tmp_path, bench, predictions) -> dict:
    out = tmp_path / "score.json"
    assert (
        main(
            [
                "score",
                MODEL_ID,
                bench,
                "--predictions",
                str(predictions),
                "--out",
                str(out),
                "--config",
                config,
            ]
        )
        == 0
    )
    return json.loads(out.read_text())


def gold_text(rows) -> list[str]:
    return [row["answer"] for row in rows]


DATE = "20240615_093012"  # lmms_eval.utils.get_datetime_str: "%Y%m%d_%H%M%S"
SHORT = "\nAnswer the question using a single word or phrase."


MME_SUFFIX = " Please answer yes or no."
MME_COGNITION = ("commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")


def hash_string(text: str) -> str:
    """lmms_eval.utils.hash_string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# How each lmms-eval release writes one sample, the object its evaluator builds (lmms_eval/evaluator.py) as
# its logger then writes it; the first release of each layout names it (the layout holds until the next):
# - "0.2.0": `<task>.json`'s `logs` (lmms_eval/__main__.py before e20d5d6b; v0.1.0 to v0.2.3.post1; this is
#   v0.2.0's example, before v0.2.3 took the 0.2.4 keys): doc_id, target, doc, arguments (the request's text
#   arguments: [[prompt, doc_id, task, split]]), resps, filtered_resps, then process_results' values.
# - "0.2.4" and "0.3.0" (evaluation_tracker.save_results_samples since e20d5d6b; v0.2.4 to v0.3.5): doc_id,
#   doc (without its image keys), target (as text), arguments (the generation kwargs' names, numbered: the
#   logger enumerates arguments[1]), resps, filtered_resps, doc_hash, prompt_hash, target_hash, the values,
#   input. 0.3.0 differs only in MME's key (bb3fd82).
# - "0.4" (b7b4b1d9; v0.4 to v0.6.1): doc, arguments, prompt_hash and target_hash gone, resps dropped when it
#   says what filtered_resps says: doc_id, target, filtered_resps ([text]), doc_hash, the values, input.
# - "0.7" (d8fcb9c3; v0.7 on): one request's filtered_resps written bare, token_counts after it (None for each
#   request whose model reports none): doc_id, target, filtered_resps (text), token_counts, doc_hash, the
#   values, input.
RELEASES = ("0.2.0", "0.2.4", "0.3.0", "0.4", "0.7")
# The generation kwargs of a generate_until task as the request carries them (the YAML's, then `until`, which
# ConfigurableTask adds): MME's, POPE's and the others' here.
GEN_KWARGS = ("max_new_tokens", "temperature", "top_p", "num_beams", "do_sample", "until")
# The release's name for MME's perception key (bb3fd82, in v0.3.0, renamed it).
MME_PERCEPTION = {
    "0.2.0": "mme_percetion_score",
    "0.2.4": "mme_percetion_score",
    "0.3.0": "mme_perception_score",
    "0.4": "mme_perception_score",
    "0.7": "mme_perception_score",
}


def _json_logs_sample(doc_id, doc, target, prompt, response, metrics, task) -> dict:
    return {
        "doc_id": doc_id,
        "target": target,
        "doc": doc,
        "arguments": [[prompt, doc_id, task, "test"]],
        "resps": [[response]],
        "filtered_resps": [response],
        **metrics,
    }


def _tracker_sample(doc_id, doc, target, prompt, response, metrics, task) -> dict:
    saved = {key: value for key, value in doc.items() if "image" not in key}
    return {
        "doc_id": doc_id,
        "doc": saved,
        "target": str(target),
        "arguments": {str(n): name for n, name in enumerate(GEN_KWARGS)},
        "resps": [[response]],
        "filtered_resps": [response],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": hash_string(prompt),
        "target_hash": hash_string(str(target)),
        **metrics,
        "input": prompt,
    }


def _tracker_sample_04(doc_id, doc, target, prompt, response, metrics, task) -> dict:
    return {
        "doc_id": doc_id,
        "target": str(target),
        "filtered_resps": [response],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        **metrics,
        "input": prompt,
    }


def _tracker_sample_07(doc_id, doc, target, prompt, response, metrics, task) -> dict:
    return {
        "doc_id": doc_id,
        "target": str(target),
        "filtered_resps": response,
        "token_counts": [None],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        **metrics,
        "input": prompt,
    }


LAYOUTS = {
    "0.2.0": _json_logs_sample,
    "0.2.4": _tracker_sample,
    "0.3.0": _tracker_sample,
    "0.4": _tracker_sample_04,
    "0.7": _tracker_sample_07,
}


def logged(
    doc_id: int,
    doc: dict,
    target,
    prompt: str,
    response: str,
    metrics: dict,
    release: str = "0.4",
    task: str = "task",
) -> dict:
    """One sample as `release` writes it (`LAYOUTS`): the evaluator's doc_id, doc, target, arguments, resps,
    filtered_resps and hashes, then process_results' values, as that release's logger keeps them."""
    return LAYOUTS[release](doc_id, doc, target, prompt, response, metrics, task)


def write_logs_json(folder, task: str, lines: list[dict]) -> str:
    """`<output_path>/<task>.json` of lmms-eval before e20d5d6b (v0.2.0's __main__): args, model_configs (the
    task's config), logs sorted by doc_id and time, `indent=4, ensure_ascii=False`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task}.json"
    data = {
        "args": {"model": "llava", "tasks": task, "log_samples": True},
        "model_configs": {"task": task, "test_split": "test", "output_type": "generate_until"},
        "logs": sorted(lines, key=lambda line: line["doc_id"]),
        "time": DATE,
    }
    path.write_text(json.dumps(data, indent=4, ensure_ascii=False), encoding="utf-8")
    return str(path)


def write_samples(folder, task: str, lines: list[dict]) -> str:
    """`<output_path>/<model>/<date>_samples_<task>.jsonl`, one JSON object a line (ensure_ascii=False)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{DATE}_samples_{task}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def mme_samples(records, texts, release: str = "0.4") -> list[dict]:
    """lmms_eval/tasks/mme: the default post_prompt replaces " Please answer yes or no."; process_results keys
    the image path (question_id) under the release's perception key (`MME_PERCEPTION`: mme_percetion_score
    (sic) before bb3fd82) or mme_cognition_score, and scores it with parse_pred_ans."""
    lines = []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts)):
        doc = {
            "question_id": r["image_id"],
            "question": r["question"],
            "answer": r["answer"].capitalize(),
            "category": r["category"],
        }
        key = "mme_cognition_score" if r["category"] in MME_COGNITION else MME_PERCEPTION[release]
        score = 1.0 if parse_pred_ans(text) == r["answer"] else 0.0
        prompt = r["question"].strip().replace(MME_SUFFIX, "") + SHORT
        lines.append(
            logged(
                n,
                doc,
                doc["answer"],
                prompt,
                text,
                {key: {"question_id": r["image_id"], "category": r["category"], "score": score}},
                release,
                "mme",
            )
        )
    return lines


def parse_pred_ans(text: str) -> str:
    """lmms_eval/tasks/mme/utils.py parse_pred_ans (the same in every release): lower-cased, stripped and
    without dots, "yes"/"no" as they are, "y"/"n" read as yes/no, another single letter "other"; a longer text
    is "yes" or "no" when its first four characters hold it (yes first), else "other"."""
    text = text.lower().strip().replace(".", "")
    if text in ("yes", "no"):
        return text
    if len(text) == 1:
        return {"y": "yes", "n": "no"}.get(text, "other")
    head = text[:4]
    return "yes" if "yes" in head else "no" if "no" in head else "other"
