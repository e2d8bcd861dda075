"""Ports and addresses of a Ray run: the data-plane port range, the connection check at
start-up, the command-line flags (no Ray cluster needed)."""

from __future__ import annotations

import socket
import time

import pytest
import zmq

from cluster.dataplane import bind_port
from cluster.ray_backend import check_ports, ensure_ray
from cluster.reach import Unreachable, check_reachable
from cosim import ModelError
from cosim.cli.common import Usage
from cosim.cli.options import port_range, runtime_env_file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_reachable_port_passes_and_a_closed_one_is_named_at_once():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_reachable(f"tcp://127.0.0.1:{server.getsockname()[1]}", 5.0, "a test server")
    port = free_port()                      # nothing listens there any more
    start = time.monotonic()
    with pytest.raises(Unreachable, match=rf"cannot reach the unit actor of a at 127\.0\.0\.1 "
                                          rf"port {port} from .*: connection refused"):
        check_reachable(f"tcp://127.0.0.1:{port}", 5.0, "the unit actor of a")
    assert time.monotonic() - start < 5.0


def test_the_data_plane_binds_in_the_port_range_and_names_a_full_one():
    ctx = zmq.Context.instance()
    lo = free_port()
    socks = []
    try:
        a = ctx.socket(zmq.REP)
        socks.append(a)
        assert bind_port(a, "127.0.0.1", (lo, lo)) == lo
        b = ctx.socket(zmq.REP)
        socks.append(b)
        with pytest.raises(ModelError, match=rf"no free port in the range {lo}-{lo} on "
                                             r"127\.0\.0\.1: widen the range"):
            bind_port(b, "127.0.0.1", (lo, lo))
    finally:
        for s in socks:
            s.close(linger=0)


@pytest.mark.parametrize("ports", [(50000, 49999), (80, 90), ("a", "b"), (1.5, 2000), (1,)])
def test_a_bad_port_range_is_refused_with_its_form(ports):
    with pytest.raises(ModelError, match=r"give the data-plane port range as \(low, high\)"):
        check_ports(ports)


def test_port_range_and_runtime_env_flags(tmp_path):
    assert port_range("50000-50100") == (50000, 50100)
    with pytest.raises(Usage, match="--ports '50100-50000': give LOW-HIGH"):
        port_range("50100-50000")
    env = tmp_path / "env.yaml"
    env.write_text("env_vars: {A: '1'}\npy_modules: [mypkg]\n")
    assert runtime_env_file(str(env)) == {"env_vars": {"A": "1"}, "py_modules": ["mypkg"]}
    env.write_text("- a list\n")
    with pytest.raises(Usage, match="expected a mapping"):
        runtime_env_file(str(env))


def test_ray_client_addresses_are_refused():
    with pytest.raises(ModelError, match=r"Ray Client \(ray://\) is not supported: .* run "
                                         r"the driver on a node of the cluster"):
        ensure_ray("ray://10.0.0.1:10001")


def test_cosim_sweep_takes_ray_address_and_the_old_address_flag(tmp_path, capsys):
    from cluster.sweep import main
    # A Ray Client address is refused before any run, whichever flag gave it.
    for flag in ("--ray-address", "--address"):
        code = main(["examples/servo.yaml", "--out", str(tmp_path / flag), "--grid",
                     "kp=1,2", "--backend", "ray", flag, "ray://10.0.0.1:10001"])
        err = capsys.readouterr().err
        assert code == 2 and "Ray Client (ray://) is not supported" in err
        assert ("--address is deprecated: use --ray-address" in err) == (flag == "--address")
    assert main(["examples/servo.yaml", "--out", str(tmp_path / "p"), "--grid", "kp=1",
                 "--ports", "9-8"]) == 2
    assert "--ports '9-8': give LOW-HIGH" in capsys.readouterr().err


def test_cosim_run_takes_ports_and_a_runtime_env_file(tmp_path):
    import argparse

    from cosim import Model
    from cosim.cli.options import add_cosim_arguments, run_config
    parser = argparse.ArgumentParser()
    parser.add_argument("--t-end", type=float, dest="t_end")
    add_cosim_arguments(parser)
    env = tmp_path / "env.json"
    env.write_text('{"env_vars": {"OMP_NUM_THREADS": "1"}}')
    args = parser.parse_args(["--backend", "ray", "--ray-address", "auto", "--ports",
                              "50000-50010", "--runtime-env", str(env)])
    cfg = run_config(Model.from_yaml("examples/servo.yaml"), "servo.yaml", args).cosim
    assert (cfg.backend, cfg.address, cfg.ports, cfg.runtime_env) == (
        "ray", "auto", (50000, 50010), {"env_vars": {"OMP_NUM_THREADS": "1"}})
