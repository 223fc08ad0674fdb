/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP endpoint: libmicrohttpd's own thread serves /metrics and /rooms
 * from the latest published snapshot (metrics.c). It never touches the
 * engine: a malformed, oversized or slow request costs this thread alone,
 * and the scheduler never waits for it. */
#include "obs/metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvf_build.h"
#include "base/log.h"

#if HAVE_MHD
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include "base/clock.h"

/* Limits that keep a bad client from costing more than itself: a request
 * whose line and headers pass 16 KiB is refused by libmicrohttpd (414 or
 * 431), an idle connection is closed after 10 s, and at most 32 are open. */
#define HTTP_MEMORY_LIMIT (16 * 1024)
#define HTTP_TIMEOUT_S 10
#define HTTP_CONN_LIMIT 32

struct kvf_http {
	struct MHD_Daemon *d;
	uint16_t port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
			     char *body, size_t len, bool owned)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ok;

	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ok = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned code, const char *text)
{
	return reply(c, code, "text/plain; charset=utf-8", (char *)text, strlen(text), false);
}

/* ------------------------------------------------------------ /rooms query */

struct query {
	struct kvf_rooms_filter f;
	char err[256];
};

static int parse_state(const char *v)
{
	for (int s = 0; s < KVF_POLL_NUM; s++)
		if (strcasecmp(v, kvf_poll_str(s)) == 0)
			return s;
	return -1;
}

static bool parse_arg(struct query *q, const char *key, const char *v)
{
	char *end;

	if (!v)
		v = "";
	if (strcmp(key, "state") == 0) {
		q->f.state = parse_state(v);
		return q->f.state >= 0;
	}
	if (strcmp(key, "role") == 0) {
		q->f.role = strcmp(v, "sender") == 0 ? KVF_SENDER
			    : strcmp(v, "receiver") == 0 ? KVF_RECEIVER : -1;
		return q->f.role >= 0;
	}
	if (strcmp(key, "min_age") == 0) {
		q->f.min_age_s = strtod(v, &end);
		return *v && !*end && q->f.min_age_s >= 0 && q->f.min_age_s < 1e9;
	}
	return false;
}

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key,
			      const char *value)
{
	struct query *q = cls;

	if (q->err[0] || parse_arg(q, key, value))
		return MHD_YES;
	snprintf(q->err, sizeof(q->err),
		 "bad query parameter %.40s=%.40s: want state=FAILED|BOOTSTRAPPING|"
		 "WAITING_FOR_INPUT|TRANSFERRING|SUCCESS, role=sender|receiver, "
		 "min_age=SECONDS\n", key, value ? value : "");
	return MHD_NO;
}

/* --------------------------------------------------------------- requests */

static enum MHD_Result serve(struct MHD_Connection *c, struct kvf_snap *s, bool rooms)
{
	struct kvf_buf b = { 0 };
	struct query q = { .f = { .state = -1, .role = -1 } };

	if (rooms) {
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, on_arg, &q);
		if (q.err[0])
			return reply_text(c, MHD_HTTP_BAD_REQUEST, q.err);
		kvf_render_rooms(s, &q.f, kvf_monotonic_ns(), &b);
	} else {
		kvf_render_metrics(s, &b);
	}
	if (b.failed || !b.p) {
		kvf_buf_free(&b);
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	return reply(c, MHD_HTTP_OK,
		     rooms ? "application/json" : "text/plain; version=0.0.4; charset=utf-8",
		     b.p, b.len, true);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **state)
{
	struct kvf_metrics *m = cls;
	struct kvf_snap *s;
	enum MHD_Result rc;
	bool rooms;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (*upload_size)
		return reply_text(c, MHD_HTTP_BAD_REQUEST, "a GET has no body\n");
	if (strcmp(url, "/") == 0)
		return reply_text(c, MHD_HTTP_OK, "kvferry: /metrics (Prometheus), /rooms (JSON; "
				  "?state=, ?role=, ?min_age=)\n");
	rooms = strcmp(url, "/rooms") == 0;
	if (!rooms && strcmp(url, "/metrics") != 0)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics or /rooms\n");
	s = kvf_snap_get(m);
	if (!s)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet\n");
	rc = serve(c, s, rooms);
	kvf_snap_put(s);
	return rc;
}

/* addr:port as one socket address (numeric or a name). */
static int resolve(const char *addr, uint32_t port, struct sockaddr_storage *out)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char ps[8];
	int rc;

	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(addr, ps, &hints, &ai);
	if (rc || !ai) {
		kvf_err("metrics", "metrics.listen_addr '%s': %s", addr, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(out, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

int kvf_http_start(struct kvf_metrics *m, const char *addr, uint32_t port)
{
	struct sockaddr_storage sa;
	struct kvf_http *h;
	const union MHD_DaemonInfo *di;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
	int rc = resolve(addr, port, &sa);

	if (rc)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, m,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_LIMIT,
				MHD_OPTION_END);
	if (!h->d) {
		rc = errno ? -errno : -EADDRINUSE;
		kvf_err("metrics", "cannot serve /metrics on %s:%u (metrics.listen_addr, "
			"metrics.listen_port): %s", addr, port, strerror(-rc));
		free(h);
		return rc;
	}
	di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = di ? di->port : (uint16_t)port;
	m->http = h;
	kvf_info("metrics", "serving /metrics and /rooms on %s:%u", addr, h->port);
	return 0;
}

uint16_t kvf_http_port(const struct kvf_metrics *m)
{
	return m && m->http ? m->http->port : 0;
}

void kvf_http_stop(struct kvf_metrics *m)
{
	if (!m || !m->http)
		return;
	MHD_stop_daemon(m->http->d); /* joins its thread: no reader after this */
	free(m->http);
	m->http = NULL;
}

#else /* !HAVE_MHD */

int kvf_http_start(struct kvf_metrics *m, const char *addr, uint32_t port)
{
	kvf_err("metrics", "metrics.listen_port is %u but kvferry was built without "
		"libmicrohttpd (install libmicrohttpd-dev and rebuild, or set "
		"metrics.listen_port = 0)", port);
	return -ENOTSUP;
}

uint16_t kvf_http_port(const struct kvf_metrics *m)
{
	return 0;
}

void kvf_http_stop(struct kvf_metrics *m)
{
}

#endif
