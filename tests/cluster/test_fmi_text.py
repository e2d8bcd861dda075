"""String and Binary ports: an FMU's text output wired to another FMU's text input, on the
monolithic run and every co-simulation path (in process with and without the macro-step
engine, behind ``cosim serve``, in Ray actors), logged, exported, and equal to fmpy driving
the same chain. ``texter.c`` writes ``label = "tick <n>"`` (and FMI 3.0 ``data = {n, 0,
255}``), n the whole periods elapsed; ``types.c`` copies its text inputs to its outputs."""

import contextlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks import Constant, Gain
from blocks.fmu import FmuBlock
from cosim import (CompileError, CoSimulation, CosimConfig, Model, SimulationConfig,
                   Simulator)
from cosim.fmi.unit import FmuUnit
from cosim.master import protocol as P
from cosim.run.logs import Logs
from tests.cluster.fmu_build import build_fmu
from tests.cluster.fmu_specs import LAG, TEXTER2, TEXTER3, TYPES2, TYPES3

H = 0.1
STEPS = 6
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["2.0", "3.0"])
def fmus(request, tmp_path_factory):
    v = request.param
    d = tmp_path_factory.mktemp(f"text{v[0]}")
    texter, types = (TEXTER2, TYPES2) if v == "2.0" else (TEXTER3, TYPES3)
    return v, str(build_fmu(texter, v, d / "texter")), str(build_fmu(types, v, d / "types"))


def chain(fmus) -> Model:
    """texter.label -> a.t_in, a.t_out -> b.t_in (FMI 3.0: the binaries alike), and a
    numeric path beside them (texter.n -> a.i_in)."""
    version, texter, types = fmus
    m = Model("chain")
    start = {"n": 3} if version == "3.0" else {}
    m.add(FmuBlock("tx", texter, H), FmuBlock("a", types, H, start),
          FmuBlock("b", types, H, start))
    m.connect("tx.label", "a.t_in")
    m.connect("a.t_out", "b.t_in")
    m.connect("tx.n", "a.i_in" if version == "2.0" else "a.i32_in")
    if version == "3.0":
        m.connect("tx.data", "a.bin_in")
        m.connect("a.bin_out", "b.bin_in")
    return m


def fmpy_chain(fmus) -> dict:
    """fmpy's own instances of the chain, exchanged at each communication point in its
    order (outputs follow inputs set at the same time): the text outputs per point."""
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave
    from fmpy.fmi3 import FMU3Slave
    version, texter, types = fmus
    made = {}
    for name, path in (("tx", texter), ("a", types), ("b", types)):
        md = read_model_description(path)
        s = (FMU2Slave if version == "2.0" else FMU3Slave)(
            guid=md.guid, unzipDirectory=extract(path),
            modelIdentifier=md.coSimulation.modelIdentifier, instanceName=name)
        s.instantiate()
        if version == "2.0":
            s.setupExperiment(startTime=0.0)
        s.enterInitializationMode()
        s.exitInitializationMode()
        made[name] = (s, {v.name: v.valueReference for v in md.modelVariables})

    def text(name, var):
        s, vr = made[name]
        (x,) = s.getString([vr[var]])
        return x.decode("utf-8") if isinstance(x, bytes) else x

    def binary(name, var):
        s, vr = made[name]
        return bytes(s.getBinary([vr[var]])[0])

    got = {k: [] for k in ("tx/fmu.label", "a/fmu.t_out", "b/fmu.t_out")}
    if version == "3.0":
        got |= {k: [] for k in ("tx/fmu.data", "a/fmu.bin_out", "b/fmu.bin_out")}
    for k in range(STEPS + 1):
        label = text("tx", "label")
        made["a"][0].setString([made["a"][1]["t_in"]], [label])
        a_out = text("a", "t_out")
        made["b"][0].setString([made["b"][1]["t_in"]], [a_out])
        got["tx/fmu.label"].append(label)
        got["a/fmu.t_out"].append(a_out)
        got["b/fmu.t_out"].append(text("b", "t_out"))
        if version == "3.0":
            data = binary("tx", "data")
            made["a"][0].setBinary([made["a"][1]["bin_in"]], [data])
            a_bin = binary("a", "bin_out")
            made["b"][0].setBinary([made["b"][1]["bin_in"]], [a_bin])
            got["tx/fmu.data"].append(data)
            got["a/fmu.bin_out"].append(a_bin)
            got["b/fmu.bin_out"].append(binary("b", "bin_out"))
        if k < STEPS:
            for s, _ in made.values():
                s.doStep(k * H, H)
    for s, _ in made.values():
        s.terminate()
        s.freeInstance()
    return got


@contextlib.contextmanager
def served(model, tmp_path):
    """The FMU blocks of ``model`` as units behind one ``cosim serve``; yields its
    address."""
    unit_file = tmp_path / "fmus.yaml"
    m = Model("served")
    m.add(*[b for b in model.blocks if isinstance(b, FmuBlock)])
    m.to_yaml(unit_file, simulation=SimulationConfig(dt=H, t_end=0.0))
    server = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file),
                               "--bind", "tcp://127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        yield server.stdout.readline().strip().rsplit(" on ", 1)[1]
    finally:
        server.terminate()
        server.wait(timeout=30)


def run(fmus, path, tmp_path=None, **cosim) -> Logs:
    cfg = SimulationConfig(dt=H, t_end=STEPS * H)
    if path == "monolithic":
        return Simulator(chain(fmus), cfg).run()
    model = chain(fmus)
    with contextlib.ExitStack() as stack:
        if path == "served":
            address = stack.enter_context(served(model, tmp_path))
            cosim["units"] = {b.name: {"address": address} for b in model.blocks}
            cosim["backend"] = "zmq"
        elif path == "ray":
            cosim["backend"] = "ray"
        sim = CoSimulation(model, SimulationConfig(dt=H, t_end=STEPS * H,
                                                   cosim=CosimConfig(H=H, **cosim)))
        stack.callback(sim.close)
        return sim.run()


def check(logs: Logs, want: dict, cosim: bool) -> None:
    for key, values in want.items():
        if not cosim:
            key = key.replace("/fmu", "")
        got = logs[key]
        assert got.dtype == object and got.shape == (STEPS + 1, 1), (key, got)
        assert got[:, 0].tolist() == values, key
        np.testing.assert_array_equal(logs.time_of(key), np.arange(STEPS + 1) * H)


@pytest.mark.parametrize("opts", [{}, {"engine": False}, {"extrapolation": 2},
                                  {"scheme": "gauss-seidel", "extrapolation": 1},
                                  {"feedthrough": "delay"}],
                         ids=["engine", "protocol", "extrapolation2", "gauss-seidel", "delay"])
def test_text_ports_travel_fmu_to_fmu_in_process_as_fmpy_passes_them(fmus, opts):
    want = fmpy_chain(fmus)
    assert want["b/fmu.t_out"] == [f"tick {k}" for k in range(STEPS + 1)]   # (the oracle)
    if opts.get("feedthrough") == "delay":
        # The classic exchange: each unit reads the others' outputs of the point before.
        want = {k: v if k.startswith("tx") else
                [v[0]] + v[:-1] if k.startswith("a") else [v[0]] * 2 + v[:-2]
                for k, v in want.items()}
    check(run(fmus, "local", **opts), want, cosim=True)


def test_text_ports_travel_fmu_to_fmu_in_a_monolithic_run(fmus):
    check(run(fmus, "monolithic"), fmpy_chain(fmus), cosim=False)


def test_text_ports_of_model_exchange_fmus_are_set_in_event_mode(fmus):
    """The same chain of model-exchange FMU blocks: a text input that changes at a tick is
    set in event mode there (FMI's rule for discrete inputs); the texts at the ticks are
    those fmpy's co-simulation instances pass (the models' text follows time only)."""
    from blocks.fmu import ModelExchangeFmuBlock
    version, texter, types = fmus
    m = Model("me")
    start = {"n": 3} if version == "3.0" else {}
    m.add(ModelExchangeFmuBlock("tx", texter), ModelExchangeFmuBlock("a", types, start),
          ModelExchangeFmuBlock("b", types, start))
    m.connect("tx.label", "a.t_in")
    m.connect("a.t_out", "b.t_in")
    if version == "3.0":
        m.connect("tx.data", "a.bin_in")
        m.connect("a.bin_out", "b.bin_in")
    assert m.blocks[1].input_kinds["t_in"] == "String"
    check(Simulator(m, SimulationConfig(dt=H, t_end=STEPS * H)).run(), fmpy_chain(fmus),
          cosim=False)


@pytest.mark.cluster
@pytest.mark.parametrize("path", ["served", "ray"])
def test_text_ports_travel_fmu_to_fmu_remotely(ray_session, fmus, path, tmp_path):
    check(run(fmus, path, tmp_path), fmpy_chain(fmus), cosim=True)


def test_an_fmu_unit_with_text_ports_takes_separate_requests(fmus):
    version, texter, types = fmus
    u = FmuUnit(types, "a", {"n": 3} if version == "3.0" else {}, step=H)
    desc = u.describe()
    assert P.FUSED_STEP not in desc.capabilities       # the fused step packs float64 only
    assert "t_in" in {p.name for p in desc.inputs} and "t_out" in {p.name for p in desc.outputs}
    u.initialize(0.0)
    try:
        text = np.empty(1, dtype=object)
        text[0] = "héllo"
        assert u.handle(P.SetInputs({"t_in": text})) == P.Ok()
        out = u.handle(P.GetOutputs()).values
        assert out["t_out"].dtype == object and out["t_out"].tolist() == ["héllo"]
        bad = u.handle(P.SetInputs({"t_in": np.array([1.0])}))
        assert isinstance(bad, P.ErrorReply) and "'t_in' is an FMI String" in bad.message
    finally:
        u.terminate()


def test_a_text_port_wired_to_a_number_is_refused_naming_both_ends(fmus):
    version, texter, types = fmus
    m = Model("m")
    m.add(FmuBlock("tx", texter, H), FmuBlock("a", types, H, {"n": 3} if version == "3.0"
                                              else {}), Gain("g", 2.0), Constant("c", 1.0))
    m.connect("tx.label", "g.in")
    m.connect("c.out", "a.t_in")
    with pytest.raises(CompileError) as err:
        Simulator(m, SimulationConfig(dt=H, t_end=H))
    msg = str(err.value)
    assert "tx.label (String) -> g.in (numeric input)" in msg
    assert "c.out (numeric) -> a.t_in (String input)" in msg
    if version == "3.0":
        m = Model("m")
        m.add(FmuBlock("tx", texter, H), FmuBlock("a", types, H, {"n": 3}))
        m.connect("tx.label", "a.bin_in")
        with pytest.raises(CompileError, match=r"tx.label \(String\) -> a.bin_in \(Binary "):
            Simulator(m, SimulationConfig(dt=H, t_end=H))


@pytest.mark.parametrize("suffix", [".csv", ".h5"])
def test_text_logs_are_written_and_read_back_exactly(fmus, suffix, tmp_path):
    logs = run(fmus, "local")
    back = Logs.load(logs.save(tmp_path / f"results{suffix}"))
    assert set(back) == set(logs)
    for key in logs:
        assert back[key].dtype == logs[key].dtype, key
        assert back[key].tolist() == logs[key].tolist(), key
        np.testing.assert_array_equal(back.time_of(key), logs.time_of(key))
    with pytest.raises(ValueError, match="hold text"):
        logs.save(tmp_path / "results.npz")


def test_unlinked_text_ports_keep_the_compiled_exchange(fmus, tmp_path):
    """Units whose text ports are unlinked still step through the compiled exchange (it
    carries the numbers, the units log their text), bit for bit the protocol path; a linked
    text output takes the protocol path. (FMI 3.0: a lag beside the texter; the types FMU
    has array ports, which the exchange does not carry.)"""
    version, texter, types = fmus
    m = Model("m")
    if version == "2.0":
        m.add(FmuBlock("tx", texter, H), FmuBlock("a", types, H))
        m.connect("tx.n", "a.i_in")
    else:
        m.add(FmuBlock("tx", texter, H), FmuBlock("a", str(build_fmu(LAG, version,
                                                                     tmp_path / "lag")), H))
        m.connect("tx.n", "a.u")
    runs = {}
    for compiled in (True, False):
        sim = CoSimulation(m, SimulationConfig(dt=H, t_end=STEPS * H, cosim=CosimConfig(
            H=H, compiled=compiled)))
        runs[compiled] = sim.run()
        assert (sim.master.compiled is not None and sim.master.compiled.steps > 0) \
            == compiled
    for key in runs[False]:
        assert runs[True][key].tolist() == runs[False][key].tolist(), key
    assert runs[True]["tx/fmu.label"][:, 0].tolist() == [f"tick {k}"
                                                         for k in range(STEPS + 1)]
    if version == "2.0":
        assert runs[True]["a/fmu.t_out"][:, 0].tolist() == ["Set me!"] * (STEPS + 1)
    linked = CoSimulation(chain(fmus), SimulationConfig(dt=H, t_end=H, cosim=CosimConfig(H=H)))
    linked.run()
    assert linked.master.compiled is None


@pytest.mark.parametrize("log, keys", [
    ((), set()), (("a.t_out",), {"a/fmu.t_out"}), (("tx/fmu.label", "b.t_out"),
                                                  {"tx/fmu.label", "b/fmu.t_out"}),
    (("tx/fmu.n",), {"tx/fmu.n"})])
def test_fmu_units_log_the_selection(fmus, log, keys):
    """An FMU unit logs the signals SimulationConfig.log selects (as "f/fmu.y" or as the
    monolithic "f.y"), the same samples as when it logs everything."""
    full = run(fmus, "local")
    model = chain(fmus)
    got = CoSimulation(model, SimulationConfig(dt=H, t_end=STEPS * H, log=log,
                                               cosim=CosimConfig(H=H))).run()
    assert set(got) == keys
    for key in keys:
        assert got[key].tolist() == full[key].tolist(), key


def test_cosim_run_shows_and_writes_text_signals(fmus, tmp_path):
    """``cosim run`` of a model file with a text chain prints the last strings and writes
    them to the results file."""
    path = tmp_path / "chain.yaml"
    chain(fmus).to_yaml(path, simulation=SimulationConfig(dt=H, t_end=STEPS * H))
    out = tmp_path / "results.csv"
    done = subprocess.run([sys.executable, "-m", "cosim.cli", "run", str(path), "--out",
                           str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"'tick {STEPS}'" in done.stdout
    assert Logs.load(out)["b.t_out"][:, 0].tolist() == [f"tick {k}"
                                                         for k in range(STEPS + 1)]


def test_a_dashboard_shows_text_links_and_plots_numbers_only(fmus):
    import json
    import urllib.request
    from cosim.dashboard import Dashboard
    with Dashboard() as board:
        sim = CoSimulation(chain(fmus), SimulationConfig(dt=H, t_end=STEPS * H,
                                                         cosim=CosimConfig(H=H)),
                           dashboard=board)
        sim.run()
        url = board.url.replace("/?", "/state.json?")
        state = json.loads(urllib.request.urlopen(url, timeout=10).read())["set"]
        sim.close()
    assert state["links"]["b.t_out"] == [f"tick {STEPS}"]
    assert not any("t_out" in k or "label" in k for k in state["signal_keys"])


@pytest.mark.parametrize("cosim", [None, CosimConfig(H=H)])
def test_a_checkpoint_keeps_text_logs_and_a_resumed_run_continues_them(fmus, cosim,
                                                                        tmp_path):
    """Text logs go into a checkpoint file without pickling (read back with pickling off)
    and a run resumed from it equals the run that never stopped, its text included."""
    cfg = SimulationConfig(dt=H, t_end=STEPS * H, cosim=cosim)
    make = Simulator if cosim is None else CoSimulation
    ref = make(chain(fmus), cfg).run()
    first = make(chain(fmus), cfg)
    first.run(t_end=STEPS // 2 * H)
    first.save_checkpoint(tmp_path / "cp")
    again = make(chain(fmus), cfg)
    again.load_checkpoint(tmp_path / "cp")
    logs = again.run()
    for run in (first, again):
        if cosim is not None:
            run.close()
    assert any(ref[k].dtype == object for k in ref)
    assert sorted(logs) == sorted(ref)
    for k in ref:
        assert logs[k].tolist() == ref[k].tolist(), k
        np.testing.assert_array_equal(logs.time_of(k), ref.time_of(k), err_msg=k)
