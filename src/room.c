/* SPDX-License-Identifier: Apache-2.0 */
/* The room state machine: transitions, the one failure field, quiescence,
 * and the events from the ring. Scheduler thread only. */
#include "room.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvf_build.h"
#include "log.h"
#if HAVE_RDMA
#include <infiniband/verbs.h>

#include "verbs.h"
#endif

static const char *const last_names[KVF_LAST_NUM] = {
	[KVF_LAST_CREATED] = "created",
	[KVF_LAST_INIT] = "init",
	[KVF_LAST_SEND] = "send",
	[KVF_LAST_PEER_INFO] = "room_info",
	[KVF_LAST_WC] = "completion",
	[KVF_LAST_PEER_ABORT] = "peer_abort",
	[KVF_LAST_ABORT_ACK] = "abort_ack",
	[KVF_LAST_PEER_LOST] = "peer_lost",
	[KVF_LAST_DATA_DONE] = "data_done",
	[KVF_LAST_BAD_FRAME] = "bad_frame",
	[KVF_LAST_LOCAL_ABORT] = "local_abort",
	[KVF_LAST_DEADLINE] = "deadline",
};

const char *kvf_last_str(enum kvf_last l)
{
	return (unsigned)l < KVF_LAST_NUM ? last_names[l] : "?";
}

uint64_t kvf_now(const struct kvf_engine *eng)
{
	return eng->now_fn(eng->now_arg);
}

/* ---------------------------------------------------------------- deadlines */

/* The deadline that applies to a role in a state, and its length (0 = none). */
static enum kvf_deadline deadline_for(const struct kvf_engine *eng, const struct kvf_slot *r,
				      uint64_t *len_ns)
{
	const struct kvf_config *c = &eng->cfg;
	uint32_t s = 0;
	enum kvf_deadline dl = KVF_DL_NONE;

	switch (r->state) {
	case KVF_BOOTSTRAPPING:
		dl = KVF_DL_BOOTSTRAP, s = c->bootstrap_s;
		break;
	case KVF_WAITING_FOR_INPUT:
		if (r->role == KVF_SENDER)
			dl = KVF_DL_WAITING_FOR_INPUT, s = c->waiting_for_input_s;
		else
			dl = KVF_DL_RECEIVER_WAITING, s = c->receiver_waiting_s;
		break;
	case KVF_TRANSFERRING:
		dl = KVF_DL_INFLIGHT, s = c->inflight_s;
		break;
	case KVF_FAILED:
		if (!(r->flags & KVF_RF_QUIESCENT))
			dl = KVF_DL_QUIESCE, s = c->quiesce_s;
		break;
	default:
		break;
	}
	*len_ns = (uint64_t)s * 1000000000ull;
	return s ? dl : KVF_DL_NONE;
}

static void arm_deadline(struct kvf_engine *eng, struct kvf_slot *r)
{
	uint64_t len;
	enum kvf_deadline dl = deadline_for(eng, r, &len);

	r->deadline = (uint8_t)dl;
	if (dl == KVF_DL_NONE)
		kvf_timers_cancel(&eng->timers, kvf_slot_index(eng, r));
	else
		kvf_timers_set(&eng->timers, kvf_slot_index(eng, r), r->state_ns + len);
}

/* ------------------------------------------------------------ inflight list */

static void inflight_add(struct kvf_engine *eng, struct kvf_slot *r)
{
	uint32_t i = kvf_slot_index(eng, r) + 1;

	r->inflight_prev = eng->inflight_tail;
	r->inflight_next = 0;
	if (eng->inflight_tail)
		eng->slots[eng->inflight_tail - 1].inflight_next = i;
	else
		eng->inflight_head = i;
	eng->inflight_tail = i;
	eng->st.inflight++;
}

static void inflight_del(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->inflight_prev)
		eng->slots[r->inflight_prev - 1].inflight_next = r->inflight_next;
	else
		eng->inflight_head = r->inflight_next;
	if (r->inflight_next)
		eng->slots[r->inflight_next - 1].inflight_prev = r->inflight_prev;
	else
		eng->inflight_tail = r->inflight_prev;
	r->inflight_prev = r->inflight_next = 0;
	eng->st.inflight--;
}

/* -------------------------------------------------------------- transitions */

static void leave_state(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->state == KVF_TRANSFERRING && r->role == KVF_SENDER)
		inflight_del(eng, r);
	eng->st.rooms[r->state]--;
}

static void enter_state(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_poll state)
{
	r->state = (uint8_t)state;
	r->state_ns = kvf_now(eng);
	eng->st.rooms[state]++;
	if (state == KVF_TRANSFERRING && r->role == KVF_SENDER)
		inflight_add(eng, r);
	if (kvf_terminal(r) && !(r->flags & KVF_RF_QUIESCENT))
		eng->st.unquiescent++;
	arm_deadline(eng, r);
}

void kvf_room_set_state(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_poll state)
{
	leave_state(eng, r);
	enter_state(eng, r, state);
}

static void set_quiescent(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->flags & KVF_RF_QUIESCENT)
		return;
	r->flags |= KVF_RF_QUIESCENT;
	if (kvf_terminal(r)) {
		eng->st.unquiescent--;
		arm_deadline(eng, r); /* drops the quiesce deadline */
	}
}

/* A sender owes the peer a frame once its posted writes have drained: the
 * ABORT_ACK (the peer may now reuse its blocks) or our own ABORT (sent only
 * when drained, so it doubles as the acknowledgement). */
static void send_owed(struct kvf_engine *eng, struct kvf_slot *r)
{
	int rc = 0;

	if (!eng->ops || !r->conn)
		goto out;
	if (r->flags & KVF_RF_ACK_OWED)
		rc = eng->ops->send_abort_ack(eng->t, r->conn, r->id);
	else if (r->flags & KVF_RF_ABORT_OWED)
		rc = eng->ops->send_abort(eng->t, r->conn, r->id, KVF_RECEIVER, r->fail_reason);
	if (rc)
		kvf_warn("room", "room %#" PRIx64 ": could not tell the peer (conn %u): %s; "
			 "it will fail by its own deadline", r->id, r->conn, strerror(-rc));
out:
	r->flags &= (uint8_t)~(KVF_RF_ACK_OWED | KVF_RF_ABORT_OWED);
}

void kvf_room_check_quiescent(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->role != KVF_SENDER || r->outstanding)
		return;
	if (kvf_terminal(r))
		send_owed(eng, r);
	set_quiescent(eng, r);
}

static void write_failure(struct kvf_slot *r, enum kvf_fail_reason reason, enum kvf_deadline dl,
			  int err, int wc_status, uint32_t vendor_err, const char *fmt, va_list ap)
{
	r->fail_reason = (uint8_t)reason;
	r->fail_deadline = (uint8_t)dl;
	r->fail = calloc(1, sizeof(*r->fail));
	if (!r->fail)
		return; /* the reason stands; kvf_failure says the text was lost */
	r->fail->err = err;
	r->fail->wc_status = wc_status;
	r->fail->vendor_err = vendor_err;
	vsnprintf(r->fail->text, sizeof(r->fail->text), fmt, ap);
}

/* Sender side of a failure: drop queued writes, then owe the peer a frame. */
static void sender_failed(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason)
{
	if (r->outstanding && eng->ops && eng->ops->cancel_writes) {
		uint64_t wr = kvf_wr_id(KVF_WR_DATA, r->gen, kvf_slot_index(eng, r));
		int dropped = eng->ops->cancel_writes(eng->t, r->conn, wr);

		if (dropped > 0)
			r->outstanding -= (uint32_t)dropped <= r->outstanding ? (uint32_t)dropped
									      : r->outstanding;
	}
	if (!r->conn || reason == KVF_FAIL_PEER_LOST || reason == KVF_FAIL_DEVICE)
		return; /* nobody to tell */
	r->flags |= reason == KVF_FAIL_PEER_ABORT ? KVF_RF_ACK_OWED : KVF_RF_ABORT_OWED;
}

/* Receiver side of a failure: the peer must stop writing and say so. */
static void receiver_failed(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason)
{
	int rc;

	if (!(r->flags & KVF_RF_INFO_SENT) || reason == KVF_FAIL_PEER_LOST ||
	    reason == KVF_FAIL_DEVICE || reason == KVF_FAIL_CONNECT) {
		set_quiescent(eng, r); /* the peer never learned of it, or it is gone */
		return;
	}
	if (reason == KVF_FAIL_PEER_ABORT) {
		set_quiescent(eng, r); /* the sender aborts only once drained */
		return;
	}
	rc = eng->ops ? eng->ops->send_abort(eng->t, r->conn, r->id, KVF_SENDER, (uint16_t)reason)
		      : -ENOTCONN;
	if (rc) {
		/* Without the ABORT there will be no ACK: tear the connection
		 * down so nothing more can land. */
		kvf_warn("room", "room %#" PRIx64 ": ABORT to the peer failed (%s); tearing "
			 "down conn %u", r->id, strerror(-rc), r->conn);
		if (eng->ops)
			eng->ops->teardown(eng->t, r->conn, "ABORT could not be sent");
	}
}

bool kvf_room_fail(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason,
		   enum kvf_deadline dl, int err, int wc_status, uint32_t vendor_err,
		   const char *fmt, ...)
{
	va_list ap;

	if (kvf_terminal(r))
		return false;
	va_start(ap, fmt);
	write_failure(r, reason, dl, err, wc_status, vendor_err, fmt, ap);
	va_end(ap);
	leave_state(eng, r);
	/* Quiescence is decided below, by role; start from "not yet" unless
	 * nothing was ever posted. */
	if (r->role == KVF_SENDER && r->outstanding == 0)
		r->flags |= KVF_RF_QUIESCENT;
	enter_state(eng, r, KVF_FAILED);
	eng->st.failures[reason]++;
	if (reason == KVF_FAIL_DEADLINE)
		eng->st.deadlines[dl]++;
	kvf_warn("room", "room %#" PRIx64 " (%s) FAILED: %s%s%s: %s", r->id,
		 r->role == KVF_SENDER ? "sender" : "receiver", kvf_fail_reason_str(reason),
		 reason == KVF_FAIL_DEADLINE ? " " : "",
		 reason == KVF_FAIL_DEADLINE ? kvf_deadline_str(dl) : "",
		 r->fail ? r->fail->text : "(no detail: out of memory)");
	if (r->role == KVF_SENDER) {
		sender_failed(eng, r, reason);
		kvf_room_check_quiescent(eng, r);
	} else {
		receiver_failed(eng, r, reason);
	}
	return true;
}

/* ------------------------------------------------------------------- events */

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
	kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev, what);
	return true;
}

void kvf_room_peer_info(struct kvf_engine *eng, struct kvf_slot *r, struct kvf_peer_info *info)
{
	r->info = info;
	r->conn = info->peer;
	r->last = KVF_LAST_PEER_INFO;
	if (info->nblocks > eng->cfg.max_blocks_per_room) {
		kvf_room_fail(eng, r, KVF_FAIL_BAD_FRAME, KVF_DL_NONE, EPROTO, -1, 0,
			      "ROOM_INFO names %u blocks, engine.max_blocks_per_room is %u",
			      info->nblocks, eng->cfg.max_blocks_per_room);
		return;
	}
	/* The block ids name the receiver's pool, not ours: the transport
	 * checked them against the layout the peer sent in HELLO. */
	kvf_room_set_state(eng, r, KVF_WAITING_FOR_INPUT);
}

static void early_gone(struct kvf_engine *eng, struct kvf_early_ent *e, bool evicted);

/* Keep an early entry; when the table is full the oldest goes first (it is
 * the nearest to expiry anyway), handled as an expiry and counted. */
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

static void on_peer_info(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_peer_info *info = ev->data;
	struct kvf_slot *r = by_id(eng, ev->key, KVF_SENDER);

	ev->data = NULL;
	if (!info) {
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "ROOM_INFO without payload");
		return;
	}
	if (!r) {
		/* The decode side may ask before we created the room: park it. */
		struct kvf_early_ent e = {
			.kind = KVF_EARLY_INFO, .id = ev->key, .role = KVF_SENDER,
			.conn = ev->peer, .info = info,
			.expires = kvf_now(eng) + (uint64_t)eng->cfg.tombstone_ttl_s * 1000000000ull,
		};
		int rc = early_keep(eng, &e);

		if (rc >= 0) {
			eng->st.early_infos_parked++;
			return;
		}
		free(info);
		if (rc == -EPERM)
			kvf_room_ignore(eng, KVF_IGN_OTHER_CONN, ev,
					"ROOM_INFO (another connection's entry is kept)");
		else
			kvf_room_ignore(eng, rc == -EEXIST ? KVF_IGN_DUPLICATE : KVF_IGN_UNKNOWN_ROOM,
					ev, rc == -EEXIST ? "ROOM_INFO (already parked or aborted)"
							  : "ROOM_INFO (parking table full)");
		return;
	}
	if (r->conn && r->conn != ev->peer) {
		/* Bound to its own receiver already: never rebound. */
		free(info);
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ROOM_INFO (room bound to another conn)");
		return;
	}
	if (r->state != KVF_BOOTSTRAPPING) {
		free(info);
		kvf_room_ignore(eng, kvf_terminal(r) ? KVF_IGN_FINISHED_ROOM : KVF_IGN_DUPLICATE, ev,
				"ROOM_INFO");
		/* A receiver asking for a room we already failed must hear so,
		 * or it waits for its own deadline. */
		if (r->state == KVF_FAILED && !r->conn && eng->ops)
			eng->ops->send_abort(eng->t, ev->peer, r->id, KVF_RECEIVER, r->fail_reason);
		return;
	}
	kvf_room_peer_info(eng, r, info);
}

void kvf_room_peer_abort(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn,
			 uint16_t reason, bool from_tombstone)
{
	r->last = KVF_LAST_PEER_ABORT;
	if (r->role == KVF_SENDER && !r->conn)
		r->conn = conn;
	if (!kvf_room_fail(eng, r, KVF_FAIL_PEER_ABORT, KVF_DL_NONE, ECONNABORTED, -1, 0,
			   "the peer aborted the room%s (its reason: %s)",
			   from_tombstone ? " before it was created here" : "",
			   kvf_fail_reason_str(reason))) {
		kvf_room_ignore(eng, KVF_IGN_FINISHED_ROOM, NULL, "ABORT");
		/* Terminal already: still acknowledge once drained, so the
		 * receiver can hand its blocks back. */
		if (r->role == KVF_SENDER && conn) {
			r->conn = conn;
			r->flags |= KVF_RF_ACK_OWED;
			kvf_room_check_quiescent(eng, r);
		} else if (r->role == KVF_RECEIVER) {
			set_quiescent(eng, r);
		}
	}
}

static void on_peer_abort(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = by_id(eng, ev->key, ev->role);

	if (r) {
		if (!other_conn(eng, r, ev, "ABORT"))
			kvf_room_peer_abort(eng, r, ev->peer, ev->status, false);
		return;
	}
	/* Not created yet (or already released): keep a tombstone so the
	 * room fails the moment it is created. */
	struct kvf_early_ent e = {
		.kind = KVF_EARLY_TOMBSTONE, .id = ev->key, .role = ev->role,
		.conn = ev->peer, .reason = ev->status,
		.expires = kvf_now(eng) + (uint64_t)eng->cfg.tombstone_ttl_s * 1000000000ull,
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
	kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ABORT (tombstone)");
	/* Nothing of this room is posted here: acknowledge at once. */
	if (ev->role == KVF_SENDER && ev->peer && eng->ops)
		eng->ops->send_abort_ack(eng->t, ev->peer, ev->key);
}

static void on_abort_ack(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = by_id(eng, ev->key, KVF_RECEIVER);

	if (!r) {
		kvf_room_ignore(eng, KVF_IGN_UNKNOWN_ROOM, ev, "ABORT_ACK");
		return;
	}
	if (other_conn(eng, r, ev, "ABORT_ACK"))
		return;
	r->last = KVF_LAST_ABORT_ACK;
	if (r->flags & KVF_RF_QUIESCENT)
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "ABORT_ACK");
	set_quiescent(eng, r);
}

/* The verbs names where the engine is built with the transport. */
static const char *wc_status_str(int status)
{
#if HAVE_RDMA
	return ibv_wc_status_str((enum ibv_wc_status)status);
#else
	(void)status;
	return "work completion error";
#endif
}

static const char *wc_hint(int status)
{
#if HAVE_RDMA
	const char *h = kvf_wc_hint(status);

	return h ? h : "";
#else
	(void)status;
	return "";
#endif
}

static struct kvf_slot *by_wr(struct kvf_engine *eng, const struct kvf_event *ev)
{
	uint32_t slot = kvf_wr_slot(ev->key);
	struct kvf_slot *r;

	if (slot >= eng->nslots) {
		kvf_room_ignore(eng, KVF_IGN_BAD_EVENT, ev, "completion (slot out of range)");
		return NULL;
	}
	r = &eng->slots[slot];
	if (!r->in_use || r->gen != kvf_wr_gen(ev->key) || r->role != KVF_SENDER) {
		kvf_room_ignore(eng, KVF_IGN_STALE_GENERATION, ev, "completion");
		return NULL;
	}
	return r;
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
	r->last = KVF_LAST_WC;
	if (r->outstanding == 0) {
		/* e.g. the error completion of an unsignaled write after a
		 * flush: nothing was counted for it. */
		kvf_room_ignore(eng, KVF_IGN_DUPLICATE, ev, "completion (none outstanding)");
		return;
	}
	r->outstanding--;
	if (ev->status != 0) {
		kvf_room_fail(eng, r, KVF_FAIL_WC_ERROR, KVF_DL_NONE, EIO, ev->status,
			      (uint32_t)(ev->aux >> 32),
			      "RDMA WRITE failed: %s (wc status %u), vendor_err %#x, qp %u, wr_id %#" PRIx64
			      "%s%s", wc_status_str(ev->status), ev->status, (unsigned)(ev->aux >> 32),
			      (unsigned)ev->aux, ev->key, *wc_hint(ev->status) ? "; " : "",
			      wc_hint(ev->status));
	} else if (r->state == KVF_TRANSFERRING && r->outstanding == 0) {
		kvf_room_set_state(eng, r, KVF_SUCCESS);
	}
	kvf_room_check_quiescent(eng, r);
}

static void on_data_done(struct kvf_engine *eng, struct kvf_event *ev)
{
	uint32_t slot = (uint32_t)ev->key;
	uint32_t gen12 = (uint32_t)(ev->key >> 32) & KVF_IMM_GEN_MASK;
	struct kvf_slot *r = slot < eng->nslots ? &eng->slots[slot] : NULL;

	if (!r || !r->in_use || r->role != KVF_RECEIVER || (r->gen & KVF_IMM_GEN_MASK) != gen12) {
		kvf_room_ignore(eng, r ? KVF_IGN_STALE_GENERATION : KVF_IGN_BAD_EVENT, ev,
				"data done");
		return;
	}
	if (other_conn(eng, r, ev, "data done"))
		return;
	r->last = KVF_LAST_DATA_DONE;
	if (r->state == KVF_WAITING_FOR_INPUT) {
		set_quiescent(eng, r); /* the room's last write: nothing follows it */
		kvf_room_set_state(eng, r, KVF_SUCCESS);
		return;
	}
	kvf_room_ignore(eng, kvf_terminal(r) ? KVF_IGN_FINISHED_ROOM : KVF_IGN_BAD_EVENT, ev,
			"data done");
	if (r->state == KVF_FAILED)
		set_quiescent(eng, r); /* the sender finished it: nothing more comes */
}

static void on_peer_lost(struct kvf_engine *eng, struct kvf_event *ev)
{
	enum kvf_fail_reason reason = ev->status > KVF_FAIL_NONE && ev->status < KVF_FAIL_NUM
					      ? (enum kvf_fail_reason)ev->status
					      : KVF_FAIL_PEER_LOST;
	uint32_t n = 0;

	/* Rare (a peer dies or a connection fails): a scan of the table is
	 * simpler than keeping a list per connection, and bounded. The
	 * transport pushes this once the connection's QPs are in error, so
	 * nothing more can land for these rooms; their late flush completions
	 * find nothing outstanding and are counted as ignored. */
	for (uint32_t i = 0; i < eng->nslots; i++) {
		struct kvf_slot *r = &eng->slots[i];

		if (!r->in_use || r->conn != ev->peer || !ev->peer)
			continue;
		n++;
		r->last = KVF_LAST_PEER_LOST;
		kvf_room_fail(eng, r, reason, KVF_DL_NONE, ECONNRESET, -1, 0,
			      "connection %u to the peer is gone (%s)", ev->peer,
			      ev->data ? (const char *)ev->data : kvf_fail_reason_str(reason));
		r->outstanding = 0;
		r->conn = 0;
		if (r->role == KVF_SENDER)
			kvf_room_check_quiescent(eng, r);
		else
			set_quiescent(eng, r);
	}
	kvf_info("room", "connection %u lost (%s): %u rooms affected", ev->peer,
		 kvf_fail_reason_str(reason), n);
}

static void on_bad_frame(struct kvf_engine *eng, struct kvf_event *ev)
{
	struct kvf_slot *r = ev->key ? by_id(eng, ev->key, ev->role) : NULL;
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
	r->last = KVF_LAST_BAD_FRAME;
	if (r->role == KVF_SENDER && !r->conn)
		r->conn = ev->peer; /* so the failure's ABORT reaches that receiver */
	if (!kvf_room_fail(eng, r, KVF_FAIL_BAD_FRAME, KVF_DL_NONE, EPROTO, -1, 0,
			   "bad frame from conn %u: %s", ev->peer, detail))
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
	uint64_t age_ms = (kvf_now(eng) - r->state_ns) / 1000000u;

	r->deadline = KVF_DL_NONE;
	if (dl == KVF_DL_QUIESCE) {
		/* The peer neither acknowledged nor drained: cut the connection
		 * so nothing more can land; PEER_LOST follows. */
		kvf_warn("room", "room %#" PRIx64 ": not quiescent after %" PRIu64 " ms; tearing "
			 "down conn %u", r->id, age_ms, r->conn);
		if (eng->ops && r->conn) {
			eng->ops->teardown(eng->t, r->conn, "quiesce deadline");
			/* Until PEER_LOST arrives, keep saying so every quiesce_s. */
			r->state_ns = kvf_now(eng);
			arm_deadline(eng, r);
		} else {
			set_quiescent(eng, r);
		}
		return;
	}
	r->last = KVF_LAST_DEADLINE;
	kvf_room_fail(eng, r, KVF_FAIL_DEADLINE, dl, ETIMEDOUT, -1, 0,
		      "%s deadline: %" PRIu64 " ms in %s", kvf_deadline_str(dl), age_ms,
		      kvf_poll_str(r->state));
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
	if (evicted)
		eng->st.early_infos_evicted++;
	else
		eng->st.early_infos_expired++;
	kvf_info("room", "ROOM_INFO for room %#" PRIx64 " from conn %u: no sender room "
		 "was created %s; aborting it", e->id, e->conn,
		 evicted ? "before the table filled" : "within engine.tombstone_ttl_s");
	if (eng->ops && e->conn)
		eng->ops->send_abort(eng->t, e->conn, e->id, KVF_RECEIVER, KVF_FAIL_DEADLINE);
	free(e->info);
	e->info = NULL;
}

void kvf_room_early_expired(struct kvf_engine *eng, struct kvf_early_ent *e)
{
	early_gone(eng, e, false);
}
