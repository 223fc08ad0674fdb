/* SPDX-License-Identifier: Apache-2.0 */
/* The wire's little-endian integers (docs/wire.md 2), for the codec's files:
 * proto.c (frames), proto_info.c (the ROOM_INFO body), proto_reasm.c (its
 * reassembly), proto_cm.c (rdma_cm private data). */
#ifndef KVF_PROTO_BYTES_H
#define KVF_PROTO_BYTES_H

#include <stdint.h>
#include <stdio.h>

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* 4-byte alignment of the info's parts. */
static inline uint32_t pad4(uint32_t n)
{
	return (n + 3u) & ~3u;
}

/* A decoder's refusal: the detail (when asked for) and the -errno. */
#define BAD(err, ...)                                   \
	do {                                            \
		if (detail && dlen)                     \
			snprintf(detail, dlen, __VA_ARGS__); \
		return (err);                           \
	} while (0)

#endif
