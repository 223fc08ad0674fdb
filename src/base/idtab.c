/* SPDX-License-Identifier: Apache-2.0 */
/* The growing id table (idtab.h). */
#include "base/idtab.h"

#include <stdlib.h>

#include "base/hash.h"

#define MAX_BUCKETS (1u << 31)

static uint32_t bucket(const struct kvf_idtab *h, uint32_t id)
{
	return (uint32_t)kvf_mix64(id) & h->mask;
}

static struct kvf_idtab_node **buckets(struct kvf_idtab *h)
{
	return h->b ? h->b : &h->one;
}

void kvf_idtab_init(struct kvf_idtab *h, uint32_t max_n)
{
	uint32_t max_b = KVF_IDTAB_MIN_BUCKETS;

	if (!max_n || max_n > MAX_BUCKETS)
		max_n = MAX_BUCKETS;
	while (max_b < max_n)
		max_b <<= 1;
	*h = (struct kvf_idtab){.max_buckets = max_b};
}

void kvf_idtab_fini(struct kvf_idtab *h)
{
	uint32_t max_b = h->max_buckets;

	free(h->b);
	*h = (struct kvf_idtab){.max_buckets = max_b};
}

/* More buckets (KVF_IDTAB_MIN_BUCKETS, then twice as many), every node
 * moved over; on no memory, nothing. */
static void grow(struct kvf_idtab *h)
{
	uint32_t old_n = h->mask + 1;
	uint32_t nb = h->b ? old_n * 2 : KVF_IDTAB_MIN_BUCKETS;
	struct kvf_idtab_node **old = buckets(h), **fresh, *node, *next;

	fresh = calloc(nb, sizeof(*fresh));
	if (!fresh)
		return;
	h->b = fresh;
	h->mask = nb - 1;
	for (uint32_t i = 0; i < old_n; i++) {
		for (node = old[i]; node; node = next) {
			struct kvf_idtab_node **b = &fresh[bucket(h, node->id)];

			next = node->next;
			node->next = *b;
			*b = node;
		}
	}
	if (old != &h->one)
		free(old);
	h->one = NULL;
	h->grows++;
}

void kvf_idtab_insert(struct kvf_idtab *h, struct kvf_idtab_node *node)
{
	uint32_t max_b = h->max_buckets ? h->max_buckets : MAX_BUCKETS;
	struct kvf_idtab_node **b;

	if (h->n >= h->mask + 1 && h->mask + 1 < max_b)
		grow(h);
	b = &buckets(h)[bucket(h, node->id)];
	node->next = *b;
	*b = node;
	h->n++;
}

struct kvf_idtab_node *kvf_idtab_find(const struct kvf_idtab *h, uint32_t id)
{
	struct kvf_idtab_node *node = h->b ? h->b[bucket(h, id)] : h->one;

	while (node && node->id != id)
		node = node->next;
	return node;
}

bool kvf_idtab_remove(struct kvf_idtab *h, struct kvf_idtab_node *node)
{
	struct kvf_idtab_node **p;

	for (p = &buckets(h)[bucket(h, node->id)]; *p; p = &(*p)->next) {
		if (*p == node) {
			*p = node->next;
			node->next = NULL;
			h->n--;
			return true;
		}
	}
	return false;
}
