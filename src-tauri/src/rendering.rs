//! How the webview draws on this machine, chosen before GTK and WebKit start.
//!
//! WebKitGTK composites with OpenGL by default (its DMA-BUF renderer and accelerated
//! compositing). Without a GPU (no DRM render node: a VM, a container, Xvfb) Mesa answers with
//! llvmpipe, OpenGL rasterised by the CPU: the same pixels, drawn more slowly, and setting it
//! up is most of the window's first paint. So without a render node the window draws without GL
//! compositing. WebKit still opens an EGL display (it aborts without one); only the compositing
//! path changes. A person's own `WEBKIT_*` settings win, in either direction.

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
