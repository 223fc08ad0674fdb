/* SPDX-License-Identifier: Apache-2.0 */
/* The room state machine: the one door every state change goes through and
 * its table, deadlines, the one failure field, and quiescence. The events
 * from the ring are applied in room_events.c. Scheduler thread only. */
#include "engine/engine_impl.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fan.h"
#include "base/log.h"
#include "engine/watch.h"

uint64_t kvf_now(const struct kvf_engine *eng)
{
	return eng->now_held ? eng->now_held : eng->now_fn(eng->now_arg);
}

/* ---------------------------------------------------------------- deadlines */

enum kvf_deadline kvf_room_deadline(const struct kvf_engine *eng, const struct kvf_slot *r,
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
	case KVF_TRANSFERRING: /* a sender: chunks until LAST, then its writes */
		if (r->flags & KVF_RF_LAST_SENT)
			dl = KVF_DL_INFLIGHT, s = c->inflight_s;
		else
			dl = KVF_DL_BETWEEN_CHUNKS, s = c->between_chunks_s;
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

/* Arm the deadline of the room's state, counted from base. */
static void arm_deadline_at(struct kvf_engine *eng, struct kvf_slot *r, uint64_t base)
{
	uint64_t len;
	enum kvf_deadline dl = kvf_room_deadline(eng, r, &len);

	r->deadline = (uint8_t)dl;
	if (dl == KVF_DL_NONE)
		kvf_timers_cancel(&eng->timers, kvf_slot_index(eng, r));
	else
		kvf_timers_set(&eng->timers, kvf_slot_index(eng, r), base + len);
}

/* Counted from entering the state. */
static void arm_deadline(struct kvf_engine *eng, struct kvf_slot *r)
{
	arm_deadline_at(eng, r, r->state_ns);
}

void kvf_room_backdate(struct kvf_engine *eng, struct kvf_slot *r, uint64_t ns)
{
	r->created_ns = ns;
	r->state_ns = ns;
	arm_deadline(eng, r);
}

void kvf_room_chunk_posted(struct kvf_engine *eng, struct kvf_slot *r)
{
	arm_deadline_at(eng, r, kvf_now(eng));
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

#define TO(s) (1u << (s))

/* The transitions a room may take, per role and state (docs/design.md, "A
 * room"). FAILED is reachable from every live non-terminal state; a
 * terminal room only leaves by release. */
static const uint8_t allowed[2][KVF_ROOM_NSTATES] = {
	[KVF_SENDER] = {
		[KVF_ROOM_FREE] = TO(KVF_BOOTSTRAPPING),
		[KVF_BOOTSTRAPPING] = TO(KVF_WAITING_FOR_INPUT) | TO(KVF_FAILED),
		[KVF_WAITING_FOR_INPUT] = TO(KVF_TRANSFERRING) | TO(KVF_FAILED),
		[KVF_TRANSFERRING] = TO(KVF_SUCCESS) | TO(KVF_FAILED),
		[KVF_SUCCESS] = TO(KVF_ROOM_FREE),
		[KVF_FAILED] = TO(KVF_ROOM_FREE),
	},
	[KVF_RECEIVER] = {
		[KVF_ROOM_FREE] = TO(KVF_BOOTSTRAPPING),
		[KVF_BOOTSTRAPPING] = TO(KVF_WAITING_FOR_INPUT) | TO(KVF_FAILED),
		[KVF_WAITING_FOR_INPUT] = TO(KVF_SUCCESS) | TO(KVF_FAILED),
		[KVF_SUCCESS] = TO(KVF_ROOM_FREE),
		[KVF_FAILED] = TO(KVF_ROOM_FREE),
	},
};

bool kvf_room_transition_allowed(enum kvf_role role, unsigned from, unsigned to)
{
	return (unsigned)role <= KVF_RECEIVER && from < KVF_ROOM_NSTATES &&
	       to < KVF_ROOM_NSTATES && (allowed[role][from] & TO(to));
}

static void leave_state(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->state == KVF_ROOM_FREE)
		return;
	if (r->state == KVF_TRANSFERRING && r->role == KVF_SENDER)
		inflight_del(eng, r);
	if (kvf_terminal(r) && !(r->flags & KVF_RF_QUIESCENT))
		eng->st.unquiescent--;
	eng->st.rooms[r->state]--;
}

/* A successful room's transfer time (the sender's from send(), the
 * receiver's from its ROOM_INFO) and bytes, into the histograms. */
static void success_obs(struct kvf_engine *eng, struct kvf_slot *r)
{
	struct kvf_room_obs *o = kvf_obs(eng, r);
	uint64_t from = r->role == KVF_SENDER ? o->send_ns : o->info_ns;
	unsigned role = r->role & 1;

	o->success_ns = r->state_ns;
	kvf_hist_add(&eng->oc.xfer_s[role], KVF_HIST_SECONDS,
		     from && from <= o->success_ns ? (double)(o->success_ns - from) / 1e9 : 0.0);
	kvf_hist_add(&eng->oc.room_bytes[role], KVF_HIST_BYTES, (double)o->bytes);
}

static void enter_state(struct kvf_engine *eng, struct kvf_slot *r, unsigned state)
{
	r->state = (uint8_t)state;
	r->state_ns = kvf_now(eng);
	if (state != KVF_ROOM_FREE)
		eng->st.rooms[state]++;
	if (state == KVF_TRANSFERRING && r->role == KVF_SENDER)
		inflight_add(eng, r);
	if (kvf_terminal(r) && !(r->flags & KVF_RF_QUIESCENT))
		eng->st.unquiescent++;
	if (state == KVF_SUCCESS)
		success_obs(eng, r);
	arm_deadline(eng, r); /* FREE has none: cancels */
	kvf_watch_note(eng, r);
}

/* r into conn's room list (out of the one it is in). */
/* Out of line: kept out of the door, which runs on every state change. */
__attribute__((noinline)) static void relist(struct kvf_engine *eng, struct kvf_slot *r,
					    uint32_t conn)
{
	uint32_t slot = kvf_slot_index(eng, r), old = r->list_conn;
	bool was_busy = conn && kvf_conn_rooms_first(&eng->by_conn, conn);

	if (old)
		kvf_conn_rooms_del(&eng->by_conn, eng->slots, slot);
	if (conn)
		kvf_conn_rooms_add(&eng->by_conn, eng->slots, slot, conn);
	/* The transport closes a connection no room uses (idle close). */
	if (!eng->ops || !eng->ops->conn_busy)
		return;
	if (old && !kvf_conn_rooms_first(&eng->by_conn, old))
		eng->ops->conn_busy(eng->t, old, false);
	if (conn && !was_busy)
		eng->ops->conn_busy(eng->t, conn, true);
}

void kvf_room_bind(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn)
{
	r->conn = conn;
	if (r->list_conn != conn)
		relist(eng, r, conn);
}

void kvf_room_info_sent(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn,
			uint32_t nitems, uint64_t bytes)
{
	struct kvf_room_obs *o = kvf_obs(eng, r);

	kvf_room_bind(eng, r, conn);
	r->flags |= KVF_RF_INFO_SENT;
	o->info_ns = kvf_now(eng);
	o->chunks_total = nitems; /* they land at once, with the last write */
	o->bytes = bytes;
	kvf_room_transition(eng, r, KVF_WAITING_FOR_INPUT);
}

void kvf_room_chunk_sent(struct kvf_engine *eng, struct kvf_slot *r, bool posted,
			 uint64_t bytes, uint32_t signaled, bool last)
{
	struct kvf_room_obs *o = kvf_obs(eng, r);

	if (posted) {
		if (!o->send_ns)
			o->send_ns = kvf_now(eng);
		o->bytes += bytes;
		o->chunks_total += signaled;
		eng->oc.bytes_sent += bytes;
	}
	if (last)
		r->flags |= KVF_RF_LAST_SENT;
	if (r->state == KVF_WAITING_FOR_INPUT)
		kvf_room_transition(eng, r, KVF_TRANSFERRING);
	else
		kvf_room_chunk_posted(eng, r);
}

void kvf_room_transition(struct kvf_engine *eng, struct kvf_slot *r, unsigned to)
{
	assert(kvf_room_transition_allowed((enum kvf_role)r->role, r->state, to));
	eng->transitions[r->role & 1][r->state][to]++;
	/* A released room leaves its list (every binding is kvf_room_bind's). */
	if (to == KVF_ROOM_FREE && r->list_conn)
		relist(eng, r, 0);
	leave_state(eng, r);
	enter_state(eng, r, to);
}

/* ---------------------------------------------------------------- quiescence */

static void set_quiescent(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (r->flags & KVF_RF_QUIESCENT)
		return;
	r->flags |= KVF_RF_QUIESCENT;
	eng->st.unquiescent--;
	arm_deadline(eng, r); /* drops the quiesce deadline */
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

/* The quiescence rule: nothing posted can still touch the room's memory.
 * Each case is the matching rule of tests/model/room.pml, which spin checks
 * never lets a write land in released blocks:
 *  - CONN_GONE: teardown() (QPs in error: inflight = 0, nothing more is
 *    delivered) and the Receiver's "torn && !r_quiet -> r_quiet = true";
 *  - a sender: its kvf_release guard "inflight == 0" (every signaled write
 *    completed or flushed; queued ones were cancelled at failure);
 *  - a receiver: r_quiet = true on WRITE_IMM (the room's last write: nothing
 *    follows it), on the sender's ABORT (a sender aborts only once drained,
 *    so it doubles as the ACK) and on ACK; and at its own failure only when
 *    it never told the sender ("told && !torn -> r2s!ABORT", else quiet). */
static bool quiet_by_rule(const struct kvf_slot *r, enum kvf_quiet_why why)
{
	if (why == KVF_QW_CONN_GONE)
		return true;
	if (r->role == KVF_SENDER)
		return r->outstanding == 0;
	switch (why) {
	case KVF_QW_LAST_WRITE:
	case KVF_QW_PEER_ABORT:
	case KVF_QW_ACK:
		return true;
	case KVF_QW_FAILED:
		return !(r->flags & KVF_RF_INFO_SENT);
	default:
		return false;
	}
}

void kvf_room_quiesce(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_quiet_why why)
{
	if (!kvf_terminal(r) || !quiet_by_rule(r, why))
		return;
	if (r->role == KVF_SENDER)
		send_owed(eng, r); /* drained: the pml Sender's "send what is owed" */
	set_quiescent(eng, r);
}

void kvf_room_quiesce_overdue(struct kvf_engine *eng, struct kvf_slot *r)
{
	if (!eng->ops || !r->conn) {
		kvf_room_quiesce(eng, r, KVF_QW_CONN_GONE); /* no connection, nothing lands */
		return;
	}
	/* The peer neither acknowledged nor drained: cut the connection so
	 * nothing more can land; PEER_LOST follows. Until it does, keep
	 * saying so every quiesce_s. */
	kvf_warn("room", "room %#" PRIx64 ": not quiescent after %" PRIu64 " ms; tearing down "
		 "conn %u", r->id, (kvf_now(eng) - r->state_ns) / 1000000u, r->conn);
	eng->ops->teardown(eng->t, r->conn, "quiesce deadline");
	r->state_ns = kvf_now(eng);
	arm_deadline(eng, r);
}

/* ------------------------------------------------------------------ failure */

static void write_failure(struct kvf_slot *r, const struct kvf_fail_how *how, const char *fmt,
			  va_list ap)
{
	r->fail_reason = (uint8_t)how->reason;
	r->fail_deadline = (uint8_t)how->dl;
	r->fail = calloc(1, sizeof(*r->fail));
	if (!r->fail)
		return; /* the reason stands; kvf_failure says the text was lost */
	r->fail->err = how->err;
	r->fail->wc_status = how->wc_status;
	r->fail->vendor_err = how->vendor_err;
	vsnprintf(r->fail->text, sizeof(r->fail->text), fmt, ap);
}

/* Which quiescence rule a failure's reason brings into play. */
static enum kvf_quiet_why quiet_why_of(enum kvf_fail_reason reason)
{
	switch (reason) {
	case KVF_FAIL_PEER_LOST:
	case KVF_FAIL_DEVICE:
	case KVF_FAIL_CONNECT:
		return KVF_QW_CONN_GONE;
	case KVF_FAIL_PEER_ABORT:
		return KVF_QW_PEER_ABORT;
	default:
		return KVF_QW_FAILED;
	}
}

/* Sender side of a failure: drop queued writes, then owe the peer a frame
 * (sent once drained: kvf_room_quiesce). */
static void sender_failed(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_quiet_why why)
{
	if (r->outstanding && eng->ops && eng->ops->cancel_writes) {
		uint64_t wr = kvf_wr_id(KVF_WR_DATA, r->gen, kvf_slot_index(eng, r));
		int dropped = eng->ops->cancel_writes(eng->t, r->conn, wr);

		if (dropped > 0)
			r->outstanding -= (uint32_t)dropped <= r->outstanding ? (uint32_t)dropped
									      : r->outstanding;
	}
	if (!r->conn || why == KVF_QW_CONN_GONE)
		return; /* nobody to tell */
	r->flags |= why == KVF_QW_PEER_ABORT ? KVF_RF_ACK_OWED : KVF_RF_ABORT_OWED;
}

/* Receiver side of a failure: a peer that knows of the room must stop
 * writing and say so; without the ABORT there will be no ACK, so the
 * connection is torn down for nothing more to land. */
static void receiver_failed(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_quiet_why why)
{
	int rc;

	if (why != KVF_QW_FAILED || !(r->flags & KVF_RF_INFO_SENT))
		return;
	rc = eng->ops ? eng->ops->send_abort(eng->t, r->conn, r->id, KVF_SENDER, r->fail_reason)
		      : -ENOTCONN;
	if (rc) {
		kvf_warn("room", "room %#" PRIx64 ": ABORT to the peer failed (%s); tearing "
			 "down conn %u", r->id, strerror(-rc), r->conn);
		if (eng->ops)
			eng->ops->teardown(eng->t, r->conn, "ABORT could not be sent");
	}
}

/* Every failure, once (room_failv runs once a room): room, role, reason,
 * peer, the deadline's config key when one fired, and the detail. */
static void log_failure(const struct kvf_engine *eng, const struct kvf_slot *r,
			const struct kvf_fail_how *how)
{
	char peer[80];

	if (r->role == KVF_RECEIVER && r->peer < eng->npeers)
		snprintf(peer, sizeof(peer), "%s (conn %u)", eng->peers[r->peer], r->conn);
	else
		snprintf(peer, sizeof(peer), "conn %u", r->conn);
	kvf_warn("room", "room %#" PRIx64 " (%s) FAILED: %s%s%s%s%s; peer %s: %s", r->id,
		 r->role == KVF_SENDER ? "sender" : "receiver", kvf_fail_reason_str(how->reason),
		 how->reason == KVF_FAIL_DEADLINE ? " " : "",
		 how->reason == KVF_FAIL_DEADLINE ? kvf_deadline_str(how->dl) : "",
		 how->reason == KVF_FAIL_DEADLINE ? ", set by " : "",
		 how->reason == KVF_FAIL_DEADLINE ? kvf_deadline_key(how->dl) : "", peer,
		 r->fail ? r->fail->text : "(no detail: out of memory)");
}

/* A fan's room fails once: the failure counted and logged is its first
 * member's; the others follow it (how->rank) and are told their peers. */
static bool room_failv(struct kvf_engine *eng, struct kvf_slot *r, const struct kvf_fail_how *how,
		       const char *fmt, va_list ap)
{
	/* Another rank's failure says nothing of this member's connection:
	 * its peer is live and must be told (ABORT), whatever the reason. */
	enum kvf_quiet_why why = how->rank ? KVF_QW_FAILED : quiet_why_of(how->reason);

	if (kvf_terminal(r))
		return false;
	write_failure(r, how, fmt, ap);
	kvf_room_transition(eng, r, KVF_FAILED);
	if (!how->rank) {
		eng->st.failures[how->reason]++;
		eng->oc.fail_by_role[r->role & 1][how->reason]++;
		if (how->reason == KVF_FAIL_DEADLINE)
			eng->st.deadlines[how->dl]++;
		log_failure(eng, r, how);
	}
	if (r->role == KVF_SENDER)
		sender_failed(eng, r, why);
	else
		receiver_failed(eng, r, why);
	kvf_room_quiesce(eng, r, why);
	if (r->fan)
		kvf_fan_failed(eng, r);
	return true;
}

bool kvf_room_fail_how(struct kvf_engine *eng, struct kvf_slot *r, const struct kvf_fail_how *how,
		       const char *fmt, ...)
{
	va_list ap;
	bool done;

	va_start(ap, fmt);
	done = room_failv(eng, r, how, fmt, ap);
	va_end(ap);
	return done;
}

bool kvf_room_fail(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason,
		   int err, const char *fmt, ...)
{
	const struct kvf_fail_how how = { .reason = reason, .err = err, .wc_status = -1 };
	va_list ap;
	bool done;

	va_start(ap, fmt);
	done = room_failv(eng, r, &how, fmt, ap);
	va_end(ap);
	return done;
}

/* ------------------------------------------------------- creation, release */

int kvf_room_new(struct kvf_engine *eng, uint64_t id, enum kvf_role role, bool mapped,
		 struct kvf_slot **out)
{
	struct kvf_slot *r;
	uint64_t h = 0;
	uint32_t slot;
	bool held;
	int rc;

	if (!eng->nfree)
		return -ENOSPC;
	if (mapped)
		h = kvf_idmap_prefetch(&eng->ids, id, role);
	slot = eng->free_stack[eng->nfree - 1];
	r = &eng->slots[slot];
	/* The free slot is made ready while the id map's bucket loads: none of
	 * this is read before the transition below makes it live. */
	r->id = id;
	r->role = (uint8_t)role;
	r->flags = 0;
	r->conn = 0;
	r->outstanding = 0;
	r->fan = NULL;
	r->fail_reason = KVF_FAIL_NONE;
	r->fail_deadline = KVF_DL_NONE; /* kvf_failure reports it even when not failed */
	memset(kvf_obs(eng, r), 0, sizeof(struct kvf_room_obs));
	held = kvf_clock_hold(eng);
	if (mapped) {
		rc = kvf_idmap_insert_h(&eng->ids, h, id, role, slot);
		if (rc) {
			kvf_clock_drop(eng, held);
			return rc; /* -EEXIST: the live room with this id is untouched */
		}
	}
	eng->nfree--;
	kvf_room_last(eng, r, KVF_LAST_CREATED);
	r->created_ns = kvf_now(eng);
	kvf_room_transition(eng, r, KVF_BOOTSTRAPPING); /* from KVF_ROOM_FREE */
	kvf_clock_drop(eng, held);
	eng->st.created++;
	*out = r;
	return 0;
}

void kvf_room_free(struct kvf_engine *eng, struct kvf_slot *r, bool mapped)
{
	if (mapped)
		kvf_idmap_remove(&eng->ids, r->id, r->role);
	free(r->info);
	free(r->chunks);
	free(r->fail);
	kvf_regions_drop(&eng->regions, r->regions);
	r->regions = 0;
	r->chunks = NULL;
	r->info = NULL;
	r->fail = NULL;
	kvf_watch_forget(eng, r);
	kvf_room_transition(eng, r, KVF_ROOM_FREE); /* cancels its deadline */
	eng->st.released++;
	/* A new generation: every handle, work request and immediate that
	 * named the old room is now stale by construction. */
	if (++r->gen == 0)
		r->gen = 1;
	eng->free_stack[eng->nfree++] = kvf_slot_index(eng, r);
}
