// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Plugin hosts (JNI, Python's ctypes) dlopen() libraries, and a process
 * may hold several copies of one: each must load and read, which a
 * library using the initial-exec TLS model does not (glibc's static TLS
 * reserve runs out after a few).  dlopen LIB N times, from N copies.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#define COPIES 32

int main(int argc, char **argv)
{
	char dir[] = "/tmp/pvread-dlopen.XXXXXX", path[256], cmd[600];
	int i, loaded = 0, read = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen LIBPVREAD.SO\n");
		return 2;
	}
	tap_plan(1);
	if (!mkdtemp(dir))
		return 1;
	for (i = 0; i < COPIES; i++) {
		int (*gettime)(clockid_t, struct timespec *);
		struct timespec ts;
		void *h;

		snprintf(path, sizeof(path), "%s/libpvread-%d.so", dir, i);
		snprintf(cmd, sizeof(cmd), "cp %s %s", argv[1], path);
		if (system(cmd))
			break;
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("# copy %d: %s\n", i + 1, dlerror());
			continue;
		}
		loaded++;
		*(void **)&gettime = dlsym(h, "pvread_clock_gettime");
		read += gettime && !gettime(CLOCK_MONOTONIC, &ts) && ts.tv_sec > 0;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		printf("# %s left behind\n", dir);
	tap_result(loaded == COPIES && read == COPIES,
		   "%d copies of libpvread.so dlopen()ed: %d loaded, %d read the clock",
		   COPIES, loaded, read);
	return tap_exit();
}
