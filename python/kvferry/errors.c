/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the binding's errors. KVFerryError and WrongThreadError
 * (created by the module init), the owner-thread check every Engine and Room
 * call makes first, and a library -errno raised as KVFerryError with the
 * room's failure reason and detail when the room failed.
 */
#define PY_SSIZE_T_CLEAN
#include "binding.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

PyObject *KVFerryError;
PyObject *WrongThreadError;

int engine_usable(EngineObject *e)
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
PyObject *raise_rc(int rc, const char *what, RoomObject *room)
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
