// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/pvread refuses what it must: writable opens and mappings, an
 * executable mapping, any length or offset but the whole published layout
 * from 0, read(2), write(2) and unknown ioctls -- each with its errno --
 * and serves the header and the reference ioctl it publishes.
 */
#define _GNU_SOURCE
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

/* The layout is the header, then the records, mapped whole. */
TEST_F(device, header)
{
	const struct pvread_header *h = self->h;
	size_t records = (size_t)h->nr_records * h->record_stride;

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
