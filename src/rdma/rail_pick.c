/* SPDX-License-Identifier: Apache-2.0 */
/* rdma.near_gpu: the rails an engine takes are the devices nearest to its
 * GPU (src/transfer/topo.h: same PCIe switch, then NUMA node, then any), chosen from
 * rdma.devices or, when that is empty, from every RDMA device. */
#include "rdma/rails.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_api.h"
#include "base/log.h"
#include "transfer/topo.h"

/* A CUDA ordinal ("3": this process's device 3, after CUDA_VISIBLE_DEVICES)
 * to its PCI bus id; anything else is taken as a bus id as it is. */
static int gpu_bdf(const char *gpu, char *out, size_t len)
{
	char *end;
	long ord = strtol(gpu, &end, 10);

	if (*end || end == gpu) {
		snprintf(out, len, "%s", gpu);
		return 0;
	}
#if HAVE_CUDA
	const struct kvf_cuda *cu = kvf_cuda();
	CUdevice dev;

	if (cu && cu->device_get && cu->pci_bus_id && ord >= 0 && ord < 1024 &&
	    cu->device_get(&dev, (int)ord) == CUDA_SUCCESS &&
	    cu->pci_bus_id(out, (int)len, dev) == CUDA_SUCCESS)
		return 0;
#else
	(void)ord;
#endif
	kvf_err("rdma", "rdma.near_gpu %s: a CUDA ordinal needs the CUDA driver and that device "
		"(none here); give the GPU's PCI bus id (nvidia-smi --query-gpu=pci.bus_id)", gpu);
	return -ENODEV;
}

int kvf_rails_pick(const struct kvf_config *cfg, char (*devs)[KVF_CFG_STR], int n)
{
	const char *root = getenv("KVF_SYSFS_ROOT"); /* test hook: a fake /sys */
	const char *cands[KVF_MAX_RAILS];
	char near[KVF_MAX_RAILS][KVF_TOPO_NAME], bdf[KVF_CFG_STR], why[512];
	enum kvf_topo_dist dist;
	uint32_t got = 0;
	int rc;

	if (!cfg->near_gpu[0] || n < 0)
		return n;
	rc = gpu_bdf(cfg->near_gpu, bdf, sizeof(bdf));
	for (int i = 0; i < n; i++)
		cands[i] = devs[i];
	if (!rc)
		rc = kvf_topo_nearest(root ? root : "/sys", bdf, cands, (uint32_t)n, near,
				      KVF_MAX_RAILS, &got, &dist, why, sizeof(why));
	if (rc) {
		kvf_err("rdma", "rdma.near_gpu %s: %s", cfg->near_gpu, rc == -ENODEV ? "no GPU" : why);
		return rc;
	}
	kvf_info("rdma", "rdma.near_gpu: %s", why);
	for (uint32_t i = 0; i < got; i++)
		snprintf(devs[i], KVF_CFG_STR, "%s", near[i]);
	return (int)got;
}
