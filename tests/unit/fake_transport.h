/* SPDX-License-Identifier: Apache-2.0 */
/* A fake transport for unit tests of the room engine: it records what the
 * engine asked of it, and the test plays the peer and the poller by pushing
 * events into the engine's ring. Never the proof that a transfer works:
 * that is the rxe suite. Header-only so each test binary has its own. */
#ifndef KVF_FAKE_TRANSPORT_H
#define KVF_FAKE_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"

struct fake {
	/* what to answer */
	uint32_t conn;          /* send_room_info's connection id */
	int room_info_rc;
	int signaled;           /* post_writes' answer */
	int cancel_rc;
	uint64_t wait_bound_ns; /* wait_ns's answer (0: no bound of its own) */
	/* what was asked */
	int room_infos, writes, cancels, aborts, acks, teardowns;
	uint64_t room_info_id, room_info_handle;
	uint64_t write_wr_id;
	uint32_t write_conn;
	uint32_t write_imm, write_n; /* write_n: items over the chunk's parts */
	bool write_has_imm;          /* the last chunk posted carried the immediate */
	uint32_t write_nparts;
	struct kvf_xfer_part write_parts[KVF_MAX_REGIONS]; /* the last chunk's */
	uint32_t info_nlists, info_user_len;
	uint8_t info_user[KVF_USER_DATA_MAX];
	uint64_t abort_id, ack_id;
	uint8_t abort_role;
	uint32_t abort_conn, ack_conn;
	uint16_t abort_reason;
	uint32_t teardown_conn;
	uint32_t torn;          /* bit per connection id < 32 torn down */
	int busy_calls;         /* conn_busy: calls, and per connection id < 32 */
	uint32_t busy;          /* what it was told last (bit set: busy) */
	/* Rooms across ranks: per connection id < 32, and per ROOM_INFO sent */
	uint32_t conn_next;     /* nonzero: send_room_info answers conn_next++ */
	int writes_on[32], aborts_on[32], acks_on[32];
	uint64_t wr_on[32];     /* the last chunk's wr_id on that connection */
	uint32_t nparts_on[32];
	bool imm_on[32];
	uint64_t info_handle[8]; /* recv_handle of ROOM_INFO i */
	uint32_t info_conn[8];
	uint32_t info_nl[8];     /* its lists */
};

static int fake_room_info(void *t, const char *peer, const struct kvf_info_out *info,
			  uint32_t *conn)
{
	struct fake *f = t;

	f->room_infos++;
	f->room_info_id = info->room_id;
	f->room_info_handle = info->recv_handle;
	f->info_nlists = info->nlists;
	f->info_user_len = info->user_len;
	if (info->user_len)
		memcpy(f->info_user, info->user, info->user_len);
	*conn = f->conn_next ? f->conn_next++ : f->conn;
	if (f->room_infos <= 8) {
		f->info_handle[f->room_infos - 1] = info->recv_handle;
		f->info_conn[f->room_infos - 1] = *conn;
		f->info_nl[f->room_infos - 1] = info->nlists;
	}
	return f->room_info_rc;
}

/* One chunk: one call, whatever its parts (signaled is the answer). */
static int fake_post_chunk(void *t, uint32_t conn, uint64_t wr_id,
			   const struct kvf_xfer_part *parts, uint32_t nparts, const uint32_t *imm)
{
	struct fake *f = t;

	f->writes++;
	f->write_conn = conn;
	f->write_wr_id = wr_id;
	f->write_has_imm = imm != NULL;
	f->write_imm = imm ? *imm : 0;
	f->write_n = 0;
	f->write_nparts = nparts;
	for (uint32_t i = 0; i < nparts; i++) {
		f->write_n += parts[i].n;
		f->write_parts[i] = parts[i];
	}
	if (conn < 32) {
		f->writes_on[conn]++;
		f->wr_on[conn] = wr_id;
		f->nparts_on[conn] = nparts;
		f->imm_on[conn] = imm != NULL;
	}
	return f->signaled;
}

static int fake_cancel(void *t, uint32_t conn, uint64_t wr_id)
{
	struct fake *f = t;

	f->cancels++;
	return f->cancel_rc;
}

static int fake_abort(void *t, uint32_t conn, uint64_t id, uint8_t to_role, uint16_t reason)
{
	struct fake *f = t;

	f->aborts++;
	if (conn < 32)
		f->aborts_on[conn]++;
	f->abort_conn = conn;
	f->abort_id = id;
	f->abort_role = to_role;
	f->abort_reason = reason;
	return 0;
}

static int fake_ack(void *t, uint32_t conn, uint64_t id)
{
	struct fake *f = t;

	f->acks++;
	if (conn < 32)
		f->acks_on[conn]++;
	f->ack_conn = conn;
	f->ack_id = id;
	return 0;
}

static void fake_teardown(void *t, uint32_t conn, const char *why)
{
	struct fake *f = t;

	f->teardowns++;
	f->teardown_conn = conn;
	if (conn < 32)
		f->torn |= 1u << conn;
}

static void fake_conn_busy(void *t, uint32_t conn, bool busy)
{
	struct fake *f = t;

	f->busy_calls++;
	if (conn < 32)
		f->busy = busy ? f->busy | 1u << conn : f->busy & ~(1u << conn);
}

/* kvf_engine_wait's bound from the transport: a heartbeat-like one the
 * test sets, or none. */
static uint64_t fake_wait_ns(void *t, uint64_t max_ns)
{
	struct fake *f = t;

	return f->wait_bound_ns && f->wait_bound_ns < max_ns ? f->wait_bound_ns : max_ns;
}

static const struct kvf_transport_ops fake_ops = {
	.send_room_info = fake_room_info,
	.post_chunk = fake_post_chunk,
	.cancel_writes = fake_cancel,
	.send_abort = fake_abort,
	.send_abort_ack = fake_ack,
	.teardown = fake_teardown,
	.conn_busy = fake_conn_busy,
	.wait_ns = fake_wait_ns,
};

/* The injected clock, in ns. */
static uint64_t fake_clock;
static uint64_t fake_now(void *arg)
{
	(void)arg;
	return fake_clock;
}
#define SEC 1000000000ull

static inline void fake_cfg(struct kvf_config *cfg)
{
	kvf_config_defaults(cfg);
	cfg->max_rooms = 64;
	cfg->summary_interval_s = 0;
	cfg->log_level = KVF_LOG_ERROR;
}

static inline kvf_engine *fake_engine(const struct kvf_config *cfg, struct fake *f)
{
	static uint64_t base_bufs[2][16];
	static void *bufs[2] = { base_bufs[0], base_bufs[1] };
	static const uint64_t bs[2] = { 8, 8 };
	kvf_engine *eng = NULL;

	memset(f, 0, sizeof(*f));
	f->conn = 7;
	f->signaled = 1;
	kvf_log_set_level(cfg->log_level);
	if (kvf_engine_create(cfg, &fake_ops, f, &eng) != 0)
		return NULL;
	fake_clock = 1000 * SEC;
	kvf_engine_set_clock(eng, fake_now, NULL);
	if (kvf_pool_register(eng, 2, bufs, bs, 16) != 0) {
		kvf_engine_close(eng);
		return NULL;
	}
	return eng;
}

static inline void push(kvf_engine *eng, struct kvf_event ev)
{
	kvf_ring_push(kvf_engine_ring(eng), &ev);
}

/* One list of a ROOM_INFO the test makes up: the receiver's region name
 * and its item count (items 0..n-1). */
struct fake_list {
	const char *name;
	uint32_t n;
};

/* The receiver's ROOM_INFO with lists and user data arriving for sender
 * room id on conn. */
static inline void push_info_lists(kvf_engine *eng, uint64_t id, uint32_t conn,
				   uint64_t recv_handle, const struct fake_list *lists,
				   uint32_t nlists, const void *user, uint32_t user_len)
{
	uint32_t nids = 0, at = 0;
	struct kvf_peer_info *pi;

	for (uint32_t k = 0; k < nlists; k++)
		nids += lists[k].n;
	pi = kvf_peer_info_alloc(nids);
	pi->room_id = id;
	pi->recv_handle = recv_handle;
	pi->peer = conn;
	pi->nlists = nlists;
	pi->nids = nids;
	pi->user_len = user_len;
	if (user_len)
		memcpy(pi->user, user, user_len);
	for (uint32_t k = 0; k < nlists; k++) {
		snprintf(pi->lists[k].name, sizeof(pi->lists[k].name), "%s", lists[k].name);
		pi->lists[k].peer_region = k;
		pi->lists[k].n = lists[k].n;
		pi->lists[k].first = at;
		for (uint32_t i = 0; i < lists[k].n; i++)
			pi->ids[at++] = i;
	}
	push(eng, (struct kvf_event){ .kind = KVF_EV_PEER_INFO, .key = id, .peer = conn,
				      .data = pi });
}

/* The receiver's ROOM_INFO arriving for sender room id on conn: one list
 * of n blocks of region "kv" (kvf_pool_register's). */
static inline void push_info(kvf_engine *eng, uint64_t id, uint32_t conn, uint64_t recv_handle,
			     uint32_t n)
{
	struct fake_list l = { "kv", n };

	push_info_lists(eng, id, conn, recv_handle, &l, 1, NULL, 0);
}

static inline void push_wc(kvf_engine *eng, kvf_room h, uint16_t status)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_WC, .status = status, .peer = 7,
				      .key = kvf_wr_id(KVF_WR_DATA, (uint32_t)(h.v >> 32),
						       (uint32_t)h.v) });
}

/* The completion of the write wr_id (a chunk's, as posted). */
static inline void push_wc_id(kvf_engine *eng, uint64_t wr_id, uint32_t conn, uint16_t status)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_WC, .status = status, .peer = conn,
				      .key = wr_id });
}

static inline void push_abort(kvf_engine *eng, uint64_t id, enum kvf_role role, uint32_t conn)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_PEER_ABORT, .key = id, .role = (uint8_t)role,
				      .peer = conn, .status = KVF_FAIL_LOCAL_ABORT });
}

static inline void push_lost(kvf_engine *eng, uint32_t conn)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_PEER_LOST, .peer = conn,
				      .status = KVF_FAIL_PEER_LOST });
}

/* The final write-with-immediate for receiver room h landed on conn; the
 * poller took it at stamp (kvf_monotonic_ns, 0 = not stamped). */
static inline void push_data_done_at(kvf_engine *eng, kvf_room h, uint32_t conn, uint64_t stamp)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_DATA_DONE, .peer = conn,
				      .key = (uint32_t)h.v |
					     (uint64_t)((h.v >> 32) & KVF_IMM_GEN_MASK) << 32,
				      .aux = stamp });
}

static inline void push_data_done_on(kvf_engine *eng, kvf_room h, uint32_t conn)
{
	push_data_done_at(eng, h, conn, 0);
}

static inline void push_data_done(kvf_engine *eng, kvf_room h)
{
	push_data_done_on(eng, h, 7);
}

static inline void push_ack(kvf_engine *eng, uint64_t id, uint32_t conn)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_ABORT_ACK, .key = id, .peer = conn });
}

static inline void push_bad_frame(kvf_engine *eng, uint64_t id, enum kvf_role role, uint32_t conn)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_BAD_FRAME, .key = id, .role = (uint8_t)role,
				      .peer = conn });
}

#endif
