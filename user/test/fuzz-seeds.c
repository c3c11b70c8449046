// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fuzz target's seeds: a synthetic page in each mode, as the module
 * lays one out, written to DIR/{stable,percpu,line}.  The corpus in
 * test/fuzz-corpus/ was made with it: make -C user fuzz-seeds.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "synthetic.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		uint32_t mode;
	} pages[] = {
		{ "stable", PVREAD_MODE_STABLE },
		{ "percpu", PVREAD_MODE_PERCPU },
		{ "line", PVREAD_MODE_LINE },
	};
	char path[4096];
	unsigned int i;

	if (argc != 2)
		return 2;
	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		struct synthetic s;
		FILE *f;

		if (synthetic_init(&s, pages[i].mode))
			return 1;
		synthetic_tick(&s);
		snprintf(path, sizeof(path), "%s/%s", argv[1], pages[i].name);
		f = fopen(path, "w");
		if (!f || fwrite(s.hdr, s.size, 1, f) != 1 || fclose(f))
			return 1;
	}
	return 0;
}
