//! How the webview draws on this machine, chosen before GTK and WebKit start.
//!
//! WebKitGTK composites with OpenGL by default (its DMA-BUF renderer and accelerated
//! compositing). Without a GPU (no DRM render node: a VM, a container, Xvfb) Mesa answers with
//! llvmpipe, OpenGL rasterised by the CPU: the same pixels, drawn more slowly, and setting it
//! up is most of the window's first paint. Measured on the CI machine under Xvfb (issue 12),
//! the first frame came 174–887 ms after the UI was mounted with GL compositing and 40–66 ms
//! without (README, "Measurements"). So without a render node the window draws without GL compositing. WebKit still
//! opens an EGL display (it aborts without one); only the compositing path changes. A
//! person's own `WEBKIT_*` settings win, in either direction.
//!
//! Opening that EGL display loads Mesa's driver, and with it LLVM (llvmpipe): 30–60 ms of the
//! window's start, in the window process. A window process started ahead
//! ([`countersign_core::resident::ready`]) loads it while it waits ([`load_gl_ahead`]), when
//! there is no GPU: WebKit's own display then finds the driver linked.

use std::path::Path;

/// Where Linux lists its DRM devices; a GPU that can render has a `renderD*` node there.
pub const DRM_DIR: &str = "/dev/dri";

/// The environment WebKit reads for its renderer when there is no GPU: no DMA-BUF renderer, no
/// accelerated compositing (what `HardwareAccelerationPolicy::Never` does, for every webview
/// and before the first one exists).
pub const WITHOUT_GPU: &[(&str, &str)] = &[
    ("WEBKIT_DISABLE_DMABUF_RENDERER", "1"),
    ("WEBKIT_DISABLE_COMPOSITING_MODE", "1"),
];

/// How the window draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// A GPU renders: WebKit's defaults (GL compositing).
    Gpu,
    /// No GPU: software rendering without GL compositing.
    Software,
}

/// What this machine offers: a GPU when `drm_dir` has a render node.
pub fn detect(drm_dir: &Path) -> Rendering {
    let render_node = std::fs::read_dir(drm_dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    });
    if render_node {
        Rendering::Gpu
    } else {
        Rendering::Software
    }
}

/// The variables to set for `rendering`, leaving alone any the environment already has
/// (`is_set` says which).
pub fn settings(
    rendering: Rendering,
    is_set: impl Fn(&str) -> bool,
) -> Vec<(&'static str, &'static str)> {
    match rendering {
        Rendering::Gpu => Vec::new(),
        Rendering::Software => WITHOUT_GPU
            .iter()
            .copied()
            .filter(|(name, _)| !is_set(name))
            .collect(),
    }
}

/// Chooses how the window draws and sets WebKit's environment for it (inherited by its web
/// process). Call first in `main`: the environment is process-wide, so before any thread starts,
/// and before GTK or WebKit read it.
pub fn choose() -> Rendering {
    // Elsewhere the platform's webview (WKWebView, WebView2) picks its own renderer.
    if cfg!(not(target_os = "linux")) {
        return Rendering::Gpu;
    }
    let rendering = detect(Path::new(DRM_DIR));
    for (name, value) in settings(rendering, |name| std::env::var_os(name).is_some()) {
        std::env::set_var(name, value);
    }
    rendering
}

/// Mesa's surfaceless platform (`EGL_MESA_platform_surfaceless`): a display with no window
/// system, the driver and nothing else.
#[cfg(target_os = "linux")]
const EGL_PLATFORM_SURFACELESS_MESA: u32 = 0x31DD;

/// Loads the OpenGL driver WebKit's EGL display will load, ahead: initialises an EGL display on
/// Mesa's surfaceless platform, through the `libEGL` WebKit links (only if it is loaded
/// already), and keeps it, so the driver stays linked (terminated, Mesa would unload it). For a
/// window process started ahead, with [`Rendering::Software`] only: with a GPU this would open
/// its device for as long as the process waits (and can keep a laptop's discrete GPU awake).
/// Costs ~10 MiB RSS (the driver's and LLVM's relocated data); saves their loading in the
/// window's start (README, "Measurements"). `false` when there was nothing to load or it failed:
/// WebKit then loads the driver itself, as on a cold start.
#[cfg(target_os = "linux")]
pub fn load_gl_ahead() -> bool {
    use std::ffi::{c_char, c_void, CStr};
    type GetProcAddress = unsafe extern "C" fn(*const c_char) -> *mut c_void;
    type GetPlatformDisplay = unsafe extern "C" fn(u32, *mut c_void, *const i32) -> *mut c_void;
    type Initialize = unsafe extern "C" fn(*mut c_void, *mut i32, *mut i32) -> u32;
    let lib: &CStr = c"libEGL.so.1";
    // SAFETY: dlopen with RTLD_NOLOAD only returns the handle of a library already loaded (the
    // libEGL WebKit links), or null; nothing runs.
    let egl = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if egl.is_null() {
        return false;
    }
    // SAFETY: a symbol lookup in that handle; null when absent.
    let get_proc = unsafe { libc::dlsym(egl, c"eglGetProcAddress".as_ptr()) };
    let initialize = unsafe { libc::dlsym(egl, c"eglInitialize".as_ptr()) };
    if get_proc.is_null() || initialize.is_null() {
        return false;
    }
    // SAFETY: EGL 1.4's signatures for these entry points (khronos egl.h), called as declared:
    // eglGetProcAddress takes a NUL-terminated name; eglGetPlatformDisplayEXT a platform enum,
    // a native display (none for surfaceless) and an attribute list (none); eglInitialize a
    // display and two optional out-pointers. No pointer they return is dereferenced here.
    unsafe {
        let get_proc: GetProcAddress = std::mem::transmute(get_proc);
        let get_display = get_proc(c"eglGetPlatformDisplayEXT".as_ptr());
        if get_display.is_null() {
            return false;
        }
        let get_display: GetPlatformDisplay = std::mem::transmute(get_display);
        let display = get_display(
            EGL_PLATFORM_SURFACELESS_MESA,
            std::ptr::null_mut(),
            std::ptr::null(),
        );
        if display.is_null() {
            return false;
        }
        let initialize: Initialize = std::mem::transmute(initialize);
        // Kept initialised: the driver stays loaded until the window process ends.
        initialize(display, std::ptr::null_mut(), std::ptr::null_mut()) != 0
    }
}

/// Elsewhere the platform's webview draws: nothing to load.
#[cfg(not(target_os = "linux"))]
pub fn load_gl_ahead() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drm_dir(nodes: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "countersign-drm-{}-{}",
            std::process::id(),
            nodes.join("+")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        for node in nodes {
            std::fs::write(dir.join(node), b"").expect("node");
        }
        dir
    }

    #[test]
    fn a_render_node_means_a_gpu_and_webkit_keeps_its_defaults() {
        let dir = drm_dir(&["card0", "renderD128"]);
        assert_eq!(detect(&dir), Rendering::Gpu);
        assert!(settings(Rendering::Gpu, |_| false).is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn without_a_render_node_gl_compositing_is_off() {
        // A display-only card (no render node) cannot render either.
        let dir = drm_dir(&["card0"]);
        assert_eq!(detect(&dir), Rendering::Software);
        assert_eq!(
            detect(Path::new("/nonexistent/dri")),
            Rendering::Software,
            "no DRM at all (a container) is software rendering"
        );
        assert_eq!(settings(Rendering::Software, |_| false), WITHOUT_GPU);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_persons_own_webkit_setting_wins() {
        let set = settings(Rendering::Software, |name| {
            name == "WEBKIT_DISABLE_COMPOSITING_MODE"
        });
        assert_eq!(set, vec![("WEBKIT_DISABLE_DMABUF_RENDERER", "1")]);
    }
}
