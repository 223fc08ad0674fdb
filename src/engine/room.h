/* SPDX-License-Identifier: Apache-2.0 */
/* A room's slot and the state machine's door (room.c): what every room file
 * needs. The engine that holds the slots is engine_impl.h. Owned by the
 * scheduler thread alone: nothing here takes a lock. */
#ifndef KVF_ROOM_H
#define KVF_ROOM_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "base/event.h"

struct kvf_engine;
struct kvf_early_ent;

/* What last happened to a room, for kvf_dump. */
enum kvf_last {
	KVF_LAST_CREATED = 0,
	KVF_LAST_INIT,
	KVF_LAST_SEND,
	KVF_LAST_PEER_INFO,
	KVF_LAST_WC,
	KVF_LAST_PEER_ABORT,
	KVF_LAST_ABORT_ACK,
	KVF_LAST_PEER_LOST,
	KVF_LAST_DATA_DONE,
	KVF_LAST_BAD_FRAME,
	KVF_LAST_LOCAL_ABORT,
	KVF_LAST_DEADLINE,
	KVF_LAST_NUM
};

/* A slot's state is enum kvf_poll while it holds a room, and this one
 * while it is free: creating and releasing a room are transitions like
 * the others (FREE -> BOOTSTRAPPING, terminal -> FREE). */
#define KVF_ROOM_FREE KVF_POLL_NUM
#define KVF_ROOM_NSTATES (KVF_POLL_NUM + 1)

enum kvf_room_flag {
	KVF_RF_INFO_SENT = 1 << 0,     /* receiver: ROOM_INFO went to the peer */
	KVF_RF_QUIESCENT = 1 << 1,     /* nothing posted can still touch the memory */
	KVF_RF_ACK_OWED = 1 << 2,      /* sender: ABORT_ACK once drained */
	KVF_RF_ABORT_OWED = 1 << 3,    /* sender: ABORT to the peer once drained */
	KVF_RF_LAST_SENT = 1 << 4,     /* sender: the LAST chunk was posted */
	KVF_RF_WATCHED = 1 << 5,       /* kvf_watch: changes go on the change list (watch.h) */
	KVF_RF_LEARN = 1 << 6,         /* sender: its fan-out's size is the first ROOM_INFO's
	                                  (kvf_sender_create_learned; fan.h) */
};

/* Why quiescence is being looked at: each names a rule of
 * kvf_room_quiesce (and of tests/model/room.pml). */
enum kvf_quiet_why {
	KVF_QW_DRAINED = 0, /* sender: a completion came, writes were cancelled */
	KVF_QW_FAILED,      /* the room just failed */
	KVF_QW_LAST_WRITE,  /* receiver: the final write-with-immediate landed */
	KVF_QW_PEER_ABORT,  /* receiver: the sender's ABORT (sent once drained) */
	KVF_QW_ACK,         /* receiver: the sender's ABORT_ACK */
	KVF_QW_CONN_GONE,   /* the connection's QPs are in error, or there is none */
};

/* The details of the one failure field; the reason itself lives in the
 * slot so poll() reads it without a pointer chase. */
struct kvf_fail_detail {
	int err;
	int wc_status;
	uint32_t vendor_err;
	char text[192];
};

/* A failure with all its fields, for the few that have more than a reason
 * and an errno (a deadline, a work completion). */
struct kvf_fail_how {
	enum kvf_fail_reason reason;
	enum kvf_deadline dl;  /* KVF_FAIL_DEADLINE: which one */
	int err;               /* positive errno */
	int wc_status;         /* -1 when no work completion is involved */
	uint32_t vendor_err;
	bool rank;             /* another rank of the fan failed first (fan.h): the
	                          room is told its peer, whatever the reason */
};

struct kvf_fan;

struct kvf_slot {
	uint64_t id;
	uint64_t created_ns;
	uint64_t state_ns;
	struct kvf_peer_info *info;   /* sender: the receiver's ROOM_INFO */
	struct kvf_chunks *chunks;    /* sender: what of info's lists was sent */
	struct kvf_fail_detail *fail; /* set with fail_reason */
	struct kvf_fan *fan;          /* fan-out/fan-in room: its slots (fan.h); NULL alone */
	uint32_t gen;                 /* bumped at release; never 0 */
	uint32_t conn;                /* connection the room is bound to, 0 = none */
	uint32_t outstanding;         /* sender: signaled WRs not yet completed */
	uint32_t inflight_prev;       /* TRANSFERRING list, slot + 1 */
	uint32_t inflight_next;
	uint32_t list_conn;           /* the connection whose room list holds it, 0 none
	                                 (conn_rooms.h); follows conn */
	uint32_t conn_prev;           /* that list, slot + 1 */
	uint32_t conn_next;
	uint16_t peer;                /* receiver: index into the engine's peers */
	uint16_t regions;             /* bit per region id the room holds (region.h) */
	uint8_t role;                 /* enum kvf_role */
	uint8_t state;                /* enum kvf_poll, or KVF_ROOM_FREE */
	uint8_t fail_reason;          /* THE failure field: enum kvf_fail_reason */
	uint8_t fail_deadline;        /* enum kvf_deadline when reason is DEADLINE */
	uint8_t deadline;             /* deadline armed now, enum kvf_deadline */
	uint8_t last;                 /* enum kvf_last */
	uint8_t flags;                /* enum kvf_room_flag */
};

/* What observability wants of a room and the room path does not: a table
 * beside the slots (one cache line a room), written at the few events that
 * set it, so the hot slot stays small. Times on the engine clock, 0 = not
 * yet. */
struct kvf_room_obs {
	uint64_t info_ns;        /* ROOM_INFO received (sender) / sent (receiver) */
	uint64_t send_ns;        /* sender: kvf_sender_send */
	uint64_t first_chunk_ns;
	uint64_t last_chunk_ns;
	uint64_t success_ns;
	uint64_t last_ns;        /* when slot.last was set */
	uint64_t bytes;
	uint32_t chunks_done;
	uint32_t chunks_total;
};

static inline bool kvf_live(const struct kvf_slot *r)
{
	return r->state != KVF_ROOM_FREE;
}
static inline bool kvf_terminal(const struct kvf_slot *r)
{
	return r->state == KVF_FAILED || r->state == KVF_SUCCESS;
}

uint64_t kvf_now(const struct kvf_engine *eng);

/* The deadline that applies to the room in its state (KVF_DL_NONE and
 * *len_ns 0 when none) and its length. */
enum kvf_deadline kvf_room_deadline(const struct kvf_engine *eng, const struct kvf_slot *r,
				    uint64_t *len_ns);

/* Whether the table lets a room of role go from one state to another
 * (states: enum kvf_poll or KVF_ROOM_FREE). */
bool kvf_room_transition_allowed(enum kvf_role role, unsigned from, unsigned to);

/* THE door: every state change of a room, its creation (FREE ->
 * BOOTSTRAPPING) and release (terminal -> FREE) included. Gauges, the
 * inflight list and the new state's deadline follow. Debug builds assert
 * the transition is in the table. Failing goes through kvf_room_fail. */
void kvf_room_transition(struct kvf_engine *eng, struct kvf_slot *r, unsigned to);

/* r (just created, BOOTSTRAPPING) belongs to a room that began at ns: its
 * times and its deadline count from then (a fan-out's member made when
 * the fan-out's size was learned: the bootstrap deadline is the room's). */
void kvf_room_backdate(struct kvf_engine *eng, struct kvf_slot *r, uint64_t ns);

/* A sender already TRANSFERRING posted another chunk: its deadline starts
 * again, deadlines.between_chunks_s to the next chunk or, after LAST,
 * deadlines.inflight_s to success. */
void kvf_room_chunk_posted(struct kvf_engine *eng, struct kvf_slot *r);

/* Bind the room to connection conn (0: to none) and keep its connection's
 * room list with it. Every write of r->conn in the engine goes here; the
 * door (kvf_room_transition) takes a released room out of its list. */
void kvf_room_bind(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn);

/* Receiver: its ROOM_INFO (nitems items, bytes in all) went out on conn:
 * bound, observed, WAITING_FOR_INPUT. */
void kvf_room_info_sent(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn,
			uint32_t nitems, uint64_t bytes);

/* Sender: a chunk was handed over (posted: to the transport, bytes and
 * signaled writes; a dummy receiver's middle chunks are not), LAST or not:
 * observed, TRANSFERRING, its deadline restarted. */
void kvf_room_chunk_sent(struct kvf_engine *eng, struct kvf_slot *r, bool posted,
			 uint64_t bytes, uint32_t signaled, bool last);

/* Write the room's failure field and move it to FAILED, then do what the
 * protocol owes the peer (ABORT, ABORT_ACK) and arm the quiesce deadline.
 * Returns false (and changes nothing) when the room is already terminal.
 * kvf_room_fail is the usual short form: no deadline, no work completion. */
bool kvf_room_fail(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason,
		   int err, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
bool kvf_room_fail_how(struct kvf_engine *eng, struct kvf_slot *r, const struct kvf_fail_how *how,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The quiescence rules, all of them: mark a terminal room quiescent when
 * the rule for why holds, and send what a drained sender owes its peer. */
void kvf_room_quiesce(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_quiet_why why);

/* The quiesce deadline passed: tear the connection down (or, without one,
 * nothing can land) and keep the deadline armed until PEER_LOST. */
void kvf_room_quiesce_overdue(struct kvf_engine *eng, struct kvf_slot *r);

/* Take a free slot for a new room of id and role, BOOTSTRAPPING. mapped:
 * into the id map (the room the API names); a fan's member slot is not,
 * its lead is. Returns 0, -ENOSPC or -EEXIST. */
int kvf_room_new(struct kvf_engine *eng, uint64_t id, enum kvf_role role, bool mapped,
		 struct kvf_slot **out);

/* Free a terminal, quiescent room's slot (its id out of the map when
 * mapped) and bump its generation. */
void kvf_room_free(struct kvf_engine *eng, struct kvf_slot *r, bool mapped);

/* Apply one event from the ring. */
void kvf_room_apply(struct kvf_engine *eng, struct kvf_event *ev);

/* A deadline of the room at slot passed. */
void kvf_room_expire(struct kvf_engine *eng, uint32_t slot);

/* An early entry (tombstone or parked info) outlived its TTL. */
void kvf_room_early_expired(struct kvf_engine *eng, struct kvf_early_ent *e);

/* Count and log an event that could not be applied. */
void kvf_room_ignore(struct kvf_engine *eng, enum kvf_ignore_reason why,
		     const struct kvf_event *ev, const char *what);

/* A sender room got its receiver's ROOM_INFO (takes ownership of info). */
void kvf_room_peer_info(struct kvf_engine *eng, struct kvf_slot *r, struct kvf_peer_info *info);

/* A peer ABORT for room r (a tombstone applied at creation included). */
void kvf_room_peer_abort(struct kvf_engine *eng, struct kvf_slot *r, uint32_t conn,
			 uint16_t reason, bool from_tombstone);

const char *kvf_last_str(enum kvf_last l);

#endif
