/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: the Room type, one request's transfer (made by
 * Engine.sender / Engine.receiver). Its methods, each checked for the room's
 * role, and the index lists they take: block ids as uint32 from a numpy
 * array (used in place when it is int32) or a sequence of ints.
 */
#define PY_SSIZE_T_CLEAN
#include "binding.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Index lists: block ids as uint32. A 1-d buffer of 4-byte ints that is
 * contiguous is used in place (numpy int32/uint32, SGLang's kv_indices);
 * any other integer buffer (int64 ...) or sequence of ints is converted. */
struct idx {
	const uint32_t *v;
	uint32_t n;
	uint32_t *owned;
	Py_buffer view;
	int have_view;
};

static void idx_put(struct idx *x)
{
	if (x->have_view)
		PyBuffer_Release(&x->view);
	PyMem_Free(x->owned);
}

static int idx_store(struct idx *x, Py_ssize_t i, long long v, int neg)
{
	if (neg || v < 0 || (unsigned long long)v > UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "index %zd is %s%lld: block ids are 0 to 4294967295",
			     i, neg ? "negative, " : "", v);
		return -1;
	}
	x->owned[i] = (uint32_t)v;
	return 0;
}

static int idx_alloc(struct idx *x, Py_ssize_t n)
{
	if (n == 0) {
		PyErr_SetString(PyExc_ValueError, "empty index list");
		return -1;
	}
	if (n > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "index list longer than 2^32-1");
		return -1;
	}
	x->n = (uint32_t)n;
	x->owned = PyMem_Malloc((size_t)n * sizeof(uint32_t));
	if (!x->owned) {
		PyErr_NoMemory();
		return -1;
	}
	x->v = x->owned;
	return 0;
}

/* A buffer of any integer format copied into x's own list, each id checked. */
static int idx_convert(struct idx *x, char code)
{
	Py_buffer *b = &x->view;

	if (idx_alloc(x, b->shape[0]) < 0)
		return -1;
	for (Py_ssize_t i = 0; i < b->shape[0]; i++) {
		const char *p = (const char *)b->buf + i * b->strides[0];
		int is_signed = code >= 'a';
		long long sv = 0;
		unsigned long long uv = 0;

		switch (b->itemsize) {
		case 1: if (is_signed) sv = *(const int8_t *)p; else uv = *(const uint8_t *)p; break;
		case 2: if (is_signed) sv = *(const int16_t *)p; else uv = *(const uint16_t *)p; break;
		case 4: if (is_signed) sv = *(const int32_t *)p; else uv = *(const uint32_t *)p; break;
		case 8: if (is_signed) sv = *(const int64_t *)p; else uv = *(const uint64_t *)p; break;
		default:
			PyErr_Format(PyExc_TypeError, "index list: %zd-byte integers", b->itemsize);
			return -1;
		}
		if (!is_signed && uv > UINT32_MAX) {
			PyErr_Format(PyExc_ValueError, "index %zd is %llu: block ids are 0 to 4294967295",
				     i, uv);
			return -1;
		}
		if (idx_store(x, i, is_signed ? sv : (long long)uv, is_signed && sv < 0) < 0)
			return -1;
	}
	return 0;
}

static int idx_from_buffer(struct idx *x)
{
	Py_buffer *b = &x->view;
	const char *f = b->format ? b->format : "B";
	char code;

	if (b->ndim != 1) {
		PyErr_Format(PyExc_ValueError, "index list: %d-dimensional, must be 1-dimensional",
			     b->ndim);
		return -1;
	}
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	code = f[0];
	if (!code || f[1] || !strchr("bBhHiIlLqQnN", code)) {
		PyErr_Format(PyExc_TypeError, "index list: items of format '%s', not integers",
			     b->format ? b->format : "B");
		return -1;
	}
	if (b->itemsize == 4 && b->strides[0] == 4 && (code == 'i' || code == 'I' ||
						      code == 'l' || code == 'L')) {
		const int32_t *s = b->buf;

		if (b->shape[0] == 0)
			return idx_alloc(x, 0);
		if (b->shape[0] > UINT32_MAX)
			return idx_alloc(x, b->shape[0]);
		if (code == 'i' || code == 'l')
			for (Py_ssize_t i = 0; i < b->shape[0]; i++)
				if (s[i] < 0)
					return idx_store(x, i, s[i], 1);
		x->v = b->buf;
		x->n = (uint32_t)b->shape[0];
		return 0;
	}
	return idx_convert(x, code);
}

static int idx_get(PyObject *o, struct idx *x)
{
	PyObject *seq;
	int rc = 0;

	memset(x, 0, sizeof(*x));
	if (PyObject_CheckBuffer(o)) {
		if (PyObject_GetBuffer(o, &x->view, PyBUF_RECORDS_RO) < 0)
			return -1;
		x->have_view = 1;
		return idx_from_buffer(x);
	}
	if (PyUnicode_Check(o) || PyLong_Check(o)) {
		PyErr_Format(PyExc_TypeError,
			     "index list: a numpy int32/int64 array or a sequence of ints, not %.80s",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	seq = PySequence_Fast(o, "index list: a numpy int32/int64 array or a sequence of ints");
	if (!seq)
		return -1;
	if (idx_alloc(x, PySequence_Fast_GET_SIZE(seq)) < 0)
		rc = -1;
	for (Py_ssize_t i = 0; rc == 0 && i < (Py_ssize_t)x->n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		int overflow = 0;
		long long v;

		if (!PyLong_Check(it) && !PyIndex_Check(it)) {
			PyErr_Format(PyExc_TypeError, "index %zd is a %.80s, not an int", i,
				     Py_TYPE(it)->tp_name);
			rc = -1;
			break;
		}
		it = PyNumber_Index(it);
		if (!it) {
			rc = -1;
			break;
		}
		v = PyLong_AsLongLongAndOverflow(it, &overflow);
		Py_DECREF(it);
		if (overflow) {
			PyErr_Format(PyExc_ValueError, "index %zd out of range: block ids are 0 to "
				     "4294967295", i);
			rc = -1;
		} else if (v == -1 && PyErr_Occurred()) {
			rc = -1;
		} else {
			rc = idx_store(x, i, v, v < 0);
		}
	}
	Py_DECREF(seq);
	return rc;
}

static int room_usable(RoomObject *r)
{
	return engine_usable(r->engine);
}

/* what() is a call of one role's rooms: TypeError naming both otherwise. */
static int role_only(RoomObject *self, int role, const char *what)
{
	const char *name[] = { [KVF_SENDER] = "sender", [KVF_RECEIVER] = "receiver" };

	if (room_usable(self) < 0)
		return -1;
	if (self->role != role) {
		char id[24]; /* PyErr_Format knows no PRIx64 */

		snprintf(id, sizeof(id), "%#" PRIx64, self->id);
		PyErr_Format(PyExc_TypeError, "%s() is for %s rooms; room %s is a %s", what,
			     name[role], id, name[self->role]);
		return -1;
	}
	return 0;
}

static PyObject *room_blocks_call(RoomObject *self, PyObject *arg, int role, const char *what,
				  int (*fn)(kvf_engine *, kvf_room, const uint32_t *, uint32_t))
{
	struct idx x;
	int rc;

	if (role_only(self, role, what) < 0)
		return NULL;
	if (idx_get(arg, &x) < 0) {
		idx_put(&x);
		return NULL;
	}
	rc = fn(self->engine->eng, self->h, x.v, x.n);
	idx_put(&x);
	if (rc)
		return raise_rc(rc, what, self);
	Py_RETURN_NONE;
}

static PyObject *room_init(RoomObject *self, PyObject *arg)
{
	return room_blocks_call(self, arg, KVF_RECEIVER, "init", kvf_receiver_init);
}

static PyObject *room_send(RoomObject *self, PyObject *arg)
{
	return room_blocks_call(self, arg, KVF_SENDER, "send", kvf_sender_send);
}

/* A region id from Python. */
static int region_id(PyObject *o, uint32_t *out)
{
	unsigned long v = PyLong_AsUnsignedLong(o);

	if (v == (unsigned long)-1 && PyErr_Occurred())
		return -1;
	if (v > UINT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "region id out of range");
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* Receiver: one index list per region, {region: indices} or a sequence of
 * (region, indices) pairs, and up to KVF_USER_DATA_MAX bytes for the
 * sender (any bytes-like object). */
/* List k of init_regions(): a (region, indices) pair. On success x holds
 * the indices until idx_put(); on failure nothing is held. */
static int list_get(PyObject *it, Py_ssize_t k, struct kvf_index_list *list, struct idx *x)
{
	if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
		PyErr_Format(PyExc_TypeError, "init_regions: list %zd is not a (region, "
			     "indices) pair", k);
		return -1;
	}
	if (region_id(PyTuple_GET_ITEM(it, 0), &list->region) < 0)
		return -1;
	if (idx_get(PyTuple_GET_ITEM(it, 1), x) < 0) {
		idx_put(x);
		return -1;
	}
	list->n = x->n;
	list->items = x->v;
	return 0;
}

static PyObject *room_init_regions(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "lists", "user_data", "part", NULL };
	struct kvf_index_list lists[KVF_MAX_REGIONS];
	struct idx x[KVF_MAX_REGIONS];
	PyObject *lists_obj, *user_obj = Py_None, *part_obj = Py_None, *items = NULL, *ret = NULL;
	Py_buffer user = { 0 };
	Py_ssize_t n = 0, done = 0;
	unsigned long part = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:init_regions", kwlist, &lists_obj,
					 &user_obj, &part_obj))
		return NULL;
	if (part_obj != Py_None) {
		part = PyLong_AsUnsignedLong(part_obj);
		if (PyErr_Occurred())
			return NULL;
	}
	if (role_only(self, KVF_RECEIVER, "init_regions") < 0)
		return NULL;
	items = PyDict_Check(lists_obj) ? PyDict_Items(lists_obj)
					: PySequence_List(lists_obj);
	if (!items)
		return NULL;
	n = PyList_GET_SIZE(items);
	if (n == 0 || n > KVF_MAX_REGIONS) {
		PyErr_Format(PyExc_ValueError, "init_regions: %zd lists, 1 to %d", n,
			     KVF_MAX_REGIONS);
		goto out;
	}
	if (user_obj != Py_None && PyObject_GetBuffer(user_obj, &user, PyBUF_SIMPLE) < 0)
		goto out;
	for (; done < n; done++)
		if (list_get(PyList_GET_ITEM(items, done), done, &lists[done], &x[done]) < 0)
			goto out;
	if (user.len > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "user_data too long");
		goto out;
	}
	rc = part_obj != Py_None
		     ? kvf_receiver_init_part(self->engine->eng, self->h, (uint32_t)part, lists,
					      (uint32_t)n, user.buf, (uint32_t)user.len)
		     : kvf_receiver_init_regions(self->engine->eng, self->h, lists, (uint32_t)n,
						 user.buf, (uint32_t)user.len);
	if (rc) {
		raise_rc(rc, "init_regions", self);
		goto out;
	}
	ret = Py_NewRef(Py_None);
out:
	for (Py_ssize_t i = 0; i < done; i++)
		idx_put(&x[i]);
	if (user.obj)
		PyBuffer_Release(&user);
	Py_DECREF(items);
	return ret;
}

static PyObject *room_peer_count(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "region", "k", NULL };
	PyObject *reg;
	unsigned int k = 0;
	uint32_t region, count;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|I:peer_count", kwlist, &reg, &k))
		return NULL;
	if (role_only(self, KVF_SENDER, "peer_count") < 0 || region_id(reg, &region) < 0)
		return NULL;
	rc = kvf_sender_peer_count_k(self->engine->eng, self->h, k, region, &count);
	if (rc)
		return raise_rc(rc, "peer_count", self);
	return PyLong_FromUnsignedLong(count);
}

static PyObject *room_user_data(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "k", NULL };
	char buf[KVF_USER_DATA_MAX];
	unsigned int k = 0;
	uint32_t len = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|I:user_data", kwlist, &k))
		return NULL;
	if (role_only(self, KVF_SENDER, "user_data") < 0)
		return NULL;
	rc = kvf_sender_user_data_k(self->engine->eng, self->h, k, buf, sizeof(buf), &len);
	if (rc)
		return raise_rc(rc, "user_data", self);
	return PyBytes_FromStringAndSize(buf, len < sizeof(buf) ? len : sizeof(buf));
}

static PyObject *room_receivers(RoomObject *self, PyObject *unused)
{
	uint32_t n = 0, dummies = 0;
	int rc;

	if (role_only(self, KVF_SENDER, "receivers") < 0)
		return NULL;
	rc = kvf_sender_receivers(self->engine->eng, self->h, &n, &dummies);
	if (rc)
		return raise_rc(rc, "receivers", self);
	return Py_BuildValue("(II)", n, dummies);
}

/* part=k: sender k of a fan-in is a dummy (kvf_receiver_init_part with no
 * lists); else the whole room (kvf_receiver_init_dummy). */
static PyObject *room_init_dummy(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "part", "user_data", NULL };
	PyObject *part_obj = Py_None, *user_obj = Py_None;
	Py_buffer user = { 0 };
	unsigned long part = 0;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:init_dummy", kwlist, &part_obj, &user_obj))
		return NULL;
	if (part_obj != Py_None && ((part = PyLong_AsUnsignedLong(part_obj)), PyErr_Occurred()))
		return NULL;
	if (role_only(self, KVF_RECEIVER, "init_dummy") < 0)
		return NULL;
	if (user_obj != Py_None && PyObject_GetBuffer(user_obj, &user, PyBUF_SIMPLE) < 0)
		return NULL;
	if (part_obj == Py_None && !user.len)
		rc = kvf_receiver_init_dummy(self->engine->eng, self->h);
	else if (part > UINT32_MAX || user.len > KVF_USER_DATA_MAX)
		rc = -EINVAL;
	else
		rc = kvf_receiver_init_part(self->engine->eng, self->h,
					    part_obj == Py_None ? 0 : (uint32_t)part, NULL, 0,
					    user.buf, (uint32_t)user.len);
	if (user.obj)
		PyBuffer_Release(&user);
	if (rc)
		return raise_rc(rc, "init_dummy", self);
	Py_RETURN_NONE;
}

/* Sender: one chunk, a sequence of (region, dst_offset, src_indices) parts
 * (empty for a LAST chunk that carries nothing), last=True for the LAST. */
/* Part k of send_chunk(): a (region, dst_offset, src_indices) tuple. On
 * success x holds the indices until idx_put(); on failure nothing is held. */
static int part_get(PyObject *it, Py_ssize_t k, struct kvf_chunk_part *part, struct idx *x)
{
	unsigned long off;

	if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3) {
		PyErr_Format(PyExc_TypeError, "send_chunk: part %zd is not a (region, "
			     "dst_offset, src_indices) tuple", k);
		return -1;
	}
	if (region_id(PyTuple_GET_ITEM(it, 0), &part->region) < 0)
		return -1;
	off = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(it, 1));
	if (off == (unsigned long)-1 && PyErr_Occurred())
		return -1;
	if (off > UINT32_MAX) {
		PyErr_Format(PyExc_OverflowError, "send_chunk: part %zd: dst_offset out "
			     "of range", k);
		return -1;
	}
	part->dst_offset = (uint32_t)off;
	if (idx_get(PyTuple_GET_ITEM(it, 2), x) < 0) {
		idx_put(x);
		return -1;
	}
	part->n = x->n;
	part->src = x->v;
	return 0;
}

static PyObject *room_send_chunk(RoomObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "parts", "last", NULL };
	struct kvf_chunk_part parts[KVF_MAX_REGIONS];
	struct idx x[KVF_MAX_REGIONS];
	PyObject *parts_obj, *seq, *ret = NULL;
	Py_ssize_t n, done = 0;
	int last = 0, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:send_chunk", kwlist, &parts_obj, &last))
		return NULL;
	if (role_only(self, KVF_SENDER, "send_chunk") < 0)
		return NULL;
	seq = PySequence_Fast(parts_obj, "send_chunk: parts is a sequence of "
				    "(region, dst_offset, src_indices)");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n > KVF_MAX_REGIONS) {
		PyErr_Format(PyExc_ValueError, "send_chunk: %zd parts, at most %d", n,
			     KVF_MAX_REGIONS);
		goto out;
	}
	for (; done < n; done++)
		if (part_get(PySequence_Fast_GET_ITEM(seq, done), done, &parts[done], &x[done]) < 0)
			goto out;
	rc = kvf_sender_send_chunk(self->engine->eng, self->h, n ? parts : NULL, (uint32_t)n,
				   last ? KVF_SEND_LAST : 0);
	if (rc) {
		raise_rc(rc, "send_chunk", self);
		goto out;
	}
	ret = Py_NewRef(Py_None);
out:
	for (Py_ssize_t i = 0; i < done; i++)
		idx_put(&x[i]);
	Py_DECREF(seq);
	return ret;
}

static PyObject *room_poll(RoomObject *self, PyObject *unused)
{
	int st;

	if (room_usable(self) < 0)
		return NULL;
	st = kvf_poll(self->engine->eng, self->h);
	if (st < 0)
		return raise_rc(st, "poll", self);
	return PyLong_FromLong(st);
}

static PyObject *room_abort(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_abort(self->engine->eng, self->h);
	if (rc)
		return raise_rc(rc, "abort", self);
	Py_RETURN_NONE;
}

static PyObject *room_quiescent(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_quiescent(self->engine->eng, self->h);
	if (rc < 0)
		return raise_rc(rc, "quiescent", self);
	return PyBool_FromLong(rc);
}

/* True when released; False when not yet (-EBUSY: not terminal, or not
 * quiescent: progress and try again). */
static PyObject *room_release(RoomObject *self, PyObject *unused)
{
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_release(self->engine->eng, self->h);
	if (rc == -EBUSY)
		Py_RETURN_FALSE;
	if (rc)
		return raise_rc(rc, "release", self);
	Py_RETURN_TRUE;
}

static PyObject *room_failure(RoomObject *self, PyObject *unused)
{
	struct kvf_failure fl = KVF_FAILURE_INIT;
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_failure(self->engine->eng, self->h, &fl);
	if (rc)
		return raise_rc(rc, "failure", self);
	return kvf_py_failure(&fl);
}

static PyObject *room_stats(RoomObject *self, PyObject *unused)
{
	struct kvf_room_stats st = KVF_ROOM_STATS_INIT;
	int rc;

	if (room_usable(self) < 0)
		return NULL;
	rc = kvf_room_stats(self->engine->eng, self->h, &st);
	if (rc)
		return raise_rc(rc, "stats", self);
	return kvf_py_room_stats(&st);
}

static void room_dealloc(RoomObject *self)
{
	Py_DECREF(self->engine);
	PyObject_Free(self);
}

static PyObject *room_repr(RoomObject *self)
{
	char s[96];

	snprintf(s, sizeof(s), "<kvferry.Room %s id=%#" PRIx64 " handle=%#" PRIx64 ">",
		 self->role == KVF_SENDER ? "sender" : "receiver", self->id, self->h.v);
	return PyUnicode_FromString(s);
}

static PyObject *room_get_id(RoomObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->id);
}

static PyObject *room_get_handle(RoomObject *self, void *unused)
{
	return PyLong_FromUnsignedLongLong(self->h.v);
}

static PyObject *room_get_role(RoomObject *self, void *unused)
{
	return PyUnicode_FromString(self->role == KVF_SENDER ? "sender" : "receiver");
}

static PyObject *room_get_engine(RoomObject *self, void *unused)
{
	return Py_NewRef((PyObject *)self->engine);
}

static PyMethodDef room_methods[] = {
	{ "init", (PyCFunction)room_init, METH_O,
	  "Receiver: the destination block ids (int32 array used in place); sends ROOM_INFO." },
	{ "send", (PyCFunction)room_send, METH_O,
	  "Sender: the source block ids of region 'kv', in the order of the receiver's, "
	  "as one LAST chunk." },
	{ "init_regions", (PyCFunction)(void (*)(void))room_init_regions,
	  METH_VARARGS | METH_KEYWORDS,
	  "Receiver: init_regions({region: indices, ...}, user_data=b'') sends ROOM_INFO "
	  "with one destination list per region and opaque bytes for the sender; part=k: "
	  "to prefill rank k of a fan-in only, with lists of its own." },
	{ "init_dummy", (PyCFunction)(void (*)(void))room_init_dummy, METH_VARARGS | METH_KEYWORDS,
	  "Receiver that needs no data (SGLang is_dummy): joins the fan-out with no lists; "
	  "SUCCESS with the sender's final write. part=k: only prefill rank k of a fan-in "
	  "is a dummy (the others get init_regions(..., part=j)); user_data as init_regions." },
	{ "peer_count", (PyCFunction)(void (*)(void))room_peer_count, METH_VARARGS | METH_KEYWORDS,
	  "Sender: peer_count(region, k=0): how many items receiver k's list has for this "
	  "region (k: in the order the receivers of a fan-out joined)." },
	{ "user_data", (PyCFunction)(void (*)(void))room_user_data, METH_VARARGS | METH_KEYWORDS,
	  "Sender: user_data(k=0): receiver k's user data (bytes)." },
	{ "receivers", (PyCFunction)room_receivers, METH_NOARGS,
	  "Sender: (n, dummies): the receivers the room serves, the dummies among those "
	  "that joined." },
	{ "send_chunk", (PyCFunction)(void (*)(void))room_send_chunk,
	  METH_VARARGS | METH_KEYWORDS,
	  "Sender: send_chunk([(region, dst_offset, src_indices), ...], last=False): one "
	  "chunk as it comes; the last=True one completes the room." },
	{ "poll", (PyCFunction)room_poll, METH_NOARGS, "The state (int, as kvferry.Poll)." },
	{ "abort", (PyCFunction)room_abort, METH_NOARGS,
	  "Fail the room now and tell the peer; idempotent on a terminal room." },
	{ "failure", (PyCFunction)room_failure, METH_NOARGS, "kvferry.Failure" },
	{ "quiescent", (PyCFunction)room_quiescent, METH_NOARGS,
	  "True when nothing posted can still touch the room's memory." },
	{ "release", (PyCFunction)room_release, METH_NOARGS,
	  "Hand the slot back: True, or False when not terminal and quiescent yet." },
	{ "stats", (PyCFunction)room_stats, METH_NOARGS, "kvferry.RoomStats" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef room_getset[] = {
	{ "id", (getter)room_get_id, NULL, "the room id (bootstrap_room)", NULL },
	{ "handle", (getter)room_get_handle, NULL, "the library's handle (slot, generation)", NULL },
	{ "role", (getter)room_get_role, NULL, "'sender' or 'receiver'", NULL },
	{ "engine", (getter)room_get_engine, NULL, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject RoomType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "kvferry.Room",
	.tp_basicsize = sizeof(RoomObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A room: one request's transfer. Made by Engine.sender / Engine.receiver.",
	.tp_dealloc = (destructor)room_dealloc,
	.tp_repr = (reprfunc)room_repr,
	.tp_methods = room_methods,
	.tp_getset = room_getset,
};
