/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/frameq.h"

#include <errno.h>
#include <stdlib.h>

void kvf_frameq_init(struct kvf_frameq *q, uint32_t max)
{
	*q = (struct kvf_frameq){.tail = &q->head, .max = max ? max : 1};
}

void kvf_frameq_fini(struct kvf_frameq *q)
{
	while (q->head)
		kvf_frameq_pop(q);
}

int kvf_frameq_push(struct kvf_frameq *q, struct kvf_pframe *f)
{
	if (q->n >= q->max)
		return -ENOBUFS;
	f->next = NULL;
	*q->tail = f;
	q->tail = &f->next;
	q->n++;
	return 0;
}

void kvf_frameq_pop(struct kvf_frameq *q)
{
	struct kvf_pframe *f = q->head;

	if (!f)
		return;
	q->head = f->next;
	if (!q->head)
		q->tail = &q->head;
	q->n--;
	free(f->info);
	free(f);
}
