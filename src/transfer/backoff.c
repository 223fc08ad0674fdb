/* SPDX-License-Identifier: Apache-2.0 */
/* Connect backoff per peer (backoff.h). A few peers at most (the prefills a
 * decode rank talks to): a linear scan, and only when a room finds no live
 * connection to its peer. */
#include "transfer/backoff.h"

#include <stdio.h>
#include <string.h>

void kvf_backoff_init(struct kvf_backoff *b, uint32_t base_ms, uint32_t max_ms)
{
	memset(b, 0, sizeof(*b));
	b->base_ns = (uint64_t)base_ms * 1000000ull;
	b->max_ns = (uint64_t)(max_ms > base_ms ? max_ms : base_ms) * 1000000ull;
}

static struct kvf_backoff_peer *find(const struct kvf_backoff *b, const char *peer)
{
	for (uint32_t i = 0; i < KVF_BACKOFF_PEERS; i++)
		if (b->peers[i].fails && !strcmp(b->peers[i].peer, peer))
			return (struct kvf_backoff_peer *)&b->peers[i];
	return NULL;
}

/* A free entry, or the one whose last failure is oldest. */
static struct kvf_backoff_peer *take(struct kvf_backoff *b)
{
	struct kvf_backoff_peer *old = &b->peers[0];

	for (uint32_t i = 0; i < KVF_BACKOFF_PEERS; i++) {
		if (!b->peers[i].fails)
			return &b->peers[i];
		if (b->peers[i].failed_ns < old->failed_ns)
			old = &b->peers[i];
	}
	return old;
}

static uint64_t wait_ns(const struct kvf_backoff *b, uint32_t fails)
{
	uint64_t w = b->base_ns;

	for (uint32_t i = 1; i < fails && w < b->max_ns; i++)
		w *= 2;
	return w < b->max_ns ? w : b->max_ns;
}

void kvf_backoff_failed(struct kvf_backoff *b, const char *peer, uint64_t now, const char *why)
{
	struct kvf_backoff_peer *p;

	if (!b->base_ns)
		return;
	p = find(b, peer);
	if (!p) {
		p = take(b);
		memset(p, 0, sizeof(*p));
		snprintf(p->peer, sizeof(p->peer), "%s", peer);
	}
	if (p->fails < UINT32_MAX)
		p->fails++;
	p->failed_ns = now;
	p->retry_ns = now + wait_ns(b, p->fails);
	snprintf(p->why, sizeof(p->why), "%s", why && *why ? why : "no reason given");
}

void kvf_backoff_ok(struct kvf_backoff *b, const char *peer)
{
	struct kvf_backoff_peer *p = find(b, peer);

	if (p)
		memset(p, 0, sizeof(*p));
}

uint32_t kvf_backoff_fails(const struct kvf_backoff *b, const char *peer)
{
	const struct kvf_backoff_peer *p = find(b, peer);

	return p ? p->fails : 0;
}

const struct kvf_backoff_peer *kvf_backoff_check(const struct kvf_backoff *b, const char *peer,
						 uint64_t now)
{
	const struct kvf_backoff_peer *p = find(b, peer);

	return p && now < p->retry_ns ? p : NULL;
}
