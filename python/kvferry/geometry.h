/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: a region's per-buffer geometry from Python
 * (Engine.register_region(..., geometry=[...])).
 */
#ifndef KVF_PY_GEOMETRY_H
#define KVF_PY_GEOMETRY_H

#include <Python.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

/* The fields of one geometry tuple, in order (kvferry.h, struct kvf_buf_geometry). */
#define KVF_PY_GEOM_FIELDS "(page_tokens, heads, head0, head_bytes, layer, kind)"

/*
 * obj: None (no geometry: *out = NULL) or a sequence of nbufs tuples of six
 * ints. *out is PyMem_Malloc'ed (PyMem_Free it). Returns 0, or -1 with a
 * Python exception naming the buffer and what was wrong.
 */
int kvf_py_geometry_get(PyObject *obj, uint32_t nbufs, struct kvf_buf_geometry **out);

#endif
