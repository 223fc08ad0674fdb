/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the Engine type. Open (a config file and overrides) and
 * close from any thread, the listener's address and rails, rooms made as
 * sender or receiver, progress and the wait on the engine's fd, stats and
 * the dump; its method table also carries the pool and region registration
 * of regions.c.
 */
#define PY_SSIZE_T_CLEAN
#include "binding.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rails.h"

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

/* n > 1: a fan-out to n decode ranks (kvf_sender_create_fanout); n 0: as
 * many as the first decode rank's fan-out tag says
 * (kvf_sender_create_learned). */
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
	rc = n ? kvf_sender_create_fanout(self->eng, id, n, &h) :
		 kvf_sender_create_learned(self->eng, id, &h);
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

static PyObject *engine_stats(EngineObject *self, PyObject *unused)
{
	struct kvf_stats st = KVF_STATS_INIT;
	int rc;

	if (engine_usable(self) < 0)
		return NULL;
	rc = kvf_stats(self->eng, &st);
	if (rc)
		return raise_rc(rc, "stats", NULL);
	return kvf_py_stats(&st);
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
	{ "watch", (PyCFunction)engine_watch, METH_O,
	  "watch(room): its state changes from now on come out of changed()" },
	{ "unwatch", (PyCFunction)engine_unwatch, METH_O,
	  "unwatch(room): no more changes of it (release ends a watch by itself)" },
	{ "changed", (PyCFunction)engine_changed, METH_NOARGS,
	  "changed() -> list of (room.handle, state) for the watched rooms whose state changed "
	  "since the last call, each once, with its state now; [] when none did" },
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

PyTypeObject EngineType = {
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
