/* SPDX-License-Identifier: Apache-2.0 */
#include "base/idmap.h"

#include <errno.h>
#include <stdlib.h>

#include "base/hash.h"
#include "base/mem.h"

#define VAL_BITS 25
#define ROLE_BIT (1ull << VAL_BITS)
#define HASH_SHIFT (VAL_BITS + 1) /* the top 38 bits of the hash */

static uint64_t idmap_hash(uint64_t id, uint32_t role)
{
	return kvf_mix64(id ^ ((uint64_t)role << 63));
}

/* What an entry for (hash, role) holds apart from its value. */
static uint64_t tag(uint64_t h, uint32_t role)
{
	return (h >> HASH_SHIFT) << HASH_SHIFT | (role ? ROLE_BIT : 0);
}

static uint32_t bucket(const struct kvf_idmap *m, uint64_t h)
{
	return (uint32_t)(h >> m->shift);
}

static uint32_t val_of(uint64_t e)
{
	return (uint32_t)(e & (ROLE_BIT - 1)) - 1;
}

int kvf_idmap_init(struct kvf_idmap *m, uint32_t max, kvf_idmap_key_fn key_of, const void *ctx)
{
	uint32_t size = 16, bits = 4;

	if (max > KVF_IDMAP_MAX_VAL + 1 || !key_of)
		return -EINVAL;
	while (size < 2ull * max) {
		size <<= 1;
		bits++;
	}
	m->tab = kvf_table_alloc(size, sizeof(*m->tab));
	if (!m->tab)
		return -ENOMEM;
	m->mask = size - 1;
	m->shift = 64 - bits;
	m->n = 0;
	m->max = max;
	m->key_of = key_of;
	m->ctx = ctx;
	return 0;
}

void kvf_idmap_fini(struct kvf_idmap *m)
{
	kvf_table_free(m->tab, (size_t)m->mask + 1, sizeof(*m->tab));
	m->tab = NULL;
}

/* The index of (id, role), or the empty bucket that ends its probe run
 * (*found false). */
static uint32_t probe_h(const struct kvf_idmap *m, uint64_t h, uint64_t id, uint32_t role,
			bool *found)
{
	uint64_t want = tag(h, role);
	uint32_t i = bucket(m, h);

	for (; m->tab[i]; i = (i + 1) & m->mask) {
		uint64_t e = m->tab[i];

		if ((e & ~(ROLE_BIT - 1)) == want && m->key_of(m->ctx, val_of(e)) == id) {
			*found = true;
			return i;
		}
	}
	*found = false;
	return i;
}

static uint32_t probe(const struct kvf_idmap *m, uint64_t id, uint32_t role, bool *found)
{
	return probe_h(m, idmap_hash(id, role), id, role, found);
}

uint64_t kvf_idmap_prefetch(const struct kvf_idmap *m, uint64_t id, uint32_t role)
{
	uint64_t h = idmap_hash(id, role);

	__builtin_prefetch(&m->tab[bucket(m, h)], 1);
	return h;
}

int kvf_idmap_insert_h(struct kvf_idmap *m, uint64_t h, uint64_t id, uint32_t role,
		       uint32_t val)
{
	bool found;
	uint32_t i = probe_h(m, h, id, role, &found);

	if (found)
		return -EEXIST;
	if (m->n >= m->max || val > KVF_IDMAP_MAX_VAL)
		return -ENOSPC;
	m->tab[i] = tag(h, role) | (uint64_t)(val + 1);
	m->n++;
	return 0;
}

int kvf_idmap_insert(struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t val)
{
	return kvf_idmap_insert_h(m, idmap_hash(id, role), id, role, val);
}

bool kvf_idmap_find(const struct kvf_idmap *m, uint64_t id, uint32_t role, uint32_t *val)
{
	bool found;
	uint32_t i = probe(m, id, role, &found);

	if (found)
		*val = val_of(m->tab[i]);
	return found;
}

bool kvf_idmap_remove(struct kvf_idmap *m, uint64_t id, uint32_t role)
{
	bool found;
	uint32_t i = probe(m, id, role, &found);

	if (!found)
		return false;
	/* Backward shift: pull later entries of the probe run into the hole
	 * unless that would move one before its home bucket. An entry's hash
	 * bits give its home without the id. */
	for (uint32_t j = (i + 1) & m->mask; m->tab[j]; j = (j + 1) & m->mask) {
		uint32_t home = bucket(m, m->tab[j]);

		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->tab[i] = m->tab[j];
			i = j;
		}
	}
	m->tab[i] = 0;
	m->n--;
	return true;
}
