/* SPDX-License-Identifier: Apache-2.0 */
/* metrics_serve: an engine on the fake transport with one room in each
 * interesting state, serving /metrics and /rooms on 127.0.0.1 (a free
 * port, printed as "port N") until its standard input closes. For the
 * kvferry-stat test (test_kvferry_stat.py); the rooms are those of
 * test_metrics.c's scene. */
#include <stdio.h>
#include <unistd.h>

#include "fake_transport.h"
#include "obs/metrics.h"

static const uint32_t blocks[4] = { 0, 1, 2, 3 };

static kvf_room sender_sent(kvf_engine *eng, uint64_t id)
{
	kvf_room h;

	kvf_sender_create(eng, id, &h);
	push_info(eng, id, 7, 0x100000005ull, 4);
	kvf_progress(eng);
	fake_clock += SEC;
	kvf_sender_send(eng, h, blocks, 4);
	return h;
}

int main(void)
{
	struct kvf_config cfg;
	struct fake f;
	kvf_engine *eng;
	kvf_room h;
	char c;

	fake_cfg(&cfg);
	cfg.bootstrap_s = 10;
	eng = fake_engine(&cfg, &f);
	if (!eng || kvf_metrics_init(eng))
		return 1;
	kvf_sender_create(eng, 0xd1, &h);
	fake_clock += 11 * SEC;
	kvf_progress(eng); /* 0xd1 fails by its bootstrap deadline */
	kvf_sender_create(eng, 0xb1, &h);
	sender_sent(eng, 0x21);
	h = sender_sent(eng, 0x22);
	push_wc(eng, h, 0);
	kvf_receiver_create(eng, 0x31, "10.0.0.1:18515", &h);
	kvf_receiver_init(eng, h, blocks, 4);
	fake_clock += SEC;
	kvf_progress(eng);
	if (kvf_metrics_publish(eng) || kvf_http_start(eng->metrics, "127.0.0.1", 0))
		return 1;
	printf("port %u\n", kvf_http_port(eng->metrics));
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	kvf_engine_close(eng);
	return 0;
}
