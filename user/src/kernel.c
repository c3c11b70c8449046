// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The kernel's own answer, for every read the page cannot vouch for.
 *
 * Not libc's clock_gettime(): that name can be interposed -- by the
 * preload shim itself, by a program that defines clock_gettime() as a call
 * of pvread_clock_gettime() (it would recurse), by a fake clock preloaded
 * after the shim -- and libc's is a cancellation point in some versions.
 * The vDSO's __vdso_clock_gettime(), found through the ELF image the kernel
 * maps into every process (getauxval(AT_SYSINFO_EHDR)), is the kernel's
 * answer with nothing in between; without a vDSO, the system call.
 *
 * A separate file, so that a test linking libpvread.a can put its own
 * pvread_kernel_*() in place of these (one archive member).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdatomic.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef __x86_64__
#error "x86-64 only: the vDSO and system call here take the 64-bit timespec"
#endif

typedef int (*gettimeofday_fn)(struct timeval *, void *);

/*
 * Found once, in the constructor below, and only read afterwards; atomic,
 * as a constructor of another library may start a thread that reads the
 * clock before it runs.  NULL: the system call.  clock_gettime's is
 * pvread_vdso_clock_gettime (internal.h), read.c's.
 */
static _Atomic(gettimeofday_fn) vdso_gettimeofday;

/* Does version index @ndx of the vDSO name @want ("LINUX_2.6")? */
static int version_is(const ElfW(Verdef) *def, ElfW(Half) ndx,
		      const char *strtab, const char *want)
{
	for (;;) {
		if (!(def->vd_flags & VER_FLG_BASE) &&
		    (def->vd_ndx & 0x7fff) == ndx) {
			const ElfW(Verdaux) *aux = (const void *)
				((const char *)def + def->vd_aux);

			return !strcmp(strtab + aux->vda_name, want);
		}
		if (!def->vd_next)
			return 0;
		def = (const void *)((const char *)def + def->vd_next);
	}
}

/*
 * The address of function @name at version LINUX_2.6 in the vDSO whose ELF
 * header is at @base, or NULL.  Only what the dynamic segment says: the
 * section headers need not be mapped.  The symbol count is DT_HASH's
 * nchain, which every x86 vDSO has (linked --hash-style=both).
 */
static void *vdso_sym(const ElfW(Ehdr) *base, const char *name)
{
	const ElfW(Phdr) *ph = (const void *)((const char *)base + base->e_phoff);
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *symtab = NULL;
	const ElfW(Word) *hash = NULL;
	const ElfW(Versym) *versym = NULL;
	const ElfW(Verdef) *verdef = NULL;
	const char *strtab = NULL;
	uintptr_t bias = 0;
	int have_load = 0;
	ElfW(Word) i;

	if (memcmp(base->e_ident, ELFMAG, SELFMAG) ||
	    base->e_ident[EI_CLASS] !=
	    (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32) ||
	    base->e_phentsize != sizeof(*ph))
		return NULL;
	for (i = 0; i < base->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			bias = (uintptr_t)base + ph[i].p_offset - ph[i].p_vaddr;
			have_load = 1;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const void *)((const char *)base + ph[i].p_offset);
		}
	}
	if (!have_load || !dyn)
		return NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		const void *p = (const void *)(dyn->d_un.d_ptr + bias);

		switch (dyn->d_tag) {
		case DT_SYMTAB:
			symtab = p;
			break;
		case DT_STRTAB:
			strtab = p;
			break;
		case DT_HASH:
			hash = p;
			break;
		case DT_VERSYM:
			versym = p;
			break;
		case DT_VERDEF:
			verdef = p;
			break;
		}
	}
	if (!symtab || !strtab || !hash)
		return NULL;
	for (i = 0; i < hash[1]; i++) {
		const ElfW(Sym) *s = &symtab[i];

		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
		    (ELF64_ST_BIND(s->st_info) != STB_GLOBAL &&
		     ELF64_ST_BIND(s->st_info) != STB_WEAK) ||
		    s->st_shndx == SHN_UNDEF || strcmp(strtab + s->st_name, name))
			continue;
		if (versym && verdef &&
		    !version_is(verdef, versym[i] & 0x7fff, strtab, "LINUX_2.6"))
			continue;
		return (void *)(s->st_value + bias);
	}
	return NULL;
}

__attribute__((constructor)) static void find_vdso(void)
{
	const ElfW(Ehdr) *base = (const void *)getauxval(AT_SYSINFO_EHDR);

	if (!base)
		return;
	atomic_store_explicit(&pvread_vdso_clock_gettime,
			      (pvread_clock_gettime_fn)
			      vdso_sym(base, "__vdso_clock_gettime"),
			      memory_order_relaxed);
	atomic_store_explicit(&vdso_gettimeofday, (gettimeofday_fn)
			      vdso_sym(base, "__vdso_gettimeofday"),
			      memory_order_relaxed);
}

/* As clock_gettime(2): 0, or -1 with errno set. */
int pvread_kernel_clock_gettime(clockid_t clock, struct timespec *ts)
{
	pvread_clock_gettime_fn vdso =
		atomic_load_explicit(&pvread_vdso_clock_gettime,
				     memory_order_relaxed);

	/* The vDSO writes through @ts unchecked: EFAULT is the kernel's. */
	if (vdso && ts)
		return pvread_vdso_answer(vdso, clock, ts);
	return (int)syscall(SYS_clock_gettime, clock, ts);
}

int pvread_kernel_gettimeofday(struct timeval *tv, void *tz)
{
	gettimeofday_fn vdso = atomic_load_explicit(&vdso_gettimeofday,
						    memory_order_relaxed);
	int ret;

	if (!vdso || !tv)
		return (int)syscall(SYS_gettimeofday, tv, tz);
	ret = vdso(tv, tz);
	return ret >= 0 ? ret : pvread_vdso_error(ret);
}

/* Is the kernel's answer the vDSO's?  For the tests. */
int pvread_kernel_has_vdso(void)
{
	return atomic_load_explicit(&pvread_vdso_clock_gettime,
				    memory_order_relaxed) != NULL;
}
