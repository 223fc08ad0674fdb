/* SPDX-License-Identifier: Apache-2.0 */
/* A small checker of the Prometheus text exposition format (0.0.4), for
 * the metrics tests: parses every line back, and says what is wrong with
 * the first bad one. What it checks: each sample's family has a HELP and a
 * TYPE line before it; names and label names are valid; label values are
 * quoted and escaped; values are numbers; a counter's name ends in _total;
 * a histogram has _bucket (ending at le="+Inf"), _sum and _count; no series
 * twice. It keeps the samples so two scrapes can be compared. */
#ifndef KVF_PROM_CHECK_H
#define KVF_PROM_CHECK_H

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROM_MAX 4096

struct prom_sample {
	char series[256]; /* name{labels} as written */
	char family[96];
	char type[16];
	double v;
};

struct prom {
	struct prom_sample s[PROM_MAX];
	int n;
	char fam_help[256][96];
	char fam_type[256][96];
	char fam_type_name[256][16];
	int nhelp, ntype;
	char err[256];
};

static inline bool prom_name_ok(const char *p, size_t n)
{
	if (!n || !(isalpha((unsigned char)p[0]) || p[0] == '_' || p[0] == ':'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == ':'))
			return false;
	return true;
}

static const char *prom_type_of(struct prom *pr, const char *fam)
{
	for (int i = 0; i < pr->ntype; i++)
		if (strcmp(pr->fam_type[i], fam) == 0)
			return pr->fam_type_name[i];
	return NULL;
}

static inline bool prom_has_help(struct prom *pr, const char *fam)
{
	for (int i = 0; i < pr->nhelp; i++)
		if (strcmp(pr->fam_help[i], fam) == 0)
			return true;
	return false;
}

/* The family a sample name belongs to: a histogram's _bucket/_sum/_count
 * belong to the histogram. */
static inline void prom_family(struct prom *pr, const char *name, char *fam, size_t len)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };

	snprintf(fam, len, "%s", name);
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(name), k = strlen(sfx[i]);
		char base[96];

		if (n <= k || strcmp(name + n - k, sfx[i]) != 0)
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(n - k), name);
		if (prom_type_of(pr, base) && strcmp(prom_type_of(pr, base), "histogram") == 0)
			snprintf(fam, len, "%s", base);
	}
}

/* Labels: {name="value",...}; returns the end or NULL. */
static const char *prom_labels(struct prom *pr, const char *p)
{
	if (*p != '{')
		return p;
	p++;
	while (*p != '}') {
		const char *n = p;

		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (!prom_name_ok(n, (size_t)(p - n)) || p[0] != '=' || p[1] != '"')
			return NULL;
		for (p += 2; *p != '"'; p++) {
			if (!*p || *p == '\n')
				return NULL;
			if (*p == '\\' && !strchr("\\\"n", *++p))
				return NULL;
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

static inline bool prom_comment(struct prom *pr, const char *line)
{
	char kind[8], name[96], rest[128];

	if (sscanf(line, "# %7s %95s %127s", kind, name, rest) < 3)
		return snprintf(pr->err, sizeof(pr->err), "bad comment: %.200s", line), false;
	if (!prom_name_ok(name, strlen(name)))
		return snprintf(pr->err, sizeof(pr->err), "bad name: %.200s", line), false;
	if (strcmp(kind, "HELP") == 0 && pr->nhelp < 256) {
		snprintf(pr->fam_help[pr->nhelp++], 96, "%s", name);
		return true;
	}
	if (strcmp(kind, "TYPE") == 0 && pr->ntype < 256) {
		if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram"))
			return snprintf(pr->err, sizeof(pr->err), "bad type: %.200s", line), false;
		if (strcmp(rest, "counter") == 0 &&
		    (strlen(name) < 6 || strcmp(name + strlen(name) - 6, "_total") != 0))
			return snprintf(pr->err, sizeof(pr->err), "counter without _total: %.200s",
					line), false;
		snprintf(pr->fam_type[pr->ntype], 96, "%s", name);
		snprintf(pr->fam_type_name[pr->ntype++], 16, "%.15s", rest);
		return true;
	}
	return snprintf(pr->err, sizeof(pr->err), "unknown comment: %.200s", line), false;
}

static inline bool prom_sample(struct prom *pr, const char *line)
{
	const char *p = line, *end;
	struct prom_sample *s;
	char name[96], *vend;

	while (isalnum((unsigned char)*p) || *p == '_' || *p == ':')
		p++;
	if (!prom_name_ok(line, (size_t)(p - line)) || (size_t)(p - line) >= sizeof(name))
		return snprintf(pr->err, sizeof(pr->err), "bad name: %.200s", line), false;
	snprintf(name, sizeof(name), "%.*s", (int)(p - line), line);
	end = prom_labels(pr, p);
	if (!end || *end != ' ')
		return snprintf(pr->err, sizeof(pr->err), "bad labels: %.200s", line), false;
	if (pr->n >= PROM_MAX)
		return snprintf(pr->err, sizeof(pr->err), "too many samples"), false;
	s = &pr->s[pr->n];
	snprintf(s->series, sizeof(s->series), "%.*s", (int)(end - line), line);
	prom_family(pr, name, s->family, sizeof(s->family));
	if (!prom_has_help(pr, s->family) || !prom_type_of(pr, s->family))
		return snprintf(pr->err, sizeof(pr->err), "no HELP/TYPE before: %.200s", line), false;
	/* (not snprintf: the source lies inside *pr too, which -Wrestrict flags) */
	memcpy(s->type, prom_type_of(pr, s->family), sizeof(s->type) - 1);
	s->type[sizeof(s->type) - 1] = '\0';
	s->v = strtod(end + 1, &vend);
	if (vend == end + 1 || *vend)
		return snprintf(pr->err, sizeof(pr->err), "bad value: %.200s", line), false;
	for (int i = 0; i < pr->n; i++)
		if (strcmp(pr->s[i].series, s->series) == 0)
			return snprintf(pr->err, sizeof(pr->err), "series twice: %.200s", line), false;
	pr->n++;
	return true;
}

/* Parse text; false with pr->err set at the first bad line. */
static inline bool prom_parse(struct prom *pr, const char *text)
{
	char line[1024];

	memset(pr, 0, sizeof(*pr));
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);

		if (!nl)
			return snprintf(pr->err, sizeof(pr->err), "last line has no newline"), false;
		snprintf(line, sizeof(line), "%.*s", (int)n, text);
		text = nl + 1;
		if (!n)
			continue;
		if (!(line[0] == '#' ? prom_comment(pr, line) : prom_sample(pr, line)))
			return false;
	}
	return true;
}

/* The value of a series ("name{labels}" exactly as rendered), or -1. */
static inline double prom_get(const struct prom *pr, const char *series)
{
	for (int i = 0; i < pr->n; i++)
		if (strcmp(pr->s[i].series, series) == 0)
			return pr->s[i].v;
	return -1;
}

/* Every counter (and histogram series) of a is in b and did not go down. */
static inline bool prom_counters_grew(const struct prom *a, const struct prom *b, char *err,
				      size_t len)
{
	for (int i = 0; i < a->n; i++) {
		double v;

		if (strcmp(a->s[i].type, "counter") && strcmp(a->s[i].type, "histogram"))
			continue;
		v = prom_get(b, a->s[i].series);
		if (v < a->s[i].v) {
			snprintf(err, len, "%s went from %g to %g", a->s[i].series, a->s[i].v, v);
			return false;
		}
	}
	return true;
}

#endif
