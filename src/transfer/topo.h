/* SPDX-License-Identifier: Apache-2.0 */
/* Which RDMA devices sit nearest a GPU on the PCIe fabric, read from sysfs.
 * A transfer from GPU memory to a NIC behind the same PCIe switch stays
 * below the root port (peer to peer through the switch); one to a NIC on
 * another root port crosses the root complex, and one on another NUMA node
 * crosses the socket interconnect too. So the ranking is in three classes:
 * same switch, same NUMA node, anything.
 *
 * The sysfs root is a parameter ("/sys" in production) so a unit test can
 * lay out a fake tree. Nothing is cached: the tree is read on every call
 * (a handful of realpath()s, once per engine open). */
#ifndef KVF_TOPO_H
#define KVF_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define KVF_TOPO_NAME 64 /* IB_DEVICE_NAME_MAX: an RDMA device name and its NUL */

enum kvf_topo_dist {
	KVF_TOPO_SWITCH = 0, /* behind the same PCIe switch as the GPU */
	KVF_TOPO_NUMA = 1,   /* on the GPU's NUMA node, another root port */
	KVF_TOPO_ANY = 2,    /* nothing shared that sysfs can show */
};

/* Normalises a PCI bus id to sysfs's "dddd:bb:dd.f", lower case. Takes
 * "3b:00.0" (domain 0), "0000:3B:00.0" and "00000000:3b:00.0" (what CUDA's
 * cuDeviceGetPCIBusId prints): a domain of 1 to 8 hex digits (value at most
 * 0xfffffff, so the result fits 16 bytes; VMD domains start at 0x10000 and
 * print with 5), bus and device of exactly 2, function of 1 (device at most
 * 0x1f, function at most 7), nothing else around them. 0 or -EINVAL. */
int kvf_topo_norm_bdf(const char *in, char out[16]);

/* The RDMA devices nearest the GPU at PCI address gpu (any form
 * kvf_topo_norm_bdf takes). The candidates are the names under
 * <root>/class/infiniband/, or exactly cands[0..ncands) when ncands > 0 (a
 * candidate sysfs does not show is kept, placed nowhere: it matches only
 * at KVF_TOPO_ANY). The nearest class wins:
 *   KVF_TOPO_SWITCH: the resolved /sys/devices/pci.../ paths of the GPU and
 *     the device share at least 2 PCI function components (root port and a
 *     switch port): they meet below the root port;
 *   KVF_TOPO_NUMA: the same <dev>/numa_node (-1, or no file, is unknown and
 *     matches nothing);
 *   KVF_TOPO_ANY: every candidate.
 * A device whose <root>/class/infiniband/<name>/device link is missing or
 * does not end at a PCI function (soft-RoCE rxe) has no switch and no NUMA
 * node: it only matches at KVF_TOPO_ANY.
 *
 * Writes the class's names, sorted and without duplicates, into out (at
 * most max, max >= 1: the first max by name), *n how many were written,
 * *dist the class, and into why (may be NULL) one line for a log naming
 * the GPU, the choice and the reason:
 *   "GPU 0000:33:00.0: mlx5_0, mlx5_1 behind the same PCIe switch (0000:31:00.0)"
 *   (the bridge all of them share with the GPU: the deepest such),
 *   "GPU 0000:83:00.0: mlx5_3 on the same NUMA node 1",
 *   "GPU 0000:c1:00.0: no NIC shares its switch or NUMA node: every device (mlx5_0, ...)".
 * Returns 0; -EINVAL (a bad gpu, a bad candidate name, a NULL argument,
 * max 0); -ENOENT (no such GPU under <root>/bus/pci/devices, or no RDMA
 * device; why says which); -ENOMEM; -errno reading <root>/class/infiniband.
 * On an error only why is written. */
int kvf_topo_nearest(const char *root, const char *gpu, const char *const *cands, uint32_t ncands,
		     char (*out)[KVF_TOPO_NAME], uint32_t max, uint32_t *n,
		     enum kvf_topo_dist *dist, char *why, size_t whylen);

#endif
