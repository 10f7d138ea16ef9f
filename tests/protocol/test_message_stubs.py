"""The checked-in static types of the generated message classes match Kafka's JSON definitions."""

from __future__ import annotations

import ast

from pylog.protocol import messages
from pylog.protocol.api import MESSAGES, ApiKey, request_class, response_class
from pylog.protocol.stubgen import STUB_PATH, main, render


def test_checked_in_stub_is_up_to_date() -> None:
    assert STUB_PATH.read_text("utf-8") == render(), (
        "protocol/messages/__init__.pyi is out of date: run python -m pylog.protocol.stubgen"
    )
    assert main(["--check"]) == 0


def test_stub_declares_every_runtime_class_and_field() -> None:
    tree = ast.parse(STUB_PATH.read_text("utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    assert set(classes) == set(MESSAGES)
    for name, spec in MESSAGES.items():
        node = classes[name]
        nested = {n.name: n for n in node.body if isinstance(n, ast.ClassDef)}
        assert set(nested) == {s for s, st in spec.structs.items() if st is not spec.root}, name
        for sname, st in spec.structs.items():
            body = node.body if st is spec.root else nested[sname].body
            fields = [
                n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            ]
            assert fields == list(st.cls._fields), f"{name}.{sname}"


def test_runtime_module_exports_the_codec_classes() -> None:
    assert messages.ProduceRequest is request_class(ApiKey.PRODUCE)
    assert messages.FetchResponse is response_class(ApiKey.FETCH)
    part = messages.ProduceRequest.PartitionProduceData(index=3)
    assert part.records is None and part.index == 3
    assert type(part).__module__ == "pylog.protocol.messages"
    assert type(part).__qualname__ == "ProduceRequest.PartitionProduceData"


def test_field_types_follow_the_json() -> None:
    text = STUB_PATH.read_text("utf-8")
    produce = text[text.index("class ProduceRequest(Message):") :]
    produce = produce[: produce.index("\n\n\n")]
    assert "transactional_id: str | None" in produce  # nullable string
    assert "acks: int\n" in produce  # int16
    assert "records: Records | None" in produce
    assert "topic_data: list[ProduceRequest.TopicProduceData]" in produce
    fetch = text[text.index("class FetchRequest(Message):") :]
    assert "topic_id: uuid.UUID" in fetch[: fetch.index("\n\n\n")]
