/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_peer: a decode-side kvferry peer written with raw rdma_cm and verbs
 * that speaks the protocol as docs/wire.md defines it: every byte it sends
 * or reads goes through wire_codec.c, which is built from the document's
 * tables (wire_doc.h, generated at build time), never from src/transfer/proto.h. It
 * connects to a real kvferry prefill engine (tests/rxe/kvf_driver --role
 * prefill), does the real handshake (connect private data with its nonce,
 * its AUTH proof, the prefill's proof checked, HELLO, ROOM_INFO,
 * HEARTBEAT), checks every byte the prefill writes, and misbehaves on
 * purpose:
 *
 *   good        everything right: every room's data lands and checks
 *   bad-rkey    HELLO carries wrong rkeys; room 0 is asked on that connection
 *               (its first write gets a remote access error at the prefill,
 *               which tears the connection down); rooms 1.. on a second,
 *               correct connection
 *   bad-block   ROOM_INFO of room --bad-room names a block id outside the
 *               pool of the HELLO (the prefill's decoder must refuse it);
 *               the other rooms on the same connection
 *   mr-overrun  HELLO announces twice the blocks that are registered; room
 *               --bad-room names a block past the registration (passes the
 *               decoder's check, the write gets a remote access error); rooms
 *               before it on connection 1, after it on connection 2
 *   truncated   ROOM_INFO of --bad-room says one block more than it carries
 *               (header length consistent: a bad body naming its room)
 *   short       ROOM_INFO of --bad-room is sent 4 bytes shorter than its
 *               header's length (the header itself is unsound: the
 *               connection goes); rooms before it on connection 1, it and
 *               the rest again on connection 2
 *   bad-layout  HELLO with twice the item size: the prefill tears connection 1 down;
 *               room 0 on connection 1 (closed by us after --wait), the rest
 *               on connection 2
 *   big-pool    our pool has twice the prefill's blocks and every
 *               destination block id is past the prefill's own count (legal:
 *               the pools of the two sides need not be the same size)
 *   close-fast  as good, but we disconnect the moment the last room's data
 *               has landed (its write-with-immediate completed here, so the
 *               prefill's RC ACK is on its way): every room should still be
 *               SUCCESS at the prefill
 *   bad-version connect private data with the next protocol version: rejected
 *   bad-token   a proof under another token: the prefill refuses it with an
 *               AUTH refusal (bad token) and disconnects; nothing it sends
 *               before that may carry a MAC or be a HELLO
 *   replay      connection 1 right (every room on it), its connect private
 *               data and AUTH proof kept as a sniffer would; connection 2
 *               sends both again, byte for byte: refused (replayed proof)
 *   silent      connection 1 never sends its proof: refused (no proof in
 *               time) and dropped within --auth-ms (+ 1.5 s); rooms on a
 *               second, right connection
 *   early       connection 1 sends HELLO before its proof: refused (frame
 *               before proof); rooms on a second, right connection
 *   tombstone   a second authenticated decode that asks for nothing: ABORT
 *               (to the sender role) for each of the rooms' ids, before
 *               the prefill has them (issue 43); every one must be
 *               acknowledged (ABORT_ACK), then the connection stays up
 *               --wait s (heartbeats) while a good decode asks for them
 *   flood       a second authenticated decode that asks for nothing and
 *               sends HEARTBEAT frames back to back for --wait s, 48 in
 *               flight, at the prefill's shared receive queue (issue 42):
 *               the prefill must keep serving a good decode meanwhile
 *
 * One line per event on stdout ("fake_peer: ..."); the last line is
 * "fake_peer: RESULT ok" or "fake_peer: RESULT FAIL <reason>" (what this
 * side saw against what the mode expects) and the exit status follows it.
 * The prefill side's view (per room) is kvf_driver's output.
 *
 *   fake_peer --server ADDR:PORT --mode MODE [--bind ADDR] [--token T]
 *     [--rooms N (6)] [--first-id ID (0x1000)] [--buffers B (4)]
 *     [--block-size S (16384)] [--blocks-per-room K (4)] [--pool-blocks P]
 *     [--src-pool-blocks P (the prefill's pool, default --pool-blocks)]
 *     [--bad-room I (2)] [--hb-ms MS (500)] [--wait S (4)] [--timeout S (30)]
 *     [--auth-ms MS (5000): the prefill's rdma.auth_timeout_ms, for silent]
 * The shape options must equal the prefill driver's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <openssl/rand.h>
#include <rdma/rdma_cma.h>

#include "pattern.h"
#include "wire_codec.h"

#define FRAME 32768u
#define RX_N 64u
#define TX_N 16u
#define CQ_N 256

enum mode { M_GOOD, M_BAD_RKEY, M_BAD_BLOCK, M_MR_OVERRUN, M_TRUNCATED, M_SHORT, M_BAD_LAYOUT,
	    M_BAD_VERSION, M_BAD_TOKEN, M_BIG_POOL, M_CLOSE_FAST, M_REPLAY, M_SILENT, M_EARLY,
	    M_TOMBSTONE, M_FLOOD };
static const char *const mode_names[] = {"good", "bad-rkey", "bad-block", "mr-overrun",
	"truncated", "short", "bad-layout", "bad-version", "bad-token", "big-pool", "close-fast",
	"replay", "silent", "early", "tombstone", "flood"};

struct opts {
	const char *server, *bind, *token;
	enum mode mode;
	uint32_t rooms, nbufs, bpr, pool_blocks, bad_room, hb_ms, auth_ms;
	uint32_t src_pool_blocks; /* the prefill's pool (pattern.h source blocks) */
	uint32_t dst_off;         /* big-pool: destination blocks start here */
	uint64_t block_size, first_id;
	double wait_s, timeout_s;
};

/* Room outcome on this side. */
enum { R_NONE, R_ASKED, R_DONE, R_BAD, R_ABORTED };

struct peer {
	struct opts o;
	uint8_t **bufs;       /* the pool: nbufs x pool_blocks x block_size */
	uint8_t *rx, *tx;
	uint8_t *rstate;      /* per room */
	uint32_t ok, bad_words, aborts, acks;
	uint64_t sends_done;    /* our SENDs completed (flood) */
	bool got_hello;
};

/* One connection. */
struct conn {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *rx_mr, *tx_mr, **pool_mr;
	uint32_t tx_next;
	bool established, gone, rejected, disc;
	char why[160];
	double last_hb;
	/* The token's exchange (docs/wire.md 4.4) */
	uint8_t req[KVF_WIRE_CM_LEN];      /* our connect private data, as sent */
	uint8_t proof[KVF_WIRE_AUTH_LEN];  /* our proof, as sent */
	struct kw_auth_id who;             /* the connection as we see it */
	double est_t, refused_t, gone_t;   /* ESTABLISHED, the prefill's refusal, and its
	                                      disconnect (a DREQ may be retried: later) */
	uint32_t leaks;                    /* frames the prefill sent before our proof held */
	int refusal;                       /* the prefill's refusal code, -1 none */
};

static void usage(void)
{
	fprintf(stderr, "usage: fake_peer --server ADDR:PORT --mode MODE [--bind ADDR] [--token T]\n"
		"  [--rooms N] [--first-id ID] [--buffers B] [--block-size S] [--blocks-per-room K]\n"
		"  [--pool-blocks P] [--bad-room I] [--hb-ms MS] [--wait S] [--timeout S]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	const char *mode = NULL;

	*o = (struct opts){.token = "", .rooms = 6, .nbufs = 4, .bpr = 4, .block_size = 16384,
			   .first_id = 0x1000, .bad_room = 2, .hb_ms = 500, .wait_s = 4,
			   .timeout_s = 30, .auth_ms = 5000};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--server")) o->server = v;
		else if (!strcmp(a, "--bind")) o->bind = v;
		else if (!strcmp(a, "--token")) o->token = v;
		else if (!strcmp(a, "--mode")) mode = v;
		else if (!strcmp(a, "--rooms")) o->rooms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--first-id")) o->first_id = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--buffers")) o->nbufs = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--block-size")) o->block_size = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--blocks-per-room")) o->bpr = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--pool-blocks")) o->pool_blocks = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--src-pool-blocks")) o->src_pool_blocks = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--bad-room")) o->bad_room = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--hb-ms")) o->hb_ms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--auth-ms")) o->auth_ms = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--wait")) o->wait_s = atof(v);
		else if (!strcmp(a, "--timeout")) o->timeout_s = atof(v);
		else usage();
	}
	if (!o->server || !mode)
		usage();
	o->mode = (enum mode)-1;
	for (unsigned m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++)
		if (!strcmp(mode, mode_names[m]))
			o->mode = (enum mode)m;
	if ((int)o->mode < 0) {
		fprintf(stderr, "fake_peer: unknown mode %s\n", mode);
		usage();
	}
	if (!o->pool_blocks)
		o->pool_blocks = o->rooms * o->bpr;
	if (!o->src_pool_blocks)
		o->src_pool_blocks = o->pool_blocks;
	if (o->mode == M_BIG_POOL) {
		/* our pool is twice the prefill's; every destination is in the
		 * upper half, past the prefill's own block count */
		o->dst_off = o->src_pool_blocks;
		o->pool_blocks = 2 * o->src_pool_blocks;
	}
	if ((o->mode == M_MR_OVERRUN || o->mode == M_SHORT) && o->bad_room == 0)
		o->bad_room = 1; /* at least one good room goes before it */
	if (!o->rooms || o->rooms > 4096 || !o->bpr || o->bpr > 512 || o->bad_room >= o->rooms ||
	    o->rooms * o->bpr > o->src_pool_blocks || o->dst_off + o->rooms * o->bpr > o->pool_blocks ||
	    o->block_size % 8)
		usage();
}

static int result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int result(bool ok, const char *fmt, ...)
{
	char msg[256] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("fake_peer: RESULT %s%s%s\n", ok ? "ok" : "FAIL", *msg ? " " : "", msg);
	return ok ? 0 : 1;
}

static uint32_t dstb(const struct peer *p, uint32_t i, uint32_t j)
{
	return p->o.dst_off + kvt_dst_block(i, j, p->o.bpr, p->o.src_pool_blocks);
}

static uint32_t srcb(const struct peer *p, uint32_t i, uint32_t j)
{
	return kvt_src_block(i, j, p->o.bpr, p->o.src_pool_blocks);
}

/* ------------------------------------------------------------ addresses */

static int get_addr(const char *hostport, bool has_port, struct sockaddr_storage *ss)
{
	char host[256], *colon = NULL;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int rc;

	snprintf(host, sizeof(host), "%s", hostport);
	if (has_port) {
		colon = strrchr(host, ':');
		if (!colon)
			return -EINVAL;
		*colon++ = '\0';
	}
	rc = getaddrinfo(host, colon, &hints, &ai);
	if (rc) {
		printf("fake_peer: %s: %s\n", hostport, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

/* ------------------------------------------------------------ cm events */

/* Wait for one cm event on c (blocking up to secs); returns its type or -1. */
static int wait_cm(struct peer *p, struct conn *c, double secs, struct rdma_cm_event **out)
{
	struct pollfd pfd = {.fd = c->ech->fd, .events = POLLIN};
	double end = kvt_mono() + secs;

	for (;;) {
		if (!rdma_get_cm_event(c->ech, out))
			return (int)(*out)->event;
		if (errno != EAGAIN)
			return -1;
		if (kvt_mono() > end)
			return -1;
		poll(&pfd, 1, 50);
	}
	(void)p;
}

static int expect_cm(struct peer *p, struct conn *c, enum rdma_cm_event_type want, double secs)
{
	struct rdma_cm_event *ev;
	int e = wait_cm(p, c, secs, &ev);

	if (e < 0) {
		printf("fake_peer: no %s within %.0f s\n", rdma_event_str(want), secs);
		return -ETIMEDOUT;
	}
	if (e != (int)want) {
		printf("fake_peer: %s (status %d) while waiting for %s\n", rdma_event_str(ev->event),
		       ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -EPROTO;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

/* ------------------------------------------------------------ frames */

static int post_recv(struct peer *p, struct conn *c, uint32_t slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(p->rx + (size_t)slot * FRAME), .length = FRAME,
			      .lkey = c->rx_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

/* SEND len bytes from tx slot (caller filled it). Signaled; completions are
 * reaped by the event loop. */
static int post_send(struct peer *p, struct conn *c, uint32_t slot, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(p->tx + (size_t)slot * FRAME), .length = len,
			      .lkey = c->tx_mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1u << 31 | slot, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
	int rc = ibv_post_send(c->id->qp, &wr, &bad);

	if (rc)
		printf("fake_peer: ibv_post_send: %s\n", strerror(rc));
	return rc;
}

static uint8_t *tx_slot(struct peer *p, struct conn *c, uint32_t *slot)
{
	*slot = c->tx_next++ % TX_N;
	return p->tx + (size_t)*slot * FRAME;
}

static int send_hello(struct peer *p, struct conn *c, bool bad_rkey, bool inflate, bool bad_bs)
{
	struct kw_hello_buf hb[1024];
	uint32_t slot;
	uint8_t *buf = tx_slot(p, c, &slot);
	size_t len;

	for (uint32_t k = 0; k < p->o.nbufs; k++) {
		hb[k].addr = (uintptr_t)p->bufs[k];
		hb[k].item_size = bad_bs ? 2 * p->o.block_size : p->o.block_size;
		hb[k].rkey = c->pool_mr[k]->rkey;
		if (bad_rkey)
			hb[k].rkey ^= 0x00ff0f00u; /* a key this PD never issued */
	}
	/* One region, "kv" (the prefill's kvf_pool_register), id 0. */
	struct kw_region r = {"kv", 0, inflate ? 2 * p->o.pool_blocks : p->o.pool_blocks,
			      p->o.nbufs, hb};

	len = kw_encode_hello(buf, FRAME, "fake-peer", &r, 1);
	if (!len)
		return -EMSGSIZE;
	printf("fake_peer: HELLO sent: %u buffers x %u blocks%s%s%s\n", p->o.nbufs,
	       inflate ? 2 * p->o.pool_blocks : p->o.pool_blocks, bad_rkey ? " (wrong rkeys)" : "",
	       inflate ? " (twice the registered blocks)" : "", bad_bs ? " (twice the block size)" : "");
	return post_send(p, c, slot, (uint32_t)len);
}

/* kind: 0 good, 1 out-of-range block, 2 truncated body, 3 short send,
 * 4 block past the registration (inside the announced pool). */
static int send_room_info(struct peer *p, struct conn *c, uint32_t i, int kind)
{
	uint32_t blocks[513], n = p->o.bpr, slot;
	uint8_t *buf = tx_slot(p, c, &slot);
	size_t len;

	for (uint32_t j = 0; j < n; j++)
		blocks[j] = dstb(p, i, j);
	if (kind == 1)
		blocks[n - 1] = p->o.pool_blocks + 7; /* past the pool of our HELLO */
	if (kind == 4)
		blocks[0] = p->o.pool_blocks + 3;     /* announced, not registered */
	/* each room's destination blocks are poisoned before it is asked */
	for (uint32_t k = 0; k < p->o.nbufs; k++)
		for (uint32_t j = 0; j < n; j++)
			if (blocks[j] < p->o.pool_blocks)
				memset(p->bufs[k] + (size_t)blocks[j] * p->o.block_size, 0xdd,
				       p->o.block_size);
	/* the immediate will name slot i (generation 0): docs/wire.md 6.2 */
	struct kw_list l = {0, n, blocks};

	len = kw_encode_room_info(buf, FRAME, p->o.first_id + i, kw_recv_handle(i, 0), &l, 1,
				  NULL, 0);
	if (!len)
		return -EMSGSIZE;
	if (kind == 2) /* the list says n + 1 items; the info and the frame hold n */
		KW_PUT(buf + KVF_WIRE_ROOM_INFO_INFO_OFF + KVF_WIRE_INFO_USER_OFF, INFO_LIST_N, n + 1);
	if (kind == 3)
		len -= 4;
	p->rstate[i] = R_ASKED;
	printf("fake_peer: ROOM_INFO room %u id=%#" PRIx64 " sent (%s, %zu bytes)\n", i,
	       p->o.first_id + i,
	       (const char *[]){"good", "out-of-range block id", "truncated block list",
				"cut 4 bytes short of its header length",
				"block past the registered memory"}[kind], len);
	return post_send(p, c, slot, (uint32_t)len);
}

static void send_heartbeat(struct peer *p, struct conn *c)
{
	uint32_t slot;
	uint8_t *buf = tx_slot(p, c, &slot);
	size_t len = kw_encode_heartbeat(buf, FRAME);

	if (len > 0)
		post_send(p, c, slot, (uint32_t)len);
	c->last_hb = kvt_mono();
}

/* ------------------------------------------------------------ data check */

static void check_room(struct peer *p, uint32_t i)
{
	uint32_t bad = 0;

	for (uint32_t k = 0; k < p->o.nbufs; k++)
		for (uint32_t j = 0; j < p->o.bpr; j++) {
			uint32_t db = dstb(p, i, j);
			uint32_t sb = srcb(p, i, j);
			const uint64_t *w = (const uint64_t *)(p->bufs[k] + (size_t)db * p->o.block_size);

			for (uint64_t x = 0; x < p->o.block_size / 8; x++)
				bad += w[x] != kvt_word(k, sb, x);
		}
	p->bad_words += bad;
	if (!bad)
		p->ok++;
	p->rstate[i] = bad ? R_BAD : R_DONE;
	printf("fake_peer: room %u id=%#" PRIx64 " data landed: %s (%u bad words)\n", i,
	       p->o.first_id + i, bad ? "MISMATCH" : "every byte checked", bad);
}

/* ------------------------------------------------------------ connection */

static void conn_close(struct peer *p, struct conn *c)
{
	if (c->id && c->established && !c->gone)
		rdma_disconnect(c->id);
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	for (uint32_t k = 0; c->pool_mr && k < p->o.nbufs; k++)
		if (c->pool_mr[k])
			ibv_dereg_mr(c->pool_mr[k]);
	free(c->pool_mr);
	if (c->rx_mr)
		ibv_dereg_mr(c->rx_mr);
	if (c->tx_mr)
		ibv_dereg_mr(c->tx_mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	/* keep what the caller still reads: gone, rejected, why */
	c->ech = NULL, c->id = NULL, c->pd = NULL, c->cq = NULL;
	c->rx_mr = c->tx_mr = NULL, c->pool_mr = NULL, c->established = false;
}

/* What the connection is, as we see it (docs/wire.md 4.4): our nonce and
 * the prefill's from the accept, the QP numbers of the CM's REQ and REP,
 * the GIDs of the route (sgid ours). */
static void bind_id(struct conn *c, const struct kw_cm *accept, uint32_t peer_qpn)
{
	const struct rdma_ib_addr *ib = &c->id->route.addr.addr.ibaddr;

	memcpy(c->who.decode_nonce, c->req + KVF_WIRE_CM_NONCE_OFF, KVF_WIRE_NONCE_LEN);
	memcpy(c->who.prefill_nonce, accept->nonce, KVF_WIRE_NONCE_LEN);
	c->who.decode_qpn = c->id->qp->qp_num;
	c->who.prefill_qpn = peer_qpn;
	memcpy(c->who.decode_gid, ib->sgid.raw, KVF_WIRE_GID_LEN);
	memcpy(c->who.prefill_gid, ib->dgid.raw, KVF_WIRE_GID_LEN);
}

/* Connect with our private data: the version per mode, a fresh nonce, or
 * replay's bytes of an earlier connect as they are. 0 when established
 * (the token not proved yet: conn_auth), 1 when rejected (c->why says
 * why), <0 on other errors. */
static int conn_open(struct peer *p, struct conn *c, uint16_t version, const uint8_t *replay)
{
	struct sockaddr_storage dst, src;
	struct kw_cm h = {.version = version, .frame_max = FRAME};
	struct rdma_conn_param cp = {.private_data = c->req, .private_data_len = sizeof(c->req),
				     .responder_resources = 1, .initiator_depth = 1,
				     .retry_count = 7, .rnr_retry_count = 7};
	struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 64, .max_recv_wr = RX_N,
					      .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = IBV_QPT_RC};
	struct rdma_cm_event *ev;
	int e;

	memset(c, 0, sizeof(*c));
	c->refusal = -1;
	if (get_addr(p->o.server, true, &dst) || (p->o.bind && get_addr(p->o.bind, false, &src)))
		return -EINVAL;
	c->ech = rdma_create_event_channel();
	if (!c->ech || rdma_create_id(c->ech, &c->id, NULL, RDMA_PS_TCP))
		return -errno;
	fcntl(c->ech->fd, F_SETFL, fcntl(c->ech->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_resolve_addr(c->id, p->o.bind ? (struct sockaddr *)&src : NULL,
			      (struct sockaddr *)&dst, 5000)) {
		printf("fake_peer: rdma_resolve_addr: %s\n", strerror(errno));
		return -errno;
	}
	if (expect_cm(p, c, RDMA_CM_EVENT_ADDR_RESOLVED, 10))
		return -EHOSTUNREACH;
	if (rdma_resolve_route(c->id, 5000) || expect_cm(p, c, RDMA_CM_EVENT_ROUTE_RESOLVED, 10))
		return -EHOSTUNREACH;
	printf("fake_peer: route to %s via %s\n", p->o.server, ibv_get_device_name(c->id->verbs->device));
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, CQ_N, NULL, NULL, 0) : NULL;
	if (!c->cq)
		return -ENOMEM;
	qa.send_cq = qa.recv_cq = c->cq;
	if (rdma_create_qp(c->id, c->pd, &qa)) {
		printf("fake_peer: rdma_create_qp: %s\n", strerror(errno));
		return -errno;
	}
	c->rx_mr = ibv_reg_mr(c->pd, p->rx, (size_t)RX_N * FRAME, IBV_ACCESS_LOCAL_WRITE);
	c->tx_mr = ibv_reg_mr(c->pd, p->tx, (size_t)TX_N * FRAME, 0);
	c->pool_mr = calloc(p->o.nbufs, sizeof(*c->pool_mr));
	if (!c->rx_mr || !c->tx_mr || !c->pool_mr)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->o.nbufs; k++) {
		c->pool_mr[k] = ibv_reg_mr(c->pd, p->bufs[k], (size_t)p->o.pool_blocks * p->o.block_size,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!c->pool_mr[k])
			return -errno;
	}
	for (uint32_t s = 0; s < RX_N; s++)
		if (post_recv(p, c, s))
			return -EIO;
	if (RAND_bytes(h.nonce, sizeof(h.nonce)) != 1)
		return -EIO;
	snprintf(h.engine_id, sizeof(h.engine_id), "fake-peer");
	kw_encode_cm(c->req, &h);
	if (replay)
		memcpy(c->req, replay, sizeof(c->req));
	if (rdma_connect(c->id, &cp)) {
		printf("fake_peer: rdma_connect: %s\n", strerror(errno));
		return -errno;
	}
	e = wait_cm(p, c, 15, &ev);
	if (e < 0) {
		printf("fake_peer: no answer to the connect within 15 s\n");
		return -ETIMEDOUT;
	}
	if (e == RDMA_CM_EVENT_REJECTED) {
		char text[96];

		kw_decode_rej(ev->param.conn.private_data, ev->param.conn.private_data_len,
			      text, sizeof(text));
		snprintf(c->why, sizeof(c->why), "%s", text);
		printf("fake_peer: REJECTED by the prefill: %s (status %d, %u bytes of private data)\n",
		       text, ev->status, ev->param.conn.private_data_len);
		rdma_ack_cm_event(ev);
		c->rejected = true;
		return 1;
	}
	if (e != RDMA_CM_EVENT_ESTABLISHED) {
		printf("fake_peer: connect: %s (status %d)\n", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -ECONNREFUSED;
	}
	{
		struct kw_cm ph;
		char why[128];

		if (kw_decode_cm(ev->param.conn.private_data, ev->param.conn.private_data_len,
				 &ph, why, sizeof(why))) {
			printf("fake_peer: ESTABLISHED, but the accept data is bad: %s\n", why);
			rdma_ack_cm_event(ev);
			return -EPROTO;
		}
		printf("fake_peer: ESTABLISHED with %s (protocol %u, frames up to %u bytes, qp 0x%x, "
		       "its qp 0x%x)\n", ph.engine_id, ph.version, ph.frame_max, c->id->qp->qp_num,
		       ev->param.conn.qp_num);
		bind_id(c, &ph, ev->param.conn.qp_num);
	}
	rdma_ack_cm_event(ev);
	c->established = true;
	c->est_t = c->last_hb = kvt_mono();
	return 0;
}

/* ------------------------------------------------------------ the token */

/* The next thing the prefill sends: a frame (1, copied to out), a write's
 * immediate (2), the connection gone (0), or -ETIMEDOUT after secs. */
static int next_recv(struct peer *p, struct conn *c, double secs, uint8_t *out, uint32_t *len)
{
	double end = kvt_mono() + secs;
	struct rdma_cm_event *ev;
	struct ibv_wc wc;

	while (kvt_mono() < end) {
		if (!rdma_get_cm_event(c->ech, &ev)) {
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
				c->gone = c->disc = true;
				c->gone_t = kvt_mono();
			}
			rdma_ack_cm_event(ev);
		}
		if (ibv_poll_cq(c->cq, 1, &wc) == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				c->gone = true;
				continue;
			}
			if (wc.wr_id & (1u << 31))
				continue; /* our sends */
			*len = wc.byte_len;
			if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
				memcpy(out, p->rx + (size_t)wc.wr_id * FRAME, wc.byte_len);
			post_recv(p, c, (uint32_t)wc.wr_id);
			return wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? 2 : 1;
		}
		if (c->disc)
			return 0;
		usleep(200);
	}
	return -ETIMEDOUT;
}

static int send_raw(struct peer *p, struct conn *c, const uint8_t *frame, size_t len)
{
	uint32_t slot;

	memcpy(tx_slot(p, c, &slot), frame, len);
	return post_send(p, c, slot, (uint32_t)len);
}

/* Our proof under token, kept as sent (replay sends it again). */
static int send_proof(struct peer *p, struct conn *c, const char *token)
{
	char dg[INET6_ADDRSTRLEN] = "?", pg[INET6_ADDRSTRLEN] = "?";

	if (!kw_encode_auth(c->proof, sizeof(c->proof), KVF_WIRE_ROLE_RECEIVER, KVF_WIRE_AUTH_PROOF,
			    &c->who, token))
		return -EIO;
	inet_ntop(AF_INET6, c->who.decode_gid, dg, sizeof(dg));
	inet_ntop(AF_INET6, c->who.prefill_gid, pg, sizeof(pg));
	printf("fake_peer: AUTH proof sent (decode qp 0x%x gid %s, prefill qp 0x%x gid %s)\n",
	       c->who.decode_qpn, dg, c->who.prefill_qpn, pg);
	return send_raw(p, c, c->proof, sizeof(c->proof));
}

/* The prefill's answer to our proof: its own proof, which must hold for
 * this connection under token (0), or its refusal (1: c->refusal, c->why).
 * Anything else before it is counted as a leak: a prefill must send
 * nothing else to a peer that has not proved itself. */
static int await_answer(struct peer *p, struct conn *c, const char *token, double secs)
{
	uint8_t b[FRAME];
	uint32_t len;
	struct kw_frame f;
	char why[200];

	for (;;) {
		int r = next_recv(p, c, secs, b, &len);

		if (r <= 0) {
			snprintf(c->why, sizeof(c->why), "%s before the prefill answered our proof",
				 r ? "timed out" : "disconnected");
			return r ? r : -ECONNRESET;
		}
		if (r == 2 || kw_decode(b, len, &f, why, sizeof(why)) || f.type != KVF_WIRE_FR_AUTH) {
			c->leaks++;
			printf("fake_peer: LEAK: the prefill sent %s before its proof\n",
			       r == 2 ? "a write" : kw_frame_name(b[6]));
			continue;
		}
		if (f.status != KVF_WIRE_AUTH_PROOF) {
			static const uint8_t zero[KVF_WIRE_AUTH_MAC_SIZE];

			c->refusal = f.status;
			c->refused_t = kvt_mono();
			snprintf(c->why, sizeof(c->why), "%s", kw_auth_name(f.status) ?
				 kw_auth_name(f.status) : "unknown refusal");
			if (memcmp(f.mac, zero, sizeof(zero)))
				c->leaks++, printf("fake_peer: LEAK: a MAC in the prefill's refusal\n");
			printf("fake_peer: REFUSED by the prefill: %s (%.2f s after ESTABLISHED)\n",
			       c->why, kvt_mono() - c->est_t);
			return 1;
		}
		if (!kw_auth_holds(b, KVF_WIRE_ROLE_SENDER, &c->who, token)) {
			snprintf(c->why, sizeof(c->why), "the prefill's proof does not hold");
			return -EACCES;
		}
		printf("fake_peer: AUTH the prefill's proof holds\n");
		return 0;
	}
}

/* After a refusal: the prefill disconnects, and sends nothing else. */
static void await_gone(struct peer *p, struct conn *c, double secs)
{
	uint8_t b[FRAME];
	uint32_t len;
	int r;

	while ((r = next_recv(p, c, secs, b, &len)) > 0) {
		c->leaks++;
		printf("fake_peer: LEAK: %s after the refusal\n", r == 2 ? "a write" :
		       kw_frame_name(b[6]));
	}
	if (c->disc)
		printf("fake_peer: disconnected by the prefill %.2f s after ESTABLISHED\n",
		       c->gone_t - c->est_t);
}

/* Connected and the token proved both ways. 0, 1 (rejected or refused:
 * c->why), <0. */
static int conn_up(struct peer *p, struct conn *c, const char *token)
{
	int rc = conn_open(p, c, KVF_WIRE_VERSION, NULL);

	if (!rc)
		rc = send_proof(p, c, token) ? -EIO : await_answer(p, c, token, 15);
	return rc;
}

/* Poll completions and cm events until every room in [lo, hi) is no longer
 * R_ASKED, or the connection goes, or secs pass (want_gone: wait for the
 * connection to go instead). Returns 0, or -ETIMEDOUT. */
static int run_loop(struct peer *p, struct conn *c, uint32_t lo, uint32_t hi, bool want_gone,
		    double secs)
{
	double end = kvt_mono() + secs;
	struct ibv_wc wc[32];

	while (kvt_mono() < end) {
		struct rdma_cm_event *ev;
		bool pending = false;
		int n;

		for (uint32_t i = lo; i < hi; i++)
			pending |= p->rstate[i] == R_ASKED;
		if (!want_gone && !pending)
			return 0;
		/* waiting for the connection to go: for the prefill's disconnect
		 * (our own QP's flush comes first, and closing on it would race
		 * the prefill's error completion) */
		if (want_gone ? c->disc : c->gone)
			return want_gone ? 0 : -ECONNRESET;
		if (!rdma_get_cm_event(c->ech, &ev)) {
			printf("fake_peer: cm event %s (status %d)\n", rdma_event_str(ev->event), ev->status);
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
			    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
				c->gone = c->disc = true;
				snprintf(c->why, sizeof(c->why), "%s", rdma_event_str(ev->event));
			}
			rdma_ack_cm_event(ev);
		}
		n = ibv_poll_cq(c->cq, 32, wc);
		for (int k = 0; k < n; k++) {
			bool recv = !(wc[k].wr_id & (1u << 31));

			if (wc[k].status != IBV_WC_SUCCESS) {
				if (!c->gone)
					printf("fake_peer: %s completion with %s (vendor_err 0x%x)\n",
					       recv ? "receive" : "send", ibv_wc_status_str(wc[k].status),
					       wc[k].vendor_err);
				if (!c->gone)
					snprintf(c->why, sizeof(c->why), "%s", ibv_wc_status_str(wc[k].status));
				c->gone = true;
				continue;
			}
			if (!recv) {
				p->sends_done++;
				continue;
			}
			if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
				uint32_t i = kw_imm_slot(ntohl(wc[k].imm_data));

				if (i < p->o.rooms && p->rstate[i] == R_ASKED)
					check_room(p, i);
				else
					printf("fake_peer: write-with-immediate for room slot %u, not asked\n", i);
			} else {
				struct kw_frame f;
				char why[200];
				const uint8_t *b = p->rx + (size_t)wc[k].wr_id * FRAME;

				if (kw_decode(b, wc[k].byte_len, &f, why, sizeof(why))) {
					printf("fake_peer: bad frame from the prefill: %s\n", why);
				} else if (f.type == KVF_WIRE_FR_HELLO) {
					p->got_hello = true;
					printf("fake_peer: HELLO from %s: %u regions, %u buffers\n",
					       f.engine_id, f.nregions, f.nbufs);
				} else if (f.type == KVF_WIRE_FR_ABORT) {
					uint32_t i = (uint32_t)(f.room_id - p->o.first_id);

					p->aborts++;
					printf("fake_peer: ABORT for room %u id=%#" PRIx64 " (to role %u, reason %u)\n",
					       i, f.room_id, f.to_role, f.reason);
					if (i < p->o.rooms && p->rstate[i] == R_ASKED)
						p->rstate[i] = R_ABORTED;
				} else if (f.type == KVF_WIRE_FR_ABORT_ACK) {
					p->acks++;
					printf("fake_peer: ABORT_ACK for id=%#" PRIx64 "\n", f.room_id);
				} else if (f.type != KVF_WIRE_FR_HEARTBEAT) {
					printf("fake_peer: %s for %#" PRIx64 "\n", kw_frame_name(f.type),
					       f.room_id);
				}
			}
			if (!c->gone)
				post_recv(p, c, (uint32_t)wc[k].wr_id);
		}
		if (!c->gone && p->o.hb_ms && kvt_mono() - c->last_hb > p->o.hb_ms / 1000.0)
			send_heartbeat(p, c);
		if (!n)
			usleep(200);
	}
	return -ETIMEDOUT;
}

/* Keep the connection up a moment (completions, heartbeats) before we
 * close it, as a real decode engine would: the prefill then sees its last
 * writes complete before our disconnect. */
static void linger(struct peer *p, struct conn *c, double secs)
{
	if (!c->gone)
		run_loop(p, c, 0, 0, true, secs);
}

/* Ask rooms [lo, hi) on c (the bad one per kind), then wait for them. */
static int ask(struct peer *p, struct conn *c, uint32_t lo, uint32_t hi, int bad_kind)
{
	for (uint32_t i = lo; i < hi; i++)
		if (send_room_info(p, c, i, i == p->o.bad_room ? bad_kind : 0))
			return -EIO;
	return 0;
}

/* Rooms [lo, hi) on a new connection, right in every way. 0, or <0. */
static int rooms_on_new_conn(struct peer *p, uint32_t lo, uint32_t hi)
{
	struct conn c;
	int rc = conn_up(p, &c, p->o.token);

	if (rc) {
		printf("fake_peer: the right connection: %s\n", rc == 1 ? c.why : strerror(-rc));
		conn_close(p, &c);
		return rc == 1 ? -EACCES : rc;
	}
	send_hello(p, &c, false, false, false);
	ask(p, &c, lo, hi, 0);
	rc = run_loop(p, &c, lo, hi, false, p->o.timeout_s);
	linger(p, &c, 1.5);
	conn_close(p, &c);
	return rc;
}

/* One connection that does not prove the token (per mode): refused with
 * the reason the mode expects, and nothing but that refusal from the
 * prefill before it disconnects. */
static int refused_conn(struct peer *p, const uint8_t *req, const uint8_t *proof, int want,
			double *took)
{
	const struct opts *o = &p->o;
	struct conn c;
	int rc = conn_open(p, &c, KVF_WIRE_VERSION, req);

	if (rc)
		return printf("fake_peer: the connection was not made: %s\n",
			      rc == 1 ? c.why : strerror(-rc)), -ENOTCONN;
	if (o->mode == M_BAD_TOKEN)
		rc = send_proof(p, &c, "not-the-token");
	else if (o->mode == M_REPLAY)
		rc = send_raw(p, &c, proof, KVF_WIRE_AUTH_LEN);
	else if (o->mode == M_EARLY)
		rc = send_hello(p, &c, false, false, false);
	rc = rc ? -EIO : await_answer(p, &c, o->token, o->auth_ms / 1000.0 + 10);
	if (rc == 1)
		await_gone(p, &c, 5);
	conn_close(p, &c);
	*took = c.refusal >= 0 ? c.refused_t - c.est_t : -1;
	if (rc != 1)
		return printf("fake_peer: no refusal: %s\n", rc ? c.why : "the prefill's proof came"),
		       -EPROTO;
	if (c.refusal != want || c.leaks || !c.disc)
		return printf("fake_peer: refused (%s, want %s), %u leaks, %s\n", c.why,
			      kw_auth_name((unsigned)want), c.leaks,
			      c.disc ? "disconnected" : "NOT disconnected"), -EPROTO;
	return 0;
}

/* bad-token, replay, silent, early: docs/wire.md 4.4 from the wrong side. */
static int auth_mode(struct peer *p)
{
	const struct opts *o = &p->o;
	int want = o->mode == M_BAD_TOKEN ? KVF_WIRE_AUTH_BAD_TOKEN :
		   o->mode == M_REPLAY ? KVF_WIRE_AUTH_REPLAY :
		   o->mode == M_SILENT ? KVF_WIRE_AUTH_TIMEOUT : KVF_WIRE_AUTH_EARLY;
	uint8_t req[KVF_WIRE_CM_LEN], proof[KVF_WIRE_AUTH_LEN];
	double took, bound = o->auth_ms / 1000.0 + 1.5;
	struct conn c;
	int rc;

	if (o->mode == M_REPLAY) {
		/* A right connection, every room on it, seen by a sniffer. */
		rc = conn_up(p, &c, o->token);
		if (rc)
			return result(false, "connection 1: %s", rc == 1 ? c.why : strerror(-rc));
		memcpy(req, c.req, sizeof(req));
		memcpy(proof, c.proof, sizeof(proof));
		send_hello(p, &c, false, false, false);
		ask(p, &c, 0, o->rooms, 0);
		run_loop(p, &c, 0, o->rooms, false, o->timeout_s);
		linger(p, &c, 1.5);
		conn_close(p, &c);
		printf("fake_peer: connection 1: %u rooms checked; replaying its connect data and "
		       "proof on connection 2\n", p->ok);
	}
	if (refused_conn(p, o->mode == M_REPLAY ? req : NULL, proof, want, &took))
		return result(false, "%s: not refused as %s, or the prefill sent more than its "
			      "refusal", mode_names[o->mode], kw_auth_name((unsigned)want));
	if (o->mode == M_SILENT && (took > bound || took < o->auth_ms / 1000.0 - 0.2))
		return result(false, "refused %.2f s after ESTABLISHED, want %.1f to %.1f s", took,
			      o->auth_ms / 1000.0 - 0.2, bound);
	if (o->mode == M_SILENT || o->mode == M_EARLY)
		rooms_on_new_conn(p, 0, o->rooms);
	if (o->mode != M_BAD_TOKEN && (p->ok != o->rooms || p->bad_words))
		return result(false, "%u of %u rooms checked on the right connection, %u bad words",
			      p->ok, o->rooms, p->bad_words);
	return result(true, "refused as expected: %s, %.2f s after ESTABLISHED; nothing but the "
		      "refusal from the prefill, then its disconnect%s", kw_auth_name((unsigned)want), took,
		      o->mode == M_BAD_TOKEN ? "" : "; every room on the right connection");
}

/* tombstone: ABORT every room id before the prefill has its room, each
 * acknowledged at once (nothing of it is posted there); then stay up. */
static int tombstone_mode(struct peer *p, struct conn *c)
{
	const struct opts *o = &p->o;
	uint32_t slot;

	for (uint32_t i = 0; i < o->rooms; i++) {
		size_t len = kw_encode_abort(tx_slot(p, c, &slot), FRAME, o->first_id + i,
					     KVF_WIRE_ROLE_SENDER, KVF_WIRE_REASON_LOCAL_ABORT);

		if (!len || post_send(p, c, slot, (uint32_t)len))
			return result(false, "ABORT for room %u could not be sent", i);
		printf("fake_peer: ABORT sent for id=%#" PRIx64 " t=%.6f\n", o->first_id + i,
		       kvt_mono());
	}
	for (double end = kvt_mono() + o->timeout_s; p->acks < o->rooms && kvt_mono() < end && !c->gone;)
		run_loop(p, c, 0, 0, true, 0.2);
	printf("fake_peer: tombstones acknowledged %u of %u t=%.6f\n", p->acks, o->rooms, kvt_mono());
	linger(p, c, o->wait_s);
	conn_close(p, c);
	if (p->acks != o->rooms)
		return result(false, "%u of %u ABORTs acknowledged", p->acks, o->rooms);
	return result(true, "%u room ids aborted before their rooms, each acknowledged", o->rooms);
}

/* flood: HEARTBEATs back to back for --wait s, 48 in flight (the QP has
 * 64 send entries), the connection kept; legal frames, so the prefill
 * must neither drop us nor let the others' frames wait for long. */
static int flood_mode(struct peer *p, struct conn *c)
{
	const struct opts *o = &p->o;
	double t0 = kvt_mono(), end = t0 + o->wait_s;
	uint64_t posted = 0;
	uint32_t slot;

	while (kvt_mono() < end && !c->gone) {
		while (posted - p->sends_done < 48) {
			size_t len = kw_encode_heartbeat(tx_slot(p, c, &slot), FRAME);

			if (!len || post_send(p, c, slot, (uint32_t)len))
				break;
			posted++;
		}
		run_loop(p, c, 0, 0, true, 0.0002);
	}
	printf("fake_peer: flood %" PRIu64 " HEARTBEATs in %.1f s (%.0f/s) t=%.6f\n", posted,
	       kvt_mono() - t0, posted / (kvt_mono() - t0), kvt_mono());
	if (c->gone)
		return result(false, "the prefill dropped the flooding connection: %s", c->why);
	linger(p, c, 0.5);
	conn_close(p, c);
	return result(true, "%" PRIu64 " HEARTBEATs sent, the connection kept", posted);
}

int main(int argc, char **argv)
{
	struct peer p = {0};
	struct conn c;
	struct opts *o = &p.o;
	uint32_t b;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse(argc, argv, o);
	b = o->bad_room;
	p.bufs = calloc(o->nbufs, sizeof(*p.bufs));
	p.rstate = calloc(o->rooms, 1);
	p.rx = aligned_alloc(4096, (size_t)RX_N * FRAME);
	p.tx = aligned_alloc(4096, (size_t)TX_N * FRAME);
	if (!p.bufs || !p.rstate || !p.rx || !p.tx)
		return 2;
	for (uint32_t k = 0; k < o->nbufs; k++)
		if (posix_memalign((void **)&p.bufs[k], 4096, (size_t)o->pool_blocks * o->block_size))
			return 2;
	printf("fake_peer: mode %s, server %s%s%s, %u rooms of %u buffers x %u blocks of %" PRIu64 " B\n",
	       mode_names[o->mode], o->server, o->bind ? ", from " : "", o->bind ? o->bind : "",
	       o->rooms, o->nbufs, o->bpr, o->block_size);

	if (o->mode == M_BAD_VERSION) {
		rc = conn_open(&p, &c, KVF_WIRE_VERSION + 1, NULL);
		conn_close(&p, &c);
		if (rc != 1)
			return result(false, "the connection was %s, expected a reject",
				      rc == 0 ? "accepted" : "not made");
		return result(true, "rejected as expected: %s", c.why);
	}
	if (o->mode == M_BAD_TOKEN || o->mode == M_REPLAY || o->mode == M_SILENT ||
	    o->mode == M_EARLY)
		return auth_mode(&p);

	/* connection 1 */
	rc = conn_up(&p, &c, o->token);
	if (rc)
		return result(false, "connection 1: %s", rc == 1 ? c.why : strerror(-rc));
	rc = send_hello(&p, &c, o->mode == M_BAD_RKEY, o->mode == M_MR_OVERRUN,
			o->mode == M_BAD_LAYOUT);
	if (rc)
		return result(false, "HELLO: %s", strerror(rc < 0 ? -rc : rc));

	if (o->mode == M_TOMBSTONE)
		return tombstone_mode(&p, &c);
	if (o->mode == M_FLOOD)
		return flood_mode(&p, &c);
	switch (o->mode) {
	case M_GOOD:
	case M_CLOSE_FAST:
	case M_BIG_POOL:
	case M_BAD_BLOCK:
	case M_TRUNCATED:
		ask(&p, &c, 0, o->rooms, o->mode == M_BAD_BLOCK ? 1 : o->mode == M_TRUNCATED ? 2 : 0);
		rc = run_loop(&p, &c, 0, o->rooms, false, o->timeout_s);
		if (o->mode != M_GOOD && o->mode != M_BIG_POOL && o->mode != M_CLOSE_FAST) {
			/* the bad room never gets data; see whether the prefill
			 * tells us (ABORT) within --wait */
			if (p.rstate[b] == R_ASKED)
				run_loop(&p, &c, b, b + 1, false, o->wait_s);
			printf("fake_peer: bad room %u: %s\n", b,
			       p.rstate[b] == R_ABORTED ? "the prefill sent ABORT for it"
			       : p.rstate[b] == R_ASKED ? "no data and no ABORT from the prefill"
							: "DATA LANDED for it");
		}
		if (o->mode != M_CLOSE_FAST)
			linger(&p, &c, 1.5);
		else
			printf("fake_peer: closing at once after the last room's data\n");
		conn_close(&p, &c);
		if (o->mode == M_GOOD || o->mode == M_BIG_POOL || o->mode == M_CLOSE_FAST)
			return p.ok == o->rooms && !p.bad_words
				       ? result(true, "%u rooms, every byte checked", p.ok)
				       : result(false, "%u of %u rooms checked, %u bad words%s", p.ok,
						o->rooms, p.bad_words, rc ? " (timed out or lost)" : "");
		if (p.ok != o->rooms - 1 || p.bad_words || p.rstate[b] == R_DONE || p.rstate[b] == R_BAD)
			return result(false, "%u of %u good rooms checked, %u bad words, bad room %s",
				      p.ok, o->rooms - 1, p.bad_words,
				      p.rstate[b] == R_DONE || p.rstate[b] == R_BAD ? "got data" : "no data");
		return result(true, "%u good rooms checked, bad room %u got no data", p.ok, b);

	case M_BAD_RKEY:
	case M_BAD_LAYOUT:
		b = 0; /* room 0 on connection 1 */
		ask(&p, &c, 0, 1, 0);
		if (o->mode == M_BAD_RKEY) {
			run_loop(&p, &c, 0, 1, true, o->timeout_s);
			printf("fake_peer: connection 1 %s\n", c.disc ? "closed by the prefill, as expected"
								       : "NOT CLOSED by the prefill after the bad write");
			if (!c.disc) {
				conn_close(&p, &c);
				return result(false, "connection 1 survived a write with a wrong rkey");
			}
		} else {
			run_loop(&p, &c, 0, 1, false, o->wait_s);
			printf("fake_peer: room 0 after %.0f s: %s\n", o->wait_s,
			       p.rstate[0] == R_ABORTED ? "ABORT from the prefill"
			       : p.rstate[0] == R_ASKED ? "no data and no ABORT from the prefill"
							: "DATA LANDED");
		}
		conn_close(&p, &c);
		break;

	case M_MR_OVERRUN:
	case M_SHORT:
		/* good rooms before the bad one on connection 1 */
		ask(&p, &c, 0, b, 0);
		rc = run_loop(&p, &c, 0, b, false, o->timeout_s);
		if (rc) {
			conn_close(&p, &c);
			return result(false, "rooms 0..%u on connection 1: %s", b - 1, strerror(-rc));
		}
		/* Their data landed here, but the prefill's rooms end only when
		 * their writes' ACKs come back; the bad frame tears the
		 * connection down, so give those ACKs time (a loaded guest
		 * took over 50 ms) or a good room fails as peer lost. */
		linger(&p, &c, 2.0);
		send_room_info(&p, &c, b, o->mode == M_MR_OVERRUN ? 4 : 3);
		run_loop(&p, &c, b, b + 1, true, o->timeout_s);
		printf("fake_peer: connection 1 %s\n", c.disc ? "closed by the prefill, as expected"
							       : "NOT CLOSED by the prefill after the bad room");
		conn_close(&p, &c);
		if (!c.disc && o->mode == M_MR_OVERRUN)
			return result(false, "connection 1 survived a remote access error");
		if (o->mode == M_SHORT)
			p.rstate[b] = R_NONE, b = b - 1; /* room b is asked again below */
		break;
	default:
		break;
	}

	/* connection 2: the rooms after b, all good */
	if (b + 1 < o->rooms) {
		rc = conn_up(&p, &c, o->token);
		if (rc)
			return result(false, "connection 2: %s", rc == 1 ? c.why : strerror(-rc));
		send_hello(&p, &c, false, false, false);
		ask(&p, &c, b + 1, o->rooms, 0);
		rc = run_loop(&p, &c, b + 1, o->rooms, false, o->timeout_s);
		linger(&p, &c, 1.5);
		conn_close(&p, &c);
	}
	{
		uint32_t want = o->rooms - (o->mode == M_SHORT ? 0 : 1);

		if (p.ok != want || p.bad_words)
			return result(false, "%u of %u rooms checked, %u bad words", p.ok, want, p.bad_words);
		return result(true, "%u rooms checked on the second connection%s", p.ok,
			      o->mode == M_SHORT ? " and before the bad frame" : "");
	}
}
