/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for frames into a real room engine: fuzzed frames go
 * through src/transfer/frame_events.c (decode, ROOM_INFO reassembly, the
 * events the poller pushes) into an engine on the unit suite's fake
 * transport (tests/unit/fake_transport.h), which holds 4 sender rooms
 * (ids 1-4) and 4 receiver rooms (the same ids, ROOM_INFO sent).
 *
 * Two connections, as the poller has them: 8 passive (the prefill side: a
 * ROOM_INFO there is for a sender room) and 7 active (the decode side, where
 * the receivers' ROOM_INFO went). Each has its reassembly and the peer pool
 * of its first HELLO; a frame that names no room tears it down (PEER_LOST,
 * as kvf_conn_teardown), and so does the engine's teardown request.
 *
 * An input is a sequence of records (fuzz_records.h); kind = op & 7,
 * arg = op >> 3:
 *   0-3  the bytes are a frame, on connection 8 (kind even) or 7 (odd)
 *   4    the clock advances arg x 0.5 s
 *   5    kvf_sender_send on sender room arg % 4, (arg / 4) % 4 + 1 blocks
 *   6    kvf_abort on room arg % 8 (senders, then receivers)
 *   7    arg odd: the last posted write completes, status arg / 2 (0 = ok);
 *        even: the final write lands in receiver room (arg / 2) % 4
 * then kvf_progress.
 *
 * Checks, after every record: no room is past the deadline of its state
 * (each non-terminal state has one), and the change list is exact: every
 * room is watched (kvf_watch), and once kvf_changed is drained each room's
 * state is the one it last reported, no report repeats the state said
 * before it, and each names the state kvf_poll gives. After the input,
 * with the clock past every deadline: every room is FAILED or SUCCESS. And
 * no crash, no sanitizer report, no leak once the engine is closed (LSan).
 * Run it with scripts/fuzz.sh engine SECONDS.
 */
#include <stdio.h>

#include "fuzz_report.h"
#include "../unit/fake_transport.h"
#include "fuzz_records.h"
#include "base/log.h"
#include "transfer/frame_events.h"

#define NR 4
#define CONN_ACTIVE 7u
#define CONN_PASSIVE 8u
#define HALF_S (SEC / 2)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fconn {
	uint32_t id;
	bool dead;
	struct kvf_room_reasm reasm;
	struct kvf_proto_limits lim;
	struct kvf_hello_region regions[KVF_PROTO_MAX_REGIONS]; /* the peer's HELLO */
};

static struct fake fk;
static kvf_engine *eng;
static struct kvf_config cfg;
static kvf_room rooms[2 * NR]; /* senders, then receivers */
static int said[2 * NR];       /* each room's state as kvf_changed last said it */
static struct fconn conns[2];

static void broken(const char *what, int room, int state)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "fuzz_engine: %s (room %d, %s)", what, room,
		 kvf_poll_str(state));
	fuzz_broken(msg);
}

static void push_ring(void *arg, const struct kvf_event *ev)
{
	(void)arg;
	kvf_ring_push(kvf_engine_ring(eng), ev);
}

/* kvf_conn_teardown's part the engine sees: PEER_LOST once, nothing heard
 * after, the sequence in progress gone. */
static void conn_lost(struct fconn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	kvf_proto_reasm_clear(&c->reasm);
	push_lost(eng, c->id);
}

static void on_frame(struct fconn *c, const struct fuzz_record *r)
{
	struct kvf_frame_src src = {
		.reasm = &c->reasm, .lim = &c->lim, .conn_id = c->id, .peer = c->id,
		.role = c->id == CONN_ACTIVE ? KVF_RECEIVER : KVF_SENDER,
		.peer_name = "10.0.0.9:4791", .push = push_ring,
	};
	struct kvf_frame f;

	if (c->dead)
		return;
	switch (kvf_frame_events(&src, r->data, r->len, fake_clock, &f)) {
	case KVF_FRAME_HELLO: /* poller.c on_hello: the first one counts */
		if (c->lim.nregions)
			break;
		for (uint32_t i = 0; i < f.hello.nregions; i++)
			kvf_proto_hello_region(&f, i, &c->regions[i]);
		c->lim.regions = c->regions;
		c->lim.nregions = f.hello.nregions;
		break;
	case KVF_FRAME_FATAL:
		conn_lost(c);
		break;
	default:
		break;
	}
}

static void action(const struct fuzz_record *r)
{
	static const uint32_t src[4] = {0, 1, 2, 3};
	unsigned kind = r->op & 7u, arg = r->op >> 3;

	if (kind < 4) {
		on_frame(&conns[kind & 1u], r);
	} else if (kind == 4) {
		fake_clock += arg * HALF_S;
	} else if (kind == 5) {
		kvf_sender_send(eng, rooms[arg % NR], src, (arg / 4) % 4 + 1);
	} else if (kind == 6) {
		kvf_abort(eng, rooms[arg % (2 * NR)]);
	} else if (arg & 1u) {
		if (fk.writes)
			push(eng, (struct kvf_event){.kind = KVF_EV_WC, .status = (uint16_t)(arg / 2),
						     .peer = fk.write_conn, .key = fk.write_wr_id});
	} else {
		push_data_done_on(eng, rooms[NR + (arg / 2) % NR], CONN_ACTIVE);
	}
	/* The engine asked for a teardown: the poller does it. */
	for (int i = 0; i < 2; i++)
		if (fk.torn & 1u << conns[i].id)
			conn_lost(&conns[i]);
}

static uint64_t state_len(const struct kvf_slot *s)
{
	switch (s->state) {
	case KVF_BOOTSTRAPPING:
		return cfg.bootstrap_s * SEC;
	case KVF_WAITING_FOR_INPUT:
		return (s->role == KVF_SENDER ? cfg.waiting_for_input_s : cfg.receiver_waiting_s) *
		       SEC;
	case KVF_TRANSFERRING:
		return cfg.inflight_s * SEC;
	default:
		return 0;
	}
}

/* Drain the change list; then every room's state must be what it said. */
static void check_changes(void)
{
	struct kvf_change c[2 * NR];
	int n;

	while ((n = kvf_changed(eng, c, 3)) > 0) {
		for (int k = 0; k < n; k++) {
			int i = (int)((kvf_room *)c[k].tag - rooms);

			if (i < 0 || i >= 2 * NR || c[k].room.v != rooms[i].v)
				broken("a change with another room's tag", i, c[k].state);
			if (c[k].state == said[i] || c[k].state != kvf_poll(eng, rooms[i]))
				broken("a change repeating the state said, or not the state now", i,
				       c[k].state);
			said[i] = c[k].state;
		}
	}
	for (int i = 0; i < 2 * NR; i++)
		if (kvf_poll(eng, rooms[i]) != said[i])
			broken("a state change the change list missed", i, kvf_poll(eng, rooms[i]));
}

/* Every room of the table, the harness's and any other. */
static void check_rooms(bool all_terminal)
{
	for (uint32_t i = 0; i < eng->nslots; i++) {
		const struct kvf_slot *s = &eng->slots[i];
		uint64_t len;

		if (s->state == KVF_ROOM_FREE || s->state == KVF_FAILED || s->state == KVF_SUCCESS)
			continue;
		if (all_terminal)
			broken("a room not terminal past every deadline", (int)i, s->state);
		len = state_len(s);
		if (!len || fake_clock >= s->state_ns + len)
			broken("a room past its state's deadline, or in a state with none", (int)i,
			       s->state);
	}
}

static int setup(void)
{
	static const uint32_t dst[4] = {0, 1, 2, 3};

	fake_cfg(&cfg);
	/* Small tables: the engine is made anew for every input. */
	cfg.max_rooms = 16;
	cfg.ring_size = 256;
	cfg.max_tombstones = 64;
	/* 0 = off by default: a prefill application that never calls send
	 * keeps its room; the harness checks that every state is bounded. */
	cfg.waiting_for_input_s = 15;
	eng = fake_engine(&cfg, &fk);
	if (!eng)
		return -1;
	fk.conn = CONN_ACTIVE;
	memset(conns, 0, sizeof(conns));
	conns[0].id = CONN_PASSIVE;
	conns[1].id = CONN_ACTIVE;
	for (int i = 0; i < 2; i++)
		conns[i].lim = (struct kvf_proto_limits){.max_blocks = cfg.max_blocks_per_room,
							 .max_bufs = 64};
	for (int i = 0; i < NR; i++) {
		if (kvf_sender_create(eng, (uint64_t)i + 1, &rooms[i]) ||
		    kvf_receiver_create(eng, (uint64_t)i + 1, "10.0.0.1:1", &rooms[NR + i]) ||
		    kvf_receiver_init(eng, rooms[NR + i], dst, 4))
			return -1;
	}
	for (int i = 0; i < 2 * NR; i++) {
		if (kvf_watch(eng, rooms[i], &rooms[i]))
			return -1;
		said[i] = kvf_poll(eng, rooms[i]);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t longest = cfg.bootstrap_s;
	struct fuzz_record r;

	if (setup()) {
		fprintf(stderr, "fuzz_engine: engine setup failed\n");
		abort();
	}
	while (fuzz_next_record(&data, &size, &r)) {
		action(&r);
		kvf_progress(eng);
		check_rooms(false);
		check_changes();
	}
	if (cfg.waiting_for_input_s > longest)
		longest = cfg.waiting_for_input_s;
	if (cfg.inflight_s > longest)
		longest = cfg.inflight_s;
	if (cfg.receiver_waiting_s > longest)
		longest = cfg.receiver_waiting_s;
	fake_clock += (uint64_t)longest * SEC + SEC;
	kvf_progress(eng);
	check_rooms(true);
	check_changes();
	for (int i = 0; i < 2; i++)
		kvf_proto_reasm_clear(&conns[i].reasm);
	kvf_engine_close(eng);
	eng = NULL;
	return 0;
}
