use tauri_build::{AppManifest, Attributes};

/// Our own commands: each gets an `allow-<name>` permission, and only the ones a capability in
/// `capabilities/` grants are callable from the webview.
const COMMANDS: &[&str] = &[
    "app_info",
    "ui_mounted",
    "ui_painted",
    "notify_dnd_set",
    "view_set",
    "view_zoom_set",
    "input_list",
    "input_answer",
    "task_list",
    "task_get",
    "task_cancel",
    "task_adopt",
    "task_adoptable",
    "task_link",
    "server_list",
    "server_add",
    "server_add_stdio",
    "server_update",
    "server_remove",
    "server_check",
    "server_sign_in_plan",
    "server_sign_in",
    "server_sign_out",
    "server_check_cancel",
    "demo_start",
    "gated_list",
    "gated_decide",
    "gated_timeline",
    "gated_questions_list",
    "gated_answer",
    "agents_get",
    "agent_add",
    "agent_remove",
    "host_import_preview",
    "host_import_apply",
    "host_import_undo",
    "rule_remove",
    "tool_list",
    "tool_call",
    "tool_call_answer",
    "audit_list",
    "audit_export",
    "url_open",
    "settings_get",
    "settings_set",
    "resident_restart",
];

fn main() {
    // The package (and so `tauri.conf.json`) is the repository root; the capabilities stay
    // with the shell's sources.
    let attrs = Attributes::new()
        .capabilities_path_pattern("src-tauri/capabilities/**/*")
        .app_manifest(AppManifest::new().commands(COMMANDS));
    if let Err(e) = tauri_build::try_build(attrs) {
        eprintln!("tauri-build failed: {e:#}");
        std::process::exit(1);
    }
}
