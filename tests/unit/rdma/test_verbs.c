/* SPDX-License-Identifier: Apache-2.0 */
/* src/rdma/verbs.c: an asynchronous event takes down only what it names; a
 * provider that would post without its lock is refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "base/log.h"
#include "rdma/verbs.h"

static enum kvf_async_class classify_port(enum ibv_event_type type, int port_num, uint8_t ours)
{
	struct ibv_async_event ae = {.event_type = type, .element.port_num = port_num};

	return kvf_async_classify(&ae, ours);
}

static enum kvf_async_class classify(enum ibv_event_type type)
{
	struct ibv_async_event ae = {.event_type = type};

	return kvf_async_classify(&ae, 1);
}

Test(verbs, port_error_on_another_port_is_not_ours)
{
	cr_assert_eq(classify_port(IBV_EVENT_PORT_ERR, 2, 1), KVF_ASYNC_OTHER_PORT);
	cr_assert_eq(classify_port(IBV_EVENT_PORT_ACTIVE, 2, 1), KVF_ASYNC_OTHER_PORT);
	cr_assert_eq(classify_port(IBV_EVENT_GID_CHANGE, 1, 2), KVF_ASYNC_OTHER_PORT);
}

Test(verbs, port_error_on_our_port_takes_every_connection)
{
	cr_assert_eq(classify_port(IBV_EVENT_PORT_ERR, 1, 1), KVF_ASYNC_PORT_FATAL);
	cr_assert_eq(classify_port(IBV_EVENT_PORT_ACTIVE, 1, 1), KVF_ASYNC_INFO);
}

Test(verbs, cq_error_is_one_connections)
{
	cr_assert_eq(classify(IBV_EVENT_CQ_ERR), KVF_ASYNC_CQ_FATAL);
}

Test(verbs, qp_errors_are_one_connections)
{
	cr_assert_eq(classify(IBV_EVENT_QP_FATAL), KVF_ASYNC_QP_FATAL);
	cr_assert_eq(classify(IBV_EVENT_QP_REQ_ERR), KVF_ASYNC_QP_FATAL);
	cr_assert_eq(classify(IBV_EVENT_QP_ACCESS_ERR), KVF_ASYNC_QP_FATAL);
	cr_assert_eq(classify(IBV_EVENT_PATH_MIG_ERR), KVF_ASYNC_QP_FATAL);
}

Test(verbs, only_device_fatal_takes_the_device)
{
	cr_assert_eq(classify(IBV_EVENT_DEVICE_FATAL), KVF_ASYNC_DEV_FATAL);
	cr_assert_eq(classify(IBV_EVENT_WQ_FATAL), KVF_ASYNC_INFO);
	cr_assert_eq(classify(IBV_EVENT_QP_LAST_WQE_REACHED), KVF_ASYNC_INFO);
	cr_assert_eq(classify(IBV_EVENT_COMM_EST), KVF_ASYNC_INFO);
}

/* The rail's shared receive queue (src/rdma/frames.h): an error takes its
 * rail's connections, the limit event grows it. */
Test(verbs, srq_events_are_the_shared_queues)
{
	cr_assert_eq(classify(IBV_EVENT_SRQ_ERR), KVF_ASYNC_SRQ_FATAL);
	cr_assert_eq(classify(IBV_EVENT_SRQ_LIMIT_REACHED), KVF_ASYNC_SRQ_LIMIT);
}

/* The poller posts keepalives on the scheduler's QPs (src/rdma/keepalive.h):
 * a provider told that one thread uses it has no lock to order them. */
Test(verbs, a_provider_without_its_send_queue_lock_is_refused)
{
	kvf_log_set_level(KVF_LOG_ERROR); /* the refusal is logged at error */
	unsetenv("MLX5_SINGLE_THREADED");
	unsetenv("MLX4_SINGLE_THREADED");
	cr_assert_eq(kvf_verbs_check_threads(), 0);
	setenv("MLX5_SINGLE_THREADED", "0", 1); /* the providers' test: exactly "1" */
	cr_assert_eq(kvf_verbs_check_threads(), 0);
	setenv("MLX5_SINGLE_THREADED", "1", 1);
	cr_assert_eq(kvf_verbs_check_threads(), -ENOTSUP);
	unsetenv("MLX5_SINGLE_THREADED");
	setenv("MLX4_SINGLE_THREADED", "1", 1);
	cr_assert_eq(kvf_verbs_check_threads(), -ENOTSUP);
	unsetenv("MLX4_SINGLE_THREADED");
}
