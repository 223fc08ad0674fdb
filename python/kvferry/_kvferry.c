/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the CPython binding of include/kvferry/kvferry.h.
 *
 * Engine and Room are thin: every method is one library call plus the
 * conversions. What the binding adds is what C callers are trusted with:
 *   - an engine is used from the thread that opened it (kvferry.h's rule);
 *     a call from another thread raises WrongThreadError instead of
 *     racing the room table. close() is the exception, as in C;
 *   - memory registered from a buffer object stays exported (a memoryview
 *     is kept) until the engine is closed, so it cannot be freed or resized
 *     under the NIC;
 *   - a negative errno becomes KVFerryError (an OSError) carrying the
 *     room's failure reason and detail when the room failed;
 *   - the GIL is released around kvf_engine_open_with and kvf_engine_close,
 *     which start and join the transport's threads (and can wait on a
 *     device), so the poller's log lines can reach Python meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvferry/kvferry.h>

#include "geometry.h"
#include "logsink.h"
#include "rails.h"

static PyObject *KVFerryError;     /* OSError subclass */
static PyObject *WrongThreadError; /* RuntimeError subclass */
static PyTypeObject StatsType, FailureType, RoomStatsType;

/* ------------------------------------------------------------------- engine */

typedef struct {
	PyObject_HEAD
	kvf_engine *eng;
	unsigned long owner; /* PyThread_get_thread_ident() of the opener */
	PyObject *keep;      /* memoryviews of the pool's buffer objects */
	PyObject *regions;   /* region id -> memoryviews of its buffer objects */
	PyObject *weakrefs;
	bool waiting;        /* the owner is in wait() without the GIL */
} EngineObject;

typedef struct {
	PyObject_HEAD
	EngineObject *engine; /* strong: a room keeps its engine object alive */
	kvf_room h;
	uint64_t id;
	int role;
} RoomObject;

static PyTypeObject EngineType, RoomType;

static int engine_usable(EngineObject *e)
{
	unsigned long me;

	if (!e->eng) {
		PyErr_SetString(PyExc_ValueError, "the kvferry engine is closed");
		return -1;
	}
	me = PyThread_get_thread_ident();
	if (me != e->owner) {
		PyErr_Format(WrongThreadError,
			     "this kvferry engine belongs to thread %lu (the one that opened it); "
			     "called from thread %lu",
			     e->owner, me);
		return -1;
	}
	return 0;
}

/* Raise KVFerryError for rc < 0, with the room's failure when it failed. */
static PyObject *raise_rc(int rc, const char *what, RoomObject *room)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;
	PyObject *exc, *v;
	int failed = 0;
	char msg[400];

	if (room && room->engine->eng &&
	    kvf_failure(room->engine->eng, room->h, &fl) == 0 && fl.reason != KVF_FAIL_NONE)
		failed = 1;
	if (failed)
		snprintf(msg, sizeof(msg), "%s: %s (room %#" PRIx64 " failed: %s: %s)", what,
			 strerror(-rc), room->id, kvf_fail_reason_str(fl.reason), fl.detail);
	else if (room)
		snprintf(msg, sizeof(msg), "%s: %s (room %#" PRIx64 ")", what, strerror(-rc),
			 room->id);
	else
		snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-rc));
	exc = PyObject_CallFunction(KVFerryError, "is", -rc, msg);
	if (!exc)
		return NULL;
	if (failed) {
		v = PyUnicode_FromString(kvf_fail_reason_str(fl.reason));
		if (!v || PyObject_SetAttrString(exc, "reason", v) < 0)
			goto fail;
		Py_DECREF(v);
		v = PyUnicode_FromString(fl.detail);
		if (!v || PyObject_SetAttrString(exc, "detail", v) < 0)
			goto fail;
		Py_DECREF(v);
	}
	if (room) {
		v = PyLong_FromUnsignedLongLong(room->id);
		if (!v || PyObject_SetAttrString(exc, "room_id", v) < 0)
			goto fail;
		Py_DECREF(v);
	}
	PyErr_SetObject(KVFerryError, exc);
	Py_DECREF(exc);
	return NULL;
fail:
	Py_XDECREF(v);
	Py_DECREF(exc);
	return NULL;
}

/* One override from a dict item: "key=value" with the value as libconfig
 * reads it (bool as true/false, numbers as written, strings bare). */
static PyObject *override_item(PyObject *k, PyObject *v)
{
	if (!PyUnicode_Check(k)) {
		PyErr_Format(PyExc_TypeError, "override keys are strings ('rdma.device'), not %.80s",
			     Py_TYPE(k)->tp_name);
		return NULL;
	}
	if (PyBool_Check(v))
		return PyUnicode_FromFormat("%U=%s", k, v == Py_True ? "true" : "false");
	if (PyLong_Check(v) || PyFloat_Check(v))
		return PyUnicode_FromFormat("%U=%R", k, v);
	if (PyUnicode_Check(v))
		return PyUnicode_FromFormat("%U=%U", k, v);
	PyErr_Format(PyExc_TypeError, "override '%U': the value must be a str, int, float or bool, "
		     "not %.80s", k, Py_TYPE(v)->tp_name);
	return NULL;
}

/* The overrides as a list of str: from a dict, or a sequence of "k=v". */
static PyObject *override_list(PyObject *ov)
{
	PyObject *out = PyList_New(0), *k, *v, *s, *seq;
	Py_ssize_t pos = 0;

	if (!out)
		return NULL;
	if (!ov || ov == Py_None)
		return out;
	if (PyDict_Check(ov)) {
		while (PyDict_Next(ov, &pos, &k, &v)) {
			s = override_item(k, v);
			if (!s || PyList_Append(out, s) < 0) {
				Py_XDECREF(s);
				Py_DECREF(out);
				return NULL;
			}
			Py_DECREF(s);
		}
		return out;
	}
	if (PyUnicode_Check(ov)) {
		Py_DECREF(out);
		PyErr_SetString(PyExc_TypeError,
				"overrides is a dict {'rdma.device': 'mlx5_0'} or a list of "
				"'key=value' strings, not one string");
		return NULL;
	}
	seq = PySequence_Fast(ov, "overrides is a dict or a list of 'key=value' strings");
	if (!seq) {
		Py_DECREF(out);
		return NULL;
	}
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		s = PySequence_Fast_GET_ITEM(seq, i);
		if (!PyUnicode_Check(s)) {
			PyErr_Format(PyExc_TypeError, "override %zd is a %.80s, not a 'key=value' str",
				     i, Py_TYPE(s)->tp_name);
			goto fail;
		}
		if (PyList_Append(out, s) < 0)
			goto fail;
	}
	Py_DECREF(seq);
	return out;
fail:
	Py_DECREF(seq);
	Py_DECREF(out);
	return NULL;
}

static int engine_init(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "config_path", "overrides", NULL };
	PyObject *path_obj = Py_None, *ov = NULL, *list, *path_bytes = NULL;
	const char *path = NULL, **strs = NULL;
	kvf_engine *eng = NULL;
	char err[512] = "";
	Py_ssize_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:Engine", kwlist, &path_obj, &ov))
		return -1;
	if (self->eng) {
		PyErr_SetString(PyExc_RuntimeError, "Engine.__init__ called twice");
		return -1;
	}
	if (path_obj != Py_None) {
		if (!PyUnicode_FSConverter(path_obj, &path_bytes))
			return -1;
		path = PyBytes_AS_STRING(path_bytes);
	}
	list = override_list(ov);
	if (!list)
		goto out;
	n = PyList_GET_SIZE(list);
	strs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*strs));
	if (!strs) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		strs[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i));
		if (!strs[i])
			goto out;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = kvf_engine_open_with(path, strs, (size_t)n, err, sizeof(err), &eng);
	Py_END_ALLOW_THREADS
	if (rc) {
		PyObject *exc = PyObject_CallFunction(KVFerryError, "is", -rc,
						      err[0] ? err : strerror(-rc));

		if (exc) {
			PyErr_SetObject(KVFerryError, exc);
			Py_DECREF(exc);
		}
		goto out;
	}
	self->eng = eng;
	self->owner = PyThread_get_thread_ident();
	self->keep = PyList_New(0);
	self->regions = PyDict_New();
out:
	PyMem_Free(strs);
	Py_XDECREF(list);
	Py_XDECREF(path_bytes);
	return self->eng && self->keep && self->regions ? 0 : -1;
}

/* Close from any thread (kvferry.h allows it): the pointer is cleared
 * before the GIL is let go, so the owner cannot reach a closing engine. */
static void engine_do_close(EngineObject *self)
{
	kvf_engine *eng = self->eng;

	self->eng = NULL;
	if (eng && self->waiting) {
		/* The owner sleeps in kvf_engine_wait on this engine: wake it
		 * (a write to its eventfd) and let it close on its way out. */
		uint64_t one = 1;

		if (write(kvf_engine_fd(eng), &one, sizeof(one)) < 0)
			PyErr_WarnEx(PyExc_RuntimeWarning, "kvferry: could not wake wait()", 1);
		return;
	}
	if (eng) {
		Py_BEGIN_ALLOW_THREADS
		kvf_engine_close(eng);
		Py_END_ALLOW_THREADS
	}
	/* Only now may the registered buffers go. */
	Py_CLEAR(self->keep);
	Py_CLEAR(self->regions);
}

static PyObject *engine_close(EngineObject *self, PyObject *unused)
{
	engine_do_close(self);
	Py_RETURN_NONE;
}

static void engine_dealloc(EngineObject *self)
{
	PyObject_GC_UnTrack(self);
	if (self->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)self);
	engine_do_close(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int engine_traverse(EngineObject *self, visitproc visit, void *arg)
{
	Py_VISIT(self->keep);
	Py_VISIT(self->regions);
	return 0;
}

static PyObject *engine_enter(EngineObject *self, PyObject *unused)
{
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *engine_exit(EngineObject *self, PyObject *args)
{
	engine_do_close(self);
	Py_RETURN_FALSE;
}

static PyObject *engine_listen_addr(EngineObject *self, PyObject *unused)
{
	char host[64];
	uint16_t port;
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_engine_listen_addr(self->eng, host, sizeof(host), &port);
	if (rc)
		return raise_rc(rc, "listen_addr", NULL);
	return Py_BuildValue("(sH)", host, port);
}

static PyObject *engine_endpoint(EngineObject *self, PyObject *unused)
{
	char buf[KVF_PY_MAX_RAILS * 80];
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_engine_endpoint(self->eng, buf, sizeof(buf));
	return rc ? raise_rc(rc, "endpoint", NULL) : PyUnicode_FromString(buf);
}

static PyObject *engine_rails(EngineObject *self, PyObject *unused)
{
	PyObject *out;
	int rc = 0;

	if (engine_usable(self) < 0)
		return NULL;
	out = kvf_py_rails(self->eng, &rc);
	return rc ? raise_rc(rc, "rails", NULL) : out;
}

/* A registered buffer's address: an int (what torch's data_ptr() gives),
 * or an object with the buffer protocol, writable and contiguous, at least
 * need bytes long, whose export (a memoryview) goes into keep. */
static int buffer_address(PyObject *keep, PyObject *o, Py_ssize_t i, uint64_t need, void **addr)
{
	PyObject *mv;
	Py_buffer *v;

	if (PyLong_Check(o)) {
		unsigned long long a = PyLong_AsUnsignedLongLong(o);

		if (PyErr_Occurred())
			return -1;
		if (!a) {
			PyErr_Format(PyExc_ValueError, "buffer %zd: address 0", i);
			return -1;
		}
		*addr = (void *)(uintptr_t)a;
		return 0;
	}
	if (!PyObject_CheckBuffer(o)) {
		PyErr_Format(PyExc_TypeError,
			     "buffer %zd: an int address or an object with the buffer protocol "
			     "(a numpy array), not %.80s", i, Py_TYPE(o)->tp_name);
		return -1;
	}
	mv = PyMemoryView_FromObject(o);
	if (!mv)
		return -1;
	v = PyMemoryView_GET_BUFFER(mv);
	if (v->readonly) {
		PyErr_Format(PyExc_ValueError, "buffer %zd: read-only (RDMA writes into it)", i);
		goto fail;
	}
	if (!PyBuffer_IsContiguous(v, 'A')) {
		PyErr_Format(PyExc_ValueError, "buffer %zd: not contiguous", i);
		goto fail;
	}
	if (v->len <= 0 || (uint64_t)v->len < need) {
		PyErr_Format(PyExc_ValueError, "buffer %zd: %zd bytes, %llu needed", i, v->len,
			     (unsigned long long)need);
		goto fail;
	}
	if (PyList_Append(keep, mv) < 0)
		goto fail;
	*addr = v->buf;
	Py_DECREF(mv);
	return 0;
fail:
	Py_DECREF(mv);
	return -1;
}

/* The buffers of a pool or region: addresses and item sizes (one int for
 * all, or one per buffer), each buffer at least nitems items long. The
 * exports of buffer objects go into *keep (a new list): the caller keeps it
 * while the memory is registered. */
struct bufset {
	uint32_t n;
	void **addr;
	uint64_t *size;
	PyObject *keep;
};

static void bufset_put(struct bufset *b)
{
	PyMem_Free(b->addr);
	PyMem_Free(b->size);
	Py_XDECREF(b->keep);
}

/* n item sizes into size: one int for every buffer, or a sequence of n. */
static int sizes_get(PyObject *sizes_obj, Py_ssize_t n, uint64_t *size)
{
	PyObject *sizes;
	int rc = -1;

	if (PyLong_Check(sizes_obj)) {
		unsigned long long v = PyLong_AsUnsignedLongLong(sizes_obj);

		if (PyErr_Occurred())
			return -1;
		for (Py_ssize_t i = 0; i < n; i++)
			size[i] = v;
		return 0;
	}
	sizes = PySequence_Fast(sizes_obj, "sizes must be an int or a sequence of ints");
	if (!sizes)
		return -1;
	if (PySequence_Fast_GET_SIZE(sizes) != n) {
		PyErr_Format(PyExc_ValueError, "%zd buffers but %zd item sizes", n,
			     PySequence_Fast_GET_SIZE(sizes));
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		size[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(sizes, i));
		if (PyErr_Occurred())
			goto out;
	}
	rc = 0;
out:
	Py_DECREF(sizes);
	return rc;
}

static int bufset_get(PyObject *bufs_obj, PyObject *sizes_obj, uint32_t nitems, struct bufset *b)
{
	PyObject *bufs;
	Py_ssize_t n;
	int rc = -1;

	memset(b, 0, sizeof(*b));
	bufs = PySequence_Fast(bufs_obj, "buffers must be a sequence (of int addresses or arrays)");
	if (!bufs)
		return -1;
	n = PySequence_Fast_GET_SIZE(bufs);
	if (n == 0 || n > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "buffers: at least one buffer");
		goto out;
	}
	b->n = (uint32_t)n;
	b->addr = PyMem_Calloc((size_t)n, sizeof(*b->addr));
	b->size = PyMem_Calloc((size_t)n, sizeof(*b->size));
	b->keep = PyList_New(0);
	if (!b->addr || !b->size || !b->keep) {
		if (!PyErr_Occurred())
			PyErr_NoMemory();
		goto out;
	}
	if (sizes_get(sizes_obj, n, b->size) < 0)
		goto out;
	for (Py_ssize_t i = 0; i < n; i++) {
		if (!b->size[i]) {
			PyErr_Format(PyExc_ValueError, "buffer %zd: item size 0", i);
			goto out;
		}
		if (buffer_address(b->keep, PySequence_Fast_GET_ITEM(bufs, i), i,
				   b->size[i] * (uint64_t)nitems, &b->addr[i]) < 0)
			goto out;
	}
	rc = 0;
out:
	Py_DECREF(bufs);
	return rc;
}

static PyObject *engine_register_pool(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "buffers", "block_sizes", "nblocks", NULL };
	PyObject *bufs_obj, *sizes_obj, *ret = NULL;
	unsigned int nblocks;
	struct bufset b;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOI:register_pool", kwlist, &bufs_obj,
					 &sizes_obj, &nblocks))
		return NULL;
	if (engine_usable(self) < 0)
		return NULL;
	if (bufset_get(bufs_obj, sizes_obj, nblocks, &b) < 0)
		goto out;
	rc = kvf_pool_register(self->eng, b.n, b.addr, b.size, nblocks);
	if (rc) {
		raise_rc(rc, "register_pool", NULL);
		goto out;
	}
	/* registered: the exports stay until close */
	if (PyList_SetSlice(self->keep, PyList_GET_SIZE(self->keep), PyList_GET_SIZE(self->keep),
			    b.keep) < 0)
		goto out;
	ret = Py_NewRef(Py_None);
out:
	bufset_put(&b);
	return ret;
}

static PyObject *engine_register_region(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "buffers", "item_sizes", "nitems", "geometry", NULL };
	struct kvf_region_desc d = KVF_REGION_DESC_INIT;
	PyObject *bufs_obj, *sizes_obj, *geom_obj = Py_None, *key = NULL, *ret = NULL;
	struct kvf_buf_geometry *geom = NULL;
	const char *name;
	unsigned int nitems;
	uint32_t region;
	struct bufset b;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sOOI|O:register_region", kwlist, &name,
					 &bufs_obj, &sizes_obj, &nitems, &geom_obj))
		return NULL;
	if (engine_usable(self) < 0)
		return NULL;
	if (bufset_get(bufs_obj, sizes_obj, nitems, &b) < 0)
		goto out;
	if (kvf_py_geometry_get(geom_obj, b.n, &geom) < 0)
		goto out;
	d.geom = geom;
	d.nbufs = b.n;
	d.name = name;
	d.nitems = nitems;
	d.bufs = b.addr;
	d.item_size = b.size;
	rc = kvf_region_register(self->eng, &d, &region);
	if (rc) {
		raise_rc(rc, "register_region", NULL);
		goto out;
	}
	/* this region's exports, dropped when it is unregistered */
	key = PyLong_FromUnsignedLong(region);
	if (!key || PyDict_SetItem(self->regions, key, b.keep) < 0)
		goto out;
	ret = Py_NewRef(key);
out:
	Py_XDECREF(key);
	PyMem_Free(geom);
	bufset_put(&b);
	return ret;
}

static PyObject *engine_unregister_region(EngineObject *self, PyObject *arg)
{
	unsigned long region = PyLong_AsUnsignedLong(arg);
	int rc;

	if (PyErr_Occurred() || engine_usable(self) < 0)
		return NULL;
	if (region > UINT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "region id out of range");
		return NULL;
	}
	rc = kvf_region_unregister(self->eng, (uint32_t)region);
	if (rc)
		return raise_rc(rc, "unregister_region", NULL);
	/* the memory is the caller's again */
	if (PyDict_DelItem(self->regions, arg) < 0)
		PyErr_Clear(); /* registered by address only: nothing was kept */
	Py_RETURN_NONE;
}

/* A configured deadline by its key ("deadlines.bootstrap_s"): seconds, 0 = off. */
static PyObject *engine_deadline_s(EngineObject *self, PyObject *arg)
{
	const char *key = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
	uint32_t s = 0;

	if (!key) {
		PyErr_SetString(PyExc_TypeError, "deadline_s(key): key is a str such as "
				"\"deadlines.bootstrap_s\"");
		return NULL;
	}
	if (engine_usable(self) < 0)
		return NULL;
	for (int d = KVF_DL_NONE + 1; d < KVF_DL_NUM; d++)
		if (!strcmp(kvf_deadline_key(d), key)) {
			int rc = kvf_engine_deadline_s(self->eng, d, &s);

			return rc ? raise_rc(rc, "deadline_s", NULL) : PyLong_FromUnsignedLong(s);
		}
	PyErr_Format(PyExc_ValueError, "deadline_s: %s is not a deadline key", key);
	return NULL;
}

/* What arrived for a sender room not created yet: kvf_sender_pending. */
static PyObject *engine_sender_pending(EngineObject *self, PyObject *arg)
{
	unsigned long long id = PyLong_AsUnsignedLongLong(arg);
	char buf[KVF_USER_DATA_MAX];
	uint32_t len = 0;
	int rc;

	if (PyErr_Occurred() || engine_usable(self) < 0)
		return NULL;
	rc = kvf_sender_pending(self->eng, id, buf, sizeof(buf), &len);
	if (rc == -ECANCELED)
		return Py_BuildValue("(iy#)", -1, "", (Py_ssize_t)0);
	if (rc < 0)
		return raise_rc(rc, "sender_pending", NULL);
	return Py_BuildValue("(iy#)", rc, buf, (Py_ssize_t)(len < sizeof(buf) ? len : sizeof(buf)));
}

static PyObject *room_new_obj(EngineObject *e, kvf_room h, uint64_t id, int role)
{
	RoomObject *r = PyObject_New(RoomObject, &RoomType);

	if (!r)
		return NULL;
	Py_INCREF(e);
	r->engine = e;
	r->h = h;
	r->id = id;
	r->role = role;
	return (PyObject *)r;
}

/* n > 1: a fan-out to n decode ranks (kvf_sender_create_fanout). */
static PyObject *engine_sender(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "room_id", "n", NULL };
	PyObject *id_obj;
	unsigned long long id;
	unsigned int n = 1;
	kvf_room h;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|I:sender", kwlist, &id_obj, &n))
		return NULL;
	id = PyLong_AsUnsignedLongLong(id_obj); /* "K" would not check the range */
	if (PyErr_Occurred() || engine_usable(self) < 0)
		return NULL;
	rc = kvf_sender_create_fanout(self->eng, id, n, &h);
	if (rc)
		return raise_rc(rc, "sender", NULL);
	return room_new_obj(self, h, id, KVF_SENDER);
}

/* A fan-in receiver: one room fed by the prefill ranks at peers. */
static int receiver_fanin(EngineObject *self, unsigned long long id, PyObject *peers_obj,
			  kvf_room *h)
{
	const char *peers[KVF_FAN_MAX];
	PyObject *seq = PySequence_Fast(peers_obj, "receiver: peers must be a sequence of str");
	Py_ssize_t m;
	int rc;

	if (!seq)
		return -EFAULT;
	m = PySequence_Fast_GET_SIZE(seq);
	if (m < 1 || m > KVF_FAN_MAX) {
		PyErr_Format(PyExc_ValueError, "receiver: %zd peers, 1 to %d", m, KVF_FAN_MAX);
		Py_DECREF(seq);
		return -EFAULT;
	}
	for (Py_ssize_t k = 0; k < m; k++) {
		peers[k] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, k));
		if (!peers[k]) {
			Py_DECREF(seq);
			return -EFAULT;
		}
	}
	rc = kvf_receiver_create_fanin(self->eng, id, peers, (uint32_t)m, h);
	Py_DECREF(seq); /* the strings were only read by the call */
	return rc;
}

static PyObject *engine_receiver(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "room_id", "peer", "peers", NULL };
	unsigned long long id;
	const char *peer = NULL;
	PyObject *peers = Py_None;
	kvf_room h;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "K|zO:receiver", kwlist, &id, &peer, &peers))
		return NULL;
	if (engine_usable(self) < 0)
		return NULL;
	if (peers != Py_None && peer) {
		PyErr_SetString(PyExc_TypeError, "receiver: peer or peers, not both");
		return NULL;
	}
	rc = peers != Py_None ? receiver_fanin(self, id, peers, &h)
			      : kvf_receiver_create(self->eng, id, peer, &h);
	if (rc == -EFAULT)
		return NULL; /* a Python error is set */
	if (rc)
		return raise_rc(rc, "receiver", NULL);
	return room_new_obj(self, h, id, KVF_RECEIVER);
}

static PyObject *engine_progress(EngineObject *self, PyObject *unused)
{
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_progress(self->eng);
	if (rc < 0)
		return raise_rc(rc, "progress", NULL);
	return PyLong_FromLong(rc);
}

/* wait(timeout_ms=-1): kvf_engine_wait without the GIL. A close from
 * another thread meanwhile wakes it and leaves the closing to it. */
static PyObject *engine_wait(EngineObject *self, PyObject *args)
{
	int timeout = -1, rc;
	kvf_engine *eng;

	if (!PyArg_ParseTuple(args, "|i:wait", &timeout) || engine_usable(self) < 0)
		return NULL;
	eng = self->eng;
	self->waiting = true;
	Py_BEGIN_ALLOW_THREADS
	rc = kvf_engine_wait(eng, timeout);
	Py_END_ALLOW_THREADS
	self->waiting = false;
	if (!self->eng) {
		self->eng = eng;
		engine_do_close(self);
		PyErr_SetString(PyExc_ValueError, "the kvferry engine was closed during wait()");
		return NULL;
	}
	if (rc == -EINTR)
		return PyErr_CheckSignals() < 0 ? NULL : Py_NewRef(Py_True);
	if (rc < 0)
		return raise_rc(rc, "wait", NULL);
	return PyBool_FromLong(rc);
}

static PyObject *engine_fileno(EngineObject *self, PyObject *unused)
{
	if (engine_usable(self) < 0)
		return NULL;
	return PyLong_FromLong(kvf_engine_fd(self->eng));
}

static PyObject *engine_wait_prepare(EngineObject *self, PyObject *unused)
{
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_engine_wait_prepare(self->eng);
	if (rc < 0)
		return raise_rc(rc, "wait_prepare", NULL);
	if (rc == INT_MAX)
		Py_RETURN_NONE;
	return PyFloat_FromDouble(rc / 1000.0);
}

static PyObject *engine_poll_many(EngineObject *self, PyObject *rooms)
{
	PyObject *seq, *out = NULL;
	Py_ssize_t n;

	if (engine_usable(self) < 0)
		return NULL;
	seq = PySequence_Fast(rooms, "poll_many takes a sequence of rooms");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	out = PyList_New(n);
	if (!out)
		goto out;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
		RoomObject *r = (RoomObject *)o;
		int st;

		if (!PyObject_TypeCheck(o, &RoomType)) {
			PyErr_Format(PyExc_TypeError, "poll_many: item %zd is a %.80s, not a Room", i,
				     Py_TYPE(o)->tp_name);
			Py_CLEAR(out);
			goto out;
		}
		if (r->engine != self) {
			PyErr_Format(PyExc_ValueError, "poll_many: room %zd belongs to another engine", i);
			Py_CLEAR(out);
			goto out;
		}
		st = kvf_poll(self->eng, r->h);
		if (st < 0) {
			raise_rc(st, "poll", r);
			Py_CLEAR(out);
			goto out;
		}
		PyList_SET_ITEM(out, i, PyLong_FromLong(st));
	}
out:
	Py_DECREF(seq);
	return out;
}

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
 * field list, the descriptor and engine_stats() all come from this one table,
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
	U(auth_dropped, "frames dropped unread from peers that had not proved themselves")

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
static PyStructSequence_Desc stats_desc = {
	"kvferry.Stats", "Counters and gauges of an engine (struct kvf_stats).", stats_fields,
	(int)(sizeof(stats_fields) / sizeof(stats_fields[0])) - 1,
};

static PyObject *engine_stats(EngineObject *self, PyObject *unused)
{
	struct kvf_stats st = KVF_STATS_INIT;
	PyObject *o;
	int rc, i = 0;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_stats(self->eng, &st);
	if (rc)
		return raise_rc(rc, "stats", NULL);
	o = PyStructSequence_New(&StatsType);
	if (!o)
		return NULL;
#define SET(expr)                                                   \
	do {                                                        \
		PyObject *x_ = (expr);                              \
		if (!x_) {                                          \
			Py_DECREF(o);                               \
			return NULL;                                \
		}                                                   \
		PyStructSequence_SET_ITEM(o, i++, x_);              \
	} while (0)
#define U64(f) SET(PyLong_FromUnsignedLongLong(st.f)) /* also below: the room's stats */
#define STATS_PUT_U(f, doc) U64(f);
#define STATS_PUT_C(f, n, fn, doc) SET(named_counts(st.f, n, fn));
	STATS_FIELDS(STATS_PUT_U, STATS_PUT_C)
	return o;
}

static PyObject *engine_dump(EngineObject *self, PyObject *unused)
{
	char *text = NULL;
	size_t len = 0;
	PyObject *s;
	FILE *fp;
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	fp = open_memstream(&text, &len);
	if (!fp)
		return PyErr_SetFromErrno(PyExc_OSError);
	rc = kvf_dump(self->eng, fp);
	fclose(fp);
	if (rc < 0) {
		free(text);
		return raise_rc(rc, "dump", NULL);
	}
	s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "backslashreplace");
	free(text);
	return s;
}

static PyObject *engine_get_closed(EngineObject *self, void *unused)
{
	return PyBool_FromLong(self->eng == NULL);
}

static PyObject *engine_get_owner(EngineObject *self, void *unused)
{
	return PyLong_FromUnsignedLong(self->owner);
}

static PyMethodDef engine_methods[] = {
	{ "close", (PyCFunction)engine_close, METH_NOARGS,
	  "Close the engine (any thread): rooms still live are dropped; buffers registered "
	  "from objects are let go after." },
	{ "__enter__", (PyCFunction)engine_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)engine_exit, METH_VARARGS, NULL },
	{ "listen_addr", (PyCFunction)engine_listen_addr, METH_NOARGS,
	  "(host, port) the listener is bound to (rail 0's with several devices)." },
	{ "endpoint", (PyCFunction)engine_endpoint, METH_NOARGS,
	  "'host:port[,host:port...]': every rail's listener, what a prefill publishes; "
	  "a receiver's peer may be such a list." },
	{ "rails", (PyCFunction)engine_rails, METH_NOARGS,
	  "[{rail, device, addr, port, state, bytes, writes, wr_errors, conns_live, "
	  "conns_lost, connects}]: one dict a device (rdma.devices)." },
	{ "register_pool", (PyCFunction)(void (*)(void))engine_register_pool,
	  METH_VARARGS | METH_KEYWORDS,
	  "register_pool(buffers, block_sizes, nblocks): the KV pool, once, before any room. "
	  "buffers: int addresses or writable contiguous buffer objects (kept until close); "
	  "block_sizes: one int or one per buffer." },
	{ "register_region", (PyCFunction)(void (*)(void))engine_register_region,
	  METH_VARARGS | METH_KEYWORDS,
	  "register_region(name, buffers, item_sizes, nitems, geometry=None) -> region id: a "
	  "named index space (kv pages, aux rows, state slots) matched with the peer's by "
	  "name. buffers as register_pool's (objects kept until unregistered or closed). "
	  "geometry: one (page_tokens, heads, head0, head_bytes, layer, kind) per buffer, for "
	  "ranks of different TP or PP (kvferry.h, struct kvf_buf_geometry)." },
	{ "unregister_region", (PyCFunction)engine_unregister_region, METH_O,
	  "unregister_region(region): KVFerryError EBUSY while a live room uses it." },
	{ "sender", (PyCFunction)(void (*)(void))engine_sender, METH_VARARGS | METH_KEYWORDS,
	  "sender(room_id, n=1) -> Room (prefill side); n > 1: a fan-out to n decode ranks, "
	  "each joining with its own ROOM_INFO" },
	{ "receiver", (PyCFunction)(void (*)(void))engine_receiver, METH_VARARGS | METH_KEYWORDS,
	  "receiver(room_id, peer=None, peers=None) -> Room (decode side); peer 'host:port' "
	  "of the prefill, or peers: the prefill ranks of a fan-in" },
	{ "deadline_s", (PyCFunction)engine_deadline_s, METH_O,
	  "deadline_s(key) -> int: the configured seconds of a deadline by its key "
	  "(\"deadlines.bootstrap_s\", ...), 0 = off." },
	{ "sender_pending", (PyCFunction)engine_sender_pending, METH_O,
	  "sender_pending(room_id) -> (n, user_data): ROOM_INFOs that arrived for a sender "
	  "room not created yet (n, and the first one's user data); (0, b'') none; (-1, b'') "
	  "the peer's ABORT arrived instead. Read after progress()." },
	{ "progress", (PyCFunction)engine_progress, METH_NOARGS,
	  "Drain events, expire deadlines, post queued work: once per scheduler iteration. "
	  "Returns the number of events and expiries applied." },
	{ "wait", (PyCFunction)engine_wait, METH_VARARGS,
	  "wait(timeout_ms=-1) -> bool: sleep (GIL released) until the poller pushed an event, "
	  "a deadline falls due or timeout_ms passes (< 0: only those); True when work may be "
	  "pending. Call progress() after it." },
	{ "fileno", (PyCFunction)engine_fileno, METH_NOARGS,
	  "An fd readable when there is work after wait_prepare() (asyncio's add_reader); "
	  "never read or close it." },
	{ "wait_prepare", (PyCFunction)engine_wait_prepare, METH_NOARGS,
	  "Announce a sleep on fileno(): returns the seconds to sleep at most (0.0: work "
	  "pending, call progress() now; None: nothing falls due on a clock)." },
	{ "poll_many", (PyCFunction)engine_poll_many, METH_O,
	  "poll_many(rooms) -> list of states (ints, as kvferry.Poll), in one call" },
	{ "stats", (PyCFunction)engine_stats, METH_NOARGS, "kvferry.Stats" },
	{ "dump", (PyCFunction)engine_dump, METH_NOARGS, "One line per live room, as text." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef engine_getset[] = {
	{ "closed", (getter)engine_get_closed, NULL, "True once closed", NULL },
	{ "owner_thread", (getter)engine_get_owner, NULL,
	  "threading.get_ident() of the thread that may call it", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject EngineType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "kvferry.Engine",
	.tp_basicsize = sizeof(EngineObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "Engine(config_path=None, overrides=None): a kvferry engine. overrides: a dict "
		  "{'rdma.device': 'mlx5_0', 'rdma.listen_port': 0} or a list of 'key=value'. "
		  "Used from the thread that opened it.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)engine_init,
	.tp_dealloc = (destructor)engine_dealloc,
	.tp_traverse = (traverseproc)engine_traverse,
	.tp_weaklistoffset = offsetof(EngineObject, weakrefs),
	.tp_methods = engine_methods,
	.tp_getset = engine_getset,
};

/* --------------------------------------------------------------------- rooms */

/* Index lists: block ids as uint32. A 1-d buffer of 4-byte ints that is
 * contiguous is used in place (numpy int32/uint32, SGLang's kv_indices);
 * any other integer buffer (int64 ...) or sequence of ints is converted. */
struct idx {
	const uint32_t *v;
	uint32_t n;
	uint32_t *owned;
	Py_buffer view;
	int have_view;
};

static void idx_put(struct idx *x)
{
	if (x->have_view)
		PyBuffer_Release(&x->view);
	PyMem_Free(x->owned);
}

static int idx_store(struct idx *x, Py_ssize_t i, long long v, int neg)
{
	if (neg || v < 0 || (unsigned long long)v > UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "index %zd is %s%lld: block ids are 0 to 4294967295",
			     i, neg ? "negative, " : "", v);
		return -1;
	}
	x->owned[i] = (uint32_t)v;
	return 0;
}

static int idx_alloc(struct idx *x, Py_ssize_t n)
{
	if (n == 0) {
		PyErr_SetString(PyExc_ValueError, "empty index list");
		return -1;
	}
	if (n > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "index list longer than 2^32-1");
		return -1;
	}
	x->n = (uint32_t)n;
	x->owned = PyMem_Malloc((size_t)n * sizeof(uint32_t));
	if (!x->owned) {
		PyErr_NoMemory();
		return -1;
	}
	x->v = x->owned;
	return 0;
}

/* A buffer of any integer format copied into x's own list, each id checked. */
static int idx_convert(struct idx *x, char code)
{
	Py_buffer *b = &x->view;

	if (idx_alloc(x, b->shape[0]) < 0)
		return -1;
	for (Py_ssize_t i = 0; i < b->shape[0]; i++) {
		const char *p = (const char *)b->buf + i * b->strides[0];
		int is_signed = code >= 'a';
		long long sv = 0;
		unsigned long long uv = 0;

		switch (b->itemsize) {
		case 1: if (is_signed) sv = *(const int8_t *)p; else uv = *(const uint8_t *)p; break;
		case 2: if (is_signed) sv = *(const int16_t *)p; else uv = *(const uint16_t *)p; break;
		case 4: if (is_signed) sv = *(const int32_t *)p; else uv = *(const uint32_t *)p; break;
		case 8: if (is_signed) sv = *(const int64_t *)p; else uv = *(const uint64_t *)p; break;
		default:
			PyErr_Format(PyExc_TypeError, "index list: %zd-byte integers", b->itemsize);
			return -1;
		}
		if (!is_signed && uv > UINT32_MAX) {
			PyErr_Format(PyExc_ValueError, "index %zd is %llu: block ids are 0 to 4294967295",
				     i, uv);
			return -1;
		}
		if (idx_store(x, i, is_signed ? sv : (long long)uv, is_signed && sv < 0) < 0)
			return -1;
	}
	return 0;
}

static int idx_from_buffer(struct idx *x)
{
	Py_buffer *b = &x->view;
	const char *f = b->format ? b->format : "B";
	char code;

	if (b->ndim != 1) {
		PyErr_Format(PyExc_ValueError, "index list: %d-dimensional, must be 1-dimensional",
			     b->ndim);
		return -1;
	}
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	code = f[0];
	if (!code || f[1] || !strchr("bBhHiIlLqQnN", code)) {
		PyErr_Format(PyExc_TypeError, "index list: items of format '%s', not integers",
			     b->format ? b->format : "B");
		return -1;
	}
	if (b->itemsize == 4 && b->strides[0] == 4 && (code == 'i' || code == 'I' ||
						      code == 'l' || code == 'L')) {
		const int32_t *s = b->buf;

		if (b->shape[0] == 0)
			return idx_alloc(x, 0);
		if (b->shape[0] > UINT32_MAX)
			return idx_alloc(x, b->shape[0]);
		if (code == 'i' || code == 'l')
			for (Py_ssize_t i = 0; i < b->shape[0]; i++)
				if (s[i] < 0)
					return idx_store(x, i, s[i], 1);
		x->v = b->buf;
		x->n = (uint32_t)b->shape[0];
		return 0;
	}
	return idx_convert(x, code);
}

static int idx_get(PyObject *o, struct idx *x)
{
	PyObject *seq;
	int rc = 0;

	memset(x, 0, sizeof(*x));
	if (PyObject_CheckBuffer(o)) {
		if (PyObject_GetBuffer(o, &x->view, PyBUF_RECORDS_RO) < 0)
			return -1;
		x->have_view = 1;
		return idx_from_buffer(x);
	}
	if (PyUnicode_Check(o) || PyLong_Check(o)) {
		PyErr_Format(PyExc_TypeError,
			     "index list: a numpy int32/int64 array or a sequence of ints, not %.80s",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	seq = PySequence_Fast(o, "index list: a numpy int32/int64 array or a sequence of ints");
	if (!seq)
		return -1;
	if (idx_alloc(x, PySequence_Fast_GET_SIZE(seq)) < 0)
		rc = -1;
	for (Py_ssize_t i = 0; rc == 0 && i < (Py_ssize_t)x->n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		int overflow = 0;
		long long v;

		if (!PyLong_Check(it) && !PyIndex_Check(it)) {
			PyErr_Format(PyExc_TypeError, "index %zd is a %.80s, not an int", i,
				     Py_TYPE(it)->tp_name);
			rc = -1;
			break;
		}
		it = PyNumber_Index(it);
		if (!it) {
			rc = -1;
			break;
		}
		v = PyLong_AsLongLongAndOverflow(it, &overflow);
		Py_DECREF(it);
		if (overflow) {
			PyErr_Format(PyExc_ValueError, "index %zd out of range: block ids are 0 to "
				     "4294967295", i);
			rc = -1;
		} else if (v == -1 && PyErr_Occurred()) {
			rc = -1;
		} else {
			rc = idx_store(x, i, v, v < 0);
		}
	}
	Py_DECREF(seq);
	return rc;
}

static int room_usable(RoomObject *r)
{
	return engine_usable(r->engine);
}

/* what() is a call of one role's rooms: TypeError naming both otherwise. */
static int role_only(RoomObject *self, int role, const char *what)
{
	const char *name[] = { [KVF_SENDER] = "sender", [KVF_RECEIVER] = "receiver" };

	if (room_usable(self) < 0)
		return -1;
	if (self->role != role) {
		char id[24]; /* PyErr_Format knows no PRIx64 */

		snprintf(id, sizeof(id), "%#" PRIx64, self->id);
		PyErr_Format(PyExc_TypeError, "%s() is for %s rooms; room %s is a %s", what,
			     name[role], id, name[self->role]);
		return -1;
	}
	return 0;
}

static PyObject *room_blocks_call(RoomObject *self, PyObject *arg, int role, const char *what,
				  int (*fn)(kvf_engine *, kvf_room, const uint32_t *, uint32_t))
{
	struct idx x;
	int rc;

	if (role_only(self, role, what) < 0)
		return NULL;
	if (idx_get(arg, &x) < 0) {
		idx_put(&x);
		return NULL;
	}
	rc = fn(self->engine->eng, self->h, x.v, x.n);
	idx_put(&x);
	if (rc)
		return raise_rc(rc, what, self);
	Py_RETURN_NONE;
}

static PyObject *room_init(RoomObject *self, PyObject *arg)
{
	return room_blocks_call(self, arg, KVF_RECEIVER, "init", kvf_receiver_init);
}

static PyObject *room_send(RoomObject *self, PyObject *arg)
{
	return room_blocks_call(self, arg, KVF_SENDER, "send", kvf_sender_send);
}

/* A region id from Python. */
static int region_id(PyObject *o, uint32_t *out)
{
	unsigned long v = PyLong_AsUnsignedLong(o);

	if (v == (unsigned long)-1 && PyErr_Occurred())
		return -1;
	if (v > UINT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "region id out of range");
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* Receiver: one index list per region, {region: indices} or a sequence of
 * (region, indices) pairs, and up to KVF_USER_DATA_MAX bytes for the
 * sender (any bytes-like object). */
/* List k of init_regions(): a (region, indices) pair. On success x holds
 * the indices until idx_put(); on failure nothing is held. */
static int list_get(PyObject *it, Py_ssize_t k, struct kvf_index_list *list, struct idx *x)
{
	if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
		PyErr_Format(PyExc_TypeError, "init_regions: list %zd is not a (region, "
			     "indices) pair", k);
		return -1;
	}
	if (region_id(PyTuple_GET_ITEM(it, 0), &list->region) < 0)
		return -1;
	if (idx_get(PyTuple_GET_ITEM(it, 1), x) < 0) {
		idx_put(x);
		return -1;
	}
	list->n = x->n;
	list->items = x->v;
	return 0;
}

static PyObject *room_init_regions(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "lists", "user_data", "part", NULL };
	struct kvf_index_list lists[KVF_MAX_REGIONS];
	struct idx x[KVF_MAX_REGIONS];
	PyObject *lists_obj, *user_obj = Py_None, *part_obj = Py_None, *items = NULL, *ret = NULL;
	Py_buffer user = { 0 };
	Py_ssize_t n = 0, done = 0;
	unsigned long part = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:init_regions", kwlist, &lists_obj,
					 &user_obj, &part_obj))
		return NULL;
	if (part_obj != Py_None) {
		part = PyLong_AsUnsignedLong(part_obj);
		if (PyErr_Occurred())
			return NULL;
	}
	if (role_only(self, KVF_RECEIVER, "init_regions") < 0)
		return NULL;
	items = PyDict_Check(lists_obj) ? PyDict_Items(lists_obj)
					: PySequence_List(lists_obj);
	if (!items)
		return NULL;
	n = PyList_GET_SIZE(items);
	if (n == 0 || n > KVF_MAX_REGIONS) {
		PyErr_Format(PyExc_ValueError, "init_regions: %zd lists, 1 to %d", n,
			     KVF_MAX_REGIONS);
		goto out;
	}
	if (user_obj != Py_None && PyObject_GetBuffer(user_obj, &user, PyBUF_SIMPLE) < 0)
		goto out;
	for (; done < n; done++)
		if (list_get(PyList_GET_ITEM(items, done), done, &lists[done], &x[done]) < 0)
			goto out;
	if (user.len > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "user_data too long");
		goto out;
	}
	rc = part_obj != Py_None
		     ? kvf_receiver_init_part(self->engine->eng, self->h, (uint32_t)part, lists,
					      (uint32_t)n, user.buf, (uint32_t)user.len)
		     : kvf_receiver_init_regions(self->engine->eng, self->h, lists, (uint32_t)n,
						 user.buf, (uint32_t)user.len);
	if (rc) {
		raise_rc(rc, "init_regions", self);
		goto out;
	}
	ret = Py_NewRef(Py_None);
out:
	for (Py_ssize_t i = 0; i < done; i++)
		idx_put(&x[i]);
	if (user.obj)
		PyBuffer_Release(&user);
	Py_DECREF(items);
	return ret;
}

static PyObject *room_peer_count(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "region", "k", NULL };
	PyObject *reg;
	unsigned int k = 0;
	uint32_t region, count;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|I:peer_count", kwlist, &reg, &k))
		return NULL;
	if (role_only(self, KVF_SENDER, "peer_count") < 0 || region_id(reg, &region) < 0)
		return NULL;
	rc = kvf_sender_peer_count_k(self->engine->eng, self->h, k, region, &count);
	if (rc)
		return raise_rc(rc, "peer_count", self);
	return PyLong_FromUnsignedLong(count);
}

static PyObject *room_user_data(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "k", NULL };
	char buf[KVF_USER_DATA_MAX];
	unsigned int k = 0;
	uint32_t len = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|I:user_data", kwlist, &k))
		return NULL;
	if (role_only(self, KVF_SENDER, "user_data") < 0)
		return NULL;
	rc = kvf_sender_user_data_k(self->engine->eng, self->h, k, buf, sizeof(buf), &len);
	if (rc)
		return raise_rc(rc, "user_data", self);
	return PyBytes_FromStringAndSize(buf, len < sizeof(buf) ? len : sizeof(buf));
}

static PyObject *room_receivers(RoomObject *self, PyObject *unused)
{
	uint32_t n = 0, dummies = 0;
	int rc;

	if (role_only(self, KVF_SENDER, "receivers") < 0)
		return NULL;
	rc = kvf_sender_receivers(self->engine->eng, self->h, &n, &dummies);
	if (rc)
		return raise_rc(rc, "receivers", self);
	return Py_BuildValue("(II)", n, dummies);
}

/* part=k: sender k of a fan-in is a dummy (kvf_receiver_init_part with no
 * lists); else the whole room (kvf_receiver_init_dummy). */
static PyObject *room_init_dummy(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "part", "user_data", NULL };
	PyObject *part_obj = Py_None, *user_obj = Py_None;
	Py_buffer user = { 0 };
	unsigned long part = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:init_dummy", kwlist, &part_obj, &user_obj))
		return NULL;
	if (part_obj != Py_None && ((part = PyLong_AsUnsignedLong(part_obj)), PyErr_Occurred()))
		return NULL;
	if (role_only(self, KVF_RECEIVER, "init_dummy") < 0)
		return NULL;
	if (user_obj != Py_None && PyObject_GetBuffer(user_obj, &user, PyBUF_SIMPLE) < 0)
		return NULL;
	if (part_obj == Py_None && !user.len)
		rc = kvf_receiver_init_dummy(self->engine->eng, self->h);
	else if (part > UINT32_MAX || user.len > KVF_USER_DATA_MAX)
		rc = -EINVAL;
	else
		rc = kvf_receiver_init_part(self->engine->eng, self->h,
					    part_obj == Py_None ? 0 : (uint32_t)part, NULL, 0,
					    user.buf, (uint32_t)user.len);
	if (user.obj)
		PyBuffer_Release(&user);
	if (rc)
		return raise_rc(rc, "init_dummy", self);
	Py_RETURN_NONE;
}

/* Sender: one chunk, a sequence of (region, dst_offset, src_indices) parts
 * (empty for a LAST chunk that carries nothing), last=True for the LAST. */
/* Part k of send_chunk(): a (region, dst_offset, src_indices) tuple. On
 * success x holds the indices until idx_put(); on failure nothing is held. */
static int part_get(PyObject *it, Py_ssize_t k, struct kvf_chunk_part *part, struct idx *x)
{
	unsigned long off;

	if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3) {
		PyErr_Format(PyExc_TypeError, "send_chunk: part %zd is not a (region, "
			     "dst_offset, src_indices) tuple", k);
		return -1;
	}
	if (region_id(PyTuple_GET_ITEM(it, 0), &part->region) < 0)
		return -1;
	off = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(it, 1));
	if (off == (unsigned long)-1 && PyErr_Occurred())
		return -1;
	if (off > UINT32_MAX) {
		PyErr_Format(PyExc_OverflowError, "send_chunk: part %zd: dst_offset out "
			     "of range", k);
		return -1;
	}
	part->dst_offset = (uint32_t)off;
	if (idx_get(PyTuple_GET_ITEM(it, 2), x) < 0) {
		idx_put(x);
		return -1;
	}
	part->n = x->n;
	part->src = x->v;
	return 0;
}

static PyObject *room_send_chunk(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "parts", "last", NULL };
	struct kvf_chunk_part parts[KVF_MAX_REGIONS];
	struct idx x[KVF_MAX_REGIONS];
	PyObject *parts_obj, *seq, *ret = NULL;
	Py_ssize_t n, done = 0;
	int last = 0, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:send_chunk", kwlist, &parts_obj, &last))
		return NULL;
	if (role_only(self, KVF_SENDER, "send_chunk") < 0)
		return NULL;
	seq = PySequence_Fast(parts_obj, "send_chunk: parts is a sequence of "
				    "(region, dst_offset, src_indices)");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n > KVF_MAX_REGIONS) {
		PyErr_Format(PyExc_ValueError, "send_chunk: %zd parts, at most %d", n,
			     KVF_MAX_REGIONS);
		goto out;
	}
	for (; done < n; done++)
		if (part_get(PySequence_Fast_GET_ITEM(seq, done), done, &parts[done], &x[done]) < 0)
			goto out;
	rc = kvf_sender_send_chunk(self->engine->eng, self->h, n ? parts : NULL, (uint32_t)n,
				   last ? KVF_SEND_LAST : 0);
	if (rc) {
		raise_rc(rc, "send_chunk", self);
		goto out;
	}
	ret = Py_NewRef(Py_None);
out:
	for (Py_ssize_t i = 0; i < done; i++)
		idx_put(&x[i]);
	Py_DECREF(seq);
	return ret;
}

static PyObject *room_poll(RoomObject *self, PyObject *unused)
{
	int st;

	if (room_usable(self) < 0)
		return NULL;
	st = kvf_poll(self->engine->eng, self->h);
	if (st < 0)
		return raise_rc(st, "poll", self);
	return PyLong_FromLong(st);
}

static PyObject *room_abort(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_abort(self->engine->eng, self->h);
	if (rc)
		return raise_rc(rc, "abort", self);
	Py_RETURN_NONE;
}

static PyObject *room_quiescent(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_quiescent(self->engine->eng, self->h);
	if (rc < 0)
		return raise_rc(rc, "quiescent", self);
	return PyBool_FromLong(rc);
}

/* True when released; False when not yet (-EBUSY: not terminal, or not
 * quiescent: progress and try again). */
static PyObject *room_release(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_release(self->engine->eng, self->h);
	if (rc == -EBUSY)
		Py_RETURN_FALSE;
	if (rc)
		return raise_rc(rc, "release", self);
	Py_RETURN_TRUE;
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
static PyStructSequence_Desc failure_desc = {
	"kvferry.Failure", "Why a room failed (struct kvf_failure).", failure_fields, 7,
};

static PyObject *room_failure(RoomObject *self, PyObject *unused)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;
	PyObject *o;
	int rc, i = 0;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_failure(self->engine->eng, self->h, &fl);
	if (rc)
		return raise_rc(rc, "failure", self);
	o = PyStructSequence_New(&FailureType);
	if (!o)
		return NULL;
	SET(PyUnicode_FromString(kvf_fail_reason_str(fl.reason)));
	SET(PyLong_FromLong(fl.reason));
	SET(PyUnicode_FromString(kvf_deadline_str(fl.deadline)));
	SET(PyLong_FromLong(fl.err));
	SET(PyLong_FromLong(fl.wc_status));
	SET(PyLong_FromUnsignedLong(fl.vendor_err));
	SET(PyUnicode_FromString(fl.detail));
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
static PyStructSequence_Desc room_stats_desc = {
	"kvferry.RoomStats", "One room as the engine sees it (struct kvf_room_stats).",
	room_stats_fields, 23,
};

static PyObject *room_stats(RoomObject *self, PyObject *unused)
{
	struct kvf_room_stats st = KVF_ROOM_STATS_INIT;
	PyObject *o;
	int rc, i = 0;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_room_stats(self->engine->eng, self->h, &st);
	if (rc)
		return raise_rc(rc, "stats", self);
	o = PyStructSequence_New(&RoomStatsType);
	if (!o)
		return NULL;
	SET(PyUnicode_FromString(st.role == KVF_SENDER ? "sender" : "receiver"));
	SET(PyUnicode_FromString(kvf_poll_str(st.state)));
	SET(PyUnicode_FromString(kvf_deadline_str((enum kvf_deadline)st.deadline)));
	SET(PyBool_FromLong(st.quiescent));
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
	SET(PyLong_FromUnsignedLong(st.chunks_done));
	SET(PyLong_FromUnsignedLong(st.chunks_total));
	SET(PyLong_FromUnsignedLong(st.outstanding));
	SET(PyLong_FromUnsignedLong(st.conn));
	SET(PyUnicode_FromString(kvf_fail_reason_str((enum kvf_fail_reason)st.fail_reason)));
	SET(PyUnicode_FromStringAndSize(st.last_event, (Py_ssize_t)strnlen(st.last_event,
								   sizeof(st.last_event))));
	SET(PyUnicode_FromStringAndSize(st.peer, (Py_ssize_t)strnlen(st.peer, sizeof(st.peer))));
	return o;
}
#undef U64
#undef SET

static void room_dealloc(RoomObject *self)
{
	Py_DECREF(self->engine);
	PyObject_Free(self);
}

static PyObject *room_repr(RoomObject *self)
{
	char s[96];

	snprintf(s, sizeof(s), "<kvferry.Room %s id=%#" PRIx64 " handle=%#" PRIx64 ">",
		 self->role == KVF_SENDER ? "sender" : "receiver", self->id, self->h.v);
	return PyUnicode_FromString(s);
}

static PyObject *room_get_id(RoomObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->id);
}

static PyObject *room_get_handle(RoomObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->h.v);
}

static PyObject *room_get_role(RoomObject *self, void *unused)
{
	return PyUnicode_FromString(self->role == KVF_SENDER ? "sender" : "receiver");
}

static PyObject *room_get_engine(RoomObject *self, void *unused)
{
	return Py_NewRef((PyObject *)self->engine);
}

static PyMethodDef room_methods[] = {
	{ "init", (PyCFunction)room_init, METH_O,
	  "Receiver: the destination block ids (int32 array used in place); sends ROOM_INFO." },
	{ "send", (PyCFunction)room_send, METH_O,
	  "Sender: the source block ids of region 'kv', in the order of the receiver's, "
	  "as one LAST chunk." },
	{ "init_regions", (PyCFunction)(void (*)(void))room_init_regions,
	  METH_VARARGS | METH_KEYWORDS,
	  "Receiver: init_regions({region: indices, ...}, user_data=b'') sends ROOM_INFO "
	  "with one destination list per region and opaque bytes for the sender; part=k: "
	  "to prefill rank k of a fan-in only, with lists of its own." },
	{ "init_dummy", (PyCFunction)(void (*)(void))room_init_dummy, METH_VARARGS | METH_KEYWORDS,
	  "Receiver that needs no data (SGLang is_dummy): joins the fan-out with no lists; "
	  "SUCCESS with the sender's final write. part=k: only prefill rank k of a fan-in "
	  "is a dummy (the others get init_regions(..., part=j)); user_data as init_regions." },
	{ "peer_count", (PyCFunction)(void (*)(void))room_peer_count, METH_VARARGS | METH_KEYWORDS,
	  "Sender: peer_count(region, k=0): how many items receiver k's list has for this "
	  "region (k: in the order the receivers of a fan-out joined)." },
	{ "user_data", (PyCFunction)(void (*)(void))room_user_data, METH_VARARGS | METH_KEYWORDS,
	  "Sender: user_data(k=0): receiver k's user data (bytes)." },
	{ "receivers", (PyCFunction)room_receivers, METH_NOARGS,
	  "Sender: (n, dummies): the receivers the room serves, the dummies among those "
	  "that joined." },
	{ "send_chunk", (PyCFunction)(void (*)(void))room_send_chunk,
	  METH_VARARGS | METH_KEYWORDS,
	  "Sender: send_chunk([(region, dst_offset, src_indices), ...], last=False): one "
	  "chunk as it comes; the last=True one completes the room." },
	{ "poll", (PyCFunction)room_poll, METH_NOARGS, "The state (int, as kvferry.Poll)." },
	{ "abort", (PyCFunction)room_abort, METH_NOARGS,
	  "Fail the room now and tell the peer; idempotent on a terminal room." },
	{ "failure", (PyCFunction)room_failure, METH_NOARGS, "kvferry.Failure" },
	{ "quiescent", (PyCFunction)room_quiescent, METH_NOARGS,
	  "True when nothing posted can still touch the room's memory." },
	{ "release", (PyCFunction)room_release, METH_NOARGS,
	  "Hand the slot back: True, or False when not terminal and quiescent yet." },
	{ "stats", (PyCFunction)room_stats, METH_NOARGS, "kvferry.RoomStats" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef room_getset[] = {
	{ "id", (getter)room_get_id, NULL, "the room id (bootstrap_room)", NULL },
	{ "handle", (getter)room_get_handle, NULL, "the library's handle (slot, generation)", NULL },
	{ "role", (getter)room_get_role, NULL, "'sender' or 'receiver'", NULL },
	{ "engine", (getter)room_get_engine, NULL, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject RoomType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "kvferry.Room",
	.tp_basicsize = sizeof(RoomObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A room: one request's transfer. Made by Engine.sender / Engine.receiver.",
	.tp_dealloc = (destructor)room_dealloc,
	.tp_repr = (reprfunc)room_repr,
	.tp_methods = room_methods,
	.tp_getset = room_getset,
};

/* -------------------------------------------------------------------- module */

static PyObject *mod_fail_reason_name(PyObject *m, PyObject *arg)
{
	long v = PyLong_AsLong(arg);

	if (v == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(kvf_fail_reason_str((enum kvf_fail_reason)v));
}

static PyMethodDef module_methods[] = {
	{ "_set_logger", (PyCFunction)kvf_py_set_logger, METH_O,
	  "Send the library's log lines to this logging.Logger (None: back to stderr)." },
	{ "fail_reason_name", (PyCFunction)mod_fail_reason_name, METH_O, NULL },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "kvferry._kvferry",
	.m_doc = "The C binding of libkvferry; use the kvferry package.",
	.m_size = -1,
	.m_methods = module_methods,
};

static int add_int(PyObject *m, const char *name, long v)
{
	return PyModule_AddIntConstant(m, name, v);
}

PyMODINIT_FUNC PyInit__kvferry(void);
PyMODINIT_FUNC PyInit__kvferry(void)
{
	PyObject *m = PyModule_Create(&module_def), *d;

	if (!m)
		return NULL;
	if (PyType_Ready(&EngineType) < 0 || PyType_Ready(&RoomType) < 0)
		goto fail;
	if (PyStructSequence_InitType2(&StatsType, &stats_desc) < 0 ||
	    PyStructSequence_InitType2(&FailureType, &failure_desc) < 0 ||
	    PyStructSequence_InitType2(&RoomStatsType, &room_stats_desc) < 0)
		goto fail;
	/* Class attributes, so that a KVFerryError raised by Python code has them too. */
	d = Py_BuildValue("{sOsOsO}", "reason", Py_None, "detail", Py_None, "room_id", Py_None);
	if (!d)
		goto fail;
	KVFerryError = PyErr_NewExceptionWithDoc(
		"kvferry.KVFerryError",
		"A kvferry call failed: errno, strerror, and for a failed room its reason, "
		"detail and room_id.", PyExc_OSError, d);
	Py_DECREF(d);
	WrongThreadError = PyErr_NewExceptionWithDoc(
		"kvferry.WrongThreadError",
		"An engine was called from a thread other than the one that opened it.",
		PyExc_RuntimeError, NULL);
	if (!KVFerryError || !WrongThreadError)
		goto fail;
	if (PyModule_AddObjectRef(m, "Engine", (PyObject *)&EngineType) < 0 ||
	    PyModule_AddObjectRef(m, "Room", (PyObject *)&RoomType) < 0 ||
	    PyModule_AddObjectRef(m, "Stats", (PyObject *)&StatsType) < 0 ||
	    PyModule_AddObjectRef(m, "Failure", (PyObject *)&FailureType) < 0 ||
	    PyModule_AddObjectRef(m, "RoomStats", (PyObject *)&RoomStatsType) < 0 ||
	    PyModule_AddObjectRef(m, "KVFerryError", KVFerryError) < 0 ||
	    PyModule_AddObjectRef(m, "WrongThreadError", WrongThreadError) < 0)
		goto fail;
	if (add_int(m, "FAILED", KVF_FAILED) || add_int(m, "BOOTSTRAPPING", KVF_BOOTSTRAPPING) ||
	    add_int(m, "WAITING_FOR_INPUT", KVF_WAITING_FOR_INPUT) ||
	    add_int(m, "TRANSFERRING", KVF_TRANSFERRING) || add_int(m, "SUCCESS", KVF_SUCCESS) ||
	    add_int(m, "USER_DATA_MAX", KVF_USER_DATA_MAX) ||
	    add_int(m, "REGION_NAME_MAX", KVF_REGION_NAME_MAX) ||
	    add_int(m, "MAX_REGIONS", KVF_MAX_REGIONS) || add_int(m, "FAN_MAX", KVF_FAN_MAX))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
