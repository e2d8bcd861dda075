"""Owners of a server's units on real connections: a master is freed when its connection
closes, not by a late report of another connection that had the same descriptor."""

import socket

import pytest

from cluster.owners import Owners
from cosim.master import protocol as P

CHANGE = [P.Hello(P.PROTOCOL_VERSION, "m"), P.Initialize(0.0)]


@pytest.fixture
def connect():
    """``connect()``: the server side of a fresh loopback TCP connection and its client."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    made = []

    def make():
        client = socket.create_connection(listener.getsockname())
        served, _ = listener.accept()
        made.extend((client, served))
        return served, client
    yield make
    for s in made:
        s.close()
    listener.close()


def test_a_late_report_of_a_descriptors_earlier_connection_frees_nothing(connect):
    """The monitor's report that connection ``fd`` closed may come after the number was
    given to a new connection on which a master claimed a unit: ignored while that
    connection is open; a report once it closed frees the unit."""
    owners = Owners(lease=60.0)
    served, client = connect()
    owners.claim(b"master", "a", CHANGE, 0.0, served.fileno())
    owners.disconnected(served.fileno(), reported=True)       # a late one: still open
    assert owners.units["a"].master == b"master"
    assert owners.refusal(b"other", "a", [P.Initialize(0.0)], 0.0) is not None
    client.close()                                             # the master leaves
    owners.disconnected(served.fileno(), reported=True)
    assert "a" not in owners.units
    assert owners.refusal(b"other", "a", [P.Initialize(0.0)], 0.0) is None


def test_a_master_whose_connection_closed_is_free_before_the_report(connect):
    owners = Owners(lease=60.0)
    served, client = connect()
    owners.claim(b"master", "a", CHANGE, 0.0, served.fileno())
    assert owners.may_free(b"other", "a") and not owners.may_free(b"master", "a")
    client.close()
    assert owners.refusal(b"other", "a", [P.Initialize(0.0)], 0.0) is None   # (peeked)
