// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the mapping.  This process's state (one for every copy of the
 * library loaded: the rendezvous), the first call's mapping of
 * /dev/pvread, pvread_use_page(), a child's check of the offsets it
 * inherited, the tolerance from the environment, the time namespace
 * offsets, and the library's own system calls (no cancellation points).
 * The state and its rules: internal.h.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
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

/* This process's state: see internal.h. */
struct process *_Atomic pvread_process;

/* The fast path's hint: see internal.h.  Not in the next one's line. */
_Atomic uint64_t pvread_tsc_first __attribute__((aligned(64)));

/* The page as this copy last checked it: see internal.h. */
_Atomic uint64_t pvread_line_checked
	__attribute__((aligned(64))) = LINE_UNCHECKED;

/* How reads were answered, per thread: see internal.h. */
__thread struct pvread_stats pvread_thread_stats;

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
 * offsets, ever (none).  Any other failure (no /proc here) leaves them
 * unread; a process whose children go to another namespace reads theirs
 * (childrens): either way the clocks they shift are the kernel's.  The
 * offsets first, the namespaces after: unshare(CLONE_NEWTIME) cannot be
 * undone, so namespaces that agree after the read agreed during it.
 */
static void read_timens(struct timens *ns)
{
	char buf[256], *p = buf;
	ssize_t n = -1;
	int fd;

	*ns = (struct timens){ .unread = true };
	fd = sys_open("/proc/self/timens_offsets", O_RDONLY);
	if (fd < 0) {
		if (errno == ENOENT && access("/proc/self/stat", F_OK) == 0)
			*ns = (struct timens){ .none = true };
		return;
	}
	n = sys_read(fd, buf, sizeof(buf) - 1);
	sys_close(fd);
	if (n <= 0 || n == sizeof(buf) - 1)
		return;
	buf[n] = 0;
	*ns = (struct timens){ 0 };
	while (*p)
		if (!timens_line(&p, ns)) {
			*ns = (struct timens){ .unread = true };
			return;
		}
	for (n = 0; n < PVREAD_NR_CLOCK_BASES; n++)
		ns->shifted |= ns->sec[n] || ns->nsec[n];
	ns->childrens = !own_timens_is_childrens();
}

#define CLOCKS_ALL (CLOCKS_FINE | CLOCKS_COARSE)
#define CLOCKS_PLAIN (CLOCKS_ALL & ~CLOCKS_TIMENS)

/* The clocks whose offsets @ns, read by this process, holds. */
static uint32_t timens_known(const struct timens *ns)
{
	return ns->unread || ns->childrens ? CLOCKS_PLAIN : CLOCKS_ALL;
}

/*
 * Is @p, @size bytes long, a page this library can read?  The header alone
 * is one, without the records (@size below header.map_size): the module
 * maps the rest only for a privileged opener.
 */
static bool adopt_page(struct process *proc, const void *p, size_t size)
{
	struct mapping *m = &proc->map;
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
	atomic_store_explicit(&pvread_line_checked, LINE_UNCHECKED,
			      memory_order_relaxed);
	m->device_size = 0;
	read_timens(&m->ns);
	atomic_store(&proc->adopted_size, size);
	atomic_store(&proc->adopted_page, p);
	return true;
}

/*
 * Errors after which the device may well be there at a later call: out of
 * descriptors or memory for now, a signal.  Any other (ENOENT, ENODEV,
 * ENXIO, EACCES...) says there is no device this process can map.
 */
static bool transient(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM ||
	       err == EINTR || err == EAGAIN || err == ENOBUFS;
}

/* 1: mapped; 0: no page here, for good; -1: a transient error. */
static int map_device(struct process *proc)
{
	uint32_t size;
	void *p, *all;
	int fd, ret;

	fd = sys_open(PVREAD_DEVICE, O_RDONLY);
	if (fd < 0)
		return transient(errno) ? -1 : 0;
	/* The header says how much there is to map. */
	p = mmap(NULL, sizeof(struct pvread_header), PROT_READ, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED) {
		ret = transient(errno) ? -1 : 0;
		goto fail;
	}
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
	if (!adopt_page(proc, p, size)) {
		munmap(p, size);
		ret = 0;
		goto fail;
	}
	proc->map.device_size = size;
	sys_close(fd);
	return 1;
fail:
	sys_close(fd);
	return ret;
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
 * A new state for this process, not yet its: NULL if there is no memory
 * for it.  Its second page is zeroed in every child (internal.h); where
 * the kernel refuses that, the fork handler zeroes it for fork(), and
 * wipe_refused says so.
 */
static struct process *new_process(void)
{
	struct process *p;
	int saved_errno = errno;

	p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		errno = saved_errno;
		return NULL;
	}
	p->wipe_refused = madvise((char *)p + WIPED_OFFSET, WIPED_SIZE,
				  MADV_WIPEONFORK) != 0;
	atomic_store_explicit(&p->copies, 1, memory_order_relaxed);
	errno = saved_errno;
	return p;
}

/*
 * One copy of the library no longer uses @p: the last gives its pages
 * back, and the device's mapping.
 */
static void leave_process(struct process *p)
{
	if (atomic_fetch_sub_explicit(&p->copies, 1, memory_order_relaxed) != 1)
		return;
	if (p->map.device_size &&
	    atomic_load(&p->map_state) == MAP_READY)
		munmap((void *)p->map.hdr, p->map.device_size);
	munmap(p, sizeof(*p));
}

/*
 * The rendezvous: every copy of the library has a struct rendezvous,
 * pointing to the state it uses, and an ELF note (name "pvread", type
 * PROCESS_LAYOUT) that says where that struct is, relative to the note: a
 * copy's constructor finds the others by walking the notes of every
 * object loaded (dl_iterate_phdr(), which sees copies loaded RTLD_LOCAL
 * and libpvread.a inside a program, whose names no dlsym() finds).  Only
 * a copy of the same layout matches (type, layout and size); a copy of
 * another layout keeps a state of its own.  At load time only: the read
 * path loads pvread_process, this copy's own.
 */
struct rendezvous {
	uint32_t layout;
	uint32_t size;
	struct process *_Atomic state;
};

PVREAD_HIDDEN struct rendezvous pvread_rendezvous = {
	PROCESS_LAYOUT, sizeof(struct process), NULL
};

#define STR_(x) #x
#define STR(x) STR_(x)
__asm__(".pushsection .note.pvread, \"a\", @note\n"
	"\t.balign 4\n"
	"\t.long 7\n"		/* namesz: "pvread" and its NUL */
	"\t.long 8\n"		/* descsz */
	"\t.long " STR(PROCESS_LAYOUT) "\n"
	"\t.asciz \"pvread\"\n"
	"\t.balign 4\n"
	"\t.quad pvread_rendezvous - .\n"
	"\t.popsection\n");

/* dl_iterate_phdr(): the state of another copy of this layout, into *@data. */
static int find_copy(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *n, *end;
		size_t align;

		if (ph->p_type != PT_NOTE)
			continue;
		align = ph->p_align == 8 ? 8 : 4;
		n = (const char *)(info->dlpi_addr + ph->p_vaddr);
		end = n + ph->p_memsz;
		while ((size_t)(end - n) >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *nh = (const void *)n;
			const char *name = n + sizeof(*nh);
			const char *desc = name + ((nh->n_namesz + align - 1) &
						   ~(align - 1));
			const char *next = desc + ((nh->n_descsz + align - 1) &
						   ~(align - 1));
			const struct rendezvous *r;
			struct process *state;
			int64_t rel;

			if (next > end || next <= n)
				break;
			n = next;
			if (nh->n_type != PROCESS_LAYOUT || nh->n_namesz != 7 ||
			    nh->n_descsz != 8 || memcmp(name, "pvread", 7))
				continue;
			memcpy(&rel, desc, sizeof(rel));
			r = (const void *)(desc + rel);
			if (r == &pvread_rendezvous ||
			    r->layout != PROCESS_LAYOUT ||
			    r->size != sizeof(struct process))
				continue;
			state = atomic_load(&r->state);
			if (state) {
				*(struct process **)data = state;
				return 1;
			}
		}
	}
	return 0;
}

/*
 * This copy's state, made at a call that came before this copy's
 * constructor (another library's constructor read the clock): a state of
 * its own, which copies loaded later share.
 */
static struct process *make_process(void)
{
	struct process *p = new_process(), *none = NULL;

	if (!p)
		return NULL;
	if (!atomic_compare_exchange_strong(&pvread_process, &none, p)) {
		leave_process(p);
		p = none;
	}
	atomic_store(&pvread_rendezvous.state, p);
	return p;
}

/*
 * A child of fork(): no other thread of its parent is there.  One that was
 * mapping leaves MAP_BUSY, which goes back to MAP_UNTRIED; what the child
 * did not return (floors, holds, the offsets it has not checked) is
 * zeroed, as MADV_WIPEONFORK zeroes it (also where that was refused).
 */
static void in_child(void)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_relaxed);
	int busy = MAP_BUSY;

	if (!p)
		return;
	atomic_compare_exchange_strong(&p->map_state, &busy, MAP_UNTRIED);
	memset((char *)p + WIPED_OFFSET, 0, WIPED_SIZE);
	/*
	 * The line record went with the rest: this copy checks the page
	 * again at its next read, which makes it anew, not at the next
	 * update.  (A child of _Fork() keeps the word: its record waits.)
	 */
	atomic_store_explicit(&pvread_line_checked, LINE_UNCHECKED,
			      memory_order_relaxed);
}

#ifdef PVREAD_SHARED
/*
 * When a copy's state goes: a copy unloaded by dlclose() gives its count
 * back (the last one the pages).  Not at exit: other threads may read the
 * clock until the process ends.  A copy that provides the process's
 * pvread_clock_gettime() (loaded with the program, or RTLD_GLOBAL) is
 * never unloaded before exit: it keeps its count.  A copy loaded by
 * dlopen() after the program started registered its exit handler after
 * the dynamic linker's, so at exit the handler runs before the
 * destructors; at dlclose(), after them.
 */
extern void *__dso_handle;
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static bool kept_to_exit, exiting, counted;

static void at_exit(void *arg)
{
	(void)arg;
	exiting = true;
}

static void keep_or_not(void)
{
	/*
	 * The global scope's (RTLD_DEFAULT would search this copy's own
	 * local scope too: it is the caller's).
	 */
	void *global = dlopen(NULL, RTLD_NOW);
	void *f = global ? dlsym(global, "pvread_clock_gettime") : NULL;
	Dl_info mine, theirs;

	/* Not found: RTLD_LOCAL.  Not told where: kept, to be safe. */
	kept_to_exit = f && (!dladdr(f, &theirs) ||
			     !dladdr((void *)keep_or_not, &mine) ||
			     theirs.dli_fbase == mine.dli_fbase);
	if (global)
		dlclose(global);
	__cxa_atexit(at_exit, NULL, &__dso_handle);
}

__attribute__((destructor)) static void part(void)
{
	struct process *p = atomic_load(&pvread_process);

	if (p && counted && !kept_to_exit && !exiting)
		leave_process(p);
}
#else
/* libpvread.a: in the program, which unloads it only at exit. */
static bool counted;

static void keep_or_not(void)
{
}
#endif

/*
 * Every copy's first constructor: the state another copy of this layout
 * uses, else a new one; the fork handler.
 */
__attribute__((constructor(101))) static void join(void)
{
	struct process *p = NULL, *none = NULL;

	keep_or_not();
	pthread_atfork(NULL, NULL, in_child);
	if (atomic_load(&pvread_process)) {
		/* A call before this made it, and counted this copy. */
		counted = true;
		return;
	}
	dl_iterate_phdr(find_copy, &p);
	if (p)
		atomic_fetch_add_explicit(&p->copies, 1, memory_order_relaxed);
	else
		p = new_process();
	if (!p)
		return;		/* no memory: the first call tries again */
	if (!atomic_compare_exchange_strong(&pvread_process, &none, p)) {
		leave_process(p);
		p = none;
	}
	counted = true;
	atomic_store(&pvread_rendezvous.state, p);
}

/*
 * Take this process's mapping from @from (MAP_UNTRIED or MAP_RETRY) to
 * MAP_BUSY, then to MAP_READY if @make made it (1), MAP_RETRY after a
 * transient error (-1), else to @failed; with every signal blocked, so
 * that no handler can siglongjmp() out of the middle, and with system
 * calls that are no cancellation points.  Returns what @make did, or -2
 * if another thread did it first.
 */
static int make_mapping(struct process *p,
			int (*make)(struct process *, const void *, size_t),
			const void *page, size_t size, int from, int failed)
{
	int state = from, saved_errno = errno, made;
	/*
	 * Before the signals are blocked: a process that traps cpuid
	 * (ARCH_SET_CPUID) and handles the SIGSEGV would be killed by one
	 * that is blocked.
	 */
	uint32_t tsc_read_how = tsc_read_choice();
	sigset_t all, old;
	uint32_t known;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!atomic_compare_exchange_strong(&p->map_state, &state, MAP_BUSY)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return -2;
	}
	made = make(p, page, size);
	if (made > 0) {
		p->map.tsc_read = tsc_read_how;
		known = timens_known(&p->map.ns);
		STORE(p->boot_tolerance_ns, p->map.tolerance_ns);
		atomic_store_explicit(&p->ns_known, known,
				      memory_order_release);
		atomic_store_explicit(&p->ns_check, NS_CHECKED,
				      memory_order_relaxed);
		atomic_store_explicit(&p->fast_clocks,
				      (CLOCKS_ALL & known) | tsc_read_how,
				      memory_order_release);
	} else if (made < 0) {
		atomic_store_explicit(&p->retry_tsc, tsc_ordered() + RETRY_TSC,
				      memory_order_relaxed);
	} else if (failed == MAP_ABSENT) {
		/* For good: the fast path sends every read to the kernel. */
		atomic_store_explicit(&p->fast_clocks, FAST_KERNEL,
				      memory_order_release);
	}
	atomic_store_explicit(&p->map_state, made > 0 ? MAP_READY :
			      made < 0 ? MAP_RETRY : failed,
			      memory_order_release);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
	return made;
}

/* The page this process adopted before (a child's), else the device's. */
static int map_inherited_or_device(struct process *p, const void *page,
				   size_t size)
{
	(void)size;
	page = atomic_load(&p->adopted_page);
	if (page && adopt_page(p, page, atomic_load(&p->adopted_size)))
		return 1;
	return map_device(p);
}

/*
 * The first call: map, unless another thread is doing it, or a transient
 * error was met less than RETRY_TSC ago.
 */
__attribute__((noinline, cold)) struct process *pvread_first_map(void)
{
	struct process *p = atomic_load(&pvread_process);
	int state;

	if (!p)
		p = make_process();
	if (!p)
		return NULL;
	state = atomic_load_explicit(&p->map_state, memory_order_relaxed);
	if (state == MAP_RETRY &&
	    (int64_t)(tsc_ordered() -
		      atomic_load_explicit(&p->retry_tsc,
					   memory_order_relaxed)) < 0)
		return NULL;
	if (state == MAP_UNTRIED || state == MAP_RETRY)
		make_mapping(p, map_inherited_or_device, NULL, 0, state,
			     MAP_ABSENT);
	return atomic_load_explicit(&p->map_state, memory_order_acquire) ==
	       MAP_READY ? p : NULL;
}

/* The shim's constructor: map before main(), before any seccomp filter. */
void pvread_map_now(void)
{
	(void)get_process();
}

/*
 * The page's fine @a less its fine @b, in ns, at one update: exact, for
 * the fine bases share the timekeeper's fraction (the module's differ by
 * whole ns << shift): REALTIME and MONOTONIC by wall_to_monotonic, BOOTTIME
 * and MONOTONIC by monotonic_to_boot.  False while an update is being
 * written, before the first, or for values no module writes (which no
 * check can tell anything by: not a reason to read /proc, which a filter
 * may kill).
 */
static bool page_base_diff(const struct pvread_header *h, clockid_t a,
			   clockid_t b, uint64_t *d)
{
	const struct pvread_clock_base *pa = &h->tk.base[a];
	const struct pvread_clock_base *pb = &h->tk.base[b];
	uint64_t asec, asn, bsec, bsn;
	uint32_t seq, shift;

	seq = LOAD(h->seq);
	RMB();
	asec = (uint64_t)LOAD(pa->sec);
	asn = LOAD(pa->snsec);
	bsec = (uint64_t)LOAD(pb->sec);
	bsn = LOAD(pb->snsec);
	shift = LOAD(h->tk.shift);
	RMB();
	if ((seq & 1) || LOAD(h->seq) != seq || (!asec && !asn) || shift > 32)
		return false;
	*d = (asec - bsec) * NSEC_PER_SEC +
	     (uint64_t)((int64_t)(asn - bsn) / ((int64_t)1 << shift));
	return true;
}

/* A time namespace offset of @clock, in ns (unsigned: wraps, never UB). */
static uint64_t offset_ns(const struct timens *ns, clockid_t clock)
{
	return (uint64_t)ns->sec[clock] * NSEC_PER_SEC +
	       (uint64_t)ns->nsec[clock];
}

/*
 * 1: this process's monotonic offset is the one map.ns holds; -1: it is
 * not (or the wall clock was stepped since the page's last update); 0:
 * cannot tell now.  The kernel's MONOTONIC_COARSE less its REALTIME_COARSE
 * at one tick (its REALTIME_COARSE the same before and after) is its
 * wall_to_monotonic plus a namespace's monotonic offset (no namespace
 * shifts REALTIME); the page's fine MONOTONIC less its REALTIME, at one
 * update, is wall_to_monotonic: exactly equal with the offset in the same
 * namespace, however old the page.  Not the page's coarse bases: the
 * module may hold its MONOTONIC_COARSE ahead (kmod/pvread_tk.c).  No
 * system call where the kernel has a vDSO, which serves the coarse clocks
 * in every clocksource mode.
 */
static int monotonic_offset_agrees(const struct process *p)
{
	struct timespec r1, m, r2;
	uint64_t kernel, page;

	if (!page_base_diff(p->map.hdr, CLOCK_MONOTONIC, CLOCK_REALTIME, &page))
		return 0;
	if (pvread_kernel_clock_gettime(CLOCK_REALTIME_COARSE, &r1) ||
	    pvread_kernel_clock_gettime(CLOCK_MONOTONIC_COARSE, &m) ||
	    pvread_kernel_clock_gettime(CLOCK_REALTIME_COARSE, &r2) ||
	    r1.tv_sec != r2.tv_sec || r1.tv_nsec != r2.tv_nsec)
		return 0;
	kernel = (uint64_t)ns_of(&m) - (uint64_t)ns_of(&r1);
	return kernel == page + offset_ns(&p->map.ns, CLOCK_MONOTONIC) ? 1 : -1;
}

/*
 * 1: this process's boottime offset is the one map.ns holds, to within
 * *@width ns; -1: it is not; 0: cannot tell now.  Called once the
 * monotonic offset agrees.  The kernel's CLOCK_BOOTTIME less its
 * CLOCK_MONOTONIC is monotonic_to_boot plus this namespace's boottime
 * offset less its monotonic one: read between two MONOTONIC readings, it
 * lies in [b - m2, b - m1], a bracket of m2 - m1 ns around the true
 * difference.  Clock calls only (system calls with the xen clocksource,
 * which any filter that lets the program read the clock allows).  The
 * inherited offsets outside a bracket are not this process's (the page's
 * difference did not change across it: no resume between); inside every
 * one, the boottime offset differs by less than the narrowest, which
 * CLOCK_BOOTTIME's tolerance pays for (boot_tolerance_ns): wider than half
 * the tolerance, the check cannot tell (with the xen clocksource a bracket
 * is two system calls, a microsecond or two, against 10 us by default).
 */
static int boottime_offset_agrees(const struct process *p, uint64_t *width)
{
	const struct pvread_header *h = p->map.hdr;
	const struct timens *ns = &p->map.ns;
	uint64_t d, d2, want, best = UINT64_MAX;
	struct timespec t1, tb, t2;
	int64_t lo, hi, w;
	int i;

	for (i = 0; i < BOOT_BRACKETS; i++) {
		if (!page_base_diff(h, CLOCK_BOOTTIME, CLOCK_MONOTONIC, &d) ||
		    pvread_kernel_clock_gettime(CLOCK_MONOTONIC, &t1) ||
		    pvread_kernel_clock_gettime(CLOCK_BOOTTIME, &tb) ||
		    pvread_kernel_clock_gettime(CLOCK_MONOTONIC, &t2) ||
		    !page_base_diff(h, CLOCK_BOOTTIME, CLOCK_MONOTONIC, &d2) ||
		    d2 != d)
			continue;
		want = d + offset_ns(ns, CLOCK_BOOTTIME) -
		       offset_ns(ns, CLOCK_MONOTONIC);
		lo = (int64_t)((uint64_t)ns_of(&tb) - (uint64_t)ns_of(&t2));
		hi = (int64_t)((uint64_t)ns_of(&tb) - (uint64_t)ns_of(&t1));
		w = hi - lo;
		if (w < 0)
			continue;
		if ((int64_t)(want - (uint64_t)lo) < 0 ||
		    (int64_t)((uint64_t)hi - want) < 0)
			return -1;
		if ((uint64_t)w < best)
			best = (uint64_t)w;
	}
	if (best > p->map.tolerance_ns / 2)
		return 0;
	*width = best;
	return 1;
}

/*
 * A child's check of its offsets, against those it inherited: the clocks
 * they are worth for (CLOCKS_*), or -1 when the process uses time
 * namespaces itself (the offsets must be read from /proc); *@again when a
 * later call must check again, *@boot when BOOTTIME's first read must
 * check its offset.  Never the /proc read once CLOCK_MONOTONIC is known:
 * other threads read map.ns then.
 */
static int64_t check_offsets(struct process *p, bool *again, bool *boot)
{
	const struct timens *ns = &p->map.ns;
	int agrees;

	*again = false;
	*boot = false;
	/* A fork while another thread rewrote map.ns: read them again. */
	if (atomic_load(&p->ns_rewriting))
		return -1;
	if (ns->none) {
		/* No time namespaces in this kernel: BOOTTIME's is exact. */
		STORE(p->boot_tolerance_ns, p->map.tolerance_ns);
		return CLOCKS_ALL;
	}
	if (ns->unread)
		return CLOCKS_PLAIN;
	if (ns->childrens)
		return -1;
	if (!clock_in(atomic_load_explicit(&p->ns_known, memory_order_relaxed),
		      CLOCK_MONOTONIC)) {
		agrees = monotonic_offset_agrees(p);
		if (agrees < 0)
			return -1;
		if (!agrees) {
			*again = true;
			return CLOCKS_PLAIN;
		}
	}
	/*
	 * BOOTTIME's at its first read (pvread_check_boottime()): its
	 * brackets are system calls with the xen clocksource, which a child
	 * that never reads BOOTTIME need not make.
	 */
	*boot = true;
	return CLOCKS_ALL & ~BIT_OF(CLOCK_BOOTTIME);
}

/*
 * A child's first read of CLOCK_BOOTTIME, once its monotonic offset
 * agreed (BOOT_PENDING): is the boottime offset it inherited its own?  By
 * one thread at a time (BOOT_CHECKING); BOOTTIME is the kernel's
 * meanwhile, and for good once a bracket excludes the inherited offset or
 * BOOT_CHECKS checks could not tell.  Accepted, BOOTTIME's tolerance is
 * stored before the release that makes it known and fast.
 */
__attribute__((noinline, cold)) void pvread_check_boottime(struct process *p)
{
	int state = BOOT_PENDING, agrees;
	uint64_t width;

	if (!atomic_compare_exchange_strong(&p->boot_check, &state,
					    BOOT_CHECKING))
		return;
	agrees = boottime_offset_agrees(p, &width);
	if (agrees > 0) {
		STORE(p->boot_tolerance_ns, p->map.tolerance_ns - width);
		atomic_fetch_or_explicit(&p->ns_known, BIT_OF(CLOCK_BOOTTIME),
					 memory_order_release);
		atomic_fetch_or_explicit(&p->fast_clocks,
					 BIT_OF(CLOCK_BOOTTIME),
					 memory_order_release);
	}
	atomic_store_explicit(&p->boot_check,
			      !agrees && ++p->boot_checks < BOOT_CHECKS ?
			      BOOT_PENDING : BOOT_NONE, memory_order_release);
}

/*
 * A child's first slow call: are the offsets it inherited its own?  See
 * struct process in internal.h.  By one thread at a time (NS_CHECKING);
 * the others are answered by the kernel meanwhile for the clocks a
 * namespace shifts.
 */
__attribute__((noinline, cold)) void pvread_check_child(struct process *p)
{
	int state = NS_UNCHECKED, saved_errno;
	sigset_t all, old;
	int64_t checked;
	uint32_t known;
	bool again, boot;

	if (!atomic_compare_exchange_strong(&p->ns_check, &state,
					    NS_CHECKING))
		return;
	checked = check_offsets(p, &again, &boot);
	if (checked >= 0) {
		known = (uint32_t)checked;
	} else {
		/* This process uses time namespaces: its own, from /proc. */
		saved_errno = errno;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		atomic_store(&p->ns_rewriting, 1);
		read_timens(&p->map.ns);
		atomic_store(&p->ns_rewriting, 0);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		errno = saved_errno;
		known = timens_known(&p->map.ns);
		STORE(p->boot_tolerance_ns, p->map.tolerance_ns);
	}
	atomic_store_explicit(&p->ns_known, known, memory_order_release);
	atomic_store_explicit(&p->fast_clocks,
			      (CLOCKS_ALL & known) | p->map.tsc_read,
			      memory_order_release);
	atomic_store_explicit(&p->ns_check, again ? NS_UNCHECKED : NS_CHECKED,
			      memory_order_release);
	/* After fast_clocks: pvread_check_boottime() adds to it. */
	if (checked >= 0 && boot)
		atomic_store_explicit(&p->boot_check, BOOT_PENDING,
				      memory_order_release);
}

static int adopt_given_page(struct process *p, const void *page, size_t size)
{
	return page && adopt_page(p, page, size);
}

int pvread_use_page(const void *page, size_t size)
{
	struct process *p = atomic_load(&pvread_process);
	int made;

	if (!p)
		p = make_process();
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	/* Refused: nothing chosen, a later call may give a page or map. */
	made = make_mapping(p, adopt_given_page, page, size, MAP_UNTRIED,
			    MAP_UNTRIED);
	if (made == -2) {
		errno = EBUSY;
		return -1;
	}
	if (made <= 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
