"""The aspect-list door: a team's JSON aspect file read as untrusted input, every refusal one line naming the file
and the entry."""

from __future__ import annotations

import json
import re

import pytest

from senti.core.aspects import MAX_ASPECTS, Aspect, parse_aspects, read_aspects
from senti.core.errors import DataError, SentiError

GOOD = {"aspects": [{"name": "service", "label": "服务", "keywords": ["服务员", " 态度 ", "服务员"]},
                    {"name": "price-level", "keywords": ["价格"]}]}


def _file(tmp_path, data, raw: bytes | None = None):
    path = tmp_path / "aspects.json"
    path.write_bytes(raw if raw is not None else json.dumps(data, ensure_ascii=False).encode())
    return path


def test_a_good_list_is_read_with_keywords_trimmed_and_deduplicated(tmp_path):
    got = read_aspects(_file(tmp_path, GOOD))
    assert got == [Aspect("service", ("服务员", "态度"), "服务"), Aspect("price-level", ("价格",), "")]
    assert got[0].to_json() == {"name": "service", "label": "服务", "keywords": ["服务员", "态度"]}


@pytest.mark.parametrize("data, message", [
    ({"aspects": []}, "at least one aspect"),
    ([1, 2], "aspect 1: expected an object"),
    ({"aspects": [{"name": "a b", "keywords": ["x"]}]}, "aspect 1: name 'a b' must be"),
    ({"aspects": [{"name": "../etc", "keywords": ["x"]}]}, "name '../etc' must be"),
    ({"aspects": [{"name": "a", "keywords": []}]}, "aspect 1 (a): keywords must be a list of 1"),
    ({"aspects": [{"name": "a", "keywords": ["ok", "  "]}]}, "keyword '  ' must be non-empty"),
    ({"aspects": [{"name": "a", "keywords": [7]}]}, "keyword 7 must be"),
    ({"aspects": [{"name": "a", "keywords": ["x" * 33]}]}, "at most 32 characters"),
    ({"aspects": [{"name": "a", "keywords": ["x"], "label": ["no"]}]}, "label must be text"),
    ({"aspects": [{"name": "a", "keywords": ["x"]}, {"name": "a", "keywords": ["y"]}]}, "'a' appears twice"),
    ({"aspects": [{"name": f"a{i}", "keywords": ["x"]} for i in range(10_000)]}, f"10000 aspects; at most {MAX_ASPECTS}"),
])
def test_a_bad_list_is_refused_in_one_line_naming_the_file_and_entry(tmp_path, data, message):
    path = _file(tmp_path, data)
    with pytest.raises(DataError) as err:
        read_aspects(path)
    assert str(path) in str(err.value) and message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("raw, message", [
    (b"{not json", "unreadable aspect file (not JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    (b" " * ((1 << 20) + 1), "larger than 1 MB"),
])
def test_a_file_that_is_not_an_aspect_list_is_refused_in_one_line(tmp_path, raw, message):
    with pytest.raises(SentiError, match=re.escape(message)):
        read_aspects(_file(tmp_path, None, raw))


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(DataError, match="cannot read the aspect file"):
        read_aspects(tmp_path / "none.json")


def test_a_request_body_list_is_read_by_the_same_rules():
    assert [a.name for a in parse_aspects(GOOD["aspects"], "request")] == ["service", "price-level"]
    with pytest.raises(DataError, match="request: aspect 1"):
        parse_aspects([{"name": "", "keywords": ["x"]}], "request")
