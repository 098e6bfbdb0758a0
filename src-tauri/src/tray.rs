//! The tray icon and the window title: both show how many inputs wait.
//!
//! Menu: Open (rebuilds a closed window), Do not disturb (a check item kept in sync with the UI toggle), Quit. A left click
//! on the icon shows the window. On Linux the tooltip is not rendered by most hosts, so the count
//! also goes into the tray title (the AppIndicator label) and the window title.

use crate::ipc::ShellState;
use crate::Shell;
use tauri::menu::{CheckMenuItem, Menu, MenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Manager, Runtime};

/// The tray icon's id (its presence keeps the app running without a window).
pub const TRAY_ID: &str = "countersign";

/// Handles kept to update the menu later.
struct TrayItems<R: Runtime> {
    dnd: CheckMenuItem<R>,
}

/// Creates the tray icon. Failure (no tray host) is logged by the caller, not fatal.
pub fn install<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<()> {
    let show = MenuItem::with_id(app, "show", "Open Countersign", true, None::<&str>)?;
    let dnd = CheckMenuItem::with_id(app, "dnd", "Do not disturb", true, false, None::<&str>)?;
    let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
    let menu = Menu::with_items(app, &[&show, &dnd, &quit])?;
    let icon = tauri::image::Image::from_bytes(include_bytes!("../../icons/tray.png"))?;
    TrayIconBuilder::with_id(TRAY_ID)
        .icon(icon)
        .tooltip("Countersign")
        .menu(&menu)
        .show_menu_on_left_click(false)
        .on_menu_event(|app, event| match event.id().as_ref() {
            "show" => crate::show_main_window(app),
            "dnd" => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    let shell = app.state::<Shell>();
                    shell.notifier.set_dnd(!shell.notifier.dnd());
                    crate::settings::check_dnd(&app).await;
                    crate::refresh_shell_state(&app, &shell).await;
                });
            }
            "quit" => app.exit(0),
            _ => {}
        })
        .on_tray_icon_event(|tray, event| {
            if let TrayIconEvent::Click {
                button: MouseButton::Left,
                button_state: MouseButtonState::Up,
                ..
            } = event
            {
                crate::show_main_window(tray.app_handle());
            }
        })
        .build(app)?;
    app.manage(TrayItems { dnd });
    Ok(())
}

/// "Countersign — 3 waiting" / "Countersign".
pub fn title(state: &ShellState) -> String {
    match state.pending {
        0 => "Countersign".to_owned(),
        1 => "Countersign — 1 waiting".to_owned(),
        n => format!("Countersign — {n} waiting"),
    }
}

/// Shows the count in the window title, tray tooltip and tray label; syncs the DND check.
pub fn show_state<R: Runtime>(app: &AppHandle<R>, state: &ShellState) {
    let text = title(state);
    if let Some(window) = app.get_webview_window("main") {
        let _ = window.set_title(&text);
    }
    if let Some(tray) = app.tray_by_id(TRAY_ID) {
        let _ = tray.set_tooltip(Some(&text));
        let label = (state.pending > 0).then(|| state.pending.to_string());
        let _ = tray.set_title(label.as_deref());
    }
    if let Some(items) = app.try_state::<TrayItems<R>>() {
        let _ = items.dnd.set_checked(state.dnd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_counts_waiting_inputs() {
        let s = |pending| ShellState {
            pending,
            dnd: false,
            notification_actions: false,
            dnd_scheduled: false,
        };
        assert_eq!(title(&s(0)), "Countersign");
        assert_eq!(title(&s(1)), "Countersign — 1 waiting");
        assert_eq!(title(&s(12)), "Countersign — 12 waiting");
    }
}
