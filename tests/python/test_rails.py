# SPDX-License-Identifier: Apache-2.0
"""Rails from the API side, without a device (issue 23): rdma.devices and
rdma.near_gpu checked and chosen before any device is opened. The transfers
over two rails are the RDMA suite's (tests/rxe/scenarios/rails.sh)."""
import errno
import logging
import os

import pytest

import kvferry
from kvferry import KVFerryError


def _fake_sysfs(root):
    """A GPU and two NICs behind one PCIe switch, a third on another root port
    of the same NUMA node (KVF_SYSFS_ROOT: src/rdma/rail_pick.c)."""
    pci = {
        "gpu": "pci0000:30/0000:30:02.0/0000:31:00.0/0000:32:01.0/0000:33:00.0",
        "mlx5_0": "pci0000:30/0000:30:02.0/0000:31:00.0/0000:32:02.0/0000:34:00.0",
        "mlx5_1": "pci0000:30/0000:30:02.0/0000:31:00.0/0000:32:03.0/0000:35:00.0",
        "mlx5_2": "pci0000:30/0000:30:03.0/0000:40:00.0",
    }
    for name, path in pci.items():
        d = os.path.join(root, "devices", path)
        os.makedirs(d)
        with open(os.path.join(d, "numa_node"), "w") as f:
            f.write("0\n")
        bdf = path.rsplit("/", 1)[1]
        os.makedirs(os.path.join(root, "bus/pci/devices"), exist_ok=True)
        os.symlink(d, os.path.join(root, "bus/pci/devices", bdf))
        if name != "gpu":
            ib = os.path.join(root, "class/infiniband", name)
            os.makedirs(ib)
            os.symlink(d, os.path.join(ib, "device"))
    return "0000:33:00.0"


def test_devices_listed_twice_or_empty_are_refused():
    for bad in ("rxe0,rxe0", "rxe0,,rxe1", "a b"):
        with pytest.raises(KVFerryError) as ei:
            kvferry.Engine(overrides={"rdma.devices": bad})
        assert ei.value.errno == errno.EINVAL


def test_a_peer_may_be_a_rail_list_and_a_bad_one_is_named():
    with kvferry.Engine() as e:
        r = e.receiver(1, "10.0.0.1:5000,10.0.1.1:5000")
        assert r.role == "receiver"
        with pytest.raises(KVFerryError) as ei:
            e.receiver(2, "10.0.0.1:5000,10.0.1.1")
        assert ei.value.errno == errno.EINVAL


def test_near_gpu_takes_the_nics_behind_its_switch(tmp_path, monkeypatch, caplog):
    gpu = _fake_sysfs(str(tmp_path))
    monkeypatch.setenv("KVF_SYSFS_ROOT", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="kvferry"):
        # the choice is made and logged; opening the devices then fails here
        with pytest.raises(KVFerryError):
            kvferry.Engine(overrides={"rdma.near_gpu": gpu,
                                      "rdma.devices": "mlx5_2,mlx5_1,mlx5_0"})
    lines = [r.getMessage() for r in caplog.records if "near_gpu" in r.getMessage()]
    assert lines and "mlx5_0, mlx5_1 behind the same PCIe switch" in lines[0], lines


def test_near_gpu_unknown_is_an_error_naming_it(tmp_path, monkeypatch, caplog):
    _fake_sysfs(str(tmp_path))
    monkeypatch.setenv("KVF_SYSFS_ROOT", str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="kvferry"):
        with pytest.raises(KVFerryError) as ei:
            kvferry.Engine(overrides={"rdma.near_gpu": "0000:99:00.0"})
    assert ei.value.errno == errno.ENOENT
    assert any("0000:99:00.0" in r.getMessage() for r in caplog.records)
