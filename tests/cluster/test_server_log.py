"""``cosim serve``'s log names every client's address: the connections, the departures and
the refusals (a failed handshake's event carries no connection, only an error code), whether
the refused client is alone or beside a master that is connected."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.zmq_backend import ZmqProxy
from cosim import SimulationConfig, TransportError
from tests.cluster.scenarios import three_units

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
ADDRESS = r"127\.0\.0\.1:\d+"


def test_every_client_is_named_by_its_address(tmp_path):
    import zmq.auth
    keys, allowed = tmp_path / "keys", tmp_path / "allowed"
    keys.mkdir()
    allowed.mkdir()
    server_pub, server_sec = zmq.auth.create_certificates(keys, "server")
    good_pub, good_sec = zmq.auth.create_certificates(keys, "good")
    _, bad_sec = zmq.auth.create_certificates(keys, "bad")
    (allowed / "good.key").write_bytes(Path(good_pub).read_bytes())
    model = three_units()
    model.blocks = [model["a"]]
    model.connections = []
    path = tmp_path / "plant.yaml"
    model.to_yaml(path, simulation=SimulationConfig(dt=0.002, t_end=0.0))
    proc = subprocess.Popen([sys.executable, "-m", "cluster.server", str(path), "--bind",
                             "tcp://127.0.0.1:0", "--curve-secret", server_sec,
                             "--authorized", str(allowed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        address = proc.stdout.readline().strip().rsplit(" on ", 1)[1]
        good = ZmqProxy("a", address, timeout=30.0, curve_server_public=server_pub,
                        curve_client_keys=good_sec)
        with pytest.raises(TransportError):             # refused beside a connected master
            ZmqProxy("a", address, timeout=1.0, curve_server_public=server_pub,
                     curve_client_keys=bad_sec)
        good.close()
        with pytest.raises(TransportError):             # refused alone
            ZmqProxy("a", address, timeout=1.0, curve_server_public=server_pub,
                     curve_client_keys=bad_sec)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    lines = [line.split(" INFO ", 1)[-1].split(" WARNING ", 1)[-1] for line in
             err.splitlines() if "cosim.server" in line]
    connected = [m.group(1) for line in lines
                 if (m := re.fullmatch(rf"a client connected from ({ADDRESS})", line))]
    left = [m.group(1) for line in lines
            if (m := re.fullmatch(rf"the client from ({ADDRESS}) left", line))]
    refused = [m.group(1) for line in lines if (m := re.fullmatch(
        rf"refused a client from ({ADDRESS}): handshake failed \(authentication.*\)", line))]
    # Every line about a client names its address, or says that the connection closed
    # before it could be read (a refused client's quick reconnection).
    gone = [line for line in lines
            if line in ("a client connected and closed before its address could be read",
                        "the client from an address no longer readable left")
            or re.fullmatch(r"refused a client from an address no longer readable: .*", line)]
    about_clients = [line for line in lines if "client" in line]
    assert len(about_clients) == len(connected) + len(left) + len(refused) + len(gone), \
        about_clients
    assert not [line for line in about_clients if "from ?" in line]
    assert len(refused) >= 2 and set(refused) <= set(connected)
    assert connected[0] not in refused                  # the authorized master
    assert set(left) <= set(connected)
