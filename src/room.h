/* SPDX-License-Identifier: Apache-2.0 */
/* The room table and the room state machine. Owned by the scheduler thread
 * alone: nothing here takes a lock. */
#ifndef KVF_ROOM_H
#define KVF_ROOM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#include "config.h"
#include "early.h"
#include "event.h"
#include "idmap.h"
#include "ring.h"
#include "timer.h"
#include "transport.h"

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

enum kvf_room_flag {
	KVF_RF_INFO_SENT = 1 << 0,     /* receiver: ROOM_INFO went to the peer */
	KVF_RF_QUIESCENT = 1 << 1,     /* nothing posted can still touch the memory */
	KVF_RF_ACK_OWED = 1 << 2,      /* sender: ABORT_ACK once drained */
	KVF_RF_ABORT_OWED = 1 << 3,    /* sender: ABORT to the peer once drained */
};

/* The details of the one failure field; the reason itself lives in the
 * slot so poll() reads it without a pointer chase. */
struct kvf_fail_detail {
	int err;
	int wc_status;
	uint32_t vendor_err;
	char text[192];
};

struct kvf_slot {
	uint64_t id;
	uint64_t created_ns;
	uint64_t state_ns;
	struct kvf_peer_info *info;   /* sender: the receiver's ROOM_INFO */
	struct kvf_fail_detail *fail; /* set with fail_reason */
	uint32_t gen;                 /* bumped at release; never 0 */
	uint32_t conn;                /* connection the room depends on, 0 = none */
	uint32_t outstanding;         /* sender: signaled WRs not yet completed */
	uint32_t inflight_prev;       /* TRANSFERRING list, slot + 1 */
	uint32_t inflight_next;
	uint16_t peer;                /* receiver: index into the engine's peers */
	uint8_t in_use;
	uint8_t role;                 /* enum kvf_role */
	uint8_t state;                /* enum kvf_poll */
	uint8_t fail_reason;          /* THE failure field: enum kvf_fail_reason */
	uint8_t fail_deadline;        /* enum kvf_deadline when reason is DEADLINE */
	uint8_t deadline;             /* deadline armed now, enum kvf_deadline */
	uint8_t last;                 /* enum kvf_last */
	uint8_t flags;                /* enum kvf_room_flag */
};

struct kvf_engine {
	struct kvf_config cfg;
	uint64_t (*now_fn)(void *arg);
	void *now_arg;

	struct kvf_slot *slots;
	uint32_t nslots;
	uint32_t *free_stack;     /* free slots; LIFO keeps reused slots warm */
	uint32_t nfree;
	struct kvf_idmap ids;     /* (room id, role) -> slot */
	struct kvf_timers timers; /* one deadline per room */
	struct kvf_early early;   /* tombstones and parked ROOM_INFOs */
	uint32_t inflight_head;   /* oldest TRANSFERRING sender, slot + 1 */
	uint32_t inflight_tail;

	struct kvf_ring *ring;
	struct kvf_event *batch;
	uint32_t batch_cap;

	const struct kvf_transport_ops *ops;
	void *t;

	bool pool_ok;
	uint32_t pool_nblocks;

	char **peers;             /* interned "host:port" strings */
	uint32_t npeers;

	uint64_t next_summary_ns;
	struct kvf_stats st;
};

/* Handle <-> slot. */
static inline kvf_room kvf_room_handle(const struct kvf_engine *eng, const struct kvf_slot *r)
{
	return (kvf_room){ .v = (uint64_t)r->gen << 32 | (uint32_t)(r - eng->slots) };
}
static inline uint32_t kvf_slot_index(const struct kvf_engine *eng, const struct kvf_slot *r)
{
	return (uint32_t)(r - eng->slots);
}
static inline bool kvf_terminal(const struct kvf_slot *r)
{
	return r->state == KVF_FAILED || r->state == KVF_SUCCESS;
}

uint64_t kvf_now(const struct kvf_engine *eng);

/* Move a live room to a non-failed state: gauges, the inflight list and the
 * state's deadline follow. */
void kvf_room_set_state(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_poll state);

/* Write the room's failure field and move it to FAILED, then do what the
 * protocol owes the peer (ABORT, ABORT_ACK) and arm the quiesce deadline.
 * Returns false (and changes nothing) when the room is already terminal. */
bool kvf_room_fail(struct kvf_engine *eng, struct kvf_slot *r, enum kvf_fail_reason reason,
		   enum kvf_deadline dl, int err, int wc_status, uint32_t vendor_err,
		   const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* Mark quiescent if nothing posted can still land; sends what was owed. */
void kvf_room_check_quiescent(struct kvf_engine *eng, struct kvf_slot *r);

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
