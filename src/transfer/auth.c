/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <kvferry/kvferry.h>

#include "base/log.h"

int kvf_auth_nonce(uint8_t out[KVF_PROTO_NONCE_LEN])
{
	return RAND_bytes(out, (int)KVF_PROTO_NONCE_LEN) == 1 ? 0 : -EIO;
}

int kvf_auth_warm(void)
{
	uint8_t nonce[KVF_PROTO_NONCE_LEN], mac[KVF_PROTO_MAC_LEN];

	if (kvf_auth_nonce(nonce) || kvf_auth_mac("", nonce, sizeof(nonce), mac)) {
		kvf_err("rdma", "libcrypto: no random bytes or no HMAC-SHA256");
		return -EIO;
	}
	return 0;
}

int kvf_auth_mac(const char *token, const void *msg, size_t len,
		 uint8_t out[KVF_PROTO_MAC_LEN])
{
	/* A key pointer even for the empty token: HMAC() takes a NULL key as
	 * "no key given", which is not the empty key. */
	const char *key = token ? token : "";
	unsigned int n = 0;

	if (!HMAC(EVP_sha256(), key, (int)strlen(key), msg, len, out, &n) ||
	    n != KVF_PROTO_MAC_LEN)
		return -EIO;
	return 0;
}

int kvf_auth_prove(void *buf, size_t cap, uint8_t role, const struct kvf_auth_id *id,
		   const char *token)
{
	uint8_t *p = buf;
	int len = kvf_proto_encode_auth(buf, cap, role, KVF_AUTH_PROOF, id);
	int rc;

	if (len < 0)
		return len;
	rc = kvf_auth_mac(token, p, KVF_PROTO_AUTH_MAC_OFF, p + KVF_PROTO_AUTH_MAC_OFF);
	return rc ? rc : len;
}

int kvf_auth_refuse(void *buf, size_t cap, uint8_t role, unsigned code,
		    const struct kvf_auth_id *id)
{
	if (code == KVF_AUTH_PROOF || code >= KVF_AUTH_NUM)
		return -EINVAL;
	return kvf_proto_encode_auth(buf, cap, role, (uint8_t)code, id);
}

static void gid_str(const uint8_t *gid, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (!inet_ntop(AF_INET6, gid, ip, sizeof(ip)))
		snprintf(ip, sizeof(ip), "?");
	snprintf(out, len, "%s", ip);
}

void kvf_auth_side_str(const struct kvf_auth_id *id, uint8_t role, char *out, size_t len)
{
	char g[INET6_ADDRSTRLEN];

	gid_str(role == KVF_SENDER ? id->prefill_gid : id->decode_gid, g, sizeof(g));
	snprintf(out, len, "qpn 0x%x gid %s", role == KVF_SENDER ? id->prefill_qpn : id->decode_qpn,
		 g);
}

static int refuse(int code, char *why, size_t wlen, const char *text)
{
	if (why && wlen)
		snprintf(why, wlen, "%s", text);
	return code;
}

/* The identity both ends must agree on, and what differs, for the log:
 * a relay shows as a far end that is not the peer's near end. */
static int check_identity(const struct kvf_auth_id *theirs, const struct kvf_auth_id *mine,
			  char *why, size_t wlen)
{
	char a[96], b[96], c[96], d[96];

	if (theirs->decode_qpn == mine->decode_qpn && theirs->prefill_qpn == mine->prefill_qpn &&
	    !memcmp(theirs->decode_gid, mine->decode_gid, KVF_PROTO_GID_LEN) &&
	    !memcmp(theirs->prefill_gid, mine->prefill_gid, KVF_PROTO_GID_LEN))
		return 0;
	kvf_auth_side_str(theirs, KVF_RECEIVER, a, sizeof(a));
	kvf_auth_side_str(theirs, KVF_SENDER, b, sizeof(b));
	kvf_auth_side_str(mine, KVF_RECEIVER, c, sizeof(c));
	kvf_auth_side_str(mine, KVF_SENDER, d, sizeof(d));
	if (why && wlen)
		snprintf(why, wlen, "the peer proved for decode %s / prefill %s, we see decode %s / "
			 "prefill %s (a relay, or a proof of another connection)", a, b, c, d);
	return KVF_AUTH_IDENTITY;
}

int kvf_auth_check(const struct kvf_frame *f, uint8_t peer_role, const struct kvf_auth_id *mine,
		   const char *token, char *why, size_t wlen)
{
	const struct kvf_auth_id *theirs = &f->auth.id;
	uint8_t want[KVF_PROTO_AUTH_LEN];
	int rc;

	if (f->auth.status != KVF_AUTH_PROOF) {
		if (why && wlen)
			snprintf(why, wlen, "the peer refused the connection: %s",
				 kvf_auth_refusal_str((enum kvf_auth_refusal)f->auth.status));
		return -ECONNREFUSED;
	}
	if (f->auth.role != peer_role)
		return refuse(KVF_AUTH_MALFORMED, why, wlen, peer_role == KVF_SENDER ?
			      "a decode's proof from the prefill (ours reflected?)" :
			      "a prefill's proof from the decode (ours reflected?)");
	/* Public values: a plain compare tells nothing away. */
	if (memcmp(theirs->decode_nonce, mine->decode_nonce, KVF_PROTO_NONCE_LEN) ||
	    memcmp(theirs->prefill_nonce, mine->prefill_nonce, KVF_PROTO_NONCE_LEN))
		return refuse(KVF_AUTH_REPLAY, why, wlen, "its proof is for other nonces than this "
			      "connection's (replayed from another connection)");
	rc = check_identity(theirs, mine, why, wlen);
	if (rc)
		return rc;
	/* Our own view, MAC'd: what the peer claimed only chose the reason. */
	rc = kvf_auth_prove(want, sizeof(want), peer_role, mine, token);
	if (rc < 0)
		return rc;
	if (CRYPTO_memcmp(want + KVF_PROTO_AUTH_MAC_OFF, f->auth.mac, KVF_PROTO_MAC_LEN))
		return refuse(KVF_AUTH_BAD_TOKEN, why, wlen,
			      "its MAC does not verify under our rdma.auth_token");
	return 0;
}
