"""The inspect page builder without a browser: escaping, n/a said once, the cap's note, the filter flags."""

import re

from vlmgrid.report.inspect_page import (
    FORMAT_ERROR,
    PARTIAL,
    RIGHT,
    WRONG,
    Answer,
    InspectPage,
    Item,
    render_page,
)


def _item(item_id, answers, question="q", disagree=False):
    return Item(
        item_id=item_id,
        thumbnail=None,
        image_note="text only",
        question=question,
        options=["yes", "no"],
        labels="none",
        gold="yes",
        answers=answers,
        disagree=disagree,
    )


def _page(items, models=("m1", "m2"), not_applicable=None, sample_note=""):
    return InspectPage(
        benchmark="b",
        kind="k",
        metric="accuracy",
        rule="rule.",
        models=list(models),
        not_applicable=not_applicable or {},
        items=items,
        n_items=len(items),
        sample_note=sample_note,
    )


def _rows(html):
    return re.findall(
        r'<tr class="item" data-id="([^"]*)" data-wrong="([^"]*)" data-error="([^"]*)" '
        r'data-disagree="([01])"',
        html,
    )


def test_every_text_from_the_data_is_escaped():
    evil = '<script>alert(1)</script> & "x" < y'
    item = Item(
        item_id='id"<1>',
        thumbnail=None,
        image_note="<no image>",
        question=f"Is {evil}?",
        options=[f"opt {evil}"],
        labels="letters",
        gold=f"gold {evil}",
        answers={
            "m<1>": [
                Answer(
                    variant="v<2>",
                    raw=f"raw {evil}",
                    reading=f"read {evil}",
                    verdict=WRONG,
                    note=f"note {evil}",
                )
            ]
        },
        disagree=False,
    )
    html = render_page(_page([item], models=["m<1>"], not_applicable={"m<2>": f"reason {evil}"}))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot; &lt; y" in html
    for shown in (
        "Is &lt;script",
        "A. opt &lt;script",
        "gold: gold &lt;script",
        "raw &lt;script",
        "read &lt;script",
        "note &lt;script",
        "reason &lt;script",
        "&lt;no image&gt;",
        "m&lt;1&gt;",
        "m&lt;2&gt;",
        "v&lt;2&gt;",
    ):
        assert shown in html, shown
    assert 'data-id="id&quot;&lt;1&gt;"' in html
    # the page's only scripts are its own filters
    assert html.count("<script>") == 1


def test_the_metric_is_named_by_its_label():
    html = render_page(
        InspectPage(
            benchmark="b",
            kind="dance",
            metric="acc_at_50",
            rule="rule.",
            models=["m1"],
            not_applicable={},
            items=[],
            n_items=0,
            sample_note="",
        )
    )
    assert "metric Acc@50" in html and "acc_at_50" not in html


def test_a_model_that_cannot_run_is_said_once_and_has_no_column():
    items = [_item(f"i{n}", {"m1": [Answer("default", "yes", "yes", RIGHT)]}) for n in range(5)]
    html = render_page(_page(items, models=["m1"], not_applicable={"clip": "it cannot generate"}))
    assert html.count("it cannot generate") == 1
    assert html.count("n/a") == 1
    assert "<th>clip</th>" not in html and "<th>m1</th>" in html


def test_no_model_that_can_run_says_so_instead_of_an_empty_table():
    html = render_page(_page([_item("i0", {})], models=[], not_applicable={"clip": "no"}))
    assert "No model of the grid can run this benchmark" in html
    assert "<table>" not in html


def test_the_sample_note_is_on_the_page():
    html = render_page(_page([_item("i0", {})], sample_note="This page shows 1 of the 9 items"))
    assert "This page shows 1 of the 9 items" in html


def test_rows_carry_the_model_columns_of_their_wrong_answers_and_format_errors():
    items = [
        _item(
            "both-right",
            {"m1": [Answer("default", "yes", "yes", RIGHT)], "m2": [Answer("default", "yes", "yes", RIGHT)]},
        ),
        _item(
            "m2-wrong",
            {"m1": [Answer("default", "yes", "yes", RIGHT)], "m2": [Answer("default", "no", "no", WRONG)]},
            disagree=True,
        ),
        _item(
            "m1-error",
            {
                "m1": [Answer("default", "hm", None, FORMAT_ERROR, "not read")],
                "m2": [Answer("default", "yes", "yes", RIGHT)],
            },
        ),
        # one variant of m1 partly right, another a format error: both flags, in one row
        _item(
            "m1-variants",
            {
                "m1": [Answer("a", "x", "x", PARTIAL, "0.3"), Answer("b", None, None, FORMAT_ERROR)],
                "m2": [Answer("default", "no", "no", WRONG)],
            },
            disagree=True,
        ),
    ]
    assert _rows(render_page(_page(items))) == [
        ("both-right", "", "", "0"),
        ("m2-wrong", "1", "", "1"),
        ("m1-error", "", "0", "0"),
        ("m1-variants", "0 1", "0", "1"),
    ]


def test_variants_are_named_and_a_single_default_is_not():
    one = render_page(_page([_item("i", {"m1": [Answer("default", "yes", "yes", RIGHT)]})], models=["m1"]))
    assert 'class="variant"' not in one
    two = render_page(
        _page(
            [
                _item(
                    "i",
                    {"m1": [Answer("open-01", "yes", "yes", RIGHT), Answer("closed-01", "no", "no", WRONG)]},
                )
            ],
            models=["m1"],
        )
    )
    assert '<span class="variant">open-01</span>' in two and '<span class="variant">closed-01</span>' in two


def test_a_long_raw_output_is_folded():
    raw = "word " * 200
    html = render_page(
        _page([_item("i", {"m1": [Answer("default", raw, None, FORMAT_ERROR)]})], models=["m1"])
    )
    assert "<details>" in html and raw in html


def test_the_context_the_prompt_showed_is_escaped_labelled_and_folded_when_long():
    evil = '<script>alert(1)</script> & "x"'
    short = Item(
        item_id="i0",
        thumbnail=None,
        image_note="text only",
        question="q",
        options=["yes", "no"],
        labels="none",
        gold="yes",
        answers={},
        disagree=False,
        context=[("Context", f"Read this: {evil}")],
    )
    long = Item(
        item_id="i1",
        thumbnail=None,
        image_note="text only",
        question="q",
        options=["yes", "no"],
        labels="none",
        gold="yes",
        answers={},
        disagree=False,
        context=[("Context", "a passage. " * 40)],
    )
    html = render_page(_page([short, long], models=["m1"]))
    assert "<script>alert(1)</script>" not in html
    assert (
        '<div class="context"><span class="label">Context</span> <span class="text">Read this: '
        "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;</span></div>"
    ) in html
    # before the question: the prompt shows it first
    assert html.index("Read this:") < html.index('<div class="question">q</div>')
    folded = re.search(r'<tr class="item" data-id="i1".*?</tr>', html).group(0)
    passage = "a passage. " * 40  # past 300 characters: its start shown, the whole folded under it
    assert f'<details><summary><span class="text">{passage[:300]}…</span></summary>' in folded
    assert f'<span class="text">{passage}</span></details>' in folded
    plain = render_page(_page([_item("i2", {})], models=["m1"]))
    assert 'class="context"' not in plain
