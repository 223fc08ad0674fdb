/* SPDX-License-Identifier: Apache-2.0 */
/* A rail's address: the IPv4 address rdma_cm maps to a device. rdma_cm
 * connects by IP address, so each rail needs one on its own device; rather
 * than read the netdev out of sysfs (RoCE's gid_attrs, IPoIB's parent),
 * ask rdma_cm itself, binding a throwaway id to each local address. */
#include "rdma/rails.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <string.h>

#include "base/log.h"

/* Whether rdma_cm binds sa to device dev. */
static bool on_device(struct sockaddr *sa, const char *dev)
{
	struct rdma_cm_id *id = NULL;
	bool yes = false;

	/* No channel: a synchronous id, nothing to poll. */
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return false;
	if (!rdma_bind_addr(id, sa) && id->verbs)
		yes = !strcmp(ibv_get_device_name(id->verbs->device), dev);
	rdma_destroy_id(id);
	return yes;
}

int kvf_rail_ipv4(const char *dev, char *out, size_t len)
{
	struct ifaddrs *all, *i;
	int rc = -ENOENT;

	if (getifaddrs(&all)) {
		rc = -errno;
		kvf_err("rdma", "rail %s: getifaddrs: %s", dev, strerror(-rc));
		return rc;
	}
	for (i = all; i && rc; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !on_device(i->ifa_addr, dev))
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
			      (socklen_t)len))
			rc = 0;
	}
	freeifaddrs(all);
	if (rc)
		kvf_err("rdma", "rail %s: no IPv4 address maps to it (rdma_cm connects each rail by "
			"the address of its own device: give its netdev or IPoIB interface one)", dev);
	else
		kvf_info("rdma", "rail %s: address %s", dev, out);
	return rc;
}
