"""Label and field selectors parse as kubectl's (apimachinery labels.Parse /
fields.ParseSelector) and match as the API server does."""

from __future__ import annotations

import pytest

from dradiag.errors import UsageError
from dradiag.snapshot.selectors import (
    METADATA_FIELDS,
    parse_field_selector,
    parse_label_selector,
)


def _obj(**labels: str) -> dict:
    return {"metadata": {"name": "x", "labels": labels}}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("a=b,c!=d,e in (x,y),!f", "a=b,c!=d,e in (x,y),!f"),
        ("a==b", "a=b"),
        ("  a = b ,  c  ", "a=b,c"),
        ("k notin ( a , b )", "k notin (a,b)"),
        ("n>3,m<2", "n>3,m<2"),
        ("app.kubernetes.io/name=trainer", "app.kubernetes.io/name=trainer"),
        ("a=", "a="),
        ("", ""),
    ],
)
def test_label_selector_canonical_form(text: str, canonical: str) -> None:
    assert parse_label_selector(text).text() == canonical


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        # != and notin also match objects without the key, as on the API server.
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("!a", {"b": "1"}, True),
        ("n>3", {"n": "5"}, True),
        ("n>3", {"n": "3"}, False),
        ("n<3", {"n": "x"}, False),
        ("a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "x"}, True),
        ("a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "x", "f": "1"}, False),
        ("a=", {"a": ""}, True),
        ("", {}, True),
    ],
)
def test_label_selector_matches(text: str, labels: dict, expected: bool) -> None:
    assert parse_label_selector(text).matches(_obj(**labels)) is expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a=b,", "expected a label key"),
        (",a", "expected a label key"),
        ("a in ()", "at least one value"),
        ("a in (b", "missing ')'"),
        ("a b", "unexpected 'b'"),
        ("=b", "expected a label key"),
        ("n>x", "integer"),
        ("-a=b", "not a valid label key"),
        ("a=b c", "expected ',' between requirements"),
        ("a=" + "v" * 64, "not a valid label value"),
    ],
)
def test_label_selector_errors(text: str, reason: str) -> None:
    with pytest.raises(UsageError, match="invalid label selector") as info:
        parse_label_selector(text)
    assert reason in str(info.value)


def test_field_selector_matches_with_missing_fields_as_empty() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Running")
    assert selector.matches({"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}})
    assert not selector.matches({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    unscheduled = parse_field_selector("spec.nodeName=")
    assert unscheduled.matches({"spec": {}})
    assert not unscheduled.matches({"spec": {"nodeName": "n1"}})
    assert parse_field_selector("spec.hostNetwork=true").matches({"spec": {"hostNetwork": True}})


def test_field_selector_double_equals_and_escapes() -> None:
    selector = parse_field_selector(r"metadata.name==a\,b")
    assert selector.matches({"metadata": {"name": "a,b"}})
    assert selector.text() == r"metadata.name=a\,b"
    assert parse_field_selector(selector.text()) == selector


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("spec.foo=x", "field label not supported: spec.foo"),
        ("metadata.name", "is not field=value"),
        ("metadata.name=a,b", "is not field=value"),
        ("metadata.name=a,", "empty term"),
        (r"metadata.name=a\x", "invalid escape"),
    ],
)
def test_field_selector_errors(text: str, reason: str) -> None:
    with pytest.raises(UsageError, match="invalid field selector") as info:
        parse_field_selector(text)
    assert reason in str(info.value)


def test_field_selector_restricted_to_metadata() -> None:
    selector = parse_field_selector("metadata.namespace=ml,spec.nodeName=n1")
    assert selector.restricted_to(METADATA_FIELDS).text() == "metadata.namespace=ml"
