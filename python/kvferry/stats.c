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

/* The namers of KVF_STATS_FIELDS' arrays (A(..., names, ...): names##_name). */
static const char *poll_name(int i) { return kvf_poll_str(i); }
static const char *fail_reason_name(int i) { return kvf_fail_reason_str((enum kvf_fail_reason)i); }
static const char *deadline_name(int i) { return kvf_deadline_str((enum kvf_deadline)i); }
static const char *ignore_reason_name(int i) { return kvf_ignore_reason_str((enum kvf_ignore_reason)i); }
static const char *auth_refusal_name(int i) { return kvf_auth_refusal_str((enum kvf_auth_refusal)i); }

/* struct kvf_stats as Python sees it, field for field from KVF_STATS_FIELDS
 * (<kvferry/stats.h>): a count or gauge an int, an array a dict by name. */
#define STATS_DESC_N(f, from, doc) { #f, doc },
#define STATS_DESC_A(f, len, num, names, from, doc) { #f, doc " (a dict by name)" },
static PyStructSequence_Field stats_fields[] = {
	KVF_STATS_FIELDS(STATS_DESC_N, STATS_DESC_A)
	{ NULL, NULL },
};
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
#define STATS_PUT_N(f, from, doc) U64(f);
#define STATS_PUT_A(f, len, num, names, from, doc) SET(named_counts(st->f, num, names##_name));
	KVF_STATS_FIELDS(STATS_PUT_N, STATS_PUT_A)
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
