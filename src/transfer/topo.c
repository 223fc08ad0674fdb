/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/topo.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest domain whose "%04x" still fits the 16-byte form. */
#define DOMAIN_MAX 0xfffffffUL
#define SHORT_BDF 7 /* "bb:dd.f" */

struct bdf {
	unsigned long dom, bus, dev, fn;
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly n hex digits at s (which has at least n bytes). */
static bool hex_n(const char *s, size_t n, unsigned long *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		int d = hexval(s[i]);

		if (d < 0)
			return false;
		*v = *v << 4 | (unsigned long)d;
	}
	return true;
}

/* s[0..len) as [domain:]bus:dev.fn; need_dom refuses the short form (a
 * sysfs path component always carries the domain). */
static bool parse_bdf(const char *s, size_t len, bool need_dom, struct bdf *b)
{
	const char *colon = memchr(s, ':', len);

	b->dom = 0;
	if (!colon)
		return false;
	if (len != SHORT_BDF) {
		size_t dl = (size_t)(colon - s);

		if (dl < 1 || dl > 8 || !hex_n(s, dl, &b->dom) || b->dom > DOMAIN_MAX)
			return false;
		s += dl + 1;
		len -= dl + 1;
	} else if (need_dom) {
		return false;
	}
	if (len != SHORT_BDF || s[2] != ':' || s[5] != '.')
		return false;
	if (!hex_n(s, 2, &b->bus) || !hex_n(s + 3, 2, &b->dev) || !hex_n(s + 6, 1, &b->fn))
		return false;
	return b->dev <= 0x1f && b->fn <= 7;
}

/* A path component that names a PCI function ("pci0000:30", the root
 * complex, does not: it is no device on the fabric). */
static bool is_bdf(const char *s, size_t len)
{
	struct bdf b;

	return parse_bdf(s, len, true, &b);
}

int kvf_topo_norm_bdf(const char *in, char out[16])
{
	struct bdf b;

	if (!in || !out || !parse_bdf(in, strlen(in), false, &b))
		return -EINVAL;
	snprintf(out, 16, "%04lx:%02lx:%02lx.%lx", b.dom, b.bus, b.dev, b.fn);
	return 0;
}

/* Appends to why as far as it goes: a short buffer cuts the log line,
 * never the answer. */
static void say(char *why, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void say(char *why, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (!why || *at >= len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(why + *at, len - *at, fmt, ap);
	va_end(ap);
	if (k > 0)
		*at += (size_t)k;
}

/* <dir>/numa_node, or -1 when absent or unreadable (what the kernel itself
 * writes when the firmware does not say). */
static int read_numa(const char *dir)
{
	char p[PATH_MAX], buf[32], *end;
	FILE *f;
	bool ok;
	long v;

	if (snprintf(p, sizeof(p), "%s/numa_node", dir) >= (int)sizeof(p))
		return -1;
	f = fopen(p, "re");
	if (!f)
		return -1;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	v = strtol(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

/* Where a device sits: its resolved sysfs dir and NUMA node. */
struct topo_loc {
	char path[PATH_MAX];
	int numa;
	bool pci; /* the link resolves to a PCI function */
};

/* A link that does not resolve, or resolves to something that is not a
 * PCI function (soft-RoCE's virtual device), leaves pci false and numa -1:
 * whatever numa_node a virtual device shows says nothing about the path
 * its traffic takes. */
static void locate(const char *link, struct topo_loc *l)
{
	const char *last;

	l->pci = false;
	l->numa = -1;
	if (!realpath(link, l->path)) {
		l->path[0] = '\0';
		return;
	}
	last = strrchr(l->path, '/');
	last = last ? last + 1 : l->path;
	if (!is_bdf(last, strlen(last)))
		return;
	l->pci = true;
	l->numa = read_numa(l->path);
}

/* How many PCI function components two resolved paths share from the
 * start, the deepest of them into bridge. Comparing whole components:
 * 0000:31:00.0 and 0000:31:00.1 are different devices. */
static int shared_bdfs(const char *a, const char *b, char bridge[16])
{
	int n = 0;

	while (*a == '/' && *b == '/') {
		size_t la = strcspn(++a, "/"), lb = strcspn(++b, "/");

		if (la != lb || memcmp(a, b, la) != 0)
			break;
		if (is_bdf(a, la) && la < 16) {
			memcpy(bridge, a, la);
			bridge[la] = '\0';
			n++;
		}
		a += la;
		b += lb;
	}
	return n;
}

/* A candidate and what it shares with the GPU. */
struct topo_nic {
	char name[KVF_TOPO_NAME];
	char bridge[16];         /* the deepest PCI function shared with the GPU */
	int depth;               /* how many PCI functions of the chain are shared */
	enum kvf_topo_dist dist;
};

struct topo_list {
	struct topo_nic *v;
	uint32_t n, cap;
};

/* -EINVAL for a name that is no single path component (it is joined
 * into a sysfs path) or does not fit. */
static int list_push(struct topo_list *l, const char *name)
{
	size_t len = strlen(name);

	if (!len || len >= KVF_TOPO_NAME || name[0] == '.' || strchr(name, '/'))
		return -EINVAL;
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 16;
		struct topo_nic *v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memset(&l->v[l->n], 0, sizeof(l->v[l->n]));
	memcpy(l->v[l->n].name, name, len + 1);
	l->n++;
	return 0;
}

/* The names under <root>/class/infiniband (none when it is absent). */
static int list_class(const char *root, struct topo_list *l, char *why, size_t whylen)
{
	char p[PATH_MAX];
	struct dirent *e;
	size_t at = 0;
	int rc = 0;
	DIR *d;

	if (snprintf(p, sizeof(p), "%s/class/infiniband", root) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	d = opendir(p);
	if (!d) {
		rc = errno;
		if (rc == ENOENT)
			return 0;
		say(why, whylen, &at, "cannot read %s: %s", p, strerror(rc));
		return -rc;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		rc = list_push(l, e->d_name);
		if (rc == -EINVAL)
			rc = 0; /* cannot be an RDMA device name: not ours */
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct topo_nic *)a)->name, ((const struct topo_nic *)b)->name);
}

/* Sorted by name, each name once (a caller's list may repeat one). */
static void sort_unique(struct topo_list *l)
{
	uint32_t w = 0;

	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), by_name);
	for (uint32_t i = 0; i < l->n; i++)
		if (!w || strcmp(l->v[w - 1].name, l->v[i].name) != 0)
			l->v[w++] = l->v[i];
	l->n = w;
}

static int gather(const char *root, const char *const *cands, uint32_t ncands,
		  struct topo_list *l, char *why, size_t whylen)
{
	size_t at = 0;
	int rc;

	if (!ncands) {
		rc = list_class(root, l, why, whylen);
		if (rc)
			return rc;
	}
	for (uint32_t i = 0; i < ncands; i++) {
		rc = cands[i] ? list_push(l, cands[i]) : -EINVAL;
		if (rc) {
			if (rc == -EINVAL)
				say(why, whylen, &at, "bad RDMA device name '%s'",
				    cands[i] ? cands[i] : "(null)");
			return rc;
		}
	}
	if (!l->n) {
		say(why, whylen, &at, "no RDMA device under %s/class/infiniband", root);
		return -ENOENT;
	}
	sort_unique(l);
	return 0;
}

static int classify(const char *root, const struct topo_loc *gpu, struct topo_nic *nic)
{
	char link[PATH_MAX];
	struct topo_loc l;

	if (snprintf(link, sizeof(link), "%s/class/infiniband/%s/device", root, nic->name)
	    >= (int)sizeof(link))
		return -ENAMETOOLONG;
	locate(link, &l);
	nic->dist = KVF_TOPO_ANY;
	if (!l.pci)
		return 0;
	/* Two shared functions are the root port and a switch port: the
	 * paths meet below the root port, so traffic need not cross it. */
	nic->depth = shared_bdfs(gpu->path, l.path, nic->bridge);
	if (nic->depth >= 2)
		nic->dist = KVF_TOPO_SWITCH;
	else if (gpu->numa >= 0 && l.numa == gpu->numa)
		nic->dist = KVF_TOPO_NUMA;
	return 0;
}

/* The class's names into out, and the log line. The bridge named is the
 * shallowest of theirs: the one all of them share with the GPU. */
static void pick(const struct topo_list *l, enum kvf_topo_dist dist, const char *gpu, int numa,
		 char (*out)[KVF_TOPO_NAME], uint32_t max, uint32_t *n, char *why, size_t whylen)
{
	const struct topo_nic *top = NULL;
	size_t at = 0;

	*n = 0;
	say(why, whylen, &at, "GPU %s: ", gpu);
	if (dist == KVF_TOPO_ANY)
		say(why, whylen, &at, "no NIC shares its switch or NUMA node: every device (");
	for (uint32_t i = 0; i < l->n && *n < max; i++) {
		if (l->v[i].dist != dist)
			continue;
		if (!top || l->v[i].depth < top->depth)
			top = &l->v[i];
		memcpy(out[*n], l->v[i].name, sizeof(out[*n]));
		say(why, whylen, &at, "%s%s", *n ? ", " : "", l->v[i].name);
		(*n)++;
	}
	if (dist == KVF_TOPO_SWITCH)
		say(why, whylen, &at, " behind the same PCIe switch (%s)", top->bridge);
	else if (dist == KVF_TOPO_NUMA)
		say(why, whylen, &at, " on the same NUMA node %d", numa);
	else
		say(why, whylen, &at, ")");
}

/* The GPU's place: -ENOENT when sysfs has no such PCI function. */
static int locate_gpu(const char *root, const char *bdf, struct topo_loc *gpu,
		      char *why, size_t whylen)
{
	char link[PATH_MAX];
	size_t at = 0;

	if (snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bdf) >= (int)sizeof(link))
		return -ENAMETOOLONG;
	locate(link, gpu);
	if (!gpu->pci) {
		say(why, whylen, &at, "GPU %s: no such PCI device under %s/bus/pci/devices",
		    bdf, root);
		return -ENOENT;
	}
	return 0;
}

/* Classifies every candidate against the GPU and keeps the nearest class. */
static int rank(const char *root, const struct topo_loc *gpu, struct topo_list *l,
		enum kvf_topo_dist *best)
{
	*best = KVF_TOPO_ANY;
	for (uint32_t i = 0; i < l->n; i++) {
		int rc = classify(root, gpu, &l->v[i]);

		if (rc)
			return rc;
		if (l->v[i].dist < *best)
			*best = l->v[i].dist;
	}
	return 0;
}

int kvf_topo_nearest(const char *root, const char *gpu, const char *const *cands, uint32_t ncands,
		     char (*out)[KVF_TOPO_NAME], uint32_t max, uint32_t *n,
		     enum kvf_topo_dist *dist, char *why, size_t whylen)
{
	struct topo_list l = { 0 };
	struct topo_loc *loc;
	enum kvf_topo_dist best;
	char bdf[16];
	size_t at = 0;
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if (!root || !gpu || !out || !max || !n || !dist || (ncands && !cands))
		return -EINVAL;
	if (kvf_topo_norm_bdf(gpu, bdf)) {
		say(why, whylen, &at, "bad GPU PCI address '%s'", gpu);
		return -EINVAL;
	}
	loc = malloc(sizeof(*loc)); /* PATH_MAX: off the caller's stack */
	if (!loc)
		return -ENOMEM;
	rc = locate_gpu(root, bdf, loc, why, whylen);
	if (!rc)
		rc = gather(root, cands, ncands, &l, why, whylen);
	if (!rc)
		rc = rank(root, loc, &l, &best);
	if (!rc) {
		pick(&l, best, bdf, loc->numa, out, max, n, why, whylen);
		*dist = best;
	}
	free(l.v);
	free(loc);
	return rc;
}
