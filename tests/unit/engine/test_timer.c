/* SPDX-License-Identifier: Apache-2.0 */
/* The deadline heap (src/engine/timer.c) against a brute-force model. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "engine/timer.h"

Test(timer, pops_in_deadline_order_and_only_when_due)
{
	struct kvf_timers t;
	uint32_t slot;

	cr_assert_eq(kvf_timers_init(&t, 8), 0);
	kvf_timers_set(&t, 3, 30);
	kvf_timers_set(&t, 1, 10);
	kvf_timers_set(&t, 2, 20);
	cr_assert_not(kvf_timers_pop_due(&t, 9, &slot));
	cr_assert(kvf_timers_pop_due(&t, 25, &slot));
	cr_assert_eq(slot, 1);
	cr_assert(kvf_timers_pop_due(&t, 25, &slot));
	cr_assert_eq(slot, 2);
	cr_assert_not(kvf_timers_pop_due(&t, 25, &slot));
	cr_assert(kvf_timers_armed(&t, 3));
	kvf_timers_cancel(&t, 3);
	cr_assert_not(kvf_timers_armed(&t, 3));
	cr_assert_not(kvf_timers_pop_due(&t, 1000, &slot));
	kvf_timers_fini(&t);
}

/* Random set/move/cancel/pop against an array of deadlines. */
Test(timer, random_against_model)
{
	enum { N = 512, OPS = 200000 };
	static uint64_t model[N]; /* 0 = not armed */
	struct kvf_timers t;
	uint64_t now = 0;

	srand(12345);
	cr_assert_eq(kvf_timers_init(&t, N), 0);
	for (int op = 0; op < OPS; op++) {
		uint32_t s = (uint32_t)rand() % N, got;
		int what = rand() % 4;

		if (what <= 1) {
			model[s] = now + 1 + (uint64_t)(rand() % 1000);
			kvf_timers_set(&t, s, model[s]);
		} else if (what == 2) {
			model[s] = 0;
			kvf_timers_cancel(&t, s);
		} else {
			now += (uint64_t)(rand() % 50);
			while (kvf_timers_pop_due(&t, now, &got)) {
				uint64_t min = UINT64_MAX;

				for (int i = 0; i < N; i++)
					if (model[i] && model[i] < min)
						min = model[i];
				cr_assert_eq(model[got], min, "popped slot %u at %lu, min %lu", got,
					     (unsigned long)model[got], (unsigned long)min);
				cr_assert_leq(model[got], now);
				model[got] = 0;
			}
			for (int i = 0; i < N; i++)
				cr_assert(model[i] == 0 || model[i] > now, "slot %d overdue", i);
		}
		cr_assert_eq(kvf_timers_armed(&t, s), model[s] != 0);
	}
	kvf_timers_fini(&t);
}
