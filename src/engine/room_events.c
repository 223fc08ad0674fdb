/* SPDX-License-Identifier: Apache-2.0 */
/* Applying what the transport reports (events from the ring), deadlines
 * that passed, and what arrived before its room (tombstones, parked
 * ROOM_INFOs) to the rooms. Every event that cannot be applied is counted
 * and logged. State changes go through room.c. Scheduler thread only. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine/chunk.h"
#include "engine/fan.h"
#include "engine/names.h"
#include "engine/engine_impl.h"

void kvf_room_ignore(struct kvf_engine *eng, enum kvf_ignore_reason why,
		     const struct kvf_event *ev, const char *what)
{
	eng->st.ignored[why]++;
	kvf_dbg("room", "ignored %s (%s): key %#" PRIx64 " peer %u status %u", what,
		kvf_ignore_reason_str(why), ev ? ev->key : 0, ev ? ev->peer : 0,
		ev ? ev->status : 0);
}

static struct kvf_slot *by_id(struct kvf_engine *eng, uint64_t id, uint32_t role)
{
	uint32_t slot;

	return kvf_idmap_find(&eng->ids, id, role, &slot) ? &eng->slots[slot] : NULL;
}

/* The room a frame from conn names: of a fan's slots, the one bound to
 * conn (kvf_fan_pick), so each peer's frames reach its own pairing. */
static struct kvf_slot *by_id_from(struct kvf_engine *eng, uint64_t id, uint32_t role,
				   uint32_t conn)
{
	struct kvf_slot *r = by_id(eng, id, role);

	return r && r->fan ? kvf_fan_pick(eng, r, conn) : r;
}

/* A room takes frames only from the connection it is bound to: a sender's
 * is the one its ROOM_INFO came on, a receiver's the one kvf_receiver_init
 * sent its ROOM_INFO on. Another peer naming the room (two decode engines
 * on one prefill engine may well use the same ids) is counted and changes
 * nothing. A room not bound yet takes the first. */
static bool other_conn(struct kvf_engine *eng, const struct kvf_slot *r,
		       const struct kvf_event *ev, const char *what)
{
	if (!r->conn || r->conn == ev->peer)
		return false;
	/* A warning, not debug: two peers using one room id is a deployment
	 * fault someone has to see. */
	kvf_warn("room", "%s for room %#" PRIx64 " (%s) from conn %u, but the room is bound "
		 "to conn %u: ignored", what, r->id, r->role == KVF_SENDER ? "sender" : "receiver",
		 ev->peer, r->conn);
	kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev, what);
	return true;
}

static uint64_t early_expiry(const struct kvf_engine *eng)
{
	return kvf_now(eng) + (uint64_t)eng->cfg.tombstone_ttl_s * 1000000000ull;
}

/* ------------------------------------------------------------ ROOM_INFO */

void kvf_room_peer_info(struct kvf_engine *eng, struct kvf_slot *r, struct kvf_peer_info *info)
{
	uint32_t mask = 0;

	r->info = info;
	kvf_room_bind(eng, r, info->peer);
	kvf_obs(eng, r)->info_ns = kvf_now(eng);
	kvf_room_last(eng, r, KVF_LAST_PEER_INFO);
	if ((r->flags & KVF_RF_LEARN) && kvf_fan_learn(eng, r))
		return; /* failed, saying why */
	if (info->nids > eng->cfg.max_blocks_per_room) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_FRAME, EPROTO,
			      "ROOM_INFO names %u items, engine.max_blocks_per_room is %u",
			      info->nids, eng->cfg.max_blocks_per_room);
		return;
	}
	r->chunks = kvf_chunks_new(info, &eng->regions, &mask);
	if (!r->chunks) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_REQUEST, ENOMEM,
			      "no memory for the bookkeeping of %u lists", info->nlists);
		return;
	}
	/* Our regions of the lists' names stay ours until release: their
	 * items may be read by any chunk from now on. */
	kvf_regions_hold(&eng->regions, mask);
	r->regions = (uint16_t)mask;
	/* The items name the receiver's regions, not ours: the transport
	 * checked them against the layout the peer sent in HELLO. */
	kvf_room_transition(eng, r, KVF_WAITING_FOR_INPUT);
}

static void early_gone(struct kvf_engine *eng, struct kvf_early_ent *e, bool evicted);

/* Keep an early entry; when the table is full the oldest goes first (it is
 * the nearest to expiry anyway), handled as an expiry and counted. Returns
 * kvf_early_put's answer. */
static int early_keep(struct kvf_engine *eng, struct kvf_early_ent *e)
{
	struct kvf_early_ent old;
	int rc = kvf_early_put(&eng->early, e);

	if (rc != -ENOSPC || !kvf_early_pop_expired(&eng->early, UINT64_MAX, &old))
		return rc;
	kvf_warn("room", "early-event table full (engine.max_tombstones %u): evicting the "
		 "entry for room %#" PRIx64, eng->cfg.max_tombstones, old.id);
	early_gone(eng, &old, true);
	return kvf_early_put(&eng->early, e);
}

/* A ROOM_INFO this prefill will never serve: answered at once with an ABORT
 * (REASON_REFUSED, or the room's own reason where it failed unbound), so the
 * decode room fails now instead of at deadlines.receiver_waiting_s. Safe
 * only because nothing of ours was or will be written to that receiver for
 * this id: callers never refuse a live room's own connection. */
static void refuse_info(struct kvf_engine *eng, const struct kvf_event *ev, uint16_t reason,
			const char *why)
{
	eng->st.room_infos_refused++;
	kvf_info("room", "ROOM_INFO for room %#" PRIx64 " from conn %u refused (%s): ABORT (%s) "
		 "sent back", ev->key, ev->peer, why, kvf_fail_reason_str(reason));
	if (eng->ops && ev->peer)
		eng->ops->send_abort(eng->t, ev->peer, ev->key, KVF_RECEIVER, reason);
}

/* A ROOM_INFO that kvf_early_put would not park (rc): only the same
 * connection's second parked ROOM_INFO is a plain duplicate (the parked one
 * serves its room); anything else means no sender room will take it. */
static void not_parked(struct kvf_engine *eng, const struct kvf_event *ev, int rc)
{
	const struct kvf_early_ent *kept = kvf_early_peek(&eng->early, ev->key, KVF_SENDER);

	if (rc == -EEXIST && kept && kept->kind == KVF_EARLY_INFO) {
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ROOM_INFO (already parked)");
		return;
	}
	if (rc == -EPERM) {
		/* A warning: another peer aborted a room id this one uses. */
		kvf_warn("room", "ROOM_INFO for room %#" PRIx64 " from conn %u, but conn %u "
			 "aborted that room id before it was created here", ev->key, ev->peer,
			 kept ? kept->conn : 0);
		kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev,
				"ROOM_INFO (another connection's ABORT is kept)");
		refuse_info(eng, ev, KVF_FAIL_REFUSED, "another connection aborted that room id");
	} else if (rc == -EEXIST) {
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ROOM_INFO (aborted before)");
		refuse_info(eng, ev, KVF_FAIL_REFUSED, "this connection aborted that room id");
	} else {
		kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ROOM_INFO (parking table full)");
		refuse_info(eng, ev, KVF_FAIL_REFUSED, "the early-event table is full");
	}
}

/* The decode side may ask before we created the room: park its ROOM_INFO. */
static void park_info(struct kvf_engine *eng, struct kvf_event *ev, struct kvf_peer_info *info)
{
	struct kvf_early_ent e = {
		.kind = KVF_EARLY_INFO, .id = ev->key, .role = KVF_SENDER,
		.conn = ev->peer, .info = info, .expires = early_expiry(eng),
	};
	int rc;

	/* Bounded in bytes, not only in entries: a peer's infos can name
	 * up to engine.max_blocks_per_room items each. */
	if (eng->early.info_bytes + kvf_early_info_bytes(info) > eng->cfg.max_parked_info_bytes) {
		free(info);
		eng->st.early_infos_refused++;
		kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ROOM_INFO (parked infos hold "
				"engine.max_parked_info_bytes)");
		if (eng->ops && ev->peer) /* the receiver fails now, not at its deadline */
			eng->ops->send_abort(eng->t, ev->peer, ev->key, KVF_RECEIVER, KVF_FAIL_DEADLINE);
		return;
	}
	rc = early_keep(eng, &e);

	if (rc >= 0) {
		eng->st.early_infos_parked++;
		return;
	}
	free(info);
	not_parked(eng, ev, rc);
}

/* A ROOM_INFO for a sender room that cannot take it (bound, or terminal).
 * A receiver that would wait for a room we will never serve hears so now:
 * one whose room id is bound to another connection (a second decode using
 * the id, one more than a fan-out has receivers, or the room took another
 * connection's tombstone), one asking for a room we failed before any
 * receiver was bound (told the room's own reason), and one asking again on
 * the connection of a finished room with nothing of it in flight (a new
 * receiver room reusing the id). A live room's own connection is never
 * answered: that room writes to it and will end it itself. */
static void info_for_bound(struct kvf_engine *eng, const struct kvf_slot *r,
			   const struct kvf_event *ev)
{
	if (r->conn && r->conn != ev->peer) {
		kvf_warn("room", "ROOM_INFO for room %#" PRIx64 " from conn %u, but the room is "
			 "bound to conn %u (%s)", r->id, ev->peer, r->conn, kvf_poll_str(r->state));
		kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev, "ROOM_INFO");
		refuse_info(eng, ev, KVF_FAIL_REFUSED, "the room is bound to another connection");
		return;
	}
	if (!kvf_terminal(r)) {
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ROOM_INFO");
		return;
	}
	kvf_room_ignore(eng, KVF_IGN_FINISHED_ROOM, ev, "ROOM_INFO");
	if (!r->conn)
		refuse_info(eng, ev, r->fail_reason ? r->fail_reason : KVF_FAIL_REFUSED,
			    "the room failed before any ROOM_INFO came");
	else if (r->flags & KVF_RF_QUIESCENT)
		refuse_info(eng, ev, KVF_FAIL_REFUSED, "the room is finished");
}

static void on_peer_info(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_peer_info *info = ev->data;
	struct kvf_slot *r = by_id_from(eng, ev->key, KVF_SENDER, ev->peer);

	ev->data = NULL;
	if (!info) {
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "ROOM_INFO without payload");
		return;
	}
	if (!r) {
		park_info(eng, ev, info);
		return;
	}
	if (r->state == KVF_BOOTSTRAPPING && !r->conn) {
		kvf_room_peer_info(eng, r, info);
		return;
	}
	/* Bound already (to this receiver or another): never rebound. */
	free(info);
	info_for_bound(eng, r, ev);
}

/* ---------------------------------------------------------- ABORT, ACK */

void kvf_room_peer_abort(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn,
			 uint16_t reason, bool from_tombstone)
{
	kvf_room_last(eng, r, KVF_LAST_PEER_ABORT);
	if (r->role == KVF_SENDER && !r->conn)
		kvf_room_bind(eng, r, conn);
	if (kvf_room_fail(eng, r, KVF_FAIL_PEER_ABORT, ECONNABORTED,
			  "the peer aborted the room%s (its reason: %s)",
			  from_tombstone ? " before it was created here" : "",
			  kvf_fail_reason_str(reason)))
		return;
	kvf_room_ignore(eng, KVF_IGN_FINISHED_ROOM, NULL, "ABORT");
	/* Terminal already: a sender still acknowledges once drained, so the
	 * receiver can hand its blocks back; a receiver's sender had drained. */
	if (r->role == KVF_SENDER && r->conn) {
		r->flags |= KVF_RF_ACK_OWED;
		kvf_room_quiesce(eng, r, KVF_QW_DRAINED);
	} else if (r->role == KVF_RECEIVER) {
		kvf_room_quiesce(eng, r, KVF_QW_PEER_ABORT);
	}
}

/* Not created yet (or already released): keep a tombstone so the room
 * fails the moment it is created. */
static void keep_tombstone(struct kvf_engine *eng, const struct kvf_event *ev)
{
	struct kvf_early_ent e = {
		.kind = KVF_EARLY_TOMBSTONE, .id = ev->key, .role = ev->role,
		.conn = ev->peer, .reason = ev->status, .expires = early_expiry(eng),
	};
	int rc = early_keep(eng, &e);

	if (rc >= 0) {
		eng->st.tombstones_created++;
		eng->st.early_infos_replaced += (uint64_t)rc; /* 1: it took a parked info's place */
	} else if (rc == -EPERM) {
		kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev, "ABORT (another connection's entry)");
	} else if (rc == -EEXIST) {
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ABORT (tombstone exists)");
	} else {
		kvf_warn("room", "ABORT for unknown room %#" PRIx64 " not kept: %s", ev->key,
			 strerror(-rc));
	}
}

static void on_peer_abort(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = by_id_from(eng, ev->key, ev->role, ev->peer);

	if (r) {
		if (!other_conn(eng, r, ev, "ABORT"))
			kvf_room_peer_abort(eng, r, ev->peer, ev->status, false);
		return;
	}
	keep_tombstone(eng, ev);
	kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ABORT (tombstone)");
	/* Nothing of this room is posted here: acknowledge at once. */
	if (ev->role == KVF_SENDER && ev->peer && eng->ops)
		eng->ops->send_abort_ack(eng->t, ev->peer, ev->key);
}

static void on_abort_ack(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = by_id_from(eng, ev->key, KVF_RECEIVER, ev->peer);

	if (!r) {
		kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ABORT_ACK");
		return;
	}
	if (other_conn(eng, r, ev, "ABORT_ACK"))
		return;
	kvf_room_last(eng, r, KVF_LAST_ABORT_ACK);
	if (!kvf_terminal(r)) {
		/* A live room sent no ABORT: this ACK is for an earlier room of
		 * the same id, and must not hand this one's blocks back. */
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "ABORT_ACK (room not aborted)");
		return;
	}
	if (r->flags & KVF_RF_QUIESCENT)
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ABORT_ACK");
	kvf_room_quiesce(eng, r, KVF_QW_ACK);
}

/* ------------------------------------------------------ completions, data */

/* A data write's completion: its sender room, or NULL (counted). */
static struct kvf_slot *by_wr(struct kvf_engine *eng, const struct kvf_event *ev)
{
	uint32_t slot = kvf_wr_slot(ev->key);
	struct kvf_slot *r;

	if (slot >= eng->nslots) {
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "completion (slot out of range)");
		return NULL;
	}
	r = kvf_room_at(eng, slot, kvf_wr_gen(ev->key), UINT32_MAX);
	if (!r || r->role != KVF_SENDER) {
		kvf_room_ignore(eng, KVF_IGN_STALE_GENERATION, ev, "completion");
		return NULL;
	}
	return r;
}

static void wc_failed(struct kvf_engine *eng, struct kvf_slot *r, const struct kvf_event *ev)
{
	const struct kvf_fail_how how = {
		.reason = KVF_FAIL_WC_ERROR, .err = EIO, .wc_status = ev->status,
		.vendor_err = (uint32_t)(ev->aux >> 32),
	};
	const char *hint = kvf_wc_status_hint(ev->status);

	kvf_room_fail_how(eng, r, &how,
			  "RDMA WRITE failed: %s (wc status %u), vendor_err %#x, qp %u, wr_id %#"
			  PRIx64 "%s%s", kvf_wc_status_str(ev->status), ev->status,
			  (unsigned)(ev->aux >> 32), (unsigned)ev->aux, ev->key, *hint ? "; " : "",
			  hint);
}

/* A sender's chunk (signaled write) completed. */
static void chunk_done(struct kvf_engine *eng, struct kvf_slot *r)
{
	struct kvf_room_obs *o = kvf_obs(eng, r);

	o->last_chunk_ns = kvf_now(eng);
	if (!o->first_chunk_ns)
		o->first_chunk_ns = o->last_chunk_ns;
	o->chunks_done++;
	eng->oc.chunks_completed++;
}

static void on_wc(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r;

	if (eng->ops && eng->ops->on_wc && !eng->ops->on_wc(eng->t, ev))
		return; /* the transport's own work request */
	if (kvf_wr_kind(ev->key) != KVF_WR_DATA) {
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "completion (not a data write)");
		return;
	}
	r = by_wr(eng, ev);
	if (!r)
		return;
	kvf_room_last(eng, r, KVF_LAST_WC);
	if (r->outstanding == 0) {
		/* e.g. the error completion of an unsignaled write after a
		 * flush: nothing was counted for it. */
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "completion (none outstanding)");
		return;
	}
	r->outstanding--;
	if (ev->status == 0)
		chunk_done(eng, r);
	if (ev->status != 0)
		wc_failed(eng, r, ev);
	else if (r->state == KVF_TRANSFERRING && r->outstanding == 0 &&
		 (r->flags & KVF_RF_LAST_SENT))
		kvf_room_transition(eng, r, KVF_SUCCESS); /* before LAST: the next chunk is due */
	kvf_room_quiesce(eng, r, KVF_QW_DRAINED);
}

/* When the room's last write landed, on the engine's clock: now, less
 * the time its event waited in the ring (the poller's stamp, aux, is on
 * the monotonic clock, which the engine's may not be). That wait is what
 * a busy scheduler loop adds to every room's time to first token, so it
 * has its histogram. */
static uint64_t landed_at(struct kvf_engine *eng, const struct kvf_event *ev)
{
	uint64_t mono = kvf_monotonic_ns(), now = kvf_now(eng), wait;

	if (!ev->aux || ev->aux > mono)
		return now;
	wait = mono - ev->aux;
	kvf_hist_add(&eng->oc.land_wait, KVF_HIST_WAIT, (double)wait / 1e9);
	return now > wait ? now - wait : 0;
}

static void on_data_done(struct kvf_engine *eng, struct kvf_event *ev)
{
	uint32_t slot = (uint32_t)ev->key;
	struct kvf_slot *r = kvf_room_at(eng, slot, (uint32_t)(ev->key >> 32), KVF_IMM_GEN_MASK);

	if (!r || r->role != KVF_RECEIVER) {
		kvf_room_ignore(eng, slot < eng->nslots ? KVF_IGN_STALE_GENERATION : KVF_IGN_BAD_EVENT,
				ev, "data done");
		return;
	}
	if (other_conn(eng, r, ev, "data done"))
		return;
	kvf_room_last(eng, r, KVF_LAST_DATA_DONE);
	if (r->state == KVF_WAITING_FOR_INPUT) {
		struct kvf_room_obs *o = kvf_obs(eng, r);

		o->first_chunk_ns = o->last_chunk_ns = landed_at(eng, ev);
		o->chunks_done = o->chunks_total;
		eng->oc.bytes_landed += o->bytes;
		kvf_room_transition(eng, r, KVF_SUCCESS);
	}
	else
		kvf_room_ignore(eng, kvf_terminal(r) ? KVF_IGN_FINISHED_ROOM : KVF_IGN_BAD_EVENT, ev,
				"data done");
	/* The room's last write: nothing of it follows (on a failed room,
	 * the sender finished it anyway). */
	kvf_room_quiesce(eng, r, KVF_QW_LAST_WRITE);
}

/* -------------------------------------------------- connection, bad frame */

/* One room of a lost connection: failed, unbound, quiescent. */
static void lose_room(struct kvf_engine *eng, struct kvf_slot *r, const struct kvf_event *ev,
		      enum kvf_fail_reason reason)
{
	kvf_room_last(eng, r, KVF_LAST_PEER_LOST);
	kvf_room_fail(eng, r, reason, ECONNRESET, "connection %u to the peer is gone (%s)",
		      ev->peer, ev->data ? (const char *)ev->data : kvf_fail_reason_str(reason));
	r->outstanding = 0;
	kvf_room_bind(eng, r, 0);
	kvf_room_quiesce(eng, r, KVF_QW_CONN_GONE);
}

static void on_peer_lost(struct kvf_engine *eng, struct kvf_event *ev)
{
	enum kvf_fail_reason reason = ev->status > KVF_FAIL_NONE && ev->status < KVF_FAIL_NUM
					      ? (enum kvf_fail_reason)ev->status
					      : KVF_FAIL_PEER_LOST;
	uint32_t n = 0, head;

	/* The connection's own list (conn_rooms.h), not the table: a room
	 * leaves it as it is unbound, so the head is always the next one. The
	 * transport pushes this once the connection's QPs are in error, so
	 * nothing more can land for these rooms; their late flush completions
	 * find nothing outstanding and are counted as ignored. */
	while ((head = kvf_conn_rooms_first(&eng->by_conn, ev->peer))) {
		lose_room(eng, &eng->slots[head - 1], ev, reason);
		n++;
	}
	/* Rooms the list could not take (no memory to grow it, logged). */
	for (uint32_t i = 0; eng->by_conn.unlisted && ev->peer && i < eng->nslots; i++) {
		struct kvf_slot *r = &eng->slots[i];

		if (kvf_live(r) && r->conn == ev->peer) {
			lose_room(eng, r, ev, reason);
			n++;
		}
	}
	kvf_info("room", "connection %u lost (%s): %u rooms affected", ev->peer,
		 kvf_fail_reason_str(reason), n);
}

static void on_bad_frame(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = ev->key ? by_id_from(eng, ev->key, ev->role, ev->peer) : NULL;
	const char *detail = ev->data ? (const char *)ev->data : "malformed frame";

	eng->st.bad_frames++;
	if (!r) {
		kvf_warn("room", "bad frame from conn %u: %s", ev->peer, detail);
		kvf_room_ignore(eng, ev->key ? KVF_IGN_UNKNOWN_ROOM : KVF_IGN_BAD_EVENT, ev,
				"bad frame");
		/* A receiver whose ROOM_INFO we could not take must hear so, or
		 * it waits for its own deadline. */
		if (ev->key && ev->role == KVF_SENDER && ev->peer && eng->ops)
			eng->ops->send_abort(eng->t, ev->peer, ev->key, KVF_RECEIVER,
					     KVF_FAIL_BAD_FRAME);
		return;
	}
	if (other_conn(eng, r, ev, "bad frame"))
		return;
	kvf_room_last(eng, r, KVF_LAST_BAD_FRAME);
	if (r->role == KVF_SENDER && !r->conn)
		kvf_room_bind(eng, r, ev->peer); /* so the failure's ABORT reaches that receiver */
	if (!kvf_room_fail(eng, r, KVF_FAIL_BAD_FRAME, EPROTO, "bad frame from conn %u: %s",
			   ev->peer, detail))
		kvf_room_ignore(eng, KVF_IGN_FINISHED_ROOM, ev, "bad frame");
}

void kvf_room_apply(struct kvf_engine *eng, struct kvf_event *ev)
{
	switch (ev->kind) {
	case KVF_EV_WC:
		on_wc(eng, ev);
		break;
	case KVF_EV_PEER_INFO:
		on_peer_info(eng, ev);
		break;
	case KVF_EV_PEER_ABORT:
		if (ev->role > KVF_RECEIVER)
			kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "ABORT (bad role)");
		else
			on_peer_abort(eng, ev);
		break;
	case KVF_EV_ABORT_ACK:
		on_abort_ack(eng, ev);
		break;
	case KVF_EV_PEER_LOST:
		on_peer_lost(eng, ev);
		break;
	case KVF_EV_DATA_DONE:
		on_data_done(eng, ev);
		break;
	case KVF_EV_BAD_FRAME:
		on_bad_frame(eng, ev);
		break;
	default:
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "event (unknown kind)");
		break;
	}
	free(ev->data);
	ev->data = NULL;
	eng->st.events++;
}

/* ---------------------------------------------------------------- expiries */

void kvf_room_expire(struct kvf_engine *eng, uint32_t slot)
{
	struct kvf_slot *r = &eng->slots[slot];
	enum kvf_deadline dl = (enum kvf_deadline)r->deadline;
	const struct kvf_fail_how how = {
		.reason = KVF_FAIL_DEADLINE, .dl = dl, .err = ETIMEDOUT, .wc_status = -1,
	};
	char joined[32] = "";

	r->deadline = KVF_DL_NONE;
	if (dl == KVF_DL_QUIESCE) {
		eng->oc.quiesce_expiries++;
		kvf_room_quiesce_overdue(eng, r);
		return;
	}
	kvf_room_last(eng, r, KVF_LAST_DEADLINE);
	/* A fan-out still bootstrapping waits for receivers that did not
	 * come: say how many did. */
	if (r->fan && r->role == KVF_SENDER && dl == KVF_DL_BOOTSTRAP)
		snprintf(joined, sizeof(joined), " (%u of %u joined)",
			 kvf_fan_joined(eng, r->fan), r->fan->n);
	kvf_room_fail_how(eng, r, &how, "%s deadline: %" PRIu64 " ms in %s%s", kvf_deadline_str(dl),
			  (kvf_now(eng) - r->state_ns) / 1000000u, kvf_poll_str(r->state), joined);
}

/* An early entry leaves without its room: expired (TTL) or evicted (table
 * full). A parked ROOM_INFO gets an ABORT back, so the receiver fails now
 * instead of at its own deadline. */
static void early_gone(struct kvf_engine *eng, struct kvf_early_ent *e, bool evicted)
{
	if (e->kind == KVF_EARLY_TOMBSTONE) {
		if (evicted)
			eng->st.tombstones_evicted++;
		else
			eng->st.tombstones_expired++;
		kvf_dbg("room", "tombstone for room %#" PRIx64 " %s", e->id,
			evicted ? "evicted" : "expired");
		return;
	}
	/* One ROOM_INFO, or those of a fan-out's receivers chained to it. */
	for (struct kvf_peer_info *pi = e->info, *next; pi; pi = next) {
		next = pi->next;
		if (evicted)
			eng->st.early_infos_evicted++;
		else
			eng->st.early_infos_expired++;
		kvf_info("room", "ROOM_INFO for room %#" PRIx64 " from conn %u: no sender room "
			 "was created %s; aborting it", e->id, pi->peer,
			 evicted ? "before the table filled" : "within engine.tombstone_ttl_s");
		if (eng->ops && pi->peer)
			eng->ops->send_abort(eng->t, pi->peer, e->id, KVF_RECEIVER, KVF_FAIL_DEADLINE);
		free(pi);
	}
	e->info = NULL;
}

void kvf_room_early_expired(struct kvf_engine *eng, struct kvf_early_ent *e)
{
	early_gone(eng, e, false);
}
