/* SPDX-License-Identifier: Apache-2.0 */
/* A region's geometry list from Python: see geometry.h. */
#include "geometry.h"

static int geom_one(PyObject *t, uint32_t i, struct kvf_buf_geometry *g)
{
	uint32_t *f[] = { &g->page_tokens, &g->heads, &g->head0,
			  &g->head_bytes, &g->layer, &g->kind };
	PyObject *seq = PySequence_Fast(t, "geometry entry");

	if (!seq)
		return -1;
	if (PySequence_Fast_GET_SIZE(seq) != 6) {
		PyErr_Format(PyExc_ValueError, "geometry[%u]: %zd fields, want 6 " KVF_PY_GEOM_FIELDS,
			     i, PySequence_Fast_GET_SIZE(seq));
		Py_DECREF(seq);
		return -1;
	}
	for (int k = 0; k < 6; k++) {
		unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, k));

		if (PyErr_Occurred() || v > UINT32_MAX) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError,
				     "geometry[%u] field %d: not an integer in 0..2^32-1 " KVF_PY_GEOM_FIELDS,
				     i, k);
			Py_DECREF(seq);
			return -1;
		}
		*f[k] = (uint32_t)v;
	}
	Py_DECREF(seq);
	return 0;
}

int kvf_py_geometry_get(PyObject *obj, uint32_t nbufs, struct kvf_buf_geometry **out)
{
	PyObject *seq;

	*out = NULL;
	if (!obj || obj == Py_None)
		return 0;
	seq = PySequence_Fast(obj, "geometry must be a sequence of tuples or None");
	if (!seq)
		return -1;
	if ((uint32_t)PySequence_Fast_GET_SIZE(seq) != nbufs) {
		PyErr_Format(PyExc_ValueError, "geometry: %zd entries for %u buffers",
			     PySequence_Fast_GET_SIZE(seq), nbufs);
		goto fail;
	}
	*out = PyMem_Calloc(nbufs ? nbufs : 1, sizeof(**out));
	if (!*out) {
		PyErr_NoMemory();
		goto fail;
	}
	for (uint32_t i = 0; i < nbufs; i++)
		if (geom_one(PySequence_Fast_GET_ITEM(seq, i), i, &(*out)[i]) < 0)
			goto fail;
	Py_DECREF(seq);
	return 0;
fail:
	PyMem_Free(*out);
	*out = NULL;
	Py_DECREF(seq);
	return -1;
}
