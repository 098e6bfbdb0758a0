// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    if let Err(e) = countersign_desktop::run() {
        eprintln!("countersign: {e}");
        std::process::exit(1);
    }
}
