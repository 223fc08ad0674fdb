/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/txpool.h"

#include <errno.h>
#include <stdlib.h>

int kvf_txpool_init(struct kvf_txpool *p, uint32_t n)
{
	*p = (struct kvf_txpool){.n = n};
	p->free = calloc(n ? n : 1, sizeof(*p->free));
	p->owner = calloc(n ? n : 1, sizeof(*p->owner));
	if (!p->free || !p->owner) {
		kvf_txpool_fini(p);
		return -ENOMEM;
	}
	/* Frame 0 on top: the first frames taken are the lowest addresses. */
	for (uint32_t i = 0; i < n; i++) {
		p->free[p->nfree++] = n - 1 - i;
		p->owner[i] = KVF_TXPOOL_NONE;
	}
	return 0;
}

void kvf_txpool_fini(struct kvf_txpool *p)
{
	free(p->free);
	free(p->owner);
	*p = (struct kvf_txpool){0};
}

uint32_t kvf_txpool_take(struct kvf_txpool *p, uint32_t conn)
{
	uint32_t i;

	if (!p->nfree) {
		p->waits++;
		return KVF_TXPOOL_NONE;
	}
	i = p->free[--p->nfree];
	p->owner[i] = conn;
	return i;
}

bool kvf_txpool_give(struct kvf_txpool *p, uint32_t i)
{
	if (i >= p->n || p->owner[i] == KVF_TXPOOL_NONE)
		return false;
	p->owner[i] = KVF_TXPOOL_NONE;
	p->free[p->nfree++] = i;
	return true;
}

uint32_t kvf_txpool_reclaim(struct kvf_txpool *p, uint32_t conn)
{
	uint32_t k = 0;

	/* Rare (a connection destroyed undrained) and the pool small: a scan. */
	for (uint32_t i = 0; i < p->n; i++)
		if (p->owner[i] == conn && kvf_txpool_give(p, i))
			k++;
	p->reclaimed += k;
	return k;
}
