/* SPDX-License-Identifier: Apache-2.0 */
/* The transport ops (transport.h), on the scheduler thread: a room's
 * ROOM_INFO, ABORT and ABORT_ACK queued as the connection's control frames
 * (ctrl.c), its writes handed to the connection's send queue (sendq.h),
 * completions giving credits and buffers back, connecting to a peer on first
 * use, and the walk of every connection. Heartbeats are not the scheduler's: the poller sends
 * them (keepalive.h), so a scheduler away from kvf_progress() is not a
 * peer lost. */
#include "rdma/rdma_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "base/clock.h"
#include "rdma/conn.h"
#include "rdma/ctrl.h"
#include "rdma/geom_map.h"
#include "base/log.h"
#include "rdma/pool.h"
#include "transfer/proto.h"
#include "rdma/rails.h"
#include "rdma/sched.h"
#include "transfer/sendq.h"
#include "rdma/stage.h"

#define PROGRESS_EVERY_NS 50000ull

/* ====================================================== region shapes */

/* The peer's region of id, or NULL. */
static const struct kvf_hello_region *peer_region(const struct kvf_peer_pool *pp, uint32_t id,
						   uint32_t *idx)
{
	for (uint32_t i = 0; i < pp->nregions; i++) {
		if (pp->regions[i].id == id) {
			*idx = i;
			return &pp->regions[i];
		}
	}
	return NULL;
}

/* ============================================================= writes */

/* One part of a chunk against both sides' regions: the peer's of the same
 * name, its buffers paired with ours (geom_map.c), every item inside.
 * Fills *sp. */
static int check_part(struct kvf_rdma *t, struct kvf_conn *c, const struct kvf_peer_pool *pp,
		      const struct kvf_xfer_part *x, struct kvf_sq_part *sp)
{
	const struct kvf_pool *p = x->region < KVF_MAX_REGIONS ? t->regions[x->region] : NULL;
	const struct kvf_hello_region *r;
	const struct kvf_geom_map *m;
	char why[200];
	uint32_t idx;

	r = pp ? peer_region(pp, x->peer_region, &idx) : NULL;
	if (!p || !r || strcmp(p->name, r->name) != 0) {
		kvf_err("rdma", "connection %u: writes for region %u to the peer's %u: %s", c->id,
			x->region, x->peer_region, !pp ? "no HELLO from the peer yet" :
			!p ? "no such region here" : !r ? "no such region at the peer" :
			"their names differ");
		return -EPROTO;
	}
	if (kvf_geom_map_get(c, p, pp, idx, &m, why, sizeof(why))) {
		kvf_err("rdma", "connection %u: %s", c->id, why);
		return -EPROTO;
	}
	for (uint32_t i = 0; i < x->n; i++)
		if (x->src[i] >= p->nblocks || x->dst[i] >= r->nitems)
			return -ERANGE;
	*sp = (struct kvf_sq_part){.local = p->wr_bufs, .remote = m->remote, .slices = m->slices,
				   .nbufs = p->nbufs, .n = x->n, .src = x->src, .dst = x->dst};
	return 0;
}

/* ================================================================ ops */

/* -ECONNREFUSED, and why in the room's words, when peer is in connect
 * backoff (backoff.h); 0 when a connection may start. */
static int check_backoff(struct kvf_rdma *t, const char *peer, const struct kvf_info_out *info)
{
	uint64_t now = kvf_monotonic_ns();
	const struct kvf_backoff_peer *b = kvf_backoff_check(&t->backoff, peer, now);

	if (!b)
		return 0;
	t->st_backoffs++;
	if (info->why)
		snprintf(info->why, info->whylen, "not connecting to %s for %" PRIu64 " ms more "
			 "(rdma.reconnect_backoff_ms): %u attempt%s in a row failed, the last: %s",
			 peer, (b->retry_ns - now + 999999) / 1000000, b->fails,
			 b->fails == 1 ? "" : "s", b->why);
	return -ECONNREFUSED;
}

enum kvf_rail_peer kvf_rdma_rail_peer(void *tp, const char *peer)
{
	struct kvf_rdma *t = tp;
	struct kvf_conn *c = kvf_sched_find_peer(t, peer);
	/* A port that came back is doubted like a peer whose connects failed
	 * until a connection is up on it again. */
	uint32_t fails = kvf_backoff_fails(&t->backoff, peer) + atomic_load(&t->recovering);

	if (c && atomic_load(&c->state) >= KVF_CONN_DEAD)
		c = NULL; /* gone, not yet retired */
	if (atomic_load(&t->dev_dead) || atomic_load(&t->port_down) ||
	    (!c && kvf_backoff_check(&t->backoff, peer, kvf_monotonic_ns())))
		return KVF_RAIL_PEER_REFUSED;
	if (c)
		return atomic_load(&c->state) == KVF_CONN_ESTABLISHED ? KVF_RAIL_PEER_UP :
		       fails ? KVF_RAIL_PEER_RETRYING : KVF_RAIL_PEER_FIRST;
	return fails ? KVF_RAIL_PEER_PROBE : KVF_RAIL_PEER_NEW;
}

/* The peer connection to peer: the live one, or a new QP group. *out is
 * the lead (the scheduler's own reference keeps it). */
static int get_or_connect(struct kvf_rdma *t, const char *peer, const struct kvf_info_out *info,
			  struct kvf_conn **out)
{
	int rc;

	*out = kvf_sched_find_peer(t, peer);
	if (*out)
		return 0;
	if (atomic_load(&t->dev_dead))
		return -ENODEV;
	/* A connection the poller found dead since the last progress counts
	 * for the backoff before another starts (retire, sched.c). */
	kvf_sched_collect(t);
	rc = check_backoff(t, peer, info);
	if (rc)
		return rc;
	t->st_connects++;
	rc = kvf_qp_group_connect(t, peer, out);
	if (rc)
		return rc;
	kvf_sched_add_peer(t, *out);
	kvf_conn_put(*out); /* the caller's: the scheduler holds its own */
	return 0;
}

/* Whether the peer on c knows every region of the info: each was
 * registered before c's HELLO went (a HELLO not sent yet will carry them). */
static bool regions_known(const struct kvf_rdma *t, const struct kvf_conn *c,
			  const struct kvf_info_out *info)
{
	for (uint32_t k = 0; k < info->nlists && c->hello_sent; k++) {
		const struct kvf_pool *p = t->regions[info->lists[k].region];

		if (!p || p->seq > c->hello_seq) {
			kvf_err("rdma", "room %#" PRIx64 ": region %u was registered after the HELLO of "
				"connection %u (%s): that peer does not know it", info->room_id,
				info->lists[k].region, c->id, c->peer);
			return false;
		}
	}
	return true;
}

/* The info, encoded now (proto.h), goes as one ROOM_INFO sequence split at
 * post time to the peer's frame size. */
static int op_send_room_info(void *tp, const char *peer, const struct kvf_info_out *info,
			     uint32_t *conn)
{
	struct kvf_proto_list pl[KVF_MAX_REGIONS];
	char first[KVF_PEER_ADDR_MAX];
	struct kvf_rdma *t = tp;
	struct kvf_pframe *f;
	struct kvf_conn *c, *q;
	size_t len;
	int rc;

	if (!peer || !*peer)
		peer = t->cfg.peer;
	/* A peer's rail list ("h:p,h:p"): one device speaks to the first. */
	if (strchr(peer, ',') && kvf_peer_split(peer, &first, 1) == 1)
		peer = first;
	if (!*peer || !strrchr(peer, ':') || !conn || !info ||
	    info->nlists > KVF_MAX_REGIONS)
		return -EINVAL;
	if (atomic_load(&t->port_down))
		return -ENETDOWN;
	for (uint32_t k = 0; k < info->nlists; k++)
		pl[k] = (struct kvf_proto_list){info->lists[k].region, info->lists[k].n,
						info->lists[k].items};
	len = kvf_proto_info_len(pl, info->nlists, info->user_len);
	if (len > kvf_proto_info_max(t->cfg.max_blocks_per_room))
		return -EINVAL;
	if (!kvf_staging_receiver_ok(t, info))
		return -ENOTSUP;
	f = kvf_ctrl_frame_alloc(0);
	if (f)
		f->info = malloc(len);
	if (!f || !f->info) {
		free(f);
		return -ENOMEM;
	}
	kvf_proto_encode_info(f->info, len, pl, info->nlists, info->user, info->user_len);
	f->total = (uint32_t)len;
	f->room_id = info->room_id;
	f->recv_handle = info->recv_handle;
	rc = get_or_connect(t, peer, info, &c);
	if (rc) {
		free(f->info);
		free(f);
		return rc;
	}
	/* One QP for everything of this room: its whole sequence here, and
	 * any later frame for it goes the same way (kvf_conn_pick). */
	q = kvf_conn_pick(c, info->room_id);
	if (!regions_known(t, q, info)) {
		free(f->info);
		free(f);
		return -ESTALE;
	}
	rc = kvf_ctrl_enqueue(q, f);
	*conn = c->id;
	return rc;
}

/* A room's writes all go on one QP of the peer connection, picked by its
 * wr_id (the same in post, cancel and every completion), so its final
 * WRITE_WITH_IMM follows all of them, every chunk's. On the prefill side,
 * where writes are posted, every connection is one QP: the one the room's
 * ROOM_INFO came on. */
static int op_post_chunk(void *tp, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
			 uint32_t nparts, const uint32_t *imm)
{
	struct kvf_sq_part sp[KVF_MAX_REGIONS];
	struct kvf_rdma *t = tp;
	struct kvf_conn *g = kvf_sched_get(t, conn), *c;
	const struct kvf_peer_pool *pp;
	int rc;

	if (!g)
		return -ENOTCONN;
	c = kvf_conn_pick(g, wr_id);
	if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED)
		return -ENOTCONN;
	if (nparts > KVF_MAX_REGIONS)
		return -EINVAL;
	/* Acquire pairs with the store-release of peer_pool in on_hello
	 * (poller.c). */
	pp = atomic_load_explicit(&c->peer_pool, memory_order_acquire);
	if (!pp)
		return -EPROTO;
	for (uint32_t i = 0; i < nparts; i++) {
		rc = check_part(t, c, pp, &parts[i], &sp[i]);
		if (rc)
			return rc;
	}
	/* The zero-length immediate of a chunk with nothing to copy goes to
	 * any buffer of the peer's: it writes no byte. */
	rc = kvf_staging_add(t, c, conn, wr_id, sp, parts, nparts, imm, &pp->bufs[0]);
	if (rc >= 0) {
		for (uint32_t i = 0; i < nparts; i++)
			for (uint32_t b = 0; b < sp[i].nbufs; b++)
				t->st_bytes += (uint64_t)sp[i].n * (sp[i].slices && sp[i].slices[b].tokens ?
					sp[i].slices[b].tokens * sp[i].slices[b].len :
					sp[i].local[b].block_size);
		kvf_ctrl_kick(c);
	}
	return rc;
}

static int op_cancel_writes(void *tp, uint32_t conn, uint64_t wr_id)
{
	struct kvf_conn *g = kvf_sched_get(tp, conn);

	return kvf_staging_cancel(tp, conn, wr_id,
				  g ? kvf_sendq_cancel(&kvf_conn_pick(g, wr_id)->sq, wr_id) : 0);
}

/* ABORT and ABORT_ACK go on the QP of the room's ROOM_INFO (picked by room
 * id, as send_room_info did): an ABORT from the decode side then follows
 * the room's whole ROOM_INFO sequence. Ordering after the room's writes is
 * not what the QP choice gives: the engine sends ABORT_ACK, and a sender's
 * ABORT, only once the room has no posted write left (room.c, send_owed),
 * so any QP would be safe for those; on the prefill side, which sends them,
 * every connection is one QP anyway. */
static int send_small(struct kvf_rdma *t, uint32_t conn, uint64_t room_id, struct kvf_pframe *f)
{
	struct kvf_conn *g = kvf_sched_get(t, conn), *c = g ? kvf_conn_pick(g, room_id) : NULL;

	if (!c || atomic_load(&c->state) >= KVF_CONN_DEAD) {
		free(f);
		return -ENOTCONN;
	}
	return kvf_ctrl_enqueue(c, f);
}

static int op_send_abort(void *tp, uint32_t conn, uint64_t room_id, uint8_t to_role,
			 uint16_t reason)
{
	struct kvf_pframe *f = kvf_ctrl_frame_alloc(KVF_PROTO_ABORT_LEN);

	if (!f)
		return -ENOMEM;
	kvf_proto_encode_abort(f->data, f->len, room_id, to_role, reason);
	return send_small(tp, conn, room_id, f);
}

static int op_send_abort_ack(void *tp, uint32_t conn, uint64_t room_id)
{
	struct kvf_pframe *f = kvf_ctrl_frame_alloc(KVF_PROTO_HDR_LEN);

	if (!f)
		return -ENOMEM;
	kvf_proto_encode_abort_ack(f->data, f->len, room_id);
	return send_small(tp, conn, room_id, f);
}

static void op_teardown(void *tp, uint32_t conn, const char *why)
{
	struct kvf_conn *c = kvf_sched_get(tp, conn);

	if (!c)
		return;
	kvf_info("rdma", "engine tears down connection %u (%s): %s", conn, c->peer,
		 why ? why : "no reason given");
	kvf_ctrl_teardown(c, KVF_FAIL_PEER_LOST, why ? why : "torn down by the engine");
}

/* The engine's rooms on a connection (a decode's peer connection: its
 * lead's id), for the idle close in walk_conns. */
static void op_conn_busy(void *tp, uint32_t conn, bool busy)
{
	struct kvf_conn *c = kvf_sched_get(tp, conn);

	if (c)
		c->idle_since_ns = busy ? 0 : kvf_monotonic_ns();
}

/* A connection we opened (decode) that no room has used for
 * rdma.idle_close_s is closed, as Mooncake's endpoint cache evicts: the QP
 * count follows the traffic. It leaves the peer lookup at once (group_alive
 * is false from the request on), so a room created now opens a new one;
 * its PEER_LOST fails nothing, as no room is bound to it. */
static void idle_close(struct kvf_rdma *t, struct kvf_conn *c, uint64_t now)
{
	uint64_t limit = (uint64_t)t->cfg.idle_close_s * 1000000000ull;
	char why[128];

	if (!limit || !c->active || c->group != c->id || !c->idle_since_ns ||
	    now - c->idle_since_ns < limit || atomic_load(&c->teardown_req))
		return;
	snprintf(why, sizeof(why), "idle: no room for %u s (rdma.idle_close_s)",
		 t->cfg.idle_close_s);
	kvf_info("rdma", "peer connection %u to %s closed: %s", c->id, c->peer, why);
	t->st_idle_closed++;
	kvf_ctrl_teardown(c, KVF_FAIL_PEER_LOST, why);
}

/* A control SEND's frame back to the rail's pool (txpool.h), whether or
 * not its connection is still held; the drain marker's completion pushed
 * when the QP is destroyed (poller.c) takes back what never completed. */
static void give_frame(struct kvf_rdma *t, struct kvf_conn *c, uint64_t key)
{
	uint32_t slot = kvf_wr_slot(key);

	if (slot == KVF_DRAIN_SLOT) {
		uint32_t k = kvf_txpool_reclaim(&t->tx.pool, kvf_wr_gen(key));

		if (k)
			kvf_info("rdma", "connection %u destroyed holding %u send frames: "
				 "taken back", kvf_wr_gen(key), k);
		if (c)
			c->tx_held = 0;
		return;
	}
	if (slot < t->tx.pool.n && t->tx.pool.owner[slot] == kvf_wr_gen(key) &&
	    kvf_txpool_give(&t->tx.pool, slot) && c)
		c->tx_held--;
}

/* Per completion: no lock, no reference count. */
static bool op_on_wc(void *tp, const struct kvf_event *ev)
{
	enum kvf_wr_kind kind = kvf_wr_kind(ev->key);
	struct kvf_rdma *t = tp;
	struct kvf_conn *c;

	if (kind != KVF_WR_DATA && kind != KVF_WR_CTRL)
		return false;
	t->st_wr_errors += ev->status != IBV_WC_SUCCESS && ev->status != IBV_WC_WR_FLUSH_ERR;
	/* The QP it completed on: a control SEND names its connection in the
	 * wr_id; a write was posted on the QP its wr_id picks. */
	if (kind == KVF_WR_CTRL) {
		c = kvf_sched_get(tp, kvf_wr_gen(ev->key));
	} else {
		struct kvf_conn *g = kvf_sched_get(tp, ev->peer);

		c = g ? kvf_conn_pick(g, ev->key) : NULL;
		kvf_staging_on_wc(tp, ev->peer, ev->key);
	}
	if (kind == KVF_WR_CTRL)
		give_frame(t, c, ev->key);
	if (c) {
		if (ev->status == IBV_WC_SUCCESS)
			kvf_sendq_completed(&c->sq);
		if (c->s_pending)
			kvf_ctrl_kick(c);
	}
	return kind == KVF_WR_DATA;
}

/* Every connection established, every eighth of the heartbeat interval: a
 * peer HELLO that came with nothing else to post is checked against our
 * regions (kvf_ctrl_check_shapes, ctrl.c) within that, and a mismatch's teardown waits on
 * the pending list. No heartbeat is sent from here (keepalive.h). */
static void walk_conns(struct kvf_rdma *t, uint64_t now)
{
	uint64_t hb = (uint64_t)t->cfg.heartbeat_interval_ms * 1000000ull;

	if (!hb || now - t->last_walk_ns < hb / 8)
		return;
	t->last_walk_ns = now;
	for (struct kvf_conn *c = t->s.all; c; c = c->s_next) {
		if (atomic_load(&c->state) != KVF_CONN_ESTABLISHED)
			continue;
		idle_close(t, c, now);
		kvf_ctrl_check_shapes(c);
		if (c->shapes_bad_ns)
			kvf_ctrl_kick(c);
	}
}

/* Connections gone and new ones, the walk of the established ones, and
 * the connections with work waiting (pending list): no lock, no scan of
 * the table. */
static int op_progress(void *tp, uint64_t now_ns)
{
	struct kvf_rdma *t = tp;
	uint64_t now = kvf_monotonic_ns(); /* the poller's clock, not the engine's */
	struct kvf_conn *next;

	if (now - t->last_scan_ns < PROGRESS_EVERY_NS)
		return 0;
	t->last_scan_ns = now;
	kvf_sched_collect(t);
	kvf_staging_progress(t, kvf_ctrl_kick, kvf_ctrl_teardown);
	walk_conns(t, now);
	for (struct kvf_conn *c = t->s.pending; c; c = next) {
		next = c->s_pnext; /* kvf_ctrl_kick may take c off the list */
		kvf_ctrl_kick(c);
	}
	return 0;
}

/* How long the scheduler may sleep (kvf_engine_wait): until the next scan
 * while anything waits on one (frames or writes queued, staging under way,
 * connections the poller handed over), else until the next walk.
 * The poller publishes those stacks before kvf_ring_wake (sched.c), and the
 * engine calls this after arming its sleep, so a handoff is never missed. */
static uint64_t op_wait_ns(void *tp, uint64_t max_ns)
{
	struct kvf_rdma *t = tp;
	uint64_t now = kvf_monotonic_ns(), next;
	uint64_t hb = (uint64_t)t->cfg.heartbeat_interval_ms * 1000000ull;

	if (t->s.pending || kvf_staging_busy(t) ||
	    atomic_load_explicit(&t->handoff, memory_order_relaxed) ||
	    atomic_load_explicit(&t->dead, memory_order_relaxed))
		next = t->last_scan_ns + PROGRESS_EVERY_NS;
	else if (hb)
		next = t->last_walk_ns + hb / 8;
	else
		return max_ns;
	now = next > now ? next - now : 0;
	return now < max_ns ? now : max_ns;
}

/* The counters for /metrics (scheduler thread). Send queues are the
 * scheduler's; the table's live list is walked under its lock (the
 * connections held, not rdma.max_conns slots). */
static int op_stats(void *tp, struct kvf_transport_stats *out)
{
	struct kvf_rdma *t = tp;

	for (unsigned i = 1; i < KVF_FR_NUM && i < KVF_FRAME_TYPES; i++)
		out->frame_names[i] = kvf_frame_type_str(i);
	for (unsigned i = 0; i < KVF_FRAME_TYPES; i++) {
		out->frames_tx[i] = t->st_frames_tx[i];
		out->frames_rx[i] = atomic_load_explicit(&t->st_frames_rx[i], memory_order_relaxed);
	}
	/* The poller's keepalives are the HEARTBEATs sent. */
	out->keepalives_sent = atomic_load_explicit(&t->st_ka_sent, memory_order_relaxed);
	out->keepalives_acked = atomic_load_explicit(&t->st_ka_acked, memory_order_relaxed);
	out->keepalives_late = atomic_load_explicit(&t->st_ka_late, memory_order_relaxed);
	out->frames_tx[KVF_FR_HEARTBEAT] += out->keepalives_sent;
	/* The poller's AUTH frames are the AUTH frames sent. */
	out->frames_tx[KVF_FR_AUTH] += atomic_load_explicit(&t->st_auth_tx, memory_order_relaxed);
	out->auth_ok = atomic_load_explicit(&t->st_auth_ok, memory_order_relaxed);
	for (unsigned r = 0; r < KVF_AUTH_NUM; r++)
		out->auth_refused[r] = atomic_load_explicit(&t->st_auth_refused[r],
							    memory_order_relaxed);
	out->auth_dropped = atomic_load_explicit(&t->st_auth_dropped, memory_order_relaxed);
	out->bytes_posted = t->st_bytes;
	out->wrs_posted = t->st_wrs;
	out->completions = atomic_load_explicit(&t->st_completions, memory_order_relaxed);
	kvf_staging_stats(t, out);
	out->doorbells = t->st_doorbells;
	out->poller_sleeps = atomic_load_explicit(&t->st_poller_sleeps, memory_order_relaxed);
	out->connects = t->st_connects;
	out->connect_backoffs = t->st_backoffs;
	out->conns_over_max = atomic_load_explicit(&t->st_conns_over_max, memory_order_relaxed);
	kvf_conn_table_count(t, &out->conns_held, &out->conns_live);
	out->frame_bytes = (atomic_load_explicit(&t->st_rx_frames, memory_order_relaxed) +
			    t->tx.pool.n) * (uint64_t)t->frame_max + 4096ull * out->conns_held;
	out->srq_low = atomic_load_explicit(&t->st_srq_low, memory_order_relaxed);
	out->rx_stray = atomic_load_explicit(&t->st_rx_stray, memory_order_relaxed);
	out->tx_frame_waits = t->tx.pool.waits;
	out->info_bytes_rx = atomic_load_explicit(&t->st_info_bytes_rx, memory_order_relaxed);
	out->conns_idle_closed = t->st_idle_closed;
	out->tx_stray = atomic_load_explicit(&t->st_tx_stray, memory_order_relaxed);
	return 0;
}

/* This device as a rail: the one of a one-device engine, or one of the
 * rails transport's (which sets the index). */
static int op_rail_stats(void *tp, uint32_t i, struct kvf_rail_stats *out)
{
	struct kvf_rdma *t = tp;
	struct ibv_port_attr pa;
	struct kvf_transport_stats ts = {0};
	uint16_t port = 0;

	if (i)
		return -ERANGE;
	op_stats(t, &ts);
	*out = (struct kvf_rail_stats){.size = sizeof(*out), .rail = t->rail,
				       .bytes = t->st_bytes, .writes = t->st_wrs,
				       .wr_errors = t->st_wr_errors, .conns_live = ts.conns_live,
				       .connects = t->st_connects};
	out->conns_lost = atomic_load_explicit(&t->st_conns_lost, memory_order_relaxed);
	snprintf(out->device, sizeof(out->device), "%s", ibv_get_device_name(t->ctx->device));
	if (kvf_rdma_listen_addr(&kvf_rdma_ops, t, out->addr, sizeof(out->addr), &port))
		out->addr[0] = '\0';
	out->port = port;
	/* The port's own state, asked now: a PORT_ERR missed or not sent
	 * (soft-RoCE on a netdev going down) still shows. */
	if (atomic_load(&t->dev_dead))
		out->state = KVF_RAIL_DEVICE_DEAD;
	else if (atomic_load(&t->port_down) || ibv_query_port(t->ctx, t->port, &pa) ||
		 pa.state != IBV_PORT_ACTIVE)
		out->state = KVF_RAIL_PORT_DOWN;
	return 1;
}

const struct kvf_transport_ops kvf_rdma_ops = {
	.rail_stats = op_rail_stats,
	.stats = op_stats,
	.region_register = kvf_rdma_region_register,
	.region_unregister = kvf_rdma_region_unregister,
	.send_room_info = op_send_room_info,
	.post_chunk = op_post_chunk,
	.cancel_writes = op_cancel_writes,
	.send_abort = op_send_abort,
	.send_abort_ack = op_send_abort_ack,
	.teardown = op_teardown,
	.conn_busy = op_conn_busy,
	.on_wc = op_on_wc,
	.progress = op_progress,
	.wait_ns = op_wait_ns,
	.close = kvf_rdma_close,
};

