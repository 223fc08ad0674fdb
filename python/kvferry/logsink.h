/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry._kvferry: the library's log lines into Python's logging
 * (kvferry._set_logger, which kvferry/__init__.py calls at import). */
#ifndef KVF_PY_LOGSINK_H
#define KVF_PY_LOGSINK_H

#include <Python.h>

#include <kvferry/kvferry.h>

/* _set_logger(logger): a logging.Logger to send every line to, or None to
 * stop (the atexit hook, before the interpreter finalizes). */
PyObject *kvf_py_set_logger(PyObject *m, PyObject *logger);

#endif
