// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use countersign_core::resident::ready;
use countersign_desktop::rendering::{self, Rendering};

fn main() {
    // Before any thread or GTK: WebKit's renderer is chosen through the environment.
    let rendering = rendering::choose();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // Started ahead by the resident (`--ready`): load what can be loaded without a display, give
    // back what the page cache holds, and wait for the request (core::resident::ready).
    let mut gl_ahead = None;
    if args.len() == 1 && args[0] == ready::FLAG {
        if rendering == Rendering::Software {
            gl_ahead = Some(rendering::load_gl_ahead());
        }
        match ready::wait_for_request() {
            Ok(Some(asked)) => args = asked,
            // The resident ended: no window is wanted.
            Ok(None) => std::process::exit(0),
            Err(e) => {
                eprintln!("countersign: {e}");
                std::process::exit(1);
            }
        }
    }
    let launch = countersign_desktop::Launch::now();
    // Warnings by default; RUST_LOG=info|debug for more. Nothing logged ever holds a token.
    countersign_core::resident::launch::init_logging();
    match gl_ahead {
        None => tracing::info!("drawing: {rendering:?}"),
        Some(loaded) => tracing::info!(
            "drawing: {rendering:?}; started ahead, the GL driver {}",
            if loaded {
                "loaded ahead"
            } else {
                "not loaded ahead"
            }
        ),
    }
    let result = countersign_desktop::Options::parse(args)
        .and_then(|options| countersign_desktop::run(options, launch));
    if let Err(e) = result {
        eprintln!("countersign: {e}");
        std::process::exit(1);
    }
}
