/* SPDX-License-Identifier: Apache-2.0 */
/*
 * one_room: the smallest complete kvferry program. One prefill engine and
 * one decode engine, in one process and one thread, move one room (one
 * request's KV pages) over RDMA, and the decode checks every byte.
 *
 *   one_room DEVICE ADDR [DECODE_DEVICE DECODE_ADDR]
 *
 * DEVICE is a verbs device (mlx5_0, rxe0) and ADDR its IPv4 address: the
 * prefill listens there. The decode runs on the same device, or on
 * DECODE_DEVICE, connecting from DECODE_ADDR. Prints one line and exits 0
 * when the room succeeded and every byte is right, 1 otherwise.
 *
 * In a serving job the two engines live in different processes on
 * different hosts; the prefill publishes "host:port" (here a string passed
 * in memory) and the application agrees on the room id (SGLang's
 * bootstrap_room). Everything else is as here. Only the public API is
 * used: include/kvferry/kvferry.h, docs/api.md.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, poll under -std=c11 */

#include <kvferry/kvferry.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBUFS 2         /* one layer's K and V buffers */
#define NPAGES 16       /* pages (items) per buffer: the pool */
#define PAGE 4096       /* bytes per page */
#define ROOM_ID 42      /* what both sides agree on */
/* rdma.auth_token: both sides prove they know it. A real one is long and
 * random (docs/config.md); it never travels. */
#define TOKEN "example"

static const uint32_t src_pages[] = {0, 1, 2, 3}; /* prefill's pages */
static const uint32_t dst_pages[] = {9, 4, 12, 7}; /* decode's, any order */
#define NROOM (sizeof(src_pages) / sizeof(src_pages[0]))

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The byte that page p of buffer b holds at offset i on the prefill. */
static uint8_t pattern(int b, uint32_t p, size_t i)
{
	return (uint8_t)(b * 131 + p * 31 + i * 7 + 1);
}

/* Open an engine from overrides alone (no config file): the way one rank of
 * a serving job configures itself. The library says what was wrong in err. */
static kvf_engine *open_engine(const char *const *ov, size_t n)
{
	char err[256];
	kvf_engine *eng = NULL;
	int rc = kvf_engine_open_with(NULL, ov, n, err, sizeof(err), &eng);
	if (rc) {
		fprintf(stderr, "one_room: kvf_engine_open_with: %s\n", err);
		return NULL;
	}
	return eng;
}

/* The prefill listens on addr, on a port the kernel picks (0), and reads
 * the port back: what it would publish to its bootstrap server. */
static kvf_engine *open_prefill(const char *dev, const char *addr, char host[64],
				uint16_t *port)
{
	char o[2][160];
	snprintf(o[0], sizeof(o[0]), "rdma.device=%s", dev);
	snprintf(o[1], sizeof(o[1]), "rdma.listen_addr=%s", addr);
	const char *ov[] = {o[0], o[1], "rdma.listen_port=0", "rdma.auth_token=" TOKEN,
			    "log.level=warn"};
	kvf_engine *eng = open_engine(ov, 5);
	if (eng && kvf_engine_listen_addr(eng, host, 64, port)) {
		fprintf(stderr, "one_room: the prefill does not listen\n");
		kvf_engine_close(eng);
		return NULL;
	}
	return eng;
}

/* The decode dials the prefill (rdma.peer), from source when not "": the
 * source address picks the device when several can reach the prefill. */
static kvf_engine *open_decode(const char *dev, const char *host, uint16_t port,
			       const char *source)
{
	char o[3][160];
	snprintf(o[0], sizeof(o[0]), "rdma.device=%s", dev);
	snprintf(o[1], sizeof(o[1]), "rdma.peer=%s:%u", host, port);
	snprintf(o[2], sizeof(o[2]), "rdma.source_addr=%s", source);
	const char *ov[] = {o[0], o[1], o[2], "rdma.auth_token=" TOKEN, "log.level=warn"};
	return open_engine(ov, 5);
}

/* Register a region named "kv": NBUFS buffers of NPAGES pages. The name is
 * how the two sides' regions are matched; the memory stays ours and must
 * outlive the engine. Both sides register the same shape. */
static int register_kv(kvf_engine *eng, uint8_t *mem[NBUFS], uint32_t *region)
{
	static const uint64_t item_size[NBUFS] = {PAGE, PAGE};
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	d.nbufs = NBUFS;
	d.name = "kv";
	d.nitems = NPAGES;
	d.bufs = (void *const *)mem;
	d.item_size = item_size;
	return kvf_region_register(eng, &d, region);
}

/* Sleep until either engine has work, instead of spinning: announce the
 * sleep to each engine (which returns how long we may sleep: 0 when work is
 * already pending, else until its earliest deadline), then one poll() on
 * both engines' fds. One engine alone would just call kvf_engine_wait. */
static void wait_both(kvf_engine *a, kvf_engine *b)
{
	struct pollfd fds[2] = {{.fd = kvf_engine_fd(a), .events = POLLIN},
				{.fd = kvf_engine_fd(b), .events = POLLIN}};
	int ta = kvf_engine_wait_prepare(a), tb;
	if (ta <= 0)
		return; /* work pending on a: go round */
	tb = kvf_engine_wait_prepare(b);
	if (tb <= 0)
		return; /* a stays armed; its next kvf_progress disarms it */
	poll(fds, 2, ta < tb ? (ta < 100 ? ta : 100) : (tb < 100 ? tb : 100));
}

static int report_failure(kvf_engine *eng, kvf_room room, const char *side)
{
	struct kvf_failure f = KVF_FAILURE_INIT;
	kvf_failure(eng, room, &f);
	printf("one_room: %s FAILED: %s: %s\n", side, kvf_fail_reason_str(f.reason),
	       f.detail);
	return 1;
}

/* Every destination page must hold the source page the chunk mapped to it,
 * and no other page may have been touched. */
static size_t check(uint8_t *dst[NBUFS])
{
	size_t bad = 0;
	for (int b = 0; b < NBUFS; b++)
		for (uint32_t p = 0; p < NPAGES; p++) {
			int k = -1;
			for (size_t j = 0; j < NROOM; j++)
				if (dst_pages[j] == p)
					k = (int)j;
			for (size_t i = 0; i < PAGE; i++) {
				uint8_t want = k < 0 ? 0 : pattern(b, src_pages[k], i);
				bad += dst[b][(size_t)p * PAGE + i] != want;
			}
		}
	return bad;
}

/* Drive both rooms to an end. kvf_progress applies what the transport's
 * poller thread saw and expires deadlines: a scheduler calls it once per
 * iteration. Returns 0 when both rooms succeeded. */
static int run_room(kvf_engine *pre, kvf_room tx, uint32_t preg, kvf_engine *dec, kvf_room rx)
{
	int sent = 0, ts = KVF_BOOTSTRAPPING, rs = KVF_BOOTSTRAPPING;
	double end = now_s() + 60;
	while ((ts != KVF_SUCCESS && ts != KVF_FAILED) || (rs != KVF_SUCCESS && rs != KVF_FAILED)) {
		if (kvf_progress(pre) + kvf_progress(dec) == 0)
			wait_both(pre, dec);
		ts = kvf_poll(pre, tx);
		rs = kvf_poll(dec, rx);
		/* Once the receiver's list arrived, send: our pages go to its list
		 * entries from dst_offset on. Chunked prefill sends one chunk per
		 * forward pass, KVF_SEND_LAST with the final one; here one chunk. */
		if (!sent && ts == KVF_WAITING_FOR_INPUT) {
			struct kvf_chunk_part part = {
				.region = preg, .dst_offset = 0, .n = NROOM, .src = src_pages};
			int rc = kvf_sender_send_chunk(pre, tx, &part, 1, KVF_SEND_LAST);
			if (rc) /* the room is FAILED too, saying why */
				fprintf(stderr, "one_room: send: %s\n", strerror(-rc));
			sent = 1;
		}
		if (now_s() > end) { /* not expected: every state has a deadline */
			fprintf(stderr, "one_room: no end after 60 s\n");
			return 1;
		}
	}
	if (ts == KVF_FAILED)
		return report_failure(pre, tx, "prefill");
	if (rs == KVF_FAILED)
		return report_failure(dec, rx, "decode");
	return 0;
}

/* The KV pools: the prefill's filled with pattern(), the decode's zeroed.
 * Plain host memory here; a serving engine registers its GPU KV cache. */
static int alloc_pools(uint8_t *src[NBUFS], uint8_t *dst[NBUFS])
{
	for (int b = 0; b < NBUFS; b++) {
		src[b] = malloc((size_t)NPAGES * PAGE);
		dst[b] = calloc(NPAGES, PAGE);
		if (!src[b] || !dst[b])
			return -1;
		for (uint32_t p = 0; p < NPAGES; p++)
			for (size_t i = 0; i < PAGE; i++)
				src[b][(size_t)p * PAGE + i] = pattern(b, p, i);
	}
	return 0;
}

/* A room's memory is ours again only once no RDMA write of it can still
 * land: kvf_release says -EBUSY until then, so keep progressing. */
static void release_both(kvf_engine *pre, kvf_room tx, kvf_engine *dec, kvf_room rx)
{
	int tx_held = 1, rx_held = 1;
	while (tx_held || rx_held) {
		tx_held = tx_held && kvf_release(pre, tx) == -EBUSY;
		rx_held = rx_held && kvf_release(dec, rx) == -EBUSY;
		kvf_progress(pre);
		kvf_progress(dec);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: one_room DEVICE ADDR [DECODE_DEVICE DECODE_ADDR]\n");
		return 2;
	}
	uint8_t *src[NBUFS], *dst[NBUFS];
	if (alloc_pools(src, dst))
		return 1;

	char host[64];
	uint16_t port;
	kvf_engine *pre = open_prefill(argv[1], argv[2], host, &port);
	kvf_engine *dec = pre ? open_decode(argc == 5 ? argv[3] : argv[1], host, port,
					    argc == 5 ? argv[4] : "")
			      : NULL;
	if (!dec)
		return 1;

	uint32_t preg, dreg;
	int rc = register_kv(pre, src, &preg);
	if (!rc)
		rc = register_kv(dec, dst, &dreg);
	if (rc) {
		fprintf(stderr, "one_room: kvf_region_register: %s\n", strerror(-rc));
		return 1;
	}

	/* Decode: a receiver room saying where each page must land; this sends
	 * ROOM_INFO. Prefill: a sender room, which waits for it. Either may come
	 * first: a ROOM_INFO that arrives before its sender room is kept. */
	kvf_room rx, tx;
	struct kvf_index_list want = {.region = dreg, .n = NROOM, .items = dst_pages};
	if (kvf_receiver_create(dec, ROOM_ID, NULL, &rx) ||
	    kvf_receiver_init_regions(dec, rx, &want, 1, NULL, 0) ||
	    kvf_sender_create(pre, ROOM_ID, &tx)) {
		fprintf(stderr, "one_room: could not create the rooms\n");
		return 1;
	}
	rc = run_room(pre, tx, preg, dec, rx);

	/* SUCCESS at the decode means every byte landed: check them. */
	size_t bad = rc ? 0 : check(dst);

	release_both(pre, tx, dec, rx);
	kvf_engine_close(dec);
	kvf_engine_close(pre);
	if (!rc)
		printf("one_room: room %d SUCCESS: %zu pages x %d buffers of %d B from %s:%u, "
		       "%zu bytes wrong\n", ROOM_ID, NROOM, NBUFS, PAGE, host, port, bad);
	for (int b = 0; b < NBUFS; b++) {
		free(src[b]);
		free(dst[b]);
	}
	return rc || bad ? 1 : 0;
}
