/* SPDX-License-Identifier: Apache-2.0 */
#include "idmap.h"

#include <errno.h>
#include <stdlib.h>

#include "mem.h"

static uint32_t idmap_hash(uint64_t id, uint32_t role)
{
	/* Room ids may be sequential or random: mix all 64 bits (the
	 * finalizer of splitmix64) so both spread evenly. */
	uint64_t x = id ^ ((uint64_t)role << 63);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint32_t)x;
}

int kvf_idmap_init(struct kvf_idmap *m, uint32_t max)
{
	uint32_t size = 16;

	while (size < 2ull * max)
		size <<= 1;
	m->tab = kvf_table_alloc(size, sizeof(*m->tab));
	if (!m->tab)
		return -ENOMEM;
	m->mask = size - 1;
	m->n = 0;
	m->max = max;
	return 0;
}

void kvf_idmap_fini(struct kvf_idmap *m)
{
	kvf_table_free(m->tab, (size_t)m->mask + 1, sizeof(*m->tab));
	m->tab = NULL;
}

static bool same(const struct kvf_idmap_ent *e, uint64_t id, uint32_t role)
{
	return e->id == id && e->role == role;
}

int kvf_idmap_insert(struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t slot)
{
	uint32_t i = idmap_hash(id, role) & m->mask;

	for (; m->tab[i].val; i = (i + 1) & m->mask)
		if (same(&m->tab[i], id, role))
			return -EEXIST;
	if (m->n >= m->max)
		return -ENOSPC;
	m->tab[i] = (struct kvf_idmap_ent){ .id = id, .val = slot + 1, .role = role };
	m->n++;
	return 0;
}

bool kvf_idmap_find(const struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t *slot)
{
	for (uint32_t i = idmap_hash(id, role) & m->mask; m->tab[i].val; i = (i + 1) & m->mask) {
		if (same(&m->tab[i], id, role)) {
			*slot = m->tab[i].val - 1;
			return true;
		}
	}
	return false;
}

bool kvf_idmap_remove(struct kvf_idmap *m, uint64_t id, uint32_t role)
{
	uint32_t i = idmap_hash(id, role) & m->mask;

	while (m->tab[i].val && !same(&m->tab[i], id, role))
		i = (i + 1) & m->mask;
	if (!m->tab[i].val)
		return false;
	/* Backward shift: pull later entries of the probe run into the hole
	 * unless that would move one before its home bucket. */
	for (uint32_t j = (i + 1) & m->mask; m->tab[j].val; j = (j + 1) & m->mask) {
		uint32_t home = idmap_hash(m->tab[j].id, m->tab[j].role) & m->mask;

		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->tab[i] = m->tab[j];
			i = j;
		}
	}
	m->tab[i].val = 0;
	m->n--;
	return true;
}
