#!/usr/bin/env python3
"""Writes the simulated nodes of topology/nodes/: hwloc XML 2.0 files and KFD
sysfs fixtures. A developer tool: its output is committed and embedded in the
library at build time; the build never runs it.

    python3 topology/nodes/gen_nodes.py [OUTDIR]     (default: this folder)

Facts (buses, NUMA affinity, CPU threads per GCD, xGMI neighbours, PCI ids)
come from the project's REFERENCES.md; what it does not say (bridge chains,
memory sizes, cache sizes, KFD fields other than the ones cubert reads) is
chosen to be plausible and is marked as such in docs/topology.md.
Validate the output with `lstopo --input FILE`.
"""
import os
import shutil
import sys


# ------------------------------------------------------------------ bitmaps

def bitmap(bits):
    """hwloc's XML bitmap text: 32-bit words, most significant first."""
    bits = set(bits)
    if not bits:
        return "0x0"
    words = (max(bits) // 32) + 1
    out = []
    for w in reversed(range(words)):
        v = 0
        for b in range(32):
            if w * 32 + b in bits:
                v |= 1 << b
        out.append("0x%08x" % v)
    return ",".join(out)


class Xml:
    """Emits hwloc 2.0 XML with unique gp_index values."""

    def __init__(self):
        self.lines = []
        self.gp = 0

    def gp_index(self):
        self.gp += 1
        return self.gp

    def open(self, depth, typ, attrs, empty=False):
        a = " ".join('%s="%s"' % (k, v) for k, v in attrs)
        self.lines.append("%s<object type=\"%s\" %s gp_index=\"%d\"%s>"
                          % ("  " * depth, typ, a, self.gp_index(), "/" if empty else ""))

    def close(self, depth):
        self.lines.append("%s</object>" % ("  " * depth))

    def raw(self, depth, text):
        self.lines.append("  " * depth + text)

    def info(self, depth, name, value):
        self.raw(depth, '<info name="%s" value="%s"/>' % (name, value))

    def text(self):
        head = ['<?xml version="1.0" encoding="UTF-8"?>',
                '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
        return "\n".join(head + self.lines + ["</topology>", ""])


def sets(cpus, nodes):
    return [("cpuset", bitmap(cpus)), ("complete_cpuset", bitmap(cpus)),
            ("nodeset", bitmap(nodes)), ("complete_nodeset", bitmap(nodes))]


def numa_node(x, d, os_index, cpus, memory):
    x.open(d, "NUMANode", [("os_index", os_index)] + sets(cpus, [os_index])
           + [("local_memory", memory)])
    x.raw(d + 1, '<page_type size="4096" count="%d"/>' % (memory // 4096))
    x.raw(d + 1, '<page_type size="2097152" count="0"/>')
    x.raw(d + 1, '<page_type size="1073741824" count="0"/>')
    x.close(d)


def cores(x, d, core_ids, smt_offset, node):
    """L2 + L1d + Core + 2 PUs per core (SMT 2: sibling = core + smt_offset)."""
    for c in core_ids:
        pus = [c, c + smt_offset]
        x.open(d, "L2Cache", [("os_index", c)] + sets(pus, [node]) + [
            ("cache_size", 524288), ("depth", 2), ("cache_linesize", 64),
            ("cache_associativity", 8), ("cache_type", 0)])
        x.open(d + 1, "L1Cache", [("os_index", c)] + sets(pus, [node]) + [
            ("cache_size", 32768), ("depth", 1), ("cache_linesize", 64),
            ("cache_associativity", 8), ("cache_type", 1)])
        x.open(d + 2, "Core", [("os_index", c)] + sets(pus, [node]))
        for p in pus:
            x.open(d + 3, "PU", [("os_index", p)] + sets([p], [node]), empty=True)
        x.close(d + 2)
        x.close(d + 1)
        x.close(d)


def l3_open(x, d, os_index, cpus, node):
    x.open(d, "L3Cache", [("os_index", os_index)] + sets(cpus, [node]) + [
        ("cache_size", 33554432), ("depth", 3), ("cache_linesize", 64),
        ("cache_associativity", 16), ("cache_type", 0)])


def busid(bus, dev=0, fn=0):
    return "0000:%02x:%02x.%x" % (bus, dev, fn)


def host_bridge(x, d, first, last):
    x.open(d, "Bridge", [("bridge_type", "0-1"), ("depth", 0),
                         ("bridge_pci", "0000:[%02x-%02x]" % (first, last))])


def pci_bridge(x, d, bus, dev, fn, first, last, ids, depth, speed):
    x.open(d, "Bridge", [("bridge_type", "1-1"), ("depth", depth),
                         ("bridge_pci", "0000:[%02x-%02x]" % (first, last)),
                         ("pci_busid", busid(bus, dev, fn)),
                         ("pci_type", "0604 [%s] [0000:0000] 00" % ids),
                         ("pci_link_speed", speed)])


def pci_dev(x, d, bus, pci_type, speed, infos, osdevs):
    x.open(d, "PCIDev", [("pci_busid", busid(bus)), ("pci_type", pci_type),
                         ("pci_link_speed", speed)], empty=not (infos or osdevs))
    if infos or osdevs:
        for k, v in infos:
            x.info(d + 1, k, v)
        for name, kind in osdevs:
            x.open(d + 1, "OSDev", [("name", name), ("osdev_type", kind)], empty=True)
        x.close(d)


def machine_open(x, cpus, nodes, node_name, product):
    x.open(0, "Machine", [("os_index", 0)] + sets(cpus, nodes) + [
        ("allowed_cpuset", bitmap(cpus)), ("allowed_nodeset", bitmap(nodes))])
    x.info(1, "Backend", "Linux")
    x.info(1, "OSName", "Linux")
    x.info(1, "Architecture", "x86_64")
    x.info(1, "hwlocVersion", "2.9.0")
    if product:
        x.info(1, "DMIProductName", product)
    x.info(1, "CubertSimulatedNode", node_name)


# ------------------------------------------------------------------ KFD fixture

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def props(pairs):
    return "".join("%s %d\n" % (k, v) for k, v in pairs)


def kfd_fixture(root, cpu_nodes, gpus, links, gpu_fields):
    """cpu_nodes: list of (cores, simd=0).  gpus: list of dicts with bus,
    numa, gpu_id, render.  links: dict gpu index -> list of (peer, links)
    xGMI neighbours.  KFD numbers CPU nodes first, then GPU nodes."""
    base = os.path.join(root, "sys/class/kfd/kfd/topology")
    write(os.path.join(base, "generation_id"), "1\n")
    write(os.path.join(base, "system_properties"),
          "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
    ncpu = len(cpu_nodes)
    for n, ncores in enumerate(cpu_nodes):
        nd = os.path.join(base, "nodes", str(n))
        write(os.path.join(nd, "gpu_id"), "0\n")
        write(os.path.join(nd, "name"), "\n")
        write(os.path.join(nd, "properties"), props([
            ("cpu_cores_count", ncores), ("simd_count", 0), ("mem_banks_count", 1),
            ("caches_count", 0), ("io_links_count", 0), ("p2p_links_count", 0),
            ("cpu_core_id_base", 0), ("simd_id_base", 0), ("max_waves_per_simd", 0),
            ("lds_size_in_kb", 0), ("gds_size_in_kb", 0), ("num_gws", 0),
            ("wave_front_size", 0), ("array_count", 0), ("simd_arrays_per_engine", 0),
            ("cu_per_simd_array", 0), ("simd_per_cu", 0), ("max_slots_scratch_cu", 0),
            ("gfx_target_version", 0), ("vendor_id", 0), ("device_id", 0),
            ("location_id", 0), ("domain", 0), ("drm_render_minor", 0), ("hive_id", 0),
            ("num_sdma_engines", 0), ("num_sdma_xgmi_engines", 0),
            ("num_sdma_queues_per_engine", 0), ("num_cp_queues", 0),
            ("max_engine_clk_fcompute", 0), ("local_mem_size", 0), ("fw_version", 0),
            ("capability", 0), ("debug_prop", 0), ("sdma_fw_version", 0),
            ("unique_id", 0), ("num_xcc", 0), ("max_engine_clk_ccompute", 2000)]))
    for g, gpu in enumerate(gpus):
        node = ncpu + g
        nd = os.path.join(base, "nodes", str(node))
        # The link to the CPU node of its NUMA node: xGMI where the GPU is
        # wired to the CPU by Infinity Fabric (Frontier's Trento; the kernel
        # then reports one xGMI link), else PCIe.
        if gpu_fields["cpu_xgmi"]:
            io = [(11, gpu["numa"], 15, gpu_fields["link_mbs"], gpu_fields["link_mbs"])]
        else:
            io = [(2, gpu["numa"], 20, 0, 0)]
        for peer, nlinks in links.get(g, []):
            io.append((11, ncpu + peer, 15, gpu_fields["link_mbs"],
                       gpu_fields["link_mbs"] * nlinks))
        write(os.path.join(nd, "gpu_id"), "%d\n" % gpu["gpu_id"])
        write(os.path.join(nd, "name"), "%s\n" % gpu_fields["name"])
        write(os.path.join(nd, "properties"), props([
            ("cpu_cores_count", 0), ("simd_count", gpu_fields["simd_count"]),
            ("mem_banks_count", 1), ("caches_count", gpu_fields["caches_count"]),
            ("io_links_count", len(io)), ("p2p_links_count", 0),
            ("cpu_core_id_base", 0), ("simd_id_base", 2147487744 + 1024 * g),
            ("max_waves_per_simd", 8), ("lds_size_in_kb", 64), ("gds_size_in_kb", 0),
            ("num_gws", 64), ("wave_front_size", 64),
            ("array_count", gpu_fields["array_count"]), ("simd_arrays_per_engine", 1),
            ("cu_per_simd_array", gpu_fields["cu_per_simd_array"]), ("simd_per_cu", 4),
            ("max_slots_scratch_cu", 32),
            ("gfx_target_version", gpu_fields["gfx_target_version"]),
            ("vendor_id", 0x1002), ("device_id", gpu_fields["device_id"]),
            ("location_id", gpu["bus"] << 8), ("domain", 0),
            ("drm_render_minor", gpu["render"]), ("hive_id", gpu_fields["hive_id"]),
            ("num_sdma_engines", 2), ("num_sdma_xgmi_engines", gpu_fields["xgmi_sdma"]),
            ("num_sdma_queues_per_engine", 8), ("num_cp_queues", 24),
            ("max_engine_clk_fcompute", gpu_fields["clk"]), ("local_mem_size", 0),
            ("fw_version", 78), ("capability", 746079104), ("debug_prop", 1495),
            ("sdma_fw_version", 8), ("unique_id", gpu_fields["unique_base"] + g),
            ("num_xcc", gpu_fields["num_xcc"]), ("max_engine_clk_ccompute", 2000)]))
        for m, (typ, to, weight, lo, hi) in enumerate(io):
            write(os.path.join(nd, "io_links", str(m), "properties"), props([
                ("type", typ), ("version_major", 0), ("version_minor", 0),
                ("node_from", node), ("node_to", to), ("weight", weight),
                ("min_latency", 0), ("max_latency", 0), ("min_bandwidth", lo),
                ("max_bandwidth", hi), ("recommended_transfer_size", 0), ("flags", 1)]))


# ------------------------------------------------------------------ Frontier

FRONTIER_GCDS = [  # (bus, ccd, numa) from REFERENCES.md
    (0xc1, 6, 3), (0xc6, 7, 3), (0xc9, 2, 1), (0xce, 3, 1),
    (0xd1, 0, 0), (0xd6, 1, 0), (0xd9, 4, 2), (0xde, 5, 2)]
FRONTIER_XGMI = {0: [1, 2, 6], 1: [0, 3, 5], 2: [0, 3, 4], 3: [1, 2, 7],
                 4: [2, 5, 6], 5: [1, 4, 7], 6: [0, 4, 7], 7: [3, 5, 6]}
FRONTIER_PACKAGE_PAIRS = [(0, 1), (2, 3), (4, 5), (6, 7)]


def ccd_cpus(ccd):
    return list(range(8 * ccd, 8 * ccd + 8)) + list(range(64 + 8 * ccd, 64 + 8 * ccd + 8))


def frontier_xml():
    x = Xml()
    allcpu = list(range(128))
    machine_open(x, allcpu, range(4), "frontier", "HPE Cray EX235A")
    x.open(1, "Package", [("os_index", 0)] + sets(allcpu, range(4)))
    x.info(2, "CPUVendor", "AuthenticAMD")
    x.info(2, "CPUModel", "AMD EPYC 7A53 64-Core Processor")
    for numa in range(4):  # NPS4: one NUMA node per pair of CCDs
        ccds = [2 * numa, 2 * numa + 1]
        cpus = ccd_cpus(ccds[0]) + ccd_cpus(ccds[1])
        x.open(2, "Group", sets(cpus, [numa]))
        numa_node(x, 3, numa, cpus, 128 << 30)
        for ccd in ccds:
            l3_open(x, 3, ccd, ccd_cpus(ccd), numa)
            cores(x, 4, range(8 * ccd, 8 * ccd + 8), 64, numa)
            # The GCD attached to this CCD hangs under its L3 (REFERENCES.md):
            # host bridge -> root port -> GCD.
            for g, (bus, gccd, gnuma) in enumerate(FRONTIER_GCDS):
                if gccd != ccd:
                    continue
                assert gnuma == numa
                host_bridge(x, 4, bus - 1, bus)
                pci_bridge(x, 5, bus - 1, 1, 1, bus, bus, "1022:14ab", 1, "32.000000")
                pci_dev(x, 6, bus, "0380 [1002:7408] [1002:0b0c] 01", "32.000000",
                        [("PCIVendor", "Advanced Micro Devices, Inc. [AMD/ATI]"),
                         ("PCIDevice", "Aldebaran/MI200 [Instinct MI250X]")],
                        [("card%d" % (g + 1), 1), ("renderD%d" % (128 + g), 1)])
                x.close(5)
                x.close(4)
            x.close(3)
        x.close(2)
    x.close(1)
    x.close(0)
    return x.text()


def frontier_kfd(root):
    links = {}
    for g, peers in FRONTIER_XGMI.items():
        links[g] = []
        for p in peers:
            pair = (min(g, p), max(g, p))
            links[g].append((p, 4 if pair in FRONTIER_PACKAGE_PAIRS else 1))
    gpus = [{"bus": bus, "numa": numa, "gpu_id": 0x9d11 + 0x1f3 * g, "render": 128 + g}
            for g, (bus, _ccd, numa) in enumerate(FRONTIER_GCDS)]
    kfd_fixture(root, [16, 16, 16, 16], gpus, links, {
        "name": "aldebaran", "simd_count": 440, "caches_count": 253, "array_count": 8,
        "cu_per_simd_array": 14, "gfx_target_version": 90010, "device_id": 0x7408,
        "hive_id": 0x8c5ad3a01d3cb4e2, "xgmi_sdma": 6, "clk": 1700,
        "unique_base": 0x3a1c0bd2f6e90000, "num_xcc": 1, "link_mbs": 50000, "cpu_xgmi": True})


# ------------------------------------------------------------------ MI300X

MI300X_BUSES = [(0x0c, 0), (0x15, 0), (0x1e, 0), (0x69, 0),
                (0x9f, 1), (0xaf, 1), (0xbf, 1), (0xdf, 1)]


def mi300x_xml():
    # Two sockets of 48 cores (SMT 2), NPS1: one NUMA node per socket.
    x = Xml()
    allcpu = list(range(192))
    machine_open(x, allcpu, range(2), "mi300x", "")
    for s in range(2):
        cpus = list(range(48 * s, 48 * s + 48)) + list(range(96 + 48 * s, 96 + 48 * s + 48))
        x.open(1, "Package", [("os_index", s)] + sets(cpus, [s]))
        x.info(2, "CPUVendor", "AuthenticAMD")
        x.info(2, "CPUModel", "AMD EPYC 9454 48-Core Processor")
        numa_node(x, 2, s, cpus, 1152 << 30)
        for ccd in range(8):  # 8 CCDs of 6 cores
            first = 48 * s + 6 * ccd
            l3_open(x, 2, 8 * s + ccd, list(range(first, first + 6))
                    + list(range(96 + first, 96 + first + 6)), s)
            cores(x, 3, range(first, first + 6), 96, s)
            x.close(2)
        # Each GPU: host bridge -> root port -> switch upstream -> downstream
        # -> GPU (three bridges); the NIC shares the root port and switch.
        for g, (bus, numa) in enumerate(MI300X_BUSES):
            if numa != s:
                continue
            root = bus - 3
            host_bridge(x, 2, root, bus + 1)
            pci_bridge(x, 3, root, 1, 1, root + 1, bus + 1, "1022:14ab", 1, "64.000000")
            pci_bridge(x, 4, root + 1, 0, 0, root + 2, bus + 1, "1000:c030", 2, "64.000000")
            pci_bridge(x, 5, root + 2, 0, 0, bus, bus, "1000:c030", 3, "64.000000")
            pci_dev(x, 6, bus, "1200 [1002:74a1] [1002:74a1] 00", "64.000000",
                    [("PCIVendor", "Advanced Micro Devices, Inc. [AMD/ATI]"),
                     ("PCIDevice", "Aqua Vanjaram [Instinct MI300X]")],
                    [("card%d" % (g + 1), 1), ("renderD%d" % (128 + g), 1)])
            x.close(5)
            pci_bridge(x, 5, root + 2, 1, 0, bus + 1, bus + 1, "1000:c030", 3, "32.000000")
            pci_dev(x, 6, bus + 1, "0207 [15b3:1021] [15b3:0041] 00", "32.000000",
                    [("PCIVendor", "Mellanox Technologies"),
                     ("PCIDevice", "MT2910 Family [ConnectX-7]")],
                    [("mlx5_%d" % g, 3)])
            x.close(5)
            x.close(4)
            x.close(3)
            x.close(2)
        x.close(1)
    x.close(0)
    return x.text()


def mi300x_kfd(root):
    links = {g: [(p, 1) for p in range(8) if p != g] for g in range(8)}
    gpus = [{"bus": bus, "numa": numa, "gpu_id": 0x2a4f + 0x2b1 * g, "render": 128 + g}
            for g, (bus, numa) in enumerate(MI300X_BUSES)]
    kfd_fixture(root, [96, 96], gpus, links, {
        "name": "ip discovery", "simd_count": 1216, "caches_count": 310, "array_count": 32,
        "cu_per_simd_array": 10, "gfx_target_version": 90402, "device_id": 0x74a1,
        "hive_id": 0x1d5b2e0f7a3c9844, "xgmi_sdma": 14, "clk": 2100,
        "unique_base": 0x51e7a2c90d3b0000, "num_xcc": 8, "link_mbs": 64000, "cpu_xgmi": False})


def mi300x_cpx_kfd(root):
    """The MI300X node with GPU 0 in CPX mode (8 compute partitions, one KFD
    node each) and GPUs 1-7 in SPX; `amd-smi set --compute-partition` sets
    the mode per GPU. Every partition reports its GPU's location_id with the
    partition number in bits 31:28, and partitions come first in KFD's
    numbering as the GPU does. Link weights and bandwidths follow the
    kernel's kfd_crat.c (kfd_fill_gpu_xgmi_link_to_gpu): a partitioned GPU
    does not ask the xGMI TA, so a link between partitions of one GPU has
    weight 13 (KFD_CRAT_INTRA_SOCKET_WEIGHT) and 819200 MB/s, a link from a
    partition to another GPU weight 41 (2 * 13 + 15) and no bandwidth; an
    SPX GPU reports 15 per hop and the TA's 64000 MB/s per link. Not recorded
    on hardware: written after the kernel's code."""
    base = os.path.join(root, "sys/class/kfd/kfd/topology")
    write(os.path.join(base, "generation_id"), "1\n")
    write(os.path.join(base, "system_properties"), "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
    for n in range(2):
        nd = os.path.join(base, "nodes", str(n))
        write(os.path.join(nd, "gpu_id"), "0\n")
        write(os.path.join(nd, "properties"), props([
            ("cpu_cores_count", 96), ("simd_count", 0), ("io_links_count", 0),
            ("location_id", 0), ("domain", 0)]))
    parts = 8
    # (node, gpu index, partition)
    nodes = [(2 + k, 0, k) for k in range(parts)] + [(2 + parts + g - 1, g, 0) for g in range(1, 8)]
    for node, g, part in nodes:
        bus, numa = MI300X_BUSES[g]
        partitioned = g == 0
        io = [(2, numa, 20, 0, 0)]
        for other, og, opart in nodes:
            if other == node:
                continue
            if partitioned and og == g:
                io.append((11, other, 13, 819200, 819200))
            elif partitioned:
                io.append((11, other, 41, 0, 0))
            else:
                io.append((11, other, 15, 64000, 64000))
        nd = os.path.join(base, "nodes", str(node))
        write(os.path.join(nd, "gpu_id"), "%d\n" % (0x2a4f + 0x2b1 * node))
        write(os.path.join(nd, "properties"), props([
            ("cpu_cores_count", 0), ("simd_count", 1216 // (parts if partitioned else 1)),
            ("io_links_count", len(io)), ("gfx_target_version", 90402),
            ("vendor_id", 0x1002), ("device_id", 0x74a1),
            ("location_id", (part << 28) | (bus << 8)), ("domain", 0),
            ("drm_render_minor", 128 + node - 2),
            ("num_xcc", 1 if partitioned else 8)]))
        for m, (typ, to, weight, lo, hi) in enumerate(io):
            write(os.path.join(nd, "io_links", str(m), "properties"), props([
                ("type", typ), ("node_from", node), ("node_to", to), ("weight", weight),
                ("min_bandwidth", lo), ("max_bandwidth", hi), ("flags", 1)]))


# ------------------------------------------------------------------ PCIe node

def pcie_xml():
    """Two sockets, PCIe switches: PIX, PXB, PHB, NODE and SYS all occur.

    socket 0: host bridge [00-0c]
                root port 00:01.1 -> switch 01:00.0
                  -> 02:00.0 -> switch 03:00.0 -> GPU0 05, GPU1 06   (PIX)
                  -> 02:01.0 -> switch 07:00.0 -> GPU2 09, GPU3 0a   (PXB with 0/1)
                  -> 02:02.0 -> NIC 0b
                root port 00:03.1 -> GPU4 0c                        (PHB with 0-3)
              host bridge [40-41]: root port 40:01.1 -> GPU5 41      (NODE)
    socket 1: host bridge [80-84]: root port -> switch 81:00.0
                  -> GPU6 83, GPU7 84                                (SYS with 0-5)
    """
    x = Xml()
    allcpu = list(range(64))
    machine_open(x, allcpu, range(2), "pcie", "")
    gpu_type = "0380 [1002:740f] [1002:0c34] 02"
    gpu_infos = [("PCIVendor", "Advanced Micro Devices, Inc. [AMD/ATI]"),
                 ("PCIDevice", "Aldebaran/MI200 [Instinct MI210]")]
    sw = "1000:c010"
    gpu_no = [0]

    def gpu(d, bus):
        g = gpu_no[0]
        gpu_no[0] += 1
        pci_dev(x, d, bus, gpu_type, "32.000000", gpu_infos,
                [("card%d" % (g + 1), 1), ("renderD%d" % (128 + g), 1)])

    def switch_with_gpus(d, up_bus, sec, gpus, depth):
        """Switch upstream port on up_bus (secondary `sec`), one downstream
        port per GPU bus in `gpus`."""
        pci_bridge(x, d, up_bus, 0, 0, sec, max(gpus), sw, depth, "32.000000")
        for i, b in enumerate(gpus):
            pci_bridge(x, d + 1, sec, i, 0, b, b, sw, depth + 1, "32.000000")
            gpu(d + 2, b)
            x.close(d + 1)
        x.close(d)

    for s in range(2):
        cpus = list(range(16 * s, 16 * s + 16)) + list(range(32 + 16 * s, 32 + 16 * s + 16))
        x.open(1, "Package", [("os_index", s)] + sets(cpus, [s]))
        x.info(2, "CPUVendor", "AuthenticAMD")
        x.info(2, "CPUModel", "AMD EPYC 7313 16-Core Processor")
        numa_node(x, 2, s, cpus, 256 << 30)
        for ccd in range(2):
            first = 16 * s + 8 * ccd
            l3_open(x, 2, 2 * s + ccd, list(range(first, first + 8))
                    + list(range(32 + first, 32 + first + 8)), s)
            cores(x, 3, range(first, first + 8), 32, s)
            x.close(2)
        if s == 0:
            host_bridge(x, 2, 0x00, 0x0c)
            pci_bridge(x, 3, 0x00, 1, 1, 0x01, 0x0b, "1022:1483", 1, "32.000000")
            pci_bridge(x, 4, 0x01, 0, 0, 0x02, 0x0b, sw, 2, "32.000000")
            pci_bridge(x, 5, 0x02, 0, 0, 0x03, 0x06, sw, 3, "32.000000")
            switch_with_gpus(6, 0x03, 0x04, [0x05, 0x06], 4)
            x.close(5)
            pci_bridge(x, 5, 0x02, 1, 0, 0x07, 0x0a, sw, 3, "32.000000")
            switch_with_gpus(6, 0x07, 0x08, [0x09, 0x0a], 4)
            x.close(5)
            pci_bridge(x, 5, 0x02, 2, 0, 0x0b, 0x0b, sw, 3, "16.000000")
            pci_dev(x, 6, 0x0b, "0207 [15b3:1017] [15b3:0007] 00", "16.000000",
                    [("PCIVendor", "Mellanox Technologies"),
                     ("PCIDevice", "MT27800 Family [ConnectX-5]")], [("mlx5_0", 3)])
            x.close(5)
            x.close(4)
            x.close(3)
            pci_bridge(x, 3, 0x00, 3, 1, 0x0c, 0x0c, "1022:1483", 1, "32.000000")
            gpu(4, 0x0c)
            x.close(3)
            x.close(2)
            host_bridge(x, 2, 0x40, 0x41)
            pci_bridge(x, 3, 0x40, 1, 1, 0x41, 0x41, "1022:1483", 1, "32.000000")
            gpu(4, 0x41)
            x.close(3)
            x.close(2)
        else:
            host_bridge(x, 2, 0x80, 0x84)
            pci_bridge(x, 3, 0x80, 1, 1, 0x81, 0x84, "1022:1483", 1, "32.000000")
            switch_with_gpus(4, 0x81, 0x82, [0x83, 0x84], 2)
            x.close(3)
            x.close(2)
        x.close(1)
    x.close(0)
    return x.text()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    for name, fn in (("frontier", frontier_xml), ("mi300x", mi300x_xml), ("pcie", pcie_xml)):
        with open(os.path.join(out, name + ".xml"), "w") as f:
            f.write(fn())
    # mi300x-cpx-kfd is a test fixture (tests/test_topology.c), not embedded.
    for name, fn in (("frontier", frontier_kfd), ("mi300x", mi300x_kfd),
                     ("mi300x-cpx", mi300x_cpx_kfd)):
        root = os.path.join(out, name + "-kfd")
        shutil.rmtree(root, ignore_errors=True)
        fn(root)


if __name__ == "__main__":
    main()
