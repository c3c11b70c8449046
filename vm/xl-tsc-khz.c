// SPDX-License-Identifier: GPL-2.0
/*
 * xl-tsc-khz — give a domain saved by `xl save` another TSC frequency, so
 * that `xl restore` brings it back as if on a host whose TSC runs at
 * NEW_KHZ: what a migration between unlike hosts does to a guest.
 *
 *   xl-tsc-khz FILE OLD_KHZ NEW_KHZ
 *
 * The save image carries the domain's TSC settings in one X86_TSC_INFO
 * record of the migration stream (Xen's docs/specs/libxc-migration-stream:
 * type 8, 24 bytes: mode, khz, nsec, incarnation, reserved, little-endian).
 * The record is found by its header and a khz within 1% of OLD_KHZ (the
 * frequency Xen reports for the domain, which may differ from the saved one
 * in the last digit); exactly one match is required, so a page of guest
 * memory that happens to look alike is never patched instead.  With a khz
 * other than the host's, Xen emulates the TSC at that rate after restore
 * (tsc_mode default); the domain's pvclock records then carry another
 * tsc_to_system_mul and tsc_shift.
 */
#define _GNU_SOURCE	/* memmem */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_TYPE_X86_TSC_INFO 8u

/* Its header: type X86_TSC_INFO, length 24, little-endian. */
static const unsigned char hdr[8] = { REC_TYPE_X86_TSC_INFO, 0, 0, 0,
				      24, 0, 0, 0 };

struct tsc_info_record {
	uint32_t type;
	uint32_t length;
	uint32_t mode;
	uint32_t khz;
	uint64_t nsec;
	uint32_t incarnation;
	uint32_t reserved;
};

static unsigned long parse_khz(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !v || v > UINT32_MAX) {
		fprintf(stderr, "xl-tsc-khz: bad frequency '%s' (kHz)\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct tsc_info_record rec;
	unsigned long old_khz, new_khz;
	unsigned char *p;
	size_t off, found = 0, matches = 0;
	struct stat st;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: xl-tsc-khz FILE OLD_KHZ NEW_KHZ\n");
		return 2;
	}
	old_khz = parse_khz(argv[2]);
	new_khz = parse_khz(argv[3]);
	fd = open(argv[1], O_RDWR);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "xl-tsc-khz: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if ((size_t)st.st_size < sizeof(rec)) {
		fprintf(stderr, "xl-tsc-khz: %s: too short for a save image\n",
			argv[1]);
		return 1;
	}
	p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "xl-tsc-khz: mmap %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	/*
	 * Records are 8-byte aligned within their stream, but the stream
	 * follows xl's header and the domain's configuration, of any length:
	 * look for the record's header at every byte.
	 */
	for (off = 0; off + sizeof(rec) <= (size_t)st.st_size; off++) {
		const unsigned char *q = memmem(p + off, st.st_size - off,
						hdr, sizeof(hdr));

		if (!q || (size_t)(q - p) + sizeof(rec) > (size_t)st.st_size)
			break;
		off = q - p;
		memcpy(&rec, q, sizeof(rec));
		if (rec.mode > 3 || rec.reserved)
			continue;
		if (rec.khz + old_khz / 100 < old_khz ||
		    rec.khz > old_khz + old_khz / 100) {
			printf("xl-tsc-khz: offset %zu looks like X86_TSC_INFO but has khz %u: not it\n",
			       off, rec.khz);
			continue;
		}
		if (!matches++)
			found = off;
		printf("xl-tsc-khz: X86_TSC_INFO at offset %zu: mode %u, khz %u, nsec %llu, incarnation %u\n",
		       off, rec.mode, rec.khz, (unsigned long long)rec.nsec,
		       rec.incarnation);
	}
	if (matches != 1) {
		fprintf(stderr, "xl-tsc-khz: %s: %zu X86_TSC_INFO records with khz %lu +- 1%%, want exactly 1\n",
			argv[1], matches, old_khz);
		return 1;
	}
	memcpy(&rec, p + found, sizeof(rec));
	old_khz = rec.khz;
	rec.khz = (uint32_t)new_khz;
	memcpy(p + found + offsetof(struct tsc_info_record, khz), &rec.khz,
	       sizeof(rec.khz));
	if (msync(p, st.st_size, MS_SYNC)) {
		fprintf(stderr, "xl-tsc-khz: msync: %s\n", strerror(errno));
		return 1;
	}
	printf("xl-tsc-khz: khz %lu -> %lu\n", old_khz, new_khz);
	return 0;
}
