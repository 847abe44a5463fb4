//! Linking what ptxas compiled separately (`crate::cubin`) into the cubin the driver
//! loads, with NVIDIA's nvJitLink library (`libnvJitLink.so`, part of every CUDA toolkit
//! since 12.0 and of PyPI's `nvidia-nvjitlink-cu12`), loaded at build time as cudarc
//! loads the driver at run time. The link takes milliseconds (33 ms for `rayon-json`).

use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};

use crate::tools::python_package_dir;
use crate::{BuildError, Result};

/// `nvJitLinkInputType::NVJITLINK_INPUT_CUBIN`: a cubin, relocatable or not.
const INPUT_CUBIN: u32 = 1;

type Handle = *mut c_void;

/// The library, looked for in this order: `$NVJITLINK` (the file), `$CUDA_HOME` and
/// `$CUDA_PATH`'s `lib64`, `/usr/local/cuda/lib64`, then PyPI's `nvidia-nvjitlink-cu12`
/// wheel of `python3` (as ptxas is looked for).
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NVJITLINK").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let toolkits = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from("/usr/local/cuda")]);
    toolkits
        .map(|t| t.join("lib64/libnvJitLink.so"))
        .find(|p| p.is_file())
        .or_else(from_python_wheel)
}

/// The library of PyPI's `nvidia-nvjitlink-cu12` wheel (`libnvJitLink.so.12`).
fn from_python_wheel() -> Option<PathBuf> {
    let lib = python_package_dir("nvidia.nvjitlink")?.join("lib");
    std::fs::read_dir(&lib)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvJitLink.so"))
        })
}

/// The library, loaded: its entry points.
pub(crate) struct NvJitLink {
    create: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> u32,
    add_data: unsafe extern "C" fn(Handle, u32, *const c_void, usize, *const c_char) -> u32,
    complete: unsafe extern "C" fn(Handle) -> u32,
    cubin_size: unsafe extern "C" fn(Handle, *mut usize) -> u32,
    cubin: unsafe extern "C" fn(Handle, *mut c_void) -> u32,
    error_log_size: unsafe extern "C" fn(Handle, *mut usize) -> u32,
    error_log: unsafe extern "C" fn(Handle, *mut c_char) -> u32,
    destroy: unsafe extern "C" fn(*mut Handle) -> u32,
    version: unsafe extern "C" fn(*mut u32, *mut u32) -> u32,
    /// Keeps the functions above loaded.
    _lib: libloading::Library,
}

fn failed(what: String) -> BuildError {
    BuildError::Toolchain(format!("nvJitLink: {what}"))
}

impl NvJitLink {
    /// Loads the library at `path` (from [`find`]).
    pub(crate) fn load(path: &Path) -> Result<NvJitLink> {
        // SAFETY: loading runs the library's initializers; libnvJitLink is NVIDIA's,
        // found where its toolkit or wheel puts it, and has no initializers with
        // preconditions of ours.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| failed(format!("loading {}: {e}", path.display())))?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: each type above is the C prototype of this symbol in
                // `nvJitLink.h` (all results `nvJitLinkResult`, a C enum: u32).
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| failed(format!("{} in {}: {e}", $name, path.display())))?
            };
        }
        Ok(NvJitLink {
            create: sym!("nvJitLinkCreate"),
            add_data: sym!("nvJitLinkAddData"),
            complete: sym!("nvJitLinkComplete"),
            cubin_size: sym!("nvJitLinkGetLinkedCubinSize"),
            cubin: sym!("nvJitLinkGetLinkedCubin"),
            error_log_size: sym!("nvJitLinkGetErrorLogSize"),
            error_log: sym!("nvJitLinkGetErrorLog"),
            destroy: sym!("nvJitLinkDestroy"),
            version: sym!("nvJitLinkVersion"),
            _lib: lib,
        })
    }

    /// The library's version (`major.minor`), part of the cubin cache key.
    pub(crate) fn version(&self) -> Result<String> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two out-pointers to live u32s.
        let r = unsafe { (self.version)(&mut major, &mut minor) };
        if r != 0 {
            return Err(failed(format!("nvJitLinkVersion returned {r}")));
        }
        Ok(format!("nvJitLink {major}.{minor}"))
    }

    /// Links the relocatable `objects` (ptxas `-c`) for `sm` into an executable cubin.
    pub(crate) fn link(&self, objects: &[Vec<u8>], sm: u32) -> Result<Vec<u8>> {
        let arch = CString::new(format!("-arch=sm_{sm}")).expect("no NUL");
        let options = [arch.as_ptr()];
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: `handle` is an out-pointer; `options` holds one NUL-terminated string
        // that outlives the call.
        let r = unsafe { (self.create)(&mut handle, 1, options.as_ptr()) };
        if r != 0 {
            return Err(failed(format!("nvJitLinkCreate({arch:?}) returned {r}")));
        }
        let linked = Linking { api: self, handle }.run(objects);
        // SAFETY: `handle` was created above and is destroyed once.
        unsafe { (self.destroy)(&mut handle) };
        linked
    }
}

/// One link in progress.
struct Linking<'a> {
    api: &'a NvJitLink,
    handle: Handle,
}

impl Linking<'_> {
    fn run(&self, objects: &[Vec<u8>]) -> Result<Vec<u8>> {
        let (api, h) = (self.api, self.handle);
        for (i, object) in objects.iter().enumerate() {
            let name = CString::new(format!("part{i}.o")).expect("no NUL");
            // SAFETY: `h` is a live handle; `object` and `name` outlive the call (the
            // library copies the data).
            let r = unsafe {
                (api.add_data)(
                    h,
                    INPUT_CUBIN,
                    object.as_ptr().cast(),
                    object.len(),
                    name.as_ptr(),
                )
            };
            if r != 0 {
                return Err(failed(format!("adding object {i}: {r}: {}", self.log())));
            }
        }
        // SAFETY: a live handle with its input added.
        let r = unsafe { (api.complete)(h) };
        if r != 0 {
            return Err(failed(format!("linking: {r}: {}", self.log())));
        }
        let mut size = 0usize;
        // SAFETY: a live, completed handle; `size` is an out-pointer.
        let r = unsafe { (api.cubin_size)(h, &mut size) };
        if r != 0 {
            return Err(failed(format!("the linked cubin's size: {r}")));
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has the `size` bytes the library said it writes.
        let r = unsafe { (api.cubin)(h, cubin.as_mut_ptr().cast()) };
        if r != 0 {
            return Err(failed(format!("the linked cubin: {r}")));
        }
        Ok(cubin)
    }

    /// The link's error log, as text.
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: a live handle; `size` is an out-pointer.
        if unsafe { (self.api.error_log_size)(self.handle, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut text = vec![0u8; size];
        // SAFETY: `text` has the `size` bytes (with the NUL) the library writes.
        unsafe { (self.api.error_log)(self.handle, text.as_mut_ptr().cast()) };
        String::from_utf8_lossy(&text)
            .trim_end_matches('\0')
            .trim()
            .to_owned()
    }
}
