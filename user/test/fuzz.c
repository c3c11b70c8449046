// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: arbitrary bytes as the page.  Each input is copied
 * into a buffer of exactly its size (so that AddressSanitizer sees any
 * read past it), given to pvread_use_page(), and every clock and every
 * introspection call reads it.  The library is built into this program
 * (#include of every file of it but kernel.c), so that each input starts a
 * fresh process state.  What must hold: no crash, no undefined behaviour,
 * no call that does not return (MAX_WAIT_TSC, the wait for an update in
 * progress, is cut to 2^20 ticks here so that the fuzzer runs; libFuzzer's
 * -timeout catches a loop).
 *
 *   make -C user fuzz [FUZZ_SECONDS=60]
 */
#define MAX_WAIT_TSC (1ULL << 20)
#include "../src/mapping.c"
#include "../src/read.c"
#include "../src/order.c"
#include "../src/info.c"

/* A fresh process state, as a new process makes. */
static void forget_everything(void)
{
	struct process *p = atomic_load(&pvread_process);

	if (p)
		memset(p, 0, sizeof(*p));
	memset(&pvread_thread_stats, 0, sizeof(pvread_thread_stats));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Any bound the page publishes: take the fast paths. */
	setenv("PVREAD_MAX_ERROR_NS", "18446744073709551615", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const clockid_t clocks[] = { CLOCK_REALTIME, CLOCK_MONOTONIC,
		CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE,
		CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME, CLOCK_TAI,
		CLOCK_PROCESS_CPUTIME_ID, 16, 31, 12345 };
	struct pvread_info info;
	struct pvread_record rec;
	struct pvread_sample smp;
	struct pvread_stats st;
	struct timespec ts;
	struct timeval tv;
	unsigned int i, r;
	void *page;

	forget_everything();
	page = malloc(size ? size : 1);
	if (!page)
		return 0;
	memcpy(page, data, size);
	if (pvread_use_page(page, size) == 0) {
		for (r = 0; r < 2; r++)
			for (i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++)
				pvread_clock_gettime(clocks[i], &ts);
		pvread_gettimeofday(&tv, NULL);
		pvread_time(NULL);
		pvread_get_info(&info);
		pvread_get_info_size(&info, sizeof(info));
		for (i = 0; i < 4; i++)
			pvread_get_record(i, &rec);
		pvread_get_record(UINT32_MAX, &rec);
		pvread_sample_pvclock(&smp);
		pvread_get_stats_size(&st, sizeof(st));
		for (i = 0; i < PVREAD_SLOW_NR_REASONS + 1; i++)
			(void)pvread_slow_reason_name(i);
	}
	forget_everything();	/* the page goes: nothing may point to it */
	free(page);
	return 0;
}
