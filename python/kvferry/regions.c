/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: an engine's memory from Python (Engine.register_pool,
 * register_region, unregister_region). Buffers as int addresses or buffer
 * objects, whose exports (memoryviews) the engine keeps while the memory is
 * registered, and their item sizes.
 */
#define PY_SSIZE_T_CLEAN
#include "binding.h"

#include <string.h>

#include "geometry.h"

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

PyObject *engine_register_pool(EngineObject *self, PyObject *args, PyObject *kw)
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

PyObject *engine_register_region(EngineObject *self, PyObject *args, PyObject *kw)
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

PyObject *engine_unregister_region(EngineObject *self, PyObject *arg)
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
