/* SPDX-License-Identifier: Apache-2.0 */
/* A room's slots across ranks (fan.h): creation, the state they make
 * together, the one failure, release. Scheduler thread only. */
#include "engine/fan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

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

/* The n of the fan-out tag the info's user data begins with; 1 without a
 * tag (a peer that fans out to no one). */
static uint32_t tag_n(const struct kvf_peer_info *info)
{
	const uint8_t *u = info->user;

	if (info->user_len < KVF_FAN_TAG_LEN || memcmp(u, KVF_FAN_TAG_MAGIC, 4) ||
	    u[4] != KVF_FAN_TAG_VERSION || u[5])
		return 1;
	return u[8] | (uint32_t)u[9] << 8 | (uint32_t)u[10] << 16 | (uint32_t)u[11] << 24;
}

int kvf_fan_learn(struct kvf_engine *eng, struct kvf_slot *lead)
{
	uint32_t n = tag_n(lead->info);
	struct kvf_fan *fan = NULL;

	lead->flags &= (uint8_t)~KVF_RF_LEARN;
	if (n == 1)
		return 0;
	if (n == 0 || n > KVF_FAN_MAX) {
		kvf_room_fail(eng, lead, KVF_FAIL_BAD_FRAME, EPROTO, "the first ROOM_INFO's fan-out "
			      "tag names %u receivers: 1 to %u allowed", n, KVF_FAN_MAX);
		return -EPROTO;
	}
	if (eng->nfree >= n - 1)
		fan = kvf_fan_alloc(n);
	if (!fan) {
		kvf_room_fail(eng, lead, KVF_FAIL_BAD_REQUEST, ENOSPC, "the first ROOM_INFO asks "
			      "for a fan-out to %u receivers: %u more room slots wanted, %u free "
			      "(engine.max_rooms)", n, n - 1, eng->nfree);
		return -ENOSPC;
	}
	kvf_fan_attach(eng, fan, lead, NULL);
	/* The room's bootstrap deadline runs from its creation, not from now:
	 * a receiver that never comes fails it in the same time as with n
	 * given at creation. */
	for (uint32_t k = 1; k < n; k++)
		kvf_room_backdate(eng, kvf_fan_at(eng, fan, k), lead->created_ns);
	kvf_dbg("room", "room %#" PRIx64 ": fan-out to %u receivers, learned from the first "
		  "ROOM_INFO", lead->id, n);
	return 0;
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
