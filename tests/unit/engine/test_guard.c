/* SPDX-License-Identifier: Apache-2.0 */
/* src/engine/guard.c: an engine used in a child after fork() refuses and leaves the
 * parent's transport alone; a second thread in kvf_progress / kvf_engine_wait
 * is refused with -EBUSY and counted. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "room_fixture.h"

TestSuite(guard, .init = room_setup, .fini = room_teardown);

#define ID 0x77

/* What the child found, as exit-code bits (0: all as expected). */
static int child_checks(kvf_room receiver)
{
	int bad = 0, aborts = f.aborts, infos = f.room_infos;
	uint32_t blocks[2] = { 0, 1 };
	kvf_room h;

	bad |= (kvf_progress(eng) != -ECHILD) << 0;
	bad |= (kvf_engine_wait(eng, 0) != -ECHILD) << 1;
	bad |= (kvf_engine_wait_prepare(eng) != -ECHILD) << 2;
	/* room calls still answer, but reach only the refusing transport */
	kvf_abort(eng, receiver);
	bad |= (f.aborts != aborts) << 3;
	if (kvf_receiver_create(eng, ID + 1, "10.0.0.1:7000", &h) == 0) {
		bad |= (kvf_receiver_init(eng, h, blocks, 2) == 0) << 4;
		bad |= (f.room_infos != infos) << 5;
	}
	kvf_engine_close(eng); /* frees the child's memory, tears nothing down */
	bad |= (f.teardowns != 0) << 6;
	return bad;
}

Test(guard, a_forked_child_is_refused_and_the_parent_goes_on)
{
	uint32_t blocks[2] = { 0, 1 };
	kvf_room r;
	int status;
	pid_t pid;

	cr_assert_eq(kvf_receiver_create(eng, ID, "10.0.0.1:7000", &r), 0);
	cr_assert_eq(kvf_receiver_init(eng, r, blocks, 2), 0);
	cr_assert_eq(f.room_infos, 1);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_checks(r));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child's failed checks (bits): %#x",
		     WEXITSTATUS(status));
	/* the parent's engine and transport are as they were */
	cr_assert_geq(kvf_progress(eng), 0);
	cr_assert_eq(kvf_poll(eng, r), KVF_WAITING_FOR_INPUT);
	kvf_abort(eng, r);
	cr_assert_eq(f.aborts, 1, "the parent's abort reached its transport");
}

static void *waiter(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)kvf_engine_wait(eng, 400);
}

Test(guard, progress_while_another_thread_waits_is_refused_and_counted)
{
	struct timespec ms50 = { .tv_nsec = 50 * 1000000L };
	pthread_t t;
	void *rc;

	cr_assert_eq(pthread_create(&t, NULL, waiter, NULL), 0);
	nanosleep(&ms50, NULL); /* the waiter is asleep in kvf_engine_wait */
	cr_assert_eq(kvf_progress(eng), -EBUSY);
	cr_assert_eq(kvf_engine_wait(eng, 0), -EBUSY);
	cr_assert_eq(pthread_join(t, &rc), 0);
	cr_assert_geq((intptr_t)rc, 0, "the waiter's own wait went on: %d", (int)(intptr_t)rc);
	cr_assert_eq(stats().calls_concurrent, 2);
	cr_assert_geq(kvf_progress(eng), 0, "one thread at a time is fine");
}
