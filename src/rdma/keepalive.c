/* SPDX-License-Identifier: Apache-2.0 */
#include "rdma/keepalive.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "rdma/conn.h"
#include "transfer/liveness.h"
#include "base/log.h"
#include "engine/names.h"
#include "transfer/proto.h"
#include "rdma/rdma_internal.h"
#include "rdma/verbs.h"

#define MS 1000000ull

int kvf_keepalive_setup(struct kvf_rdma *t)
{
	t->ka_frame = aligned_alloc(64, 64);
	if (!t->ka_frame)
		return -ENOMEM;
	memset(t->ka_frame, 0, 64);
	kvf_proto_encode_heartbeat(t->ka_frame, KVF_PROTO_HDR_LEN);
	/* No remote access: the NIC reads it for our SENDs only. */
	return kvf_verbs_reg_mr(t->pd, t->ka_frame, 64, 0, "keepalive frame", &t->ka_mr);
}

void kvf_keepalive_fini(struct kvf_rdma *t)
{
	if (t->ka_mr)
		ibv_dereg_mr(t->ka_mr);
	t->ka_mr = NULL;
	free(t->ka_frame);
	t->ka_frame = NULL;
}

/* Whether c takes frames now: the same test as the scheduler's post_send
 * (conn.c), read here by the thread that writes state and peer_left. */
static bool takes_frames(const struct kvf_conn *c)
{
	return c->qp && atomic_load(&c->state) == KVF_CONN_ESTABLISHED &&
	       !atomic_load_explicit(&c->peer_left, memory_order_relaxed) &&
	       !atomic_load(&c->teardown_req);
}

static int post(struct kvf_conn *c)
{
	struct kvf_rdma *t = c->t;
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)t->ka_frame,
			      .length = KVF_PROTO_HDR_LEN, .lkey = t->ka_mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = kvf_wr_id(KVF_WR_CTRL, c->id, KVF_KEEPALIVE_SLOT),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	/* The provider's send-queue lock orders this against the scheduler's
	 * posts (keepalive.h). */
	return -ibv_post_send(c->qp, &wr, &bad);
}

void kvf_keepalive_tick(struct kvf_conn *c, uint64_t now)
{
	struct kvf_rdma *t = c->t;
	uint64_t interval = (uint64_t)t->cfg.heartbeat_interval_ms * MS;
	char why[160];
	int rc;

	if (!takes_frames(c))
		return;
	switch (kvf_live_keepalive(&c->live, interval, now)) {
	case KVF_KA_SEND:
		break;
	case KVF_KA_LATE:
		/* Not lost: counted, and the one in flight says more when it
		 * completes (or fails). */
		atomic_fetch_add_explicit(&t->st_ka_late, 1, memory_order_relaxed);
		return;
	default:
		return;
	}
	rc = post(c);
	if (!rc) {
		kvf_live_ka_posted(&c->live, interval, now);
		atomic_fetch_add_explicit(&t->st_ka_sent, 1, memory_order_relaxed);
		return;
	}
	snprintf(why, sizeof(why), "a heartbeat could not be posted: %s", strerror(-rc));
	kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, why);
}

bool kvf_keepalive_on_wc(struct kvf_conn *c, const struct ibv_wc *wc, uint64_t now)
{
	char why[200];

	if (kvf_wr_kind(wc->wr_id) != KVF_WR_CTRL || kvf_wr_slot(wc->wr_id) != KVF_KEEPALIVE_SLOT)
		return false;
	kvf_live_ka_done(&c->live, wc->status == IBV_WC_SUCCESS, now);
	if (wc->status == IBV_WC_SUCCESS) {
		atomic_fetch_add_explicit(&c->t->st_ka_acked, 1, memory_order_relaxed);
		return true;
	}
	/* The QP is in error: the connection is gone, as for any send that
	 * fails (a flush of one already torn down changes nothing). */
	snprintf(why, sizeof(why), "a heartbeat completed with %s (vendor_err 0x%x, qp 0x%x): %s",
		 ibv_wc_status_str(wc->status), wc->vendor_err, wc->qp_num,
		 kvf_wc_status_hint(wc->status));
	kvf_conn_teardown(c, KVF_FAIL_PEER_LOST, why);
	return true;
}
