/* SPDX-License-Identifier: Apache-2.0 */
/* Each connection's room list (src/engine/conn_rooms.c) against a model: random
 * binds, moves and unbinds over many connections, so the map grows and
 * its backward-shift deletion runs; every list must hold exactly the rooms
 * the model says, and an emptied connection must leave the map. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "engine/conn_rooms.h"
#include "engine/engine_impl.h"

#define NSLOTS 3000u
#define NCONNS 400u

static struct kvf_slot slots[NSLOTS];
static uint32_t model[NSLOTS]; /* the conn each slot is bound to, 0 none */

static uint32_t conn_id(uint32_t k)
{
	return k ? 0x9e370000u + k * 7919u : 0; /* spread, never 0 for k > 0 */
}

static void bind(struct kvf_conn_rooms *m, uint32_t slot, uint32_t conn)
{
	kvf_conn_rooms_del(m, slots, slot);
	if (conn)
		cr_assert_eq(kvf_conn_rooms_add(m, slots, slot, conn), 0);
	model[slot] = conn;
}

static void check_all(const struct kvf_conn_rooms *m)
{
	uint32_t seen = 0, listed = 0, nonempty = 0;

	for (uint32_t s = 0; s < NSLOTS; s++)
		listed += model[s] != 0;
	for (uint32_t k = 1; k <= NCONNS; k++) {
		uint32_t c = conn_id(k), prev = 0, n = 0, want = 0;

		for (uint32_t s = 0; s < NSLOTS; s++)
			want += model[s] == c;
		for (uint32_t i = kvf_conn_rooms_first(m, c); i; i = slots[i - 1].conn_next) {
			cr_assert_eq(model[i - 1], c, "slot %u listed under conn %u, bound to %u",
				     i - 1, c, model[i - 1]);
			cr_assert_eq(slots[i - 1].conn_prev, prev, "back link of slot %u", i - 1);
			prev = i;
			cr_assert_leq(++n, NSLOTS, "a cycle in conn %u's list", c);
		}
		cr_assert_eq(n, want, "conn %u lists %u rooms, %u are bound to it", c, n, want);
		seen += n;
		nonempty += n != 0;
	}
	cr_assert_eq(seen, listed);
	cr_assert_eq(m->n, nonempty, "the map keeps only connections with rooms");
}

Test(conn_rooms, random_binds_match_the_model)
{
	struct kvf_conn_rooms m = {0};

	srand(7);
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < 2000; i++) {
			uint32_t s = (uint32_t)rand() % NSLOTS;
			/* a third unbinds, so connections empty out and leave */
			uint32_t k = rand() % 3 == 0 ? 0 : 1 + (uint32_t)rand() % NCONNS;

			bind(&m, s, conn_id(k));
		}
		check_all(&m);
	}
	for (uint32_t s = 0; s < NSLOTS; s++)
		bind(&m, s, 0);
	check_all(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(m.unlisted, 0);
	kvf_conn_rooms_fini(&m);
}

Test(conn_rooms, unknown_or_zero_conn_has_no_rooms)
{
	struct kvf_conn_rooms m = {0};

	cr_assert_eq(kvf_conn_rooms_first(&m, 5), 0, "empty map");
	bind(&m, 3, 5);
	cr_assert_eq(kvf_conn_rooms_first(&m, 5), 4);
	cr_assert_eq(kvf_conn_rooms_first(&m, 6), 0);
	cr_assert_eq(kvf_conn_rooms_first(&m, 0), 0);
	bind(&m, 3, 0);
	cr_assert_eq(kvf_conn_rooms_first(&m, 5), 0);
	kvf_conn_rooms_fini(&m);
}
