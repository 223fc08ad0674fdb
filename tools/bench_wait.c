/* SPDX-License-Identifier: Apache-2.0 */
/* --wait: after a loop turn where no engine applied anything, the
 * scheduler thread sleeps until there is work (kvf_engine_wait, or with
 * both engines in this process their fds in one poll()) instead of
 * spinning, and leaves the cores to the pollers. The sleep is capped so
 * that the progress line and --timeout still come. */
#include <errno.h>
#include <poll.h>

#include "bench.h"

#define WAIT_CAP_MS 100

static int min_ms(int a, int b)
{
	return a < b ? a : b;
}

/* Both engines here: announce both sleeps, then one poll() on both fds. */
static int wait_both(kvf_engine *a, kvf_engine *b)
{
	struct pollfd fds[2] = {
		{.fd = kvf_engine_fd(a), .events = POLLIN},
		{.fd = kvf_engine_fd(b), .events = POLLIN},
	};
	int ta = kvf_engine_wait_prepare(a), tb;

	if (ta == 0)
		return 0; /* work on a: nothing armed there, go round */
	tb = kvf_engine_wait_prepare(b);
	if (ta < 0 || tb < 0)
		return ta < 0 ? ta : tb;
	if (tb == 0)
		return 0; /* a stays armed: its next kvf_progress ends it */
	if (poll(fds, 2, min_ms(min_ms(ta, tb), WAIT_CAP_MS)) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int bench_idle_wait(const struct side *p, const struct side *d)
{
	int rc;

	if (p->eng && d->eng)
		return wait_both(p->eng, d->eng);
	rc = kvf_engine_wait(p->eng ? p->eng : d->eng, WAIT_CAP_MS);
	return rc == -EINTR ? 0 : rc < 0 ? rc : 0;
}
