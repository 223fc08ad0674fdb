/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scrape: a light HTTP/1.0 client for the metrics scenario
 * (scenarios/metrics.sh load): COUNT GETs of /metrics, every EVERY-th one
 * /rooms instead, alternating between the given ports on 127.0.0.1,
 * INTERVAL_MS apart. A shell loop forks several processes a scrape, which
 * in a TCG guest costs more than the engine's side of it; this measures the
 * engine's. A refused connection is retried (an engine is not open yet)
 * for the first 60 s, then counts as a failed scrape.
 *
 *   scrape COUNT INTERVAL_MS EVERY PORT [PORT...]
 *
 * Prints "scrape: N answered, M not 200, B bytes, S s" and exits 0 when
 * every scrape was answered 200, 1 otherwise, 2 for bad arguments.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One GET: the status code (0 when refused or cut), *bytes read. */
static int get(int port, const char *path, long *bytes)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 10 };
	char req[128], buf[65536];
	int fd = socket(AF_INET, SOCK_STREAM, 0), code = 0, first = 1;
	ssize_t k;

	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return 0;
	}
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
		close(fd);
		return 0;
	}
	while ((k = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		if (first) {
			buf[k] = '\0';
			sscanf(buf, "HTTP/1.%*d %d", &code);
			first = 0;
		}
		*bytes += k;
	}
	close(fd);
	return code;
}

int main(int argc, char **argv)
{
	int count, interval, every, nports, answered = 0, bad = 0;
	long bytes = 0;
	double t0 = mono(), start_by = t0 + 60;

	if (argc < 5)
		return fprintf(stderr, "usage: scrape COUNT INTERVAL_MS EVERY PORT [PORT...]\n"), 2;
	count = atoi(argv[1]);
	interval = atoi(argv[2]);
	every = atoi(argv[3]);
	nports = argc - 4;
	if (count <= 0 || interval < 0 || every <= 0)
		return fprintf(stderr, "scrape: bad COUNT, INTERVAL_MS or EVERY\n"), 2;
	while (answered < count) {
		int i = answered, code;
		const char *path = i % every == every - 1 ? "/rooms" : "/metrics";

		code = get(atoi(argv[4 + i % nports]), path, &bytes);
		if (code == 0 && mono() < start_by) {
			usleep(20000); /* that engine is not listening yet */
			continue;
		}
		answered++;
		bad += code != 200;
		if (interval)
			usleep((useconds_t)interval * 1000);
	}
	printf("scrape: %d answered, %d not 200, %ld bytes, %.1f s\n", answered, bad, bytes,
	       mono() - t0);
	return bad ? 1 : 0;
}
