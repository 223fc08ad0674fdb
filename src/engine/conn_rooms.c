/* SPDX-License-Identifier: Apache-2.0 */
#include "engine/conn_rooms.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "base/hash.h"
#include "base/log.h"
#include "engine/engine_impl.h"

#define FIRST_CAP 64u

void kvf_conn_rooms_fini(struct kvf_conn_rooms *m)
{
	free(m->tab);
	m->tab = NULL;
	m->cap = m->n = m->last_conn = 0;
}

static uint32_t bucket(const struct kvf_conn_rooms *m, uint32_t conn)
{
	return (uint32_t)kvf_mix64(conn) & (m->cap - 1);
}

/* The entry of conn, or the empty one where it would go. */
static struct kvf_cr_ent *probe(const struct kvf_conn_rooms *m, uint32_t conn)
{
	uint32_t i = bucket(m, conn);

	while (m->tab[i].conn && m->tab[i].conn != conn)
		i = (i + 1) & (m->cap - 1);
	return &m->tab[i];
}

/* probe, through the one-entry cache. */
static struct kvf_cr_ent *find(struct kvf_conn_rooms *m, uint32_t conn)
{
	struct kvf_cr_ent *e;

	if (conn == m->last_conn)
		return &m->tab[m->last_at];
	e = probe(m, conn);
	if (e->conn) {
		m->last_conn = conn;
		m->last_at = (uint32_t)(e - m->tab);
	}
	return e;
}

static int grow(struct kvf_conn_rooms *m)
{
	struct kvf_conn_rooms big = {.cap = m->cap ? 2 * m->cap : FIRST_CAP, .n = m->n,
				     .unlisted = m->unlisted};

	big.tab = calloc(big.cap, sizeof(*big.tab));
	if (!big.tab)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->tab[i].conn)
			*probe(&big, m->tab[i].conn) = m->tab[i];
	free(m->tab);
	*m = big; /* the cache is clear in big */
	return 0;
}

/* Backward-shift deletion (as src/base/idmap.c): an entry that probed past the
 * hole moves into it, so no lookup ever stops early. */
static void remove_at(struct kvf_conn_rooms *m, uint32_t hole)
{
	uint32_t mask = m->cap - 1;

	m->last_conn = 0; /* entries move */
	for (uint32_t j = (hole + 1) & mask; m->tab[j].conn; j = (j + 1) & mask) {
		uint32_t home = bucket(m, m->tab[j].conn);

		/* j's entry may fill the hole when its home is not in (hole, j]. */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			m->tab[hole] = m->tab[j];
			hole = j;
		}
	}
	m->tab[hole].conn = 0;
	m->tab[hole].head = 0;
	m->n--;
}

__attribute__((cold, noinline)) static int unlisted(struct kvf_conn_rooms *m,
						     const struct kvf_slot *r, uint32_t conn)
{
	m->unlisted++;
	kvf_err("room", "no memory to list room %#" PRIx64 " under conn %u: losing that "
		"connection will scan the room table", r->id, conn);
	return -ENOMEM;
}

int kvf_conn_rooms_add(struct kvf_conn_rooms *m, struct kvf_slot *slots, uint32_t slot,
		       uint32_t conn)
{
	struct kvf_slot *r = &slots[slot];
	struct kvf_cr_ent *e;

	if (conn == m->last_conn) {
		e = &m->tab[m->last_at]; /* has rooms: no new entry, no growth */
	} else {
		if (2 * (m->n + 1) > m->cap && grow(m))
			return unlisted(m, r, conn);
		e = find(m, conn);
	}
	if (!e->conn) {
		e->conn = conn;
		m->n++;
	}
	/* At the head: O(1) without a tail; the order of a list means nothing. */
	r->list_conn = conn;
	r->conn_prev = 0;
	r->conn_next = e->head;
	if (e->head)
		slots[e->head - 1].conn_prev = slot + 1;
	e->head = slot + 1;
	return 0;
}

void kvf_conn_rooms_del(struct kvf_conn_rooms *m, struct kvf_slot *slots, uint32_t slot)
{
	struct kvf_slot *r = &slots[slot];

	if (!r->list_conn)
		return;
	if (r->conn_next)
		slots[r->conn_next - 1].conn_prev = r->conn_prev;
	if (r->conn_prev) {
		slots[r->conn_prev - 1].conn_next = r->conn_next;
	} else {
		struct kvf_cr_ent *e = find(m, r->list_conn);

		e->head = r->conn_next;
		if (!e->head)
			remove_at(m, (uint32_t)(e - m->tab));
	}
	r->list_conn = r->conn_prev = r->conn_next = 0;
}

uint32_t kvf_conn_rooms_first(const struct kvf_conn_rooms *m, uint32_t conn)
{
	if (!m->cap || !conn)
		return 0;
	return probe(m, conn)->head;
}
