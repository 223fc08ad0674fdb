/* SPDX-License-Identifier: Apache-2.0 */
/* Internal name tables (names.c): what the room engine prints without
 * including the verbs headers. */
#ifndef KVF_NAMES_H
#define KVF_NAMES_H

/* The text ibv_wc_status_str() gives for a work-completion status, and a
 * hint for the room's failure detail ("" when there is nothing to add).
 * Never NULL; "unknown" for a status past the table, as libibverbs says. */
const char *kvf_wc_status_str(int status);
const char *kvf_wc_status_hint(int status);

/* One-word tokens for metric labels and JSON ("peer_lost"); "unknown"
 * past the table. */
const char *kvf_fail_reason_token(unsigned r);
const char *kvf_ignore_reason_token(unsigned r);
const char *kvf_auth_refusal_token(unsigned r);

#endif
