/* SPDX-License-Identifier: Apache-2.0 */
/* The token's proof (src/transfer/auth.c), without a device: a proof holds for
 * its connection and token only, every way it can fail names its reason,
 * and no byte of a proof can change without it failing. The MACs
 * themselves are checked against docs/wire.md's vectors by test_wire_doc. */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include <kvferry/kvferry.h>

#include "transfer/auth.h"
#include "transfer/proto.h"

static const struct kvf_proto_limits lim = {0};

/* A connection between 10.77.0.2 (decode, qpn 0x11) and 10.77.0.1
 * (prefill, qpn 0x12), with fresh nonces. */
static struct kvf_auth_id conn_id(void)
{
	struct kvf_auth_id id = {.decode_qpn = 0x11, .prefill_qpn = 0x12};
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memcpy(id.decode_gid, v4, 12);
	memcpy(id.prefill_gid, v4, 12);
	memcpy(id.decode_gid + 12, "\x0a\x4d\x00\x02", 4);
	memcpy(id.prefill_gid + 12, "\x0a\x4d\x00\x01", 4);
	cr_assert_eq(kvf_auth_nonce(id.decode_nonce), 0);
	cr_assert_eq(kvf_auth_nonce(id.prefill_nonce), 0);
	return id;
}

/* Prove for role on prover's view, check on checker's: 0 or the refusal. */
static int exchange(uint8_t role, const struct kvf_auth_id *prover, const char *ptoken,
		    const struct kvf_auth_id *checker, const char *ctoken, char *why, size_t wlen)
{
	uint8_t b[KVF_PROTO_AUTH_LEN];
	struct kvf_frame f;

	cr_assert_eq(kvf_auth_prove(b, sizeof(b), role, prover, ptoken), (int)KVF_PROTO_AUTH_LEN);
	cr_assert_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, wlen), 0, "%s", why);
	return kvf_auth_check(&f, role, checker, ctoken, why, wlen);
}

Test(auth, nonces_are_fresh)
{
	uint8_t a[KVF_PROTO_NONCE_LEN], b[KVF_PROTO_NONCE_LEN], zero[KVF_PROTO_NONCE_LEN] = {0};

	cr_assert_eq(kvf_auth_nonce(a), 0);
	cr_assert_eq(kvf_auth_nonce(b), 0);
	cr_expect_neq(memcmp(a, b, sizeof(a)), 0, "two nonces alike");
	cr_expect_neq(memcmp(a, zero, sizeof(a)), 0);
}

Test(auth, a_proof_holds_for_both_roles_and_the_empty_token)
{
	struct kvf_auth_id id = conn_id();
	char why[400] = "";

	cr_expect_eq(exchange(KVF_RECEIVER, &id, "s3cret", &id, "s3cret", why, sizeof(why)), 0,
		     "%s", why);
	cr_expect_eq(exchange(KVF_SENDER, &id, "s3cret", &id, "s3cret", why, sizeof(why)), 0,
		     "%s", why);
	cr_expect_eq(exchange(KVF_RECEIVER, &id, "", &id, "", why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(exchange(KVF_RECEIVER, &id, NULL, &id, "", why, sizeof(why)), 0,
		     "NULL is the empty token: %s", why);
}

Test(auth, another_token_is_a_bad_token)
{
	struct kvf_auth_id id = conn_id();
	char why[400];

	cr_expect_eq(exchange(KVF_RECEIVER, &id, "wrong", &id, "right", why, sizeof(why)),
		     KVF_AUTH_BAD_TOKEN);
	cr_expect(strstr(why, "does not verify") != NULL, "%s", why);
	cr_expect_eq(exchange(KVF_RECEIVER, &id, "", &id, "right", why, sizeof(why)),
		     KVF_AUTH_BAD_TOKEN, "the empty token is a token like any other");
	cr_expect_eq(exchange(KVF_RECEIVER, &id, "right", &id, "righ", why, sizeof(why)),
		     KVF_AUTH_BAD_TOKEN, "a prefix of it");
}

/* A sniffer's copy of one connection's proof, sent on the next connection
 * (the prefill's nonce is new there). */
Test(auth, a_replayed_proof_names_old_nonces)
{
	struct kvf_auth_id first = conn_id(), next = first;
	char why[400];

	cr_assert_eq(kvf_auth_nonce(next.prefill_nonce), 0);
	cr_expect_eq(exchange(KVF_RECEIVER, &first, "t", &next, "t", why, sizeof(why)),
		     KVF_AUTH_REPLAY);
	cr_expect(strstr(why, "other nonces") != NULL, "%s", why);
	/* the same connect request replayed: the decode's nonce is the same */
	next = first;
	cr_assert_eq(kvf_auth_nonce(next.decode_nonce), 0);
	cr_expect_eq(exchange(KVF_RECEIVER, &first, "t", &next, "t", why, sizeof(why)),
		     KVF_AUTH_REPLAY);
}

/* A relay in the middle: the prover saw the relay's QP and GID as its far
 * end, the checker sees the relay's other ones. */
Test(auth, a_relayed_proof_names_another_connection)
{
	struct kvf_auth_id seen = conn_id(), here = seen;
	char why[600];

	here.decode_qpn = 0x99;
	cr_expect_eq(exchange(KVF_RECEIVER, &seen, "t", &here, "t", why, sizeof(why)),
		     KVF_AUTH_IDENTITY);
	cr_expect(strstr(why, "qpn 0x11") && strstr(why, "qpn 0x99"), "both views named: %s", why);
	here = seen;
	here.prefill_gid[15] = 9;
	cr_expect_eq(exchange(KVF_RECEIVER, &seen, "t", &here, "t", why, sizeof(why)),
		     KVF_AUTH_IDENTITY);
	cr_expect(strstr(why, "::ffff:10.77.0.9") != NULL, "the GID is named: %s", why);
}

/* The decode's proof sent back to it as the prefill's. */
Test(auth, a_reflected_proof_is_malformed)
{
	struct kvf_auth_id id = conn_id();
	uint8_t b[KVF_PROTO_AUTH_LEN];
	struct kvf_frame f;
	char why[400];

	cr_assert_eq(kvf_auth_prove(b, sizeof(b), KVF_RECEIVER, &id, "t"), (int)KVF_PROTO_AUTH_LEN);
	cr_assert_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)), 0);
	cr_expect_eq(kvf_auth_check(&f, KVF_SENDER, &id, "t", why, sizeof(why)), KVF_AUTH_MALFORMED);
	cr_expect(strstr(why, "reflected") != NULL, "%s", why);
}

/* A refusal carries a code and the refuser's view, never a MAC; read as a
 * proof it is the peer's refusal. */
Test(auth, a_refusal_has_no_mac)
{
	struct kvf_auth_id id = conn_id();
	uint8_t b[KVF_PROTO_AUTH_LEN], zero[KVF_PROTO_MAC_LEN] = {0};
	struct kvf_frame f;
	char why[400];

	cr_expect_eq(kvf_auth_refuse(b, sizeof(b), KVF_SENDER, KVF_AUTH_PROOF, &id), -EINVAL);
	cr_expect_eq(kvf_auth_refuse(b, sizeof(b), KVF_SENDER, KVF_AUTH_NUM, &id), -EINVAL);
	cr_assert_eq(kvf_auth_refuse(b, sizeof(b), KVF_SENDER, KVF_AUTH_BAD_TOKEN, &id),
		     (int)KVF_PROTO_AUTH_LEN);
	cr_expect_eq(memcmp(b + KVF_PROTO_AUTH_MAC_OFF, zero, sizeof(zero)), 0);
	cr_assert_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(f.auth.status, KVF_AUTH_BAD_TOKEN);
	cr_expect_eq(kvf_auth_check(&f, KVF_SENDER, &id, "t", why, sizeof(why)), -ECONNREFUSED,
		     "the peer's refusal is no proof, and not a refusal of ours");
	cr_expect(strstr(why, "bad token") != NULL, "%s", why);
	/* a refusal with a MAC in it is not a refusal kvferry takes */
	b[KVF_PROTO_AUTH_MAC_OFF + 5] = 1;
	cr_expect_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)), -EBADMSG);
}

/* Every byte of a proof counts: flipped anywhere, the frame is refused by
 * the decoder or the check, never taken. */
Test(auth, no_byte_of_a_proof_can_change)
{
	struct kvf_auth_id id = conn_id();
	uint8_t good[KVF_PROTO_AUTH_LEN], b[KVF_PROTO_AUTH_LEN];
	struct kvf_frame f;
	char why[400];

	cr_assert_eq(kvf_auth_prove(good, sizeof(good), KVF_RECEIVER, &id, "t"),
		     (int)KVF_PROTO_AUTH_LEN);
	for (unsigned i = 0; i < KVF_PROTO_AUTH_LEN; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			memcpy(b, good, sizeof(b));
			b[i] ^= (uint8_t)(1u << bit);
			if (kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)))
				continue;
			cr_expect_neq(kvf_auth_check(&f, KVF_RECEIVER, &id, "t", why, sizeof(why)), 0,
				      "byte %u bit %u flipped and the proof still holds", i, bit);
		}
	}
}

Test(auth, the_decoder_checks_the_frame)
{
	struct kvf_auth_id id = conn_id();
	uint8_t b[KVF_PROTO_AUTH_LEN + 4];
	struct kvf_frame f;
	char why[200];

	cr_assert_eq(kvf_auth_prove(b, sizeof(b), KVF_RECEIVER, &id, "t"), (int)KVF_PROTO_AUTH_LEN);
	cr_expect_eq(kvf_proto_decode(b, KVF_PROTO_AUTH_LEN - 1, &lim, &f, NULL, why, sizeof(why)),
		     -EBADMSG, "length mismatch");
	b[8] = KVF_PROTO_AUTH_LEN + 4; /* header length: a longer frame */
	cr_expect_eq(kvf_proto_decode(b, sizeof(b), &lim, &f, NULL, why, sizeof(why)), -EBADMSG);
	cr_expect(strstr(why, "AUTH of 136 bytes") != NULL, "%s", why);
	kvf_auth_prove(b, sizeof(b), KVF_RECEIVER, &id, "t");
	b[24] = 2; /* role */
	cr_expect_eq(kvf_proto_decode(b, KVF_PROTO_AUTH_LEN, &lim, &f, NULL, why, sizeof(why)),
		     -EBADMSG);
	kvf_auth_prove(b, sizeof(b), KVF_RECEIVER, &id, "t");
	b[16] = 1; /* room id */
	cr_expect_eq(kvf_proto_decode(b, KVF_PROTO_AUTH_LEN, &lim, &f, NULL, why, sizeof(why)),
		     -EBADMSG);
	cr_expect_eq(kvf_auth_prove(b, KVF_PROTO_AUTH_LEN - 1, KVF_RECEIVER, &id, "t"), -EMSGSIZE);
	cr_expect_eq(kvf_auth_prove(b, sizeof(b), 2, &id, "t"), -EINVAL);
}

Test(auth, refusal_names)
{
	cr_expect_str_eq(kvf_auth_refusal_str(KVF_AUTH_PEER_REFUSED), "refused by the peer");
	cr_expect_str_eq(kvf_auth_refusal_str(KVF_AUTH_TIMEOUT), "no proof in time");
	cr_expect_str_eq(kvf_auth_refusal_str(KVF_AUTH_NUM), "?");
}
