/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int g_level = KVF_LOG_INFO;

/* The sink: fn and arg change together, so under a lock; it is held only to
 * copy them, never across the call (the sink may block, e.g. on a Python
 * interpreter lock whose holder is about to set the sink). */
static pthread_mutex_t g_sink_lock = PTHREAD_MUTEX_INITIALIZER;
static kvf_log_fn g_sink_fn;
static void *g_sink_arg;

static const char *const level_names[KVF_LOG_NUM] = {
	[KVF_LOG_ERROR] = "error",
	[KVF_LOG_WARN] = "warn",
	[KVF_LOG_INFO] = "info",
	[KVF_LOG_DEBUG] = "debug",
};

void kvf_log_set_level(enum kvf_log_level lvl)
{
	if (lvl < KVF_LOG_NUM)
		atomic_store_explicit(&g_level, (int)lvl, memory_order_relaxed);
}

enum kvf_log_level kvf_log_get_level(void)
{
	return (enum kvf_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

int kvf_log_level_parse(const char *s, enum kvf_log_level *out)
{
	for (int i = 0; s && i < KVF_LOG_NUM; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum kvf_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int kvf_set_log_callback(kvf_log_fn fn, void *arg)
{
	pthread_mutex_lock(&g_sink_lock);
	g_sink_fn = fn;
	g_sink_arg = fn ? arg : NULL;
	pthread_mutex_unlock(&g_sink_lock);
	return 0;
}

void kvf_log_msg(enum kvf_log_level lvl, const char *mod, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	kvf_log_fn fn;
	void *arg;
	va_list ap;
	int n;

	pthread_mutex_lock(&g_sink_lock);
	fn = g_sink_fn;
	arg = g_sink_arg;
	pthread_mutex_unlock(&g_sink_lock);
	if (fn) {
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		fn(arg, (int)lvl, mod, line);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(line, sizeof(line), "[%5lld.%06ld] kvferry %-5s %s: ",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000,
		     lvl < KVF_LOG_NUM ? level_names[lvl] : "?", mod);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One fputs per line so lines from the poller and scheduler threads
	 * do not interleave mid-line. */
	strncat(line, "\n", sizeof(line) - strlen(line) - 1);
	fputs(line, stderr);
}

char *kvf_log_escape(char *dst, size_t dstlen, const void *src, size_t srclen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = src;
	size_t o = 0;

	if (!dst || !dstlen)
		return dst;
	for (size_t i = 0; s && i < srclen; i++) {
		unsigned char ch = s[i];

		if (ch >= 0x20 && ch <= 0x7e && ch != '\\') {
			if (o + 1 >= dstlen)
				break;
			dst[o++] = (char)ch;
			continue;
		}
		if (o + 4 >= dstlen)
			break;
		dst[o++] = '\\';
		dst[o++] = 'x';
		dst[o++] = hex[ch >> 4];
		dst[o++] = hex[ch & 15];
	}
	dst[o] = '\0';
	return dst;
}
