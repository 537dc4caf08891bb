/* Address functions of shared-memory tiles (layout.h): swizzle modes, the
 * canonical K-major and MN-major layouts with their LBO/SBO, and the byte
 * offset of an element. */
#include <string.h>

#include "layout.h"

/* Columns:
 *  name, alias  CLI spellings accepted by swizzle_parse
 *  span         bytes of one swizzled row: the atom width (docs/hardware.md,
 *               "Canonical layouts, LBO and SBO"; K-major atom = 8 rows x
 *               span; none = one 16-byte core-matrix row)
 *  period       bytes after which the XOR pattern repeats; the alignment a
 *               tile needs for base_offset 0 (docs/hardware.md, "Swizzle
 *               modes" and "Base offset and alignment"; PTX §9.7.16.4.1
 *               Table 41)
 *  xor_bits     B of CuTe Swizzle<B,4,3>: address bits [7+B-1:7] are XOR-ed
 *               into bits [4+B-1:4] (docs/hardware.md, "Swizzle modes")
 * The descriptor field codes live in desc.c next to the bit positions. */
static const struct {
	const char *name;
	const char *alias;
	int span;
	int period;
	int xor_bits;
} swz_tab[SWZ_COUNT] = {
	[SWZ_NONE] = {"none", "none", 16, 16, 0},
	[SWZ_32B] = {"32B", "32", 32, 256, 1},
	[SWZ_64B] = {"64B", "64", 64, 512, 2},
	[SWZ_128B] = {"128B", "128", 128, 1024, 3},
};

/* Bits of an address the descriptor fields keep: 17..4. */
enum { DESC_ADDR_BITS = 18 };

uint32_t
smem_desc_window(void)
{
	return 1u << DESC_ADDR_BITS;
}

/* The lane field of a TMEM address starts at bit 16; a quarter is 32
 * lanes. */
enum { TMEM_LANE_BIT = 16, TMEM_QUARTER_LANE_SHIFT = 5 };

uint32_t
tmem_addr(uint32_t lane, uint32_t col)
{
	return lane << TMEM_LANE_BIT | col;
}

int
tmem_quarter_lanes(void)
{
	return 1 << TMEM_QUARTER_LANE_SHIFT;
}

int
tmem_quarter_lane_shift(void)
{
	return TMEM_QUARTER_LANE_SHIFT;
}

int
tmem_quarter_addr_shift(void)
{
	return TMEM_LANE_BIT + TMEM_QUARTER_LANE_SHIFT;
}

void
tmem_pair128_d(int row, int col, int n, int *lane, int *tcol)
{
	int half = tmem_pair128_d_cols(n);

	*lane = row + PAIR128_ROWS * (col / half);
	*tcol = col % half;
}

int
tmem_pair128_d_cols(int n)
{
	return n / 2;
}

void
tmem_pair128_a16(int row, int k, int copy, int *lane, int *tcol)
{
	*lane = row + PAIR128_ROWS * copy;
	*tcol = k / 2;
}

int
wgmma_acc_row(int t)
{
	return 16 * (t / 32 % 4) + t % 32 / 4;
}

int
wgmma_acc_col(int t)
{
	return 2 * (t % 4);
}

void
wgmma_acc_reg(int i, int *drow, int *dcol)
{
	*drow = 8 * ((i / 2) % 2);
	*dcol = i % 2 + 8 * (i / 4);
}

void
wgmma_afrag8(int t, int i, int b, int *row, int *k)
{
	*row = wgmma_acc_row(t) + 8 * (i % 2);
	*k = 4 * (t % 4) + b + 16 * (i / 2);
}

int
swizzle_parse(const char *s, Swizzle *out)
{
	for (int i = 0; i < SWZ_COUNT; i++)
		if (strcmp(s, swz_tab[i].name) == 0
		    || strcmp(s, swz_tab[i].alias) == 0) {
			*out = (Swizzle)i;
			return 0;
		}
	return -1;
}

const char *
swizzle_name(Swizzle s)
{
	return (unsigned)s < SWZ_COUNT ? swz_tab[s].name : "?";
}

int
swizzle_span(Swizzle s)
{
	return (unsigned)s < SWZ_COUNT ? swz_tab[s].span : 0;
}

int
swizzle_period(Swizzle s)
{
	return (unsigned)s < SWZ_COUNT ? swz_tab[s].period : 0;
}

/* CuTe Swizzle<B,4,3>: o ^ ((o & (((1<<B)-1) << 7)) >> 3), applied to the
 * absolute address because that is what TMA writes and the MMA reads
 * (docs/hardware.md, "Swizzle modes" and "TMA swizzle"). An unknown mode is the identity. */
uint32_t
swizzle_mask(Swizzle s)
{
	if ((unsigned)s >= SWZ_COUNT)
		return 0;
	return ((1u << swz_tab[s].xor_bits) - 1) << 7;
}

uint32_t
swizzle_addr(Swizzle s, uint32_t addr)
{
	return addr ^ ((addr & swizzle_mask(s)) >> 3);
}

/* Bits one element occupies in shared memory. 6-bit types live in the
 * 16-element/16-byte b6x16_p32 container that kind::f8f6f4/mxf8f6f4 read,
 * so they tile like 8-bit data: one MMA consumes 32 bytes of K and K = 32
 * for fp6 (K=32 for 8-bit containers, docs/hardware.md, "Advancing along K"). 4-bit is the
 * packed form of kind::mxf4/mxf4nvf4 (T = 32, docs/hardware.md,
 * "Canonical layouts, LBO and SBO"); padded fp4 for kind::f8f6f4 is passed as 8. */
static int
container_bits(int elem_bits)
{
	switch (elem_bits) {
	case 4: case 8: case 16: case 32:
		return elem_bits;
	case 6:
		return 8;
	}
	return 0;
}

static int
check_dims(Major major, int elem_bits, int mn, int k, KgErr *err)
{
	uint64_t bytes;

	if (mn <= 0)
		return kg_fail(err, "rows=%d: must be positive", mn);
	if (k <= 0)
		return kg_fail(err, "cols=%d: must be positive", k);
	/* Past 2^20 elements along one side the product could wrap; such a
	 * tile is over the window whatever the other side. */
	if (mn > 1 << 20 || k > 1 << 20)
		bytes = UINT64_MAX;
	else
		bytes = (uint64_t)mn * (uint64_t)k
		        * (uint64_t)container_bits(elem_bits) / 8;
	if (bytes > smem_desc_window())
		return kg_fail(err, "rows=%d, cols=%d: tile exceeds the 256 KiB "
		               "descriptor address window (docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", mn, k);
	/* Transposed (MN-major) sub-byte operands do not exist (docs/hardware.md,
	 * "Operand major-ness", PTX Table 49/52); tf32 MN-major needs 128B_BASE32B, which this type
	 * does not model. */
	if (major == MAJOR_MN && elem_bits < 8)
		return kg_fail(err, "major=MN: %d-bit elements must be K-major "
		               "(docs/hardware.md, \"Operand major-ness\")", elem_bits);
	if (major == MAJOR_MN && elem_bits == 32)
		return kg_fail(err, "major=MN: 32-bit (tf32) MN-major operands need "
		               "the 128B_BASE32B layout (docs/hardware.md, \"Operand major-ness\"), "
		               "which canonical tiles do not model");
	return 0;
}

/* K-major (docs/hardware.md, "Canonical layouts, LBO and SBO" rows
 * K|none..128B): a row of the tile is k*bits/8 bytes, cut into span-wide
 * slices. Within a slice the rows are span bytes apart and 8-row groups 8*span
 * apart (SBO); slices follow one another after all mn rows (mn*span). With no
 * swizzle span = 16: a slice is a column of
 * core matrices stacked along MN (SBO = 128) and the next column is LBO =
 * mn*16 = (mn/8)*128 away, reproducing TV3 (128x16: LBO 2048, SBO 128).
 * Swizzled K-major ignores LBO ("assumed 1"); CUTLASS and TK write 16. */
static int
kmajor(TileLayout *t, int cbits, KgErr *err)
{
	int span = swz_tab[t->swz].span;
	uint64_t row_bits = (uint64_t)t->k * (uint64_t)cbits;

	if (t->mn % 8)
		return kg_fail(err, "rows=%d: must be a multiple of 8 "
		               "(core-matrix height, docs/hardware.md, \"Canonical layouts, LBO and SBO\")", t->mn);
	if (row_bits % (8u * (unsigned)span))
		return kg_fail(err, "cols=%d: a K-major %s row of %d-bit elements "
		               "must be a multiple of %d bytes (%s, docs/hardware.md, \"Canonical layouts, LBO and SBO\")",
		               t->k, swz_tab[t->swz].name, t->elem_bits, span,
		               t->swz == SWZ_NONE ? "core-matrix width"
		                                  : "swizzle span");
	t->sbo = 8u * (unsigned)span;
	if (t->swz == SWZ_NONE) {
		t->lbo = (uint32_t)t->mn * 16u;
		t->slice_bytes = 0;
	} else {
		t->lbo = 16;
		t->slice_bytes = (uint32_t)t->mn * (uint32_t)span;
	}
	return 0;
}

/* MN-major (docs/hardware.md, "Canonical layouts, LBO and SBO" rows
 * MN|none..128B): an atom is span bytes along MN by 8 K-rows (8*span bytes).
 * Atoms are stacked along MN first, then along K, the order CuTe's
 * tile_to_shape uses: the MN neighbour is 8*span away and the next 8-K-row
 * group mn*bits bytes ((mn bytes/span) atoms * 8*span). Which field holds which
 * distance swaps with the swizzle (docs/hardware.md, "Canonical layouts, LBO
 * and SBO" note; CUTLASS make_umma_desc): none -> SBO = MN, LBO = K; swizzled
 * -> LBO = MN, SBO = K. TV3 (MN=128 x K=64 bf16, SW128): 256 B along MN = 2
 * atoms, LBO = 1024, SBO = 2048. */
static int
mnmajor(TileLayout *t, int cbits, KgErr *err)
{
	int span = swz_tab[t->swz].span;
	uint64_t col_bits = (uint64_t)t->mn * (uint64_t)cbits;
	uint32_t mn_step, k_step;

	if (t->k % 8)
		return kg_fail(err, "cols=%d: must be a multiple of 8 "
		               "(MN-major core-matrix depth, docs/hardware.md, \"Canonical layouts, LBO and SBO\")", t->k);
	if (col_bits % (8u * (unsigned)span))
		return kg_fail(err, "rows=%d: an MN-major %s column of %d-bit "
		               "elements must be a multiple of %d bytes (%s, "
		               "docs/hardware.md, \"Canonical layouts, LBO and SBO\")", t->mn, swz_tab[t->swz].name,
		               t->elem_bits, span,
		               t->swz == SWZ_NONE ? "core-matrix width"
		                                  : "swizzle span");
	mn_step = 8u * (unsigned)span;
	k_step = (uint32_t)col_bits;  /* (mn*bits/8) bytes * 8 K-rows */
	t->lbo = t->swz == SWZ_NONE ? k_step : mn_step;
	t->sbo = t->swz == SWZ_NONE ? mn_step : k_step;
	t->slice_bytes = 0;
	return 0;
}

int
layout_canonical(TileLayout *out, Major major, Swizzle swz, int elem_bits,
                 int mn, int k, KgErr *err)
{
	TileLayout t = {0};
	int cbits;

	if ((unsigned)swz >= SWZ_COUNT)
		return kg_fail(err, "swizzle=%d: not a swizzle mode "
		               "(none, 32B, 64B, 128B)", (int)swz);
	if (major != MAJOR_K && major != MAJOR_MN)
		return kg_fail(err, "major=%d: must be K or MN", (int)major);
	cbits = container_bits(elem_bits);
	if (!cbits)
		return kg_fail(err, "elem-bits=%d: must be 4, 6, 8, 16 or 32", elem_bits);
	if (check_dims(major, elem_bits, mn, k, err))
		return -1;
	t.major = major;
	t.swz = swz;
	t.elem_bits = elem_bits;
	t.mn = mn;
	t.k = k;
	t.bytes = (uint32_t)((uint64_t)mn * (uint64_t)k * (uint64_t)cbits / 8);
	if (major == MAJOR_K ? kmajor(&t, cbits, err) : mnmajor(&t, cbits, err))
		return -1;
	*out = t;
	return 0;
}

/* Sub-byte elements report the byte that holds them. Coordinates outside
 * the tile give UINT32_MAX so a caller's bug cannot alias a real byte. */
uint32_t
layout_offset(const TileLayout *t, int mn, int k)
{
	uint32_t span, cbits, b;

	if (mn < 0 || mn >= t->mn || k < 0 || k >= t->k
	    || (unsigned)t->swz >= SWZ_COUNT)
		return UINT32_MAX;
	span = (uint32_t)swz_tab[t->swz].span;
	cbits = (uint32_t)container_bits(t->elem_bits);
	if (t->major == MAJOR_K) {
		b = (uint32_t)k * cbits / 8;  /* byte along K within the row */
		return b / span * ((uint32_t)t->mn * span) + (uint32_t)mn * span
		       + b % span;
	}
	b = (uint32_t)mn * cbits / 8;         /* byte along MN within the column */
	return (uint32_t)k / 8 * ((uint32_t)t->mn * cbits)  /* 8-K-row group */
	       + b / span * (8 * span)                 /* atom along MN */
	       + (uint32_t)k % 8 * span + b % span;
}

uint32_t
layout_sf_offset(int row, int kblock)
{
	int q = tmem_quarter_lanes();

	/* image row = the TMEM lane, 4 bytes per column, one byte per K block */
	return (uint32_t)(16 * (row % q) + 4 * (row / q) + kblock);
}

void
layout_sf_tmem(int row, int kblock, int *lane, int *col, int *byte)
{
	*lane = row % tmem_quarter_lanes();
	*col = row / tmem_quarter_lanes();
	*byte = kblock;
}

int
layout_sf_pick(SfPick *out, int tile_k, int kmma, int vec, int mma)
{
	int per = vec > 0 ? kmma / vec : 0, first;

	if (vec <= 0 || kmma % vec || (per != 1 && per != 2 && per != 4) ||
	    tile_k % (SF_BLOCKS * vec) || mma < 0 || (mma + 1) * kmma > tile_k)
		return -1;
	first = mma * per;
	out->images = tile_k / (SF_BLOCKS * vec);
	out->per_mma = per;
	out->image = first / SF_BLOCKS;
	out->id = first % SF_BLOCKS;
	return 0;
}
