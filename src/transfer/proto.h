/* SPDX-License-Identifier: Apache-2.0 */
/* Control frames (SEND/RECV on the RC queue pair) and the rdma_cm private
 * data, encoded little-endian byte by byte so the wire never depends on the
 * host's layout or padding.
 *
 * Every frame: a fixed 24-byte header, then a body per type.
 *   off  size  field
 *     0     4  magic   "KVFR"
 *     4     2  version KVF_PROTO_VERSION
 *     6     1  type    enum kvf_frame_type
 *     7     1  flags   0 (reserved)
 *     8     4  length  whole frame, header included
 *    12     4  reserved, 0
 *    16     8  room id (0 for HELLO and HEARTBEAT)
 * Bodies (docs/wire.md has every offset):
 *   HELLO      engine_id[32], nregions u32, nbufs u32 (over every region),
 *              nregions x { name[32], id u32, nitems u32, nbufs u32,
 *                           reserved u32,
 *                           nbufs x { addr u64, item_size u64, rkey u32,
 *                                     reserved u32, page_tokens u32,
 *                                     heads u32, head0 u32, head_bytes u32,
 *                                     layer u32, kind u32 } }
 *   ROOM_INFO  recv_handle u64, len u32, total u32, len bytes of the info
 *   ROOM_INFO_CONT  offset u32, len u32, len bytes of the info
 *   ABORT      to_role u8, reserved u8, reason u16, reserved u32
 *   ABORT_ACK, HEARTBEAT: none
 *   AUTH       role u8, status u8, reserved u16, decode_qpn u32,
 *              prefill_qpn u32, decode_nonce[16], prefill_nonce[16],
 *              decode_gid[16], prefill_gid[16], mac[32] (auth.h)
 * The info (a room's ROOM_INFO body once whole):
 *   nlists u32, user_len u32, user[user_len], zero to a multiple of 4,
 *   nlists x { region u32 (an id of the receiver's HELLO), n u32, n x u32 }
 * Decoding checks every length before reading it, and that every reserved
 * field (and the room id of HELLO and HEARTBEAT) is 0.
 *
 * A room's info longer than one frame (the peer's receive buffers, at most
 * 64 KiB) is a sequence: a ROOM_INFO with the total byte count and the
 * first len bytes, then ROOM_INFO_CONT frames with the next bytes at offset
 * (= bytes sent so far), until total. total 0 in a ROOM_INFO means "len: the
 * whole info" (an info that fits one frame). The sender posts a sequence
 * whole and contiguous on ONE queue pair, nothing of any other room between
 * its frames; RC delivers it in order. The receiver keeps one sequence in
 * progress per connection (kvf_room_reasm): a ROOM_INFO or ROOM_INFO_CONT
 * that does not continue it fails the rooms involved (other frame types in
 * between are taken as usual), and so does a sequence not whole within
 * KVF_PROTO_REASM_MAX_NS. The info is decoded, strictly, once whole. */
#ifndef KVF_PROTO_H
#define KVF_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

#define KVF_PROTO_MAGIC 0x5246564bu /* bytes 'K' 'V' 'F' 'R' */
/* 2: ROOM_INFO's reserved field is its list's total, ROOM_INFO_CONT. A
 * version-1 peer would take a split list's first frame for the whole list.
 * 3: HELLO carries regions, ROOM_INFO an info of several lists and user
 * data. The versions refuse each other at connect.
 * 4: a HELLO buffer entry carries the buffer's geometry (48 bytes, was 24):
 * a version-3 peer would read geometry as the next buffer.
 * 5: the token hash leaves the connect data (a nonce takes its place) and
 * AUTH frames prove the token (auth.h): a version-4 peer would take the
 * nonce for a hash and find no AUTH frame type.
 * 6: an info list may be runs (start, count) instead of items: a list's
 * region word with KVF_PROTO_INFO_RUNS set. A version-5 peer would take the
 * word for a region id it does not have. */
#define KVF_PROTO_VERSION 6u
#define KVF_PROTO_HDR_LEN 24u
#define KVF_PROTO_ENGINE_ID_LEN 32u
#define KVF_PROTO_HELLO_FIXED (KVF_PROTO_HDR_LEN + KVF_PROTO_ENGINE_ID_LEN + 8u)
#define KVF_PROTO_HELLO_BUF_LEN 48u
#define KVF_PROTO_HELLO_REGION_LEN 48u
#define KVF_PROTO_REGION_NAME_LEN 32u /* bytes on the wire, NUL-padded; 31 used */
#define KVF_PROTO_MAX_REGIONS 16u     /* = KVF_MAX_REGIONS */
#define KVF_PROTO_INFO_FIXED 8u       /* nlists, user_len */
#define KVF_PROTO_INFO_LIST_FIXED 8u  /* region, n */
#define KVF_PROTO_INFO_RUNS 0x80000000u /* in a list's region word: n runs follow */
#define KVF_PROTO_RUN_LEN 8u          /* a run: start u32, count u32 */
#define KVF_PROTO_USER_MAX 256u       /* = KVF_USER_DATA_MAX */
#define KVF_PROTO_ROOM_INFO_FIXED (KVF_PROTO_HDR_LEN + 16u)
#define KVF_PROTO_ROOM_INFO_CONT_FIXED (KVF_PROTO_HDR_LEN + 8u)
#define KVF_PROTO_ABORT_LEN (KVF_PROTO_HDR_LEN + 8u)
#define KVF_PROTO_NONCE_LEN 16u
#define KVF_PROTO_GID_LEN 16u
#define KVF_PROTO_MAC_LEN 32u         /* HMAC-SHA256 */
#define KVF_PROTO_AUTH_MAC_OFF (KVF_PROTO_HDR_LEN + 12u + 2 * KVF_PROTO_NONCE_LEN + \
				2 * KVF_PROTO_GID_LEN)
#define KVF_PROTO_AUTH_LEN (KVF_PROTO_AUTH_MAC_OFF + KVF_PROTO_MAC_LEN)
/* The smallest receive buffer a peer may announce: an AUTH frame (the
 * first one each side must take), which is more than a ROOM_INFO with one
 * item id. */
#define KVF_PROTO_MIN_FRAME_MAX KVF_PROTO_AUTH_LEN

enum kvf_frame_type {
	KVF_FR_HELLO = 1,     /* pool layout, both ways, first frame */
	KVF_FR_ROOM_INFO = 2, /* decode -> prefill: destination blocks */
	KVF_FR_ABORT = 3,     /* either way */
	KVF_FR_ABORT_ACK = 4, /* prefill -> decode: no write of the room left */
	KVF_FR_HEARTBEAT = 5, /* liveness */
	KVF_FR_ROOM_INFO_CONT = 6, /* decode -> prefill: more of a ROOM_INFO's ids */
	KVF_FR_AUTH = 7,      /* both ways, before any other: the token's proof */
	KVF_FR_NUM
};

struct kvf_peer_info;

/* One buffer of a region in HELLO. */
struct kvf_hello_buf {
	uint64_t addr;
	uint64_t item_size;
	uint32_t rkey;
	struct kvf_buf_geometry geom; /* all zero: none */
};

/* One region in HELLO (its buffers follow it). */
struct kvf_hello_region {
	char name[KVF_PROTO_REGION_NAME_LEN]; /* NUL-terminated, 1..31 bytes */
	uint32_t id;                          /* < KVF_PROTO_MAX_REGIONS */
	uint32_t nitems;
	uint32_t nbufs;
};

/* What a proof of the token is bound to (auth.h): the connection as one
 * side sees it. The nonces come from the connect and accept private data,
 * the QP numbers from the CM's REQ and REP, the GIDs from the route. */
struct kvf_auth_id {
	uint32_t decode_qpn;
	uint32_t prefill_qpn;
	uint8_t decode_nonce[KVF_PROTO_NONCE_LEN];
	uint8_t prefill_nonce[KVF_PROTO_NONCE_LEN];
	uint8_t decode_gid[KVF_PROTO_GID_LEN];
	uint8_t prefill_gid[KVF_PROTO_GID_LEN];
};

/* AUTH status: 0 a proof, else why the sender refuses the connection
 * (enum kvf_auth_refusal's values from 1, the same numbers). */
#define KVF_AUTH_PROOF 0u

/* A decoded frame. Pointers point into the received buffer. */
struct kvf_frame {
	uint8_t type;
	uint64_t room_id;
	union {
		struct {
			char engine_id[KVF_PROTO_ENGINE_ID_LEN + 1];
			uint32_t nregions;
			uint32_t nbufs;        /* over every region */
			const uint8_t *body;   /* the region list */
			uint32_t at[KVF_PROTO_MAX_REGIONS]; /* region i's offset in body */
		} hello;
		struct { /* ROOM_INFO and ROOM_INFO_CONT */
			uint64_t recv_handle;  /* ROOM_INFO only */
			uint32_t total;        /* ROOM_INFO: info bytes in all (len when
			                          not split); CONT: 0 */
			uint32_t offset;       /* CONT: where its bytes go; ROOM_INFO: 0 */
			uint32_t len;          /* info bytes in this frame */
			const uint8_t *bytes;
		} room_info;
		struct {
			uint8_t to_role;
			uint16_t reason;
		} abort;
		struct {
			uint8_t role;          /* the sender's: KVF_SENDER, KVF_RECEIVER */
			uint8_t status;        /* KVF_AUTH_PROOF or a refusal */
			struct kvf_auth_id id; /* as the sender sees the connection */
			const uint8_t *mac;    /* KVF_PROTO_MAC_LEN bytes */
		} auth;
	};
};

/* What the decoder checks against. */
struct kvf_proto_limits {
	uint32_t max_blocks; /* items over a ROOM_INFO's lists */
	uint32_t max_bufs;   /* HELLO buffer count limit */
	const struct kvf_hello_region *regions; /* the peer's HELLO; a ROOM_INFO's
	                                           lists name them */
	uint32_t nregions;   /* 0 = no HELLO yet: every ROOM_INFO is rejected */
};

/* Whether our region and the peer's of the same name have one shape (what
 * HELLO matching checks, docs/wire.md 5.3): the same number of buffers and
 * the same item size per buffer; nitems may differ. false with why naming
 * the region and the field ("region 'kv': buffer 3 item size 4096 here,
 * 8192 at the peer"). */
bool kvf_proto_same_shape(const char *name, const uint64_t *ours, uint32_t nours,
			  const uint64_t *theirs, uint32_t ntheirs, char *why, size_t wlen);

/* An info's bytes at most for a room of max_blocks items over its lists. */
uint32_t kvf_proto_info_max(uint32_t max_blocks);

/* One list of an info to encode. */
struct kvf_proto_list {
	uint32_t region;
	uint32_t n;
	const uint32_t *items;
};
/* The info's length for these lists and user data. Each list goes as
 * items (4 bytes each) or, where that is smaller, as runs of consecutive
 * items (8 bytes each: a contiguous list of any length is one run). */
size_t kvf_proto_info_len(const struct kvf_proto_list *lists, uint32_t nlists, uint32_t user_len);
/* Encode an info into buf (cap bytes). Returns its length, -EMSGSIZE, -EINVAL. */
int kvf_proto_encode_info(void *buf, size_t cap, const struct kvf_proto_list *lists,
			  uint32_t nlists, const void *user, uint32_t user_len);
/*
 * Decode a whole info of len bytes for room_id into a malloc'd peer info
 * (lists named after lim's regions, peer 0): *out, 0. Or -EBADMSG with
 * detail: a length that does not add up, no list or more than
 * KVF_PROTO_MAX_REGIONS, user data over KVF_PROTO_USER_MAX or padding not 0,
 * a region not in the peer's HELLO or named twice, an empty list, more
 * items than lim->max_blocks, an item outside its region. -ENOMEM.
 */
int kvf_proto_decode_info(const void *buf, size_t len, const struct kvf_proto_limits *lim,
			  uint64_t room_id, uint64_t recv_handle, struct kvf_peer_info **out,
			  char *detail, size_t dlen);

/* Frame sizes. */
size_t kvf_proto_hello_len(uint32_t nregions, uint32_t nbufs);
size_t kvf_proto_room_info_len(uint32_t len);
size_t kvf_proto_room_info_cont_len(uint32_t len);
/* Frames an info of total bytes takes when every frame is at most
 * frame_max bytes (0 when frame_max cannot carry one id's 4 bytes). */
uint32_t kvf_proto_room_info_frames(uint32_t total, size_t frame_max);

/* Encoders write into buf (cap bytes) and return the frame length, or
 * -EMSGSIZE when it does not fit, -EINVAL on a bad argument. */
/* bufs: every region's buffers, region after region (regs[i].nbufs each). */
int kvf_proto_encode_hello(void *buf, size_t cap, const char *engine_id,
			   const struct kvf_hello_region *regs, uint32_t nregions,
			   const struct kvf_hello_buf *bufs);
/* The frame of an info of total bytes that starts at byte offset: a
 * ROOM_INFO when offset is 0, else a ROOM_INFO_CONT; as many bytes as fit
 * cap, up to the end. *n gets how many it carries; the next frame starts
 * at offset + *n. -EMSGSIZE when not 4 bytes fit, -EINVAL when offset >=
 * total. */
int kvf_proto_encode_room_info_part(void *buf, size_t cap, uint64_t room_id,
				    uint64_t recv_handle, const uint8_t *info,
				    uint32_t total, uint32_t offset, uint32_t *n);
int kvf_proto_encode_abort(void *buf, size_t cap, uint64_t room_id,
			   uint8_t to_role, uint16_t reason);
int kvf_proto_encode_abort_ack(void *buf, size_t cap, uint64_t room_id);
int kvf_proto_encode_heartbeat(void *buf, size_t cap);
/* An AUTH frame with its mac zero (auth.c fills a proof's in). role:
 * KVF_SENDER or KVF_RECEIVER; status: KVF_AUTH_PROOF or a refusal. */
int kvf_proto_encode_auth(void *buf, size_t cap, uint8_t role, uint8_t status,
			  const struct kvf_auth_id *id);

/*
 * Decode and validate one received frame of len bytes. Returns 0 and *f, or
 *   -EBADMSG  short, bad magic, length mismatch, a count over a limit,
 *             truncated body, a bad region list, a reserved field not 0
 *   -EPROTO   another protocol version, an unknown type
 * and writes a one-line reason into detail. *names_room (may be NULL) is set
 * when the header was sound and the type names a room: f->room_id is then
 * the room the bad frame was for.
 */
int kvf_proto_decode(const void *buf, size_t len, const struct kvf_proto_limits *lim,
		     struct kvf_frame *f, bool *names_room, char *detail, size_t dlen);

/* ----------------------------------------- ROOM_INFO reassembly (receiver) */

/* A sequence not whole this long after its ROOM_INFO is dropped (its room
 * fails): a sender posts a sequence back to back, so only a broken or
 * hostile peer leaves one hanging. Generous: 16M ids (the configured
 * maximum, 1024 frames of 64 KiB) take ~4 s on a loaded soft-RoCE guest. */
#define KVF_PROTO_REASM_MAX_NS (30ull * 1000000000ull)

/* One connection's ROOM_INFO sequence in progress. Zero = none. Memory
 * follows the bytes received, not the total a ROOM_INFO declares: a frame
 * announcing a huge info holds its own bytes, and the buffer grows (at most
 * doubling) as ROOM_INFO_CONT frames bring more; the total itself is
 * bounded by kvf_proto_info_max. */
struct kvf_room_reasm {
	uint8_t *buf;             /* the info being filled, or NULL */
	uint64_t room_id;
	uint64_t recv_handle;
	uint32_t total;           /* its bytes in all */
	uint32_t have;            /* bytes received so far */
	uint32_t cap;             /* bytes buf has room for (have <= cap <= total) */
	uint64_t started_ns;      /* when its ROOM_INFO came (the caller's clock) */
	uint64_t expired;         /* sequences dropped for age on this connection */
};

/* A sequence in progress that the fed frame abandoned (another room's). */
struct kvf_reasm_drop {
	bool set;
	uint64_t room_id;
	char why[200];
};

/*
 * Feed a decoded ROOM_INFO or ROOM_INFO_CONT (kvf_proto_decode checked its
 * own lengths and limits; this checks the sequence, and the info once
 * whole against lim) received at now_ns (any monotonic clock, the same for
 * every call on ra). Returns
 *   1        the info is whole and sound: *done gets it (malloc'd, the
 *            caller owns it; peer 0)
 *   0        more frames to come
 *   -EBADMSG the frame breaks the sequence, or the whole info is malformed:
 *            f->room_id fails (detail says why) and whatever was buffered
 *            for it is freed
 *   -ENOMEM  f->room_id fails: no memory for its info
 * In every case drop->set says that a sequence of ANOTHER room was in
 * progress and is now abandoned and freed (cut short, or older than
 * KVF_PROTO_REASM_MAX_NS): that room fails too (drop->why).
 * A ROOM_INFO while one is in progress abandons it (or, for the same room,
 * fails that room); a CONT must name the room in progress and continue at
 * exactly the bytes received so far, not past its total.
 */
int kvf_proto_reasm_feed(struct kvf_room_reasm *ra, const struct kvf_frame *f,
			 const struct kvf_proto_limits *lim, uint64_t now_ns,
			 struct kvf_peer_info **done, struct kvf_reasm_drop *drop,
			 char *detail, size_t dlen);
/* Drop the sequence in progress if it is older than KVF_PROTO_REASM_MAX_NS
 * at now_ns: true and *drop (its room fails), counted in ra->expired.
 * Called on every frame of the connection, so a sequence left hanging is
 * freed within a heartbeat interval of its bound. */
bool kvf_proto_reasm_expire(struct kvf_room_reasm *ra, uint64_t now_ns,
			    struct kvf_reasm_drop *drop);
/* Free a sequence in progress (connection lost, close). */
void kvf_proto_reasm_clear(struct kvf_room_reasm *ra);

/* The room id in an encoded frame's header (0 for HELLO and HEARTBEAT). */
uint64_t kvf_proto_frame_room(const void *frame);
/* The type byte of an encoded frame's header (enum kvf_frame_type); a
 * frame is at least KVF_PROTO_HDR_LEN bytes once encoded. */
#define KVF_PROTO_TYPE_OFF 6u
static inline uint8_t kvf_proto_frame_type(const void *frame)
{
	return ((const uint8_t *)frame)[KVF_PROTO_TYPE_OFF];
}

/* Read region i of a validated HELLO, and its buffer b. */
void kvf_proto_hello_region(const struct kvf_frame *f, uint32_t i, struct kvf_hello_region *out);
void kvf_proto_hello_buf(const struct kvf_frame *f, uint32_t i, uint32_t b,
			 struct kvf_hello_buf *out);

const char *kvf_frame_type_str(unsigned type);

/* ------------------------------------------------ rdma_cm private data */

/* Connect and accept carry this (56 bytes fit a connect request's private
 * data). Nothing of the token travels in it: each side's nonce does, and
 * the AUTH frames that follow prove the token over both (auth.h). */
#define KVF_PROTO_CM_LEN 56u
struct kvf_cm_hello {
	uint16_t version;
	uint8_t mtu;          /* enum ibv_mtu: in a connect request the path MTU
	                         the active side asks for (rdma.mtu), in the
	                         accept the one the passive side set; 0 = none */
	uint32_t frame_max;   /* receive buffer size: the largest frame we take */
	uint8_t nonce[KVF_PROTO_NONCE_LEN]; /* the sender's, fresh per connection */
	char engine_id[29];   /* truncated to 28, for logs */
};

/* Reject private data: a reason code and text, as much as the IB CM's REJ
 * carries (148 bytes of private data; rdma_cm adds no header to a reject,
 * and a longer one makes rdma_reject fail, leaving the peer to time out).
 * RoCE uses the IB CM. The text is NUL-padded, up to 140 bytes. Peers
 * before this sent 48 bytes (text up to 39): still decoded. */
#define KVF_PROTO_REJ_LEN 148u
#define KVF_PROTO_REJ_TEXT (KVF_PROTO_REJ_LEN - 8u)
enum kvf_rej_code {
	KVF_REJ_NONE = 0,
	KVF_REJ_VERSION,   /* protocol version differs */
	KVF_REJ_TOKEN,     /* auth token differs (version 4 and before: the
	                      token is now proved after the accept, auth.h) */
	KVF_REJ_MALFORMED, /* private data missing or bad */
	KVF_REJ_RESOURCES, /* could not set up the queue pair */
	KVF_REJ_NUM
};

void kvf_proto_encode_cm(uint8_t out[KVF_PROTO_CM_LEN], const struct kvf_cm_hello *h);
/* -EBADMSG (short, bad magic, or our version with the reserved byte not 0:
 * detail says which) or 0. The version is returned as is; the caller
 * compares it. */
int kvf_proto_decode_cm(const void *buf, size_t len, struct kvf_cm_hello *h,
			char *detail, size_t dlen);
void kvf_proto_encode_rej(uint8_t out[KVF_PROTO_REJ_LEN], enum kvf_rej_code code,
			  const char *text);
/* "<code>: <text>" of a reject (the code's name from kvf_rej_code_str), or
 * "no reason given" when the data is not ours. Decodes any length from 8
 * bytes up (older 48-byte rejects too); tlen of KVF_PROTO_REJ_TEXT + 32
 * holds every reason whole. */
void kvf_proto_decode_rej(const void *buf, size_t len, char *text, size_t tlen);
const char *kvf_rej_code_str(unsigned code);

#endif
