"""The open pages' figures from the answers a page received (no browser, no benchmark)."""

import pytest

from bench import record, report
from bench.pages import Answer, page_figures, per_minute


def _answer(at: float, headers: int = 300, body: int = 0, url: str = "/queues/q/") -> Answer:
    return Answer(at=at, url=f"http://127.0.0.1{url}", header_bytes=headers, body_bytes=body)


def test_a_window_counts_only_its_answers_and_scales_them_to_a_minute():
    answers = [
        _answer(9.0, 500, 40_000),  # the first load, before the window
        *(_answer(10.0 + 2 * i) for i in range(15)),  # a poll every 2 s for 30 s: 304s
        _answer(20.5, 400, 2_000, url="/jobs/1/log/?lines=1"),  # one change
        _answer(40.0, 400, 9_000),  # after the window
    ]

    minute = per_minute(answers, start=10.0, seconds=30.0)

    assert minute["requests"] == 16
    assert minute["with_body"] == 1
    assert minute["by_path"] == {
        "/queues/q/": {"requests": 15, "with_body": 0, "bytes": 15 * 300},
        "/jobs/1/log/": {"requests": 1, "with_body": 1, "bytes": 2_400},
    }
    assert minute["requests_per_minute"] == 32.0
    assert minute["header_kb_per_minute"] == pytest.approx((15 * 300 + 400) * 2 / 1000)
    assert minute["body_kb_per_minute"] == pytest.approx(2_000 * 2 / 1000)
    assert minute["kb_per_minute"] == pytest.approx(
        minute["header_kb_per_minute"] + minute["body_kb_per_minute"]
    )


def test_the_first_load_is_what_came_before_the_page_had_loaded():
    answers = [_answer(1.0, 500, 30_000), _answer(1.2, 300, 4_700), _answer(3.0)]

    figures = page_figures("idle queue", "/queues/q/", 20.0, answers, loaded=2.0, seconds=60.0)

    assert figures["first_load"]["requests"] == 2
    assert figures["first_load"]["kb"] == 35.5
    assert figures["open"]["requests"] == 1


def _run(kb: float, requests: float = 30.0) -> dict:
    answers = [_answer(0.5, 1_000, 30_000), _answer(2.0, 0, int(kb * 1000))]
    row = page_figures("idle queue", "/queues/q/", 20.0, answers, loaded=1.0, seconds=60.0)
    row["open"]["requests_per_minute"] = requests
    return {"command": "make bench", "argv": "python -m bench --part pages", "machine": "2 cores",
            "date": "2026-11-27 05:00 UTC", "pages": {"seconds": 60.0, "pages": [row]}}  # fmt: skip


def test_the_report_says_whether_a_page_met_its_target_and_compares_with_the_record(tmp_path):
    path = tmp_path / "benchmarks.md"
    report.write(path, _run(kb=12.0), against=tmp_path / "none.json")
    assert "| 12.0 KB | under 20 KB: met |" in path.read_text()

    comparisons = report.write(
        path, _run(kb=36.0, requests=31.0), against=path.with_suffix(".json")
    )

    text = path.read_text()
    assert "| 36.0 KB | under 20 KB: **missed** |" in text
    assert text.count("<!-- figures:pages:start") == 1
    by_name = {c.name: c for c in comparisons}
    bytes_a_minute = by_name["idle queue: bytes a minute"]
    assert (bytes_a_minute.recorded, bytes_a_minute.value) == (12.0, 36.0)
    assert bytes_a_minute.loss  # three times the bytes is worse beyond the noise
    assert not by_name["idle queue: requests a minute"].loss
    assert record.read(path.with_suffix(".json"))["pages"]["results"]["pages"][0]["page"] == (
        "idle queue"
    )


def test_a_page_polling_two_parts_shows_each_parts_share():
    answers = [_answer(0.5, 1_000, 30_000)]
    answers += [_answer(1.0 + 2 * i, 250) for i in range(30)]
    answers += [_answer(1.0 + 2 * i, 250, 750, url="/jobs/7/log/?lines=1") for i in range(30)]
    row = page_figures("job page", "/jobs/7/", 20.0, answers, loaded=1.0, seconds=60.0)

    lines = report.render_pages({"pages": {"seconds": 60.0, "pages": [row]}})

    assert "| job page (`/jobs/7/`) | 60 | 30 | 15.0 KB | 22.5 KB | 37.5 KB |" in lines[2]
    assert "under 20 KB: **missed**" in lines[2]
    assert (
        "- job page: `/queues/q/` 30 requests, 0 with a body, 7.5 KB;"
        " `/jobs/7/log/` 30 requests, 30 with a body, 30.0 KB"
    ) in lines
