/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots and their renderers (src/obs/metrics.c, metrics_render.c,
 * metrics_rooms.c) and kvf_room_stats(): rooms in every state through the
 * fake transport, the exposition parsed back by prom_check.h, /rooms' JSON
 * by json_check.h. The HTTP side is test_metrics_http.c. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>

#include "base/clock.h"
#include "fake_transport.h"
#include "obs/metrics.h"
#include "json_check.h"
#include "prom_check.h"

static struct kvf_config cfg;
static struct fake f;
static kvf_engine *eng;
static struct prom pa, pb;

/* The rooms of the scene, one per state and role that matters. */
static kvf_room s_boot, s_xfer, s_ok, s_dl, r_wait, r_ok;
static const uint32_t blocks[4] = { 0, 1, 2, 3 };

static kvf_room sender_sent(uint64_t id)
{
	kvf_room h;

	cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
	push_info(eng, id, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	fake_clock += SEC;
	cr_assert_eq(kvf_sender_send(eng, h, blocks, 4), 0);
	return h;
}

static kvf_room receiver_inited(uint64_t id, const char *peer)
{
	kvf_room h;

	cr_assert_eq(kvf_receiver_create(eng, id, peer, &h), 0);
	cr_assert_eq(kvf_receiver_init(eng, h, blocks, 4), 0);
	return h;
}

/* Bootstrap deadline 10 s: s_dl fails by it before the others exist. */
static void setup(void)
{
	fake_cfg(&cfg);
	cfg.bootstrap_s = 10;
	cfg.metrics_interval_ms = 1000;
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	cr_assert_eq(kvf_metrics_init(eng), 0);
	cr_assert_eq(kvf_sender_create(eng, 0xd1, &s_dl), 0);
	fake_clock += 11 * SEC;
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, s_dl), KVF_FAILED);
	cr_assert_eq(kvf_sender_create(eng, 0xb1, &s_boot), 0);
	s_xfer = sender_sent(0x21);
	s_ok = sender_sent(0x22);
	fake_clock += SEC / 2;
	push_wc(eng, s_ok, 0);
	kvf_progress(eng);
	r_wait = receiver_inited(0x31, "10.0.0.1:18515");
	r_ok = receiver_inited(0x32, "10.0.0.1:18515");
	fake_clock += SEC / 4;
	push_data_done(eng, r_ok);
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, s_ok), KVF_SUCCESS);
	cr_assert_eq(kvf_poll(eng, r_ok), KVF_SUCCESS);
}

static void teardown(void)
{
	kvf_engine_close(eng);
}

TestSuite(metrics, .init = setup, .fini = teardown);

/* Publish now and render; the text is the caller's to free. */
static char *render(bool rooms, const struct kvf_rooms_filter *flt)
{
	struct kvf_rooms_filter all = { .state = -1, .role = -1 };
	struct kvf_buf b = { 0 };
	struct kvf_snap *s;

	cr_assert_eq(kvf_metrics_publish(eng), 0);
	s = kvf_snap_get(eng->metrics);
	cr_assert_not_null(s);
	if (rooms)
		kvf_render_rooms(s, flt ? flt : &all, s->taken_mono_ns, &b);
	else
		kvf_render_metrics(s, &b);
	kvf_snap_put(s);
	cr_assert(!b.failed && b.p);
	return b.p;
}

static void scrape(struct prom *pr)
{
	char *text = render(false, NULL);

	cr_assert(prom_parse(pr, text), "%s", pr->err);
	free(text);
}

/* ---------------------------------------------------------------- /metrics */

Test(metrics, exposition_parses_and_counts_every_room)
{
	scrape(&pa);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"sender\",state=\"BOOTSTRAPPING\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"sender\",state=\"TRANSFERRING\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"sender\",state=\"SUCCESS\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"sender\",state=\"FAILED\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"receiver\","
			      "state=\"WAITING_FOR_INPUT\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms{role=\"receiver\",state=\"SUCCESS\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_rooms_inflight"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_room_failures_total{role=\"sender\",reason=\"deadline\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_room_failures_total{role=\"receiver\","
			      "reason=\"deadline\"}"), 0);
	cr_assert_eq(prom_get(&pa, "kvferry_deadline_expiries_total{deadline=\"bootstrap\","
			      "key=\"deadlines.bootstrap_s\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_peer_rooms{peer=\"10.0.0.1:18515\"}"), 2);
	/* 4 blocks x 2 buffers x 8 bytes; the sender's 0.5 s from send() */
	cr_assert_eq(prom_get(&pa, "kvferry_room_size_bytes_sum{role=\"sender\"}"), 64);
	cr_assert_eq(prom_get(&pa, "kvferry_room_transfer_seconds_count{role=\"sender\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_room_transfer_seconds_sum{role=\"sender\"}"), 0.5);
	cr_assert_eq(prom_get(&pa, "kvferry_room_transfer_seconds_bucket{role=\"sender\","
			      "le=\"0.25\"}"), 0);
	cr_assert_eq(prom_get(&pa, "kvferry_room_transfer_seconds_bucket{role=\"sender\","
			      "le=\"0.5\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_room_transfer_seconds_sum{role=\"receiver\"}"), 0.25);
	cr_assert_eq(prom_get(&pa, "kvferry_room_sent_bytes_total"), 128);
	cr_assert_eq(prom_get(&pa, "kvferry_room_landed_bytes_total"), 64);
}

Test(metrics, counters_only_grow)
{
	char err[256];

	scrape(&pa);
	push_wc(eng, s_xfer, 0);
	kvf_abort(eng, r_wait);
	push_abort(eng, 0x9999, KVF_SENDER, 7); /* a tombstone, an ignored event */
	kvf_progress(eng);
	cr_assert_eq(kvf_release(eng, s_ok), 0);
	scrape(&pb);
	cr_assert(prom_counters_grew(&pa, &pb, err, sizeof(err)), "%s", err);
	cr_assert_eq(prom_get(&pb, "kvferry_rooms_inflight"), 0);
	cr_assert_eq(prom_get(&pb, "kvferry_rooms_released_total"), 1);
	cr_assert_eq(prom_get(&pb, "kvferry_early_entries{kind=\"tombstone\"}"), 1);
	cr_assert_eq(prom_get(&pb, "kvferry_ignored_events_total{reason=\"unknown_room\"}"), 1);
	cr_assert_eq(prom_get(&pb, "kvferry_room_failures_total{role=\"receiver\","
			      "reason=\"local_abort\"}"), 1);
	/* The comparison can fail: backwards it must. */
	cr_assert_not(prom_counters_grew(&pb, &pa, err, sizeof(err)));
}

/* The checker refuses what Prometheus would: it is the test's teeth. */
Test(metrics, checker_refuses_bad_expositions)
{
	static const char *const bad[] = {
		"x_total 1\n",                                          /* no HELP/TYPE */
		"# HELP x_total h\n# TYPE x_total counter\nx_total{a=b} 1\n", /* unquoted */
		"# HELP x h\n# TYPE x counter\nx 1\n",                 /* counter, no _total */
		"# HELP 1x h\n# TYPE 1x gauge\n1x 1\n",                /* bad name */
		"# HELP x h\n# TYPE x gauge\nx one\n",                 /* bad value */
		"# HELP x h\n# TYPE x gauge\nx 1\nx 2\n",              /* series twice */
		"# HELP x h\n# TYPE x gauge\nx 1",                     /* no final newline */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(prom_parse(&pa, bad[i]), "accepted: %s", bad[i]);
}

/* ------------------------------------------------------------------ /rooms */

Test(metrics, rooms_json_is_well_formed_and_complete)
{
	static const char *const keys[] = {
		"\"id\":", "\"handle\":", "\"role\":", "\"state\":", "\"age_s\":",
		"\"in_state_s\":", "\"chunks_done\":", "\"chunks_total\":",
		"\"bytes\":", "\"outstanding\":", "\"quiescent\":", "\"last_event\":",
		"\"last_event_ago_s\":", "\"peer\":", "\"conn\":", "\"timings_s\":",
		"\"failure\":",
	};
	char *j = render(true, NULL);

	cr_assert(json_valid(j), "%s", j);
	cr_assert(strstr(j, "\"live\":6,\"count\":6"), "%s", j);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(count_of(j, keys[i]), 6, "%s in %s", keys[i], j);
	/* every room's deadline, and the one in the failure of 0xd1 */
	cr_assert_eq(count_of(j, "\"deadline\":"), 7, "%s", j);
	/* Oldest first: the room that failed by its deadline, with its key. */
	cr_assert(strstr(j, "\"rooms\":[{\"id\":\"0xd1\""), "%s", j);
	cr_assert(strstr(j, "\"failure\":{\"reason\":\"deadline\",\"deadline\":\"bootstrap\","
			 "\"key\":\"deadlines.bootstrap_s\""), "%s", j);
	free(j);
}

Test(metrics, rooms_show_the_deadline_and_time_left)
{
	struct kvf_rooms_filter flt = { .state = KVF_TRANSFERRING, .role = -1 };
	char *j, want[160];

	fake_clock += 7 * SEC; /* s_xfer sent 1.75 s before the scene ended */
	j = render(true, &flt);
	cr_assert(json_valid(j), "%s", j);
	cr_assert(strstr(j, "\"count\":1"), "%s", j);
	snprintf(want, sizeof(want), "\"deadline\":{\"name\":\"inflight\",\"key\":"
		 "\"deadlines.inflight_s\",\"left_s\":%.6f}", (double)cfg.inflight_s - 8.75);
	cr_assert(strstr(j, want), "want %s in %s", want, j);
	free(j);
}

Test(metrics, rooms_filters)
{
	struct kvf_rooms_filter recv = { .state = -1, .role = KVF_RECEIVER };
	struct kvf_rooms_filter old = { .state = -1, .role = -1, .min_age_s = 5 };
	struct kvf_rooms_filter none = { .state = KVF_SUCCESS, .role = -1, .min_age_s = 1e6 };
	char *j;

	j = render(true, &recv);
	cr_assert(strstr(j, "\"count\":2") && count_of(j, "\"role\":\"receiver\"") == 2, "%s", j);
	free(j);
	j = render(true, &old); /* only s_dl is older than 5 s */
	cr_assert(strstr(j, "\"count\":1") && strstr(j, "\"id\":\"0xd1\""), "%s", j);
	free(j);
	j = render(true, &none);
	cr_assert(json_valid(j) && strstr(j, "\"count\":0,\"rooms\":[]"), "%s", j);
	free(j);
}

/* A peer string is the caller's: quotes and newlines stay inside JSON
 * strings and label values. */
Test(metrics, hostile_peer_names_are_escaped)
{
	kvf_room h;
	char *t;

	cr_assert_eq(kvf_receiver_create(eng, 0x77, "a\"b\\c\nd:80", &h), 0);
	t = render(true, NULL);
	cr_assert(json_valid(t), "%s", t);
	free(t);
	scrape(&pa);
	cr_assert_eq(prom_get(&pa, "kvferry_peer_rooms{peer=\"a\\\"b\\\\c\\nd:80\"}"), 1);
}

/* -------------------------------------------------------------- C API, bufs */

Test(metrics, room_stats_has_the_timings_and_bytes)
{
	struct kvf_room_stats rs = KVF_ROOM_STATS_INIT;
	kvf_room list[16];

	cr_assert_eq(kvf_room_stats(eng, s_ok, &rs), 0);
	cr_assert_eq(rs.size, sizeof(rs));
	cr_assert_eq(rs.room_id, 0x22);
	cr_assert_eq(rs.state, KVF_SUCCESS);
	/* created, ROOM_INFO at once, send() 1 s later, its one chunk 0.5 s after */
	cr_assert_eq(rs.info_ns, rs.created_ns);
	cr_assert_eq(rs.send_ns, rs.created_ns + SEC);
	cr_assert_eq(rs.first_chunk_ns, rs.send_ns + SEC / 2);
	cr_assert_eq(rs.last_chunk_ns, rs.first_chunk_ns);
	cr_assert_eq(rs.success_ns, rs.last_chunk_ns);
	cr_assert_eq(rs.bytes, 64);
	cr_assert_eq(rs.chunks_done, 1);
	cr_assert_eq(rs.chunks_total, 1);
	cr_assert_eq(rs.quiescent, 1);
	cr_assert_str_eq(rs.last_event, "completion");
	cr_assert_str_eq(rs.peer, "conn 7");
	cr_assert_eq(kvf_room_stats(eng, r_wait, &rs), 0);
	cr_assert_eq(rs.deadline, KVF_DL_RECEIVER_WAITING);
	cr_assert_eq(rs.deadline_ns, rs.state_ns + (uint64_t)cfg.receiver_waiting_s * SEC);
	cr_assert_str_eq(rs.peer, "10.0.0.1:18515");
	cr_assert_eq(kvf_room_list(eng, list, 16), 6);
	cr_assert_eq(kvf_room_list(eng, list, 2), 6);
	cr_assert_eq(kvf_room_list(eng, NULL, 0), 6);
}

Test(metrics, room_stats_keeps_the_size_convention)
{
	struct kvf_room_stats rs;

	memset(&rs, 0xab, sizeof(rs));
	rs.size = offsetof(struct kvf_room_stats, now_ns); /* an older, smaller header */
	cr_assert_eq(kvf_room_stats(eng, s_ok, &rs), 0);
	cr_assert_eq(rs.size, offsetof(struct kvf_room_stats, now_ns));
	cr_assert_eq(rs.room_id, 0x22);
	cr_assert_eq(rs.now_ns, 0xababababababababull, "written past .size");
	rs.size = 2;
	cr_assert_eq(kvf_room_stats(eng, s_ok, &rs), -EINVAL);
	rs.size = sizeof(rs);
	cr_assert_eq(kvf_room_stats(eng, (kvf_room){ 0 }, &rs), -EINVAL);
	cr_assert_eq(kvf_room_stats(eng, s_ok, NULL), -EINVAL);
}

/* A snapshot a reader holds is never rewritten; with every buffer held the
 * scheduler skips, and catches up when one is let go. */
Test(metrics, held_snapshots_are_not_rewritten)
{
	struct kvf_snap *held[KVF_SNAP_BUFS];
	uint64_t seq0;

	for (int i = 0; i < KVF_SNAP_BUFS; i++) {
		cr_assert_eq(kvf_metrics_publish(eng), 0);
		held[i] = kvf_snap_get(eng->metrics);
	}
	seq0 = held[0]->seq;
	cr_assert_eq(kvf_metrics_publish(eng), -EBUSY);
	cr_assert_eq(eng->metrics->skipped, 1);
	cr_assert_eq(held[0]->seq, seq0);
	kvf_snap_put(held[0]);
	cr_assert_eq(kvf_metrics_publish(eng), 0);
	cr_assert_eq(kvf_snap_get(eng->metrics), held[0]); /* reused, with the next seq */
	cr_assert_eq(held[0]->seq, seq0 + KVF_SNAP_BUFS);
	kvf_snap_put(held[0]);
	kvf_snap_put(held[1]);
	kvf_snap_put(held[2]);
}

/* kvf_progress publishes every metrics.interval_ms of the engine clock. */
Test(metrics, progress_publishes_on_the_interval)
{
	uint64_t seq = eng->metrics->seq;

	fake_clock += 2 * SEC;
	kvf_progress(eng);
	cr_assert_eq(eng->metrics->seq, seq + 1);
	kvf_progress(eng);
	cr_assert_eq(eng->metrics->seq, seq + 1);
	fake_clock += SEC;
	kvf_progress(eng);
	cr_assert_eq(eng->metrics->seq, seq + 2);
}

/* A receiver's ROOM_INFO to a peer on another connection id than the last
 * one is a reconnect (ids are never reused). */
Test(metrics, reconnects_are_counted_per_peer)
{
	f.conn = 9; /* the connection to 10.0.0.1 was lost; a new one */
	receiver_inited(0x33, "10.0.0.1:18515");
	receiver_inited(0x34, "10.0.0.1:18515");
	f.conn = 10; /* another peer's first connection: not a reconnect */
	receiver_inited(0x35, "10.0.0.2:18515");
	scrape(&pa);
	cr_assert_eq(prom_get(&pa, "kvferry_reconnects_total"), 1);
}

/* A receiver's landing is when the poller took the write (its stamp in the
 * event), not when the scheduler applied it: the wait between goes to
 * kvferry_landing_wait_seconds. An unstamped event (setup's r_ok) adds no
 * sample. */
Test(metrics, landing_is_the_pollers_time_and_its_wait_is_a_histogram)
{
	struct kvf_room_stats rs = KVF_ROOM_STATS_INIT;
	uint64_t wait;

	push_data_done_at(eng, r_wait, 7, kvf_monotonic_ns() - 30 * (SEC / 1000));
	kvf_progress(eng);
	cr_assert_eq(kvf_poll(eng, r_wait), KVF_SUCCESS);
	cr_assert_eq(kvf_room_stats(eng, r_wait, &rs), 0);
	cr_assert_eq(rs.success_ns, fake_clock);
	wait = rs.success_ns - rs.last_chunk_ns;
	cr_assert(wait >= 30 * (SEC / 1000) && wait < 100 * (SEC / 1000), "wait %lu ns",
		  (unsigned long)wait);
	cr_assert_eq(rs.first_chunk_ns, rs.last_chunk_ns);
	scrape(&pa);
	cr_assert_eq(prom_get(&pa, "kvferry_landing_wait_seconds_count{role=\"receiver\"}"), 1);
	cr_assert_eq(prom_get(&pa, "kvferry_landing_wait_seconds_bucket{role=\"receiver\","
			      "le=\"0.025\"}"), 0);
	cr_assert_eq(prom_get(&pa, "kvferry_landing_wait_seconds_bucket{role=\"receiver\","
			      "le=\"0.1\"}"), 1);
	cr_assert(prom_get(&pa, "kvferry_landing_wait_seconds_sum{role=\"receiver\"}") >= 0.03);
}

/* The token's exchange, from the transport's counters: every reason has its
 * series (0 included), so an alert on one needs no "absent" rule. */
Test(metrics, auth_refusals_by_reason)
{
	static struct kvf_snap snap; /* zero: no rooms, no histograms */
	struct kvf_buf b = { 0 };

	snap.have_tst = true;
	snap.tst.auth_ok = 3;
	snap.tst.auth_refused[KVF_AUTH_REPLAY] = 2;
	snap.tst.auth_refused[KVF_AUTH_TIMEOUT] = 1;
	snap.tst.auth_dropped = 5;
	kvf_render_metrics(&snap, &b);
	cr_assert(!b.failed && b.p);
	cr_assert(prom_parse(&pa, b.p), "%s", pa.err);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_ok_total"), 3);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_refused_total{reason=\"replay\"}"), 2);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_refused_total{reason=\"timeout\"}"), 1);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_refused_total{reason=\"bad_token\"}"), 0);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_refused_total{reason=\"peer_refused\"}"), 0);
	cr_expect_eq(prom_get(&pa, "kvferry_auth_dropped_frames_total"), 5);
	free(b.p);
}

/* The connection table's refusals (rdma.max_conns), from the transport. */
Test(metrics, connections_over_max)
{
	static struct kvf_snap snap; /* zero: no rooms, no histograms */
	struct kvf_buf b = { 0 };

	snap.have_tst = true;
	snap.tst.conns_over_max = 7;
	kvf_render_metrics(&snap, &b);
	cr_assert(!b.failed && b.p);
	cr_assert(prom_parse(&pa, b.p), "%s", pa.err);
	cr_expect_eq(prom_get(&pa, "kvferry_connections_over_max_total"), 7);
	free(b.p);
}

/* ROOM_INFOs answered at once with ABORT (room refused; issue 43). */
Test(metrics, room_infos_refused)
{
	static struct kvf_snap snap; /* zero: no rooms, no histograms */
	struct kvf_buf b = { 0 };

	snap.st.room_infos_refused = 4;
	kvf_render_metrics(&snap, &b);
	cr_assert(!b.failed && b.p);
	cr_assert(prom_parse(&pa, b.p), "%s", pa.err);
	cr_expect_eq(prom_get(&pa, "kvferry_room_infos_refused_total"), 4);
	cr_expect_eq(prom_get(&pa, "kvferry_room_failures_total{role=\"receiver\",reason=\"refused\"}"), 0);
	free(b.p);
}

Test(metrics, rails_each_have_their_series)
{
	static struct kvf_snap snap; /* zero: no rooms, no histograms */
	struct kvf_buf b = { 0 };

	snap.nrails = 2;
	snap.rails[0] = (struct kvf_rail_stats){ .rail = 0, .device = "mlx5_0", .bytes = 4096,
						 .writes = 2, .conns_live = 1 };
	snap.rails[1] = (struct kvf_rail_stats){ .rail = 1, .device = "mlx5_1", .wr_errors = 3,
						 .conns_lost = 1, .state = KVF_RAIL_PORT_DOWN };
	kvf_render_metrics(&snap, &b);
	cr_assert(!b.failed && b.p);
	cr_assert(prom_parse(&pa, b.p), "%s", pa.err);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_posted_bytes_total{rail=\"0\",device=\"mlx5_0\"}"), 4096);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_writes_total{rail=\"0\",device=\"mlx5_0\"}"), 2);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_wr_errors_total{rail=\"1\",device=\"mlx5_1\"}"), 3);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_connections{rail=\"0\",device=\"mlx5_0\"}"), 1);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_connections_lost_total{rail=\"1\",device=\"mlx5_1\"}"), 1);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_state{rail=\"1\",device=\"mlx5_1\",state=\"port_down\"}"), 1);
	cr_expect_eq(prom_get(&pa, "kvferry_rail_state{rail=\"0\",device=\"mlx5_0\",state=\"up\"}"), 1);
	free(b.p);
}
