"""VLMEvalKit's judge file written as its evaluation writes it (vlmeval/dataset/image_mcq.py
`evaluate_heuristic` with `mcq_vanilla_eval` and `eval_vanilla`, at e8e78f05): the prediction file loaded, its
rows sorted by `index`, `prediction` as text, the column names lower-cased but the option letters, `hit` and
`log` ("Match Log: <text>. ") added, dumped through xlsxwriter beside it as `<stem>_<judge>_result.xlsx`."""

import string
from pathlib import Path

import pandas as pd

NO_JUDGE = "Failed in Prefetch, no GPT-based answer matching under `exact_matching` policy."
RANDOM = "Failed to predict, thus randomly generate one. "


def match_log(prediction: str, how: tuple) -> str:
    """eval_vanilla's log: ("matcher",) the prediction itself, ("judge", its answer), ("random",),
    ("none",)."""
    text = {"matcher": prediction, "random": RANDOM, "none": NO_JUDGE}.get(how[0])
    return f"Match Log: {how[1] if how[0] == 'judge' else text}. "


def write_judge_file(prediction_file: str, judge: str, verdicts: dict[int, tuple[int, tuple]]) -> Path:
    """`verdicts`: {index: (hit, how)} for every row of the prediction file."""
    path = Path(prediction_file)
    data = pd.read_excel(path).sort_values(by="index")
    data["prediction"] = [str(x) for x in data["prediction"]]
    for k in list(data.keys()):
        data[k.lower() if k not in list(string.ascii_uppercase) else k] = data.pop(k)
    data["hit"] = [verdicts[int(i)][0] for i in data["index"]]
    data["log"] = [match_log(p, verdicts[int(i)][1]) for i, p in zip(data["index"], data["prediction"])]
    out = path.with_name(f"{path.stem}_{judge}_result{path.suffix}")
    with pd.ExcelWriter(
        out, engine="xlsxwriter", engine_kwargs={"options": {"strings_to_formulas": False}}
    ) as writer:
        data.to_excel(writer, index=False)
    return out
