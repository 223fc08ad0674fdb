/* SPDX-License-Identifier: Apache-2.0 */
/* A room's slots across ranks (fan.h): creation, the state they make
 * together, the one failure, release. Scheduler thread only. */
#include "fan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "log.h"

struct kvf_fan *kvf_fan_alloc(uint32_t n)
{
	struct kvf_fan *fan = calloc(1, sizeof(*fan) + n * sizeof(fan->slot[0]));

	if (fan)
		fan->n = n;
	return fan;
}

void kvf_fan_attach(struct kvf_engine *eng, struct kvf_fan *fan, struct kvf_slot *lead,
		    const uint16_t *peers)
{
	struct kvf_slot *m;

	fan->slot[0] = kvf_slot_index(eng, lead);
	lead->fan = fan;
	for (uint32_t k = 1; k < fan->n; k++) {
		/* Cannot fail: the caller checked nfree, and a member is not
		 * mapped (no -EEXIST). */
		kvf_room_new(eng, lead->id, (enum kvf_role)lead->role, false, &m);
		m->fan = fan;
		m->peer = peers ? peers[k] : 0;
		fan->slot[k] = kvf_slot_index(eng, m);
	}
}

struct kvf_slot *kvf_fan_pick(struct kvf_engine *eng, struct kvf_slot *lead, uint32_t conn)
{
	const struct kvf_fan *fan = lead->fan;
	struct kvf_slot *unbound = NULL;

	for (uint32_t k = 0; conn && k < fan->n; k++) {
		struct kvf_slot *m = kvf_fan_at(eng, fan, k);

		if (m->conn == conn)
			return m;
		if (!unbound && !m->conn && !kvf_terminal(m))
			unbound = m;
	}
	return unbound ? unbound : lead;
}

uint32_t kvf_fan_joined(struct kvf_engine *eng, const struct kvf_fan *fan)
{
	uint32_t j = 0;

	for (uint32_t k = 0; k < fan->n; k++)
		j += kvf_fan_at(eng, fan, k)->info != NULL;
	return j;
}

int kvf_fan_state(struct kvf_engine *eng, const struct kvf_fan *fan)
{
	int least = KVF_SUCCESS;

	for (uint32_t k = 0; k < fan->n; k++) {
		const struct kvf_slot *m = kvf_fan_at(eng, fan, k);

		if (m->fail_reason != KVF_FAIL_NONE)
			return KVF_FAILED;
		if (m->state < least)
			least = m->state;
	}
	return least;
}

bool kvf_fan_quiescent(struct kvf_engine *eng, const struct kvf_fan *fan)
{
	for (uint32_t k = 0; k < fan->n; k++)
		if (!(kvf_fan_at(eng, fan, k)->flags & KVF_RF_QUIESCENT))
			return false;
	return true;
}

void kvf_fan_failed(struct kvf_engine *eng, struct kvf_slot *r)
{
	struct kvf_fan *fan = r->fan;
	const char *peer = r->role == KVF_SENDER ? "receiver" : "sender";
	struct kvf_fail_how how = {
		.reason = (enum kvf_fail_reason)r->fail_reason,
		.dl = (enum kvf_deadline)r->fail_deadline, .err = ECANCELED, .wc_status = -1,
		.rank = true,
	};
	uint32_t k0 = 0;

	if (fan->failed)
		return; /* r is one of those failed after the first */
	fan->failed = true;
	fan->first_failed = kvf_slot_index(eng, r) + 1;
	while (fan->slot[k0] != kvf_slot_index(eng, r))
		k0++;
	for (uint32_t k = 0; k < fan->n; k++) {
		struct kvf_slot *m = kvf_fan_at(eng, fan, k);

		if (m != r)
			kvf_room_fail_how(eng, m, &how, "%s %u of %u failed: %s", peer, k0, fan->n,
					  r->fail ? r->fail->text : kvf_fail_reason_str(how.reason));
	}
	kvf_info("room", "room %#" PRIx64 ": %s %u of %u failed, the room's other %u %ss with it",
		 r->id, peer, k0, fan->n, fan->n - 1, peer);
}

void kvf_fan_release(struct kvf_engine *eng, struct kvf_slot *lead)
{
	struct kvf_fan *fan = lead->fan;

	for (uint32_t k = 0; k < fan->n; k++)
		kvf_fan_at(eng, fan, k)->fan = NULL;
	for (uint32_t k = 1; k < fan->n; k++)
		kvf_room_free(eng, kvf_fan_at(eng, fan, k), false);
	kvf_room_free(eng, lead, true);
	free(fan);
}

void kvf_fan_drop(struct kvf_engine *eng, uint32_t i)
{
	struct kvf_fan *fan = eng->slots[i].fan;

	if (!fan || fan->slot[0] != i)
		return; /* none, or a member: its lead frees the fan */
	for (uint32_t k = 0; k < fan->n; k++)
		kvf_fan_at(eng, fan, k)->fan = NULL;
	free(fan);
}
