"""Tests of cosim.master.protocol: frozen messages, their equality and hashing, the tag registry."""

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cosim.master import protocol
from cosim.errors import ModelError
from cosim.master.protocol import (MESSAGE_TYPES, PROTOCOL_VERSION, REPLIES, Alive, CollectLogs,
                                   Describe, DoStep, ErrorKind, ErrorReply, GetOutputs, GetState,
                                   Heartbeat, Hello, Initialize, LogBatch, Message, Ok, Outputs,
                                   PortInfo, RefreshOutputs, Reload, Reply, Request, SetInputs,
                                   SetParameters, SetState, Step, StepDone, Stepped, Terminate,
                                   UnitDescription, UnitState, Welcome)

DESCRIPTION = UnitDescription(
    name="plant", inputs=(PortInfo("u", (2,)), PortInfo("d", ())),
    outputs=(PortInfo("y", (2,)), PortInfo("x", (3, 1))),
    feedthrough=(("y", ("u",)), ("x", ())), dt=0.01, can_get_set_state=True,
    capabilities=("logs",))

STATE = UnitState(t=0.5, data={"gain": {"x": np.array([1.0, np.nan])}, "k": [1, "a", None]})

# One instance of every message type, the ones holding dicts last in each group.
SAMPLES = {
    Hello: Hello(PROTOCOL_VERSION, "run-1"),
    Describe: Describe(),
    Initialize: Initialize(0.0),
    SetInputs: SetInputs({"u": np.array([1.0, 2.0]), "d": np.array(0.5)},
                         {"u": (np.zeros(2), np.ones(2))}),
    DoStep: DoStep(0.0, 0.01),
    RefreshOutputs: RefreshOutputs(),
    GetOutputs: GetOutputs(),
    GetState: GetState(),
    SetState: SetState(STATE),
    CollectLogs: CollectLogs(),
    Terminate: Terminate(),
    Heartbeat: Heartbeat(),
    Reload: Reload("model:\n  name: units\n"),
    SetParameters: SetParameters({"k": 1.5, "gains": [[1.0, 2.0]], "name": "=k * 2"}),
    Step: Step(("u", "d"), (2, 0), 0, 0.0, 0.01, np.arange(7.0)),
    Welcome: Welcome(PROTOCOL_VERSION, DESCRIPTION),
    UnitDescription: DESCRIPTION,
    Ok: Ok(),
    Outputs: Outputs({"y": np.zeros(2), "x": np.ones((3, 1))}),
    StepDone: StepDone(0.01, False),
    UnitState: STATE,
    LogBatch: LogBatch({"y": (np.arange(3.0), np.zeros((3, 2)))}),
    ErrorReply: ErrorReply(ErrorKind.SIMULATION, "block 'gain' failed", 0.5),
    Stepped: Stepped(0.01, False, np.inf, np.zeros(7)),
    Alive: Alive(0.25, True),
}
UNHASHABLE = {SetInputs, SetState, Outputs, UnitState, LogBatch, Step, Stepped,
              SetParameters}
ALL = list(MESSAGE_TYPES.values())

# The wire carries fields by position, so this record of version 5 must change together with
# PROTOCOL_VERSION. If this test fails you changed the wire format: bump PROTOCOL_VERSION, then
# record the new schema here.
SCHEMA_V5 = {
    1: "Hello(protocol_version: int, session: str)",
    2: "Describe()",
    3: "Initialize(t0: float)",
    4: "SetInputs(values: dict[str, np.ndarray],"
       " derivatives: dict[str, tuple[np.ndarray, ...]])",
    5: "DoStep(t: float, h: float)",
    6: "GetOutputs()",
    7: "GetState()",
    8: "SetState(state: UnitState)",
    9: "CollectLogs()",
    10: "Terminate()",
    11: "Heartbeat()",
    12: "RefreshOutputs()",
    13: "Step(inputs: tuple[str, ...], orders: tuple[int, ...], mode: int, t: float,"
        " h: float, data: np.ndarray)",
    14: "Reload(unit_file: str)",
    15: "SetParameters(parameters: dict[str, Any])",
    32: "Welcome(protocol_version: int, unit: UnitDescription)",
    33: "UnitDescription(name: str, inputs: tuple[PortInfo, ...], outputs: tuple[PortInfo, ...],"
        " feedthrough: tuple[tuple[str, tuple[str, ...]], ...], dt: float,"
        " can_get_set_state: bool, capabilities: tuple[str, ...])",
    34: "Ok()",
    35: "Outputs(values: dict[str, np.ndarray])",
    36: "StepDone(t_reached: float, event: bool, next_event: float)",
    37: "UnitState(t: float, data: dict[str, Any])",
    38: "LogBatch(signals: dict[str, tuple[np.ndarray, np.ndarray]])",
    39: "ErrorReply(kind: ErrorKind, message: str, t: float | None, call: str)",
    40: "Stepped(t_reached: float, event: bool, next_event: float, outputs: np.ndarray)",
    41: "Alive(t: float | None, stepping: bool)",
    "PortInfo": "PortInfo(name: str, shape: tuple[int, ...], sample_time: float)",
    "ErrorKind": "protocol, unsupported, simulation, convergence, codec, internal",
}


def _schema(cls) -> str:
    fields = ", ".join(f"{f.name}: {f.type}" for f in dataclasses.fields(cls))
    return f"{cls.__name__}({fields})"


def test_wire_schema_matches_protocol_version():
    schema = {tag: _schema(cls) for tag, cls in MESSAGE_TYPES.items()}
    schema["PortInfo"] = _schema(PortInfo)
    schema["ErrorKind"] = ", ".join(k.value for k in ErrorKind)
    assert PROTOCOL_VERSION == 7
    assert schema == SCHEMA_V5


def test_registry_holds_every_message_class_once():
    defined = {obj for obj in vars(protocol).values()
               if inspect.isclass(obj) and issubclass(obj, Message)
               and obj not in (Message, Request, Reply)}
    assert set(ALL) == defined
    assert len(set(ALL)) == len(ALL)
    assert set(SAMPLES) == defined


def test_tags_are_small_distinct_ints():
    # One-byte msgpack integers; distinct by construction of the dict, checked for non-ints.
    assert all(type(tag) is int and 0 < tag < 128 for tag in MESSAGE_TYPES)


def test_requests_and_replies_are_told_apart():
    requests = {cls for cls in ALL if issubclass(cls, Request)}
    replies = {cls for cls in ALL if issubclass(cls, Reply)}
    assert requests | replies == set(ALL) and not requests & replies
    assert set(REPLIES) == requests
    assert set(REPLIES.values()) <= replies
    assert all(tag < 32 for tag, cls in MESSAGE_TYPES.items() if cls in requests)
    assert all(32 <= tag < 64 for tag, cls in MESSAGE_TYPES.items() if cls in replies)


def test_registries_are_read_only():
    with pytest.raises(TypeError):
        MESSAGE_TYPES[99] = Ok
    with pytest.raises(TypeError):
        REPLIES[Heartbeat] = Welcome


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_messages_are_frozen_and_slotted(cls):
    msg = SAMPLES[cls]
    assert dataclasses.is_dataclass(msg) and not hasattr(msg, "__dict__")
    for field in dataclasses.fields(msg):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(msg, field.name, None)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_messages_holding_dicts_are_unhashable_the_others_hash_by_value(cls):
    msg = SAMPLES[cls]
    copy = dataclasses.replace(msg)
    assert copy == msg and copy is not msg
    if cls in UNHASHABLE:
        with pytest.raises(TypeError, match=cls.__name__):
            hash(msg)
    else:
        assert hash(copy) == hash(msg)


def test_empty_messages_of_different_types_differ():
    assert Ok() == Ok()
    assert Ok() != Heartbeat() and hash(Ok()) != hash(Heartbeat())


@pytest.mark.parametrize("other, equal", [
    (np.array([1.0, np.nan]), True),
    (np.array([1.0, 2.0]), False),
    (np.array([1.0, np.nan], dtype=np.float32), False),
    (np.array([[1.0, np.nan]]), False),
    ([1.0, np.nan], False),
])
def test_array_fields_compare_by_dtype_shape_and_value_nan_equal(other, equal):
    msg = Outputs({"y": np.array([1.0, np.nan])})
    assert (msg == Outputs({"y": other})) is equal


def test_free_form_data_compares_lists_and_tuples_apart_and_nan_equal():
    assert UnitState(0.0, {"a": [float("nan")]}) == UnitState(0.0, {"a": [float("nan")]})
    assert UnitState(0.0, {"a": [1]}) != UnitState(0.0, {"a": (1,)})
    assert UnitState(0.0, {"a": 1}) != UnitState(0.0, {"b": 1})


def test_nested_message_equality():
    assert SetState(STATE) == dataclasses.replace(SAMPLES[SetState])
    assert SetState(STATE) != SetState(UnitState(0.5, {}))


def test_input_derivatives_default_to_none_given():
    assert SetInputs({"u": np.zeros(2)}).derivatives == {}


def test_error_reply_time_defaults_to_none():
    assert ErrorReply(ErrorKind.INTERNAL, "bug").t is None


def test_description_stores_dt_as_float():
    d = dataclasses.replace(DESCRIPTION, dt=np.float64(0.01))
    assert type(d.dt) is float and d == DESCRIPTION
    assert type(dataclasses.replace(DESCRIPTION, dt=0).dt) is float


@pytest.mark.parametrize("change, problem", [
    ({"inputs": (PortInfo("u", ()), PortInfo("u", ()))}, "input 'u' is declared twice"),
    ({"inputs": [PortInfo("u", (2,)), PortInfo("d", ())]}, "inputs must be a tuple of PortInfo"),
    ({"feedthrough": (("y", ("u",)),)}, "feedthrough misses output 'x'"),
    ({"feedthrough": (("y", ()), ("x", ()), ("y", ()))}, "lists output 'y' more than once"),
    ({"feedthrough": (("y", ("w",)), ("x", ()))}, "names 'w', which is not an input"),
    ({"feedthrough": (("y", ()), ("x", ()), ("z", ()))}, "names 'z', which is not an output"),
    ({"feedthrough": (("y", "u"), ("x", ()))}, "feedthrough must be a tuple of"),
    ({"dt": -0.1}, "dt must be a finite number >= 0"),
    ({"dt": float("inf")}, "dt must be a finite number >= 0"),
    ({"dt": True}, "dt must be a finite number >= 0"),
    ({"can_get_set_state": 1}, "can_get_set_state must be a bool"),
    ({"capabilities": ["logs"]}, "capabilities must be a tuple of str"),
])
def test_inconsistent_description_is_a_model_error_naming_the_unit(change, problem):
    with pytest.raises(ModelError, match="unit 'plant'") as info:
        dataclasses.replace(DESCRIPTION, **change)
    assert problem in str(info.value)


def test_description_needs_a_name():
    with pytest.raises(ModelError, match="name must be a non-empty str"):
        dataclasses.replace(DESCRIPTION, name="")


def test_description_reports_every_problem_at_once():
    with pytest.raises(ModelError) as info:
        dataclasses.replace(DESCRIPTION, dt=-1.0, feedthrough=())
    message = str(info.value)
    assert "misses output 'y'" in message and "misses output 'x'" in message
    assert "dt must be" in message


@pytest.mark.parametrize("name, shape", [("", ()), ("u", [2]), ("u", (-1,)), ("u", (2.0,))])
def test_bad_port_is_a_model_error(name, shape):
    with pytest.raises(ModelError, match="port"):
        PortInfo(name, shape)


def test_protocol_imports_no_transport():
    code = ("import sys, cosim.master.protocol; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('msgpack', 'zmq', 'ray')))")
    root = Path(protocol.__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=root)
    assert out.stdout.strip() == "[]"
