/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the struct-sequence types kvferry.Stats (Engine.stats()),
 * kvferry.Failure (Room.failure()) and kvferry.RoomStats (Room.stats()), their
 * fields and descriptors, and the functions that fill one from the library's
 * struct kvf_stats, kvf_failure and kvf_room_stats.
 */
#define PY_SSIZE_T_CLEAN
#include "binding.h"

#include <string.h>

PyTypeObject StatsType, FailureType, RoomStatsType;

/* {name: value} for an array indexed by an enum with a name function. */
static PyObject *named_counts(const uint64_t *v, int n, const char *(*name)(int))
{
	PyObject *d = PyDict_New(), *x;

	for (int i = 0; d && i < n; i++) {
		x = PyLong_FromUnsignedLongLong(v[i]);
		if (!x || PyDict_SetItemString(d, name(i), x) < 0) {
			Py_XDECREF(x);
			Py_CLEAR(d);
			break;
		}
		Py_DECREF(x);
	}
	return d;
}

static const char *poll_name(int i) { return kvf_poll_str(i); }
static const char *reason_name(int i) { return kvf_fail_reason_str((enum kvf_fail_reason)i); }
static const char *deadline_name(int i) { return kvf_deadline_str((enum kvf_deadline)i); }
static const char *ignore_name(int i) { return kvf_ignore_reason_str((enum kvf_ignore_reason)i); }
static const char *auth_name(int i) { return kvf_auth_refusal_str((enum kvf_auth_refusal)i); }

/* struct kvf_stats as Python sees it, in its order: U(field, doc) a counter or
 * gauge, C(field, n, namefn, doc) an array of counts as a dict by name. The
 * field list, the descriptor and kvf_py_stats() all come from this one table,
 * and the size check below fails the build when the struct gains a field the
 * table lacks. */
#define STATS_FIELDS(U, C) \
	C(rooms, KVF_POLL_NUM, poll_name, "live rooms per state name") \
	U(inflight, "sender rooms in TRANSFERRING") \
	U(unquiescent, "terminal rooms whose memory is still held") \
	U(created, "rooms ever created") \
	U(released, "rooms ever released") \
	C(failures, KVF_FAIL_NUM, reason_name, "failed rooms per reason name") \
	C(deadlines, KVF_DL_NUM, deadline_name, "rooms failed per deadline name") \
	C(ignored, KVF_IGN_NUM, ignore_name, "events not applied, per reason name") \
	U(tombstones_created, NULL) \
	U(tombstones_applied, NULL) \
	U(tombstones_expired, NULL) \
	U(tombstones_evicted, NULL) \
	U(tombstones_live, NULL) \
	U(early_infos_parked, NULL) \
	U(early_infos_applied, NULL) \
	U(early_infos_expired, NULL) \
	U(early_infos_evicted, NULL) \
	U(early_infos_replaced, NULL) \
	U(early_infos_live, NULL) \
	U(bad_frames, NULL) \
	U(ring_stalls, NULL) \
	U(events, NULL) \
	U(oldest_inflight_ns, NULL) \
	U(staged_bytes, NULL) \
	U(staged_chunks, NULL) \
	U(stage_waits, NULL) \
	U(stage_slots_busy, NULL) \
	U(wrs_posted, NULL) \
	U(doorbells, NULL) \
	U(completions, NULL) \
	U(poller_sleeps, NULL) \
	U(early_infos_refused, NULL) \
	U(connects, NULL) \
	U(connect_backoffs, NULL) \
	U(conns_live, NULL) \
	U(conns_held, NULL) \
	U(keepalives_sent, NULL) \
	U(keepalives_acked, NULL) \
	U(keepalives_late, NULL) \
	U(calls_concurrent, NULL) \
	U(auth_ok, "peers whose proof of rdma.auth_token held") \
	C(auth_refused, KVF_AUTH_NUM, auth_name, "connections refused before they carried anything, per reason name") \
	U(auth_dropped, "frames dropped unread from peers that had not proved themselves") \
	U(conns_over_max, "connections refused: rdma.max_conns were held") \
	U(room_infos_refused, "ROOM_INFOs answered at once with ABORT (room refused, taken or finished)") \
	U(frame_bytes, "gauge: bytes registered for frames (shared receive queue, send frames, AUTH pages)") \
	U(srq_low, "shared receive queue limit events (it ran low)") \
	U(rx_stray, "shared receive completions for a queue pair no longer known (frame reused)") \
	U(tx_frame_waits, "control frames that waited for a free send frame (rdma.send_frames)") \
	U(info_bytes_rx, "bytes of ROOM_INFO and ROOM_INFO_CONT frames received") \
	U(conns_idle_closed, "peer connections closed: no room used them for rdma.idle_close_s")

#define STATS_DESC_U(f, doc) { #f, doc },
#define STATS_DESC_C(f, n, fn, doc) { #f, doc },
static PyStructSequence_Field stats_fields[] = {
	STATS_FIELDS(STATS_DESC_U, STATS_DESC_C)
	{ NULL, NULL },
};
#define STATS_SIZE_U(f, doc) +sizeof(((struct kvf_stats *)0)->f)
#define STATS_SIZE_C(f, n, fn, doc) +sizeof(((struct kvf_stats *)0)->f)
_Static_assert(2 * sizeof(uint32_t) STATS_FIELDS(STATS_SIZE_U, STATS_SIZE_C) ==
	       sizeof(struct kvf_stats), "struct kvf_stats has a field STATS_FIELDS lacks");
PyStructSequence_Desc stats_desc = {
	"kvferry.Stats", "Counters and gauges of an engine (struct kvf_stats).", stats_fields,
	(int)(sizeof(stats_fields) / sizeof(stats_fields[0])) - 1,
};

/* In the functions below: item i++ of their o, or o dropped and NULL. */
#define SET(expr)                                                   \
	do {                                                        \
		PyObject *x_ = (expr);                              \
		if (!x_) {                                          \
			Py_DECREF(o);                               \
			return NULL;                                \
		}                                                   \
		PyStructSequence_SET_ITEM(o, i++, x_);              \
	} while (0)
#define U64(f) SET(PyLong_FromUnsignedLongLong(st->f)) /* also below: the room's stats */

PyObject *kvf_py_stats(const struct kvf_stats *st)
{
	PyObject *o;
	int i = 0;

	o = PyStructSequence_New(&StatsType);
	if (!o)
		return NULL;
#define STATS_PUT_U(f, doc) U64(f);
#define STATS_PUT_C(f, n, fn, doc) SET(named_counts(st->f, n, fn));
	STATS_FIELDS(STATS_PUT_U, STATS_PUT_C)
	return o;
}

static PyStructSequence_Field failure_fields[] = {
	{ "reason", "failure reason name ('none' when not failed)" },
	{ "reason_code", "enum kvf_fail_reason" },
	{ "deadline", "which deadline, for reason 'deadline'" },
	{ "err", "positive errno where one applies, else 0" },
	{ "wc_status", "ibv_wc_status for 'wc-error', else -1" },
	{ "vendor_err", "from the work completion" },
	{ "detail", "human-readable, never empty when failed" },
	{ NULL, NULL },
};
PyStructSequence_Desc failure_desc = {
	"kvferry.Failure", "Why a room failed (struct kvf_failure).", failure_fields, 7,
};

PyObject *kvf_py_failure(const struct kvf_failure *fl)
{
	PyObject *o;
	int i = 0;

	o = PyStructSequence_New(&FailureType);
	if (!o)
		return NULL;
	SET(PyUnicode_FromString(kvf_fail_reason_str(fl->reason)));
	SET(PyLong_FromLong(fl->reason));
	SET(PyUnicode_FromString(kvf_deadline_str(fl->deadline)));
	SET(PyLong_FromLong(fl->err));
	SET(PyLong_FromLong(fl->wc_status));
	SET(PyLong_FromUnsignedLong(fl->vendor_err));
	SET(PyUnicode_FromString(fl->detail));
	return o;
}

static PyStructSequence_Field room_stats_fields[] = {
	{ "role", "'sender' or 'receiver'" },
	{ "state", "state name" },
	{ "deadline", "deadline armed now" },
	{ "quiescent", NULL },
	{ "room_id", NULL },
	{ "now_ns", NULL },
	{ "created_ns", NULL },
	{ "info_ns", NULL },
	{ "send_ns", NULL },
	{ "first_chunk_ns", NULL },
	{ "last_chunk_ns", NULL },
	{ "success_ns", NULL },
	{ "state_ns", NULL },
	{ "deadline_ns", NULL },
	{ "last_event_ns", NULL },
	{ "bytes", NULL },
	{ "chunks_done", NULL },
	{ "chunks_total", NULL },
	{ "outstanding", NULL },
	{ "conn", NULL },
	{ "fail_reason", NULL },
	{ "last_event", NULL },
	{ "peer", NULL },
	{ NULL, NULL },
};
PyStructSequence_Desc room_stats_desc = {
	"kvferry.RoomStats", "One room as the engine sees it (struct kvf_room_stats).",
	room_stats_fields, 23,
};

PyObject *kvf_py_room_stats(const struct kvf_room_stats *st)
{
	PyObject *o;
	int i = 0;

	o = PyStructSequence_New(&RoomStatsType);
	if (!o)
		return NULL;
	SET(PyUnicode_FromString(st->role == KVF_SENDER ? "sender" : "receiver"));
	SET(PyUnicode_FromString(kvf_poll_str(st->state)));
	SET(PyUnicode_FromString(kvf_deadline_str((enum kvf_deadline)st->deadline)));
	SET(PyBool_FromLong(st->quiescent));
	U64(room_id);
	U64(now_ns);
	U64(created_ns);
	U64(info_ns);
	U64(send_ns);
	U64(first_chunk_ns);
	U64(last_chunk_ns);
	U64(success_ns);
	U64(state_ns);
	U64(deadline_ns);
	U64(last_event_ns);
	U64(bytes);
	SET(PyLong_FromUnsignedLong(st->chunks_done));
	SET(PyLong_FromUnsignedLong(st->chunks_total));
	SET(PyLong_FromUnsignedLong(st->outstanding));
	SET(PyLong_FromUnsignedLong(st->conn));
	SET(PyUnicode_FromString(kvf_fail_reason_str((enum kvf_fail_reason)st->fail_reason)));
	SET(PyUnicode_FromStringAndSize(st->last_event, (Py_ssize_t)strnlen(st->last_event,
								    sizeof(st->last_event))));
	SET(PyUnicode_FromStringAndSize(st->peer, (Py_ssize_t)strnlen(st->peer, sizeof(st->peer))));
	return o;
}
#undef U64
#undef SET
