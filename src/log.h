/* SPDX-License-Identifier: Apache-2.0 */
/* One logging module. Level from the config (log.level); messages go to
 * stderr with a monotonic timestamp, the level and the module. */
#ifndef KVF_LOG_H
#define KVF_LOG_H

enum kvf_log_level {
	KVF_LOG_ERROR = 0,
	KVF_LOG_WARN,
	KVF_LOG_INFO,
	KVF_LOG_DEBUG,
	KVF_LOG_NUM
};

/* Process-wide: several engines in one process share it. */
void kvf_log_set_level(enum kvf_log_level lvl);
enum kvf_log_level kvf_log_get_level(void);
/* Parse "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int kvf_log_level_parse(const char *s, enum kvf_log_level *out);

void kvf_log_msg(enum kvf_log_level lvl, const char *mod, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

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
