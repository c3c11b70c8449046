// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Plugin hosts (JNI, Python's ctypes) dlopen() libraries, and a process
 * may hold several copies of one: each must load and read, which a
 * library using the initial-exec TLS model does not (glibc's static TLS
 * reserve runs out after a few).  dlopen LIB N times, from N copies.
 *
 * Before that: dlopen() and dlclose() of a copy, many times, must give
 * back what each load took (the state's pages); and two copies at
 * different paths, RTLD_LOCAL, must share one state -- a fallback through
 * one, lifted to a line that runs ahead of the kernel, and a read through
 * the other after it never goes back.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "synthetic.h"
#include "tap.h"

#define COPIES 32
#define NSEC_PER_SEC 1000000000LL

/* LIB copied to @dir/@name: the path, in @path. */
static int copy_lib(const char *lib, const char *dir, const char *name,
		    char *path, size_t len)
{
	char cmd[600];

	snprintf(path, len, "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd), "cp %s %s", lib, path);
	return system(cmd);
}

/* This process's address space, in kB (VmSize). */
static long vm_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

typedef int (*gettime_fn)(clockid_t, struct timespec *);

/* dlopen() of @path, a read, dlclose(), @n times. */
static int cycles(const char *path, int n)
{
	struct timespec ts;
	gettime_fn gettime;
	int i;

	for (i = 0; i < n; i++) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

		if (!h)
			return -1;
		*(void **)&gettime = dlsym(h, "pvread_clock_gettime");
		if (!gettime || gettime(CLOCK_MONOTONIC, &ts))
			return -1;
		dlclose(h);
	}
	return 0;
}

static void dlclose_gives_back(const char *lib, const char *dir)
{
	char path[256];
	long before, after;
	int bad;

	if (copy_lib(lib, dir, "libpvread-cycled.so", path, sizeof(path))) {
		tap_result(0, "dlopen/dlclose cycles: no copy of the library");
		return;
	}
	bad = cycles(path, 20);
	before = vm_kb();
	bad |= cycles(path, 400);
	after = vm_kb();
	printf("# 400 dlopen/read/dlclose cycles: VmSize %ld kB -> %ld kB\n",
	       before, after);
	/* The figure is on the "# " line: the result's name is the same every run. */
	tap_result(!bad && before > 0 && after - before < 256,
		   "dlopen, a read and dlclose 400 times: the address space does not grow (by 256 kB or more)");
}

static int64_t ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static void two_copies_one_state(const char *lib, const char *dir)
{
	int (*use_page)(const void *, size_t);
	gettime_fn a_gettime, b_gettime;
	char a_path[256], b_path[256];
	struct timespec ts, k;
	int64_t line, lifted, other, kernel;
	struct synthetic page;
	void *a, *b;

	if (copy_lib(lib, dir, "libpvread-a.so", a_path, sizeof(a_path)) ||
	    copy_lib(lib, dir, "libpvread-b.so", b_path, sizeof(b_path)) ||
	    !(a = dlopen(a_path, RTLD_NOW | RTLD_LOCAL)) ||
	    !(b = dlopen(b_path, RTLD_NOW | RTLD_LOCAL))) {
		tap_result(0, "two copies: not loaded (%s)", dlerror());
		return;
	}
	*(void **)&use_page = dlsym(a, "pvread_use_page");
	*(void **)&a_gettime = dlsym(a, "pvread_clock_gettime");
	*(void **)&b_gettime = dlsym(b, "pvread_clock_gettime");
	/* A line 5 ms ahead of the kernel's clock, given to copy A. */
	if (!use_page || !a_gettime || !b_gettime ||
	    synthetic_init(&page, PVREAD_MODE_LINE) ||
	    use_page(page.hdr, page.size)) {
		tap_result(0, "two copies: no synthetic page");
		return;
	}
	synthetic_tick(&page);
	synthetic_line_shift(&page, 5000000);
	a_gettime(CLOCK_MONOTONIC, &ts);
	line = ns_of(&ts);
	/* The line gone: A's fallback is lifted to it. */
	synthetic_line_leave(&page);
	a_gettime(CLOCK_MONOTONIC, &ts);
	lifted = ns_of(&ts);
	b_gettime(CLOCK_MONOTONIC, &ts);
	other = ns_of(&ts);
	clock_gettime(CLOCK_MONOTONIC, &k);
	kernel = ns_of(&k);
	printf("# copy A: line %+lld ns, its fallback %+lld ns; then copy B %+lld ns (from the kernel's clock after)\n",
	       (long long)(line - kernel), (long long)(lifted - kernel),
	       (long long)(other - kernel));
	tap_result(lifted >= line && other >= lifted,
		   "two copies at different paths, RTLD_LOCAL: one state, a read through B never below A's fallback lifted to the line");
}

static void *reader(void *arg)
{
	gettime_fn gettime = (gettime_fn)(uintptr_t)arg;
	struct timespec ts;

	for (;;)
		gettime(CLOCK_MONOTONIC, &ts);
	return NULL;
}

/*
 * exit() flushes the stdio streams after every destructor has run: a
 * stream whose write takes a while holds the process there, so that a
 * state a destructor gave back would be read, unmapped, by the other
 * threads meanwhile.
 */
static ssize_t slow_write(void *cookie, const char *buf, size_t len)
{
	struct timespec pause = { 0, 50 * 1000 * 1000 };

	(void)cookie;
	(void)buf;
	nanosleep(&pause, NULL);
	return (ssize_t)len;
}

/*
 * exit() while another thread reads through a copy still loaded: the
 * copy's destructor runs, and must leave the state alone.
 */
static void exit_while_reading(const char *lib, const char *dir)
{
	char path[256];
	int status;
	pid_t pid;

	if (copy_lib(lib, dir, "libpvread-exit.so", path, sizeof(path))) {
		tap_result(0, "exit while reading: no copy of the library");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		struct timespec pause = { 0, 20 * 1000 * 1000 };
		gettime_fn gettime;
		pthread_t t[2];
		FILE *linger;

		if (!h)
			_exit(3);
		*(void **)&gettime = dlsym(h, "pvread_clock_gettime");
		pthread_create(&t[0], NULL, reader, (void *)(uintptr_t)gettime);
		pthread_create(&t[1], NULL, reader, (void *)(uintptr_t)gettime);
		nanosleep(&pause, NULL);
		linger = fopencookie(NULL, "w", (cookie_io_functions_t){
					     .write = slow_write });
		if (linger)
			fputc('x', linger);	/* flushed at exit */
		exit(0);
	}
	waitpid(pid, &status, 0);
	tap_result(WIFEXITED(status) && !WEXITSTATUS(status),
		   "exit() while two threads read through a dlopen()ed copy: exit status 0 (%s %d)",
		   WIFEXITED(status) ? "exit" : "signal",
		   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/pvread-dlopen.XXXXXX", path[256], cmd[600];
	int i, loaded = 0, read = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen LIBPVREAD.SO\n");
		return 2;
	}
	tap_plan(4);
	if (!mkdtemp(dir))
		return 1;
	/* Before any copy is loaded here: the child's copy is the only one. */
	exit_while_reading(argv[1], dir);
	dlclose_gives_back(argv[1], dir);
	two_copies_one_state(argv[1], dir);
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
