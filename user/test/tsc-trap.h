/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rdtsc and rdtscp trapped (prctl PR_SET_TSC, PR_TSC_SIGSEGV) and
 * emulated in a SIGSEGV handler, as record-and-replay tools do: the
 * instruction's part, for the tests' handlers (what a trap is for --
 * counting, moving the TSC, rewriting the page -- is each test's).
 */
#ifndef PVREAD_TEST_TSC_TRAP_H
#define PVREAD_TEST_TSC_TRAP_H

#include <cpuid.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

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

/*
 * Does @rdtscp (else rdtsc) trap here?  1, 0, or -1 where PR_SET_TSC is
 * refused or the child cannot be made: tried in a child, which the trap
 * kills (not dumpable: no core, nor a crash handler's report of it).
 */
static inline int tsc_read_traps(bool rdtscp)
{
	struct rlimit no_core = { 0, 0 };
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		uint32_t lo, hi, aux;

		setrlimit(RLIMIT_CORE, &no_core);
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		signal(SIGSEGV, SIG_DFL);
		if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0))
			_exit(2);
		if (rdtscp)
			__asm__ __volatile__("rdtscp"
					     : "=a"(lo), "=d"(hi), "=c"(aux));
		else
			__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
		_exit(0);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) != pid)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/*
 * Why a TSC read does not trap here, or NULL where both do (rdtscp only
 * where CPUID offers it).  PR_SET_TSC sets CR4.TSD for the thread, and a
 * hypervisor may let the guest's rdtsc run whatever it says (seen:
 * prctl() returns 0 and rdtsc runs on, in a Firecracker guest on AMD
 * EPYC): there, a test that needs the trap skips, for this reason.
 */
static inline const char *tsc_trap_missing(void)
{
	unsigned int eax, ebx, ecx, edx;
	bool rdtscp = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
		      (edx & (1U << 27));
	int r = tsc_read_traps(false);

	if (r == 1 && rdtscp)
		r = tsc_read_traps(true);
	if (r < 0)
		return "PR_SET_TSC refused here";
	if (!r)
		return "rdtsc runs after PR_SET_TSC here: the hypervisor does not trap it";
	return NULL;
}

#endif /* PVREAD_TEST_TSC_TRAP_H */
