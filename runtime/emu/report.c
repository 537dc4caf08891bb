/* Hazard and fault reports: the first one of a CTA stops it, and its message
 * names the kernel, the CTA, the thread and the PTX line. */
#include <stdarg.h>
#include <stdio.h>

#include "emu.h"

static void
where(const EmuCta *c, const EmuThread *t, const EmuInsn *in, char *buf, size_t n)
{
	char text[200] = "";
	if (in)
		emu_line_text(c->prog, in->line, text, sizeof text);
	/* a thread acting on another CTA of its cluster (DSMEM, a pair's MMA):
	 * name the thread's CTA, then the one whose memory is involved */
	const EmuCta *tc = t && (t < c->t || t >= c->t + c->nthreads) ? EMU_SLOT_CTA(c, t->slot) : c;
	int at = snprintf(buf, n, "kernel %s, CTA (%u,%u,%u)", c->prog->entry, tc->ctaid[0],
	                  tc->ctaid[1], tc->ctaid[2]);
	if (tc != c && at >= 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " on the memory of CTA (%u,%u,%u)", c->ctaid[0],
		               c->ctaid[1], c->ctaid[2]);
	if (t && at >= 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, ", thread %d (warp %d, lane %d)", t->tid,
		               t->tid / 32, t->lane);
	if (in && at >= 0 && (size_t)at < n)
		snprintf(buf + at, n - (size_t)at, ", PTX line %d `%s`", in->line, text);
}

int
emu_hazard(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *cls, const char *fmt,
           ...)
{
	if (c->failed)
		return EMU_STOP;
	c->failed = 1;
	char loc[512], why[4096];
	where(c, t, in, loc, sizeof loc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	krt_errf(c->err, EMU_EHAZARD, "emu hazard [%s]: %s: %s", cls, loc, why);
	return EMU_STOP;
}

int
emu_fault(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *fmt, ...)
{
	if (c->failed)
		return EMU_STOP;
	c->failed = 1;
	char loc[512], why[4096];
	where(c, t, in, loc, sizeof loc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	krt_errf(c->err, KRT_ECUDA, "emu fault: %s: %s", loc, why);
	return EMU_STOP;
}
