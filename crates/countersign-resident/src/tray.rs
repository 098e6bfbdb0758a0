//! The tray icon: a StatusNotifierItem over D-Bus (ksni, no GTK), with its menu exported as
//! `com.canonical.dbusmenu` at `/MenuBar`, as tray hosts and `.ci/e2e/tray.mjs` drive it.
//!
//! Menu: Open Countersign (starts the window process, or brings its window forward), Do not
//! disturb (a check item, kept in sync with the window's toggle), Quit (ends the resident and
//! every window). A click on the icon opens the window. The title and tooltip say how many
//! inputs wait.

use std::sync::Arc;

use ksni::TrayMethods;
use tokio::sync::mpsc::UnboundedSender;

use crate::Resident;

/// The icon, 64×64 ARGB32 in network byte order, as the StatusNotifierItem spec wants it: the
/// pixels of `icons/tray.png` (`convert icons/tray.png -depth 8 rgba:-`, each RGBA reordered to
/// ARGB), so the resident links no image decoder.
const ICON: &[u8] = include_bytes!("../../../icons/tray-64x64.argb");
const ICON_SIZE: i32 = 64;

/// What a person picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open the window.
    Open,
    /// Toggle do-not-disturb.
    Dnd,
    /// End everything.
    Quit,
}

/// The tray's state (ksni calls `menu`, `title`… again after each [`ksni::Handle::update`]).
pub struct Tray {
    /// Inputs waiting.
    pub pending: u32,
    /// Do-not-disturb by hand.
    pub dnd: bool,
    actions: UnboundedSender<Action>,
}

impl Tray {
    fn pick(&self, action: Action) {
        // The receiver lives as long as the resident; a send after it ended changes nothing.
        let _ = self.actions.send(action);
    }
}

/// "Countersign — 3 waiting" / "Countersign".
pub fn title(pending: u32) -> String {
    match pending {
        0 => "Countersign".to_owned(),
        1 => "Countersign — 1 waiting".to_owned(),
        n => format!("Countersign — {n} waiting"),
    }
}

impl ksni::Tray for Tray {
    fn id(&self) -> String {
        "countersign".into()
    }

    fn title(&self) -> String {
        title(self.pending)
    }

    fn category(&self) -> ksni::Category {
        ksni::Category::Communications
    }

    fn icon_pixmap(&self) -> Vec<ksni::Icon> {
        vec![ksni::Icon {
            width: ICON_SIZE,
            height: ICON_SIZE,
            data: ICON.to_vec(),
        }]
    }

    fn tool_tip(&self) -> ksni::ToolTip {
        ksni::ToolTip {
            title: title(self.pending),
            ..Default::default()
        }
    }

    fn activate(&mut self, _x: i32, _y: i32) {
        self.pick(Action::Open);
    }

    fn menu(&self) -> Vec<ksni::MenuItem<Self>> {
        use ksni::menu::{CheckmarkItem, StandardItem};
        vec![
            StandardItem {
                label: "Open Countersign".into(),
                activate: Box::new(|t: &mut Self| t.pick(Action::Open)),
                ..Default::default()
            }
            .into(),
            CheckmarkItem {
                label: "Do not disturb".into(),
                checked: self.dnd,
                activate: Box::new(|t: &mut Self| t.pick(Action::Dnd)),
                ..Default::default()
            }
            .into(),
            StandardItem {
                label: "Quit".into(),
                activate: Box::new(|t: &mut Self| t.pick(Action::Quit)),
                ..Default::default()
            }
            .into(),
        ]
    }
}

/// Shows the tray icon and carries out what is picked in it. Without a session bus there is no
/// tray (logged): the engine and notifications still run, and `countersign-resident --quit`
/// ends it.
pub async fn show(resident: &Arc<Resident>) {
    let (actions, mut picked) = tokio::sync::mpsc::unbounded_channel();
    let tray = Tray {
        pending: 0,
        dnd: resident.notifier.dnd(),
        actions,
    };
    // A host (the panel) may come later, or never in a test session: serve the item anyway.
    match tray.assume_sni_available(true).spawn().await {
        Ok(handle) => {
            let _ = resident.tray.set(handle);
        }
        Err(e) => {
            tracing::warn!("no tray icon: {e}");
            return;
        }
    }
    let resident = Arc::clone(resident);
    tokio::spawn(async move {
        while let Some(action) = picked.recv().await {
            match action {
                Action::Open => resident.open(None, None),
                Action::Dnd => {
                    resident.notifier.set_dnd(!resident.notifier.dnd());
                    crate::settings::check_dnd(&resident).await;
                    resident.refresh().await;
                }
                Action::Quit => resident.quit(),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_counts_waiting_inputs() {
        assert_eq!(title(0), "Countersign");
        assert_eq!(title(1), "Countersign — 1 waiting");
        assert_eq!(title(12), "Countersign — 12 waiting");
    }

    #[test]
    fn the_icon_is_square_argb32() {
        assert_eq!(ICON.len(), (ICON_SIZE * ICON_SIZE * 4) as usize);
    }
}
