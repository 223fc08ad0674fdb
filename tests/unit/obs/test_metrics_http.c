/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP endpoint (src/obs/metrics_http.c) on loopback, with a real
 * libmicrohttpd: the right status for good, bad, malformed and oversized
 * requests, and the endpoint still serving afterwards; scrapes from another
 * thread while the scheduler runs rooms and publishes. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fake_transport.h"
#include "obs/metrics.h"
#include "json_check.h"
#include "kvf_build.h"
#include "prom_check.h"

static struct kvf_config cfg;
static struct fake f;
static kvf_engine *eng;
static uint16_t port;

static void setup(void)
{
	fake_cfg(&cfg);
	eng = fake_engine(&cfg, &f);
	cr_assert_not_null(eng);
	cr_assert_eq(kvf_metrics_init(eng), 0);
#if HAVE_MHD
	cr_assert_eq(kvf_metrics_publish(eng), 0);
	cr_assert_eq(kvf_http_start(eng->metrics, "127.0.0.1", 0), 0);
	port = kvf_http_port(eng->metrics);
	cr_assert_gt(port, 0);
#endif
}

static void teardown(void)
{
	kvf_engine_close(eng);
}

TestSuite(metrics_http, .init = setup, .fini = teardown);

/* Send req as is and read the whole answer (the server closes after an
 * HTTP/1.0 request). Returns the status code, 0 when none came; *body
 * (if body) is the malloc'd answer. */
static int http_raw(const char *req, size_t len, char **body)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 10 };
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	int fd = socket(AF_INET, SOCK_STREAM, 0), code = 0;
	ssize_t k;

	cr_assert(fd >= 0 && buf);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		free(buf);
		if (body)
			*body = NULL;
		return 0; /* nothing listens */
	}
	for (size_t off = 0; off < len; off += (size_t)k)
		if ((k = send(fd, req + off, len - off, MSG_NOSIGNAL)) <= 0)
			break; /* the server may answer and close before it read it all */
	while ((k = recv(fd, buf + n, cap - n, 0)) > 0) {
		n += (size_t)k;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			cr_assert_not_null(buf);
		}
	}
	close(fd);
	buf[n] = '\0';
	sscanf(buf, "HTTP/1.%*d %d", &code);
	if (body)
		*body = buf;
	else
		free(buf);
	return code;
}

static int http_get(const char *path, char **body)
{
	char req[512];

	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
	return http_raw(req, strlen(req), body);
}

/* The body after the headers. */
static const char *body_of(const char *resp)
{
	const char *p = strstr(resp, "\r\n\r\n");

	cr_assert_not_null(p, "%s", resp);
	return p + 4;
}

#if HAVE_MHD

Test(metrics_http, serves_metrics_and_rooms)
{
	static struct prom pr;
	kvf_room h;
	char *r;

	cr_assert_eq(kvf_sender_create(eng, 0x42, &h), 0);
	cr_assert_eq(kvf_metrics_publish(eng), 0);
	cr_assert_eq(http_get("/metrics", &r), 200, "%s", r);
	cr_assert(strstr(r, "Content-Type: text/plain; version=0.0.4"), "%s", r);
	cr_assert(prom_parse(&pr, body_of(r)), "%s", pr.err);
	cr_assert_eq(prom_get(&pr, "kvferry_rooms{role=\"sender\",state=\"BOOTSTRAPPING\"}"), 1);
	free(r);
	cr_assert_eq(http_get("/rooms?state=bootstrapping&role=sender&min_age=0", &r), 200);
	cr_assert(strstr(r, "Content-Type: application/json"), "%s", r);
	cr_assert(json_valid(body_of(r)), "%s", r);
	cr_assert(strstr(r, "\"id\":\"0x42\""), "%s", r);
	free(r);
	cr_assert_eq(http_get("/", NULL), 200);
}

Test(metrics_http, bad_requests_get_4xx_and_the_endpoint_lives_on)
{
	static const char garbage[] = "\x01\x02 not http at all\r\n\r\n";
	static const char post[] = "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc";
	enum { big = 64 * 1024 };
	static char huge[big + 64];
	int code;

	cr_assert_eq(http_get("/nope", NULL), 404);
	cr_assert_eq(http_get("/rooms?state=NOPE", NULL), 400);
	cr_assert_eq(http_get("/rooms?min_age=-1", NULL), 400);
	cr_assert_eq(http_get("/rooms?colour=red", NULL), 400);
	cr_assert_eq(http_raw(post, strlen(post), NULL), 405);
	code = http_raw(garbage, strlen(garbage), NULL);
	cr_assert(code >= 400 && code < 500, "garbage: %d", code);
	/* A 64 KiB header: over the 16 KiB the server gives a request. */
	strcpy(huge, "GET /metrics HTTP/1.0\r\nX-Big: ");
	memset(huge + strlen(huge), 'a', big);
	strcpy(huge + strlen("GET /metrics HTTP/1.0\r\nX-Big: ") + big, "\r\n\r\n");
	code = http_raw(huge, strlen(huge), NULL);
	cr_assert(code >= 400 && code < 500, "oversized: %d", code);
	/* A 64 KiB URL. */
	memcpy(huge, "GET /", 5);
	memset(huge + 5, 'b', big);
	strcpy(huge + 5 + big, " HTTP/1.0\r\n\r\n");
	code = http_raw(huge, strlen(huge), NULL);
	cr_assert(code >= 400 && code < 500, "long url: %d", code);
	/* A request line without a space: libmicrohttpd 0.9.75 closes the
	 * connection without an answer; the endpoint goes on. */
	code = http_raw("garbage\r\n\r\n", 11, NULL);
	cr_assert(code == 0 || (code >= 400 && code < 500), "no space: %d", code);
	cr_assert_eq(http_get("/metrics", NULL), 200);
}

/* A client that connects and says nothing holds one connection, not the
 * endpoint and not the engine. */
Test(metrics_http, a_silent_client_blocks_nothing)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(send(fd, "GET /met", 8, 0), 8);
	cr_assert_eq(kvf_progress(eng), 0);
	cr_assert_eq(kvf_metrics_publish(eng), 0);
	cr_assert_eq(http_get("/metrics", NULL), 200);
	close(fd);
}

static atomic_bool scraping_done;
static atomic_int scrapes_ok, scrapes_bad;

static void *scraper(void *arg)
{
	for (int i = 0; i < 200; i++) {
		char *r;
		int code = http_get(i % 2 ? "/metrics" : "/rooms", &r);

		if (code == 200 && (i % 2 || json_valid(body_of(r))))
			atomic_fetch_add(&scrapes_ok, 1);
		else
			atomic_fetch_add(&scrapes_bad, 1);
		free(r);
	}
	atomic_store(&scraping_done, true);
	return NULL;
}

/* The scheduler runs rooms and publishes every round while another thread
 * scrapes: every scrape is whole, every room ends as it would alone. */
Test(metrics_http, scrapes_while_rooms_run)
{
	static const uint32_t blocks[2] = { 0, 1 };
	pthread_t th;
	uint64_t id = 1, ok = 0;

	cr_assert_eq(pthread_create(&th, NULL, scraper, NULL), 0);
	while (!atomic_load(&scraping_done)) {
		kvf_room h;

		cr_assert_eq(kvf_sender_create(eng, id, &h), 0);
		push_info(eng, id++, 7, 0x100000005ull, 2);
		kvf_progress(eng);
		cr_assert_eq(kvf_sender_send(eng, h, blocks, 2), 0);
		push_wc(eng, h, 0);
		kvf_progress(eng);
		ok += kvf_poll(eng, h) == KVF_SUCCESS;
		cr_assert_eq(kvf_release(eng, h), 0);
		kvf_metrics_publish(eng); /* -EBUSY is allowed: every buffer held */
	}
	pthread_join(th, NULL);
	cr_assert_eq(atomic_load(&scrapes_ok), 200, "bad scrapes: %d", atomic_load(&scrapes_bad));
	cr_assert_eq(ok, id - 1);
}

/* A port nothing listens on now (bound to 0, read back, let go). */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static int open_with(const char *metrics_group, kvf_engine **e)
{
	char path[] = "/tmp/kvf-metrics-conf.XXXXXX";
	int fd = mkstemp(path), rc;
	FILE *fp = fdopen(fd, "w");

	cr_assert_not_null(fp);
	fprintf(fp, "log: { level = \"error\"; };\nengine: { summary_interval_s = 0; };\n%s\n",
		metrics_group);
	fclose(fp);
	rc = kvf_engine_open(path, e);
	unlink(path);
	return rc;
}

/* kvf_engine_open starts the endpoint from the metrics group alone. */
Test(metrics_http, engine_open_serves_what_the_config_says)
{
	char group[128];
	kvf_engine *e = NULL;
	char *r;

	port = free_port();
	snprintf(group, sizeof(group), "metrics: { listen_port = %u; interval_ms = 10; };", port);
	cr_assert_eq(open_with(group, &e), 0);
	cr_assert_eq(http_get("/rooms", &r), 200, "%s", r);
	cr_assert(strstr(r, "\"live\":0"), "%s", r);
	free(r);
	kvf_engine_close(e);
	cr_assert_eq(http_get("/rooms", NULL), 0, "still served after close");
	cr_assert_eq(open_with("metrics: { listen_addr = \"no-such-host.invalid\"; "
			       "listen_port = 1; };", &e), -EINVAL);
	cr_assert_null(e);
}

#else

Test(metrics_http, without_libmicrohttpd_the_endpoint_is_refused)
{
	cr_assert_eq(kvf_http_start(eng->metrics, "127.0.0.1", 9464), -ENOTSUP);
}

#endif
