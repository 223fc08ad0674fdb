/* SPDX-License-Identifier: Apache-2.0 */
/* The room API of kvferry.h: sender/receiver calls of the scheduler thread. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "room.h"
#include "sized.h"

/* A handle's room, or NULL when the handle is stale or out of range. */
static struct kvf_slot *room_get(kvf_engine *eng, kvf_room h)
{
	return kvf_room_at(eng, (uint32_t)h.v, (uint32_t)(h.v >> 32), UINT32_MAX);
}

int kvf_pool_register(kvf_engine *eng, uint32_t nbufs, void *const *bufs,
		      const uint64_t *block_size, uint32_t nblocks)
{
	struct kvf_pool_layout pool = { nbufs, nblocks, bufs, block_size };
	int rc = 0;

	if (!eng || !nbufs || !nblocks || !bufs || !block_size)
		return -EINVAL;
	if (eng->pool_ok)
		return -EEXIST;
	if (eng->st.created) {
		/* The rooms' block ids were checked against no pool, and the
		 * peers may already have our layout: register first. */
		kvf_err("pool", "kvf_pool_register after %" PRIu64 " rooms were created: it must "
			"come before the first room", eng->st.created);
		return -EBUSY;
	}
	for (uint32_t i = 0; i < nbufs; i++) {
		if (!bufs[i] || !block_size[i]) {
			kvf_err("pool", "buffer %u: %s", i, !bufs[i] ? "NULL address" : "block size 0");
			return -EINVAL;
		}
	}
	if (eng->ops && eng->ops->pool_register)
		rc = eng->ops->pool_register(eng->t, &pool);
	if (rc)
		return rc;
	eng->pool_ok = true;
	eng->pool_nblocks = nblocks;
	eng->block_bytes = 0;
	for (uint32_t i = 0; i < nbufs; i++)
		eng->block_bytes += block_size[i];
	return 0;
}

/* ------------------------------------------------------------------ create */

static int room_new(kvf_engine *eng, uint64_t id, enum kvf_role role, struct kvf_slot **out)
{
	struct kvf_slot *r;
	uint32_t slot;
	int rc;

	if (!eng->nfree)
		return -ENOSPC;
	slot = eng->free_stack[eng->nfree - 1];
	rc = kvf_idmap_insert(&eng->ids, id, role, slot);
	if (rc)
		return rc; /* -EEXIST: the live room with this id is untouched */
	eng->nfree--;
	r = &eng->slots[slot];
	r->id = id;
	r->role = (uint8_t)role;
	r->flags = 0;
	r->conn = 0;
	r->outstanding = 0;
	r->fail_reason = KVF_FAIL_NONE;
	r->fail_deadline = KVF_DL_NONE; /* kvf_failure reports it even when not failed */
	memset(kvf_obs(eng, r), 0, sizeof(struct kvf_room_obs));
	kvf_room_last(eng, r, KVF_LAST_CREATED);
	r->created_ns = kvf_now(eng);
	kvf_room_transition(eng, r, KVF_BOOTSTRAPPING); /* from KVF_ROOM_FREE */
	eng->st.created++;
	*out = r;
	return 0;
}

/* What arrived before the room: a tombstone fails it now, a parked
 * ROOM_INFO moves it on. A new room is bound to no connection yet, so the
 * entry applies whichever connection left it, and binds a sender to it. */
static void apply_early(kvf_engine *eng, struct kvf_slot *r)
{
	struct kvf_early_ent e;

	if (kvf_early_empty(&eng->early) || !kvf_early_take(&eng->early, r->id, r->role, &e))
		return;
	if (e.kind == KVF_EARLY_TOMBSTONE) {
		eng->st.tombstones_applied++;
		kvf_room_peer_abort(eng, r, e.conn, e.reason, true);
	} else {
		eng->st.early_infos_applied++;
		kvf_room_peer_info(eng, r, e.info);
	}
}

int kvf_sender_create(kvf_engine *eng, uint64_t room_id, kvf_room *out)
{
	struct kvf_slot *r;
	int rc;

	if (!eng || !out)
		return -EINVAL;
	rc = room_new(eng, room_id, KVF_SENDER, &r);
	if (rc)
		return rc;
	apply_early(eng, r);
	*out = kvf_room_handle(eng, r);
	return 0;
}

/* "host:port" with a numeric port in [1, 65535]. */
static bool peer_valid(const char *peer)
{
	const char *colon = peer ? strrchr(peer, ':') : NULL;
	char *end;
	long port;

	if (!colon || colon == peer)
		return false;
	port = strtol(colon + 1, &end, 10);
	return *end == '\0' && end != colon + 1 && port > 0 && port <= 65535;
}

/* Peers are few; a linear search keeps one copy of each address. */
static int peer_intern(kvf_engine *eng, const char *peer, uint16_t *idx)
{
	char **grown;
	uint32_t *conns;

	for (uint32_t i = 0; i < eng->npeers; i++) {
		if (strcmp(eng->peers[i], peer) == 0) {
			*idx = (uint16_t)i;
			return 0;
		}
	}
	if (eng->npeers >= UINT16_MAX)
		return -ENOSPC;
	grown = realloc(eng->peers, (eng->npeers + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	eng->peers = grown;
	conns = realloc(eng->peer_conns, (eng->npeers + 1) * sizeof(*conns));
	if (!conns)
		return -ENOMEM;
	eng->peer_conns = conns;
	conns[eng->npeers] = 0;
	eng->peers[eng->npeers] = strdup(peer);
	if (!eng->peers[eng->npeers])
		return -ENOMEM;
	*idx = (uint16_t)eng->npeers++;
	return 0;
}

int kvf_receiver_create(kvf_engine *eng, uint64_t room_id, const char *peer, kvf_room *out)
{
	struct kvf_slot *r;
	uint16_t idx;
	int rc;

	if (!eng || !out)
		return -EINVAL;
	if (!peer)
		peer = eng->cfg.peer;
	if (!peer_valid(peer)) {
		kvf_err("api", "room %#" PRIx64 ": peer '%s' is not host:port", room_id,
			peer ? peer : "");
		return -EINVAL;
	}
	rc = peer_intern(eng, peer, &idx);
	if (rc)
		return rc;
	rc = room_new(eng, room_id, KVF_RECEIVER, &r);
	if (rc)
		return rc;
	r->peer = idx;
	apply_early(eng, r);
	*out = kvf_room_handle(eng, r);
	return 0;
}

/* ------------------------------------------------------------- init / send */

/* -ERANGE and the room FAILED (BAD_REQUEST) when a block is outside the pool. */
static int check_blocks(kvf_engine *eng, struct kvf_slot *r, const uint32_t *blocks, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (blocks[i] >= eng->pool_nblocks) {
			kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, ERANGE,
				      "block[%u] = %u is outside the pool (%u blocks)", i,
				      blocks[i], eng->pool_nblocks);
			return -ERANGE;
		}
	}
	return 0;
}

/* The common refusals of init and send. */
static int check_call(kvf_engine *eng, struct kvf_slot *r, enum kvf_role role,
		      const uint32_t *blocks, uint32_t n)
{
	if (!r || r->role != role || !blocks || n == 0 || n > eng->cfg.max_blocks_per_room)
		return -EINVAL;
	if (!eng->pool_ok) {
		kvf_err("api", "room %#" PRIx64 ": no pool registered (kvf_pool_register)", r->id);
		return -ENOBUFS;
	}
	if (r->state == KVF_FAILED)
		return -ECANCELED;
	return 0;
}

int kvf_receiver_init(kvf_engine *eng, kvf_room room, const uint32_t *blocks, uint32_t nblocks)
{
	struct kvf_slot *r = room_get(eng, room);
	uint64_t handle = room.v;
	uint32_t conn = 0;
	int rc = check_call(eng, r, KVF_RECEIVER, blocks, nblocks);

	if (rc)
		return rc;
	if (r->state != KVF_BOOTSTRAPPING)
		return -EALREADY;
	rc = check_blocks(eng, r, blocks, nblocks);
	if (rc)
		return rc;
	kvf_room_last(eng, r, KVF_LAST_INIT);
	rc = eng->ops ? eng->ops->send_room_info(eng->t, eng->peers[r->peer], r->id, handle,
						 blocks, nblocks, &conn)
		      : -ENOTCONN;
	if (rc) {
		kvf_room_fail(eng, r, KVF_FAIL_CONNECT, -rc, "sending ROOM_INFO to %s failed: %s",
			      eng->peers[r->peer], strerror(-rc));
		return rc;
	}
	r->conn = conn;
	r->flags |= KVF_RF_INFO_SENT;
	/* Connection ids are never reused: another id for the same peer is
	 * a new connection after the last one was lost. */
	if (eng->peer_conns[r->peer] && eng->peer_conns[r->peer] != conn)
		eng->oc.reconnects++;
	eng->peer_conns[r->peer] = conn;
	kvf_obs(eng, r)->info_ns = kvf_now(eng);
	kvf_obs(eng, r)->chunks_total = nblocks; /* they land at once, with the last write */
	kvf_obs(eng, r)->bytes = (uint64_t)nblocks * eng->block_bytes;
	kvf_room_transition(eng, r, KVF_WAITING_FOR_INPUT);
	return 0;
}

/* Why posting failed, as a room failure reason. */
static enum kvf_fail_reason post_reason(int rc)
{
	switch (rc) {
	case -ENOTCONN:
	case -ECONNRESET:
	case -EPIPE:
		return KVF_FAIL_PEER_LOST;
	case -EPROTO:
	case -EBADMSG:
		return KVF_FAIL_BAD_FRAME;   /* the peer's pool layout does not fit */
	case -ERANGE:
	case -EMSGSIZE:
		return KVF_FAIL_BAD_REQUEST; /* blocks outside what the peer has */
	default:
		return KVF_FAIL_DEVICE;
	}
}

static int post_failed(kvf_engine *eng, struct kvf_slot *r, int rc)
{
	kvf_room_fail(eng, r, post_reason(rc), -rc, "posting the writes on conn %u failed: %s",
		      r->conn, strerror(-rc));
	return rc;
}

/* The sender's bytes and chunks as handed to the transport. */
static void sent_obs(kvf_engine *eng, struct kvf_slot *r, uint32_t nblocks, uint32_t signaled)
{
	struct kvf_room_obs *o = kvf_obs(eng, r);

	o->send_ns = kvf_now(eng);
	o->bytes = (uint64_t)nblocks * eng->block_bytes;
	o->chunks_total = signaled;
	eng->oc.bytes_sent += o->bytes;
}

int kvf_sender_send(kvf_engine *eng, kvf_room room, const uint32_t *blocks, uint32_t nblocks)
{
	struct kvf_slot *r = room_get(eng, room);
	struct kvf_peer_info *info;
	int rc = check_call(eng, r, KVF_SENDER, blocks, nblocks);

	if (rc)
		return rc;
	if (r->state == KVF_BOOTSTRAPPING)
		return -EAGAIN;
	if (r->state != KVF_WAITING_FOR_INPUT)
		return -EALREADY;
	info = r->info;
	if (nblocks != info->nblocks) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, EMSGSIZE,
			      "send() has %u source blocks, the receiver asked for %u",
			      nblocks, info->nblocks);
		return -EMSGSIZE;
	}
	rc = check_blocks(eng, r, blocks, nblocks);
	if (rc)
		return rc;
	kvf_room_last(eng, r, KVF_LAST_SEND);
	rc = eng->ops ? eng->ops->post_writes(eng->t, r->conn,
					      kvf_wr_id(KVF_WR_DATA, r->gen, kvf_slot_index(eng, r)),
					      kvf_imm((uint32_t)info->recv_handle,
						      (uint32_t)(info->recv_handle >> 32)),
					      blocks, info->blocks, nblocks)
		      : -ENOTCONN;
	if (rc <= 0)
		return post_failed(eng, r, rc ? rc : -EIO);
	r->outstanding = (uint32_t)rc;
	sent_obs(eng, r, nblocks, (uint32_t)rc);
	kvf_room_transition(eng, r, KVF_TRANSFERRING);
	return 0;
}

/* ------------------------------------------------------ poll, abort, release */

int kvf_poll(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = room_get(eng, room);

	if (!r)
		return -EINVAL;
	/* The failure field first: whatever else is in flight, a failed
	 * room is FAILED. */
	if (r->fail_reason != KVF_FAIL_NONE)
		return KVF_FAILED;
	return r->state;
}

int kvf_abort(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = room_get(eng, room);

	if (!r)
		return -EINVAL;
	if (kvf_terminal(r))
		return 0; /* the first outcome stands */
	kvf_room_last(eng, r, KVF_LAST_LOCAL_ABORT);
	kvf_room_fail(eng, r, KVF_FAIL_LOCAL_ABORT, ECANCELED, "aborted by the local caller in %s",
		      kvf_poll_str(r->state));
	return 0;
}

int kvf_failure(kvf_engine *eng, kvf_room room, struct kvf_failure *out)
{
	struct kvf_slot *r = room_get(eng, room);
	struct kvf_failure fl = KVF_FAILURE_INIT;

	if (!r || !out)
		return -EINVAL;
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
	struct kvf_slot *r = room_get(eng, room);

	if (!r)
		return -EINVAL;
	return (r->flags & KVF_RF_QUIESCENT) != 0;
}

int kvf_release(kvf_engine *eng, kvf_room room)
{
	struct kvf_slot *r = room_get(eng, room);
	uint32_t slot;

	if (!r)
		return -EINVAL;
	if (!kvf_terminal(r) || !(r->flags & KVF_RF_QUIESCENT))
		return -EBUSY;
	slot = kvf_slot_index(eng, r);
	kvf_idmap_remove(&eng->ids, r->id, r->role);
	free(r->info);
	free(r->fail);
	r->info = NULL;
	r->fail = NULL;
	kvf_room_transition(eng, r, KVF_ROOM_FREE); /* cancels its deadline */
	eng->st.released++;
	/* A new generation: every handle, work request and immediate that
	 * named the old room is now stale by construction. */
	if (++r->gen == 0)
		r->gen = 1;
	eng->free_stack[eng->nfree++] = slot;
	return 0;
}
