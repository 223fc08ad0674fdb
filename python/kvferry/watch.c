/* SPDX-License-Identifier: Apache-2.0 */
/* A scheduler's look at many rooms in one call: Engine.poll_many (every
 * room given, each state) and Engine.watch / unwatch / changed (only the
 * rooms whose state changed: kvf_changed). changed() hands back room
 * handles, not Room objects: the caller maps them (room.handle) to its own
 * requests, and the library holds no reference that could outlive a Room. */
#include "binding.h"

PyObject *engine_poll_many(EngineObject *self, PyObject *rooms)
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

/* The Room o of engine self, or NULL with TypeError / ValueError. */
static RoomObject *own_room(EngineObject *self, PyObject *o, const char *what)
{
	if (!PyObject_TypeCheck(o, &RoomType)) {
		PyErr_Format(PyExc_TypeError, "%s: a %.80s, not a Room", what, Py_TYPE(o)->tp_name);
		return NULL;
	}
	if (((RoomObject *)o)->engine != self) {
		PyErr_Format(PyExc_ValueError, "%s: the room belongs to another engine", what);
		return NULL;
	}
	return (RoomObject *)o;
}

PyObject *engine_watch(EngineObject *self, PyObject *o)
{
	RoomObject *r;
	int rc;

	if (engine_usable(self) < 0 || !(r = own_room(self, o, "watch")))
		return NULL;
	rc = kvf_watch(self->eng, r->h, NULL);
	if (rc)
		return raise_rc(rc, "watch", r);
	Py_RETURN_NONE;
}

PyObject *engine_unwatch(EngineObject *self, PyObject *o)
{
	RoomObject *r;
	int rc;

	if (engine_usable(self) < 0 || !(r = own_room(self, o, "unwatch")))
		return NULL;
	rc = kvf_unwatch(self->eng, r->h);
	if (rc)
		return raise_rc(rc, "unwatch (released, or not watched)", r);
	Py_RETURN_NONE;
}

/* (handle, state) of change c, or NULL (MemoryError). */
static PyObject *change_tuple(const struct kvf_change *c)
{
	PyObject *t = PyTuple_New(2);

	if (!t)
		return NULL;
	PyTuple_SET_ITEM(t, 0, PyLong_FromUnsignedLongLong(c->room.v));
	PyTuple_SET_ITEM(t, 1, PyLong_FromLong(c->state)); /* a cached small int */
	if (!PyTuple_GET_ITEM(t, 0) || !PyTuple_GET_ITEM(t, 1)) {
		Py_DECREF(t);
		return NULL;
	}
	return t;
}

PyObject *engine_changed(EngineObject *self, PyObject *unused)
{
	struct kvf_change c[256];
	PyObject *out = NULL, *batch;
	int n;

	if (engine_usable(self) < 0)
		return NULL;
	/* Mostly one batch, often empty: the list is made at its size. What
	 * an error leaves untaken is lost with it (only a MemoryError). */
	do {
		n = kvf_changed(self->eng, c, 256);
		batch = PyList_New(n);
		for (int i = 0; batch && i < n; i++) {
			PyObject *t = change_tuple(&c[i]);

			if (!t)
				Py_CLEAR(batch);
			else
				PyList_SET_ITEM(batch, i, t);
		}
		if (!batch) {
			Py_XDECREF(out);
			return NULL;
		}
		if (!out) {
			out = batch;
		} else {
			int rc = PyList_SetSlice(out, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, batch);

			Py_DECREF(batch);
			if (rc < 0) {
				Py_DECREF(out);
				return NULL;
			}
		}
	} while (n == 256);
	return out;
}
