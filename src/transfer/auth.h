/* SPDX-License-Identifier: Apache-2.0 */
/* The token's proof, without a device: each side's nonce, the AUTH frame
 * that proves rdma.auth_token over both nonces and the connection's
 * identity (QP numbers and GIDs of both ends), and its check with the
 * reason a proof does not hold. HMAC-SHA256, nonces and the constant-time
 * compare are OpenSSL's libcrypto. docs/wire.md 4.4 has the exchange byte
 * by byte, and test vectors.
 *
 * Why a MAC over both nonces and the identity, and who proves first:
 *  - the nonce of the verifying side is fresh per connection, so a proof
 *    seen once (a sniffer, a fake prefill the decode was pointed at) is
 *    worth nothing on another connection: a replay names old nonces;
 *  - the identity (the QPs both ends see, the GIDs of the route) makes a
 *    relay fail: a man in the middle holds two connections, and each end
 *    binds its proof to the one it sees, whose far end is the relay;
 *  - the role byte keeps one side's proof from being reflected as the
 *    other's;
 *  - the connecting side (decode) proves first, and the listener (prefill)
 *    proves only to a peer that has: anyone can connect to a listener, so
 *    a listener that answered first would hand a MAC under the token, to
 *    guess the token offline from, to whoever asks. The decode chooses whom
 *    it connects to; what its proof gives a wrong peer is bound to that
 *    peer's nonce and identity and opens nothing elsewhere. */
#ifndef KVF_AUTH_H
#define KVF_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "transfer/proto.h"

/* A fresh nonce (RAND_bytes). 0, or -EIO when libcrypto has none to give. */
int kvf_auth_nonce(uint8_t out[KVF_PROTO_NONCE_LEN]);

/* libcrypto's one-time setup (its random generator, the SHA-256 and HMAC
 * methods: a few hundred KB kept until the process exits), done when a
 * transport opens rather than at the first connection, so that it is the
 * process's setup and not a connection's cost (and a broken libcrypto is
 * found at open). 0, or -EIO. */
int kvf_auth_warm(void);

/* HMAC-SHA256 under token (its bytes without the NUL; "" is the empty
 * key) of len bytes at msg. 0, or -EIO. */
int kvf_auth_mac(const char *token, const void *msg, size_t len,
		 uint8_t out[KVF_PROTO_MAC_LEN]);

/* The AUTH frame proving token for role (KVF_SENDER: the prefill's,
 * KVF_RECEIVER: the decode's) on the connection id. Returns its length
 * (KVF_PROTO_AUTH_LEN), -EMSGSIZE, -EINVAL or -EIO. */
int kvf_auth_prove(void *buf, size_t cap, uint8_t role, const struct kvf_auth_id *id,
		   const char *token);

/* The AUTH frame refusing the connection: code (enum kvf_auth_refusal, from
 * 1), our view of it, no MAC (nothing under the token goes to a peer that
 * has not proved itself). Length or -errno as above. */
int kvf_auth_refuse(void *buf, size_t cap, uint8_t role, unsigned code,
		    const struct kvf_auth_id *id);

/*
 * Check a decoded AUTH frame f, a proof expected from peer_role, against
 * our own view mine of the connection under token. Returns 0 (it proves the
 * token), a refusal of ours (enum kvf_auth_refusal, from 1), or
 * -ECONNREFUSED (the peer refuses us), with why saying what differs,
 * checked in this order:
 *   -ECONNREFUSED          f is the peer's refusal, not a proof
 *   KVF_AUTH_MALFORMED     the wrong role (a proof reflected back at us)
 *   KVF_AUTH_REPLAY        its nonces are not this connection's
 *   KVF_AUTH_IDENTITY      its QP numbers or GIDs are not the ones we see
 *   KVF_AUTH_BAD_TOKEN     the MAC does not verify (compared in constant
 *                          time: CRYPTO_memcmp)
 * The MAC is computed over our own view, so what the peer claims decides
 * only the reason named, never whether it passes. -EIO: libcrypto failed.
 */
int kvf_auth_check(const struct kvf_frame *f, uint8_t peer_role, const struct kvf_auth_id *mine,
		   const char *token, char *why, size_t wlen);

/* "qpn 0x11 gid ::ffff:10.77.0.2" for the side of id (role), for logs. */
void kvf_auth_side_str(const struct kvf_auth_id *id, uint8_t role, char *out, size_t len);

#endif
