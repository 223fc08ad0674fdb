/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry._kvferry: the library's log lines into Python's logging. */
#define PY_SSIZE_T_CLEAN
#include "logsink.h"

/* logging.getLogger("kvferry"), set at import; the C sink is installed only
 * while it is set (the module's atexit hook unsets both before the
 * interpreter finalizes, when a C thread could no longer take the GIL). */
static PyObject *g_logger;

static const int py_levels[KVF_LOG_NUM] = {
	[KVF_LOG_ERROR] = 40, [KVF_LOG_WARN] = 30, [KVF_LOG_INFO] = 20, [KVF_LOG_DEBUG] = 10,
};

/* Any thread: the scheduler thread (which holds the GIL already: Ensure
 * nests), the poller, the HTTP thread, or an open/close with the GIL
 * released. An exception pending in the caller is kept aside, and one
 * raised by a handler is reported, not lost into the next call. */
static void log_sink(void *arg, int level, const char *module, const char *msg)
{
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *exc_type, *exc_value, *exc_tb, *r;

	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	if (g_logger) {
		r = PyObject_CallMethod(g_logger, "log", "isss", level >= 0 && level < KVF_LOG_NUM ?
					py_levels[level] : 40, "%s: %s", module, msg);
		if (!r)
			PyErr_WriteUnraisable(g_logger);
		Py_XDECREF(r);
	}
	PyErr_Restore(exc_type, exc_value, exc_tb);
	PyGILState_Release(g);
}

PyObject *kvf_py_set_logger(PyObject *m, PyObject *logger)
{
	if (logger == Py_None) {
		kvf_set_log_callback(NULL, NULL);
		Py_CLEAR(g_logger);
	} else {
		Py_INCREF(logger);
		Py_XSETREF(g_logger, logger);
		kvf_set_log_callback(log_sink, NULL);
	}
	Py_RETURN_NONE;
}
