// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/pvread refuses what it must: writable opens and mappings, an
 * executable mapping, any length or offset but the whole published layout
 * from 0, read(2), write(2) and unknown ioctls -- each with its errno --
 * and serves the header and the reference ioctl it publishes.  A process
 * without CAP_SYS_ADMIN maps the header page and nothing past it (EPERM),
 * and finds no cycle_last there: Xen's system time is root's.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <sys/wait.h>

#include "pvread_harness.h"

/*
 * @failed, a call's failure, with errno @want: the errno is on a "# "
 * line either way.  The verdict through the harness's own EXPECTs, which
 * are the same in every kernel's harness (its fields are not).
 */
#define EXPECT_REFUSED(failed, want) do {				\
	bool _failed = (failed);					\
	int _err = errno;						\
									\
	if (!_failed)							\
		ksft_print_msg("%s: succeeded, want %s\n",		\
			       _metadata->name, strerror(want));	\
	else if (_err != (want))					\
		ksft_print_msg("%s: %s, want %s\n", _metadata->name,	\
			       strerror(_err), strerror(want));		\
	else								\
		ksft_print_msg("%s: refused: %s\n", _metadata->name,	\
			       strerror(_err));				\
	EXPECT_TRUE(_failed && _err == (want));				\
} while (0)

FIXTURE(device) {
	int fd;
	long page;
	size_t size;		/* the published mapping size */
	const struct pvread_header *h;
};

FIXTURE_SETUP(device)
{
	self->page = sysconf(_SC_PAGESIZE);
	self->fd = open(PVREAD_DEVICE, O_RDONLY);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", PVREAD_DEVICE,
				       strerror(errno));
	self->h = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->h) TH_LOG("mmap PROT_READ: %s",
					       strerror(errno));
	self->size = self->h->map_size;
}

FIXTURE_TEARDOWN(device)
{
	if (self->h != MAP_FAILED)
		munmap((void *)self->h, self->page);
	close(self->fd);
}

TEST_F(device, open_rdwr)
{
	int fd = open(PVREAD_DEVICE, O_RDWR);

	EXPECT_REFUSED(fd < 0, EPERM);
	if (fd >= 0)
		close(fd);
}

TEST_F(device, open_wronly)
{
	int fd = open(PVREAD_DEVICE, O_WRONLY);

	EXPECT_REFUSED(fd < 0, EPERM);
	if (fd >= 0)
		close(fd);
}

/*
 * The layout is the header, then the records, then the whole timekeeper,
 * mapped whole.
 */
TEST_F(device, header)
{
	const struct pvread_header *h = self->h;
	size_t records = (size_t)h->nr_records * h->record_stride +
			 sizeof(struct pvread_timekeeper);

	ksft_print_msg("header: magic %#x, abi %u, %u records of %u bytes at %u, map_size %zu\n",
		       h->magic, h->abi_version, h->nr_records,
		       h->record_stride, h->record_offset, self->size);
	EXPECT_EQ((uint32_t)PVREAD_MAGIC, h->magic);
	EXPECT_EQ((uint32_t)PVREAD_ABI_VERSION, h->abi_version);
	EXPECT_EQ(h->record_offset +
		  ((records + self->page - 1) & ~(size_t)(self->page - 1)),
		  self->size);
}

TEST_F(device, mprotect_write)
{
	EXPECT_REFUSED(mprotect((void *)self->h, self->page,
				PROT_READ | PROT_WRITE), EACCES);
}

TEST_F(device, mprotect_exec)
{
	EXPECT_REFUSED(mprotect((void *)self->h, self->page,
				PROT_READ | PROT_EXEC), EACCES);
}

TEST_F(device, mmap_write_shared)
{
	EXPECT_REFUSED(mmap(NULL, self->page, PROT_READ | PROT_WRITE,
			    MAP_SHARED, self->fd, 0) == MAP_FAILED, EACCES);
}

TEST_F(device, mmap_write_private)
{
	EXPECT_REFUSED(mmap(NULL, self->page, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE, self->fd, 0) == MAP_FAILED, EACCES);
}

TEST_F(device, mmap_exec)
{
	EXPECT_REFUSED(mmap(NULL, self->page, PROT_READ | PROT_EXEC,
			    MAP_SHARED, self->fd, 0) == MAP_FAILED, EPERM);
}

TEST_F(device, mmap_longer_than_published)
{
	EXPECT_REFUSED(mmap(NULL, self->size + self->page, PROT_READ,
			    MAP_SHARED, self->fd, 0) == MAP_FAILED, EINVAL);
}

TEST_F(device, mmap_past_the_end)
{
	EXPECT_REFUSED(mmap(NULL, self->page, PROT_READ, MAP_SHARED,
			    self->fd, self->size) == MAP_FAILED, EINVAL);
}

/* The layout is offsets from the header: it is mapped whole, from 0. */
TEST_F(device, mmap_nonzero_offset)
{
	EXPECT_REFUSED(mmap(NULL, self->page, PROT_READ, MAP_SHARED,
			    self->fd, self->page) == MAP_FAILED, EINVAL);
}

/*
 * What a process without CAP_SYS_ADMIN gets, each a bit of the child's
 * exit status (PRIV_SETUP: it could not drop root).
 */
#define UNPRIV_OPEN		(1 << 0)	/* open O_RDONLY failed */
#define UNPRIV_HEADER		(1 << 1)	/* the header page did not map */
#define UNPRIV_CYCLE_LAST	(1 << 2)	/* tk.cycle_last or raw_ not 0 */
#define UNPRIV_WHOLE		(1 << 3)	/* map_size from 0: not EPERM */
#define UNPRIV_RECORDS		(1 << 4)	/* at record_offset: not EPERM */
#define UNPRIV_ROOTS_FD		(1 << 5)	/* root's descriptor: not whole */
#define PRIV_SETUP		(1 << 6)

/* nobody's uid and gid, no groups: no capability left. */
static bool drop_root(void)
{
	return !setgroups(0, NULL) && !setresgid(65534, 65534, 65534) &&
	       !setresuid(65534, 65534, 65534) && geteuid() == 65534;
}

/* mmap of @len at @off on @fd fails with EPERM; says so on a "# " line. */
static bool refused_eperm(int fd, size_t len, off_t off, const char *what)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
	int err = errno;

	if (p != MAP_FAILED) {
		ksft_print_msg("unprivileged: %s mapped, want EPERM\n", what);
		munmap(p, len);
		return false;
	}
	ksft_print_msg("unprivileged: %s: %s\n", what, strerror(err));
	return err == EPERM;
}

static int unprivileged_child(int roots_fd, long page, size_t size,
			      uint32_t record_offset)
{
	const struct pvread_header *h;
	int fd, bad = 0;
	void *p;

	if (!drop_root())
		return PRIV_SETUP;
	fd = open(PVREAD_DEVICE, O_RDONLY);
	if (fd < 0) {
		ksft_print_msg("unprivileged: open: %s\n", strerror(errno));
		return UNPRIV_OPEN;
	}
	h = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		ksft_print_msg("unprivileged: the header page: %s\n",
			       strerror(errno));
		bad |= UNPRIV_HEADER;
	} else {
		ksft_print_msg("unprivileged: header tk.cycle_last %llu, raw_cycle_last %llu\n",
			       (unsigned long long)h->tk.cycle_last,
			       (unsigned long long)h->tk.raw_cycle_last);
		if (h->tk.cycle_last || h->tk.raw_cycle_last)
			bad |= UNPRIV_CYCLE_LAST;
	}
	if (!refused_eperm(fd, size, 0, "header and records"))
		bad |= UNPRIV_WHOLE;
	if (!refused_eperm(fd, page, record_offset, "the page at record_offset"))
		bad |= UNPRIV_RECORDS;
	close(fd);
	/* The opener's credentials decide: a descriptor root opened maps. */
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, roots_fd, 0);
	if (p == MAP_FAILED) {
		ksft_print_msg("unprivileged: root's descriptor: %s\n",
			       strerror(errno));
		bad |= UNPRIV_ROOTS_FD;
	} else {
		munmap(p, size);
	}
	return bad;
}

/*
 * As nobody (setresuid in a child): open O_RDONLY and the header page
 * work, the header's tk has no cycle_last, and the whole layout and the
 * page at record_offset are EPERM; a descriptor root opened and handed
 * on still maps it all (file_ns_capable(): the opener decides).
 */
TEST_F(device, unprivileged)
{
	int status, bits;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		fflush(stdout);
		_exit(unprivileged_child(self->fd, self->page, self->size,
					 self->h->record_offset));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	bits = WEXITSTATUS(status);
	ASSERT_FALSE(bits & PRIV_SETUP) TH_LOG("could not drop root");
	EXPECT_FALSE(bits & UNPRIV_OPEN) TH_LOG("open O_RDONLY refused");
	EXPECT_FALSE(bits & UNPRIV_HEADER) TH_LOG("the header page refused");
	EXPECT_FALSE(bits & UNPRIV_CYCLE_LAST)
		TH_LOG("the header shows Xen's system time");
	EXPECT_FALSE(bits & UNPRIV_WHOLE)
		TH_LOG("the records mapped, or another errno than EPERM");
	EXPECT_FALSE(bits & UNPRIV_RECORDS)
		TH_LOG("the page at record_offset: not EPERM");
	EXPECT_FALSE(bits & UNPRIV_ROOTS_FD)
		TH_LOG("a descriptor root opened did not map whole");
}

/*
 * As root: the whole layout maps, and the timekeeper at priv_tk_offset is
 * the header's from the same update, with the cycles the header lacks.
 */
TEST_F(device, privileged)
{
	struct pvread_timekeeper tk, mine;
	const volatile struct pvread_header *h;
	uint32_t seq, off;
	uint8_t *p;

	p = mmap(NULL, self->size, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("mmap map_size as root: %s",
					 strerror(errno));
	h = (const void *)p;
	off = h->priv_tk_offset;
	ksft_print_msg("privileged: timekeeper at %u of %zu, records end at %zu\n",
		       off, self->size, (size_t)h->record_offset +
		       (size_t)h->nr_records * h->record_stride);
	ASSERT_TRUE(off >= h->record_offset +
			   (size_t)h->nr_records * h->record_stride &&
		    off % 8 == 0 && off + sizeof(tk) <= self->size)
		TH_LOG("priv_tk_offset %u outside the records' pages", off);
	for (;;) {
		seq = h->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1) {
			sched_yield();
			continue;
		}
		memcpy(&tk, (const void *)&h->tk, sizeof(tk));
		memcpy(&mine, p + off, sizeof(mine));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (h->seq == seq)
			break;
	}
	ksft_print_msg("privileged: cycle_last %llu, raw_cycle_last %llu; the header's %llu, %llu\n",
		       (unsigned long long)mine.cycle_last,
		       (unsigned long long)mine.raw_cycle_last,
		       (unsigned long long)tk.cycle_last,
		       (unsigned long long)tk.raw_cycle_last);
	EXPECT_NE(0ULL, (unsigned long long)mine.cycle_last);
	EXPECT_EQ(0ULL, (unsigned long long)tk.cycle_last);
	EXPECT_EQ(0ULL, (unsigned long long)tk.raw_cycle_last);
	mine.cycle_last = 0;
	mine.raw_cycle_last = 0;
	EXPECT_EQ(0, memcmp(&tk, &mine, sizeof(tk)))
		TH_LOG("the header's timekeeper is not the whole one's but for the cycles");
	munmap(p, self->size);
}

TEST_F(device, read)
{
	char buf[16];

	EXPECT_REFUSED(read(self->fd, buf, sizeof(buf)) < 0, EINVAL);
}

TEST_F(device, write)
{
	char buf[16] = { 0 };

	EXPECT_REFUSED(write(self->fd, buf, sizeof(buf)) < 0, EBADF);
}

TEST_F(device, unknown_ioctl)
{
	EXPECT_REFUSED(ioctl(self->fd, _IO(PVREAD_IOC_MAGIC, 0x7f)) != 0,
		       ENOTTY);
}

TEST_F(device, reference_ioctl)
{
	struct pvread_reference ref = { 0 };

	ASSERT_EQ(0, ioctl(self->fd, PVREAD_IOC_REFERENCE, &ref))
		TH_LOG("PVREAD_IOC_REFERENCE: %s", strerror(errno));
	ksft_print_msg("reference: cpu %u, version %u, cycles %llu\n",
		       ref.cpu, ref.version, (unsigned long long)ref.cycles);
	EXPECT_NE(0ULL, (unsigned long long)ref.cycles);
}

PVREAD_XEN_HARNESS_MAIN
