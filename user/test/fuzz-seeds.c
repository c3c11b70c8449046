// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fuzz target's seeds: synthetic pages of ABI version 3 as the module
 * lays them out, written to DIR/{line,line-left,none}: line mode; line
 * mode left for none, the last line kept with its span cut (what a
 * fallback is lifted towards); none from the start, no line.  The corpus
 * in test/fuzz-corpus/ was made from them: make -C user fuzz-seeds, then
 * make -C user fuzz, and libFuzzer's -merge=1 into a fresh directory.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "synthetic.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		uint32_t mode;
		int leave;
	} pages[] = {
		{ "line", PVREAD_MODE_LINE, 0 },
		{ "line-left", PVREAD_MODE_LINE, 1 },
		{ "none", PVREAD_MODE_NONE, 0 },
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
		synthetic_line_update(&s);
		if (pages[i].leave)
			synthetic_line_leave(&s);
		snprintf(path, sizeof(path), "%s/%s", argv[1], pages[i].name);
		f = fopen(path, "w");
		if (!f || fwrite(s.hdr, s.size, 1, f) != 1 || fclose(f))
			return 1;
		synthetic_free(&s);
	}
	return 0;
}
