"""Fixtures of the cluster tests: a real three-node Ray cluster on this machine."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.cluster.raynodes import RayNodes

#: Custom resources of the three nodes: the head, and two worker nodes.
HEAD = {"head": 4}
WORKERS = [{"n2": 1, "plant": 2}, {"n3": 1, "plant": 2}]


@pytest.fixture(scope="module")
def ray_nodes():
    """A head (the machine's address) and worker nodes on 127.0.0.2 and 127.0.0.3, one CPU
    each, joined by this process as the driver. A local Ray this process had started before
    is shut down first and started again after (as the session fixture made it)."""
    import ray
    was = ray.is_initialized()
    if was:
        ray.shutdown()
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    # Short: Ray's socket paths under a node's temp directory are limited to ~100 bytes.
    root = tempfile.mkdtemp(prefix="rn", dir="/tmp")
    nodes = RayNodes(root, HEAD, WORKERS)
    try:
        nodes.start()
        nodes.connect()
        yield nodes
    finally:
        ray.shutdown()
        nodes.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        from ray._private.authentication_test_utils import reset_auth_token_state
        reset_auth_token_state()
        shutil.rmtree(root, ignore_errors=True)
        if was:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
