/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The preload shim's way to the definitions it hides. */
#ifndef PVREAD_PRELOAD_H
#define PVREAD_PRELOAD_H

#include <sys/time.h>
#include <time.h>

int pvread_next_clock_gettime(clockid_t clock, struct timespec *ts);
int pvread_next_gettimeofday(struct timeval *tv, void *tz);

#endif /* PVREAD_PRELOAD_H */
