/* Shared-memory tile geometry: swizzle address functions and the canonical
 * core-matrix layouts that TMA writes and the MMA descriptors describe
 * (docs/hardware.md, "Swizzle modes", "Base offset and alignment",
 * "Canonical layouts, LBO and SBO" and "TMA swizzle"). */
#ifndef KGEN_LAYOUT_H
#define KGEN_LAYOUT_H

#include <stdint.h>
#include "err.h"

typedef enum Swizzle {
	SWZ_NONE,
	SWZ_32B,
	SWZ_64B,
	SWZ_128B,
	SWZ_COUNT
} Swizzle;

typedef enum Major {
	MAJOR_K,  /* K contiguous: "row" A / "column" B */
	MAJOR_MN, /* M (or N) contiguous: transposed operand */
} Major;

int swizzle_parse(const char *s, Swizzle *out); /* "none","32","64","128" (also "32B"...) */
const char *swizzle_name(Swizzle s);            /* "none","32B","64B","128B" */
int swizzle_span(Swizzle s);   /* bytes of one swizzled row: 16 (none), 32, 64, 128 */
int swizzle_period(Swizzle s); /* alignment for base_offset 0: 16, 256, 512, 1024 */
/* Apply the swizzle to an absolute shared-memory byte address (docs/hardware.md,
 * "Swizzle modes"). */
uint32_t swizzle_addr(Swizzle s, uint32_t addr);
/* The address bits that swizzle_addr moves down by 3 and XORs in: code
 * that swizzles at run time (st.shared into a TMA-shaped tile) emits
 * addr ^ ((addr & mask) >> 3) with this mask. */
uint32_t swizzle_mask(Swizzle s);

/* A densely packed tile of `mn` rows (along M or N) by `k` elements, laid
 * out canonically for `major` and `swz`:
 *  - K-major swizzled: rows of span bytes; 8-row atoms dense along MN
 *    (SBO = 8*span), atoms for successive K slices of `span` bytes follow
 *    after all MN rows (slice stride = mn*span). LBO = 16 (field 1).
 *  - K-major none: 8x16B core matrices, stacked along MN first
 *    (SBO = 128), then along K (LBO = mn/8*128).
 *  - MN-major: per docs/hardware.md, "Canonical layouts, LBO and SBO" (LBO/SBO swap
 * between none and swizzled). Fails, naming the parameter, when mn/k do not tile the atom. */
typedef struct TileLayout {
	Major major;
	Swizzle swz;
	int elem_bits;
	int mn, k;          /* elements */
	uint32_t lbo, sbo;  /* bytes, as the descriptor wants them */
	uint32_t bytes;     /* total footprint */
	uint32_t slice_bytes; /* K-major swizzled: bytes of one span-wide K slice (mn*span); else 0 */
} TileLayout;

/* Bytes of the shared-memory window the descriptors address: start, LBO
 * and SBO keep address bits 17..4 (docs/hardware.md, "Shared-memory
 * descriptor (sm_100)"), so 256 KiB. */
uint32_t smem_desc_window(void);

/* The TMEM address of lane `lane`, column `col`: lane in bits 31-16, column
 * in bits 15-0 (docs/hardware.md, "TMEM addressing"). */
uint32_t tmem_addr(uint32_t lane, uint32_t col);
/* Lanes of one quarter (32) and the shifts that turn a quarter index
 * (warp % 4) into its first lane (<< tmem_quarter_lane_shift(), 5) and into
 * the TMEM address of that lane (<< tmem_quarter_addr_shift(), 21)
 * (docs/hardware.md, "Lane quarters"). */
int tmem_quarter_lanes(void);
int tmem_quarter_lane_shift(void);
int tmem_quarter_addr_shift(void);

/* The CTA pair's M = 128 MMA (.cta_group::2, dense A: PTX "Layout B";
 * docs/hardware.md, "Accumulator layout of the CTA pair"). CTA h of the
 * pair holds rows 64h..64h+63 of the 128 x n D, its row r (0..63) and
 * column c (0..n-1) in lane r + 64(c / (n/2)), column c % (n/2) of its own
 * TMEM: n/2 columns of all 128 lanes. An A operand read from TMEM (the TS
 * form) is duplicated: row r's 16-bit elements k, k+1 in the cell at
 * column k/2 of lane r and, copy 1, of lane r + 64. */
enum { PAIR128_ROWS = 64 };
void tmem_pair128_d(int row, int col, int n, int *lane, int *tcol);
int tmem_pair128_d_cols(int n); /* n/2 */
void tmem_pair128_a16(int row, int k, int copy, int *lane, int *tcol);

/* Scale factors of a block-scaled tcgen05.mma (docs/hardware.md,
 * "Block-scaled tcgen05.mma" and "tcgen05.cp"), staged by one
 * tcgen05.cp .32x128b.warpx4 per 128 rows: the smem image is 32 rows of 16
 * bytes (K-major, no swizzle, rows 16 bytes apart), image row r lands in
 * lane r of every lane quarter, its 16 bytes in 4 columns. Row m of the
 * operand (0..127) and K block b (0..3, one byte each, the MMA's scale
 * factor id) therefore sit at byte layout_sf_offset(m, b) of the image and
 * in lane m % 32, column m / 32, byte b of the scale region. */
enum { SF_ROWS = 128, SF_BLOCKS = 4, SF_IMAGE_BYTES = 512, SF_COLS = 4 };
uint32_t layout_sf_offset(int row, int kblock); /* 16*(row%32) + 4*(row/32) + kblock */
void layout_sf_tmem(int row, int kblock, int *lane, int *col, int *byte);
/* Which image and which scale-factor id one MMA of a stage reads
 * (docs/hardware.md, "Scale-factor images"): an image holds SF_BLOCKS
 * scale vectors of `vec` K elements per row, so a stage of tile_k holds
 * tile_k / (SF_BLOCKS*vec) images per 128 rows; MMA `mma` of the stage
 * (kmma K elements each: 32 for mxf8f6f4, 64 for the FP4 kinds) reads
 * kmma/vec factors (1X, 2X or 4X) starting at factor mma*kmma/vec of the
 * stage: image (mma*kmma/vec) / 4, id (mma*kmma/vec) % 4. Fails (-1) when
 * kmma/vec is not 1, 2 or 4 or tile_k is not whole images. */
typedef struct SfPick {
	int images;  /* images per 128 rows per stage */
	int per_mma; /* factors per row of one MMA: the scale_vec (1, 2, 4) */
	int image;   /* the image this MMA reads */
	int id;      /* its scale-factor id: the first byte of the TMEM word */
} SfPick;
int layout_sf_pick(SfPick *out, int tile_k, int kmma, int vec, int mma);

/* The wgmma f32 accumulator fragment of m64nNk16/k32 (docs/hardware.md,
 * "wgmma accumulator fragment"): thread t of the warpgroup holds, in
 * register i, row wgmma_acc_row(t) + drow and column wgmma_acc_col(t) + dcol
 * with wgmma_acc_reg(i, &drow, &dcol). drow is 0 or 8: the thread's two
 * rows g and g+8, which the A fragment of the RS form shares
 * (docs/hardware.md, "wgmma A fragment"). */
int wgmma_acc_row(int t);  /* 16*(t/32 % 4) + (t%32)/4 */
int wgmma_acc_col(int t);  /* 2*(t%4) */
void wgmma_acc_reg(int i, int *drow, int *dcol); /* 8*((i/2)%2), (i%2) + 8*(i/4) */
/* The 8-bit A fragment of the RS form (m64nNk32, docs/hardware.md, "wgmma
 * A fragment"): register i (0..3), byte b (0..3) of thread t holds row
 * wgmma_acc_row(t) + drow, K 4*(t%4) + dk, with drow = 8*(i%2) and dk =
 * b + 16*(i/2). */
void wgmma_afrag8(int t, int i, int b, int *row, int *k);

int layout_canonical(TileLayout *out, Major major, Swizzle swz, int elem_bits,
                     int mn, int k, KgErr *err);
/* Byte offset (before swizzling) of element (row along MN, col along K) in
 * the tile; add the tile base and apply swizzle_addr for the final address. */
uint32_t layout_offset(const TileLayout *t, int mn, int k);

#endif
