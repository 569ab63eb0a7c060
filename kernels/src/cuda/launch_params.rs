// Launch sizes that the kernels' code and the host's launches must agree on,
// defined once. build.rs includes this file too and writes each constant into
// OUT_DIR/launch_params.h, which kernels/cuda includes: the CUDA side needs
// them at compile time (shared-memory array sizes, __launch_bounds__,
// unrolled loops), so they cannot be kernel arguments. Plain `//` comments and
// `pub const u32` items only: build.rs includes this text with include!.

/// Threads of a block of the scan kernels (k_scan_tiles, k_scan_sums): the
/// kernels size their shared memory by it and declare it as launch bound.
pub const SCAN_THREADS: u32 = 512;
/// Elements each scan thread sums in registers before the block scan.
pub const SCAN_PER_THREAD: u32 = 8;
/// Buckets summed by one thread of the MSM's window reduction (k_*_segments):
/// the host sizes the segment buffer by it.
pub const MSM_SEG: u32 = 16;
/// Threads of a block of the bucket-level kernels (k_g*_level0, k_g*_level_n):
/// G1's declare it in their launch bounds.
pub const MSM_LEVEL_THREADS: u32 = 128;
/// Most threads of a block of the NTT passes (k_ntt_pass), 4 elements each:
/// the host sizes a block's shared-memory chunk by it (4x this many
/// elements), the kernel declares it as launch bound with 4 blocks per SM
/// (64 registers; docs/gpu.md run 22).
pub const NTT_THREADS: u32 = 256;
/// Where k_ntt_pass applies a transform's scaling (its `scale_at`): nowhere,
/// on the first pass's loads (by source index), or on the last pass's stores.
pub const NTT_SCALE_NONE: u32 = 0;
/// `k_ntt_shared`'s `scale_at`: scale the elements as they are loaded.
pub const NTT_SCALE_LOAD: u32 = 1;
/// `k_ntt_shared`'s `scale_at`: scale the elements as they are stored.
pub const NTT_SCALE_STORE: u32 = 2;
/// Threads of a block of the constraint evaluation (k_r1cs_eval, and
/// k_r1cs_long's eight warps): k_r1cs_eval declares it as launch bound with
/// 4 blocks per SM (64 registers, where it took 68 and so 3 blocks: a
/// memory-bound gather keeps more loads in flight with more warps).
pub const R1CS_THREADS: u32 = 256;
/// Rounds of blockDim scalars one block of the 0/1 split (k_msm_split)
/// ranks: the kernel sizes its shared rank table by it, the host its grid.
pub const MSM_SPLIT_ROUNDS: u32 = 8;

// Element layouts, in u64 words: the host's device types (gpu/memory.rs) are arrays
// of this many words, and cuzk.cu checks its structs' sizes against them, so
// a layout change on one side fails the build instead of corrupting data.

/// Fr: 4 words (8 x 32-bit limbs on the device).
pub const FR_WORDS: usize = 4;
/// Fq: 6 words (12 limbs).
pub const FQ_WORDS: usize = 6;
/// Fq2: c0 then c1.
pub const FQ2_WORDS: usize = 2 * FQ_WORDS;
/// G1 affine point: x, y over Fq.
pub const G1_AFF_WORDS: usize = 2 * FQ_WORDS;
/// G1 Jacobian point: X, Y, Z over Fq.
pub const G1_JAC_WORDS: usize = 3 * FQ_WORDS;
/// G2 affine point: x, y over Fq2.
pub const G2_AFF_WORDS: usize = 2 * FQ2_WORDS;
/// G2 Jacobian point: X, Y, Z over Fq2.
pub const G2_JAC_WORDS: usize = 3 * FQ2_WORDS;
/// A term of the compiled matrices: variable and coefficient index, u32 each.
pub const TERM_WORDS: usize = 1;
/// Two row ends of the compiled matrices, u32 each.
pub const ROW_ENDS_WORDS: usize = 1;
