// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the mapping.  This process's page of state (MADV_WIPEONFORK),
 * the first call's mapping of /dev/pvread or of the page a parent adopted,
 * pvread_use_page(), the tolerance from the environment, the time
 * namespace offsets, and the library's own system calls (no cancellation
 * points).  The state and its rules: internal.h.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "internal.h"

/*
 * Correct Xen's vCPUs disagree by a few ns since its 4.8 fixes (by several
 * dozen us before them): 10 us leaves room for that and for a line steered
 * towards the kernel's clock, and refuses hosts that behave like pre-4.8.
 */
#define DEFAULT_TOLERANCE_NS 10000ULL

/* This process's page; made at the first call, then only read. */
struct process *_Atomic pvread_process;

/* How reads were answered, per thread: see internal.h. */
__thread struct pvread_stats pvread_thread_stats;

/*
 * The page this process adopted, which its children inherit mapped (the
 * device's mapping is shared, a page given to pvread_use_page() stays):
 * they adopt it again.
 */
static const void *_Atomic adopted_page;
static _Atomic size_t adopted_size;

/*
 * PVREAD_MAX_ERROR_NS: decimal digits only, at most 2^64 - 1.  Anything
 * else (a sign, a space, hex, an overflow) is a mistake: the default
 * (pvread_get_info() says which tolerance is in force; a library prints
 * nothing unasked).  Not in a set-user-ID program: secure_getenv().
 */
static uint64_t tolerance_from_env(void)
{
	const char *s = secure_getenv("PVREAD_MAX_ERROR_NS");
	const char *c;
	uint64_t v = 0;

	if (!s || !*s)
		return DEFAULT_TOLERANCE_NS;
	for (c = s; *c; c++) {
		unsigned int digit = (unsigned int)(*c - '0');

		if (digit > 9 || v > (UINT64_MAX - digit) / 10)
			return DEFAULT_TOLERANCE_NS;
		v = v * 10 + digit;
	}
	return v;
}

/* One "NAME SEC NSEC" line of timens_offsets; false if it is not one. */
static bool timens_line(char **p, struct timens *ns)
{
	static const clockid_t mono[] = { CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW,
					  CLOCK_MONOTONIC_COARSE };
	bool boot = !strncmp(*p, "boottime ", 9);
	long long sec, nsec;
	unsigned int i;
	char *end;

	if (!boot && strncmp(*p, "monotonic ", 10))
		return false;
	errno = 0;
	sec = strtoll(*p + (boot ? 9 : 10), &end, 10);
	nsec = strtoll(end, &end, 10);
	if (errno || *end != '\n' || nsec < 0 || nsec >= NSEC_PER_SEC)
		return false;
	*p = end + 1;
	if (boot) {
		ns->sec[CLOCK_BOOTTIME] = sec;
		ns->nsec[CLOCK_BOOTTIME] = nsec;
		return true;
	}
	for (i = 0; i < sizeof(mono) / sizeof(mono[0]); i++) {
		ns->sec[mono[i]] = sec;
		ns->nsec[mono[i]] = nsec;
	}
	return true;
}

/*
 * The library's own system calls: syscall(2), which is no cancellation
 * point, where libc's open(), read() and close() are (POSIX does not let
 * clock_gettime() be one, and a cancel in the middle would leave the
 * mapping half made).
 */
static int sys_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC);
}

static ssize_t sys_read(int fd, void *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

/*
 * Is this process in the time namespace its children are made in?  Then
 * /proc/self/timens_offsets, which shows the children's, shows its own.
 * After unshare(CLONE_NEWTIME) it is not, until it exits: its own offsets
 * are then shown nowhere.  A kernel without time namespaces has neither
 * link (1); any other failure: not known (0).
 */
static int own_timens_is_childrens(void)
{
	char own[64], children[64];
	ssize_t a, b;

	int a_errno;

	a = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/ns/time", own,
		    sizeof(own));
	a_errno = errno;
	b = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/ns/time_for_children",
		    children, sizeof(children));
	if (a < 0 && b < 0 && a_errno == ENOENT && errno == ENOENT)
		return 1;
	return a > 0 && a == b && a < (ssize_t)sizeof(own) &&
	       !memcmp(own, children, (size_t)a);
}

/*
 * This process's time namespace offsets, from /proc/self/timens_offsets.
 * A kernel without time namespaces has no such file in a mounted /proc: no
 * offsets.  Any other failure (no /proc here), and a process whose
 * children go to another namespace, leave them unknown, and the clocks
 * they shift to the kernel.  The offsets first, the namespaces after:
 * unshare(CLONE_NEWTIME) cannot be undone, so namespaces that agree after
 * the read agreed during it.
 */
static void read_timens(struct timens *ns)
{
	char buf[256], *p = buf;
	ssize_t n = -1;
	int fd;

	*ns = (struct timens){ .unknown = true };
	fd = sys_open("/proc/self/timens_offsets", O_RDONLY);
	if (fd < 0) {
		ns->unknown = errno != ENOENT ||
			      access("/proc/self/stat", F_OK) != 0;
		return;
	}
	n = sys_read(fd, buf, sizeof(buf) - 1);
	sys_close(fd);
	if (n <= 0 || n == sizeof(buf) - 1)
		return;
	buf[n] = 0;
	while (*p)
		if (!timens_line(&p, ns)) {
			*ns = (struct timens){ .unknown = true };
			return;
		}
	for (n = 0; n < PVREAD_NR_CLOCK_BASES; n++)
		ns->shifted |= ns->sec[n] || ns->nsec[n];
	ns->unknown = !own_timens_is_childrens();
}

/*
 * Is @p, @size bytes long, a page this library can read?  The header alone
 * is one, without the records (@size below header.map_size): the module
 * maps the rest only for a privileged opener.
 */
static bool adopt_page(struct mapping *m, const void *p, size_t size)
{
	const struct pvread_header *h = p;

	if ((uintptr_t)p % _Alignof(struct pvread_header) ||
	    size < sizeof(*h) || h->magic != PVREAD_MAGIC ||
	    h->abi_version != PVREAD_ABI_VERSION ||
	    h->record_stride < sizeof(struct pvread_record) ||
	    h->record_offset < sizeof(*h) || h->nr_records > PVREAD_MAX_RECORDS ||
	    (h->record_offset | h->record_stride) %
	    _Alignof(struct pvread_record) ||
	    (uint64_t)h->record_offset +
	    (uint64_t)h->nr_records * h->record_stride > h->map_size)
		return false;
	m->hdr = h;
	m->records = h->map_size <= size ?
		     (const unsigned char *)p + h->record_offset : NULL;
	m->nr_records = h->nr_records;
	m->stride = h->record_stride;
	m->tolerance_ns = tolerance_from_env();
	read_timens(&m->ns);
	atomic_store(&adopted_size, size);
	atomic_store(&adopted_page, p);
	return true;
}

static bool map_device(struct mapping *m)
{
	uint32_t size;
	void *p, *all;
	int fd;

	fd = sys_open(PVREAD_DEVICE, O_RDONLY);
	if (fd < 0)
		return false;
	/* The header says how much there is to map. */
	p = mmap(NULL, sizeof(struct pvread_header), PROT_READ, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	size = ((const struct pvread_header *)p)->map_size;
	/*
	 * The records too where the opener may map them (CAP_SYS_ADMIN), for
	 * pvread_get_record() and pvread_sample_pvclock(); else (EPERM) the
	 * header alone, which holds all a read needs.  As many calls either
	 * way as one mapping after the other.
	 */
	all = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (all != MAP_FAILED) {
		munmap(p, sizeof(struct pvread_header));
		p = all;
	} else {
		size = sizeof(struct pvread_header);
	}
	if (!adopt_page(m, p, size)) {
		munmap(p, size);
		goto fail;
	}
	sys_close(fd);
	return true;
fail:
	sys_close(fd);
	return false;
}

/*
 * How the read path reads the TSC here: FAST_RDTSCP where CPUID offers
 * rdtscp, as the kernel's vDSO reads it, else 0 (lfence; rdtsc).  Both
 * wait for the loads before them.  The vDSO's own choice, so that the
 * line's read follows the vDSO's cost on every CPU: on an Intel Xeon KVM
 * guest the two cost the same in a loop and rdtscp makes the line read
 * 0.3-0.6 ns faster.
 */
static uint32_t tsc_read_choice(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (edx & (1U << 27)) ? FAST_RDTSCP : 0;
}

/*
 * This process's page, made at its first call (of any thread: the loser
 * of a race gives its page back).  NULL if there is no memory for it.  On
 * a kernel without MADV_WIPEONFORK (before 4.14, which has no time
 * namespaces) children inherit their parent's state, in their parent's
 * namespace: correct, and slow for good only where a thread of the parent
 * was mapping or holding at the fork.
 */
static __attribute__((noinline, cold)) struct process *make_process(void)
{
	struct process *p, *none = NULL;
	size_t size = (sizeof(*p) + 4095) & ~(size_t)4095;
	int saved_errno = errno;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		errno = saved_errno;
		return NULL;
	}
	madvise(p, size, MADV_WIPEONFORK);
	if (!atomic_compare_exchange_strong(&pvread_process, &none, p)) {
		munmap(p, size);
		p = none;
	}
	errno = saved_errno;
	return p;
}

/*
 * Take this process's mapping from MAP_UNTRIED to MAP_BUSY, then to
 * MAP_READY if @make made it, else to @failed; with every signal blocked,
 * so that no handler can siglongjmp() out of the middle, and with system
 * calls that are no cancellation points.  False if another thread did it
 * first.
 */
static bool make_mapping(struct process *p,
			 bool (*make)(struct mapping *, const void *, size_t),
			 const void *page, size_t size, int failed, bool *made)
{
	int state = MAP_UNTRIED, saved_errno = errno;
	/*
	 * Before the signals are blocked: a process that traps cpuid
	 * (ARCH_SET_CPUID) and handles the SIGSEGV would be killed by one
	 * that is blocked.
	 */
	uint32_t tsc_read_how = tsc_read_choice();
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!atomic_compare_exchange_strong(&p->map_state, &state, MAP_BUSY)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return false;
	}
	*made = make(&p->map, page, size);
	if (*made)
		atomic_store_explicit(&p->fast_clocks, (p->map.ns.unknown ?
				      (CLOCKS_FINE | CLOCKS_COARSE) &
				      ~CLOCKS_TIMENS :
				      CLOCKS_FINE | CLOCKS_COARSE) |
				      tsc_read_how,
				      memory_order_release);
	else if (failed == MAP_ABSENT)
		atomic_store_explicit(&p->fast_clocks, FAST_KERNEL,
				      memory_order_release);
	atomic_store_explicit(&p->map_state, *made ? MAP_READY : failed,
			      memory_order_release);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
	return true;
}

/* The page this process's parent adopted, else the device's. */
static bool map_inherited_or_device(struct mapping *m, const void *page,
				    size_t size)
{
	(void)page;
	(void)size;
	page = atomic_load(&adopted_page);
	if (page && adopt_page(m, page, atomic_load(&adopted_size)))
		return true;
	return map_device(m);
}

/* The first call: map, unless another thread is doing it. */
__attribute__((noinline, cold)) struct process *pvread_first_map(void)
{
	struct process *p = atomic_load(&pvread_process);
	bool made;

	if (!p)
		p = make_process();
	if (!p)
		return NULL;
	if (!make_mapping(p, map_inherited_or_device, NULL, 0, MAP_ABSENT,
			  &made))
		made = atomic_load_explicit(&p->map_state,
					    memory_order_acquire) == MAP_READY;
	return made ? p : NULL;
}

static bool adopt_given_page(struct mapping *m, const void *page, size_t size)
{
	return page && adopt_page(m, page, size);
}

int pvread_use_page(const void *page, size_t size)
{
	struct process *p = atomic_load(&pvread_process);
	bool made;

	if (!p)
		p = make_process();
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	/* Refused: nothing chosen, a later call may give a page or map. */
	if (!make_mapping(p, adopt_given_page, page, size, MAP_UNTRIED,
			  &made)) {
		errno = EBUSY;
		return -1;
	}
	if (!made) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
