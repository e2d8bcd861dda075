"""FMUs as libcosim slaves for the comparison tests and benchmarks (libcosimpy).

libcosim 0.0.6's C library (``libcosimc``) imports FMI 1.0 and 2.0 only: it has no FMI 3.0
import at all (no ``fmi3_`` function of the FMI Library in it), so
``cosim_local_slave_create`` of an FMI 3.0 FMU fails with "Unsupported feature: Unsupported
FMI version" and returns a null pointer, which libcosimpy does not check: the next call
(``CosimExecution.add_local_slave``) dereferences it and the process dies of a segmentation
fault. That is libcosim's limitation, not cosim's (``test_libcosim_has_no_fmi3_import``
holds it); comparisons with libcosim therefore skip FMI 3.0 FMUs, naming this reason.
"""

from __future__ import annotations

import zipfile
from xml.etree import ElementTree

import pytest

#: Why a comparison with libcosim skips an FMI 3.0 FMU.
NO_FMI3 = ("libcosim (libcosimpy 0.0.6) imports FMI 1.0 and 2.0 only: an FMI 3.0 FMU is "
           "'Unsupported FMI version' there, and libcosimpy then dereferences the null slave "
           "(a segmentation fault); tests/cluster/libcosim_slaves.py")


def fmi_version(path) -> str:
    """The ``fmiVersion`` of the FMU file ``path``."""
    with zipfile.ZipFile(path) as z:
        return ElementTree.fromstring(z.read("modelDescription.xml")).get("fmiVersion")


def add_slave(execution, path, name: str) -> int:
    """Add FMU ``path`` to libcosim ``execution`` as slave ``name``; its index.

    An FMI 3.0 FMU skips the calling test (:data:`NO_FMI3`); a slave libcosim cannot make
    is an error with libcosim's own message, never a null pointer handed on.
    """
    from libcosimpy._internal import get_last_error_message
    from libcosimpy.CosimSlave import CosimLocalSlave
    if fmi_version(path).startswith("3"):
        pytest.skip(NO_FMI3)
    slave = CosimLocalSlave(fmu_path=str(path), instance_name=name)
    if not slave.ptr():
        raise RuntimeError(f"libcosim cannot load {path}: {get_last_error_message()}")
    return execution.add_local_slave(slave)
