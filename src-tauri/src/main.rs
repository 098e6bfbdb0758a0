// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    let launch = countersign_desktop::Launch::now();
    // Before any thread or GTK: WebKit's renderer is chosen through the environment.
    let rendering = countersign_desktop::rendering::choose();
    // Warnings by default; RUST_LOG=info|debug for more. Nothing logged ever holds a token
    // (tokens only exist as `Sensitive`, whose Debug is "<redacted>").
    let level = match std::env::var("RUST_LOG").as_deref() {
        Ok("trace") => tracing::Level::TRACE,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("info") => tracing::Level::INFO,
        Ok("error") => tracing::Level::ERROR,
        _ => tracing::Level::WARN,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    tracing::info!("drawing: {rendering:?}");
    let result = countersign_desktop::Options::parse(std::env::args().skip(1))
        .and_then(|options| countersign_desktop::run(options, launch));
    if let Err(e) = result {
        eprintln!("countersign: {e}");
        std::process::exit(1);
    }
}
