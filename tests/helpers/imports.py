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


SIZES = {"pope-fixture": 2, "mme-fixture": 1, "textvqa-fixture": 3, "scienceqa-fixture": 6, "mmbench-fixture": 2}
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
    return {"question_id": question_id, "prompt": prompt, "text": text, "answer_id": f"ans{n:019d}",
            "model_id": MODEL_ID, "metadata": {}, **extra}


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
        lines.append(llava_line(int(r["id"]), prompt, texts[n] if texts else "ABCD"[r["answer_index"]], n,
                                round_id=0, options=options, option_char=list("ABCD"[:len(options)])))
    return lines


def mme_answers(records, texts) -> list[dict]:
    """llava_mme.jsonl asks "<question>\\nAnswer the question using a single word or phrase." per image path."""
    return [llava_line(r["image_id"], r["question"].replace(" Please answer yes or no.", "") + "\n" + LLAVA_SHORT,
                       text, n) for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts))]


def mme_tool_folder(folder, records, texts) -> str:
    """convert_answer_to_mme.py's output: <subtask>.txt, lines "<file>.txt<TAB>question<TAB>Yes/No<TAB>answer"."""
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
        questions.append({"question_id": n, "image": f"{r['image_source']}.jpg", "text": prompt,
                          "category": r["split"]})
        answers.append(llava_line(n, prompt, text, n))
    return write_jsonl(tmp_path / "llava_pope_test.jsonl", questions), write_jsonl(tmp_path / "pope.jsonl", answers)


MODEL = "llava_v1.5_7b"  # VLMEvalKit's model names hold underscores too


LETTERS = "ABCDEF"
NAN = float("nan")


def options(r, width: int) -> dict:
    """Option columns A.. as the MCQ TSVs hold them: NaN where the question has fewer options."""
    return {LETTERS[i]: (r["options"][i] if i < len(r["options"]) else NAN) for i in range(width)}


def mmbench_rows(records) -> list[dict]:
    """MMBench_DEV_EN.tsv (Development.md, table 1): index (circular copies q + k * 1e6), question, hint
    (NaN when none), A-D, answer letter, category, l2-category, split."""
    return [{"index": int(r["id"]), "question": r["question"], "hint": r["hint"] or NAN, **options(r, 4),
             "answer": LETTERS[r["answer_index"]], "category": r["category"], "l2-category": r["l2_category"],
             "split": "dev"} for _, r in records.iterrows()]


def mme_rows(records) -> list[dict]:
    """MME.tsv: index, question (with "Please answer yes or no."), answer Yes/No, category, image_path."""
    return [{"index": n, "question": r["question"], "answer": r["answer"].capitalize(), "category": r["category"],
             "image_path": r["image_id"]} for n, (_, r) in enumerate(records.iterrows())]


def textvqa_rows(records) -> list[dict]:
    """TextVQA_VAL.tsv: index, question, answer (the ten human answers as a Python list's text)."""
    return [{"index": n, "question": r["question"], "answer": str(list(r["answers"]))}
            for n, (_, r) in enumerate(records.iterrows())]


def dump(rows: list[dict], predictions: list[str], folder, dataset: str, fmt: str = "xlsx") -> str:
    """`<model>_<dataset>.<fmt>` as vlmeval.smp.file.dump writes the inference job's table."""
    data = pd.DataFrame(rows)
    data["prediction"] = [str(p) for p in predictions]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{MODEL}_{dataset}.{fmt}"
    if fmt == "xlsx":
        with pd.ExcelWriter(path, engine="xlsxwriter",
                            engine_kwargs={"options": {"strings_to_formulas": False}}) as writer:
            data.to_excel(writer, index=False)
    elif fmt == "tsv":
        data.to_csv(path, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    else:
        json.dump(data.to_dict("records"), open(path, "w"), indent=4, ensure_ascii=False)
    return str(path)


def score_of(config, tmp_path, bench, predictions) -> dict:
    out = tmp_path / "score.json"
    assert main(["score", MODEL_ID, bench, "--predictions", str(predictions), "--out", str(out),
                 "--config", config]) == 0
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


def logged(doc_id: int, doc: dict, target, prompt: str, response: str, metrics: dict) -> dict:
    """One sample as the evaluator builds it (doc_id, doc, target, arguments, resps, filtered_resps, the three
    hashes, then process_results' values) and save_results_samples writes it: `input` = arguments[0], `resps`
    dropped because it says what filtered_resps says, `target` as text, `arguments` and `doc` dropped."""
    return {
        "doc_id": doc_id,
        "target": str(target),
        "filtered_resps": [response],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": hash_string(prompt),
        "target_hash": hash_string(str(target)),
        **metrics,
        "input": prompt,
    }


def write_samples(folder, task: str, lines: list[dict]) -> str:
    """`<output_path>/<model>/<date>_samples_<task>.jsonl`, one JSON object a line (ensure_ascii=False)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{DATE}_samples_{task}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def mme_samples(records, texts) -> list[dict]:
    """lmms_eval/tasks/mme: the default post_prompt replaces " Please answer yes or no."; process_results keys
    the image path (question_id) under mme_percetion_score (sic) or mme_cognition_score."""
    lines = []
    for n, ((_, r), text) in enumerate(zip(records.iterrows(), texts)):
        doc = {"question_id": r["image_id"], "question": r["question"], "answer": r["answer"].capitalize(),
               "category": r["category"]}
        key = "mme_cognition_score" if r["category"] in MME_COGNITION else "mme_percetion_score"
        score = 1.0 if text.lower().strip().replace(".", "") == r["answer"] else 0.0
        prompt = r["question"].strip().replace(MME_SUFFIX, "") + SHORT
        lines.append(logged(n, doc, doc["answer"], prompt, text,
                            {key: {"question_id": r["image_id"], "category": r["category"], "score": score}}))
    return lines
