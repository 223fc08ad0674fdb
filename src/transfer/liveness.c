/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/liveness.h"

#include <inttypes.h>
#include <stdio.h>

/* a - b, 0 when b is later: a stamp taken after the caller's clock read
 * must not wrap into an age of 584 years. */
static uint64_t since(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void kvf_presence_init(struct kvf_presence *w, uint64_t expect_ns, uint64_t now)
{
	*w = (struct kvf_presence){.last_ns = now, .expect_ns = expect_ns};
}

void kvf_presence_round(struct kvf_presence *w, uint64_t now)
{
	uint64_t gap = since(now, w->last_ns);

	/* A gap up to expect_ns is the poller's own sleep: it was there to
	 * wake for any completion. Past it, the poller was not looking. */
	if (gap > w->expect_ns)
		w->away_ns += gap - w->expect_ns;
	if (now > w->last_ns)
		w->last_ns = now;
}

void kvf_live_start(struct kvf_liveness *l, const struct kvf_presence *w, uint64_t interval_ns,
		    uint64_t now)
{
	*l = (struct kvf_liveness){.ka_due_ns = now + interval_ns};
	kvf_live_heard(l, w, now);
}

void kvf_live_heard(struct kvf_liveness *l, const struct kvf_presence *w, uint64_t now)
{
	l->heard_ns = now;
	l->heard_away_ns = w->away_ns;
	l->ka_acked = 0; /* the ACKs since meant the NIC; now the process spoke */
}

uint64_t kvf_live_silence(const struct kvf_liveness *l, const struct kvf_presence *w, uint64_t now)
{
	return since(since(now, l->heard_ns), since(w->away_ns, l->heard_away_ns));
}

bool kvf_live_lost(const struct kvf_liveness *l, const struct kvf_presence *w, uint64_t limit_ns,
		   uint64_t now)
{
	return limit_ns && kvf_live_silence(l, w, now) > limit_ns;
}

enum kvf_ka_action kvf_live_keepalive(struct kvf_liveness *l, uint64_t interval_ns, uint64_t now)
{
	if (!interval_ns || now < l->ka_due_ns)
		return KVF_KA_WAIT;
	if (l->ka_inflight) {
		/* Due again one interval on: counted once per interval, and
		 * sent at once when the one in flight completes. */
		l->ka_due_ns = now + interval_ns;
		l->ka_overdue = true;
		return KVF_KA_LATE;
	}
	return KVF_KA_SEND;
}

void kvf_live_ka_posted(struct kvf_liveness *l, uint64_t interval_ns, uint64_t now)
{
	l->ka_inflight = true;
	l->ka_due_ns = now + interval_ns;
}

void kvf_live_ka_done(struct kvf_liveness *l, bool acked, uint64_t now)
{
	l->ka_inflight = false;
	if (acked)
		l->ka_acked++;
	if (l->ka_overdue) {
		l->ka_overdue = false;
		l->ka_due_ns = now;
	}
}

int kvf_live_why(char *buf, size_t len, const struct kvf_liveness *l, uint64_t silence_ns,
		 uint32_t misses, uint32_t interval_ms)
{
	int n = snprintf(buf, len, "nothing heard for %" PRIu64 " ms (%u heartbeats of %u ms)",
			 silence_ns / 1000000, misses, interval_ms);

	if (!l->ka_acked || n < 0 || (size_t)n >= len)
		return n;
	/* Short enough to fit a room's failure detail (192 bytes) whole,
	 * after "connection N to the peer is gone (...)". */
	return n + snprintf(buf + n, len - (size_t)n, "; its NIC ACKed %u of our heartbeats "
			    "meanwhile: host and link up, process not (stopped or hung)",
			    l->ka_acked);
}
