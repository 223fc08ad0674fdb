/* SPDX-License-Identifier: Apache-2.0 */
/* src/transfer/topo.c against a fake sysfs tree laid out in a temp dir:
 *
 *   pci0000:30 (NUMA 0)
 *     0000:30:02.0 root port
 *       0000:31:00.0 switch upstream
 *         0000:32:00.0 -> 0000:33:00.0 GPU0
 *         0000:32:01.0 -> 0000:34:00.0 mlx5_1   } behind GPU0's switch
 *         0000:32:02.0 -> 0000:35:00.0 mlx5_0   } (names against bus order)
 *     0000:30:03.0 root port -> 0000:36:00.0 mlx5_2  (GPU0's node, not its switch)
 *   pci0000:80 (NUMA 1)
 *     0000:80:02.0 root port
 *       0000:81:00.0 switch upstream -> 0000:82:00.0 -> 0000:83:00.0 GPU1
 *       0000:81:00.1 mlx5_5  (shares only the root port with GPU1: not a switch)
 *     0000:80:03.0 root port -> 0000:84:00.0 mlx5_3
 *   pci0000:c0 (NUMA 2) 0000:c0:01.0 -> 0000:c1:00.0 GPU2  (no NIC on node 2)
 *   pci0000:e0 (NUMA -1) 0000:e0:01.0 -> 0000:e1:00.0 GPU3, 0000:e0:02.0 -> 0000:e2:00.0 mlx5_4
 *   rxe0: no device link; rxe1: device -> devices/virtual/net/eth0 (numa_node 2)
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer/topo.h"

static char root[64];

static void mkdirs(const char *path)
{
	char p[512];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "open %s", path);
	fputs(text, f);
	fclose(f);
}

/* A PCI function at root/devices/<chain> with its numa_node, and the
 * bus/pci/devices/<bdf> link sysfs has for it. */
static void add_pci(const char *chain, const char *numa)
{
	char dir[400], link[512], target[512];
	const char *bdf = strrchr(chain, '/') + 1;

	snprintf(dir, sizeof(dir), "%s/devices/%s", root, chain);
	mkdirs(dir);
	snprintf(link, sizeof(link), "%s/numa_node", dir);
	put(link, numa);
	snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bdf);
	snprintf(target, sizeof(target), "../../../devices/%s", chain);
	cr_assert_eq(symlink(target, link), 0, "symlink %s", link);
}

/* class/infiniband/<name>, its device link to devices/<chain> (none: NULL). */
static void add_ib(const char *name, const char *chain)
{
	char dir[400], link[512], target[512];

	snprintf(dir, sizeof(dir), "%s/class/infiniband/%s", root, name);
	mkdirs(dir);
	if (!chain)
		return;
	snprintf(link, sizeof(link), "%s/device", dir);
	snprintf(target, sizeof(target), "../../../devices/%s", chain);
	cr_assert_eq(symlink(target, link), 0, "symlink %s", link);
}

#define SW0 "pci0000:30/0000:30:02.0/0000:31:00.0"
#define SW1 "pci0000:80/0000:80:02.0/0000:81:00.0"

static void build_tree(void)
{
	char p[512];

	strcpy(root, "/tmp/kvf_topo_XXXXXX");
	cr_assert(mkdtemp(root), "mkdtemp");
	snprintf(p, sizeof(p), "%s/bus/pci/devices", root);
	mkdirs(p);
	add_pci(SW0 "/0000:32:00.0/0000:33:00.0", "0\n");
	add_pci(SW0 "/0000:32:01.0/0000:34:00.0", "0\n");
	add_pci(SW0 "/0000:32:02.0/0000:35:00.0", "0\n");
	add_pci("pci0000:30/0000:30:03.0/0000:36:00.0", "0\n");
	add_pci(SW1 "/0000:82:00.0/0000:83:00.0", "1\n");
	add_pci("pci0000:80/0000:80:02.0/0000:81:00.1", "1\n");
	add_pci("pci0000:80/0000:80:03.0/0000:84:00.0", "1\n");
	add_pci("pci0000:c0/0000:c0:01.0/0000:c1:00.0", "2\n");
	add_pci("pci0000:e0/0000:e0:01.0/0000:e1:00.0", "-1\n");
	add_pci("pci0000:e0/0000:e0:02.0/0000:e2:00.0", "-1\n");
	add_ib("mlx5_1", SW0 "/0000:32:01.0/0000:34:00.0");
	add_ib("mlx5_0", SW0 "/0000:32:02.0/0000:35:00.0");
	add_ib("mlx5_2", "pci0000:30/0000:30:03.0/0000:36:00.0");
	add_ib("mlx5_3", "pci0000:80/0000:80:03.0/0000:84:00.0");
	add_ib("mlx5_4", "pci0000:e0/0000:e0:02.0/0000:e2:00.0");
	add_ib("mlx5_5", "pci0000:80/0000:80:02.0/0000:81:00.1");
	add_ib("rxe0", NULL);
	snprintf(p, sizeof(p), "%s/devices/virtual/net/eth0", root);
	mkdirs(p);
	snprintf(p, sizeof(p), "%s/devices/virtual/net/eth0/numa_node", root);
	put(p, "2\n");
	add_ib("rxe1", "virtual/net/eth0");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void drop_tree(void)
{
	if (root[0])
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
}

TestSuite(topo, .init = build_tree, .fini = drop_tree);

struct result {
	char out[16][KVF_TOPO_NAME];
	uint32_t n;
	enum kvf_topo_dist dist;
	char why[256];
};

static int nearest(const char *gpu, const char *const *cands, uint32_t ncands, uint32_t max,
		   struct result *r)
{
	memset(r, 0, sizeof(*r));
	r->dist = (enum kvf_topo_dist)-1;
	return kvf_topo_nearest(root, gpu, cands, ncands, r->out, max, &r->n, &r->dist,
				r->why, sizeof(r->why));
}

/* out[0..n) is exactly the names given, in that order. */
static void expect(const struct result *r, enum kvf_topo_dist dist, uint32_t n, const char *const *names)
{
	cr_assert_eq(r->dist, dist, "dist %d, want %d (%s)", r->dist, dist, r->why);
	cr_assert_eq(r->n, n, "n %u, want %u (%s)", r->n, n, r->why);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_str_eq(r->out[i], names[i], "out[%u] (%s)", i, r->why);
}

Test(topo, switch_gives_exactly_the_two_switch_nics_sorted)
{
	const char *want[] = { "mlx5_0", "mlx5_1" };
	struct result r;

	cr_assert_eq(nearest("0000:33:00.0", NULL, 0, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_SWITCH, 2, want);
	cr_assert_str_eq(r.why, "GPU 0000:33:00.0: mlx5_0, mlx5_1 behind the same PCIe switch (0000:31:00.0)");
	/* max cuts the list, first by name */
	cr_assert_eq(nearest("33:00.0", NULL, 0, 1, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_SWITCH, 1, want);
}

Test(topo, numa_when_no_switch_is_shared_and_a_root_port_is_no_switch)
{
	const char *want[] = { "mlx5_3", "mlx5_5" };
	struct result r;

	/* mlx5_5 meets GPU1 at its root port only: same node, not same switch */
	cr_assert_eq(nearest("0000:83:00.0", NULL, 0, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_NUMA, 2, want);
	cr_assert_str_eq(r.why, "GPU 0000:83:00.0: mlx5_3, mlx5_5 on the same NUMA node 1");
}

Test(topo, any_when_the_gpus_node_has_no_nic)
{
	const char *want[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "rxe0", "rxe1" };
	struct result r;

	/* rxe1's virtual device says node 2, GPU2's node: it must not count */
	cr_assert_eq(nearest("0000:c1:00.0", NULL, 0, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_ANY, 8, want);
	cr_assert(strstr(r.why, "GPU 0000:c1:00.0: no NIC shares its switch or NUMA node: every device (mlx5_0, "),
		  "%s", r.why);
}

Test(topo, numa_minus_one_matches_nothing)
{
	struct result r;

	/* GPU3 and mlx5_4 both say -1: unknown is not "the same node" */
	cr_assert_eq(nearest("0000:e1:00.0", NULL, 0, 16, &r), 0, "%s", r.why);
	cr_assert_eq(r.dist, KVF_TOPO_ANY, "%s", r.why);
	cr_assert_eq(r.n, 8, "%s", r.why);
}

Test(topo, cands_restrict_the_set)
{
	const char *c1[] = { "mlx5_2", "mlx5_1", "rxe0", "mlx5_1", "mlx5_2" };
	const char *c2[] = { "rxe0", "mlx5_2" };
	const char *c3[] = { "rxe0", "mlx5_9" };
	const char *w1[] = { "mlx5_1" }, *w2[] = { "mlx5_2" }, *w3[] = { "mlx5_9", "rxe0" };
	struct result r;

	cr_assert_eq(nearest("0000:33:00.0", c1, 5, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_SWITCH, 1, w1);
	cr_assert_str_eq(r.why, "GPU 0000:33:00.0: mlx5_1 behind the same PCIe switch (0000:31:00.0)");
	cr_assert_eq(nearest("0000:33:00.0", c2, 2, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_NUMA, 1, w2);
	cr_assert_str_eq(r.why, "GPU 0000:33:00.0: mlx5_2 on the same NUMA node 0");
	/* a name sysfs does not show is kept, placed nowhere, deduplicated
	 * (c1 lists mlx5_1 twice, c3 is sorted on the way out) */
	cr_assert_eq(nearest("0000:33:00.0", c3, 2, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_ANY, 2, w3);
	const char *bad[] = { "../mlx5_0" };
	cr_assert_eq(nearest("0000:33:00.0", bad, 1, 16, &r), -EINVAL);
	cr_assert(strstr(r.why, "../mlx5_0"), "%s", r.why);
}

Test(topo, the_bridge_named_is_the_one_all_of_them_share)
{
	const char *want[] = { "mlx5_0", "mlx5_1", "mlx5_6" };
	const char *only[] = { "mlx5_6" };
	struct result r;

	/* mlx5_6 sits on GPU0's own downstream port: it shares 0000:32:00.0,
	 * the others only the upstream port 0000:31:00.0 */
	add_pci(SW0 "/0000:32:00.0/0000:33:00.1", "0\n");
	add_ib("mlx5_6", SW0 "/0000:32:00.0/0000:33:00.1");
	cr_assert_eq(nearest("0000:33:00.0", NULL, 0, 16, &r), 0, "%s", r.why);
	expect(&r, KVF_TOPO_SWITCH, 3, want);
	cr_assert(strstr(r.why, " behind the same PCIe switch (0000:31:00.0)"), "%s", r.why);
	cr_assert_eq(nearest("0000:33:00.0", only, 1, 16, &r), 0, "%s", r.why);
	cr_assert_str_eq(r.why, "GPU 0000:33:00.0: mlx5_6 behind the same PCIe switch (0000:32:00.0)");
}

Test(topo, unknown_gpu_is_enoent_naming_it)
{
	struct result r;

	cr_assert_eq(nearest("99:00.0", NULL, 0, 16, &r), -ENOENT);
	cr_assert(strstr(r.why, "GPU 0000:99:00.0"), "%s", r.why);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(nearest("0000:zz:00.0", NULL, 0, 16, &r), -EINVAL);
	cr_assert(strstr(r.why, "0000:zz:00.0"), "%s", r.why);
	cr_assert_eq(nearest("0000:33:00.0", NULL, 0, 0, &r), -EINVAL, "max 0");
}

Test(topo, no_rdma_device_is_enoent)
{
	char p[512];
	struct result r;

	/* every NIC gone: GPU0 still there, class/infiniband empty */
	snprintf(p, sizeof(p), "%s/class/infiniband", root);
	nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	cr_assert_eq(nearest("0000:33:00.0", NULL, 0, 16, &r), -ENOENT);
	cr_assert(strstr(r.why, "no RDMA device"), "%s", r.why);
}

static void norm_is(const char *in, const char *want)
{
	char out[16];

	cr_assert_eq(kvf_topo_norm_bdf(in, out), 0, "'%s'", in);
	cr_assert_str_eq(out, want, "'%s'", in);
}

Test(topo, bdf_normalisation)
{
	const char *bad[] = { "", "3b:00", "3b:00.8", "3b:20.0", "g0:00.0", "3b:00.0 ", " 3b:00.0",
			      ":3b:00.0", "000000000:3b:00.0", "3b.00.0", "0000:3b:0.0", "0000-3b:00.0",
			      "0000:3b:00.0.0", "pci0000:3b" };
	char out[16];

	norm_is("3b:00.0", "0000:3b:00.0");
	norm_is("0000:3B:00.0", "0000:3b:00.0");
	norm_is("00000000:3b:00.0", "0000:3b:00.0");
	norm_is("0001:AF:1f.7", "0001:af:1f.7");
	norm_is("10000:e1:00.0", "10000:e1:00.0"); /* a VMD domain */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(kvf_topo_norm_bdf(bad[i], out), -EINVAL, "'%s'", bad[i]);
	cr_assert_eq(kvf_topo_norm_bdf(NULL, out), -EINVAL);
}
