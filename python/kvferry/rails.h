/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry._kvferry: an engine's rails (Engine.rails()) as Python objects. */
#ifndef KVF_PY_RAILS_H
#define KVF_PY_RAILS_H

#include <Python.h>

#include <kvferry/kvferry.h>

#define KVF_PY_MAX_RAILS 8 /* = KVF_MAX_RAILS (src/engine/transport.h) */

/* A list of one dict a rail, kvf_engine_rails' fields by name (state as
 * its name). NULL with *rc the library's -errno (no exception set: the
 * caller raises KVFerryError), or with *rc 0 and a Python exception. */
PyObject *kvf_py_rails(kvf_engine *eng, int *rc);

#endif
