"""A made-up sysfs for the RDMA tests (test_rdma.py, test_network.py): an HCA with SR-IOV
virtual functions laid out as the agent reads them (allot-agent --sysfs DIR; see
src/agent/rdma.h and docs/network.md, "RDMA and InfiniBand")."""

import os

UVERBS_MAJOR = 231  # infiniband_verbs


def vf_names(k, netdev="rvf"):
    """VF k's PCI address, netdev, RDMA device, uverbs node and its minor."""
    return {"pci": "0000:3b:%02x.%x" % ((k + 1) // 8, (k + 1) % 8), "netdev": "%s%d" % (netdev, k),
            "device": "mlx5_%d" % (k + 1), "uverbs": "uverbs%d" % (k + 1), "minor": 193 + k}


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def sysfs_tree(root, vfs=3, netdev="rvf"):
    """Builds ROOT/class and ROOT/devices: RDMA device mlx5_0 (PCI device 0000:3b:00.0, also
    seen as the netdev ib0) with `vfs` VFs, VF k with its netdev NETDEVk, RDMA device
    mlx5_(k+1) and uverbs node uverbs(k+1) (231:193+k). Returns vf_names of each VF."""
    pf = os.path.join(root, "devices", "pci0000:3a", "0000:3b:00.0")
    _write(os.path.join(pf, "sriov_numvfs"), "%d\n" % vfs)
    out = []
    for k in range(vfs):
        n = vf_names(k, netdev)
        vf = os.path.join(root, "devices", "pci0000:3a", n["pci"])
        os.makedirs(os.path.join(vf, "net", n["netdev"]))
        os.makedirs(os.path.join(vf, "infiniband", n["device"]))
        _write(os.path.join(vf, "infiniband_verbs", n["uverbs"], "dev"),
               "%d:%d\n" % (UVERBS_MAJOR, n["minor"]))
        os.symlink("../" + n["pci"], os.path.join(pf, "virtfn%d" % k))
        out.append(n)
    for cls, name in (("infiniband", "mlx5_0"), ("net", "ib0")):
        os.makedirs(os.path.join(root, "class", cls, name))
        os.symlink(pf, os.path.join(root, "class", cls, name, "device"))
    return out


def virtfn(root, k):
    """The link of VF k in the tree (rename it away to make the VF vanish)."""
    return os.path.join(root, "devices", "pci0000:3a", "0000:3b:00.0", "virtfn%d" % k)
