/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rdtsc and rdtscp trapped (prctl PR_SET_TSC, PR_TSC_SIGSEGV) and
 * emulated in a SIGSEGV handler, as record-and-replay tools do: the
 * instruction's part, for the tests' handlers (what a trap is for --
 * counting, moving the TSC, rewriting the page -- is each test's).
 */
#ifndef PVREAD_TEST_TSC_TRAP_H
#define PVREAD_TEST_TSC_TRAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <ucontext.h>

/*
 * The length of the TSC read at the trap's RIP: 2 (rdtsc) or 3 (rdtscp);
 * a SIGSEGV that is no TSC read is a bug of the test: abort.
 */
static inline int tsc_trap_len(const ucontext_t *uc)
{
	const unsigned char *insn =
		(const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];

	if (insn[0] == 0x0f && insn[1] == 0x31)
		return 2;
	if (insn[0] == 0x0f && insn[1] == 0x01 && insn[2] == 0xf9)
		return 3;
	abort();
}

/* TSC reads trap (@on), or run (inside a handler, to read the real one). */
static inline void tsc_trap(bool on)
{
	prctl(PR_SET_TSC, on ? PR_TSC_SIGSEGV : PR_TSC_ENABLE, 0, 0, 0);
}

/* The trapped read of @len bytes done: @tsc its result (rdtscp's aux 0). */
static inline void tsc_trap_return(ucontext_t *uc, int len, uint64_t tsc)
{
	greg_t *r = uc->uc_mcontext.gregs;

	r[REG_RAX] = (uint32_t)tsc;
	r[REG_RDX] = (greg_t)(tsc >> 32);
	if (len == 3)
		r[REG_RCX] = 0;
	r[REG_RIP] += len;
}

#endif /* PVREAD_TEST_TSC_TRAP_H */
