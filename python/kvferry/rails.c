/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry._kvferry: an engine's rails as Python objects. */
#define PY_SSIZE_T_CLEAN
#include "rails.h"

static PyObject *rail_dict(const struct kvf_rail_stats *r)
{
	return Py_BuildValue("{s:I,s:s,s:s,s:I,s:s,s:K,s:K,s:K,s:K,s:K,s:K}",
			     "rail", r->rail, "device", r->device, "addr", r->addr,
			     "port", r->port, "state", kvf_rail_state_str((int)r->state),
			     "bytes", (unsigned long long)r->bytes,
			     "writes", (unsigned long long)r->writes,
			     "wr_errors", (unsigned long long)r->wr_errors,
			     "conns_live", (unsigned long long)r->conns_live,
			     "conns_lost", (unsigned long long)r->conns_lost,
			     "connects", (unsigned long long)r->connects);
}

PyObject *kvf_py_rails(kvf_engine *eng, int *rc)
{
	struct kvf_rail_stats rs[KVF_PY_MAX_RAILS];
	PyObject *out;
	int n;

	for (int i = 0; i < KVF_PY_MAX_RAILS; i++)
		rs[i] = (struct kvf_rail_stats)KVF_RAIL_STATS_INIT;
	n = kvf_engine_rails(eng, rs, KVF_PY_MAX_RAILS);
	*rc = n < 0 ? n : 0;
	if (n < 0)
		return NULL;
	out = PyList_New(0);
	for (int i = 0; out && i < n && i < KVF_PY_MAX_RAILS; i++) {
		PyObject *d = rail_dict(&rs[i]);

		if (!d || PyList_Append(out, d))
			Py_CLEAR(out);
		Py_XDECREF(d);
	}
	return out;
}
