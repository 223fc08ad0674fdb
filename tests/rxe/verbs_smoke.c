/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_smoke: the RDMA suite's first test, plain ibverbs, no kvferry code.
 *
 * On one device: a PD, a CQ, memory regions, and two RC queue pairs
 * connected to each other (INIT -> RTR -> RTS, over the RoCE v2 GID of the
 * port's IPv4 address). Then
 *   1. an RDMA WRITE of --size bytes (default 1 MiB, many MTUs) from QP a's
 *      source buffer into QP b's destination buffer, checked byte for byte;
 *   2. a SEND from a to b into a posted RECV (larger than the MTU too),
 *      checked for length and content.
 * Every failure names its step; work completion errors print
 * ibv_wc_status_str. Exit 0 when all is well, 1 otherwise.
 *
 * Usage: verbs_smoke [-d DEV] [-g GID_INDEX] [-s BYTES] [-t TIMEOUT_MS]
 * Defaults: DEV from $KVF_RXE_DEV0, else the first device; GID_INDEX from
 * $KVF_RXE_GID0, else found by scanning /sys/class/infiniband/DEV/ports/1/gids
 * for the RoCE v2 ::ffff:a.b.c.d entry (not needed on InfiniBand ports). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define PORT 1
#define MSG_SIZE 3000 /* SEND payload: more than one 1024-byte MTU */

enum wr_kind { WR_WRITE = 1, WR_SEND, WR_RECV };

static const char *wr_name(uint64_t id)
{
	switch (id) {
	case WR_WRITE: return "rdma write";
	case WR_SEND: return "send";
	case WR_RECV: return "recv";
	default: return "?";
	}
}

static void fail(const char *step, int err)
{
	fprintf(stderr, "verbs_smoke: FAIL %s: %s\n", step, strerror(err < 0 ? -err : err));
}

/* Teardown: verbs destroy calls return 0 or an errno value. */
static void check(const char *step, int err, int *ret)
{
	if (err) {
		fail(step, err);
		*ret = 1;
	}
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Find the RoCE v2 GID that maps an IPv4 address (::ffff:a.b.c.d) by
 * scanning sysfs; falls back to the first RoCE v2 GID. -ENOENT if none. */
static int find_gid_index(const char *dev)
{
	char path[256], line[128];
	int first_v2 = -1;

	for (int i = 0; i < 1024; i++) {
		FILE *f;
		bool v2;

		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, PORT, i);
		f = fopen(path, "r");
		if (!f) {
			if (errno == ENOENT)
				break; /* past the end of the table */
			continue;  /* EINVAL: empty entry */
		}
		v2 = fgets(line, sizeof(line), f) && strstr(line, "v2");
		fclose(f);
		if (!v2)
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gids/%d", dev, PORT, i);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) &&
		    strncmp(line, "0000:0000:0000:0000:0000:ffff:", 30) == 0) {
			fclose(f);
			return i;
		}
		fclose(f);
		if (first_v2 < 0)
			first_v2 = i;
	}
	return first_v2 >= 0 ? first_v2 : -ENOENT;
}

/* Wait for n completions; any error completion fails with its status.
 * Returns 0, -EIO on an error completion or poll failure, -ETIMEDOUT. */
static int wait_cq(struct ibv_cq *cq, int n, struct ibv_wc *out, int timeout_ms)
{
	double deadline = now_us() + timeout_ms * 1000.0;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, out + got);

		if (r < 0) {
			fprintf(stderr, "verbs_smoke: FAIL ibv_poll_cq returned %d\n", r);
			return -EIO;
		}
		for (int i = got; i < got + r; i++) {
			if (out[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "verbs_smoke: FAIL %s completion: %s (status %d, vendor_err 0x%x)\n",
					wr_name(out[i].wr_id), ibv_wc_status_str(out[i].status),
					out[i].status, out[i].vendor_err);
				return -EIO;
			}
		}
		got += r;
		if (got < n && now_us() > deadline) {
			fprintf(stderr, "verbs_smoke: FAIL timed out after %d ms waiting for %d completion(s), got %d\n",
				timeout_ms, n, got);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

struct endpoint {
	uint32_t qpn;
	uint16_t lid;
	union ibv_gid gid;
};

static int qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = PORT,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      IBV_QP_ACCESS_FLAGS);
}

static int qp_to_rtr(struct ibv_qp *qp, const struct endpoint *peer, enum ibv_mtu mtu,
		     int gid_index, bool global)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.dlid = peer->lid,
			.sl = 0,
			.src_path_bits = 0,
			.port_num = PORT,
		},
	};

	if (global) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		a.ah_attr.grh.hop_limit = 1;
	}
	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			      IBV_QP_MIN_RNR_TIMER);
}

static int qp_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = 0,
		.max_rd_atomic = 1,
	};

	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};

	return ibv_create_qp(pd, &ia);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 31u + 7u + (i >> 12));
}

/* Returns the first offset where a and b differ, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: verbs_smoke [-d DEV] [-g GID_INDEX] [-s BYTES] [-t TIMEOUT_MS]\n");
}

int main(int argc, char **argv)
{
	const char *dev_name = getenv("KVF_RXE_DEV0");
	const char *gid_env = getenv("KVF_RXE_GID0");
	int gid_index = gid_env && *gid_env ? atoi(gid_env) : -1;
	size_t size = 1 << 20;
	int timeout_ms = 10000;
	int ret = 1, err, opt, ndev = 0;
	struct ibv_device **list = NULL, *dev = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_mr *src_mr = NULL, *dst_mr = NULL, *msg_mr = NULL;
	struct ibv_qp *qa = NULL, *qb = NULL;
	uint8_t *src = NULL, *dst = NULL, *msg = NULL; /* msg: [send | recv] */
	struct ibv_port_attr port;
	struct endpoint ea = { 0 }, eb = { 0 };
	struct ibv_wc wc[2];
	bool global;
	double t0, t_write, t_send;
	long bad;

	while ((opt = getopt(argc, argv, "d:g:s:t:h")) != -1) {
		switch (opt) {
		case 'd': dev_name = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 't': timeout_ms = atoi(optarg); break;
		default: usage(); return opt == 'h' ? 0 : 2;
		}
	}
	if (size == 0 || timeout_ms <= 0) {
		usage();
		return 2;
	}

	/* device */
	list = ibv_get_device_list(&ndev);
	if (!list) {
		fail("ibv_get_device_list", errno);
		return 1;
	}
	for (int i = 0; i < ndev; i++)
		if (!dev_name || !*dev_name || strcmp(ibv_get_device_name(list[i]), dev_name) == 0) {
			dev = list[i];
			break;
		}
	if (!dev) {
		fprintf(stderr, "verbs_smoke: FAIL open device: %s not found (%d device(s))\n",
			dev_name && *dev_name ? dev_name : "any", ndev);
		goto out_list;
	}
	dev_name = ibv_get_device_name(dev);
	ctx = ibv_open_device(dev);
	if (!ctx) {
		fail("ibv_open_device", errno);
		goto out_list;
	}
	err = ibv_query_port(ctx, PORT, &port);
	if (err) {
		fail("ibv_query_port", err);
		goto out_ctx;
	}
	if (port.state != IBV_PORT_ACTIVE) {
		fprintf(stderr, "verbs_smoke: FAIL port %d of %s is %s, not active\n", PORT, dev_name,
			ibv_port_state_str(port.state));
		goto out_ctx;
	}
	global = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	if (global && gid_index < 0) {
		gid_index = find_gid_index(dev_name);
		if (gid_index < 0) {
			fprintf(stderr, "verbs_smoke: FAIL no RoCE v2 GID on %s port %d (is an IPv4 address on its netdev?)\n",
				dev_name, PORT);
			goto out_ctx;
		}
	}
	if (global) {
		err = ibv_query_gid(ctx, PORT, gid_index, &ea.gid);
		if (err) {
			fail("ibv_query_gid", err);
			goto out_ctx;
		}
	}
	printf("verbs_smoke: device %s, port %d, %s, active mtu %d, gid index %d, size %zu\n",
	       dev_name, PORT, global ? "RoCE" : "InfiniBand", 128 << port.active_mtu,
	       global ? gid_index : -1, size);

	/* PD, CQ, memory */
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		fail("ibv_alloc_pd", errno);
		goto out_ctx;
	}
	cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!cq) {
		fail("ibv_create_cq", errno);
		goto out_pd;
	}
	src = malloc(size);
	dst = calloc(1, size);
	msg = calloc(2, MSG_SIZE);
	if (!src || !dst || !msg) {
		fail("malloc", ENOMEM);
		goto out_buf;
	}
	for (size_t i = 0; i < size; i++)
		src[i] = pattern(i);
	src_mr = ibv_reg_mr(pd, src, size, IBV_ACCESS_LOCAL_WRITE);
	if (!src_mr) {
		fail("ibv_reg_mr src (memlock limit? try ulimit -l unlimited)", errno);
		goto out_buf;
	}
	dst_mr = ibv_reg_mr(pd, dst, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!dst_mr) {
		fail("ibv_reg_mr dst", errno);
		goto out_src_mr;
	}
	msg_mr = ibv_reg_mr(pd, msg, 2 * MSG_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!msg_mr) {
		fail("ibv_reg_mr msg", errno);
		goto out_dst_mr;
	}

	/* two RC QPs, connected to each other */
	qa = make_qp(pd, cq);
	if (!qa) {
		fail("ibv_create_qp a", errno);
		goto out_msg_mr;
	}
	qb = make_qp(pd, cq);
	if (!qb) {
		fail("ibv_create_qp b", errno);
		goto out_qa;
	}
	ea.qpn = qa->qp_num;
	ea.lid = port.lid;
	eb = ea;
	eb.qpn = qb->qp_num;
	if ((err = qp_to_init(qa)) || (err = qp_to_init(qb))) {
		fail("modify_qp INIT", err);
		goto out_qb;
	}
	if ((err = qp_to_rtr(qa, &eb, port.active_mtu, gid_index, global)) ||
	    (err = qp_to_rtr(qb, &ea, port.active_mtu, gid_index, global))) {
		fail("modify_qp RTR", err);
		goto out_qb;
	}
	if ((err = qp_to_rts(qa)) || (err = qp_to_rts(qb))) {
		fail("modify_qp RTS", err);
		goto out_qb;
	}

	/* 1. RDMA WRITE a -> b */
	{
		struct ibv_sge sge = {
			.addr = (uintptr_t)src, .length = (uint32_t)size, .lkey = src_mr->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = WR_WRITE,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = dst_mr->rkey },
		}, *bad_wr = NULL;

		t0 = now_us();
		err = ibv_post_send(qa, &wr, &bad_wr);
		if (err) {
			fail("ibv_post_send rdma write", err);
			goto out_qb;
		}
		if (wait_cq(cq, 1, wc, timeout_ms))
			goto out_qb;
		t_write = now_us() - t0;
	}
	bad = first_diff(src, dst, size);
	if (bad >= 0) {
		fprintf(stderr, "verbs_smoke: FAIL rdma write data: byte %ld is 0x%02x, expected 0x%02x\n",
			bad, dst[bad], src[bad]);
		goto out_qb;
	}
	printf("verbs_smoke: ok rdma write %zu bytes, checked\n", size);

	/* 2. SEND a -> RECV b */
	{
		uint8_t *sbuf = msg, *rbuf = msg + MSG_SIZE;
		struct ibv_sge rsge = {
			.addr = (uintptr_t)rbuf, .length = MSG_SIZE, .lkey = msg_mr->lkey,
		};
		struct ibv_recv_wr rwr = { .wr_id = WR_RECV, .sg_list = &rsge, .num_sge = 1 },
				   *bad_rwr = NULL;
		struct ibv_sge ssge = {
			.addr = (uintptr_t)sbuf, .length = MSG_SIZE, .lkey = msg_mr->lkey,
		};
		struct ibv_send_wr swr = {
			.wr_id = WR_SEND,
			.sg_list = &ssge,
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad_swr = NULL;

		for (size_t i = 0; i < MSG_SIZE; i++)
			sbuf[i] = pattern(i + 12345);
		err = ibv_post_recv(qb, &rwr, &bad_rwr);
		if (err) {
			fail("ibv_post_recv", err);
			goto out_qb;
		}
		t0 = now_us();
		err = ibv_post_send(qa, &swr, &bad_swr);
		if (err) {
			fail("ibv_post_send send", err);
			goto out_qb;
		}
		if (wait_cq(cq, 2, wc, timeout_ms))
			goto out_qb;
		t_send = now_us() - t0;
		for (int i = 0; i < 2; i++) {
			if (wc[i].wr_id == WR_RECV && wc[i].byte_len != MSG_SIZE) {
				fprintf(stderr, "verbs_smoke: FAIL recv length %u, expected %d\n",
					wc[i].byte_len, MSG_SIZE);
				goto out_qb;
			}
		}
		bad = first_diff(sbuf, rbuf, MSG_SIZE);
		if (bad >= 0) {
			fprintf(stderr, "verbs_smoke: FAIL send/recv data: byte %ld is 0x%02x, expected 0x%02x\n",
				bad, rbuf[bad], sbuf[bad]);
			goto out_qb;
		}
	}
	printf("verbs_smoke: ok send/recv %d bytes, checked\n", MSG_SIZE);
	printf("verbs_smoke: timing: rdma write %zu B in %.0f us (%.1f MB/s), send/recv %d B in %.0f us\n",
	       size, t_write, (double)size / t_write, MSG_SIZE, t_send);
	printf("verbs_smoke: PASS\n");
	ret = 0;

out_qb:
	check("ibv_destroy_qp b", ibv_destroy_qp(qb), &ret);
out_qa:
	check("ibv_destroy_qp a", ibv_destroy_qp(qa), &ret);
out_msg_mr:
	check("ibv_dereg_mr msg", ibv_dereg_mr(msg_mr), &ret);
out_dst_mr:
	check("ibv_dereg_mr dst", ibv_dereg_mr(dst_mr), &ret);
out_src_mr:
	check("ibv_dereg_mr src", ibv_dereg_mr(src_mr), &ret);
out_buf:
	free(msg);
	free(dst);
	free(src);
	check("ibv_destroy_cq", ibv_destroy_cq(cq), &ret);
out_pd:
	check("ibv_dealloc_pd", ibv_dealloc_pd(pd), &ret);
out_ctx:
	check("ibv_close_device", ibv_close_device(ctx), &ret);
out_list:
	ibv_free_device_list(list);
	return ret;
}
