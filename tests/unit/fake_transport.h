/* SPDX-License-Identifier: Apache-2.0 */
/* A fake transport for unit tests of the room engine: it records what the
 * engine asked of it, and the test plays the peer and the poller by pushing
 * events into the engine's ring. Never the proof that a transfer works:
 * that is the rxe suite. Header-only so each test binary has its own. */
#ifndef KVF_FAKE_TRANSPORT_H
#define KVF_FAKE_TRANSPORT_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine.h"
#include "room.h"

struct fake {
	/* what to answer */
	uint32_t conn;          /* send_room_info's connection id */
	int room_info_rc;
	int signaled;           /* post_writes' answer */
	int cancel_rc;
	/* what was asked */
	int room_infos, writes, cancels, aborts, acks, teardowns;
	uint64_t room_info_id, room_info_handle;
	uint64_t write_wr_id;
	uint32_t write_conn;
	uint32_t write_imm, write_n;
	uint64_t abort_id, ack_id;
	uint8_t abort_role;
	uint32_t abort_conn, ack_conn;
	uint16_t abort_reason;
	uint32_t teardown_conn;
	uint32_t torn;          /* bit per connection id < 32 torn down */
};

static int fake_room_info(void *t, const char *peer, uint64_t id, uint64_t handle,
			  const uint32_t *blocks, uint32_t n, uint32_t *conn)
{
	struct fake *f = t;

	f->room_infos++;
	f->room_info_id = id;
	f->room_info_handle = handle;
	*conn = f->conn;
	return f->room_info_rc;
}

static int fake_post_writes(void *t, uint32_t conn, uint64_t wr_id, uint32_t imm,
			    const uint32_t *src, const uint32_t *dst, uint32_t n)
{
	struct fake *f = t;

	f->writes++;
	f->write_conn = conn;
	f->write_wr_id = wr_id;
	f->write_imm = imm;
	f->write_n = n;
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

static const struct kvf_transport_ops fake_ops = {
	.send_room_info = fake_room_info,
	.post_writes = fake_post_writes,
	.cancel_writes = fake_cancel,
	.send_abort = fake_abort,
	.send_abort_ack = fake_ack,
	.teardown = fake_teardown,
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

/* The receiver's ROOM_INFO arriving for sender room id on conn. */
static inline void push_info(kvf_engine *eng, uint64_t id, uint32_t conn, uint64_t recv_handle,
			     uint32_t n)
{
	struct kvf_peer_info *pi = malloc(sizeof(*pi) + n * sizeof(uint32_t));

	pi->room_id = id;
	pi->recv_handle = recv_handle;
	pi->peer = conn;
	pi->nblocks = n;
	for (uint32_t i = 0; i < n; i++)
		pi->blocks[i] = i;
	push(eng, (struct kvf_event){ .kind = KVF_EV_PEER_INFO, .key = id, .peer = conn,
				      .data = pi });
}

static inline void push_wc(kvf_engine *eng, kvf_room h, uint16_t status)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_WC, .status = status, .peer = 7,
				      .key = kvf_wr_id(KVF_WR_DATA, (uint32_t)(h.v >> 32),
						       (uint32_t)h.v) });
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

/* The final write-with-immediate for receiver room h landed on conn. */
static inline void push_data_done_on(kvf_engine *eng, kvf_room h, uint32_t conn)
{
	push(eng, (struct kvf_event){ .kind = KVF_EV_DATA_DONE, .peer = conn,
				      .key = (uint32_t)h.v |
					     (uint64_t)((h.v >> 32) & KVF_IMM_GEN_MASK) << 32 });
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
