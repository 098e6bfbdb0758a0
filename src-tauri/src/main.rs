// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use countersign_desktop::rendering;

fn main() {
    // Before any thread or GTK: WebKit's renderer is chosen through the environment.
    let rendering = rendering::choose();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let launch = countersign_desktop::Launch::now();
    // Warnings by default; RUST_LOG=info|debug for more. Nothing logged ever holds a token.
    countersign_core::resident::launch::init_logging();
    tracing::info!("drawing: {rendering:?}");
    let result = countersign_desktop::Options::parse(args)
        .and_then(|options| countersign_desktop::run(options, launch));
    if let Err(e) = result {
        eprintln!("countersign: {e}");
        std::process::exit(1);
    }
}
