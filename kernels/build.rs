//! Build script of cuzk-kernels. Does nothing unless the `cuda` feature is on.
//!
//! With `cuda`:
//! 1. finds nvcc (`NVCC`, then `CUDA_HOME/bin/nvcc`, then PATH) and compiles
//!    cuda/cuzk.cu (which includes the family headers) into one fatbin with
//!    sm_80 and sm_90 machine code plus compute_90 PTX, written to
//!    OUT_DIR/cuzk.fatbin and embedded by src/cuda with include_bytes!;
//!    before that it writes OUT_DIR/launch_params.h from the constants of
//!    src/cuda/launch_params.rs (included below), so the kernels and the
//!    host's launches read the same numbers;
//! 2. when no libcuda.so is found, writes a link-only stub libcuda.so.1
//!    (SONAME libcuda.so.1, every cu* symbol cuda-driver-sys declares, each
//!    returning CUDA_ERROR_NO_DEVICE) into OUT_DIR and adds OUT_DIR to the
//!    linker's search path. The binary then needs the real driver at run time.
//!    The stub is never installed or shipped.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

// The launch and layout constants shared with the kernels (see the file).
include!("src/cuda/launch_params.rs");

/// Every driver entry point cuda-driver-sys 0.3 declares.
const DRIVER_SYMBOLS: &str = "
    cuArray3DCreate_v2 cuArray3DGetDescriptor_v2 cuArrayCreate_v2 cuArrayDestroy
    cuArrayGetDescriptor_v2 cuCtxAttach cuCtxCreate_v2 cuCtxDestroy_v2 cuCtxDetach
    cuCtxDisablePeerAccess cuCtxEnablePeerAccess cuCtxGetApiVersion cuCtxGetCacheConfig
    cuCtxGetCurrent cuCtxGetDevice cuCtxGetFlags cuCtxGetLimit cuCtxGetSharedMemConfig
    cuCtxGetStreamPriorityRange cuCtxPopCurrent_v2 cuCtxPushCurrent_v2 cuCtxSetCacheConfig
    cuCtxSetCurrent cuCtxSetLimit cuCtxSetSharedMemConfig cuCtxSynchronize
    cuDestroyExternalMemory cuDestroyExternalSemaphore cuDeviceCanAccessPeer
    cuDeviceComputeCapability cuDeviceGet cuDeviceGetAttribute cuDeviceGetByPCIBusId
    cuDeviceGetCount cuDeviceGetName cuDeviceGetNvSciSyncAttributes cuDeviceGetP2PAttribute
    cuDeviceGetPCIBusId cuDeviceGetProperties cuDeviceGetUuid cuDevicePrimaryCtxGetState
    cuDevicePrimaryCtxRelease cuDevicePrimaryCtxReset cuDevicePrimaryCtxRetain
    cuDevicePrimaryCtxSetFlags cuDeviceTotalMem_v2 cuDriverGetVersion cuEventCreate
    cuEventDestroy_v2 cuEventElapsedTime cuEventQuery cuEventRecord cuEventSynchronize
    cuExternalMemoryGetMappedBuffer cuExternalMemoryGetMappedMipmappedArray cuFuncGetAttribute
    cuFuncSetAttribute cuFuncSetBlockShape cuFuncSetCacheConfig cuFuncSetSharedMemConfig
    cuFuncSetSharedSize cuGetErrorName cuGetErrorString cuGetExportTable
    cuGraphAddChildGraphNode cuGraphAddDependencies cuGraphAddEmptyNode cuGraphAddHostNode
    cuGraphAddKernelNode cuGraphAddMemcpyNode cuGraphAddMemsetNode cuGraphChildGraphNodeGetGraph
    cuGraphClone cuGraphCreate cuGraphDestroy cuGraphDestroyNode cuGraphExecDestroy
    cuGraphExecHostNodeSetParams cuGraphExecKernelNodeSetParams cuGraphExecMemcpyNodeSetParams
    cuGraphExecMemsetNodeSetParams cuGraphExecUpdate cuGraphGetEdges cuGraphGetNodes
    cuGraphGetRootNodes cuGraphHostNodeGetParams cuGraphHostNodeSetParams cuGraphInstantiate
    cuGraphKernelNodeGetParams cuGraphKernelNodeSetParams cuGraphLaunch
    cuGraphMemcpyNodeGetParams cuGraphMemcpyNodeSetParams cuGraphMemsetNodeGetParams
    cuGraphMemsetNodeSetParams cuGraphNodeFindInClone cuGraphNodeGetDependencies
    cuGraphNodeGetDependentNodes cuGraphNodeGetType cuGraphRemoveDependencies
    cuGraphicsMapResources cuGraphicsResourceGetMappedMipmappedArray
    cuGraphicsResourceGetMappedPointer_v2 cuGraphicsResourceSetMapFlags_v2
    cuGraphicsSubResourceGetMappedArray cuGraphicsUnmapResources cuGraphicsUnregisterResource
    cuImportExternalMemory cuImportExternalSemaphore cuInit cuIpcCloseMemHandle
    cuIpcGetEventHandle cuIpcGetMemHandle cuIpcOpenEventHandle cuIpcOpenMemHandle cuLaunch
    cuLaunchCooperativeKernel cuLaunchCooperativeKernelMultiDevice cuLaunchGrid
    cuLaunchGridAsync cuLaunchHostFunc cuLaunchKernel cuLinkAddData_v2 cuLinkAddFile_v2
    cuLinkComplete cuLinkCreate_v2 cuLinkDestroy cuMemAddressFree cuMemAddressReserve
    cuMemAdvise cuMemAllocHost_v2 cuMemAllocManaged cuMemAllocPitch_v2 cuMemAlloc_v2 cuMemCreate
    cuMemExportToShareableHandle cuMemFreeHost cuMemFree_v2 cuMemGetAccess
    cuMemGetAddressRange_v2 cuMemGetAllocationGranularity cuMemGetAllocationPropertiesFromHandle
    cuMemGetInfo_v2 cuMemHostAlloc cuMemHostGetDevicePointer_v2 cuMemHostGetFlags
    cuMemHostRegister_v2 cuMemHostUnregister cuMemImportFromShareableHandle cuMemMap
    cuMemPrefetchAsync cuMemRangeGetAttribute cuMemRangeGetAttributes cuMemRelease
    cuMemSetAccess cuMemUnmap cuMemcpy cuMemcpy2DAsync_v2 cuMemcpy2DUnaligned_v2 cuMemcpy2D_v2
    cuMemcpy3DAsync_v2 cuMemcpy3DPeer cuMemcpy3DPeerAsync cuMemcpy3D_v2 cuMemcpyAsync
    cuMemcpyAtoA_v2 cuMemcpyAtoD_v2 cuMemcpyAtoHAsync_v2 cuMemcpyAtoH_v2 cuMemcpyDtoA_v2
    cuMemcpyDtoDAsync_v2 cuMemcpyDtoD_v2 cuMemcpyDtoHAsync_v2 cuMemcpyDtoH_v2
    cuMemcpyHtoAAsync_v2 cuMemcpyHtoA_v2 cuMemcpyHtoDAsync_v2 cuMemcpyHtoD_v2 cuMemcpyPeer
    cuMemcpyPeerAsync cuMemsetD16Async cuMemsetD16_v2 cuMemsetD2D16Async cuMemsetD2D16_v2
    cuMemsetD2D32Async cuMemsetD2D32_v2 cuMemsetD2D8Async cuMemsetD2D8_v2 cuMemsetD32Async
    cuMemsetD32_v2 cuMemsetD8Async cuMemsetD8_v2 cuMipmappedArrayCreate cuMipmappedArrayDestroy
    cuMipmappedArrayGetLevel cuModuleGetFunction cuModuleGetGlobal_v2 cuModuleGetSurfRef
    cuModuleGetTexRef cuModuleLoad cuModuleLoadData cuModuleLoadDataEx cuModuleLoadFatBinary
    cuModuleUnload cuOccupancyMaxActiveBlocksPerMultiprocessor
    cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags cuOccupancyMaxPotentialBlockSize
    cuOccupancyMaxPotentialBlockSizeWithFlags cuParamSetSize cuParamSetTexRef cuParamSetf
    cuParamSeti cuParamSetv cuPointerGetAttribute cuPointerGetAttributes cuPointerSetAttribute
    cuProfilerInitialize cuProfilerStart cuProfilerStop cuSignalExternalSemaphoresAsync
    cuStreamAddCallback cuStreamAttachMemAsync cuStreamBatchMemOp cuStreamBeginCapture_v2
    cuStreamCreate cuStreamCreateWithPriority cuStreamDestroy_v2 cuStreamEndCapture
    cuStreamGetCaptureInfo cuStreamGetCtx cuStreamGetFlags cuStreamGetPriority
    cuStreamIsCapturing cuStreamQuery cuStreamSynchronize cuStreamWaitEvent cuStreamWaitValue32
    cuStreamWaitValue64 cuStreamWriteValue32 cuStreamWriteValue64 cuSurfObjectCreate
    cuSurfObjectDestroy cuSurfObjectGetResourceDesc cuSurfRefGetArray cuSurfRefSetArray
    cuTexObjectCreate cuTexObjectDestroy cuTexObjectGetResourceDesc
    cuTexObjectGetResourceViewDesc cuTexObjectGetTextureDesc cuTexRefCreate cuTexRefDestroy
    cuTexRefGetAddressMode cuTexRefGetAddress_v2 cuTexRefGetArray cuTexRefGetBorderColor
    cuTexRefGetFilterMode cuTexRefGetFlags cuTexRefGetFormat cuTexRefGetMaxAnisotropy
    cuTexRefGetMipmapFilterMode cuTexRefGetMipmapLevelBias cuTexRefGetMipmapLevelClamp
    cuTexRefGetMipmappedArray cuTexRefSetAddress2D_v3 cuTexRefSetAddressMode
    cuTexRefSetAddress_v2 cuTexRefSetArray cuTexRefSetBorderColor cuTexRefSetFilterMode
    cuTexRefSetFlags cuTexRefSetFormat cuTexRefSetMaxAnisotropy cuTexRefSetMipmapFilterMode
    cuTexRefSetMipmapLevelBias cuTexRefSetMipmapLevelClamp cuTexRefSetMipmappedArray
    cuThreadExchangeStreamCaptureMode cuWaitExternalSemaphoresAsync
";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=src/cuda/launch_params.rs");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    println!("cargo:rerun-if-env-changed=CUDA_LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=CUZK_CUDA_ARCHS");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    write_launch_params(&out);
    compile_fatbin(&manifest.join("cuda"), &out);
    if !driver_present() {
        make_stub(&out);
    }
}

fn find_nvcc() -> PathBuf {
    if let Some(p) = env::var_os("NVCC") {
        return PathBuf::from(p);
    }
    if let Some(home) = env::var_os("CUDA_HOME") {
        let p = Path::new(&home).join("bin").join("nvcc");
        if p.exists() {
            return p;
        }
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let p = dir.join("nvcc");
            if p.exists() {
                return p;
            }
        }
    }
    for p in ["/usr/local/cuda/bin/nvcc", "/opt/cuda/bin/nvcc"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "feature `cuda` needs nvcc: set NVCC or CUDA_HOME, put nvcc on PATH, \
         or run scripts/install-cuda-toolchain.sh and set NVCC to the path it prints"
    );
}

/// Writes OUT_DIR/launch_params.h: one #define per shared constant.
fn write_launch_params(out: &Path) {
    let params: [(&str, u64); 19] = [
        ("SCAN_THREADS", SCAN_THREADS.into()),
        ("SCAN_PER_THREAD", SCAN_PER_THREAD.into()),
        ("MSM_SEG", MSM_SEG.into()),
        ("MSM_LEVEL_THREADS", MSM_LEVEL_THREADS.into()),
        ("MSM_SPLIT_ROUNDS", MSM_SPLIT_ROUNDS.into()),
        ("NTT_THREADS", NTT_THREADS.into()),
        ("R1CS_THREADS", R1CS_THREADS.into()),
        ("NTT_SCALE_NONE", NTT_SCALE_NONE.into()),
        ("NTT_SCALE_LOAD", NTT_SCALE_LOAD.into()),
        ("NTT_SCALE_STORE", NTT_SCALE_STORE.into()),
        ("FR_WORDS", FR_WORDS as u64),
        ("FQ_WORDS", FQ_WORDS as u64),
        ("FQ2_WORDS", FQ2_WORDS as u64),
        ("G1_AFF_WORDS", G1_AFF_WORDS as u64),
        ("G1_JAC_WORDS", G1_JAC_WORDS as u64),
        ("G2_AFF_WORDS", G2_AFF_WORDS as u64),
        ("G2_JAC_WORDS", G2_JAC_WORDS as u64),
        ("TERM_WORDS", TERM_WORDS as u64),
        ("ROW_ENDS_WORDS", ROW_ENDS_WORDS as u64),
    ];
    let mut text = String::from(
        "// Generated by cuzk-kernels' build.rs from src/cuda/launch_params.rs: edit that file.\n\
         #pragma once\n",
    );
    for (name, value) in params {
        text.push_str(&format!("#define {name} {value}u\n"));
    }
    std::fs::write(out.join("launch_params.h"), text).expect("OUT_DIR is writable");
}

fn compile_fatbin(src_dir: &Path, out: &Path) {
    let nvcc = find_nvcc();
    for entry in std::fs::read_dir(src_dir).expect("kernels/cuda exists") {
        let path = entry.unwrap().path();
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let fatbin = out.join("cuzk.fatbin");
    // CUZK_CUDA_ARCHS=90 builds sm_90 only (quicker local iteration).
    let archs = env::var("CUZK_CUDA_ARCHS").unwrap_or_else(|_| "80,90".to_string());
    let mut cmd = Command::new(&nvcc);
    cmd.arg("-fatbin").arg("-std=c++17").arg("-O3").arg("--threads").arg("0");
    for a in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        cmd.arg(format!("-gencode=arch=compute_{a},code=sm_{a}"));
    }
    cmd.arg("-gencode=arch=compute_90,code=compute_90");
    cmd.arg("-I").arg(out);
    cmd.arg("-o").arg(&fatbin).arg(src_dir.join("cuzk.cu"));
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
    if !status.success() {
        panic!("nvcc failed ({status}) compiling {}", src_dir.join("cuzk.cu").display());
    }
}

/// Is a real libcuda.so where cuda-driver-sys will look?
fn driver_present() -> bool {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("CUDA_LIBRARY_PATH") {
        for d in env::split_paths(&p) {
            dirs.push(d.clone());
            dirs.push(d.join("lib64"));
        }
    }
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/lib64/stubs",
        "/opt/cuda/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/local/nvidia/lib64",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs.iter().any(|d| d.join("libcuda.so").exists())
}

fn make_stub(out: &Path) {
    let c_src = out.join("libcuda_stub.c");
    let mut code = String::from(
        "/* Link-only stub of the CUDA driver, generated by cuzk-kernels' build.rs. Never shipped. */\n",
    );
    for sym in DRIVER_SYMBOLS.split_whitespace() {
        code.push_str(&format!("int {sym}(void) {{ return 100; /* CUDA_ERROR_NO_DEVICE */ }}\n"));
    }
    std::fs::write(&c_src, code).unwrap();
    let so = out.join("libcuda.so");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&so)
        .arg(&c_src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc} to build the libcuda link stub: {e}"));
    if !status.success() {
        panic!("building the libcuda link stub failed ({status})");
    }
    std::fs::copy(&so, out.join("libcuda.so.1")).unwrap();
    println!("cargo:rustc-link-search=native={}", out.display());
    println!(
        "cargo:warning=no libcuda.so found: linking against a stub in OUT_DIR; \
         the binary needs the real driver (libcuda.so.1) to run"
    );
}
