/* SPDX-License-Identifier: Apache-2.0 */
/* The room API of kvferry.h, the other half (api.c has create, init,
 * send): rooms across ranks (fan-out, fan-in), poll, abort, failure,
 * quiescence, release. Scheduler thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/api.h"
#include "engine/engine.h"
#include "base/log.h"
#include "base/sized.h"

/* ------------------------------------------------------- fan-out, fan-in */

/* n receivers, given now. The room stays BOOTSTRAPPING until all n
 * joined; the bootstrap deadline covers the missing ones. */
int kvf_sender_create_fanout(kvf_engine *eng, uint64_t room_id, uint32_t n, kvf_room *out)
{
	struct kvf_fan *fan;
	struct kvf_slot *r;
	int rc;

	if (!eng || !out || n == 0 || n > KVF_FAN_MAX)
		return -EINVAL;
	if (n == 1)
		return kvf_sender_create(eng, room_id, out);
	if (eng->nfree < n)
		return -ENOSPC;
	fan = kvf_fan_alloc(n);
	if (!fan)
		return -ENOMEM;
	rc = kvf_room_new(eng, room_id, KVF_SENDER, true, &r);
	if (rc) {
		free(fan);
		return rc;
	}
	kvf_fan_attach(eng, fan, r, NULL);
	kvf_api_apply_early(eng, r, 0);
	*out = kvf_room_handle(eng, r);
	return 0;
}

/* n from the first ROOM_INFO (kvf_fan_learn, when it joins): one slot
 * now, so that the bootstrap deadline runs from creation. */
int kvf_sender_create_learned(kvf_engine *eng, uint64_t room_id, kvf_room *out)
{
	/* The flag before the parked ROOM_INFOs are applied: the first one
	 * brings n. */
	return kvf_api_sender_new(eng, room_id, KVF_RF_LEARN, out);
}

/* m senders, each a peer of its own: the receiver's ROOM_INFO goes to
 * every one of them at init. */
int kvf_receiver_create_fanin(kvf_engine *eng, uint64_t room_id, const char *const *peers,
			      uint32_t m, kvf_room *out)
{
	uint16_t idx[KVF_FAN_MAX];
	struct kvf_fan *fan;
	struct kvf_slot *r;
	int rc;

	if (!eng || !out || !peers || m == 0 || m > KVF_FAN_MAX)
		return -EINVAL;
	if (m == 1)
		return kvf_receiver_create(eng, room_id, peers[0], out);
	for (uint32_t k = 0; k < m; k++) {
		if (!kvf_api_peer_valid(peers[k])) {
			kvf_err("api", "room %#" PRIx64 ": peer %u '%s' is not host:port", room_id, k,
				peers[k] ? peers[k] : "");
			return -EINVAL;
		}
		rc = kvf_api_peer_intern(eng, peers[k], &idx[k]);
		if (rc)
			return rc;
	}
	if (eng->nfree < m)
		return -ENOSPC;
	fan = kvf_fan_alloc(m);
	if (!fan)
		return -ENOMEM;
	rc = kvf_room_new(eng, room_id, KVF_RECEIVER, true, &r);
	if (rc) {
		free(fan);
		return rc;
	}
	r->peer = idx[0];
	kvf_fan_attach(eng, fan, r, idx);
	/* a tombstone applies to the slot of the connection that left it */
	for (uint32_t k = 0; k < m; k++)
		kvf_api_apply_early_peer(eng, kvf_fan_at(eng, fan, k), idx[k]);
	*out = kvf_room_handle(eng, r);
	return 0;
}

/* ------------------------------------------------------ poll, abort, release */

int kvf_poll(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = kvf_api_room(eng, room);

	return r ? kvf_api_state(eng, r) : -EINVAL;
}

int kvf_abort(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = kvf_api_room(eng, room);
	int state;

	if (!r)
		return -EINVAL;
	state = kvf_api_state(eng, r);
	if (state == KVF_FAILED || state == KVF_SUCCESS)
		return 0; /* the first outcome stands */
	/* A fan's first slot still going fails; the others follow it. */
	for (uint32_t k = 0; k < kvf_api_nslots(r); k++) {
		struct kvf_slot *m = kvf_api_slot(eng, r, k);

		if (kvf_terminal(m))
			continue;
		kvf_room_last(eng, m, KVF_LAST_LOCAL_ABORT);
		kvf_room_fail(eng, m, KVF_FAIL_LOCAL_ABORT, ECANCELED,
			      "aborted by the local caller in %s", kvf_poll_str(m->state));
		break;
	}
	return 0;
}

int kvf_failure(kvf_engine *eng, kvf_room room, struct kvf_failure *out)
{
	struct kvf_slot *r = kvf_api_room(eng, room);
	struct kvf_failure fl = KVF_FAILURE_INIT;

	if (!r || !out)
		return -EINVAL;
	if (r->fan && r->fan->first_failed)
		r = &eng->slots[r->fan->first_failed - 1]; /* the room's failure */
	fl.reason = (enum kvf_fail_reason)r->fail_reason;
	fl.deadline = (enum kvf_deadline)r->fail_deadline;
	fl.wc_status = -1;
	if (r->fail_reason != KVF_FAIL_NONE && !r->fail) {
		snprintf(fl.detail, sizeof(fl.detail), "%s (detail lost: out of memory)",
			 kvf_fail_reason_str(fl.reason));
	} else if (r->fail_reason != KVF_FAIL_NONE) {
		fl.err = r->fail->err;
		fl.wc_status = r->fail->wc_status;
		fl.vendor_err = r->fail->vendor_err;
		memcpy(fl.detail, r->fail->text, sizeof(fl.detail));
	}
	return kvf_sized_copy(out, &fl, sizeof(fl), offsetof(struct kvf_failure, reason));
}

int kvf_quiescent(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = kvf_api_room(eng, room);

	if (!r)
		return -EINVAL;
	if (r->fan)
		return kvf_fan_quiescent(eng, r->fan);
	return (r->flags & KVF_RF_QUIESCENT) != 0;
}

int kvf_release(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = kvf_api_room(eng, room);
	bool held;

	if (!r)
		return -EINVAL;
	for (uint32_t k = 0; k < kvf_api_nslots(r); k++) {
		const struct kvf_slot *m = kvf_api_slot(eng, r, k);

		if (!kvf_terminal(m) || !(m->flags & KVF_RF_QUIESCENT))
			return -EBUSY;
	}
	held = kvf_clock_hold(eng);
	if (r->fan)
		kvf_fan_release(eng, r);
	else
		kvf_room_free(eng, r, true);
	kvf_clock_drop(eng, held);
	return 0;
}
