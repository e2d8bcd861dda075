"""Checkpoint files that cannot be torn or mixed: one file written under a temporary name and
renamed into place, carrying the model's structure fingerprint, parameter values, run id and
the logs so far. A checkpoint of another model or other parameter values is refused naming
what differs; a damaged file is refused with a clear error; a failed write (no space, I/O
error, at every step of the write; a real full tmpfs; the writer killed at any moment) leaves
the previous checkpoint whole and resumable bit for bit; an unusable checkpoint path is found
when the co-simulation is made."""

import errno
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from blocks import Gain, Sine
from blocks.continuous import Integrator
from cosim import CoSimulation, CosimConfig, Model, ModelError, SimulationConfig, Simulator
from cosim.run import checkpoint
from tests.cluster.scenarios import motor_pi

ROOT = Path(__file__).resolve().parents[2]


def plant(k=0.5) -> Model:
    """x' = k sin t (a model parameter), the monolithic test model."""
    m = Model("plant", parameters={"k": k})
    m.add(Sine("s"), Gain("g", "=k"), Integrator("x", 0.0))
    m.connect("s.out", "g.in")
    m.connect("g.out", "x.in")
    return m


MONO = SimulationConfig(dt=0.01, t_end=2.0)


def cosim(R=1.0, **options):
    m = motor_pi()
    m.parameters["R"] = R
    return CoSimulation(m, SimulationConfig(dt=0.001, t_end=0.4,
                                            cosim=CosimConfig(H=0.01, **options)))


def same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key), err_msg=key)
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_a_cosimulation_checkpoint_is_one_file_and_resumes_with_its_logs(tmp_path):
    with cosim() as sim:
        ref = sim.run()
    with cosim() as sim:
        sim.run(t_end=0.2)
        sim.save_checkpoint(tmp_path / "cp")
    assert [p.name for p in tmp_path.iterdir()] == ["cp.npz"]
    with cosim() as sim:
        sim.load_checkpoint(tmp_path / "cp.npz")
        same(ref, sim.run())                 # from t0: the logs before it came with it


@pytest.mark.parametrize("kind", ["simulation", "co-simulation"])
def test_a_checkpoint_of_other_parameter_values_is_refused_naming_them(tmp_path, kind):
    if kind == "simulation":
        sim = Simulator(plant(0.5), MONO)
        sim.run(t_end=0.5)
        sim.save_checkpoint(tmp_path / "cp")
        with pytest.raises(ModelError) as err:
            Simulator(plant(0.7), MONO).load_checkpoint(tmp_path / "cp")
        assert "k = 0.5 in the checkpoint, 0.7 in the model" in str(err.value)
        Simulator(plant(0.5), MONO).load_checkpoint(tmp_path / "cp")      # its own: loads
    else:
        with cosim(R=1.0) as sim:
            sim.run(t_end=0.1)
            sim.save_checkpoint(tmp_path / "cp")
        with cosim(R=2.0) as sim, pytest.raises(ModelError) as err:
            sim.load_checkpoint(tmp_path / "cp")
        assert "R = 1.0 in the checkpoint, 2.0 in the model" in str(err.value)
    assert "is of another model" in str(err.value) and "cp.npz" in str(err.value)


def test_a_checkpoint_of_another_structure_is_refused(tmp_path):
    sim = Simulator(plant(), MONO)
    sim.run(t_end=0.5)
    sim.save_checkpoint(tmp_path / "cp")
    other = plant()
    other.add(Gain("extra", 2.0))
    other.connect("x.out", "extra.in")
    with pytest.raises(ModelError, match="structure differs"):
        Simulator(other, MONO).load_checkpoint(tmp_path / "cp")


def _damage(path: Path, how: str, rng) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[:len(data) // 2]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "bytes flipped":
        for i in rng.integers(0, len(data), 8):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "random":
        path.write_bytes(rng.bytes(len(data)))
    elif how == "text":
        path.write_text('{"format": 3, "kind": "simulation"}')
    elif how == "no description":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("x.npy", b"")
    elif how == "other description":
        meta = np.frombuffer(b'[1, 2, 3]', dtype=np.uint8)
        with open(path, "wb") as fh:
            np.savez(fh, __meta__=meta)


@pytest.mark.parametrize("how", ["truncated", "empty", "bytes flipped", "random", "text",
                                 "no description", "other description"])
def test_a_damaged_checkpoint_is_refused_with_a_clear_error(tmp_path, how):
    sim = Simulator(plant(), MONO)
    sim.run(t_end=0.5)
    sim.save_checkpoint(tmp_path / "cp")
    _damage(tmp_path / "cp.npz", how, np.random.default_rng(len(how)))
    with pytest.raises(ModelError, match=r"cp\.npz (is damaged|has format|is of)") as err:
        Simulator(plant(), MONO).load_checkpoint(tmp_path / "cp")
    assert len(str(err.value)) < 600


def test_a_checkpoint_in_the_old_two_file_format_is_refused_naming_why(tmp_path):
    (tmp_path / "cp.json").write_text('{"format": 2}')
    with pytest.raises(ModelError, match="format 2"):
        Simulator(plant(), MONO).load_checkpoint(tmp_path / "cp")


class Fault:
    """Raises OSError(code) in place of ``name`` of cosim.run.checkpoint's os or numpy, after
    writing part of the file when it is the write itself."""

    def __init__(self, code):
        self.code = code

    def __call__(self, *args, **kwargs):
        if args and hasattr(args[0], "write"):
            args[0].write(b"PK\x03\x04 partial")
        raise OSError(self.code, os.strerror(self.code))


@pytest.mark.parametrize("step", ["np.savez", "os.fsync", "os.replace"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failed_write_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch, step,
                                                            code):
    ref = Simulator(plant(), MONO).run()
    sim = Simulator(plant(), MONO)
    sim.run(t_end=0.5)
    sim.save_checkpoint(tmp_path / "cp")
    sim.run(t_end=1.0)
    module, name = step.split(".")
    with monkeypatch.context() as m:
        m.setattr(getattr(checkpoint, module), name, Fault(code))
        with pytest.raises(ModelError) as err:
            sim.save_checkpoint(tmp_path / "cp")
    assert os.strerror(code) in str(err.value) and "unchanged" in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["cp.npz"]       # no temporary left
    other = Simulator(plant(), MONO)
    other.load_checkpoint(tmp_path / "cp")
    assert other.t == pytest.approx(0.5)
    same(ref, other.run())


@pytest.fixture
def small_disk(tmp_path):
    """A mounted tmpfs of 40 KiB (root only), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_leaves_the_previous_checkpoint_whole(small_disk):
    ref = Simulator(plant(), MONO).run()
    sim = Simulator(plant(), MONO)
    sim.run(t_end=0.3)
    sim.save_checkpoint(small_disk / "cp")          # fits
    size = (small_disk / "cp.npz").stat().st_size
    with open(small_disk / "ballast", "wb", buffering=0) as fh:   # then the disk fills up
        with pytest.raises(OSError, match="No space"):
            while True:
                fh.write(b"\0" * 1024)
    sim.run(t_end=1.0)
    with pytest.raises(ModelError, match="No space left on device"):
        sim.save_checkpoint(small_disk / "cp")
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast", "cp.npz"]
    assert (small_disk / "cp.npz").stat().st_size == size
    other = Simulator(plant(), MONO)
    other.load_checkpoint(small_disk / "cp")
    same(ref, other.run())


WRITER = """
import sys
from tests.cosim.test_checkpoint_files import plant, MONO
from cosim import Simulator
from dataclasses import replace
sim = Simulator(plant(), replace(MONO, t_end=1e6))
t = 0.0
print("ready", flush=True)
while True:
    t += 0.5
    sim.run(t_end=t)
    sim.save_checkpoint(sys.argv[1])
"""


@pytest.mark.slow
def test_a_writer_killed_at_any_moment_leaves_a_whole_checkpoint(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "cp"
    loaded = []
    for i in range(6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3 + float(rng.uniform(0.0, 1.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not (tmp_path / "cp.npz").exists():
            continue                                 # killed before its first checkpoint
        sim = Simulator(plant(), MONO)
        sim.load_checkpoint(path)                    # whole: the old one or the new one
        loaded.append(sim.t)
    assert loaded, "no checkpoint was written before the kills"
    print(f"loaded checkpoints at t = {loaded}")


def test_an_unusable_checkpoint_path_is_found_when_the_cosimulation_is_made(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        cosim(checkpoint_path=str(tmp_path / "missing" / "cp"))
    (tmp_path / "file").write_text("")
    with pytest.raises(ModelError, match="checkpoint path"):
        cosim(checkpoint_path=str(tmp_path / "file" / "cp"))
    with cosim(checkpoint_path=str(tmp_path / "cp")) as sim:     # a usable one: runs
        sim.run(t_end=0.02)
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]       # the probe is gone
