/* SPDX-License-Identifier: Apache-2.0 */
/* The histograms' bounds and the one way to add to them. */
#include "base/hist.h"

/* Seconds: a room on soft-RoCE takes tens of ms, on hardware well under
 * one; the top bounds reach the default deadlines. Bytes: 64 KiB to 4 GiB
 * by powers of four. */
static const double seconds_bounds[KVF_HIST_BUCKETS - 1] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60,
};
/* The ring's wait: microseconds when the scheduler thread is free,
 * milliseconds to seconds when the engine's loop is busy elsewhere. */
static const double wait_bounds[KVF_HIST_BUCKETS - 1] = {
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.1, 1,
};
static const double bytes_bounds[KVF_HIST_BUCKETS - 1] = {
	4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
	268435456, 1073741824, 4294967296.0, 17179869184.0, 68719476736.0,
};

const double *kvf_hist_bounds(enum kvf_hist_kind kind)
{
	return kind == KVF_HIST_SECONDS ? seconds_bounds :
	       kind == KVF_HIST_WAIT ? wait_bounds : bytes_bounds;
}

void kvf_hist_add(struct kvf_hist *h, enum kvf_hist_kind kind, double v)
{
	const double *b = kvf_hist_bounds(kind);
	unsigned i = 0;

	while (i < KVF_HIST_BUCKETS - 1 && v > b[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += v;
}
