"""Reading JSON-shaped values: what each accessor gives for what it does not promise."""

from __future__ import annotations

from pgfsbench.jsonish import arr, obj, objs, text, whole


def test_accessors_narrow_and_fall_back() -> None:
    doc: object = {"a": {"b": [1, {"c": "2"}, "x"]}, 3: "three"}
    assert obj(doc)["3"] == "three"  # keys become text, as JSON's are
    assert obj("not an object") == {} and obj(None) == {}
    assert arr(obj(obj(doc)["a"])["b"])[0] == 1 and arr({"a": 1}) == []
    assert objs(obj(obj(doc)["a"])["b"]) == [{"c": "2"}]  # the objects only
    assert text(None) == "" and text(None, "?") == "?" and text(5) == "5"
    assert whole("42") == 42 and whole(" -7 ") == -7 and whole(3.0) == 3
    assert whole(3.5) is None and whole(True) is None and whole("4k") is None
