/* SPDX-License-Identifier: Apache-2.0 */
/* One logging module. Level from the config (log.level); messages go to
 * stderr with a monotonic timestamp, the level and the module, or to the
 * sink set with kvf_set_log_callback (kvferry.h, where the levels are). */
#ifndef KVF_LOG_H
#define KVF_LOG_H

#include <stddef.h>
#include <string.h>

#include <kvferry/kvferry.h>

/* Process-wide: several engines in one process share it. */
void kvf_log_set_level(enum kvf_log_level lvl);
enum kvf_log_level kvf_log_get_level(void);
/* Parse "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int kvf_log_level_parse(const char *s, enum kvf_log_level *out);

void kvf_log_msg(enum kvf_log_level lvl, const char *mod, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Copy srclen bytes of src (a string from a peer) into dst as printable
 * ASCII for a log line: bytes outside 0x20..0x7e, and the backslash, become
 * \xNN, so a peer cannot end a line or send terminal escapes. Stops early
 * (never inside an escape) when dst is full; dst is always NUL-terminated
 * (dstlen >= 1). Returns dst.
 */
char *kvf_log_escape(char *dst, size_t dstlen, const void *src, size_t srclen);
#define KVF_LOG_ESC_MAX 256
/* kvf_log_escape of a NUL-terminated string into a buffer that lives until
 * the end of the enclosing block: for a log call's argument. */
#define kvf_esc(s) kvf_log_escape((char[KVF_LOG_ESC_MAX]){0}, KVF_LOG_ESC_MAX, (s), strlen(s))

/* Cheap when the level is off: the arguments are not evaluated. */
#define kvf_log(lvl, mod, ...)                                    \
	do {                                                      \
		if ((lvl) <= kvf_log_get_level())                 \
			kvf_log_msg((lvl), (mod), __VA_ARGS__);   \
	} while (0)
#define kvf_err(mod, ...) kvf_log(KVF_LOG_ERROR, mod, __VA_ARGS__)
#define kvf_warn(mod, ...) kvf_log(KVF_LOG_WARN, mod, __VA_ARGS__)
#define kvf_info(mod, ...) kvf_log(KVF_LOG_INFO, mod, __VA_ARGS__)
#define kvf_dbg(mod, ...) kvf_log(KVF_LOG_DEBUG, mod, __VA_ARGS__)

#endif
