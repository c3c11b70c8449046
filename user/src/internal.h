/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the library's files share and do not export. */
#ifndef PVREAD_INTERNAL_H
#define PVREAD_INTERNAL_H

#include <errno.h>
#include <sys/time.h>
#include <time.h>

#define PVREAD_HIDDEN __attribute__((visibility("hidden")))

/* kernel.c: the kernel's answer, through the vDSO or the system call. */
PVREAD_HIDDEN int pvread_kernel_clock_gettime(clockid_t clock,
					      struct timespec *ts);
PVREAD_HIDDEN int pvread_kernel_gettimeofday(struct timeval *tv, void *tz);
PVREAD_HIDDEN int pvread_kernel_has_vdso(void);

#endif /* PVREAD_INTERNAL_H */
