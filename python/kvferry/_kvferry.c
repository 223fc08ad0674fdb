/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the CPython binding of include/kvferry/kvferry.h. This
 * file is the module: its functions, and the init that readies the types,
 * creates the exceptions and registers them. Engine is engine.c (its pools
 * and regions regions.c), Room rooms.c, the stats and failure types stats.c,
 * errno -> KVFerryError errors.c; binding.h is what they share.
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
#include "binding.h"

#include "logsink.h"

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
